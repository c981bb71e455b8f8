"""The numba backend's backpropagation through time (host side; the jitted loops are in
``train``): the same rules as the reference (``dynlab.backends.reference.bptt``), laid out for
speed.

* One-line cells: the forward and backward loops in NumPy, one BLAS product per step, the
  parameter sums as single products over all stored steps.
* iRNN: the whole forward loop in one jitted call (``train.irnn_forward``: per inner step one
  product s_{k-1} Uᵀ and one fused pass storing φ — and φ' where it is not a function of φ —
  and the next s); the backward loop likewise (``train.irnn_backward``), Ū summed per step in
  cache, W̄ and b̄ per chunk of steps; the inner states are recomputed from h_{m−1}, not stored.
* GRU, LSTM: each step is ONE product [h_{t-1} | x_t | 1] · Wa, the input weights and both
  biases folded into Wa (the GRU's candidate input part W_in x + b_in, outside r ⊙ (…), is a
  small product of its own per step); the tape keeps the augmented rows, so every parameter sum
  of a layer is the product Σ_t [h_{t-1} | x_t | 1]ᵀ ḡ_t.  The LSTM's gates are stored as
  [i | f | o | g].  Each layer's forward and backward loops are one jitted call each; the
  backward pass only reads the tape (a tape can be backpropagated more than once).
* Stacks: forward a layer at a time over the whole sequence, backward from the top layer down.

Tape memory: a tape is a few arrays of T·B·D (·K) floats; ``Workspace`` (passed by
``train_model``) hands the same arrays out again at every step, and without one a pool of arrays
nothing refers to any more (``config.TAPE_POOL_BYTES``) does, so a step does not pay for fresh,
zeroed pages.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading

import numpy as np

from ...activations import ACTIVATION_IDS, dphi_at, phi
from ..reference import cells as ref_cells
from ...errors import DivergenceError
from . import train as kernels
from ..base import Workspace  # noqa: F401  (Workspace: the public one, dynlab.train.backprop's)
from ._arrays import gemm_rows, readonly
from .threads import small_gemm


#: The training passes of each kind are this module's ``forward_*``/``backward_*`` pairs; the numba
#: backend's ``KERNELS`` table says which serves which kind (``dynlab.backends.numba.backend``).


# ============================================================================ tape memory
_CURRENT = threading.local()


def _refcounts(arrays) -> list:
    """``sys.getrefcount`` of each array as seen from here: the list's reference, this loop's
    and the call's own.  ``_FREE`` is what an array referred to by nothing else shows."""
    return [sys.getrefcount(a) for a in arrays]


_FREE = _refcounts([np.empty(0)])[0]


class _Pool:
    """Tape arrays kept for the next tape when no workspace is given (``config.TAPE_POOL_BYTES``).

    An array is handed out again only when nothing but the pool refers to it: not the tape that
    held it, nor a view of it (a view keeps its base alive), nor a caller still holding either,
    so what a caller keeps is never written over, with or without the pool.  Requests from the
    blocks' threads are served under one lock.  The least recently handed-out arrays are
    dropped first when the bytes kept would exceed the budget (an array in use is then only
    forgotten: its user frees it as usual); an array larger than the budget is never kept."""

    def __init__(self):
        self.lock = threading.Lock()
        self.arrays = []            # least recently handed out first

    def empty(self, shape) -> np.ndarray:
        from ... import config

        budget = int(config.TAPE_POOL_BYTES or 0)
        shape = tuple(int(n) for n in shape)
        with self.lock:
            for i, n in enumerate(_refcounts(self.arrays)):
                if n == _FREE and self.arrays[i].shape == shape:
                    a = self.arrays.pop(i)
                    self.arrays.append(a)
                    return a
            a = np.empty(shape)
            if a.nbytes <= budget:
                self.arrays.append(a)
                self._trim(budget)
            return a

    def _trim(self, budget):
        total = sum(a.nbytes for a in self.arrays)
        while total > budget:
            counts = _refcounts(self.arrays)
            free = [i for i, n in enumerate(counts) if n == _FREE]
            i = free[0] if free else 0
            total -= self.arrays.pop(i).nbytes

    def nbytes(self) -> int:
        with self.lock:
            return sum(a.nbytes for a in self.arrays)

    def clear(self):
        with self.lock:
            self.arrays.clear()


_POOL = _Pool()


def release_tape_memory():
    """Let go of the tape arrays kept for reuse by calls without a workspace
    (``config.TAPE_POOL_BYTES``); arrays still referred to stay with their users."""
    _POOL.clear()


def _tape_empty(shape) -> np.ndarray:
    """np.empty(shape) for tape arrays: from this thread's arena when a workspace is in use,
    else from the pool of arrays no longer referred to (``_Pool``)."""
    arena = getattr(_CURRENT, "arena", None)
    return _POOL.empty(shape) if arena is None else arena.empty(shape)


@contextlib.contextmanager
def _arena(arena):
    """Tape arrays requested in this thread come from ``arena`` (None: fresh)."""
    prev = getattr(_CURRENT, "arena", None)
    _CURRENT.arena = arena
    try:
        yield
    finally:
        _CURRENT.arena = prev

# ============================================================================ tape
@dataclasses.dataclass
class Tape:
    """What the forward pass keeps (time-major): states H (T+1, B, D) with H[0] = h_0, inputs
    x (T, B, d), and per step (gated) or per inner step (iRNN, (T, K, B, D)) the pre-activation
    derivative ``dphi`` and the activation ``act``.  The iRNN keeps neither its inner states
    (``S`` is None: the backward pass recomputes s_0 … s_{K−1} of each step from h_{m−1} and
    ``act`` by the forward pass's own operations, so bitwise equal) nor, for tanh and sigmoid,
    ``dphi`` (None: φ' = 1 − a², a(1 − a) from ``act``): each saves a (T, K, B, D) array
    written and read back, the memory traffic that bounds the training step."""

    form: object
    x: np.ndarray
    H: np.ndarray
    act: np.ndarray
    dphi: np.ndarray | None
    S: np.ndarray | None = None
    eta: np.ndarray | None = None

    @property
    def states(self) -> np.ndarray:
        """h_1..h_T as (B, T, D), the layout of ``dynlab.simulate``."""
        return np.swapaxes(self.H[1:], 0, 1)

    @property
    def outputs(self) -> np.ndarray:
        """What the read-out reads, (T+1, B, D): the states themselves."""
        return self.H


def _drive(form, xt, h0a):
    """(the input drives W x_t + b (T, B, D), the state tape H (T+1, B, D) with H[0] = h0) of a
    one-line cell's or an iRNN's forward pass on time-major inputs xt (T, B, d)."""
    T, B, d = xt.shape
    D = form.hidden
    with np.errstate(over="ignore", invalid="ignore"):               # non-finite input: the pass reports it
        cin = np.matmul(xt, form.W.T, out=_tape_empty((T, B, D)))    # (T, B, D)
        cin += form.b
    H = _tape_empty((T + 1, B, D))
    H[0] = h0a
    return cin, H


def forward_irnn(form, xt, h0a) -> Tape:
    """The iRNN's taped forward pass on time-major inputs xt (T, B, d) (``_forward_irnn``)."""
    cin, H = _drive(form, xt, h0a)
    with np.errstate(all="ignore"):
        return _forward_irnn(form, xt, cin, H)


def forward_line(form, xt, h0a) -> Tape:
    """The taped forward pass of a one-line cell on time-major inputs xt (T, B, d)."""
    T, B, d = xt.shape
    D = form.hidden
    cin, H = _drive(form, xt, h0a)
    name, leak = form.act, float(form.leak)
    with np.errstate(all="ignore"):
        a_, c_, R = form.a, form.gain, form.R
        RT = np.ascontiguousarray(R.T)
        Z = _tape_empty((T, B, D))
        A = _tape_empty((T, B, D))
        for t in range(T):
            z = Z[t]
            np.matmul(H[t], RT, out=z)
            z += cin[t]
            phi(name, z, leak, out=A[t])
            H[t + 1] = ref_cells.cell_out(a_, c_, H[t], A[t])
            _check_finite(form, H, t)
        # φ' written over the pre-activations (one tape-sized array saved): tanh's and sigmoid's
        # from A in place, the others a step at a time (their temporaries stay small)
        if name in ("tanh", "sigmoid"):
            dphi_at(name, Z, A, leak, out=Z)
        else:
            for t in range(T):
                dphi_at(name, Z[t], A[t], leak, out=Z[t])
        return Tape(form, xt, H, A, Z)


def _forward_irnn(form, xt, cin, H) -> Tape:
    """The iRNN's taped forward pass, the whole loop in one numba call (``kernels.irnn_forward``):
    per inner step one product s_{k-1} Uᵀ and one fused pass that stores φ (and φ' where it is
    not a function of φ) and the next s on the tape."""
    T, B, D = cin.shape
    K, alpha, sign = form.K, float(form.alpha), float(form.sign)
    eta = np.broadcast_to(form.eta, (T, K)) if form.eta.shape[0] == 1 else form.eta
    prev = form.g0prev
    act, leak = form.act_id, float(form.leak)
    UT = readonly(form.U.T)
    A = _tape_empty((T, K, B, D))
    # φ' of tanh and sigmoid is a function of a = φ(z): the backward pass takes it from A
    Dp = _tape_empty((T, K, B, D)) if act not in (ACTIVATION_IDS["tanh"], ACTIVATION_IDS["sigmoid"]) else None
    eta = readonly(eta, np.float64)
    bad = kernels.irnn_forward(UT, readonly(cin), H, A, np.empty((1, 1, B, D)) if Dp is None else Dp,
                              Dp is not None, eta, alpha, sign, prev, act, leak, np.empty((B, D)), np.empty((B, D)),
                              np.empty((2, B, D)), gemm_rows(B, D, D, small_gemm()))
    if bad >= 0:
        _check_finite(form, H, bad)
    return Tape(form, xt, H, A, Dp, None, eta)


def _check_finite(form, H, t):
    ok = np.isfinite(H[t + 1]).all(axis=1)
    if not ok.all():
        raise DivergenceError(step=t + 1, batch=int(np.argmin(ok)), model=form.kind)

def backward_line(tape, ext):
    """(cotangents of a one-line cell's arrays, ∂L/∂s_0, ∂L/∂s_1) from the explicit cotangents ext."""
    return _backward_gated(tape, ext)[:3]


def _backward_gated(tape, ext, above=None, need_x=False):
    """The one-line cells' backward pass.  ``ext`` (T', B, D) or None: the explicit cotangents
    ∂L/∂h_t of the last T' ≤ T steps; ``above`` (T, B, D) or None: cotangents that reach h_t
    through the next layer of a stack (counted in h̄_t but not in the returned ∂L/∂h_1, a
    cotangent of the dynamical state); ``need_x``: also return the input cotangents
    x̄_t = z̄_t W (T, B, d), else None."""
    form = tape.form
    T, B, D = tape.H.shape[0] - 1, tape.H.shape[1], tape.H.shape[2]
    a, c, R = form.a, form.gain, form.R
    H, A, Dp = tape.H, tape.act, tape.dphi
    Zb = _tape_empty((T, B, D))
    hb = np.zeros((B, D))
    abar = cbar = 0.0
    dh1 = None
    t0 = T if ext is None else T - ext.shape[0]
    for t in range(T - 1, -1, -1):
        if t >= t0:
            hb = hb + ext[t - t0]
        if t == 0:
            dh1 = hb.copy()
        if above is not None:
            hb = hb + above[t]
        abar += float(np.vdot(hb, H[t]))
        cbar += float(np.vdot(hb, A[t]))
        zb = c * hb * Dp[t]
        Zb[t] = zb
        hb = a * hb + zb @ R
    Zf = Zb.reshape(T * B, D)
    grads = {"R": Zf.T @ H[:-1].reshape(T * B, D), "W": Zf.T @ tape.x.reshape(T * B, -1), "b": Zf.sum(axis=0),
             "a": abar, "gain": cbar}
    xbar = (Zf @ form.W).reshape(T, B, -1) if need_x else None
    return grads, hb, dh1, xbar


def _backward_irnn(tape, ext):
    """The iRNN's backward pass: per inner step the fused passes around the product z̄ U
    (``kernels.irnn_back_pre``/``irnn_back_post``); per time step one product
    Ū += Σ_k z̄_kᵀ s_{k-1} over its K inner steps (in cache), and the input drive's cotangent
    Σ_k z̄_k of each step summed into W̄ and b̄ per chunk of steps (in cache), so no (T, K, B, D)
    or (T, B, D) cotangent array is ever stored.  ext: (T', B, D), the last T' steps'."""
    form = tape.form
    T, B, D = tape.H.shape[0] - 1, tape.H.shape[1], tape.H.shape[2]
    K, alpha, sign = form.K, float(form.alpha), float(form.sign)
    U, A, Dp, eta = form.U, tape.act, tape.dphi, tape.eta
    act = form.act_id
    prev = form.g0prev
    X = readonly(tape.x, np.float64)
    d = X.shape[2]
    c = max(1, min(WEIGHT_CHUNK_STEPS, T))
    Ubar = np.zeros((D, D))
    Wbar = np.zeros((D, d))
    bbar = np.zeros(D)
    etab = np.empty((T, K))
    gs = np.empty((T, K))
    hb = np.zeros((B, D))
    dh1 = np.empty((B, D))
    kernels.irnn_backward(readonly(U), tape.H, A, A[:1, :1] if Dp is None else Dp, Dp is not None,
                         readonly(eta), readonly(ext, np.float64), X, alpha, sign, prev, act,
                         np.empty((K, B, D)), np.empty((K, B, D)), np.empty((c, B, D)), Ubar, Wbar, bbar,
                         (np.empty((D, D)), np.empty((D, d))), gs, etab, hb, np.empty((B, D)), np.empty((B, D)),
                         np.empty((B, D)), dh1, gemm_rows(B, D, D, small_gemm()))
    alphab = -float(np.sum(eta * gs))       # ᾱ = −Σ η_{m,k}⟨ḡ_k, s_{k-1}⟩
    grads = {"U": Ubar, "W": Wbar, "b": bbar, "alpha": alphab,
             "eta": etab.sum(axis=0, keepdims=True) if form.eta.shape[0] == 1 else etab}
    return grads, hb, dh1


# ============================================================================ GRU, LSTM and stacks
# The layer's step is ONE product per step: [h_{t-1} | x_t | 1] (B, D+d+1) times a weight matrix
# with the input weights and the biases folded in, so no input drive is precomputed or added and
# the parameter sums are products [H | X | 1]ᵀ G per layer.  The tape keeps the augmented rows
# A_t = [h_{t-1} | x_t | 1] for t = 1 … T+1 (the last with x = 0).


def _augmented(xt, h0, D):
    """[h | x | 1] rows for every step: (T+1, B, D+d+1), h_0 and every x_t in place, h_t to come."""
    T, B, d = xt.shape
    Ha = _tape_empty((T + 1, B, D + d + 1))
    Ha[0, :, :D] = h0
    Ha[:T, :, D:D + d] = xt
    Ha[T, :, D:D + d] = 0.0
    Ha[:, :, D + d] = 1.0
    return Ha


class _AugmentedTape:
    """A gated layer's tape whose rows Ha (T+1, B, D+d+1) hold [h_t | x_{t+1} | 1]."""

    @property
    def H(self) -> np.ndarray:
        """Outputs h_0..h_T, (T+1, B, D) (a view)."""
        return self.Ha[:, :, :self.hidden]

    @property
    def x(self) -> np.ndarray:
        """The layer's inputs x_1..x_T, (T, B, d) (a view)."""
        return self.Ha[:-1, :, self.hidden:-1]


@dataclasses.dataclass
class GRUTape(_AugmentedTape):
    """A GRU layer's forward pass (time-major): the augmented rows Ha (T+1, B, D+d+1) =
    [h_t | x_{t+1} | 1], per step [r | z | q] (T, B, 3D) with q = W_hn h + b_hn, the candidate
    n (T, B, D), and φ'(a_n) (T, B, D; None for tanh: 1 − n² is formed in the backward pass)."""

    form: object
    Ha: np.ndarray
    RZQ: np.ndarray
    N: np.ndarray
    DN: np.ndarray | None

    @property
    def hidden(self) -> int:
        return int(self.N.shape[2])

    @property
    def S(self) -> np.ndarray:
        return self.H


@dataclasses.dataclass
class LSTMTape(_AugmentedTape):
    """An LSTM layer's forward pass (time-major): the augmented rows Ha (T+1, B, D+d+1) =
    [h_t | x_{t+1} | 1], cells C (T+1, B, D), the activated gates A (T, B, 4D) in the order
    [i | f | o | g] (not PyTorch's i, f, g, o: the three sigmoids side by side), TC = φ(c_t)
    (T, B, D) and, for an activation other than tanh, DG = φ'(a_g), DT = φ'(c_t) (else None)."""

    form: object
    Ha: np.ndarray
    C: np.ndarray
    A: np.ndarray
    TC: np.ndarray
    DG: np.ndarray | None
    DT: np.ndarray | None

    @property
    def hidden(self) -> int:
        return int(self.C.shape[2])

    @property
    def S(self) -> np.ndarray:
        """The states s_t = [h_t; c_t], (T+1, B, 2D)."""
        return np.concatenate([self.H, self.C], axis=2)


#: PyTorch's LSTM gate blocks (i, f, g, o) in the tape's order [i | f | o | g].
_LSTM_ORDER = (0, 1, 3, 2)


def _lstm_rows(a, D):
    """The rows (gate blocks) of a PyTorch-ordered (4D, …) array in the tape's order, and back."""
    return np.concatenate([a[k * D:(k + 1) * D] for k in _LSTM_ORDER])


@dataclasses.dataclass
class MapTape:
    """The forward pass of a GRU, an LSTM or a stack: one tape per layer, bottom first
    (``GRUTape``, ``LSTMTape``, or ``Tape`` for a one-line cell); layer ℓ > 1 reads layer
    ℓ − 1's outputs as its inputs x."""

    form: object
    x: np.ndarray
    layers: list

    @property
    def H(self) -> np.ndarray:
        """The dynamical states s_0..s_T, (T+1, B, state_size): every layer's state, bottom first."""
        parts = [lt.S if not isinstance(lt, Tape) else lt.H for lt in self.layers]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=2)

    @property
    def outputs(self) -> np.ndarray:
        """What the read-out reads: the top layer's output h_0..h_T, (T+1, B, D)."""
        return self.layers[-1].H

    @property
    def states(self) -> np.ndarray:
        """s_1..s_T as (B, T, state_size), the layout of ``dynlab.simulate``."""
        return np.swapaxes(self.H[1:], 0, 1)


def _check_finite_rows(form, S, t):
    """Raise ``DivergenceError`` when a row of S (the state after step t) is not finite; one
    cheap sum per step, the row search only when the sum is not finite."""
    if not np.isfinite(S.sum()):
        ok = np.isfinite(S).all(axis=1)
        if not ok.all():
            raise DivergenceError(step=t + 1, batch=int(np.argmin(ok)), model=form.kind)


def forward_layers(form, xt, s0) -> MapTape:
    """The taped forward pass of a GRU, an LSTM or a stack, a layer at a time (module docstring)."""
    layers = form.layers if form.kind == "stack" else (form,)
    offs = np.concatenate([[0], np.cumsum([f.state_size for f in layers])])
    tapes = []
    inp = xt
    with np.errstate(over="ignore", invalid="ignore"):
        for ell, f in enumerate(layers):
            lt = _LAYER_FORWARD[f.kind](f, inp, s0[:, offs[ell]:offs[ell + 1]])
            tapes.append(lt)
            inp = lt.H[1:]
    return MapTape(form, xt, tapes)


def _forward_gru(m, xt, h0):
    """The GRU layer's taped forward pass, the whole loop in one numba call (``kernels.gru_forward``)."""
    T, B, d = xt.shape
    D = m.hidden
    act, leak = m.act_id, float(m.leak)
    Ha = _augmented(xt, h0, D)
    # [h | x | 1] → [a_r | a_z | q]: W_hh's rows, the r, z input weights (none for q: the
    # candidate's input part c_n comes apart, it is not inside r ⊙ (…)), the biases
    Wa = np.zeros((D + d + 1, 3 * D))
    Wa[:D] = m.W_hh.T
    Wa[D:D + d, :2 * D] = m.W_ih[:2 * D].T
    Wa[D + d] = m.b_hh
    Wa[D + d, :2 * D] += m.b_ih[:2 * D]
    RZQ = _tape_empty((T, B, 3 * D))
    N = _tape_empty((T, B, D))
    DN = None if m.act == "tanh" else _tape_empty((T, B, D))   # φ'(a_n), not a function of n
    bad = kernels.gru_forward(Ha, readonly(Wa), readonly(xt, np.float64), readonly(m.W_ih[2 * D:].T),
                             readonly(m.b_ih[2 * D:]), RZQ, N,
                             *_out3(DN), act, leak, np.empty((B, D)),
                             gemm_rows(B, D + d + 1, 3 * D, small_gemm()))
    if bad >= 0:
        _check_finite_rows(m, Ha[bad + 1, :, :D], bad)
    return GRUTape(m, Ha, RZQ, N, DN)


def _forward_lstm(m, xt, s0):
    """The LSTM layer's taped forward pass, the whole loop in one numba call (``kernels.lstm_forward``)."""
    T, B, d = xt.shape
    D = m.hidden
    act, leak = m.act_id, float(m.leak)
    Ha = _augmented(xt, s0[:, :D], D)
    Wa = np.empty((D + d + 1, 4 * D))              # [h | x | 1] → [a_i | a_f | a_o | a_g]
    Wa[:D] = _lstm_rows(m.W_hh, D).T
    Wa[D:D + d] = _lstm_rows(m.W_ih, D).T
    Wa[D + d] = _lstm_rows(m.b_ih + m.b_hh, D)
    C = _tape_empty((T + 1, B, D))
    C[0] = s0[:, D:]
    A = _tape_empty((T, B, 4 * D))
    TC = _tape_empty((T, B, D))
    has_d = m.act != "tanh"                        # φ'(a_g), φ'(c_t) kept unless they are 1 − φ²
    DG = _tape_empty((T, B, D)) if has_d else None
    DT = _tape_empty((T, B, D)) if has_d else None
    none = np.empty((1, 1, 1))
    bad = kernels.lstm_forward(Ha, Wa, C, A, TC, DG if has_d else none, DT if has_d else none, has_d, act, leak,
                              gemm_rows(B, D + d + 1, 4 * D, small_gemm()))
    if bad >= 0:
        _check_finite_rows(m, C[bad + 1], bad)
    return LSTMTape(m, Ha, C, A, TC, DG, DT)


def backward_layers(tape: MapTape, ext):
    """Layer by layer from the top: the input cotangents of layer ℓ (x̄_t = ḡ_t W_ih) are the
    cotangents of layer ℓ − 1's outputs (module docstring)."""
    form = tape.form
    layers = form.layers if form.kind == "stack" else (form,)
    n, Dout = form.state_size, form.hidden
    offs = np.concatenate([[0], np.cumsum([f.state_size for f in layers])])
    on_state = ext.shape[2] == n and n != Dout
    grads, dh0, dh1 = {}, [None] * len(layers), [None] * len(layers)
    above = None
    with np.errstate(over="ignore", invalid="ignore"):
        for ell in range(len(layers) - 1, -1, -1):
            lt = tape.layers[ell]
            if on_state:
                own = ext[:, :, offs[ell]:offs[ell + 1]]
            else:
                own = ext if ell == len(layers) - 1 else None
            need_x = ell > 0
            if isinstance(lt, GRUTape):
                g, dh0[ell], dh1[ell], above = _backward_gru(lt, own, above, need_x)
            elif isinstance(lt, LSTMTape):
                g, dh0[ell], dh1[ell], above = _backward_lstm(lt, own, above, need_x)
            else:
                g, dh0[ell], dh1[ell], above = _backward_gated(lt, own, above, need_x)
            grads.update({f"layer{ell + 1}_{k}": v for k, v in g.items()} if form.kind == "stack" else g)
    cat = (lambda parts: parts[0]) if len(layers) == 1 else (lambda parts: np.concatenate(parts, axis=1))
    return grads, cat(dh0), cat(dh1)


#: Steps per weight-gradient product in the GRU/LSTM backward pass (``kernels._weight_chunk``, the
#: size of the cotangent buffer):
#: a few steps' rows stay in cache for the product (BENCHMARKS.md, ``train-step``).
WEIGHT_CHUNK_STEPS = 8


def _opt3(a):
    """(array, given?) for an optional (T, B, ·) input of the jitted loops, read-only and
    C-contiguous either way (``_arrays.readonly``: one compiled specialisation; a
    layer's slice of state cotangents is copied)."""
    return (_NONE3, False) if a is None else (readonly(a, np.float64), True)


_NONE3 = readonly(np.empty((1, 1, 1)))


def _out3(a):
    """(array, given?) for an optional (T, B, ·) output of the jitted loops."""
    return (np.empty((1, 1, 1)), False) if a is None else (a, True)


def _backward_gru(lt: GRUTape, ext, above, need_x):
    """GRU backward (module docstring); ext (T', B, D) (the last T' steps) or None, above
    (T, B, D) or None; the tape is only read (its cotangents live in a chunk buffer:
    ``kernels.gru_backward_all``)."""
    m = lt.form
    T, B, D = lt.N.shape
    Ha, DN = lt.Ha, lt.DN
    d = Ha.shape[2] - D - 1
    c = max(1, min(WEIGHT_CHUNK_STEPS, T))
    hb = np.zeros((B, D))
    dh1 = np.empty((B, D))
    Pt = np.zeros((D + d + 1, 3 * D))              # Σ_t [h | x | 1]ᵀ [ā_r | ā_z | ā_n r]
    W_in_bar = np.zeros((D, d))
    b_n = np.zeros(D)
    Wx = np.zeros((4 * D, d))                      # [W_ir; W_iz; 0; W_in]: x̄ = ḡ Wx[:3D] + ā_n W_in
    Wx[:2 * D] = m.W_ih[:2 * D]
    Wx[3 * D:] = m.W_ih[2 * D:]
    xbar = np.empty((T, B, d)) if need_x else np.empty((1, 1, 1))
    e, has_e = _opt3(ext)
    ab, has_ab = _opt3(above)
    work = (np.empty((B, D)), np.empty_like(Pt), np.empty((D, d)), np.empty((c * B, d)))
    kernels.gru_backward_all(Ha, lt.RZQ, lt.N, *_opt3(DN),
                            np.ascontiguousarray(m.W_hh), np.ascontiguousarray(lt.x), Wx, e, has_e, ab, has_ab,
                            need_x, hb, dh1, np.empty((c, B, 3 * D)), np.empty((c, B, D)), Pt, W_in_bar, b_n, xbar,
                            work, gemm_rows(B, 3 * D, D, small_gemm()))
    P = Pt.T
    out = {"W_ih": np.concatenate([P[:2 * D, D:D + d], W_in_bar]),
           "W_hh": P[:, :D].copy(),
           "b_ih": np.concatenate([P[:2 * D, D + d], b_n]),
           "b_hh": P[:, D + d].copy()}
    return out, hb, dh1, (xbar if need_x else None)


def _backward_lstm(lt: LSTMTape, ext, above, need_x):
    """LSTM backward (module docstring); ext (T', B, D) on h or (T', B, 2D) on [h; c] (the last
    T' steps), or None; above (T, B, D) on h or None; the tape is only read
    (``kernels.lstm_backward_all``)."""
    m = lt.form
    T, B, D = lt.TC.shape
    Ha, DG, DT = lt.Ha, lt.DG, lt.DT
    d = Ha.shape[2] - D - 1
    c = max(1, min(WEIGHT_CHUNK_STEPS, T))
    W = _lstm_rows(m.W_hh, D)            # (4D, D) in the tape's gate order
    eh, ec = (None, None) if ext is None else ((ext, None) if ext.shape[2] == D else (ext[:, :, :D], ext[:, :, D:]))
    hb = np.zeros((B, D))
    cb = np.zeros((B, D))
    dh1 = np.empty((B, 2 * D))
    Pt = np.zeros((D + d + 1, 4 * D))
    xbar = np.empty((T, B, d)) if need_x else np.empty((1, 1, 1))
    (eh, has_eh), (ec, has_ec), (ab, has_ab) = _opt3(eh), _opt3(ec), _opt3(above)
    (dg, has_d), (dt, _) = _opt3(DG), _opt3(DT)
    kernels.lstm_backward_all(Ha, lt.C, lt.A, lt.TC, dg, dt, has_d, np.ascontiguousarray(W),
                             np.ascontiguousarray(_lstm_rows(m.W_ih, D)), eh, has_eh, ec, has_ec, ab, has_ab, need_x,
                             hb, cb, dh1, np.empty((c, B, 4 * D)), Pt, np.empty_like(Pt), xbar,
                             gemm_rows(B, 4 * D, D, small_gemm()))
    P = _lstm_rows(Pt.T, D)              # [W̄_hh | W̄_ih | b̄], PyTorch's order
    gb = P[:, D + d].copy()
    out = {"W_ih": P[:, D:D + d].copy(), "W_hh": P[:, :D].copy(), "b_ih": gb, "b_hh": gb.copy()}
    return out, np.concatenate([hb, cb], axis=1), dh1, (xbar if need_x else None)


#: The forward pass of one layer of a ``forward_layers`` tape, by kind.
_LAYER_FORWARD = {"gru": _forward_gru, "lstm": _forward_lstm,
                  "cell": lambda f, x, s: forward_line(f, x, np.ascontiguousarray(s)),
                  "irnn": lambda f, x, s: forward_irnn(f, x, np.ascontiguousarray(s))}

"""Exact gradients by reverse mode through time (BPTT) for every discrete model.

The forward pass (``forward``) runs the model over a batch and keeps, time-major, what the
backward pass needs; the backward pass (``backward``) walks the same per-step chain rule as
the closed-form Jacobians of ``dynlab.analysis.jacobians`` — J_t = ∂h_t/∂h_{t-1} — but
applies it to cotangent rows (vector–Jacobian products, batched over B) instead of building
D×D matrices, and accumulates the parameter gradients on the way.

Gated cells, h_t = a h_{t-1} + c φ(z_t), z_t = R h_{t-1} + W x_t + b (RNN, FastRNN,
AntisymmetricRNN, RIN; ``Model.gated_form``), with h̄_t = ∂L/∂h_t:

    z̄_t = c h̄_t ⊙ φ'(z_t),   h̄_{t-1} += a h̄_t + R ᵀ z̄_t,
    R̄ = Σ_t z̄_t h_{t-1}ᵀ,  W̄ = Σ_t z̄_t x_tᵀ,  b̄ = Σ_t z̄_t,  ā = Σ_t ⟨h̄_t, h_{t-1}⟩,  c̄ = Σ_t ⟨h̄_t, φ(z_t)⟩,

then per model: RNN Ū = R̄; RIN (R = U + I) Ū = R̄; Antisymmetric (R = M − Mᵀ − γI, a = 1,
c = ε) M̄ = R̄ − R̄ᵀ, γ̄ = −tr R̄, ε̄ = c̄; FastRNN (a = σ(β), c = σ(α) on the raw gates)
β̄ = ā σ'(β), ᾱ = c̄ σ'(α).

iRNN (eq. 5), at time m with s_{k-1} = g_{k-1} + σ h_{m-1}, z_k = U s_{k-1} + W x_m + b,
g_k = g_{k-1} + η_{m,k}(φ(z_k) − α s_{k-1}), h_m = g_K; backwards over k = K … 1 from ḡ_K = h̄_m:

    η̄_{m,k} = ⟨ḡ_k, φ(z_k) − α s_{k-1}⟩,  ᾱ −= η_{m,k}⟨ḡ_k, s_{k-1}⟩,
    z̄_k = η_{m,k} ḡ_k ⊙ φ'(z_k),  s̄ = Uᵀ z̄_k − α η_{m,k} ḡ_k,
    ḡ_{k-1} = ḡ_k + s̄,  h̄_{m-1} += σ s̄  (+ ḡ_0 when g_0 = h_{m-1}),
    Ū = Σ_{m,k} z̄_k s_{k-1}ᵀ;  low rank U = I + V H:  V̄ = Ū Hᵀ,  H̄ = Vᵀ Ū;  the paper's eq. 9
    (P = U applied to the whole argument of φ): the chain rule of ``irnn_param_grads``.

η's gradient takes η's own shape (scalar: Σ_{m,k}; (K,): Σ_m; (T, K): as is).  The big
parameter sums (R̄, Ū, W̄) are single BLAS products over all stored steps.

GRU (PyTorch's gates r, z, n; ``dynlab.models.gru_lstm``), with a_· the pre-activations,
q = W_hn h_{t-1} + b_hn, n = φ(a_n), h_t = n + z ⊙ (h_{t-1} − n); from h̄_t:

    ā_n = h̄_t ⊙ (1 − z) ⊙ φ'(a_n),   ā_z = h̄_t ⊙ (h_{t-1} − n) ⊙ z(1 − z),   ā_r = ā_n ⊙ q ⊙ r(1 − r),
    ḡ^x_t = [ā_r | ā_z | ā_n]  (cotangent of W_ih x + b_ih),   ḡ^h_t = [ā_r | ā_z | ā_n ⊙ r]  (of W_hh h + b_hh),
    h̄_{t-1} += h̄_t ⊙ z + ḡ^h_t W_hh,
    W̄_ih = Σ_t ḡ^xᵀ_t x_t,  b̄_ih = Σ_t ḡ^x_t,  W̄_hh = Σ_t ḡ^hᵀ_t h_{t-1},  b̄_hh = Σ_t ḡ^h_t.

LSTM (gates i, f, g, o; state s = [h; c]), with c_t = f ⊙ c_{t-1} + i ⊙ g, h_t = o ⊙ φ(c_t);
from h̄_t and c̄_t:

    ā_o = h̄_t ⊙ φ(c_t) ⊙ o(1 − o),   c̄' = c̄_t + h̄_t ⊙ o ⊙ φ'(c_t),
    ā_i = c̄' ⊙ g ⊙ i(1 − i),   ā_f = c̄' ⊙ c_{t-1} ⊙ f(1 − f),   ā_g = c̄' ⊙ i ⊙ φ'(a_g),
    ḡ_t = [ā_i | ā_f | ā_g | ā_o],   c̄_{t-1} += c̄' ⊙ f,   h̄_{t-1} += ḡ_t W_hh,
    W̄_ih = Σ_t ḡᵀ_t x_t,  W̄_hh = Σ_t ḡᵀ_t h_{t-1},  b̄_ih = b̄_hh = Σ_t ḡ_t.

The read-out reads the output h (``model.output_slice``: an LSTM's h, not c), so the loss's
cotangents enter h̄_t alone; h_0 and its gradient are the whole state [h_0; c_0].

Layout (GRU, LSTM): each step is ONE product [h_{t-1} | x_t | 1] · Wa, the input weights and
both biases folded into Wa (the GRU's candidate input part W_in x + b_in, outside r ⊙ (…), is a
small product of its own per step, not kept); the tape keeps the augmented rows, so every
parameter sum of a layer is the product Σ_t [h_{t-1} | x_t | 1]ᵀ ḡ_t.  The LSTM's gates are
stored as [i | f | o | g].  Each layer's forward and backward loops are one Numba call each
(``dynlab.train._fused``): per step the product and one fused element-wise pass (gates, cell
update, tape entries; backwards, the whole step's arithmetic).  The backward pass only reads
the tape: the cotangents of a chunk of steps go to a small buffer and are summed into the
parameter gradients (and the input cotangents x̄) while in cache, so a tape can be
backpropagated more than once and no tape-sized array is written backwards.

Stacks (``dynlab.models.stack``: layer ℓ reads layer ℓ − 1's output at the same step) run
forward a layer at a time over the whole sequence and backward from the top layer down: layer
ℓ's input cotangents

    x̄^(ℓ)_t = ḡ^x_t W_ih    (GRU, LSTM: ḡ_t W_ih;  one-line cells: z̄_t W)

are the cotangents of layer ℓ − 1's outputs h^(ℓ−1)_t, added to its h̄_t.  Parameters are
named ``layer{ℓ}_<name>``; ∂L/∂h_0 is every layer's ∂L/∂s^(ℓ)_0, bottom first.  The returned
∂L/∂h_1 is the cotangent of the dynamical state s_1 (what ∂L/∂h_0 = (∂L/∂h_1) J_1 needs, J_1
the stack's step Jacobian): it counts the paths from s_1 through the steps after the first,
not the path from layer ℓ − 1 into layer ℓ within step 1 (that is part of J_1).

The read-out y_t = W_out h_t + b_out and the losses (``LOSSES``):

    mse      L = mean_{b,c} (y_T − target)²                 target (B, C)
    mse-seq  L = mean_{b,t,c} (y_t − target_t)²             target (B, T, C)
    ce       L = mean_b −log softmax(y_T)[label]             target (B,) int
    ce-seq   L = mean_{b,t} −log softmax(y_t)[label_t]       target (B, T) int (copy task)

Every gradient is checked against central finite differences in tests/test_backprop.py and
tests/test_backprop_gated.py, and the GRU's, LSTM's and stacks' also against PyTorch's autograd
(tests/test_backprop_gated.py, with a committed fixture from tests/fixtures/make_torch_bptt.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading

import numpy as np

from .._blas import blas_threads, small_gemm
from . import _fused
from ..activations import ACTIVATION_IDS, dphi, phi
from ..errors import DivergenceError, ParameterError
from ..kernels import gemm_rows, readonly
from ..models import CTRNN, GRU, IRNN, LSTM, RIN, RNN, AntisymmetricRNN, FastRNN, Model, Stack

LOSSES = ("mse", "mse-seq", "ce", "ce-seq")
#: Parameters of the read-out layer, trained with the recurrent model.
READOUT = ("W_out", "b_out")


# ============================================================================ tape memory
class Workspace:
    """Tape memory that ``loss_and_grads(..., workspace=ws)`` reuses from one call to the next.

    A tape is a few arrays of T·B·D (·K) floats; allocated afresh at every training step, each
    is new memory from the OS, zeroed and page-faulted in as it is written — which measured
    10–40 % of a step (more, and more erratic, once other allocations have fragmented memory:
    issue 20, BENCHMARKS.md).  ``train_model`` passes one workspace to every step, so the tape
    of step i + 1 is written over that of step i.  The arrays of a call's ``info["tape"]`` are
    therefore valid only until the next call with the same workspace; nothing else returned
    (gradients, ∂L/∂h_0, ∂L/∂h_1, outputs) lives in it.  One arena per block of sequences.
    (Without a workspace, a tape's arrays come from a pool of arrays that nothing refers to any
    more, ``config.TAPE_POOL_BYTES``: the same reuse, but only once the caller has let go of
    the previous tape.)
    """

    def __init__(self):
        self.arenas = []

    def arena(self, i: int) -> "_Arena":
        while len(self.arenas) <= i:
            self.arenas.append(_Arena())
        return self.arenas[i]

    def start(self):
        """A new call: every arena hands out its arrays again from the first."""
        for a in self.arenas:
            a.i = 0


class _Arena:
    """The i-th tape array requested in a call is the one requested i-th in the call before,
    when its shape is the same (the passes request them in a fixed order)."""

    def __init__(self):
        self.arrays = []
        self.i = 0

    def empty(self, shape) -> np.ndarray:
        shape = tuple(int(n) for n in shape)
        if self.i < len(self.arrays) and self.arrays[self.i].shape == shape:
            a = self.arrays[self.i]
        else:
            a = np.empty(shape)
            if self.i < len(self.arrays):
                self.arrays[self.i] = a
            else:
                self.arrays.append(a)
        self.i += 1
        return a


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
        from .. import config

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


# ============================================================================ parameters
def param_names(model: Model) -> tuple[str, ...]:
    """Names of the model's trainable parameters, in the order ``model.params()`` lists them."""
    _check_trainable(model)
    return tuple(model.params())


def _check_trainable(model):
    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model, got {type(model).__name__}")
    if isinstance(model, CTRNN):
        raise ParameterError("model", "BPTT training covers the discrete models (rnn, fastrnn, antisymmetric, "
                                      "rin, irnn, gru, lstm, stack); a ctrnn has no discrete backward pass here")
    if isinstance(model, Stack):
        for ell, layer in enumerate(model.layers, start=1):
            if not isinstance(layer, _LAYERS):
                raise ParameterError("model", f"layer {ell} of the stack is a {layer.name!r}; the backward pass of a "
                                              f"stack covers layers rnn, fastrnn, antisymmetric, rin, gru, lstm")
        return
    if not isinstance(model, (IRNN, RNN, FastRNN, AntisymmetricRNN, RIN, GRU, LSTM)):
        raise ParameterError("model", f"no backward pass for model {model.name!r}")


#: The layers a ``Stack`` may have for the backward pass (the one-line cells, GRU, LSTM).
_LAYERS = (RNN, FastRNN, AntisymmetricRNN, RIN, GRU, LSTM)


def with_params(model: Model, params: dict) -> Model:
    """A copy of ``model`` with the named parameters replaced (validated again).

    Keys not among the model's parameters (the read-out, h0) are ignored.  A stack's
    ``layer{ℓ}_<name>`` keys replace that layer's parameter (each layer validated as a model).
    """
    if isinstance(model, Stack):
        layers = list(model.layers)
        names = model.params()
        for ell, layer in enumerate(layers, start=1):
            head = f"layer{ell}_"
            mine = {k[len(head):]: v for k, v in params.items() if k.startswith(head) and k in names}
            if mine:
                layers[ell - 1] = with_params(layer, mine)
        return dataclasses.replace(model, layers=tuple(layers))
    own = {k: v for k, v in params.items() if k in model.params()}
    if isinstance(model, IRNN) and model.V is not None:
        own.setdefault("V", model.V)
        own.setdefault("H", model.H)
        own["U"] = None
    if "eta" in own:
        e = np.asarray(own["eta"], dtype=np.float64)
        own["eta"] = float(e) if e.ndim == 0 else e
    for k in ("alpha", "beta", "eps", "gamma"):
        if k in own:
            own[k] = float(np.asarray(own[k]))
    return model.replace(**own)


# ============================================================================ tape
@dataclasses.dataclass
class Tape:
    """What the forward pass keeps (time-major): states H (T+1, B, D) with H[0] = h_0, inputs
    x (T, B, d), and per step (gated) or per inner step (iRNN, (T, K, B, D)) the pre-activation
    derivative ``dphi`` and the activation ``act``.  The iRNN keeps neither its inner states
    (``S`` is None: the backward pass recomputes s_0 … s_{K−1} of each step from h_{m−1} and
    ``act`` by the forward pass's own operations, so bitwise equal) nor, for tanh and sigmoid,
    ``dphi`` (None: φ' = 1 − a², a(1 − a) from ``act``): each saves a (T, K, B, D) array
    written and read back, the memory traffic that bounded the training step (issue 20)."""

    model: Model
    x: np.ndarray
    H: np.ndarray
    act: np.ndarray
    dphi: np.ndarray | None
    S: np.ndarray | None = None
    eta: np.ndarray | None = None
    #: ∂L/∂R for the matrix R multiplying h_{t-1} (or s) inside φ, set by ``backward``
    dL_dWr: np.ndarray | None = None

    @property
    def states(self) -> np.ndarray:
        """h_1..h_T as (B, T, D), the layout of ``dynlab.simulate``."""
        return np.swapaxes(self.H[1:], 0, 1)

    @property
    def outputs(self) -> np.ndarray:
        """What the read-out reads, (T+1, B, D): the states themselves."""
        return self.H


def _as_batch(model, x, h0):
    from ..simulation import check_h0, check_input

    xa, _ = check_input(x, model.inputs)
    h0a = check_h0(h0, xa.shape[0], model.state_size)
    return xa, h0a


@blas_threads("TRAIN_BLAS_THREADS")
def forward(model: Model, x, h0=None) -> Tape:
    """Run ``model`` over x (B, T, d) from h0 (B, n) (zeros by default), keeping the tape.

    n is ``model.state_size`` (an LSTM's [h; c], every layer of a stack).  The states equal
    ``dynlab.simulate``'s (the same update; tested to 1e-14).  A non-finite state raises
    ``DivergenceError`` naming the step.  GRU, LSTM and stacks return a ``MapTape`` (one tape
    per layer; ``H`` the whole states, ``outputs`` the read-out's h).
    """
    _check_trainable(model)
    xa, h0a = _as_batch(model, x, h0)
    xt = np.ascontiguousarray(np.swapaxes(xa, 0, 1))           # (T, B, d)
    if isinstance(model, (GRU, LSTM, Stack)):
        return _forward_map(model, xt, h0a)
    return _forward_cell(model, xt, h0a)


def _forward_cell(model, xt, h0a) -> Tape:
    """The taped forward pass of a one-line cell or an iRNN on time-major inputs xt (T, B, d)."""
    T, B, d = xt.shape
    D = model.hidden
    cin = np.matmul(xt, model.W.T, out=_tape_empty((T, B, D)))    # (T, B, D)
    cin += model.b
    H = _tape_empty((T + 1, B, D))
    H[0] = h0a
    name, leak = model.activation, float(model.leak)
    with np.errstate(all="ignore"):
        if isinstance(model, IRNN):
            return _forward_irnn(model, xt, cin, H)
        a_, c_, R = model.gated_form()
        RT = np.ascontiguousarray(R.T)
        Z = _tape_empty((T, B, D))
        A = _tape_empty((T, B, D))
        for t in range(T):
            z = Z[t]
            np.matmul(H[t], RT, out=z)
            z += cin[t]
            _phi_into(name, z, leak, A[t])
            np.multiply(A[t], c_, out=H[t + 1])
            if a_ != 0.0:
                H[t + 1] += a_ * H[t]
            _check_finite(model, H, t)
        return Tape(model, xt, H, A, _dphi_inplace(name, Z, A, leak))


def _forward_irnn(model, xt, cin, H) -> Tape:
    """The iRNN's taped forward pass, the whole loop in one numba call (``_fused.irnn_forward``):
    per inner step one product s_{k-1} Uᵀ and one fused pass that stores φ (and φ' where it is
    not a function of φ) and the next s on the tape."""
    T, B, D = cin.shape
    K, alpha, sign = model.K, float(model.alpha), float(model.sign)
    eta = model.eta_table(T)
    eta = np.broadcast_to(eta, (T, K)) if eta.shape[0] == 1 else eta
    prev = model.g0 == "previous"
    act, leak = ACTIVATION_IDS[model.activation], float(model.leak)
    UT = readonly(model.U.T)
    A = _tape_empty((T, K, B, D))
    # φ' of tanh and sigmoid is a function of a = φ(z): the backward pass takes it from A
    Dp = _tape_empty((T, K, B, D)) if act not in (ACTIVATION_IDS["tanh"], ACTIVATION_IDS["sigmoid"]) else None
    eta = readonly(eta, np.float64)
    bad = _fused.irnn_forward(UT, readonly(cin), H, A, np.empty((1, 1, B, D)) if Dp is None else Dp,
                              Dp is not None, eta, alpha, sign, prev, act, leak, np.empty((B, D)), np.empty((B, D)),
                              np.empty((2, B, D)), gemm_rows(B, D, D, small_gemm()))
    if bad >= 0:
        _check_finite(model, H, bad)
    return Tape(model, xt, H, A, Dp, None, eta)


def _dphi_inplace(name, Z, A, leak):
    """φ'(z) written over the pre-activations Z (A = φ(Z)), saving one tape-sized array:
    tanh 1 − A², sigmoid A(1 − A), the rest from Z (right derivative at kinks)."""
    if name == "tanh":
        np.multiply(A, A, out=Z)
        np.subtract(1.0, Z, out=Z)
    elif name == "sigmoid":
        np.subtract(1.0, A, out=Z)
        Z *= A
    else:
        for i in range(Z.shape[0]):  # a time step at a time: temporaries stay small
            Z[i] = dphi(name, Z[i], leak)
    return Z


def _phi_into(name, z, leak, out):
    """out[...] = φ(z) without a temporary for the common activations."""
    if name == "tanh":
        np.tanh(z, out=out)
    elif name == "relu":
        np.maximum(z, 0.0, out=out)
    else:
        out[...] = phi(name, z, leak)


def _check_finite(model, H, t):
    ok = np.isfinite(H[t + 1]).all(axis=1)
    if not ok.all():
        raise DivergenceError(step=t + 1, batch=int(np.argmin(ok)), model=model.name)


# ============================================================================ backward
@blas_threads("TRAIN_BLAS_THREADS")
def backward(tape: Tape, dL_dH) -> tuple[dict, np.ndarray, np.ndarray]:
    """Vector–Jacobian products through time.

    Parameters
    ----------
    tape : Tape from ``forward``
    dL_dH : (T, B, D) array — the explicit loss cotangents ∂L/∂h_t (zero where the loss does
        not read h_t).  For a GRU, an LSTM or a stack, cotangents of the outputs (T, B, hidden),
        or of the whole states (T, B, state_size).  A shorter array (T', B, ·), 1 ≤ T' ≤ T,
        holds the cotangents of the last T' steps only, the earlier ones being zero: a loss at
        the end passes (1, B, ·), and no (T, B, ·) array of zeros is made or read.

    Returns
    -------
    (grads, dL_dh0, dL_dh1): the model parameters' gradients by name (shapes as the
    parameters), ∂L/∂h_0 (B, n) and the total ∂L/∂h_1 (B, n), n = ``state_size``.
    """
    if isinstance(tape, MapTape):
        return _backward_map(tape, np.asarray(dL_dH, dtype=np.float64))
    model = tape.model
    dL_dH = np.asarray(dL_dH, dtype=np.float64)
    _check_cotangents(dL_dH, tape.H.shape[0] - 1, tape.H.shape[1], (tape.H.shape[2],))
    if isinstance(model, IRNN):
        return _backward_irnn(tape, dL_dH)
    return _backward_gated(tape, dL_dH)[:3]


def _check_cotangents(ext, T, B, widths):
    """ParameterError naming dL_dH unless ext is (T', B, w), 1 ≤ T' ≤ T, w in ``widths``."""
    if ext.ndim != 3 or not 1 <= ext.shape[0] <= T or ext.shape[1] != B or ext.shape[2] not in widths:
        want = " or ".join(f"({T}, {B}, {w})" for w in widths)
        raise ParameterError("dL_dH", f"must have shape {want} (or fewer steps: the last ones), got {ext.shape}")


def _backward_gated(tape, ext, above=None, need_x=False):
    """The one-line cells' backward pass.  ``ext`` (T', B, D) or None: the explicit cotangents
    ∂L/∂h_t of the last T' ≤ T steps; ``above`` (T, B, D) or None: cotangents that reach h_t
    through the next layer of a stack (counted in h̄_t but not in the returned ∂L/∂h_1, a
    cotangent of the dynamical state); ``need_x``: also return the input cotangents
    x̄_t = z̄_t W (T, B, d), else None."""
    model = tape.model
    T, B, D = tape.H.shape[0] - 1, tape.H.shape[1], tape.H.shape[2]
    a, c, R = model.gated_form()
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
    Rbar = Zf.T @ H[:-1].reshape(T * B, D)
    tape.dL_dWr = Rbar
    grads = {"W": Zf.T @ tape.x.reshape(T * B, -1), "b": Zf.sum(axis=0)}
    if isinstance(model, AntisymmetricRNN):
        grads.update(M=Rbar - Rbar.T, eps=cbar, gamma=-float(np.trace(Rbar)))
    elif isinstance(model, FastRNN):
        sa, sb = _sig(model.alpha), _sig(model.beta)
        grads.update(U=Rbar, alpha=cbar * sa * (1 - sa), beta=abar * sb * (1 - sb))
    else:  # RNN, RIN (R = U + I)
        grads["U"] = Rbar
    xbar = (Zf @ model.W).reshape(T, B, -1) if need_x else None
    return {k: grads[k] for k in model.params()}, hb, dh1, xbar


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v)) if v >= 0 else np.exp(v) / (1.0 + np.exp(v))


def _backward_irnn(tape, ext):
    """The iRNN's backward pass: per inner step the fused passes around the product z̄ U
    (``_fused.irnn_back_pre``/``irnn_back_post``); per time step one product
    Ū += Σ_k z̄_kᵀ s_{k-1} over its K inner steps (in cache), and the input drive's cotangent
    Σ_k z̄_k of each step summed into W̄ and b̄ per chunk of steps (in cache), so no (T, K, B, D)
    or (T, B, D) cotangent array is ever stored.  ext: (T', B, D), the last T' steps'."""
    model = tape.model
    T, B, D = tape.H.shape[0] - 1, tape.H.shape[1], tape.H.shape[2]
    K, alpha, sign = model.K, float(model.alpha), float(model.sign)
    U, A, Dp, eta = model.U, tape.act, tape.dphi, tape.eta
    act = ACTIVATION_IDS[model.activation]
    prev = model.g0 == "previous"
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
    _fused.irnn_backward(readonly(U), tape.H, A, A[:1, :1] if Dp is None else Dp, Dp is not None,
                         readonly(eta), readonly(ext, np.float64), X, alpha, sign, prev, act,
                         np.empty((K, B, D)), np.empty((K, B, D)), np.empty((c, B, D)), Ubar, Wbar, bbar,
                         (np.empty((D, D)), np.empty((D, d))), gs, etab, hb, np.empty((B, D)), np.empty((B, D)),
                         np.empty((B, D)), dh1, gemm_rows(B, D, D, small_gemm()))
    alphab = -float(np.sum(eta * gs))       # ᾱ = −Σ η_{m,k}⟨ḡ_k, s_{k-1}⟩
    tape.dL_dWr = Ubar
    grads = irnn_param_grads(model, Ubar, Wbar, bbar)
    grads["alpha"] = alphab
    e0 = np.asarray(model.eta)
    grads["eta"] = float(etab.sum()) if e0.ndim == 0 else (etab.sum(axis=0) if e0.ndim == 1 else
                                                            (etab.sum(axis=0, keepdims=True) if e0.shape[0] == 1
                                                             else etab))
    return {k: grads[k] for k in model.params()}, hb, dh1


def irnn_param_grads(model, Ubar, Wbar, bbar) -> dict:
    """The iRNN's parameter gradients from those of the matrices its step uses (``model.U``,
    ``model.W``, ``model.b``): Ū, W̄, b̄ → the gradients of ``model.params()``' U or V, H, W, b.

    Eq. 5 (``P="I"``): dense U as is; low rank U = I + V H: V̄ = Ū Hᵀ, H̄ = Vᵀ Ū.
    Eq. 9 (``P="U"``), with the paper's U_p (= I + V H or dense), W_p, b_p and the step's
    U = U_p U_p, W = U_p W_p, b = U_p b_p:

        Ū_p = Ū U_pᵀ + U_pᵀ Ū + W̄ W_pᵀ + b̄ b_pᵀ,   W̄_p = U_pᵀ W̄,   b̄_p = U_pᵀ b̄,

    then V̄ = Ū_p Hᵀ, H̄ = Vᵀ Ū_p for the low-rank U_p.  (Checked against central differences in
    tests/test_backprop.py.)
    """
    if model.P == "U":
        Up, Wp, bp = model.P_matrix, model.W_param, model.b_param
        Ubar = Ubar @ Up.T + Up.T @ Ubar + Wbar @ Wp.T + np.outer(bbar, bp)
        Wbar, bbar = Up.T @ Wbar, Up.T @ bbar
    grads = {"W": Wbar, "b": bbar}
    if model.V is not None:
        grads["V"] = Ubar @ model.H.T
        grads["H"] = model.V.T @ Ubar
    else:
        grads["U"] = Ubar
    return grads


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


@dataclasses.dataclass
class GRUTape:
    """A GRU layer's forward pass (time-major): the augmented rows Ha (T+1, B, D+d+1) =
    [h_t | x_{t+1} | 1], per step [r | z | q] (T, B, 3D) with q = W_hn h + b_hn, the candidate
    n (T, B, D), and φ'(a_n) (T, B, D; None for tanh: 1 − n² is formed in the backward pass)."""

    model: Model
    Ha: np.ndarray
    RZQ: np.ndarray
    N: np.ndarray
    DN: np.ndarray | None

    @property
    def H(self) -> np.ndarray:
        """States h_0..h_T, (T+1, B, D) (a view)."""
        return self.Ha[:, :, :self.N.shape[2]]

    @property
    def x(self) -> np.ndarray:
        """The layer's inputs x_1..x_T, (T, B, d) (a view)."""
        D = self.N.shape[2]
        return self.Ha[:-1, :, D:-1]

    @property
    def S(self) -> np.ndarray:
        return self.H


@dataclasses.dataclass
class LSTMTape:
    """An LSTM layer's forward pass (time-major): the augmented rows Ha (T+1, B, D+d+1) =
    [h_t | x_{t+1} | 1], cells C (T+1, B, D), the activated gates A (T, B, 4D) in the order
    [i | f | o | g] (not PyTorch's i, f, g, o: the three sigmoids side by side), TC = φ(c_t)
    (T, B, D) and, for an activation other than tanh, DG = φ'(a_g), DT = φ'(c_t) (else None)."""

    model: Model
    Ha: np.ndarray
    C: np.ndarray
    A: np.ndarray
    TC: np.ndarray
    DG: np.ndarray | None
    DT: np.ndarray | None

    @property
    def H(self) -> np.ndarray:
        """Outputs h_0..h_T, (T+1, B, D) (a view)."""
        return self.Ha[:, :, :self.C.shape[2]]

    @property
    def x(self) -> np.ndarray:
        D = self.C.shape[2]
        return self.Ha[:-1, :, D:-1]

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

    model: Model
    x: np.ndarray
    layers: list
    dL_dWr: np.ndarray | None = None

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


def _check_finite_rows(model, S, t):
    """Raise ``DivergenceError`` when a row of S (the state after step t) is not finite; one
    cheap sum per step, the row search only when the sum is not finite."""
    if not np.isfinite(S.sum()):
        ok = np.isfinite(S).all(axis=1)
        if not ok.all():
            raise DivergenceError(step=t + 1, batch=int(np.argmin(ok)), model=model.name)


def _forward_map(model, xt, s0) -> MapTape:
    layers = model.layers if isinstance(model, Stack) else (model,)
    offs = np.concatenate([[0], np.cumsum([m.state_size for m in layers])])
    tapes = []
    inp = xt
    with np.errstate(over="ignore", invalid="ignore"):
        for ell, m in enumerate(layers):
            own = s0[:, offs[ell]:offs[ell + 1]]
            if isinstance(m, GRU):
                lt = _forward_gru(m, inp, own, model)
            elif isinstance(m, LSTM):
                lt = _forward_lstm(m, inp, own, model)
            else:
                lt = _forward_cell(m, inp, np.ascontiguousarray(own))
            tapes.append(lt)
            inp = lt.H[1:]
    return MapTape(model, xt, tapes)


def _forward_gru(m, xt, h0, whole):
    """The GRU layer's taped forward pass, the whole loop in one numba call (``_fused.gru_forward``)."""
    T, B, d = xt.shape
    D = m.hidden
    act, leak = ACTIVATION_IDS[m.activation], float(m.leak)
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
    DN = None if m.activation == "tanh" else _tape_empty((T, B, D))   # φ'(a_n), not a function of n
    bad = _fused.gru_forward(Ha, readonly(Wa), readonly(xt, np.float64), readonly(m.W_ih[2 * D:].T),
                             readonly(m.b_ih[2 * D:]), RZQ, N,
                             *_out3(DN), act, leak, np.empty((B, D)),
                             gemm_rows(B, D + d + 1, 3 * D, small_gemm()))
    if bad >= 0:
        _check_finite_rows(whole, Ha[bad + 1, :, :D], bad)
    return GRUTape(m, Ha, RZQ, N, DN)


def _forward_lstm(m, xt, s0, whole):
    """The LSTM layer's taped forward pass, the whole loop in one numba call (``_fused.lstm_forward``)."""
    T, B, d = xt.shape
    D = m.hidden
    act, leak = ACTIVATION_IDS[m.activation], float(m.leak)
    Ha = _augmented(xt, s0[:, :D], D)
    Wa = np.empty((D + d + 1, 4 * D))              # [h | x | 1] → [a_i | a_f | a_o | a_g]
    Wa[:D] = _lstm_rows(m.W_hh, D).T
    Wa[D:D + d] = _lstm_rows(m.W_ih, D).T
    Wa[D + d] = _lstm_rows(m.b_ih + m.b_hh, D)
    C = _tape_empty((T + 1, B, D))
    C[0] = s0[:, D:]
    A = _tape_empty((T, B, 4 * D))
    TC = _tape_empty((T, B, D))
    has_d = m.activation != "tanh"                 # φ'(a_g), φ'(c_t) kept unless they are 1 − φ²
    DG = _tape_empty((T, B, D)) if has_d else None
    DT = _tape_empty((T, B, D)) if has_d else None
    none = np.empty((1, 1, 1))
    bad = _fused.lstm_forward(Ha, Wa, C, A, TC, DG if has_d else none, DT if has_d else none, has_d, act, leak,
                              gemm_rows(B, D + d + 1, 4 * D, small_gemm()))
    if bad >= 0:
        _check_finite_rows(whole, C[bad + 1], bad)
    return LSTMTape(m, Ha, C, A, TC, DG, DT)


def _backward_map(tape: MapTape, ext):
    """Layer by layer from the top: the input cotangents of layer ℓ (x̄_t = ḡ_t W_ih) are the
    cotangents of layer ℓ − 1's outputs (module docstring)."""
    model = tape.model
    layers = model.layers if isinstance(model, Stack) else (model,)
    T, B = tape.x.shape[0], tape.x.shape[1]
    n, Dout = model.state_size, model.hidden
    _check_cotangents(ext, T, B, (Dout, n))
    offs = np.concatenate([[0], np.cumsum([m.state_size for m in layers])])
    on_state = ext.shape[2] == n and n != Dout
    grads, dh0, dh1, rec = {}, [None] * len(layers), [None] * len(layers), [None] * len(layers)
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
                rec[ell] = g["W_hh"]
            elif isinstance(lt, LSTMTape):
                g, dh0[ell], dh1[ell], above = _backward_lstm(lt, own, above, need_x)
                rec[ell] = g["W_hh"]
            else:
                g, dh0[ell], dh1[ell], above = _backward_gated(lt, own, above, need_x)
                rec[ell] = lt.dL_dWr
            if isinstance(model, Stack):
                grads.update({f"layer{ell + 1}_{k}": v for k, v in g.items()})
            else:
                grads.update(g)
    tape.dL_dWr = rec[0] if len(rec) == 1 else np.concatenate(rec, axis=0)
    cat = (lambda parts: parts[0]) if len(layers) == 1 else (lambda parts: np.concatenate(parts, axis=1))
    return {k: grads[k] for k in model.params()}, cat(dh0), cat(dh1)


#: Steps per weight-gradient product in the GRU/LSTM backward pass (``_fused._weight_chunk``, the
#: size of the cotangent buffer):
#: 8 steps of a 64-row block measured 50 GFLOP/s on one thread, the whole sequence at once 42.
WEIGHT_CHUNK_STEPS = 8


def _opt3(a):
    """(array, given?) for an optional (T, B, ·) input of the jitted loops, read-only and
    C-contiguous either way (``dynlab.kernels.readonly``: one compiled specialisation; a
    layer's slice of state cotangents is copied)."""
    return (_NONE3, False) if a is None else (readonly(a, np.float64), True)


_NONE3 = readonly(np.empty((1, 1, 1)))


def _out3(a):
    """(array, given?) for an optional (T, B, ·) output of the jitted loops."""
    return (np.empty((1, 1, 1)), False) if a is None else (a, True)


def _backward_gru(lt: GRUTape, ext, above, need_x):
    """GRU backward (module docstring); ext (T', B, D) (the last T' steps) or None, above
    (T, B, D) or None; the tape is only read (its cotangents live in a chunk buffer:
    ``_fused.gru_backward_all``)."""
    m = lt.model
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
    _fused.gru_backward_all(Ha, lt.RZQ, lt.N, *_opt3(DN),
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
    (``_fused.lstm_backward_all``)."""
    m = lt.model
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
    _fused.lstm_backward_all(Ha, lt.C, lt.A, lt.TC, dg, dt, has_d, np.ascontiguousarray(W),
                             np.ascontiguousarray(_lstm_rows(m.W_ih, D)), eh, has_eh, ec, has_ec, ab, has_ab, need_x,
                             hb, cb, dh1, np.empty((c, B, 4 * D)), Pt, np.empty_like(Pt), xbar,
                             gemm_rows(B, 4 * D, D, small_gemm()))
    P = _lstm_rows(Pt.T, D)              # [W̄_hh | W̄_ih | b̄], PyTorch's order
    gb = P[:, D + d].copy()
    out = {"W_ih": P[:, D:D + d].copy(), "W_hh": P[:, :D].copy(), "b_ih": gb, "b_hh": gb.copy()}
    return out, np.concatenate([hb, cb], axis=1), dh1, (xbar if need_x else None)


# ============================================================================ read-out and losses
def init_readout(hidden: int, outputs: int, seed=None) -> dict:
    """W_out ~ N(0, 1/D), b_out = 0."""
    rng = np.random.default_rng(seed)
    return {"W_out": rng.standard_normal((outputs, hidden)) / np.sqrt(hidden), "b_out": np.zeros(outputs)}


def check_loss(loss: str) -> str:
    key = str(loss).strip().lower()
    if key not in LOSSES:
        raise ParameterError("loss", f"unknown loss {loss!r}; choose from {', '.join(LOSSES)}")
    return key


def _log_softmax(y):
    m = y.max(axis=-1, keepdims=True)
    z = y - m
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def loss_value(loss: str, Y, target):
    """(L, dL/dY, extra) for outputs Y ((B, C) or (T, B, C) for the -seq losses).

    ``extra`` holds ``accuracy`` for the cross-entropy losses.
    """
    loss = check_loss(loss)
    if loss.startswith("mse"):
        t = np.asarray(target, dtype=np.float64)
        if loss == "mse-seq":
            t = np.swapaxes(t, 0, 1)
        if t.shape != Y.shape:
            raise ParameterError("target", f"must have shape {Y.shape} for loss {loss!r}, got {np.shape(target)}")
        r = Y - t
        return float(np.mean(r * r)), 2.0 * r / r.size, {}
    lab = np.asarray(target)
    if loss == "ce-seq":
        lab = np.swapaxes(lab, 0, 1)
    if lab.shape != Y.shape[:-1] or not np.issubdtype(lab.dtype, np.integer):
        raise ParameterError("target", f"must be integer labels of shape {Y.shape[:-1]} for loss {loss!r}, "
                                       f"got {lab.dtype} {lab.shape}")
    C = Y.shape[-1]
    if lab.size and (lab.min() < 0 or lab.max() >= C):
        raise ParameterError("target", f"labels must lie in [0, {C}), got [{lab.min()}, {lab.max()}]")
    ls = _log_softmax(Y)
    picked = np.take_along_axis(ls, lab[..., None], axis=-1)[..., 0]
    n = lab.size
    G = np.exp(ls)
    np.put_along_axis(G, lab[..., None], np.take_along_axis(G, lab[..., None], axis=-1) - 1.0, axis=-1)
    acc = float(np.mean(np.argmax(Y, axis=-1) == lab))
    return float(-picked.mean()), G / n, {"accuracy": acc}


def readout_outputs(readout, H, loss):
    """Y = W_out h + b_out at the end ((B, C)) or at every step ((T, B, C)) for -seq losses."""
    Hs = H[1:] if loss.endswith("-seq") else H[-1]
    return Hs @ readout["W_out"].T + readout["b_out"]


def loss_and_grads(model: Model, readout: dict, x, target, *, loss: str, h0=None, workspace=None):
    """The loss and the exact gradient of every parameter.

    Parameters
    ----------
    model : discrete dynlab model;  readout : {"W_out": (C, D), "b_out": (C,)} on the output h
        (D = ``model.hidden``)
    x : (B, T, d) inputs;  target : see the module docstring for each ``loss``
    h0 : (B, n) or (n,) initial states (zeros by default), n = ``model.state_size``
    workspace : ``Workspace``, optional — tape memory reused from the previous call with the
        same workspace (``train_model`` passes one); ``info["tape"]`` is then valid only until
        the next such call

    Returns
    -------
    (L, grads, info): grads holds the model's parameters, ``W_out``, ``b_out`` and ``h0``
    (∂L/∂h_0, (B, n)); info holds the tape, ``dL_dh1`` (B, n), ``dL_dWr`` (D, D) = ∂L/∂R for
    the matrix R multiplying h_{t-1} inside φ (U; M − Mᵀ − γI; U + I for the RIN; I + VH;
    W_hh (G·D, D) for a GRU or an LSTM; every layer's stacked for a stack), ``outputs`` and,
    for cross-entropy, ``accuracy``.

    A large batch is split into blocks of sequences, one thread each (``config.TRAIN_THREADS``,
    ``config.TRAIN_MIN_WORK_PER_THREAD``): sequences are independent, so each block runs its
    forward and backward pass on its own, BLAS on one thread, and the parameter gradients are
    the sums of the blocks' (the loss and its cotangents are taken on the whole batch).  Only
    the order of the final sums differs from one block (≤ 1e-15 relative, tested).

    Example
    -------
    >>> L, g, _ = loss_and_grads(m, init_readout(m.hidden, 1, 0), x, y, loss="mse")
    """
    loss = check_loss(loss)
    xa, h0a = _as_batch(model, x, h0)
    edges = _train_blocks(model, xa.shape[0])
    if workspace is not None:
        workspace.start()
    if len(edges) == 2:
        with _arena(None if workspace is None else workspace.arena(0)):
            return _loss_and_grads_block(model, readout, xa, target, loss, h0a)
    return _loss_and_grads_split(model, readout, xa, target, loss, h0a, edges, workspace)


@blas_threads("TRAIN_BLAS_THREADS")
def _loss_and_grads_block(model, readout, x, target, loss, h0):
    """``loss_and_grads`` in one block (the calling thread)."""
    tape = forward(model, x, h0)
    out = tape.outputs
    Y = readout_outputs(readout, out, loss)
    L, dY, extra = loss_value(loss, Y, target)
    ext, gW, gb = _readout_cotangents(loss, dY, out, readout)
    grads, dh0, dh1 = backward(tape, ext)
    grads["W_out"], grads["b_out"], grads["h0"] = gW, gb, dh0
    info = {"tape": tape, "dL_dh1": dh1, "dL_dWr": tape.dL_dWr, "outputs": Y}
    info.update(extra)
    return L, grads, info


def _readout_cotangents(loss, dY, out, readout):
    """(ext, ∂L/∂W_out, ∂L/∂b_out) from dY = ∂L/∂Y: ext holds ∂L/∂h_t through the read-out,
    (T, B, D), or (1, B, D) for a loss at the end (the last step's: ``backward``'s short form)."""
    T, B, D = out.shape[0] - 1, out.shape[1], out.shape[2]
    if loss.endswith("-seq"):
        ext = dY @ readout["W_out"]
        gW = dY.reshape(T * B, -1).T @ out[1:].reshape(T * B, D)
        gb = dY.reshape(T * B, -1).sum(axis=0)
    else:
        ext = (dY @ readout["W_out"])[None]          # (1, B, D): the last step's only
        gW = dY.T @ out[-1]
        gb = dY.sum(axis=0)
    return ext, gW, gb


def _train_blocks(model, B: int) -> list:
    """Row edges of the blocks ``loss_and_grads`` splits a batch of B into: ``config.TRAIN_THREADS``
    blocks (None: one per CPU this process may use; 1 in a sweep region: ``_blas.work_threads``),
    fewer where a block's work per step —
    its rows times the product's size, rows · hidden · state size — would fall below
    ``config.TRAIN_MIN_WORK_PER_THREAD`` (cells whose time loop runs in Python: below it the
    Python work of a step, which holds the GIL, outweighs what another core gains), or below
    ``config.TRAIN_MIN_WORK_PER_THREAD_JITTED`` for the iRNN, the GRU and the LSTM (and stacks of
    them), whose whole loops are one numba call each (measured, GRU/LSTM, T = 200: two blocks
    break even at rows · D · state size ≈ 8192, e.g. D = 32, B = 8, and are 1.5–2× faster from
    32 768 up)."""
    from .. import config
    from .._blas import work_threads

    n = work_threads(config.TRAIN_THREADS)
    layers = model.layers if isinstance(model, Stack) else (model,)
    jitted = all(isinstance(m, (IRNN, GRU, LSTM)) for m in layers)
    least = config.TRAIN_MIN_WORK_PER_THREAD_JITTED if jitted else config.TRAIN_MIN_WORK_PER_THREAD
    per_row = model.hidden * model.state_size
    n = int(max(1, min(n, B * per_row // max(1, least), B)))
    return [int(e) for e in np.linspace(0, B, n + 1).astype(int)]


def _each_block(fn, edges):
    """[fn(i, lo, hi) for each block i], one thread per block (``_blas.in_threads``).  A
    ``DivergenceError`` names the batch row in the whole batch; when several blocks diverge,
    the earliest step (then the lowest row) is raised."""
    from .._blas import in_threads

    n = len(edges) - 1
    errors = [None] * n

    def work(i):
        lo, hi = edges[i], edges[i + 1]
        try:
            return fn(i, lo, hi)
        except DivergenceError as err:
            errors[i] = DivergenceError(step=err.step, batch=err.batch + lo, model=err.model)

    out = in_threads(work, n)
    div = [e for e in errors if e is not None]
    if div:
        raise min(div, key=lambda e: (e.step, e.batch))
    return out


def _loss_and_grads_split(model, readout, x, target, loss, h0, edges, workspace=None):
    """``loss_and_grads`` on blocks of sequences, one thread each (see there); block i's tape
    memory is the workspace's arena i."""
    if workspace is not None:
        workspace.arena(len(edges) - 2)   # every block's arena made here, before the threads start

    def arena(i):
        return _arena(None if workspace is None else workspace.arena(i))

    def fwd(i, lo, hi):
        with arena(i):
            return forward(model, x[lo:hi], h0[lo:hi])

    def bwd(i, lo, hi):
        with arena(i):
            return backward(tapes[i], parts[i][0])

    tapes = _each_block(fwd, edges)
    outs = [t.outputs for t in tapes]
    Y = np.concatenate([readout_outputs(readout, o, loss) for o in outs], axis=-2)
    L, dY, extra = loss_value(loss, Y, target)
    parts = [_readout_cotangents(loss, dY[..., lo:hi, :], o, readout) for o, lo, hi in zip(outs, edges, edges[1:])]
    res = _each_block(bwd, edges)
    grads = {k: sum(r[0][k] for r in res) for k in res[0][0]}
    grads["W_out"] = sum(p[1] for p in parts)
    grads["b_out"] = sum(p[2] for p in parts)
    grads["h0"] = np.concatenate([r[1] for r in res], axis=0)
    tape = BlockTape(model, x, tapes, sum(t.dL_dWr for t in tapes))
    info = {"tape": tape, "dL_dh1": np.concatenate([r[2] for r in res], axis=0), "dL_dWr": tape.dL_dWr,
            "outputs": Y}
    info.update(extra)
    return L, grads, info


@dataclasses.dataclass
class BlockTape:
    """The tapes of ``loss_and_grads``'s blocks of sequences (rows ``edges``), seen as one:
    ``H``, ``outputs`` and ``states`` are the blocks' joined along the batch axis (copies)."""

    model: Model
    x: np.ndarray
    blocks: list
    dL_dWr: np.ndarray | None = None

    @property
    def H(self) -> np.ndarray:
        return np.concatenate([t.H for t in self.blocks], axis=1)

    @property
    def outputs(self) -> np.ndarray:
        return np.concatenate([t.outputs for t in self.blocks], axis=1)

    @property
    def states(self) -> np.ndarray:
        return np.concatenate([t.states for t in self.blocks], axis=0)


@blas_threads("TRAIN_BLAS_THREADS")
def predict(model: Model, readout: dict, x, *, loss: str, h0=None):
    """The read-out outputs of ``model`` on x ((B, C), or (T, B, C) for -seq losses)."""
    tape = forward(model, x, h0)
    return readout_outputs(readout, tape.outputs, check_loss(loss))


__all__ = ["BlockTape", "GRUTape", "Workspace", "LOSSES", "LSTMTape", "MapTape", "READOUT", "Tape", "backward", "forward", "init_readout", "loss_and_grads", "loss_value",
           "param_names", "predict", "release_tape_memory", "with_params"]

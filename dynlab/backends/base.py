"""The backend interface: operations on kernel forms, and the composites built from them.

Every backend implements the primitives on plain arrays and a form (``dynlab.models.forms``):

``simulate(form, x, h0, stop, dtype)``
    the states h_1..h_T of B sequences: (H (B, T, n), bad (B,), path), ``bad`` the 0-based step
    at which each sequence first had a non-finite state (T if never);
``jacobians(form, x, hprev, eta, inputs)``
    the closed-form one-step Jacobians J = ∂s_t/∂s_{t−1} (and ∂s_t/∂x_t) at N points:
    (J (N, n, n), Jx (N, n, d) or None, path);
``backward_norms(batch, size, dL_dhT, step_norms)``
    an accumulator of the gradient flow's backward pass: ``feed(J)`` with J (B, m, n, n) for
    times t_lo … t_hi, fed from the end backwards, returns ln‖∂h_T/∂h_t‖₂ (and ‖J_t‖₂,
    ln‖∂L/∂h_t‖₂) for those times (``dynlab.analysis.gradients``);
``tangent_qr(batch, size, Q)``
    an accumulator of Benettin's QR steps: ``feed(J)`` returns ln|R_t[i, i]| (B, m, k), carrying
    the frame Q on (``dynlab.analysis.lyapunov``);
``forward_tangent(batch)``
    the forward tangents M_m = ∂h_m/∂h_1 of S sweep settings stacked in a ``TangentBatch`` (kept
    Frobenius-normalised, with their log scale) and J_T: what ``sweep_gradients`` reads;

``sweep_gradients(forms, xs)`` or ``sweep_gradients(batch)``
    ln‖∂h_T/∂h_1‖₂, ln‖∂h_T/∂h_{T−1}‖₂ and the divergence step of S settings of one kind
    (iRNN or one-line cell) and one shape, by forward tangents (``TangentBatch``: the settings'
    scalars, and their matrices and inputs once per group of settings that share them);
``partition_trace(forms, x, h0s)``
    a stack of one-line cells layer by layer: per layer the states H (B, T, D) and the
    pre-activations Z (B, T, D) whose affine pieces are the MASO partition codes;
``reverse_cotangents(form, S, lam, incoming)``
    the MASO reverse pass through one one-line layer (λ_{t−1} = a λ_t + (γ λ_t ⊙ s_t) R);
``implicit_solve(A, C, act, leak, method, tol, max_iter, Z0, steps, dt)``
    the implicit networks' batched equilibria Z = f(Z A + C) (``dynlab.analysis.implicit``);
``train_forward(form, x, h0)`` / ``train_backward(form, tape, dL_dH)``
    BPTT: the taped forward pass and the cotangents of the form's arrays
    (``dynlab.train.backprop``; a model maps them to its own parameters);

and may override the composites, whose default here chains the primitives along a trajectory a
chunk of steps at a time (at most ``config.JACOBIAN_CHUNK_ENTRIES`` Jacobian entries held):

``gradient_flow(form, x, h0, H, dL_dhT, step_norms)`` → (per-time dict, path)
``lyapunov_logr(form, x, h0, H, Q)`` → (ln|R_t[i, i]| (B, T, k), path)

A backend runs a public call inside ``with backend:`` (its execution policy, e.g. the numba
backend's BLAS threads) and says with ``supports(op, form)`` whether it has an operation for a
form; analyses ask, never branch on a backend's name.

Which kernel serves a form is a table lookup, as scipy's ``METHODS`` table serves ``solve_ivp``:
a backend's ``KERNELS`` maps an operation to ``{form kind: kernel}``, a kernel being a function
``(backend, form, …)`` — the kernel's host side, or a small adapter that picks among one kind's
kernels by size.  ``kernel(op, form)`` is the one lookup, and the one ``ParameterError`` (naming
the backend, the operation, the kind and the kinds it serves) for a kind it has no kernel for;
``supports`` and ``require`` read the same tables.  An operation without a table takes no form
(``backward_norms``, ``tangent_qr``, ``forward_tangent``, ``implicit_solve``) or is served for
every form by one implementation (the composites below, where a backend has no table for them).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import config
from .._progress import progress
from ..errors import ParameterError

#: The operations of the interface (``supports`` answers for these names).
OPERATIONS = ("simulate", "jacobians", "backward_norms", "tangent_qr", "forward_tangent", "gradient_flow",
              "lyapunov_logr", "sweep_gradients", "partition_trace", "reverse_cotangents", "implicit_solve",
              "train_forward", "train_backward")


_OPERATIONS = frozenset(OPERATIONS)


def previous_states(h0, H, lo: int, hi: int) -> np.ndarray:
    """s_{t−1} for the times t = lo+1 … hi (1-based): H[..., t−2, :], h0 for t = 1.

    h0 (…, n), H (…, T, n) with the same leading axes; returns (…, hi − lo, n)."""
    out = np.empty(H.shape[:-2] + (hi - lo, H.shape[-1]))
    if lo == 0:
        out[..., 0, :] = h0
        out[..., 1:, :] = H[..., :hi - 1, :]
    else:
        out[...] = H[..., lo - 1:hi - 1, :]
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class TangentBatch:
    """S settings of one kind (``gated``: one-line cells, else iRNN) with one shape (D units, d
    inputs, T steps), stacked for the forward tangents of a sweep (``forward_tangent``).

    What settings share is stored once.  The settings fall into G ≤ S *weight groups*: the
    settings of one group have the same recurrent matrix, input weights, bias and input sequence,
    and differ only in their scalars (a sweep over K, η, α, g₀ of one model is one group).

    Per group (G leading): R (G, D, D) the recurrent matrices (U for the iRNN, the cells' R);
    W (G, D, d), b (G, D) the input weights and biases; X (G, T, d) the input sequences.

    Per setting (S leading): group (S,) int64, the setting's group (0 ≤ group < G); eta
    (S, K_max) the iRNN's η_k (zero past a setting's K: those inner steps then leave g and its
    tangent unchanged) or, for the cells, γ in column 0; K (S,) int64; alpha (S,) the iRNN's α
    or the cells' a; sign (S,) σ; g0prev (S,) bool; act (S,) int64 activation ids; leak (S,).

    The drive of setting n at step t, c_t = W x_t + b with (W, b, x) those of its group, is
    never stored per setting (that (S, T, D) array is 0.5 GB for 10⁴ settings at D = 32,
    T = 200, all copies of a few distinct drives): the backends compute it from the group's
    arrays — once per group (the reference), or inside the kernel at every step (D·d products
    against the step's D² — the numba and GPU kernels).  ``drive()`` computes it for checks and
    peers.  Floating arrays share one dtype (``dtype``: float64, or float32 on the GPU)."""

    gated: bool
    R: np.ndarray
    W: np.ndarray
    b: np.ndarray
    X: np.ndarray
    group: np.ndarray
    eta: np.ndarray
    K: np.ndarray
    alpha: np.ndarray
    sign: np.ndarray
    g0prev: np.ndarray
    act: np.ndarray
    leak: np.ndarray

    def __post_init__(self):
        G, D = self.R.shape[0], self.R.shape[1]
        S = self.group.shape[0]
        if (self.R.shape != (G, D, D) or self.W.shape[:2] != (G, D) or self.b.shape != (G, D)
                or self.X.shape[0] != G or self.X.shape[2] != self.W.shape[2]):
            raise ValueError(f"TangentBatch: R {self.R.shape}, W {self.W.shape}, b {self.b.shape}, X {self.X.shape} "
                             f"do not describe G groups of (D, D), (D, d), (D,), (T, d)")
        for name in ("eta", "K", "alpha", "sign", "g0prev", "act", "leak"):
            if getattr(self, name).shape[0] != S:
                raise ValueError(f"TangentBatch: {name} has {getattr(self, name).shape[0]} rows for {S} settings")
        if S and (int(self.group.min()) < 0 or int(self.group.max()) >= G):
            raise ValueError(f"TangentBatch: group indices must lie in 0..{G - 1}")

    @property
    def size(self) -> int:
        """S, the number of settings."""
        return int(self.group.shape[0])

    @property
    def steps(self) -> int:
        return int(self.X.shape[1])

    @property
    def hidden(self) -> int:
        return int(self.R.shape[1])

    @property
    def dtype(self) -> np.dtype:
        return self.R.dtype

    def drive(self) -> np.ndarray:
        """The drives c_t = W x_t + b of every setting, (S, T, D), computed (the kernels never take it)."""
        C = np.matmul(self.X, np.swapaxes(self.W, 1, 2)) + self.b[:, None, :]
        return C[self.group]

    def astype(self, dtype) -> "TangentBatch":
        """The batch with its floating arrays in ``dtype`` (float32 for the GPU's float32 path)."""
        return dataclasses.replace(self, **{k: np.asarray(getattr(self, k), dtype=dtype)
                                            for k in ("R", "W", "b", "X", "eta", "alpha", "sign", "leak")})


def stack_tangent(forms, xs) -> TangentBatch:
    """The ``TangentBatch`` of S forms of one kind ("irnn" or "cell") and one shape, with their
    inputs xs (each (T, d), one T).  Settings that pass the same form arrays and the same input
    object share a group (a form made once and passed for several settings is stored once)."""
    S = len(forms)
    f0 = forms[0]
    T = np.shape(xs[0])[0]
    D, d = f0.hidden, f0.inputs
    gated = f0.kind == "cell"
    Kmax = 1 if gated else max(f.K for f in forms)
    keys = {}
    group = np.empty(S, dtype=np.int64)
    eta = np.zeros((S, Kmax))
    K = np.ones(S, dtype=np.int64)
    alpha = np.empty(S)
    sign = np.ones(S)
    g0prev = np.zeros(S, dtype=np.bool_)
    act = np.empty(S, dtype=np.int64)
    leak = np.empty(S)
    members = []
    for n, (f, x) in enumerate(zip(forms, xs)):
        if f.kind != f0.kind:
            raise ValueError(f"one kind per batch: {f0.kind} and {f.kind}")
        rec = f.R if gated else f.U
        key = (id(rec), id(f.W), id(f.b), id(x))
        if key not in keys:
            keys[key] = len(members)
            members.append((rec, f.W, f.b, x))
        group[n] = keys[key]
        act[n] = f.act_id
        leak[n] = f.leak
        if gated:
            alpha[n], eta[n, 0] = f.a, f.gain
        else:
            eta[n, :f.K] = f.eta[0]
            K[n], alpha[n], sign[n], g0prev[n] = f.K, f.alpha, f.sign, f.g0prev
    G = len(members)
    R = np.empty((G, D, D))
    W = np.empty((G, D, d))
    b = np.empty((G, D))
    X = np.empty((G, T, d))
    for g, (rec, w, bias, x) in enumerate(members):
        R[g], W[g], b[g] = rec, w, bias
        X[g] = np.asarray(x, dtype=np.float64).reshape(T, d)
    return TangentBatch(gated, R, W, b, X, group, eta, K, alpha, sign, g0prev, act, leak)


def as_tangent_batch(forms, xs=None) -> TangentBatch:
    """``forms`` itself when it is a ``TangentBatch`` (xs None), else ``stack_tangent(forms, xs)``:
    what ``sweep_gradients`` takes either way."""
    if isinstance(forms, TangentBatch):
        if xs is not None:
            raise TypeError("sweep_gradients takes a TangentBatch alone, or forms and their inputs")
        return forms
    return stack_tangent(forms, xs)


class Workspace:
    """Tape memory that ``loss_and_grads(..., workspace=ws)`` reuses from one call to the next.

    A tape is a few arrays of T·B·D (·K) floats; allocated afresh at every training step, each is
    new memory from the OS, zeroed and page-faulted in as it is written.  ``train_model`` passes
    one workspace to every step, so the tape of step i + 1 is written over that of step i: the
    arrays of a call's ``info["tape"]`` are valid only until the next call with the same
    workspace; nothing else returned lives in it.  One arena per block of sequences.  (A backend
    uses it through its ``tape_memory``; the numba backend does.)"""

    def __init__(self):
        self.arenas = []

    def arena(self, i: int) -> "Arena":
        while len(self.arenas) <= i:
            self.arenas.append(Arena())
        return self.arenas[i]

    def start(self):
        """A new call: every arena hands out its arrays again from the first."""
        for a in self.arenas:
            a.i = 0


class Arena:
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


#: The kinds of the sequence forms, the keys of the kernel tables: the vocabulary the backends and
#: ``dynlab.models.forms`` share (a test holds it equal to ``forms.FORMS``; the backends, below
#: the models, do not import them).
SEQUENCE_KINDS = frozenset(("cell", "irnn", "ctrnn", "gru", "lstm", "stack"))


def sequence_kinds():
    """``SEQUENCE_KINDS``.  ``supports`` answers from the tables for these only: a form of another
    kind (an implicit network's) is not a sequence model, which the analyses refuse naming ``model``."""
    return SEQUENCE_KINDS


def step_eta(form, B: int, lo: int, hi: int):
    """The per-point η (B·(hi − lo), K) of the times lo+1 … hi of B sequences, for an iRNN whose η
    varies over time; None for every other form (its Jacobians take the form's own)."""
    if form.kind == "irnn" and form.eta.shape[0] > 1:
        return form.eta_rows(np.tile(np.arange(lo, hi, dtype=np.int64), B))
    return None


def chunk_steps(B: int, n: int, T: int) -> int:
    """Time steps per chunk of Jacobians: B·m·n² ≤ ``config.JACOBIAN_CHUNK_ENTRIES``."""
    return int(max(1, min(T, config.JACOBIAN_CHUNK_ENTRIES // max(1, B * n * n))))


class Backend:
    """A place where the kernels run (module docstring: the operations)."""

    name = "backend"
    #: One line for users: what this backend is.
    description = ""
    #: How ``backward_norms`` takes σ₁, and to what relative accuracy (0: exact to rounding).
    norm_method = ("LAPACK SVD of every product (np.linalg.svd, compute_uv=False)", 0.0)

    # ------------------------------------------------------------------ policy
    def check_available(self) -> None:
        """Raise ParameterError("backend", …) when this backend cannot run here (no device)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def region(self):
        """A context for one region of a sweep, whose workers are already its parallelism: the
        backend's own splits of work between threads are off inside (nothing by default)."""
        import contextlib

        return contextlib.nullcontext()

    def parallel_pieces(self, items: int, work_per_item: float, *, least: float = 0.0, setting=None) -> int:
        """Into how many pieces, run at once, this backend splits ``items`` independent items of
        ``work_per_item`` each (no piece with less than ``least`` work; ``setting`` a count the
        caller's configuration asks for): 1 by default (no splits of its own)."""
        return 1

    def run_pieces(self, fn, n: int) -> list:
        """[fn(0), …, fn(n − 1)], at once where the backend splits work (in order by default);
        every piece is waited for before the first exception is raised."""
        return [fn(i) for i in range(n)]

    def tape_memory(self, arena):
        """A context in which the training passes' tape arrays come from ``arena`` (a
        ``Workspace``'s, reused from one call to the next) — where the backend keeps tapes in
        host memory it manages; nothing by default."""
        import contextlib

        return contextlib.nullcontext()

    def release_tape_memory(self) -> None:
        """Let go of tape memory kept for reuse (nothing by default)."""

    #: The kernel tables (module docstring): operation → {form kind: function (backend, form, …)}.
    KERNELS: dict = {}

    def refuses(self, form):
        """Why this backend runs no operation at all on ``form`` (a few words), or None: it may
        (None by default; the tables then say which operations)."""
        return None

    def supports(self, op: str, form) -> bool:
        """Whether this backend has operation ``op`` for ``form``: read from ``KERNELS`` (a kind in
        the operation's table, or an operation without a table), for a stack every layer too."""
        if op not in _OPERATIONS or self.refuses(form) is not None:
            return False
        table = self.KERNELS.get(op)
        if table is not None and form.kind not in table and form.kind in sequence_kinds():
            return False
        return all(self.supports(op, f) for f in getattr(form, "layers", ()))

    def kernel(self, op: str, form):
        """The function serving ``op`` for ``form`` (``KERNELS[op][form.kind]``; called as
        ``fn(backend, form, …)``), or the ``ParameterError`` of ``require`` where there is none."""
        fn = self.KERNELS[op].get(form.kind)
        if fn is not None and self.refuses(form) is None and not hasattr(form, "layers"):
            return fn                          # a one-layer form: the table's answer is ``supports``'
        if fn is None or not self.supports(op, form):
            raise self.unsupported(op, form)
        return fn

    def sweep_region_size(self, hidden: int, steps: int, inner: int = 1):
        """Settings per region of a batched sweep whose largest setting has state size
        ``hidden``, ``steps`` steps and ``inner`` inner steps, or None for the sweep driver's
        default (``dynlab.sweep.driver.REGION_SIZE_BATCHED``): a backend whose batches are cheaper
        the larger they are (a GPU) answers from its memory."""
        return None

    def require(self, op: str, form) -> None:
        """A ParameterError naming ``backend`` when ``op`` is not available for ``form`` here."""
        if not self.supports(op, form):
            raise self.unsupported(op, form)

    def unsupported(self, op: str, form) -> ParameterError:
        """The one error for an operation this backend has no kernel for (one line): the backend,
        the operation, the form's kind and the kinds it does serve (from ``KERNELS``)."""
        table = self.KERNELS.get(op)
        why = self.refuses(form)
        if why is not None:
            serves = f" ({why})"
        elif table is None or op not in OPERATIONS or (form.kind in table and not hasattr(form, "layers")):
            serves = ""
        elif form.kind in table:
            serves = f" (not for each of its layers: {', '.join(f.kind for f in form.layers)})"
        else:
            serves = f" (its {op} serves {', '.join(sorted(table)) or 'no form'})"
        others = " or ".join(f"backend={b!r}" for b in ("numpy", "numba") if b != self.name)
        return ParameterError("backend", f"{self.name} has no {op} for a {form.kind} form{serves}; use {others}")

    # -------------------------------------------------------------- primitives
    def simulate(self, form, x, h0, *, stop: bool = True, dtype=np.float64):
        raise NotImplementedError(f"{self.name}.simulate")

    def jacobians(self, form, x, hprev, *, eta=None, inputs: bool = False):
        raise NotImplementedError(f"{self.name}.jacobians")

    def backward_norms(self, batch: int, size: int, *, dL_dhT=None, step_norms: bool = True):
        raise NotImplementedError(f"{self.name}.backward_norms")

    def tangent_qr(self, batch: int, size: int, Q):
        raise NotImplementedError(f"{self.name}.tangent_qr")

    def forward_tangent(self, batch: TangentBatch):
        """The forward tangents of S settings: M_m = ∂h_m/∂h_1 = J_m M_{m−1}, kept
        Frobenius-normalised, and J_T.  Returns (logs (S,) the log scale of M_T, M̃_T (S, D, D),
        J_T (S, D, D), diverged (S,) the 1-based first non-finite step, 0: none; logs NaN there)."""
        raise NotImplementedError(f"{self.name}.forward_tangent")

    def reverse_cotangents(self, form, S, lam, incoming):
        """The MASO reverse pass through one one-line layer (``dynlab.analysis.partition``):
        λ_{t−1} = a λ_t + (γ λ_t ⊙ s_t) R from t = T down, for a block of cotangent rows.

        S (B, T, D) the slopes φ'(z_t); lam (B·C, D) λ_T on entry (zeros below the top layer),
        λ_0 on exit; incoming (B, C, T, D) or None, cotangents added to λ_t at every step (from
        the layer above).  Returns (the input cotangents (B, C, T, d) = (γ λ_t ⊙ s_t) W, the
        offsets (B·C,) = Σ_t (γ λ_t ⊙ s_t)·b)."""
        raise NotImplementedError(f"{self.name}.reverse_cotangents")

    def train_forward(self, form, x, h0):
        """The taped forward pass of BPTT over time-major x (T, B, d) from h0 (B, n); the tape
        has ``H`` (T+1, B, n), ``outputs`` (T+1, B, hidden), ``states`` (B, T, n) and ``x``.  A
        non-finite state raises ``DivergenceError``."""
        raise NotImplementedError(f"{self.name}.train_forward")

    def train_backward(self, form, tape, ext):
        """(cotangents of the form's arrays by field name — a stack's as ``layer{ℓ}_<name>`` —,
        ∂L/∂s_0 (B, n), ∂L/∂s_1 (B, n)) from the explicit cotangents ext (T', B, w) of the last
        T' steps (``dynlab.backends.reference.bptt``)."""
        raise NotImplementedError(f"{self.name}.train_backward")

    def implicit_solve(self, A, C, act: str, leak: float, *, method: str = "auto", tol: float, max_iter=None,
                       Z0=None, steps: int = 30, dt: float = 1.0):
        """Equilibria Z = f(Z Aᵀ + C) of N stacked implicit systems by ``method`` (the methods of
        ``dynlab.analysis.implicit``: auto, anderson, fixed-point, newton, rk4, scipy, solve_ivp):
        A (U, U), C (N, U).  Returns (Z (N, U), residual (N,), iterations (N,), converged (N,),
        solver code (N,)).  By default the reference's; a backend overrides what it runs faster."""
        from .reference.implicit import solve_method

        return solve_method(A, C, act, leak, method=method, tol=tol, max_iter=max_iter, Z0=Z0, steps=steps, dt=dt)

    # -------------------------------------------------------------- composites
    def simulate_layers(self, form, x, h0, *, stop: bool = True, dtype=np.float64):
        """A stack layer by layer, each over the whole sequence on this backend's ``simulate``:
        layer ℓ reads layer ℓ − 1's output at every step (PyTorch's semantics), so running layer
        1 over all T steps, then layer 2 on its outputs, … gives the states of stepping the
        whole stack.  A layer that fails at step t hands non-finite inputs to the layers above
        from t on, so ``bad`` (the minimum over the layers) is the first step at which the
        concatenated state is non-finite.  Returns (H, bad, path of the layers)."""
        o = form.offsets
        inp = x
        Hs, bad, path = [], None, None
        for ell, layer in enumerate(form.layers):
            s0 = np.ascontiguousarray(h0[:, o[ell]:o[ell + 1]])
            H, b, path = self.simulate(layer, inp, s0, stop=stop, dtype=dtype)
            Hs.append(H)
            bad = b if bad is None else np.minimum(bad, b)
            inp = np.ascontiguousarray(H[:, :, layer.output], dtype=np.float64)
        return np.concatenate(Hs, axis=2), bad, path

    def sweep_gradients(self, forms, xs=None):
        """(ln‖∂h_T/∂h_1‖₂, ln‖∂h_T/∂h_{T−1}‖₂, diverged) of S settings of one kind and shape,
        from ``forward_tangent``: ``forms`` and their inputs ``xs`` (each (T, d)), or one
        ``TangentBatch`` (what a sweep builds without a model per setting); σ₁ by LAPACK's SVD,
        exact to rounding."""
        from .reference.norms import svd_top

        logs, M, J, bad = self.forward_tangent(as_tangent_batch(forms, xs))
        with np.errstate(divide="ignore", invalid="ignore"):
            log1 = np.asarray(logs) + np.log(svd_top(np.asarray(M)))
            logT = np.log(svd_top(np.asarray(J)))
        return log1, logT, np.asarray(bad)

    def partition_trace(self, forms, x, h0s):
        """A stack of one-line layers run layer by layer (layer ℓ reads layer ℓ − 1's states):
        per layer (H (B, T, D), bad (B,), Z (B, T, D)) with Z_t = R h_{t−1} + W h^(ℓ−1)_t + b the
        pre-activations; stops after a layer with a non-finite state."""
        out = []
        inp = x
        for f, h0 in zip(forms, h0s):
            H, bad, _ = self.simulate(f, inp, h0, stop=True)
            Hprev = np.concatenate([h0[:, None, :], H[:, :-1]], axis=1)
            out.append((H, bad, Hprev @ f.R.T + inp @ f.W.T + f.b))
            if int(bad.min()) < H.shape[1]:
                break
            inp = H
        return out

    def trajectory_jacobians(self, form, x, h0, H, lo: int, hi: int):
        """J_t for t = lo+1 … hi along a simulated trajectory: (B, hi − lo, n, n)."""
        B, _, d = x.shape
        n = form.state_size
        m = hi - lo
        hprev = previous_states(h0, H, lo, hi).reshape(B * m, n)
        J, _, _ = self.jacobians(form, np.ascontiguousarray(x[:, lo:hi]).reshape(B * m, d), hprev,
                                 eta=step_eta(form, B, lo, hi))
        return J.reshape(B, m, n, n)

    def flow_chunk_steps(self, B: int, n: int, T: int) -> int:
        """Time steps per chunk of Jacobians of the composites below (``chunk_steps``: the CPU's
        memory budget; a GPU backend answers from its own)."""
        return chunk_steps(B, n, T)

    def flow_jacobians(self, form, x, h0, H, lo: int, hi: int):
        """The J_t the composites below feed to ``backward_norms``/``tangent_qr`` accumulators:
        ``trajectory_jacobians``, or a backend's own arrays that its accumulators take (a GPU's
        stay on the device)."""
        return self.trajectory_jacobians(form, x, h0, H, lo, hi)

    def gradient_flow(self, form, x, h0, H, *, dL_dhT=None, step_norms: bool = True):
        """The backward pass of the gradient flow over a trajectory: per-time (B, T) arrays
        ``log_jac_norm`` (and ``step_norm``, ``log_dL_dh_norm``), and the path that ran."""
        B, T, _ = x.shape
        n = form.state_size
        acc = self.backward_norms(B, n, dL_dhT=dL_dhT, step_norms=step_norms)
        m = self.flow_chunk_steps(B, n, T)
        out = {}
        hi = T
        while hi > 0:
            lo = max(0, hi - m)
            part = acc.feed(self.flow_jacobians(form, x, h0, H, lo, hi))
            for k, v in part.items():
                out.setdefault(k, np.empty((B, T)))[:, lo:hi] = v
            hi = lo
            progress("gradient flow (steps)", T - lo, T)
        return out, acc.path

    def lyapunov_logr(self, form, x, h0, H, Q):
        """ln|R_t[i, i]| (B, T, k) of Benettin's QR along a trajectory from the frames Q (B, n, k),
        which are carried on in place; and the path that ran."""
        B, T, _ = x.shape
        n = form.state_size
        qr = self.tangent_qr(B, n, Q)
        m = self.flow_chunk_steps(B, n, T)
        logr = np.empty((B, T, Q.shape[2]))
        for lo in range(0, T, m):
            hi = min(T, lo + m)
            logr[:, lo:hi] = qr.feed(self.flow_jacobians(form, x, h0, H, lo, hi))
            progress("Lyapunov spectrum (steps)", hi, T)
        Q[...] = qr.Q
        return logr, qr.path

    def __repr__(self) -> str:
        return f"<dynlab backend {self.name!r}: {self.description}>"

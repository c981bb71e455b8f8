"""``NumbaBackend``: the host side of the CPU backend — which kernel runs, on which arrays.

The kernels are in this package's other modules (``loops``: jitted scalar loops and element-wise
passes; ``batched``: BLAS products over the batch; ``jacobians``; ``norms``; ``lapack``;
``tangent``; ``train``; ``partition``; ``implicit``).  A jitted kernel's read-only inputs pass
through ``readonly`` (C-contiguous, read-only view) so that Numba compiles it once per dtype.
"""
from __future__ import annotations

import numpy as np

from ... import config
from ...activations import ACTIVATION_IDS
from ..base import Backend, previous_states, sequence_kinds
from ._arrays import readonly
from .threads import limit_blas_threads


def _plain(a):
    """A writable C-contiguous float64 array (one compiled specialisation of the Jacobian
    kernels: Numba types a read-only array differently)."""
    a = np.asarray(a, dtype=np.float64)
    return a if (a.flags.c_contiguous and a.flags.writeable) else np.array(a, dtype=np.float64, order="C")


def _rows(a, lo, hi, B):
    """Rows lo:hi of a (B, …) array, C-contiguous (the array itself when whole)."""
    return a if (lo, hi) == (0, B) else np.ascontiguousarray(a[lo:hi])


def batch_parts(B: int, threads: int | None, min_rows: int) -> int:
    """Into how many blocks of sequences a batched kernel splits a batch of B: ``threads``, or
    (None) one per CPU this process may use (1 inside ``threads.serial()``: a sweep region),
    never fewer than ``min_rows`` sequences per block."""
    from .threads import work_threads

    return int(max(1, min(work_threads(threads), B // max(1, min_rows))))


def run_blocks(kernel, B, T, size, dtype, parts):
    """``kernel(lo, hi, H_block)`` → (H_block, bad_block) over the whole batch: in one call, or
    on ``parts`` blocks of sequences at once, one thread each (sequences are independent, so each
    block runs its whole time loop on its own; the jitted passes and BLAS release the GIL)."""
    if parts == 1:
        return kernel(0, B, None)
    from .threads import in_threads

    H = np.empty((B, T, size), dtype=dtype)
    bad = np.empty(B, dtype=np.int64)
    edges = np.linspace(0, B, parts + 1).astype(int)

    def work(i):
        lo, hi = int(edges[i]), int(edges[i + 1])
        bad[lo:hi] = kernel(lo, hi, H[lo:hi])[1]

    in_threads(work, parts)
    return H, bad



# =============================================================================== simulate
def _stopped(H, bad, stop, path):
    """(H, bad, path) as the reference leaves them: a failed sequence's row is NaN from its failure
    on, and a batched pass stops the whole batch at its first failure."""
    if stop:
        T = H.shape[1]
        for i in np.flatnonzero(bad < T):
            H[i, bad[i]:] = np.nan
        if path != "loops" and bad.min() < T:
            H[:, int(bad.min()) + 1:] = np.nan
    return H, bad, path


def _one_layer(loops, batched):
    """The ``simulate`` adapter of a one-layer kind: its scalar loops or its batched kernel,
    ``loops``/``batched`` (form, x, h0, stop, dtype) → (H, bad), as ``simulate_path`` says by size;
    scipy's adaptive solvers for a CTRNN that asks for one."""
    def simulate(be, form, x, h0, stop, dtype):
        path = be.simulate_path(form, x.shape[0])
        if path == "scipy":
            from ..reference.simulate import scipy_ctrnn

            return (*scipy_ctrnn(form, x, h0, stop, dtype), path)
        return _stopped(*(loops if path == "loops" else batched)(form, x, h0, stop, dtype), stop, path)
    return simulate


def _simulate_stack(be, form, x, h0, stop, dtype):
    return be.simulate_layers(form, x, h0, stop=stop, dtype=dtype)


def _line_loops(step):
    """Scalar loops of a one-line kind (cell, iRNN, CTRNN): the drives c = x Wᵀ + b, then
    ``step(form, c, h0, stop, dtype, H, bad)``, the kind's jitted loop."""
    def loops_(form, x, h0, stop, dtype):
        B, T, _ = x.shape
        c = readonly(x @ form.W.T + form.b, dtype)
        h0c = readonly(h0, dtype)
        H = np.empty((B, T, form.hidden), dtype=dtype)
        bad = np.empty(B, dtype=np.int64)
        step(form, c, h0c, stop, dtype, H, bad)
        return H, bad
    return loops_


def _loop_cell(form, c, h0, stop, dtype, H, bad):
    from . import loops

    loops.gated(readonly(form.R, dtype), c, h0, form.a, form.gain, form.act_id, form.leak, stop, H, bad)


def _loop_irnn(form, c, h0, stop, dtype, H, bad):
    from . import loops

    loops.irnn(readonly(form.U, dtype), c, h0, readonly(form.eta, np.float64), form.alpha, form.K, form.g0prev,
               form.sign, form.act_id, form.leak, stop, H, bad)


def _loop_ctrnn(form, c, h0, stop, dtype, H, bad):
    from . import loops

    loops.ctrnn(readonly(form.U, dtype), c, h0, form.tau, form.alpha, form.dt, form.substeps, form.method == "rk4",
                form.act_id, form.leak, stop, H, bad)


def _line_batched(block):
    """BLAS products over the batch for a one-line kind: ``block(form, W, b, dtype, stop, small)``
    gives the kind's batched kernel of (rows of x, rows of h0, H block), run on blocks of sequences
    (``run_blocks``)."""
    def batched_(form, x, h0, stop, dtype):
        from .threads import small_gemm

        B, T, _ = x.shape
        xs = np.asarray(x, dtype=dtype)
        h0x = np.asarray(h0, dtype=dtype)
        small = small_gemm()                    # products by rows for OpenBLAS's small-matrix path
        run = block(form, np.asarray(form.W, dtype=dtype), np.asarray(form.b, dtype=dtype), dtype, stop, small)

        def kernel(lo, hi, Hb):
            return run(_rows(xs, lo, hi, B), _rows(h0x, lo, hi, B), Hb)
        parts = batch_parts(B, config.VECTORISED_SIMULATION_THREADS, config.VECTORISED_MIN_ROWS_PER_THREAD)
        return run_blocks(kernel, B, T, form.hidden, xs.dtype, parts)
    return batched_


def _block_cell(form, W, b, dtype, stop, small):
    from . import batched

    R = np.asarray(form.R, dtype=dtype)
    return lambda x, h0, Hb: batched.gated(R, W, b, x, h0, form.a, form.gain, form.act_id, form.leak, H=Hb,
                                           small=small, stop=stop)


def _block_irnn(form, W, b, dtype, stop, small):
    from . import batched

    U = np.asarray(form.U, dtype=dtype)
    return lambda x, h0, Hb: batched.irnn(U, W, b, x, h0, form.eta, form.alpha, form.K, form.g0prev, form.sign,
                                          form.act_id, form.leak, H=Hb, small=small, stop=stop)


def _block_ctrnn(form, W, b, dtype, stop, small):
    from . import batched

    U = np.asarray(form.U, dtype=dtype)
    return lambda x, h0, Hb: batched.ctrnn(U, W, b, x, h0, form.tau, form.alpha, form.dt, form.substeps,
                                           form.method == "rk4", form.act_id, form.leak, H=Hb, stop=stop)


def _gated_loops(step):
    """GRU/LSTM scalar loops on the transposed matrices (``step`` the kind's: ``_loop_gru``,
    ``_loop_lstm``, which fold the hidden biases into the input drive where they can)."""
    def loops_(form, x, h0, stop, dtype):
        B, T, _ = x.shape
        H = np.empty((B, T, form.state_size), dtype=dtype)
        bad = np.empty(B, dtype=np.int64)
        step(form, readonly(form.W_ih.T, dtype), readonly(form.W_hh.T, dtype), readonly(x, dtype),
             readonly(h0, dtype), stop, dtype, H, bad)
        return H, bad
    return loops_


def _loop_lstm(form, W_ihT, W_hhT, x, h0, stop, dtype, H, bad):
    from . import loops

    loops.lstm(W_ihT, W_hhT, readonly(form.b_ih + form.b_hh, dtype), x, h0, form.act_id, form.leak, stop, H, bad)


def _loop_gru(form, W_ihT, W_hhT, x, h0, stop, dtype, H, bad):
    """The GRU's b_hn stays apart (it sits inside r ⊙ (…)); its other hidden biases join b_ih."""
    from . import loops

    D = form.hidden
    bi = form.b_ih.copy()
    bi[:2 * D] += form.b_hh[:2 * D]
    loops.gru(W_ihT, W_hhT, readonly(bi, dtype), readonly(form.b_hh[2 * D:], dtype), x, h0, form.act_id, form.leak,
              stop, H, bad)


def _gated_batched(name):
    """GRU/LSTM by BLAS products over the batch: ``batched.<name>`` on blocks of sequences."""
    def batched_(form, x, h0, stop, dtype):
        from . import batched
        from .threads import small_gemm

        B, T, _ = x.shape
        fn = getattr(batched, name)
        W_ih, W_hh, b_ih, b_hh = (np.asarray(a, dtype=dtype) for a in (form.W_ih, form.W_hh, form.b_ih, form.b_hh))
        xs, s0 = np.asarray(x, dtype=dtype), np.asarray(h0, dtype=dtype)
        common = dict(stop=stop, small=small_gemm())
        parts = batch_parts(B, config.GATED_SIMULATION_THREADS, config.GATED_MIN_ROWS_PER_THREAD)

        def kernel(lo, hi, Hb):
            return fn(W_ih, W_hh, b_ih, b_hh, _rows(xs, lo, hi, B), _rows(s0, lo, hi, B), form.act_id, form.leak,
                      H=Hb, **common)

        return run_blocks(kernel, B, T, form.state_size, xs.dtype, parts)
    return batched_


# ============================================================================== jacobians
def _jac_loops(form, x, hprev, want_x, step):
    """(J, Jx or None) of a one-line kind by its per-point kernel of the ``jacobians`` module:
    ``step(kernels, form, W, b, x, hprev, J, Jx)``."""
    from . import jacobians as kernels

    N, D = hprev.shape
    d = form.inputs
    J = np.empty((N, D, D))
    Jx = np.empty((N, D, d if want_x else 0))
    step(kernels, form, _plain(form.W), _plain(form.b), _plain(x), _plain(hprev), J, Jx)
    return J, (Jx if want_x else None)


def _jac_cell(be, form, x, s, eta, want_x, path):
    """A one-line cell: the kernel and the next state on the loops path, the reference's batched
    closed form past it."""
    from ..reference import jacobians as ref

    if path != "loops":
        return ref.layer(form, x, s, eta, want_x)
    from ..reference.cells import cell_update

    J, Jx = _jac_loops(form, x, s, want_x, lambda k, f, W, b, xx, hh, J, Jx: k.gated(
        _plain(f.R), W, b, f.a, f.gain, f.act_id, f.leak, xx, hh, J, Jx))
    z = s @ form.R.T + x @ form.W.T + form.b
    return J, Jx, cell_update(form.a, form.gain, s, z, form.act, form.leak)


def _jac_irnn(be, form, x, s, eta, want_x, path):
    """The iRNN: its product form on blocks of points for J alone on the batched path
    (``_irnn_blocks``), the reference's closed form for J and Jx there, else the per-point kernel."""
    from ..reference import jacobians as ref

    N = s.shape[0]
    if path == "batched" and want_x:
        return ref.layer(form, x, s, eta, want_x)
    e = np.broadcast_to(form.eta[0], (N, form.K)) if eta is None else eta
    if path == "batched":
        return _irnn_blocks(form, x, s, e), None, None
    J, Jx = _jac_loops(form, x, s, want_x, lambda k, f, W, b, xx, hh, J, Jx: k.irnn(
        _plain(f.U), W, b, _plain(e), f.alpha, f.K, f.g0prev, f.sign, f.act_id, f.leak, xx, hh, J, Jx))
    return J, Jx, None


def _jac_ctrnn(be, form, x, s, eta, want_x, path):
    """A CTRNN: the per-point kernel on the loops path, else the reference's (batched, or scipy's
    variational equation)."""
    from ..reference import jacobians as ref

    if path != "loops":
        return ref.layer(form, x, s, eta, want_x)
    J, Jx = _jac_loops(form, x, s, want_x, lambda k, f, W, b, xx, hh, J, Jx: k.ctrnn(
        _plain(f.U), W, b, f.tau, f.alpha, f.dt, f.substeps, f.method == "rk4", f.act_id, f.leak, xx, hh, J, Jx))
    return J, Jx, None


def _jac_gated(name):
    """GRU/LSTM: ``jacobians.<name>`` per point on the loops path, the reference's batched past it."""
    def jac(be, form, x, s, eta, want_x, path):
        from ..reference import jacobians as ref

        if path != "loops":
            return ref.layer(form, x, s, eta, want_x)
        from . import jacobians as kernels

        N = s.shape[0]
        D = form.hidden
        xc, sc = _plain(x), _plain(s)
        gi = xc @ form.W_ih.T + form.b_ih
        gh = sc[:, :D] @ form.W_hh.T + form.b_hh
        n = form.state_size
        J = np.empty((N, n, n))
        Jx = np.empty((N, n, form.inputs if want_x else 0))
        snew = np.empty((N, n))
        getattr(kernels, name)(_plain(form.W_ih), _plain(form.W_hh), gi, gh, form.act_id, form.leak, sc, J, Jx, snew)
        return J, (Jx if want_x else None), snew
    return jac


def _jac_stack(be, form, x, s, eta, want_x, path):
    """A stack composed from its layers' kernels (``reference.jacobians.stack``)."""
    from ..reference import jacobians as ref

    return ref.stack(form, x, s, want_x, lambda f, xx, ss, e, w: be._layer(f, xx, ss, e, w))


def _irnn_blocks(form, x, hprev, eta):
    """The iRNN's product form (J only) as one jitted call per block of points
    (``jacobians.irnn_jacobians``), the blocks on ``config.JACOBIAN_THREADS`` threads (None:
    one per CPU; 1 in a sweep region; at least ``config.JACOBIAN_MIN_POINTS_PER_THREAD``
    points each)."""
    from . import jacobians as kernels
    from .threads import in_threads, work_threads

    N, D = hprev.shape
    U = _plain(form.U)
    UT = readonly(U.T)                 # read-only inputs: one compiled signature (``readonly``)
    c = readonly(x @ form.W.T + form.b, np.float64)
    hprev = readonly(hprev, np.float64)
    eta = readonly(np.broadcast_to(eta, (N, form.K)), np.float64)
    J = np.empty((N, D, D))
    n = int(max(1, min(work_threads(config.JACOBIAN_THREADS), N // max(1, config.JACOBIAN_MIN_POINTS_PER_THREAD))))
    edges = np.linspace(0, N, n + 1).astype(int)
    q = max(1, min(config.JACOBIAN_IRNN_CHUNK, N))

    def run(i):
        lo, hi = int(edges[i]), int(edges[i + 1])
        kernels.irnn_jacobians(U, UT, c[lo:hi], hprev[lo:hi], eta[lo:hi], form.alpha, form.K, form.g0prev,
                               form.sign, form.act_id, form.leak, J[lo:hi], np.empty(D * q * D),
                               np.empty(D * q * D), np.empty((q, D)), np.empty((q, D)), np.empty((q, D)),
                               np.empty((q, D)))

    in_threads(run, n)
    return J


# ================================================================================== paths
def _by_size(form, batch: int) -> str:
    """Simulation: BLAS products over the batch from ``config.VECTORISE_MIN_WORK`` of B·D² on."""
    return "batched" if batch * form.hidden ** 2 >= config.VECTORISE_MIN_WORK else "loops"


def _jac_by_size(least: str):
    """Jacobians: the batched path from ``config.<least>`` units and ``VECTORISE_MIN_WORK`` of N·D² on."""
    def path(form, n_points: int) -> str:
        if form.hidden >= getattr(config, least) and n_points * form.hidden ** 2 >= config.VECTORISE_MIN_WORK:
            return "batched"
        return "loops"
    return path


def _scipy_or(by_size):
    """A CTRNN: 'scipy' for an adaptive solver, else ``by_size``."""
    return lambda form, n: by_size(form, n) if form.fixed_step else "scipy"


def _gated_jac_path(form, n_points: int) -> str:
    return "batched" if form.hidden >= config.JACOBIAN_GATED_VECTORISE_MIN_HIDDEN else "loops"


#: The path each kind takes, by operation: (form, batch or points) → 'scipy', 'loops' or 'batched'
#: (a stack's is its first layer's).
PATHS = {
    "simulate": {"cell": _by_size, "irnn": _by_size, "ctrnn": _scipy_or(_by_size), "gru": _by_size,
                 "lstm": _by_size},
    "jacobians": {"cell": _jac_by_size("JACOBIAN_VECTORISE_MIN_HIDDEN"),
                  "irnn": _jac_by_size("JACOBIAN_IRNN_BLAS_MIN_HIDDEN"),
                  "ctrnn": _scipy_or(_jac_by_size("JACOBIAN_VECTORISE_MIN_HIDDEN")),
                  "gru": _gated_jac_path, "lstm": _gated_jac_path},
}
for _op in PATHS.values():
    _op["stack"] = lambda form, n, _op=_op: _op[form.layers[0].kind](form.layers[0], n)


# ============================================================== flow, Lyapunov, training
def _flow_chain(be, form, x, h0, H, dL_dhT, step_norms):
    """The base class's chunked backward pass over ``jacobians`` (``flow.BackwardChain``)."""
    return Backend.gradient_flow(be, form, x, h0, H, dL_dhT=dL_dhT, step_norms=step_norms)


def _flow_irnn(be, form, x, h0, H, dL_dhT, step_norms):
    """The iRNN past ``config.GRADIENT_NUMBA_MAX_HIDDEN`` units without step norms: the reverse
    pass of vector–Jacobian products (``flow.irnn_reverse_norms``), no Jacobian formed."""
    if not step_norms and form.hidden > config.GRADIENT_NUMBA_MAX_HIDDEN:
        from .flow import irnn_reverse_norms

        return irnn_reverse_norms(form, x, h0, H, dL_dhT=dL_dhT), "reverse"
    return _flow_chain(be, form, x, h0, H, dL_dhT, step_norms)


def _lyapunov_qr(be, form, x, h0, H, Q):
    """The base class's chunked QR steps over ``jacobians``."""
    return Backend.lyapunov_logr(be, form, x, h0, H, Q)


def _lyapunov_irnn(be, form, x, h0, H, Q):
    """The iRNN past ``config.GRADIENT_NUMBA_MAX_HIDDEN`` units, at most
    ``config.LYAPUNOV_TANGENT_MAX_K`` exponents: the tangent frames stepped without forming J
    (``flow.irnn_tangent_logr``)."""
    if form.hidden > config.GRADIENT_NUMBA_MAX_HIDDEN and Q.shape[2] <= config.LYAPUNOV_TANGENT_MAX_K:
        from .flow import irnn_tangent_logr

        return irnn_tangent_logr(form, x, h0, H, Q), "irnn_tangent"
    return _lyapunov_qr(be, form, x, h0, H, Q)


def _bptt_forward(name):
    """``bptt.<name>`` (read at call time: bptt imports on first use) as a table kernel:
    (backend, form, x, h0) → name(form, x, h0)."""
    def forward(be, form, x, h0):
        from . import bptt

        return getattr(bptt, name)(form, x, h0)
    return forward


def _bptt_backward(name):
    """``bptt.<name>`` as a table kernel: (backend, form, tape, ext) → name(tape, ext) (the tape
    holds the form)."""
    def backward(be, form, tape, ext):
        from . import bptt

        return getattr(bptt, name)(tape, ext)
    return backward


def _reverse_cell(be, form, S, lam, incoming):
    from .partition import gated_reverse

    B, T, D = S.shape
    C = lam.shape[0] // B
    din = form.inputs
    out = np.empty((B, C, T, din))
    offset = np.zeros(B * C)
    Wb = np.empty((D, din + 1))
    Wb[:, :din] = form.W
    Wb[:, din] = form.b
    has = incoming is not None
    gated_reverse(readonly(form.R, np.float64), readonly(Wb), readonly(S, np.float64), form.a, form.gain, lam,
                  out, offset, readonly(incoming if has else np.empty((1, 1, 1, 1)), np.float64), has,
                  np.empty((B * C, D)), np.empty((B * C, D)), np.empty((B * C, din + 1)))
    return out, offset


def _sweep_tangent(be, forms, xs=None):
    """``forward_tangent``, then σ₁ of M̃_T and J_T in parallel over the settings by the
    certified power iteration of ``backward_norms`` (relative ``config.NORM_RTOL``; its
    Lanczos/LAPACK fallback where it cannot certify: ``tangent.sweep_norms``).  One kernel for
    cells and iRNNs (``TangentBatch.gated``)."""
    from ..base import as_tangent_batch
    from .tangent import run_sweep_norms

    batch = as_tangent_batch(forms, xs)
    logs, M, J, bad = be.forward_tangent(batch.astype(np.float64) if batch.dtype != np.float64 else batch)
    S, D = M.shape[0], batch.hidden
    log1, logT = np.empty(S), np.empty(S)
    u0 = np.random.default_rng(0).standard_normal(D)   # a generic start: never orthogonal to the top vector
    same = J[:0] if batch.steps == 2 else J           # T = 2: ∂h_T/∂h_1 = J_T, one σ₁ for both
    with limit_blas_threads(1), np.errstate(divide="ignore", invalid="ignore"):
        run_sweep_norms(M, same, logs, u0, config.NORM_RTOL, config.NORM_MAXIT, config.GRAM_LANCZOS_MAXIT, log1,
                        logT)
    return log1, logT, bad


def _all_kinds(fn, **special):
    """{kind: fn} over every sequence form's kind, ``special`` overriding some."""
    return {**{k: fn for k in sequence_kinds()}, **special}


class NumbaBackend(Backend):
    """The CPU default (``dynlab.backends.numba``'s docstring: paths and thresholds)."""

    name = "numba"
    description = "the CPU default: jitted loops (Numba), BLAS products, dynlab's own threads"

    #: operation → {kind: kernel} (``Backend.kernel``); the size thresholds between a kind's
    #: kernels are in ``PATHS``.  ``sweep_gradients`` and ``partition_trace`` take S forms (or a
    #: ``TangentBatch``), not one: one implementation each, called directly (the tangent kernel
    #: takes cells and iRNNs by its ``gated`` flag; the partition is the base class's composite
    #: over ``simulate``), their tables saying which kinds they serve (``supports``).
    KERNELS = {
        "simulate": {"cell": _one_layer(_line_loops(_loop_cell), _line_batched(_block_cell)),
                     "irnn": _one_layer(_line_loops(_loop_irnn), _line_batched(_block_irnn)),
                     "ctrnn": _one_layer(_line_loops(_loop_ctrnn), _line_batched(_block_ctrnn)),
                     "gru": _one_layer(_gated_loops(_loop_gru), _gated_batched("gru")),
                     "lstm": _one_layer(_gated_loops(_loop_lstm), _gated_batched("lstm")),
                     "stack": _simulate_stack},
        "jacobians": {"cell": _jac_cell, "irnn": _jac_irnn, "ctrnn": _jac_ctrnn, "gru": _jac_gated("gru"),
                      "lstm": _jac_gated("lstm"), "stack": _jac_stack},
        "gradient_flow": _all_kinds(_flow_chain, irnn=_flow_irnn),
        "lyapunov_logr": _all_kinds(_lyapunov_qr, irnn=_lyapunov_irnn),
        "train_forward": {"cell": _bptt_forward("forward_line"), "irnn": _bptt_forward("forward_irnn"),
                          "gru": _bptt_forward("forward_layers"), "lstm": _bptt_forward("forward_layers"),
                          "stack": _bptt_forward("forward_layers")},
        "train_backward": {"cell": _bptt_backward("backward_line"), "irnn": _bptt_backward("_backward_irnn"),
                           "gru": _bptt_backward("backward_layers"), "lstm": _bptt_backward("backward_layers"),
                           "stack": _bptt_backward("backward_layers")},
        "reverse_cotangents": {"cell": _reverse_cell},
        "sweep_gradients": {"cell": _sweep_tangent, "irnn": _sweep_tangent},
        "partition_trace": {"cell": Backend.partition_trace, "stack": Backend.partition_trace},
    }

    @property
    def norm_method(self):
        return (f"closed form (D=2) or warm-started power iteration certified by the Kato-Temple bound to "
                f"relative {config.NORM_RTOL:g}, sqrt of the Gram matrix's top eigenvalue (LAPACK syevr) where it "
                f"cannot certify", float(config.NORM_RTOL))

    # ------------------------------------------------------------------ policy
    def __enter__(self):
        limit = limit_blas_threads(config.NUMBA_BLAS_THREADS)
        limit.__enter__()
        stack = self.__dict__.setdefault("_limits", [])
        stack.append(limit)
        return self

    def __exit__(self, *exc):
        self._limits.pop().__exit__(*exc)
        return False

    def parallel_pieces(self, items: int, work_per_item: float, *, least: float = 0.0, setting=None) -> int:
        """One piece per CPU this process may use (``setting`` overrides; 1 inside ``region()``),
        at most one per item, none with less than ``least`` work."""
        from .threads import work_threads

        n = work_threads(setting)
        if least > 0:
            n = min(n, int(items * work_per_item // least))
        return int(max(1, min(n, items)))

    def run_pieces(self, fn, n: int) -> list:
        """On dynlab's threads, BLAS on one thread (``threads.in_threads``)."""
        from .threads import in_threads

        return in_threads(fn, n) if n > 1 else [fn(0)]

    def tape_memory(self, arena):
        from .bptt import _arena

        return _arena(arena)

    def release_tape_memory(self) -> None:
        from .bptt import _POOL

        _POOL.clear()

    def region(self):
        """dynlab's own thread splits off (``threads.serial``): a sweep's workers are its parallelism."""
        from .threads import serial

        return serial()

    # --------------------------------------------------------------- simulate
    def simulate_path(self, form, batch: int) -> str:
        """'scipy', 'loops' or 'batched' for a form and a batch of ``batch`` (``PATHS``)."""
        return PATHS["simulate"][form.kind](form, batch)

    def simulate(self, form, x, h0, *, stop: bool = True, dtype=np.float64):
        return self.kernel("simulate", form)(self, form, x, h0, stop, np.dtype(dtype))

    # -------------------------------------------------------------- jacobians
    def jacobian_path(self, form, n_points: int) -> str:
        """'scipy', 'loops' or 'batched' for the step Jacobians of ``form`` at ``n_points`` (``PATHS``)."""
        return PATHS["jacobians"][form.kind](form, n_points)

    def jacobians(self, form, x, hprev, *, eta=None, inputs: bool = False):
        path = self.jacobian_path(form, hprev.shape[0])
        J, Jx, _ = self._layer(form, x, hprev, eta, inputs, path)
        return J, Jx, path

    def _layer(self, form, x, s, eta, want_x, path=None):
        """(J, Jx or None, s') of one form at N points on this backend's kernels."""
        return self.kernel("jacobians", form)(self, form, x, s, eta, want_x, path or self.jacobian_path(form, s.shape[0]))

    # ------------------------------------------------------- norms, QR steps
    def backward_norms(self, batch: int, size: int, *, dL_dhT=None, step_norms: bool = True):
        from .flow import BackwardChain

        return BackwardChain(batch, size, dL_dhT=dL_dhT, step_norms=step_norms)

    def tangent_qr(self, batch: int, size: int, Q):
        if size <= config.GRADIENT_NUMBA_MAX_HIDDEN:
            from .flow import GramSchmidtQR

            return GramSchmidtQR(Q)
        from ..reference.norms import QRSteps

        return QRSteps(Q)

    def forward_tangent(self, batch):
        from .tangent import run_tangent_numba

        S, D = batch.size, batch.hidden
        dtype = batch.dtype              # a float32 batch is widened: the tangents run in float64 here
        R, W, b, X, eta, alpha, sign, leak = (readonly(getattr(batch, k), np.float64)
                                              for k in ("R", "W", "b", "X", "eta", "alpha", "sign", "leak"))
        logs = np.empty(S)
        M = np.full((S, D, D), np.nan)
        J = np.full((S, D, D), np.nan)
        bad = np.zeros(S, dtype=np.int64)
        run_tangent_numba(batch.gated, R, W, b, X, readonly(batch.group, np.int64), eta, readonly(batch.K, np.int64),
                          alpha, sign, readonly(batch.g0prev, np.bool_), readonly(batch.act, np.int64), leak, logs, M,
                          J, bad)
        return logs, M.astype(dtype, copy=False), J.astype(dtype, copy=False), bad

    def sweep_region_size(self, hidden: int, steps: int, inner: int = 1):
        """Settings per sweep region: ``config.SWEEP_REGION_FLOPS`` of forward-tangent work
        (≈ 2·D³·(T·K + 4) flops a setting), within ``config.SWEEP_REGION_RANGE``: 64 for the
        ``sweep`` workload (D = 32, T = 200, K ≤ 10), ≈ 1000 at T = 2, where a region's fixed cost
        would otherwise outweigh its kernels."""
        lo, hi = config.SWEEP_REGION_RANGE
        work = 2.0 * float(hidden) ** 3 * (float(steps) * max(1, int(inner)) + 4)
        return int(min(hi, max(lo, config.SWEEP_REGION_FLOPS // work)))

    def implicit_solve(self, A, C, act: str, leak: float, *, method: str = "auto", tol: float, max_iter=None,
                       Z0=None, steps: int = 30, dt: float = 1.0):
        """``auto`` per point, jitted, up to ``config.IMPLICIT_NUMBA_MAX_UNITS`` stacked units (a
        Newton step on a few units costs about one Picard step: it hands over early); the
        reference's batched form past it (one BLAS product per Picard step over all points wins),
        and for every other method."""
        if method == "auto" and C.shape[1] <= config.IMPLICIT_NUMBA_MAX_UNITS and act in ACTIVATION_IDS:
            return implicit_auto(A, C, act, leak, tol, max_iter or 10, steps, dt, Z0)
        return super().implicit_solve(A, C, act, leak, method=method, tol=tol, max_iter=max_iter, Z0=Z0,
                                      steps=steps, dt=dt)

    def reverse_cotangents(self, form, S, lam, incoming):
        return self.kernel("reverse_cotangents", form)(self, form, S, lam, incoming)

    def train_forward(self, form, x, h0):
        return self.kernel("train_forward", form)(self, form, x, h0)

    def train_backward(self, form, tape, ext):
        return self.kernel("train_backward", form)(self, form, tape, ext)

    def gradient_flow(self, form, x, h0, H, *, dL_dhT=None, step_norms: bool = True):
        return self.kernel("gradient_flow", form)(self, form, x, h0, H, dL_dhT, step_norms)

    def lyapunov_logr(self, form, x, h0, H, Q):
        return self.kernel("lyapunov_logr", form)(self, form, x, h0, H, Q)

    def sweep_gradients(self, forms, xs=None):
        """``_sweep_tangent``: forward tangents, σ₁ by the certified power iteration."""
        return _sweep_tangent(self, forms, xs)


def implicit_auto(A, C, act, leak, tol, max_iter, steps, dt, Z0):
    from ..reference.implicit import auto_solve as reference
    from .implicit import auto_solve

    N, U = C.shape
    Z, res = np.empty((N, U)), np.empty(N)
    its, conv, code = np.empty(N, dtype=np.int64), np.empty(N, dtype=np.bool_), np.empty(N, dtype=np.int8)
    start = np.zeros((N, U)) if Z0 is None else np.ascontiguousarray(Z0, dtype=np.float64)
    try:
        auto_solve(np.ascontiguousarray(A), np.ascontiguousarray(C), start, ACTIVATION_IDS[act], float(leak), float(tol),
                   int(max_iter), 0.9, int(steps), float(dt), 50, Z, res, its, conv, code)
    except Exception:  # a singular Newton matrix inside the loop: the batched path handles it per point
        return reference(A, C, act, leak, tol, max_iter, steps, dt, Z0)
    return Z, res, its, conv, code


__all__ = ["NumbaBackend", "previous_states"]

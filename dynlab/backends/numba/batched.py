"""Batch-vectorised kernels written once against an array namespace ``xp`` (NumPy or CuPy).

Each inner step is one matrix product over the whole batch (BLAS / cuBLAS) and the
element-wise update — on the CPU one fused numba pass that applies φ, updates the state,
writes h_t into H by index and checks finiteness as it writes (``FusedOps``); plain in-place
ufunc passes of ``xp`` otherwise (``UfuncOps``) — with every buffer allocated once.  For the one-line cells and
the iRNN the product takes the stacked operand [h, x_t, 1] against [U W b]ᵀ, so the input
drive W x_t + b costs nothing extra (never a (B, T, D) temporary either).  The element-wise
updates come from an ``ops`` object: plain ufuncs of ``xp`` (CuPy, or NumPy without numba),
or, on the CPU, numba's fused single passes that also check finiteness as they write.
Without a fused check, finiteness is checked every ``check_every`` steps through a single
reduction (a sum is non-finite iff an entry is, or it overflowed, which the exact check then
rules out); on a GPU a larger interval avoids a device synchronisation per step.
"""
from __future__ import annotations

import numpy as np

from ... import config
from ...activations import ACTIVATION_IDS, ACTIVATIONS
from ._arrays import gemm_rows, readonly

SIGMOID = ACTIVATION_IDS["sigmoid"]


def phi_inplace(z, act: int, leak: float, xp, tmp=None):
    """Overwrite z with φ(z) for the activation id ``act``."""
    name = ACTIVATIONS[act]
    if name == "tanh":
        xp.tanh(z, out=z)
    elif name == "relu":
        xp.maximum(z, 0.0, out=z)
    elif name == "sigmoid":  # σ(z) = (1 + tanh(z/2)) / 2: stable for every z
        z *= 0.5
        xp.tanh(z, out=z)
        z += 1.0
        z *= 0.5
    elif name == "leaky-relu":
        tmp = xp.multiply(z, leak, out=tmp)
        xp.maximum(z, tmp, out=z)
    elif name == "abs":
        xp.abs(z, out=z)
    # identity: nothing to do


def _finite(h, xp) -> bool:
    if bool(xp.isfinite(h.sum())):
        return True
    return bool(xp.isfinite(h).all())


def _first_bad(H, upto, xp, T):
    """Per-sequence first step < upto with a non-finite entry (T if none)."""
    ok = xp.isfinite(H[:, :upto]).all(axis=2)
    bad = np.full(H.shape[0], T, dtype=np.int64)
    okh = ok.get() if hasattr(ok, "get") else np.asarray(ok)
    for i in range(okh.shape[0]):
        idx = np.flatnonzero(~okh[i])
        if idx.size:
            bad[i] = idx[0]
    return bad


def _drive(x, WT, b, t, out, xp):
    xp.matmul(x[:, t], WT, out=out)
    out += b
    return out


class UfuncOps:
    """The element-wise updates as plain in-place ufunc passes of ``xp`` (NumPy or CuPy).

    The state lives in the first D columns of the product operand ``buf`` = [s, x_t, 1]
    (see ``_augmented``).  The methods that end a time step write h_t into H[:, t] and return
    None: finiteness is then checked by ``_run`` every ``check_every`` steps.  ``FusedOps``
    offers the same methods as single fused numba passes (φ applied in the same pass) that
    also report finiteness.
    """

    def __init__(self, xp):
        self.xp = xp

    def phi(self, z, act, leak, xp, tmp):
        """z ← φ(z) with the namespace's ufuncs."""
        phi_inplace(z, act, leak, xp, tmp)

    def _axpby(self, buf, D, z, a, e):
        """s ← a·s + e·z for s = buf[:, :D] (z is overwritten)."""
        xp = self.xp
        s = buf[:, :D]
        xp.multiply(s, a, out=s)
        xp.multiply(z, e, out=z)
        xp.add(s, z, out=s)

    def irnn_inner(self, buf, D, z, a, e, act, leak, tmp):
        """s ← a·s + e·φ(z) for s = buf[:, :D] (z is overwritten)."""
        phi_inplace(z, act, leak, self.xp, tmp)
        self._axpby(buf, D, z, a, e)

    def irnn_last(self, buf, D, z, a, e, hp, H, t, sign, start, act, leak, tmp):
        """H[:, t] ← a·s + e·φ(z) − sign·h_{t−1} (= h_t), where hp holds h_{t−1} and then h_t;
        s ← start·h_t (the next step's s_0)."""
        xp = self.xp
        s, out = buf[:, :D], H[:, t]
        self.irnn_inner(buf, D, z, a, e, act, leak, tmp)
        if sign == 1:
            xp.subtract(s, hp, out=out)
        else:
            xp.add(s, hp, out=out)
        hp[...] = out
        xp.multiply(out, start, out=s)

    def gated_step(self, buf, D, z, a, gain, H, t, act, leak, tmp):
        """H[:, t] ← a·h + gain·φ(z);  h ← H[:, t], for h = buf[:, :D]."""
        xp = self.xp
        h, out = buf[:, :D], H[:, t]
        phi_inplace(z, act, leak, xp, tmp)
        if a == 0.0:
            xp.multiply(z, gain, out=out)
        else:
            xp.multiply(h, a, out=out)
            xp.multiply(z, gain, out=z)
            xp.add(out, z, out=out)
        h[...] = out

    def gru_finish(self, gi, gh, bhn, h, H, t, act, leak, tmp):
        """PyTorch's GRU step from gi = W_ih x + b_ih + [b_hr; b_hz; 0] and gh = h W_hhᵀ:
        h ← n + z ⊙ (h − n) (= (1 − z) ⊙ n + z ⊙ h), H[:, t] ← h.  tmp: (B, 4D) scratch."""
        xp = self.xp
        D = h.shape[1]
        rz, n, t2 = tmp[:, :2 * D], tmp[:, 2 * D:3 * D], tmp[:, 3 * D:]
        xp.add(gi[:, :2 * D], gh[:, :2 * D], out=rz)
        phi_inplace(rz, SIGMOID, 0.0, xp)
        xp.add(gh[:, 2 * D:], bhn, out=n)
        n *= rz[:, :D]
        n += gi[:, 2 * D:]
        phi_inplace(n, act, leak, xp, t2)
        xp.subtract(h, n, out=t2)
        t2 *= rz[:, D:]
        xp.add(n, t2, out=h)
        H[:, t] = h

    def lstm_finish(self, gi, gh, h, c, H, t, act, leak, tmp):
        """PyTorch's LSTM step from gi = W_ih x + b_ih + b_hh and gh = h W_hhᵀ (gh is
        overwritten): c ← f ⊙ c + i ⊙ g, h ← o ⊙ φ(c), H[:, t] ← [h, c].  tmp: (B, D) scratch."""
        xp = self.xp
        D = h.shape[1]
        gh += gi
        ifo = (gh[:, :2 * D], gh[:, 3 * D:])
        for blk in ifo:
            phi_inplace(blk, SIGMOID, 0.0, xp)
        g = gh[:, 2 * D:3 * D]
        phi_inplace(g, act, leak, xp, tmp)
        c *= gh[:, D:2 * D]
        g *= gh[:, :D]
        c += g
        xp.multiply(c, 1.0, out=h)
        phi_inplace(h, act, leak, xp, tmp)
        h *= gh[:, 3 * D:]
        H[:, t, :D] = h
        H[:, t, D:] = c


class FusedOps:
    """The ``ops`` above as single fused numba passes of ``loops.py`` (NumPy
    arrays on the CPU; φ evaluated in float64, also for float32 arrays) that also report
    finiteness.  loops is imported on first construction, so this module loads without
    numba (CuPy, or NumPy's ufuncs)."""

    def __init__(self):
        from . import loops as numba_cpu

        self._k = numba_cpu

    def phi(self, z, act, leak, xp, tmp):
        """z ← φ(z): loops.py's vectorised float64 tanh/sigmoid, NumPy's ufuncs otherwise."""
        if z.dtype == np.float64 and z.flags.c_contiguous and act in (0, 2):
            (self._k.tanh_inplace if act == 0 else self._k.sigmoid_inplace)(z)
        else:
            phi_inplace(z, act, leak, xp, tmp)

    def irnn_inner(self, buf, D, z, a, e, act, leak, tmp=None):
        """s ← a·s + e·φ(z): φ and the update in one pass."""
        self._k.irnn_inner(buf, D, z, a, e, act, leak)

    def irnn_last(self, buf, D, z, a, e, hp, H, t, sign, start, act, leak, tmp=None):
        """H[:, t], hp ← a·s + e·φ(z) − sign·hp;  s ← start·H[:, t];  returns finiteness."""
        return bool(self._k.irnn_last(buf, D, z, a, e, hp, H, t, sign, start, act, leak))

    def gated_step(self, buf, D, z, a, gain, H, t, act, leak, tmp=None):
        """H[:, t] ← a·h + gain·φ(z);  h ← H[:, t];  returns finiteness."""
        return bool(self._k.gated_step(buf, D, z, a, gain, H, t, act, leak))

    def gru_finish(self, gi, gh, bhn, h, H, t, act, leak, tmp):
        return bool(self._k.gru_finish(gi, gh, bhn, h, H, t, act, leak))

    def lstm_finish(self, gi, gh, h, c, H, t, act, leak, tmp):
        return bool(self._k.lstm_finish(gi, gh, h, c, H, t, act, leak))


def _ops(xp, fused):
    if fused and xp is np:
        return FusedOps()
    return UfuncOps(xp)


def _augmented(R, W, b, B, dtype, xp):
    """The stacked product matrix [R W b]ᵀ ((D+d+1) × D) and its operand buffer (B × (D+d+1)).

    With buf = [h, x_t, 1] one matrix product buf·[R W b]ᵀ gives R h + W x_t + b: the input
    drive costs no separate product and no separate addition pass.
    """
    D, d = W.shape
    AT = xp.empty((D + d + 1, D), dtype=dtype)
    AT[:D] = R.T
    AT[D:D + d] = W.T
    AT[D + d] = b
    buf = xp.empty((B, D + d + 1), dtype=dtype)
    buf[:, D + d] = 1.0
    return AT, buf


def _output(H, shape, dtype, xp):
    """The (B, T, D) output array the fused passes write by index: ``H`` itself when it is
    C-contiguous (a caller's block of a larger array, say), else a fresh one.  Returns
    (array, the caller's H or None)."""
    if H is not None and H.flags.c_contiguous:
        return H, None
    return xp.empty(shape, dtype=dtype), H


def _deliver(H, given):
    """Copy into the caller's non-contiguous ``given`` array, if any; return what was filled."""
    if given is None:
        return H
    given[...] = H
    return given


def _run(step, x, h0, H, stop, check_every, xp):
    """Drive ``step(t, h_prev, out) -> finite`` over t; returns bad (first non-finite step per sequence).

    ``step`` returns True/False when it checked its own output for finiteness (fused
    kernels do so in the same pass), or None; then the states are checked every
    ``check_every`` steps through a single reduction.  NumPy's overflow warnings are silenced:
    a diverging state is reported in ``bad`` (and by ``simulate``, with where it happened).
    """
    B, T = x.shape[0], x.shape[1]
    h = h0
    last = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(T):
            ok = step(t, h, H[:, t])
            h = H[:, t]
            if ok is None:
                if (t + 1) % check_every == 0 or t == T - 1:
                    ok = _finite(H[:, last:t + 1], xp)
                    last = t + 1
            if ok is False and stop:
                return _first_bad(H, t + 1, xp, T)
        return _first_bad(H, T, xp, T) if not stop else np.full(B, T, dtype=np.int64)


def _matmul_rows(xp, rows):
    """matmul(a, b, out=out) in calls of ``rows`` rows of a each on the CPU (``_arrays.gemm_rows``:
    the BLAS's small-matrix path, where it has one), in one call otherwise."""
    def matmul(a, b, out):
        if xp is not np or rows >= a.shape[0]:
            return xp.matmul(a, b, out=out)
        for lo in range(0, a.shape[0], rows):
            np.matmul(a[lo:lo + rows], b, out=out[lo:lo + rows])
        return out

    return matmul


def gated(R, W, b, x, h0, a, gain, act, leak, stop=True, check_every=1, xp=np, H=None, fused=True, small=False):
    """h_t = a h_{t-1} + gain φ(R h_{t-1} + W x_t + b), whole batch per step.

    Per step: one product [h, x_t, 1]·[R W b]ᵀ (by rows with ``small``: ``_matmul_rows``), φ in
    place, and one combining pass (fused with the finiteness check when ``fused`` and xp is
    NumPy).
    """
    B, T = x.shape[0], x.shape[1]
    D = R.shape[0]
    d = W.shape[1]
    AT, buf = _augmented(R, W, b, B, x.dtype, xp)
    H, given = _output(H, (B, T, D), x.dtype, xp)
    z = xp.empty((B, D), dtype=x.dtype)
    tmp = xp.empty((B, D), dtype=x.dtype)
    buf[:, :D] = h0
    ops = _ops(xp, fused)
    matmul = _matmul_rows(xp, gemm_rows(B, D + d + 1, D, small))

    def step(t, h, out):
        buf[:, D:D + d] = x[:, t]
        matmul(buf, AT, z)
        return ops.gated_step(buf, D, z, a, gain, H, t, act, leak, tmp)

    bad = _run(step, x, h0, H, stop, check_every, xp)
    return _deliver(H, given), bad


def irnn(U, W, b, x, h0, eta, alpha, K, g0prev, sign, act, leak, stop=True, check_every=1,
         xp=np, H=None, fused=True, small=False):
    """iRNN eq. 5 in the equivalent s-form: with s_k = g_k ± h_{m-1},

        s_k = (1 − η_k α) s_{k−1} + η_k φ(U s_{k−1} + W x_m + b),   h_m = s_K ∓ h_{m-1},

    which needs one matrix product ([s, x_m, 1]·[U W b]ᵀ), φ in place and one combining
    pass per inner step (the product by rows with ``small``: ``_matmul_rows``).  ``eta`` is a
    host (rows, K) table.
    """
    B, T = x.shape[0], x.shape[1]
    D = U.shape[0]
    d = W.shape[1]
    AT, buf = _augmented(U, W, b, B, x.dtype, xp)
    H, given = _output(H, (B, T, D), x.dtype, xp)
    hp = xp.array(h0, dtype=x.dtype, order="C")  # h_{t−1}, kept apart from H (see loops.irnn_last)
    z = xp.empty((B, D), dtype=x.dtype)
    tmp = xp.empty((B, D), dtype=x.dtype)
    eta = np.asarray(eta, dtype=np.float64)
    start = (1.0 + sign) if g0prev else float(sign)
    sign = float(sign)
    xp.multiply(h0, start, out=buf[:, :D])
    ops = _ops(xp, fused)
    matmul = _matmul_rows(xp, gemm_rows(B, D + d + 1, D, small))

    def step(t, h, out):
        buf[:, D:D + d] = x[:, t]
        e = eta[t] if eta.shape[0] > 1 else eta[0]
        for k in range(K):
            matmul(buf, AT, z)
            a_k, e_k = 1.0 - float(e[k]) * alpha, float(e[k])
            if k < K - 1:
                ops.irnn_inner(buf, D, z, a_k, e_k, act, leak, tmp)
            else:
                return ops.irnn_last(buf, D, z, a_k, e_k, hp, H, t, sign, start, act, leak, tmp)

    bad = _run(step, x, h0, H, stop, check_every, xp)
    return _deliver(H, given), bad


def ctrnn(U, W, b, x, h0, tau, alpha, dt, substeps, rk4, act, leak, stop=True, check_every=1,
          xp=np, H=None, fused=True):
    """Fixed-step Euler or RK4 for τ ġ = −α g + φ(U g + W x_m + b), whole batch per step."""
    B, T = x.shape[0], x.shape[1]
    D = U.shape[0]
    UT = xp.ascontiguousarray(U.T)
    WT = xp.ascontiguousarray(W.T)
    H = xp.empty((B, T, D), dtype=x.dtype) if H is None else H
    ct = xp.empty((B, D), dtype=x.dtype)
    g = xp.empty((B, D), dtype=x.dtype)
    y = xp.empty((B, D), dtype=x.dtype)
    ks = [xp.empty((B, D), dtype=x.dtype) for _ in range(4)]
    tmp = xp.empty((B, D), dtype=x.dtype)
    hstep = dt / substeps
    ops = _ops(xp, fused)

    def f(v, out):
        xp.matmul(v, UT, out=out)
        out += ct
        ops.phi(out, act, leak, xp, tmp)
        xp.multiply(v, alpha, out=tmp)
        out -= tmp
        out /= tau

    def step(t, h, out):
        _drive(x, WT, b, t, ct, xp)
        g[...] = h
        for _ in range(substeps):
            k1, k2, k3, k4 = ks
            f(g, k1)
            if not rk4:
                k1 *= hstep
                xp.add(g, k1, out=g)
                continue
            xp.multiply(k1, 0.5 * hstep, out=y); xp.add(y, g, out=y); f(y, k2)
            xp.multiply(k2, 0.5 * hstep, out=y); xp.add(y, g, out=y); f(y, k3)
            xp.multiply(k3, hstep, out=y); xp.add(y, g, out=y); f(y, k4)
            k2 += k3
            k2 *= 2.0
            k1 += k2
            k1 += k4
            k1 *= hstep / 6.0
            xp.add(g, k1, out=g)
        out[...] = g

    bad = _run(step, x, h0, H, stop, check_every, xp)
    return H, bad


# ----------------------------------------------------------------------------------------
# GRU and LSTM (PyTorch's equations and gate order, dynlab.models.gru_lstm).  The input drive
# of every gate, gi_t = W_ih x_t + b_ih (+ the hidden biases that fold into it), is one GEMM
# over a chunk of time steps at once — (n·B, d)·(d, G·D) from x laid out time-major, so gi_t
# is a contiguous (B, G·D) block — and each step is then ONE GEMM gh = h·W_hhᵀ over the whole
# batch ((B, D)·(D, G·D)) and one element-wise pass for the gates (a single fused numba pass
# that also checks finiteness, on the CPU; in-place ufuncs of ``xp`` otherwise).  A chunk
# holds at most ``config.GATED_DRIVE_CHUNK_ENTRIES`` entries, so the drive of a long sequence
# is never held whole and the block a step reads is still in cache.

def _chunk_steps(B, T, G):
    """Steps per chunk of the input drive: at most ``config.GATED_DRIVE_CHUNK_ENTRIES`` entries."""
    return int(max(1, min(T, config.GATED_DRIVE_CHUNK_ENTRIES // max(1, B * G))))


def _jitted_loop(W_ih, bias, x, state_args, H, lstm, act, leak, stop, small=False):
    """The whole time loop as one numba call (``loops.gated_batch``: the
    same drive chunks, products and fused pass as the per-step path below, so the same
    numbers, without Python between the steps — which, holding the GIL, kept two blocks of
    sequences on two threads from running side by side).  Returns bad as ``_run`` does."""
    B, T, d = x.shape
    G = W_ih.shape[0]
    gi = np.empty((_chunk_steps(B, T, G), B, G), dtype=x.dtype)
    from . import loops as numba_cpu

    W_hhT, bhn, h, c = state_args
    first = numba_cpu.gated_batch(readonly(np.swapaxes(x, 0, 1)), readonly(W_ih.T), readonly(bias, x.dtype),
                                  readonly(W_hhT), readonly(bhn), h, c, H, lstm, act, leak, stop, gi,
                                  np.empty((B, G), dtype=x.dtype), gemm_rows(B, W_hhT.shape[0], G, small))
    if not stop:
        return _first_bad(H, T, np, T)
    return _first_bad(H, first + 1, np, T) if first >= 0 else np.full(B, T, dtype=np.int64)


def _drive_chunks(W_ih, bias, x, xp):
    """A function t → gi_t (B, G·D) that computes the drive a chunk of steps at a time."""
    B, T, d = x.shape
    G = W_ih.shape[0]
    n = _chunk_steps(B, T, G)
    xT = xp.ascontiguousarray(xp.swapaxes(x, 0, 1))          # (T, B, d)
    WT = xp.ascontiguousarray(W_ih.T)                          # (d, G·D)
    gi = xp.empty((n, B, G), dtype=x.dtype)
    state = {"lo": -1}

    def get(t):
        lo = (t // n) * n
        if state["lo"] != lo:
            m = min(n, T - lo)
            flat = gi[:m].reshape(m * B, G)
            xp.matmul(xT[lo:lo + m].reshape(m * B, d), WT, out=flat)
            flat += bias
            state["lo"] = lo
        return gi[t - lo]

    return get


def gru(W_ih, W_hh, b_ih, b_hh, x, h0, act, leak, stop=True, check_every=1, xp=np, H=None, fused=True,
        small=False):
    """PyTorch's GRU over the whole batch (see above); W_ih (3D, d), W_hh (3D, D), b_ih, b_hh
    (3D), x (B, T, d), h0 (B, D), all in the precision wanted.  Returns (H (B, T, D), bad)."""
    B, T, _ = x.shape
    D = W_hh.shape[1]
    bias = b_ih.copy()
    bias[:2 * D] += b_hh[:2 * D]                               # b_hr, b_hz fold into the drive
    bhn = xp.ascontiguousarray(b_hh[2 * D:])                   # b_hn sits inside r ⊙ (…)
    if xp is np:
        bhn = readonly(bhn)                                    # one compile of gru_finish (_arrays.readonly)
    W_hhT = xp.ascontiguousarray(W_hh.T)                       # (D, 3D)
    H = xp.empty((B, T, D), dtype=x.dtype) if H is None else H
    h = xp.array(h0, dtype=x.dtype, order="C")
    if fused and xp is np and H.flags.c_contiguous:
        return H, _jitted_loop(W_ih, bias, x, (W_hhT, bhn, h, np.empty((1, 1), dtype=x.dtype)), H, False, act, leak,
                               stop, small)
    drive = _drive_chunks(W_ih, bias, x, xp)
    gh = xp.empty((B, 3 * D), dtype=x.dtype)
    tmp = xp.empty((B, 4 * D), dtype=x.dtype)
    ops = _ops(xp, fused)

    def step(t, _h, out):
        gi = drive(t)
        xp.matmul(h, W_hhT, out=gh)
        return ops.gru_finish(gi, gh, bhn, h, H, t, act, leak, tmp)

    bad = _run(step, x, h0, H, stop, check_every, xp)
    return H, bad


def lstm(W_ih, W_hh, b_ih, b_hh, x, s0, act, leak, stop=True, check_every=1, xp=np, H=None, fused=True,
         small=False):
    """PyTorch's LSTM over the whole batch on the state s = [h; c] (see above); W_ih (4D, d),
    W_hh (4D, D), b_ih, b_hh (4D), x (B, T, d), s0 (B, 2D).  Returns (H (B, T, 2D), bad)."""
    B, T, _ = x.shape
    D = W_hh.shape[1]
    W_hhT = xp.ascontiguousarray(W_hh.T)                       # (D, 4D)
    H = xp.empty((B, T, 2 * D), dtype=x.dtype) if H is None else H
    h = xp.array(s0[:, :D], dtype=x.dtype, order="C")
    c = xp.array(s0[:, D:], dtype=x.dtype, order="C")
    if fused and xp is np and H.flags.c_contiguous:
        return H, _jitted_loop(W_ih, b_ih + b_hh, x, (W_hhT, np.empty(1, dtype=x.dtype), h, c), H, True, act, leak,
                               stop, small)
    drive = _drive_chunks(W_ih, b_ih + b_hh, x, xp)
    gh = xp.empty((B, 4 * D), dtype=x.dtype)
    tmp = xp.empty((B, D), dtype=x.dtype)
    ops = _ops(xp, fused)

    def step(t, _h, out):
        gi = drive(t)
        xp.matmul(h, W_hhT, out=gh)
        return ops.lstm_finish(gi, gh, h, c, H, t, act, leak, tmp)

    bad = _run(step, x, s0, H, stop, check_every, xp)
    return H, bad

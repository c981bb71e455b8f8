"""The numba backend's batched kernels: each inner step one matrix product over the whole batch
(BLAS) and one fused element-wise pass of ``loops.py`` that applies φ, updates the state, writes
h_t into H by index and checks finiteness as it writes (every buffer allocated once).

For the one-line cells and the iRNN the product takes the stacked operand [h, x_t, 1] against
[U W b]ᵀ, so the input drive W x_t + b costs nothing extra (never a (B, T, D) temporary either).
The per-element arithmetic is ``dynlab.backends.cells``' (through the ``loops`` passes); the
NumPy reference (``dynlab.backends.reference``) is what the tests compare against.
"""
from __future__ import annotations

import numpy as np

from ... import config
from .. import cells
from . import loops
from ._arrays import gemm_rows, readonly


def _first_bad(H, upto, T):
    """Per-sequence first step < upto with a non-finite entry (T if none)."""
    ok = np.isfinite(H[:, :upto]).all(axis=2)
    bad = np.full(H.shape[0], T, dtype=np.int64)
    for i in range(ok.shape[0]):
        idx = np.flatnonzero(~ok[i])
        if idx.size:
            bad[i] = idx[0]
    return bad


def _augmented(R, W, b, B, dtype):
    """The stacked product matrix [R W b]ᵀ ((D+d+1) × D) and its operand buffer (B × (D+d+1)).

    With buf = [h, x_t, 1] one matrix product buf·[R W b]ᵀ gives R h + W x_t + b: the input
    drive costs no separate product and no separate addition pass.
    """
    D, d = W.shape
    AT = np.empty((D + d + 1, D), dtype=dtype)
    AT[:D] = R.T
    AT[D:D + d] = W.T
    AT[D + d] = b
    buf = np.empty((B, D + d + 1), dtype=dtype)
    buf[:, D + d] = 1.0
    return AT, buf


def _output(H, shape, dtype):
    """The (B, T, D) output array the fused passes write by index: ``H`` itself when it is
    C-contiguous (a caller's block of a larger array, say), else a fresh one.  Returns
    (array, the caller's H or None)."""
    if H is not None and H.flags.c_contiguous:
        return H, None
    return np.empty(shape, dtype=dtype), H


def _deliver(H, given):
    """Copy into the caller's non-contiguous ``given`` array, if any; return what was filled."""
    if given is None:
        return H
    given[...] = H
    return given


def _run(step, B, T, H, stop):
    """Drive ``step(t) -> finite`` over t = 0..T−1; returns bad (the first non-finite step per
    sequence, T where none).  NumPy's overflow warnings are silenced: a diverging state is
    reported in ``bad`` (and by ``simulate``, with where it happened)."""
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(T):
            if not step(t) and stop:
                return _first_bad(H, t + 1, T)
        return _first_bad(H, T, T) if not stop else np.full(B, T, dtype=np.int64)


def _matmul_rows(rows):
    """matmul(a, b, out=out) in calls of ``rows`` rows of a each (``_arrays.gemm_rows``: the
    BLAS's small-matrix path, where it has one), in one call otherwise."""
    def matmul(a, b, out):
        if rows >= a.shape[0]:
            return np.matmul(a, b, out=out)
        for lo in range(0, a.shape[0], rows):
            np.matmul(a[lo:lo + rows], b, out=out[lo:lo + rows])
        return out

    return matmul


def gated(R, W, b, x, h0, a, gain, act, leak, stop=True, H=None, small=False):
    """h_t = a h_{t-1} + gain φ(R h_{t-1} + W x_t + b), whole batch per step.

    Per step: one product [h, x_t, 1]·[R W b]ᵀ (by rows with ``small``: ``_matmul_rows``) and one
    fused pass (``loops.gated_step``).
    """
    B, T = x.shape[0], x.shape[1]
    D = R.shape[0]
    d = W.shape[1]
    AT, buf = _augmented(R, W, b, B, x.dtype)
    H, given = _output(H, (B, T, D), x.dtype)
    z = np.empty((B, D), dtype=x.dtype)
    buf[:, :D] = h0
    matmul = _matmul_rows(gemm_rows(B, D + d + 1, D, small))

    def step(t):
        buf[:, D:D + d] = x[:, t]
        matmul(buf, AT, z)
        return loops.gated_step(buf, D, z, a, gain, H, t, act, leak)

    bad = _run(step, B, T, H, stop)
    return _deliver(H, given), bad


def irnn(U, W, b, x, h0, eta, alpha, K, g0prev, sign, act, leak, stop=True, H=None, small=False):
    """iRNN eq. 5 in the equivalent s-form: with s_k = g_k ± h_{m-1},

        s_k = (1 − η_k α) s_{k−1} + η_k φ(U s_{k−1} + W x_m + b),   h_m = s_K ∓ h_{m-1},

    which needs one matrix product ([s, x_m, 1]·[U W b]ᵀ) and one fused pass per inner step
    (``loops.irnn_inner``/``irnn_last``; the product by rows with ``small``).  ``eta`` is a host
    (rows, K) table.
    """
    B, T = x.shape[0], x.shape[1]
    D = U.shape[0]
    d = W.shape[1]
    AT, buf = _augmented(U, W, b, B, x.dtype)
    H, given = _output(H, (B, T, D), x.dtype)
    hp = np.array(h0, dtype=x.dtype, order="C")  # h_{t−1}, kept apart from H (see loops.irnn_last)
    z = np.empty((B, D), dtype=x.dtype)
    eta = np.asarray(eta, dtype=np.float64)
    start = (1.0 + sign) if g0prev else float(sign)
    sign = float(sign)
    np.multiply(h0, start, out=buf[:, :D])
    matmul = _matmul_rows(gemm_rows(B, D + d + 1, D, small))

    def step(t):
        buf[:, D:D + d] = x[:, t]
        e = eta[t] if eta.shape[0] > 1 else eta[0]
        for k in range(K):
            matmul(buf, AT, z)
            e_k = float(e[k])
            a_k = cells.irnn_keep(e_k, alpha)     # on s = g + σ h the inner step is a one-line cell
            if k < K - 1:
                loops.irnn_inner(buf, D, z, a_k, e_k, act, leak)
            else:
                return bool(loops.irnn_last(buf, D, z, a_k, e_k, hp, H, t, sign, start, act, leak))

    bad = _run(step, B, T, H, stop)
    return _deliver(H, given), bad


def ctrnn(U, W, b, x, h0, tau, alpha, dt, substeps, rk4, act, leak, stop=True, H=None):
    """Fixed-step Euler or RK4 for τ ġ = −α g + φ(U g + W x_m + b), whole batch per step: per
    evaluation of the vector field one product v Uᵀ and one fused pass (``loops.ctrnn_rate_pass``)."""
    B, T = x.shape[0], x.shape[1]
    D = U.shape[0]
    UT = np.ascontiguousarray(U.T)
    WT = np.ascontiguousarray(W.T)
    H, given = _output(H, (B, T, D), x.dtype)
    ct = np.empty((B, D), dtype=x.dtype)
    g = np.empty((B, D), dtype=x.dtype)
    y = np.empty((B, D), dtype=x.dtype)
    ks = [np.empty((B, D), dtype=x.dtype) for _ in range(4)]
    hstep = dt / substeps

    def f(v, out):
        np.matmul(v, UT, out=out)
        loops.ctrnn_rate_pass(out, v, ct, tau, alpha, act, leak)

    def step(t):
        np.matmul(x[:, t], WT, out=ct)
        np.add(ct, b, out=ct)
        g[...] = h0 if t == 0 else H[:, t - 1]
        for _ in range(substeps):
            k1, k2, k3, k4 = ks
            f(g, k1)
            if not rk4:
                k1 *= hstep
                np.add(g, k1, out=g)
                continue
            np.multiply(k1, 0.5 * hstep, out=y); np.add(y, g, out=y); f(y, k2)
            np.multiply(k2, 0.5 * hstep, out=y); np.add(y, g, out=y); f(y, k3)
            np.multiply(k3, hstep, out=y); np.add(y, g, out=y); f(y, k4)
            k2 += k3
            k2 *= 2.0
            k1 += k2
            k1 += k4
            k1 *= hstep / 6.0
            np.add(g, k1, out=g)
        H[:, t] = g
        return bool(np.isfinite(g.sum())) or bool(np.isfinite(g).all())

    bad = _run(step, B, T, H, stop)
    return _deliver(H, given), bad


# ----------------------------------------------------------------------------------------
# GRU and LSTM (PyTorch's equations and gate order, dynlab.models.gru_lstm).  The input drive
# of every gate, gi_t = W_ih x_t + b_ih (+ the hidden biases that fold into it), is one GEMM
# over a chunk of time steps at once — (n·B, d)·(d, G·D) from x laid out time-major, so gi_t
# is a contiguous (B, G·D) block — and each step is then ONE GEMM gh = h·W_hhᵀ over the whole
# batch ((B, D)·(D, G·D)) and one fused pass for the gates that also checks finiteness, the
# whole loop in one numba call (``loops.gated_batch``: no Python between the steps, which,
# holding the GIL, kept two blocks of sequences on two threads from running side by side).  A
# chunk holds at most ``config.GATED_DRIVE_CHUNK_ENTRIES`` entries, so the drive of a long
# sequence is never held whole and the block a step reads is still in cache.

def _chunk_steps(B, T, G):
    """Steps per chunk of the input drive: at most ``config.GATED_DRIVE_CHUNK_ENTRIES`` entries."""
    return int(max(1, min(T, config.GATED_DRIVE_CHUNK_ENTRIES // max(1, B * G))))


def _jitted_loop(W_ih, bias, x, W_hhT, bhn, h, c, H, lstm, act, leak, stop, small):
    """The time loop of ``gru``/``lstm`` as one ``loops.gated_batch`` call; returns bad as ``_run``."""
    B, T, d = x.shape
    G = W_ih.shape[0]
    gi = np.empty((_chunk_steps(B, T, G), B, G), dtype=x.dtype)
    first = loops.gated_batch(readonly(np.swapaxes(x, 0, 1)), readonly(W_ih.T), readonly(bias, x.dtype),
                              readonly(W_hhT), readonly(bhn), h, c, H, lstm, act, leak, stop, gi,
                              np.empty((B, G), dtype=x.dtype), gemm_rows(B, W_hhT.shape[0], G, small))
    if not stop:
        return _first_bad(H, T, T)
    return _first_bad(H, first + 1, T) if first >= 0 else np.full(B, T, dtype=np.int64)


def gru(W_ih, W_hh, b_ih, b_hh, x, h0, act, leak, stop=True, H=None, small=False):
    """PyTorch's GRU over the whole batch (see above); W_ih (3D, d), W_hh (3D, D), b_ih, b_hh
    (3D), x (B, T, d), h0 (B, D), all in the precision wanted.  Returns (H (B, T, D), bad)."""
    B, T, _ = x.shape
    D = W_hh.shape[1]
    bias = b_ih.copy()
    bias[:2 * D] += b_hh[:2 * D]                               # b_hr, b_hz fold into the drive
    bhn = readonly(np.ascontiguousarray(b_hh[2 * D:]))        # b_hn sits inside r ⊙ (…)
    H, given = _output(H, (B, T, D), x.dtype)
    h = np.array(h0, dtype=x.dtype, order="C")
    bad = _jitted_loop(W_ih, bias, x, np.ascontiguousarray(W_hh.T), bhn, h, np.empty((1, 1), dtype=x.dtype), H,
                       False, act, leak, stop, small)
    return _deliver(H, given), bad


def lstm(W_ih, W_hh, b_ih, b_hh, x, s0, act, leak, stop=True, H=None, small=False):
    """PyTorch's LSTM over the whole batch on the state s = [h; c] (see above); W_ih (4D, d),
    W_hh (4D, D), b_ih, b_hh (4D), x (B, T, d), s0 (B, 2D).  Returns (H (B, T, 2D), bad)."""
    B, T, _ = x.shape
    D = W_hh.shape[1]
    H, given = _output(H, (B, T, 2 * D), x.dtype)
    h = np.array(s0[:, :D], dtype=x.dtype, order="C")
    c = np.array(s0[:, D:], dtype=x.dtype, order="C")
    bad = _jitted_loop(W_ih, b_ih + b_hh, x, np.ascontiguousarray(W_hh.T), np.empty(1, dtype=x.dtype), h, c, H,
                       True, act, leak, stop, small)
    return _deliver(H, given), bad

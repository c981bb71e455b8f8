"""The simulation kernels (``sim_cell``, ``sim_irnn``, ``sim_ctrnn``, ``sim_gated``): one block per
slice of sequences, the whole time loop in the launch (``kernels.py``: the layout every kernel keeps).
"""
from __future__ import annotations

import math

from numba import cuda  # a module global: the simulator swaps it for its own in the kernels' globals
from numba.extending import register_jitable

from ..cells import one, zero, cell_update, irnn_inner, ctrnn_rate, gru_unit, lstm_unit


def build(FT, NINF, NAN) -> dict:
    """The kernels of this module for the floating type FT (constants NINF, NAN in that type)."""
    jit = cuda.jit

    @register_jitable
    def _flags(fl, st, bad, b0, nb, t, T, stop):
        """After a step: record the first non-finite step of each sequence of the slice."""
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        for p in range(tid, nb, nt):
            if fl[p] != 0:
                if bad[b0 + p] == T:
                    bad[b0 + p] = t
                if stop:
                    st[p] = 0
            fl[p] = 0
        cuda.syncthreads()

    @register_jitable
    def _slice_start(buf, Wg, nw, wsh, h0, col, h, st, fl, bad, b0, nb, D, T):
        """The start of a simulation block: the weights copied to the front of shared memory
        when ``wsh`` (the kernel then reads them there: a device function cannot return a view
        of shared memory), h ← h0[:, col:col + D] of the slice, every sequence alive, ``bad`` = T."""
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        if wsh:
            for p in range(tid, nw, nt):
                buf[p] = Wg[p]
        for p in range(tid, nb * D, nt):
            b = p // D
            h[p] = h0[b0 + b, col + p - b * D]
        for p in range(tid, nb, nt):
            st[p] = 1
            fl[p] = 0
            bad[b0 + p] = T
        cuda.syncthreads()

    @register_jitable
    def _record(g, h, H, st, fl, b0, nb, D, t):
        """After a step: h ← g and H[:, t] ← g for the live sequences, a flag for a non-finite
        entry; then ``_flags`` (the caller) reads the flags."""
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        for p in range(tid, nb * D, nt):
            b = p // D
            if st[b] != 0:
                v = g[p]
                h[p] = v
                H[b0 + b, t, p - b * D] = v
                if not math.isfinite(v):
                    fl[b] = 1
        cuda.syncthreads()

    @jit
    def sim_cell(RT, C, h0, a, gain, act, leak, stop, per, wsh, H, Z, bad):
        """h_t = a h_{t−1} + γ φ(R h_{t−1} + c_t) for a slice of ``per`` sequences; Z (B, T, D)
        also gets the pre-activations z_t (for the MASO partition; a (1, 1, 1) dummy skips it).
        Shared: [RT (D²) if wsh] h, h' (per·D), alive, flag (per)."""
        buf = cuda.shared.array(0, FT)
        B, T, D = H.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        b0 = cuda.blockIdx.x * per
        nb = min(per, B - b0)
        off = D * D if wsh else 0
        h = buf[off:off + per * D]
        hn = buf[off + per * D:off + 2 * per * D]
        st = buf[off + 2 * per * D:off + 2 * per * D + per]
        fl = buf[off + 2 * per * D + per:off + 2 * per * D + 2 * per]
        wantz = Z.shape[0] == B and Z.shape[1] == T and Z.shape[2] == D   # a (1, 1, 1) dummy: none
        W = buf[0:D * D] if wsh else RT
        _slice_start(buf, RT, D * D, wsh, h0, 0, h, st, fl, bad, b0, nb, D, T)
        for t in range(T):
            for p in range(tid, nb * D, nt):
                b = p // D
                i = p - b * D
                if st[b] != 0:
                    z = C[b0 + b, t, i]
                    for j in range(D):
                        z += W[j * D + i] * h[b * D + j]
                    v = cell_update(a, gain, h[p], z, act, leak)
                    hn[p] = v
                    H[b0 + b, t, i] = v
                    if wantz:
                        Z[b0 + b, t, i] = z
                    if not math.isfinite(v):
                        fl[b] = 1
            cuda.syncthreads()
            for p in range(tid, nb * D, nt):
                h[p] = hn[p]
            _flags(fl, st, bad, b0, nb, t, T, stop)

    @jit
    def sim_irnn(UT, C, h0, eta, alpha, K, g0prev, sign, act, leak, stop, per, wsh, H, bad):
        """iRNN eq. 5 for a slice of sequences: K inner steps g ← g + η_k (φ(U s + c) − α s),
        s = g + σ h (``cells.irnn_inner``); eta (rows, K), rows = 1 or T.
        Shared: [UT] h, g, s (per·D), alive, flag."""
        buf = cuda.shared.array(0, FT)
        B, T, D = H.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        b0 = cuda.blockIdx.x * per
        nb = min(per, B - b0)
        off = D * D if wsh else 0
        h = buf[off:off + per * D]
        g = buf[off + per * D:off + 2 * per * D]
        s = buf[off + 2 * per * D:off + 3 * per * D]
        st = buf[off + 3 * per * D:off + 3 * per * D + per]
        fl = buf[off + 3 * per * D + per:off + 3 * per * D + 2 * per]
        rows = eta.shape[0]
        W = buf[0:D * D] if wsh else UT
        _slice_start(buf, UT, D * D, wsh, h0, 0, h, st, fl, bad, b0, nb, D, T)
        for t in range(T):
            r = t if rows > 1 else 0
            for p in range(tid, nb * D, nt):
                g[p] = h[p] if g0prev else zero(h[p])
            cuda.syncthreads()
            for k in range(K):
                e = eta[r, k]
                for p in range(tid, nb * D, nt):
                    s[p] = g[p] + sign * h[p]
                cuda.syncthreads()
                for p in range(tid, nb * D, nt):
                    b = p // D
                    i = p - b * D
                    if st[b] != 0:
                        z = C[b0 + b, t, i]
                        for j in range(D):
                            z += W[j * D + i] * s[b * D + j]
                        g[p] = irnn_inner(g[p], s[p], z, e, alpha, act, leak)
                cuda.syncthreads()
            _record(g, h, H, st, fl, b0, nb, D, t)
            _flags(fl, st, bad, b0, nb, t, T, stop)

    @jit
    def sim_ctrnn(UT, C, h0, tau, alpha, step, substeps, rk4, act, leak, stop, per, wsh, H, bad):
        """τ ġ = −α g + φ(U g + c_t), ``substeps`` Euler or classical RK4 steps of ``step`` per
        interval (``cells.ctrnn_rate``).  Shared: [UT] g, ya, yb, acc (per·D), alive, flag."""
        buf = cuda.shared.array(0, FT)
        B, T, D = H.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        b0 = cuda.blockIdx.x * per
        nb = min(per, B - b0)
        off = D * D if wsh else 0
        n = per * D
        g = buf[off:off + n]
        ya = buf[off + n:off + 2 * n]
        yb = buf[off + 2 * n:off + 3 * n]
        acc = buf[off + 3 * n:off + 4 * n]
        st = buf[off + 4 * n:off + 4 * n + per]
        fl = buf[off + 4 * n + per:off + 4 * n + 2 * per]
        two = one(step) + one(step)
        half = step / two
        sixth = step / (two + two + two)
        W = buf[0:D * D] if wsh else UT
        _slice_start(buf, UT, D * D, wsh, h0, 0, g, st, fl, bad, b0, nb, D, T)
        for t in range(T):
            for _ in range(substeps):
                nstage = 4 if rk4 else 1
                for stage in range(nstage):
                    # stage input y: g, ya, yb, ya; output: ya, yb, ya, g (Euler: ya, then copied)
                    y = g
                    if stage == 2:
                        y = yb
                    elif stage != 0:
                        y = ya
                    for p in range(tid, nb * D, nt):
                        b = p // D
                        i = p - b * D
                        if st[b] != 0:
                            z = C[b0 + b, t, i]
                            for j in range(D):
                                z += W[j * D + i] * y[b * D + j]
                            k = ctrnn_rate(y[p], z, tau, alpha, act, leak)
                            if not rk4:
                                ya[p] = g[p] + step * k
                            elif stage == 0:
                                acc[p] = k
                                ya[p] = g[p] + half * k
                            elif stage == 1:
                                acc[p] += two * k
                                yb[p] = g[p] + half * k
                            elif stage == 2:
                                acc[p] += two * k
                                ya[p] = g[p] + step * k
                            else:
                                acc[p] += k
                                g[p] = g[p] + sixth * acc[p]
                    cuda.syncthreads()
                if not rk4:
                    for p in range(tid, nb * D, nt):
                        g[p] = ya[p]
                    cuda.syncthreads()
            _record(g, g, H, st, fl, b0, nb, D, t)
            _flags(fl, st, bad, b0, nb, t, T, stop)

    @jit
    def sim_gated(WT, GI, bhh, h0, lstm, act, leak, stop, per, wsh, H, bad):
        """PyTorch's GRU (lstm=False) or LSTM for a slice of sequences (``cells.gru_unit``,
        ``cells.lstm_unit``); GI (B, T, G·D) = x W_ihᵀ + b_ih (one GEMM before the launch), the
        recurrent products q = W_hh h here, WT[j·G·D + r] = W_hh[r, j].
        Shared: [WT (G·D·D)] h, h' (per·D), c (per·D, LSTM), alive, flag."""
        buf = cuda.shared.array(0, FT)
        B, T, n = H.shape
        D = h0.shape[1] // 2 if lstm else h0.shape[1]
        GD = bhh.shape[0]
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        b0 = cuda.blockIdx.x * per
        nb = min(per, B - b0)
        off = GD * D if wsh else 0
        h = buf[off:off + per * D]
        hn = buf[off + per * D:off + 2 * per * D]
        c = buf[off + 2 * per * D:off + 3 * per * D]
        st = buf[off + 3 * per * D:off + 3 * per * D + per]
        fl = buf[off + 3 * per * D + per:off + 3 * per * D + 2 * per]
        if lstm:
            _slice_start(buf, WT, GD * D, False, h0, D, c, st, fl, bad, b0, nb, D, T)
        W = buf[0:GD * D] if wsh else WT
        _slice_start(buf, WT, GD * D, wsh, h0, 0, h, st, fl, bad, b0, nb, D, T)
        for t in range(T):
            for p in range(tid, nb * D, nt):
                b = p // D
                i = p - b * D
                if st[b] != 0:
                    q0 = zero(h[p])
                    q1 = zero(h[p])
                    q2 = zero(h[p])
                    q3 = zero(h[p])
                    for j in range(D):
                        hj = h[b * D + j]
                        q0 += W[j * GD + i] * hj
                        q1 += W[j * GD + D + i] * hj
                        q2 += W[j * GD + 2 * D + i] * hj
                        if lstm:
                            q3 += W[j * GD + 3 * D + i] * hj
                    if lstm:
                        hv, cv, _i, _f, _g, _o, _t = lstm_unit(GI[b0 + b, t, i] + q0 + bhh[i],
                                                              GI[b0 + b, t, D + i] + q1 + bhh[D + i],
                                                              GI[b0 + b, t, 2 * D + i] + q2 + bhh[2 * D + i],
                                                              GI[b0 + b, t, 3 * D + i] + q3 + bhh[3 * D + i],
                                                              c[p], act, leak)
                        c[p] = cv
                        H[b0 + b, t, D + i] = cv
                        if not math.isfinite(cv):
                            fl[b] = 1
                    else:
                        hv, _r, _z, _n, _an = gru_unit(GI[b0 + b, t, i] + (q0 + bhh[i]),
                                                       GI[b0 + b, t, D + i] + (q1 + bhh[D + i]),
                                                       GI[b0 + b, t, 2 * D + i], q2 + bhh[2 * D + i], h[p], act,
                                                       leak)
                    hn[p] = hv
                    H[b0 + b, t, i] = hv
                    if not math.isfinite(hv):
                        fl[b] = 1
            cuda.syncthreads()
            for p in range(tid, nb * D, nt):
                h[p] = hn[p]
            _flags(fl, st, bad, b0, nb, t, T, stop)

    @jit
    def gate_step(GI, Q, bhh, t, lstm, act, leak, stop, hc, cc, hn, cn, H, bad):
        """One step of PyTorch's GRU (lstm=False) or LSTM for every sequence, after the step's
        recurrent products Q = h_{t−1} W_hhᵀ (B, G·D) were formed as one GEMM over the batch
        (cuBLAS on a GPU): the gates of each (sequence, unit) pair (``cells.gru_unit``,
        ``cells.lstm_unit``), one thread each (grid-stride).  Reads h_{t−1} (hc) and c_{t−1} (cc),
        writes h_t, c_t to hn, cn and to H[:, t] ([h; c] for the LSTM).  ``bad`` (B,) holds T until
        a sequence's first non-finite state, then that step (every thread that sees one writes the
        same t); with ``stop`` a sequence past its failure is carried unchanged (its rows from the
        failure on are NaN-filled by the host, as the fused kernel's).  No shared memory."""
        B, D = hc.shape
        T = H.shape[1]
        for p in range(cuda.grid(1), B * D, cuda.gridsize(1)):
            b = p // D
            i = p - b * D
            if stop and bad[b] < t:
                hn[b, i] = hc[b, i]
                cn[b, i] = cc[b, i]
                continue
            if lstm:
                hv, cv, _i, _f, _g, _o, _t = lstm_unit(GI[b, t, i] + Q[b, i] + bhh[i],
                                                      GI[b, t, D + i] + Q[b, D + i] + bhh[D + i],
                                                      GI[b, t, 2 * D + i] + Q[b, 2 * D + i] + bhh[2 * D + i],
                                                      GI[b, t, 3 * D + i] + Q[b, 3 * D + i] + bhh[3 * D + i],
                                                      cc[b, i], act, leak)
                cn[b, i] = cv
                H[b, t, D + i] = cv
                if not math.isfinite(cv) and bad[b] == T:
                    bad[b] = t
            else:
                hv, _r, _z, _n, _an = gru_unit(GI[b, t, i] + (Q[b, i] + bhh[i]),
                                               GI[b, t, D + i] + (Q[b, D + i] + bhh[D + i]),
                                               GI[b, t, 2 * D + i], Q[b, 2 * D + i] + bhh[2 * D + i], hc[b, i], act,
                                               leak)
            hn[b, i] = hv
            H[b, t, i] = hv
            if not math.isfinite(hv) and bad[b] == T:
                bad[b] = t

    return {"sim_cell": sim_cell, "sim_irnn": sim_irnn, "sim_ctrnn": sim_ctrnn, "sim_gated": sim_gated,
            "gate_step": gate_step}

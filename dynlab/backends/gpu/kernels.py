"""The GPU backend's fused ``@cuda.jit`` kernels: the whole time loop inside one launch.

Layout, shared by every kernel:

* **One block per independent unit of work** — a slice of ``per`` sequences (simulate), one
  point (Jacobians; a grid-stride loop over the points), one sweep setting (forward tangents),
  one sequence (backward products, QR steps), one cotangent row (the MASO reverse pass), one
  implicit point.  Blocks never talk to each other, so a launch is one chunk of work.
* **Threads stride over the block's items**: the (sequence, unit) pairs of a slice, the
  (row, column) entries of a matrix, so any block size is correct; the host picks a power of
  two (``threads``) — the tree reductions (``block_sum``) need one.
* **Shared memory** holds the vectors of the step (states, inner-step states, slopes) and, when
  they fit the budget the host computed (``wsh``), the recurrent weights — transposed (``RT[j·D
  + i] = R[i, j]``), so that the threads of consecutive units read consecutive addresses whether
  the weights sit in shared or global memory.  D×D iterates (tangents, products, Gram matrices)
  sit in shared memory when they fit and in a per-block slice of a global scratch array when not
  (``scratch``/``msh``), selected once per launch.
* **Synchronisation**: ``cuda.syncthreads`` between the phases of a step (the matrix-vector
  products read the whole previous vector); every thread reaches every barrier — the divergent
  work (a finished sequence, a padding thread) is skipped inside the phases, never around them.

Each cell's arithmetic is ``dynlab.backends.cells`` (``register_jitable``, precision-generic):
the kernels only add the products R h, U s, W_hh h and the bookkeeping.  A kernel compiles once
per floating type of its arrays; the scalars are passed in that type (``GPUBackend`` casts them),
so a float32 kernel runs in float32 throughout.  Dynamic shared memory has one type per kernel,
so the kernels are built per floating type (``kernels(dtype)``).

Divergence (``bad``): the 0-based step of the first non-finite state of a sequence (T: none);
with ``stop`` a sequence is not advanced past it (its rows from there on are filled with NaN by
the host, as the reference leaves them).  Forward tangents report the 1-based step (0: none).
"""
from __future__ import annotations

import functools
import math
import types

import numpy as np
from numba import cuda  # a module global: the simulator swaps it for its own in the kernels' globals
from numba.extending import register_jitable  # device helpers: compiled into each kernel, no device query

from .. import cells


def _device_functions():
    @register_jitable
    def block_sum(red, v):
        """Σ of v over the block's threads (blockDim a power of two); every thread gets it."""
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        red[tid] = v
        cuda.syncthreads()
        s = nt // 2
        while s > 0:
            if tid < s:
                red[tid] += red[tid + s]
            cuda.syncthreads()
            s //= 2
        out = red[0]
        cuda.syncthreads()
        return out

    return block_sum


#: The kernels ``kernels(dtype)`` builds.
KERNEL_NAMES = ("sim_cell", "sim_irnn", "sim_ctrnn", "sim_gated", "jac_cell", "jac_irnn", "jac_ctrnn", "jac_gated",
                "tangent", "products", "top_sv", "qr_steps", "reverse", "picard", "flow_rk4")


@functools.lru_cache(maxsize=None)
def kernels(dtype) -> types.SimpleNamespace:
    """The kernels for one floating type (float32 or float64)."""
    import numba

    FT = numba.float32 if np.dtype(dtype) == np.float32 else numba.float64
    NINF = FT(-math.inf)   # constants in the kernel's own type (a float64 literal would promote)
    NAN = FT(math.nan)
    block_sum = _device_functions()
    phi, dphi, one, zero = cells.phi, cells.dphi, cells.one, cells.zero
    cell_update, cell_slope = cells.cell_update, cells.cell_slope
    irnn_inner, irnn_slope, ctrnn_rate = cells.irnn_inner, cells.irnn_slope, cells.ctrnn_rate
    gru_unit, gru_slopes, lstm_unit, lstm_slopes = cells.gru_unit, cells.gru_slopes, cells.lstm_unit, cells.lstm_slopes
    jit = cuda.jit

    # ======================================================================== simulate
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
        wantz = Z.shape[0] == B
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
                        hv, cv, _i, _f, _g, _o = lstm_unit(GI[b0 + b, t, i] + q0 + bhh[i],
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

    # ======================================================================== Jacobians
    @jit
    def jac_cell(R, W, b, a, gain, act, leak, X, Hp, wantx, J, Jx, Snew):
        """J = a I + diag(γ φ'(z)) R, Jx = diag(γ φ'(z)) W, z = R h + W x + b (``cells.cell_slope``),
        and the next state, at every point (grid-stride over the points).  Shared: h, slopes (D)."""
        buf = cuda.shared.array(0, FT)
        N, D = Hp.shape
        d = X.shape[1]
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        hp = buf[0:D]
        sl = buf[D:2 * D]
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            for i in range(tid, D, nt):
                hp[i] = Hp[pt, i]
            cuda.syncthreads()
            for i in range(tid, D, nt):
                zr = zero(hp[i])
                for j in range(D):
                    zr += R[i, j] * hp[j]
                zx = zero(hp[i])
                for m in range(d):
                    zx += W[i, m] * X[pt, m]
                z = zr + zx + b[i]
                sl[i] = cell_slope(gain, z, act, leak)
                Snew[pt, i] = cell_update(a, gain, hp[i], z, act, leak)
            cuda.syncthreads()
            for e in range(tid, D * D, nt):
                i = e // D
                j = e - i * D
                v = sl[i] * R[i, j]
                J[pt, i, j] = v + a if i == j else v
            if wantx:
                for e in range(tid, D * d, nt):
                    i = e // d
                    Jx[pt, i, e - i * d] = sl[i] * W[i, e - i * d]
            cuda.syncthreads()

    @register_jitable
    def _tangent_update(U, W, M, Mn, sl, keep, w, D, tid, nt):
        """Mn = keep·M + diag(sl)(U M + [0 | W]) over the columns of M (D × w, w = D or D + d;
        the columns past D carry the input tangent, which gets + W)."""
        for e in range(tid, D * w, nt):
            i = e // w
            j = e - i * w
            u = zero(keep)
            for l in range(D):
                u += U[i, l] * M[l * w + j]
            if j >= D:
                u += W[i, j - D]
            Mn[e] = keep * M[e] + sl[i] * u

    @jit
    def jac_irnn(U, W, b, E, alpha, K, g0prev, sign, act, leak, X, Hp, wantx, scratch, msh, J, Jx):
        """The iRNN's step Jacobian (``reference.jacobians.irnn``): [P | Gx] ← keep_k [P | Gx] +
        diag(η_k φ'(z_k)) (U [P | Gx] + [0 | W]) over the K inner steps from [I | 0]
        (``cells.irnn_slope``, keep_k = 1 − η_k α), then J = a P − σ I (a = 1 + σ or σ), Jx = Gx.
        E (N, K) per-point η.  Shared: h_prev, c, g, s, slopes (D); [P, P'] (D·w each) when
        ``msh``, else the block's slice of ``scratch`` (blocks, 2, D·w)."""
        buf = cuda.shared.array(0, FT)
        N, D = Hp.shape
        d = X.shape[1]
        w = D + d if wantx else D
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        hp = buf[0:D]
        c = buf[D:2 * D]
        g = buf[2 * D:3 * D]
        s = buf[3 * D:4 * D]
        sl = buf[4 * D:5 * D]
        sx = min(cuda.blockIdx.x, scratch.shape[0] - 1)   # a (1, …) dummy when the iterates are shared
        M = scratch[sx, 0]
        Mn = scratch[sx, 1]
        if msh:
            M = buf[5 * D:5 * D + D * w]
            Mn = buf[5 * D + D * w:5 * D + 2 * D * w]
        ga = sign + one(sign) if g0prev else sign
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            for i in range(tid, D, nt):
                hp[i] = Hp[pt, i]
                cx = zero(sign)
                for m in range(d):
                    cx += W[i, m] * X[pt, m]
                c[i] = cx + b[i]
                g[i] = Hp[pt, i] if g0prev else zero(sign)
            for e in range(tid, D * w, nt):
                i = e // w
                M[e] = one(sign) if i == e - i * w else zero(sign)
            cuda.syncthreads()
            for k in range(K):
                ek = E[pt, k]
                for i in range(tid, D, nt):
                    s[i] = g[i] + sign * hp[i]
                cuda.syncthreads()
                for i in range(tid, D, nt):
                    z = zero(sign)
                    for l in range(D):
                        z += U[i, l] * s[l]
                    z += c[i]
                    sl[i] = irnn_slope(z, ek, act, leak)
                    g[i] = irnn_inner(g[i], s[i], z, ek, alpha, act, leak)
                cuda.syncthreads()
                _tangent_update(U, W, M, Mn, sl, one(ek) - ek * alpha, w, D, tid, nt)
                cuda.syncthreads()
                for e in range(tid, D * w, nt):
                    M[e] = Mn[e]
                cuda.syncthreads()
            for e in range(tid, D * D, nt):
                i = e // D
                j = e - i * D
                v = M[i * w + j] * ga
                J[pt, i, j] = v - sign if i == j else v
            if wantx:
                for e in range(tid, D * d, nt):
                    i = e // d
                    Jx[pt, i, e - i * d] = M[i * w + D + e - i * d]
            cuda.syncthreads()

    @jit
    def jac_ctrnn(U, W, b, tau, alpha, step, substeps, rk4, act, leak, X, Hp, wantx, scratch, msh, J, Jx):
        """The exact derivative of ``substeps`` Euler or RK4 steps of τ ġ = −α g + φ(U g + c):
        every stage (y, Y = ∂y/∂[h | x]) gives k = (φ(z) − α y)/τ and
        K = (diag(φ'(z)) (U Y + [0 | W]) − α Y)/τ, z = U y + c (``reference.jacobians.ctrnn_fixed``).
        Shared: c, g, ya, yb, acc, φ' (D); the tangents G, Ya, Yb, ACC (D·w) in shared memory or
        the block's slice of ``scratch`` (blocks, 4, D·w)."""
        buf = cuda.shared.array(0, FT)
        N, D = Hp.shape
        d = X.shape[1]
        w = D + d if wantx else D
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        c = buf[0:D]
        g = buf[D:2 * D]
        ya = buf[2 * D:3 * D]
        yb = buf[3 * D:4 * D]
        acc = buf[4 * D:5 * D]
        dp = buf[5 * D:6 * D]
        yo = buf[6 * D:7 * D]
        sx = min(cuda.blockIdx.x, scratch.shape[0] - 1)
        G = scratch[sx, 0]
        Ya = scratch[sx, 1]
        Yb = scratch[sx, 2]
        AC = scratch[sx, 3]
        if msh:
            G = buf[7 * D:7 * D + D * w]
            Ya = buf[7 * D + D * w:7 * D + 2 * D * w]
            Yb = buf[7 * D + 2 * D * w:7 * D + 3 * D * w]
            AC = buf[7 * D + 3 * D * w:7 * D + 4 * D * w]
        o = one(tau)
        two = o + o
        half = step / two
        sixth = step / (two + two + two)
        nstage = 4 if rk4 else 1
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            for i in range(tid, D, nt):
                cx = zero(tau)
                for m in range(d):
                    cx += W[i, m] * X[pt, m]
                c[i] = cx + b[i]
                g[i] = Hp[pt, i]
            for e in range(tid, D * w, nt):
                i = e // w
                G[e] = o if i == e - i * w else zero(tau)
            cuda.syncthreads()
            for _ in range(substeps):
                for stage in range(nstage):
                    # stage inputs (y, Y): (g, G), (ya, Ya), (yb, Yb), (ya, Ya)
                    y = g
                    Y = G
                    if stage == 2:
                        y = yb
                        Y = Yb
                    elif stage != 0:
                        y = ya
                        Y = Ya
                    for i in range(tid, D, nt):
                        z = zero(tau)
                        for l in range(D):
                            z += U[i, l] * y[l]
                        z += c[i]
                        dp[i] = dphi(act, z, leak)
                        k = ctrnn_rate(y[i], z, tau, alpha, act, leak)
                        if not rk4:
                            yo[i] = g[i] + step * k
                        elif stage == 0:
                            acc[i] = k
                            yo[i] = g[i] + half * k
                        elif stage == 1:
                            acc[i] += two * k
                            yo[i] = g[i] + half * k
                        elif stage == 2:
                            acc[i] += two * k
                            yo[i] = g[i] + step * k
                        else:
                            acc[i] += k
                            yo[i] = g[i] + sixth * acc[i]
                    cuda.syncthreads()
                    for e in range(tid, D * w, nt):
                        i = e // w
                        j = e - i * w
                        u = zero(tau)
                        for l in range(D):
                            u += U[i, l] * Y[l * w + j]
                        ye = Y[e]
                        if j >= D:
                            u += W[i, j - D]
                        kk = (dp[i] * u - alpha * ye) / tau
                        # the next stage's input goes to the buffer this stage did not read
                        if not rk4:
                            AC[e] = G[e] + step * kk
                        elif stage == 0:
                            AC[e] = kk
                            Ya[e] = G[e] + half * kk
                        elif stage == 1:
                            AC[e] += two * kk
                            Yb[e] = G[e] + half * kk
                        elif stage == 2:
                            AC[e] += two * kk
                            Ya[e] = G[e] + step * kk
                        else:
                            AC[e] += kk
                    cuda.syncthreads()
                    # move the stage's vector output to where the next stage reads it
                    for i in range(tid, D, nt):
                        if not rk4 or stage == 3:
                            g[i] = yo[i]
                        elif stage == 1:
                            yb[i] = yo[i]
                        else:
                            ya[i] = yo[i]
                    for e in range(tid, D * w, nt):
                        if not rk4:
                            G[e] = AC[e]
                        elif stage == 3:
                            G[e] = G[e] + sixth * AC[e]
                    cuda.syncthreads()
            for e in range(tid, D * D, nt):
                i = e // D
                J[pt, i, e - i * D] = G[i * w + e - i * D]
            if wantx:
                for e in range(tid, D * d, nt):
                    i = e // d
                    Jx[pt, i, e - i * d] = G[i * w + D + e - i * d]
            cuda.syncthreads()

    @jit
    def jac_gated(W_ih, W_hh, GI, bhh, lstm, act, leak, Hp, wantx, J, Jx, Snew):
        """PyTorch's GRU or LSTM step Jacobian (``cells.gru_slopes``, ``cells.lstm_slopes``):
        each row a combination of the rows of the gate blocks of W_hh (W_ih for Jx) with per-unit
        coefficients; an LSTM's on s = [h; c].  GI (N, G·D) = x W_ihᵀ + b_ih.
        Shared: h (D), five coefficients per unit (5·D)."""
        buf = cuda.shared.array(0, FT)
        N, n = Hp.shape
        D = W_hh.shape[1]
        d = W_ih.shape[1]
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        hp = buf[0:D]
        k0 = buf[D:2 * D]
        k1 = buf[2 * D:3 * D]
        k2 = buf[3 * D:4 * D]
        k3 = buf[4 * D:5 * D]
        k4 = buf[5 * D:6 * D]
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            for i in range(tid, D, nt):
                hp[i] = Hp[pt, i]
            cuda.syncthreads()
            for i in range(tid, D, nt):
                q0 = zero(hp[i])
                q1 = zero(hp[i])
                q2 = zero(hp[i])
                q3 = zero(hp[i])
                for j in range(D):
                    q0 += W_hh[i, j] * hp[j]
                    q1 += W_hh[D + i, j] * hp[j]
                    q2 += W_hh[2 * D + i, j] * hp[j]
                    if lstm:
                        q3 += W_hh[3 * D + i, j] * hp[j]
                if lstm:
                    cc = Hp[pt, D + i]
                    ag = GI[pt, 2 * D + i] + q2 + bhh[2 * D + i]
                    hv, cv, ig, fg, gg, og = lstm_unit(GI[pt, i] + q0 + bhh[i], GI[pt, D + i] + q1 + bhh[D + i], ag,
                                                       GI[pt, 3 * D + i] + q3 + bhh[3 * D + i], cc, act, leak)
                    ci, cf, cg, ho, hc = lstm_slopes(cc, cv, ig, fg, gg, og, ag, act, leak)
                    k0[i] = ci
                    k1[i] = cf
                    k2[i] = cg
                    k3[i] = ho
                    k4[i] = hc
                    hp_f = fg
                    Snew[pt, D + i] = cv
                    Snew[pt, i] = hv
                    J[pt, D + i, D + i] = fg
                    J[pt, i, D + i] = hc * hp_f
                else:
                    q = q2 + bhh[2 * D + i]
                    hv, r, z, nn, an = gru_unit(GI[pt, i] + (q0 + bhh[i]), GI[pt, D + i] + (q1 + bhh[D + i]),
                                                GI[pt, 2 * D + i], q, hp[i], act, leak)
                    cn, cnx, cr, cz, zz = gru_slopes(hp[i], r, z, nn, an, q, act, leak)
                    k0[i] = cn
                    k1[i] = cnx
                    k2[i] = cr
                    k3[i] = cz
                    k4[i] = zz
                    Snew[pt, i] = hv
            cuda.syncthreads()
            if lstm:
                for e in range(tid, D * D, nt):
                    i = e // D
                    j = e - i * D
                    dc = k1[i] * W_hh[D + i, j] + k0[i] * W_hh[i, j] + k2[i] * W_hh[2 * D + i, j]
                    J[pt, D + i, j] = dc
                    J[pt, i, j] = k4[i] * dc + k3[i] * W_hh[3 * D + i, j]
                    if i != j:
                        J[pt, D + i, D + j] = zero(dc)
                        J[pt, i, D + j] = zero(dc)
                if wantx:
                    for e in range(tid, D * d, nt):
                        i = e // d
                        m = e - i * d
                        dc = k1[i] * W_ih[D + i, m] + k0[i] * W_ih[i, m] + k2[i] * W_ih[2 * D + i, m]
                        Jx[pt, D + i, m] = dc
                        Jx[pt, i, m] = k4[i] * dc + k3[i] * W_ih[3 * D + i, m]
            else:
                for e in range(tid, D * D, nt):
                    i = e // D
                    j = e - i * D
                    v = k0[i] * W_hh[2 * D + i, j] + k2[i] * W_hh[i, j] + k3[i] * W_hh[D + i, j]
                    J[pt, i, j] = v + k4[i] if i == j else v
                if wantx:
                    for e in range(tid, D * d, nt):
                        i = e // d
                        m = e - i * d
                        Jx[pt, i, m] = k1[i] * W_ih[2 * D + i, m] + k2[i] * W_ih[i, m] + k3[i] * W_ih[D + i, m]
            cuda.syncthreads()

    # ======================================================================== sweep tangents
    @jit
    def tangent(gated, RT, C, eta, K, alpha, sign, g0prev, act, leak, scratch, msh, logs, M_out, J_out, diverged):
        """Forward tangents of one sweep setting per block (``base.Backend.forward_tangent``):
        the state and A = ∂h_m/∂h_1 (Frobenius-normalised, log scale in ``logs``) through the
        same update; at the last step A = [M_{T−1} | I] so that the same pass gives J_T.
        iRNN: St = G + σA, G ← G + η_k φ'(z) ⊙ (U St) − η_k α St (``cells.irnn_slope``);
        cells: G = a A + γ φ'(z) ⊙ (R A) (``cells.cell_slope``).  Shared: h, g, s, the slopes (D),
        the reduction (blockDim); A, G, St (D × 2D each) when ``msh`` ≥ 1, else the setting's
        slice of ``scratch`` (S, 3, 2D²); Rᵀ (D²) too when ``msh`` = 2."""
        buf = cuda.shared.array(0, FT)
        S, T, D = C.shape
        n = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        W2 = 2 * D
        h = buf[0:D]
        g = buf[D:2 * D]
        s = buf[2 * D:3 * D]
        sl = buf[3 * D:4 * D]
        red = buf[4 * D:4 * D + nt]
        off = 4 * D + nt
        sx = min(n, scratch.shape[0] - 1)
        A = scratch[sx, 0]
        G = scratch[sx, 1]
        St = scratch[sx, 2]
        if msh >= 1:
            A = buf[off:off + D * W2]
            G = buf[off + D * W2:off + 2 * D * W2]
            St = buf[off + 2 * D * W2:off + 3 * D * W2]
            off += 3 * D * W2
        R = RT[n]
        if msh >= 2:
            for e in range(tid, D * D, nt):
                buf[off + e] = RT[n, e]
            R = buf[off:off + D * D]
        a_ = alpha[n]
        sg = sign[n]
        prev = g0prev[n]
        o = one(a_)
        ze = zero(a_)
        for i in range(tid, D, nt):
            h[i] = ze
        for e in range(tid, D * D, nt):      # M_1 = I, row stride D until the last step
            i = e // D
            A[e] = o if i == e - i * D else ze
        cuda.syncthreads()
        lg = ze
        bad = 0
        for t in range(T):
            tang = t > 0
            w = W2 if (t == T - 1 and tang) else D
            if w == W2:      # A = [M | I]: M was stored with row stride D; lay it out with stride 2D
                for e in range(tid, D * D, nt):
                    St[e] = A[e]
                cuda.syncthreads()
                for e in range(tid, D * D, nt):
                    i = e // D
                    j = e - i * D
                    A[i * W2 + j] = St[e]
                    A[i * W2 + D + j] = o if i == j else ze
                cuda.syncthreads()
            if gated:
                for i in range(tid, D, nt):
                    z = C[n, t, i]
                    for j in range(D):
                        z += R[j * D + i] * h[j]
                    sl[i] = cell_slope(eta[n, 0], z, act[n], leak[n])
                    g[i] = cell_update(a_, eta[n, 0], h[i], z, act[n], leak[n])
                cuda.syncthreads()
                if tang:
                    for e in range(tid, D * w, nt):
                        i = e // w
                        j = e - i * w
                        u = ze
                        for l in range(D):
                            u += R[l * D + i] * A[l * w + j]
                        G[e] = a_ * A[e] + sl[i] * u
                cuda.syncthreads()
            else:
                for i in range(tid, D, nt):
                    g[i] = h[i] if prev else ze
                if tang:
                    for e in range(tid, D * w, nt):
                        G[e] = A[e] if prev else ze
                cuda.syncthreads()
                for k in range(K[n]):
                    ek = eta[n, k]
                    for i in range(tid, D, nt):
                        s[i] = g[i] + sg * h[i]
                    if tang:
                        for e in range(tid, D * w, nt):
                            St[e] = G[e] + sg * A[e]
                    cuda.syncthreads()
                    for i in range(tid, D, nt):
                        z = C[n, t, i]
                        for j in range(D):
                            z += R[j * D + i] * s[j]
                        sl[i] = irnn_slope(z, ek, act[n], leak[n])
                        g[i] = irnn_inner(g[i], s[i], z, ek, a_, act[n], leak[n])
                    cuda.syncthreads()
                    if tang:
                        ea = ek * a_
                        for e in range(tid, D * w, nt):
                            i = e // w
                            j = e - i * w
                            u = ze
                            for l in range(D):
                                u += R[l * D + i] * St[l * w + j]
                            G[e] = G[e] + (sl[i] * u - ea * St[e])
                    cuda.syncthreads()
            nf = ze
            for i in range(tid, D, nt):
                if not math.isfinite(g[i]):
                    nf = o
            if block_sum(red, nf) > ze:
                bad = t + 1
                break
            for i in range(tid, D, nt):
                h[i] = g[i]
            if tang:
                f2 = ze
                for e in range(tid, D * w, nt):
                    if e - (e // w) * w < D:
                        f2 += G[e] * G[e]
                f = math.sqrt(block_sum(red, f2))
                ok = f > ze and math.isfinite(f)
                if ok:
                    lg += math.log(f)
                elif f == ze:
                    lg = NINF
                else:
                    lg = NAN
                inv = o / f if ok else o
                for e in range(tid, D * D, nt):
                    i = e // D
                    j = e - i * D
                    v = G[i * w + j] * inv
                    if w == W2:
                        M_out[n, i, j] = v
                        J_out[n, i, j] = G[i * w + D + j]
                    else:
                        A[e] = v
            cuda.syncthreads()
        if tid == 0:
            diverged[n] = bad
            logs[n] = NAN if bad > 0 else lg
        if bad > 0 or T < 2:
            for e in range(tid, D * D, nt):
                i = e // D
                j = e - i * D
                M_out[n, i, j] = NAN if bad > 0 else (o if i == j else ze)
                J_out[n, i, j] = NAN if bad > 0 else ze

    # ======================================================================== norms, QR
    @jit
    def products(J, P, logs, g, wantg, S, Slog, glog):
        """The gradient flow's backward chain for one sequence per block, fed J (B, m, n, n) in
        time order and run from the end: S[b, j] = P̃, Slog[b, j] = ℓ, then P ← P J_j, kept
        Frobenius-normalised (P = e^ℓ P̃); with a cotangent, glog = ℓ + ln‖g P̃‖.  P (B, n·n) and
        logs (B,) carry on to the next chunk.  Shared: P, P' (n² each), g P̃ (n), reduction."""
        buf = cuda.shared.array(0, FT)
        B, m, n, _ = J.shape
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        Ps = buf[0:n * n]
        Pn = buf[n * n:2 * n * n]
        gp = buf[2 * n * n:2 * n * n + n]
        red = buf[2 * n * n + n:2 * n * n + n + nt]
        for e in range(tid, n * n, nt):
            Ps[e] = P[b, e]
        lg = logs[b]
        cuda.syncthreads()
        ze = zero(lg)
        for j in range(m - 1, -1, -1):
            for e in range(tid, n * n, nt):
                S[b, j, e // n, e - (e // n) * n] = Ps[e]
            if tid == 0:
                Slog[b, j] = lg
            if wantg:
                for k in range(tid, n, nt):
                    v = ze
                    for i in range(n):
                        v += g[b, i] * Ps[i * n + k]
                    gp[k] = v
                cuda.syncthreads()
                q = ze
                for k in range(tid, n, nt):
                    q += gp[k] * gp[k]
                q = block_sum(red, q)
                if tid == 0:
                    glog[b, j] = lg + (math.log(q) / (one(q) + one(q)) if q > ze else NINF)
            f2 = ze
            for e in range(tid, n * n, nt):
                i = e // n
                k = e - i * n
                v = ze
                for l in range(n):
                    v += Ps[i * n + l] * J[b, j, l, k]
                Pn[e] = v
                f2 += v * v
            f = math.sqrt(block_sum(red, f2))
            good = f > ze and math.isfinite(f)
            if good:
                lg += math.log(f)
            elif f == ze:
                lg = NINF
            else:
                lg = NAN
            inv = one(f) / f if good else one(f)
            for e in range(tid, n * n, nt):
                Ps[e] = Pn[e] * inv
            cuda.syncthreads()
        for e in range(tid, n * n, nt):
            P[b, e] = Ps[e]
        if tid == 0:
            logs[b] = lg

    @jit
    def top_sv(M, scratch, gsh, tol, max_sweeps, out):
        """σ₁ of every matrix of M (N, n, n) (grid-stride over the matrices): the largest
        eigenvalue of the Gram matrix G = MᵀM by the threshold cyclic Jacobi method — n/2
        disjoint rotations at a time in the round-robin (Brent–Luk) order, column then row
        updates — rotating every pair with |G_pq| > tol·max_i G_ii and stopping after a sweep
        that rotated none; σ₁ = √max_i G_ii.  The off-diagonal left is then below tol·λ_max per
        entry, which moves λ_max by at most n·tol·λ_max (Gershgorin), and the rounding of G and
        of the rotations about as much: σ₁ to a relative n·ε or so, i.e. exact to rounding (NaN
        for a non-finite matrix).  Shared: the rotations (c, s of n/2 pairs), the reduction; G
        (n²) in shared memory when ``gsh`` else in the block's slice of ``scratch``."""
        buf = cuda.shared.array(0, FT)
        N, n, _ = M.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        mm = n + (n % 2)
        half = mm // 2
        cs = buf[0:half]
        sn = buf[half:2 * half]
        red = buf[2 * half:2 * half + nt]
        G = scratch[min(cuda.blockIdx.x, scratch.shape[0] - 1)]
        if gsh:
            G = buf[2 * half + nt:2 * half + nt + n * n]
        o = one(tol)
        ze = zero(tol)
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            nf = ze
            for e in range(tid, n * n, nt):
                i = e // n
                j = e - i * n
                v = ze
                for l in range(n):
                    v += M[pt, l, i] * M[pt, l, j]
                G[e] = v
                if not math.isfinite(v):
                    nf = o
            if block_sum(red, nf) > ze:
                if tid == 0:
                    out[pt] = NAN
                continue
            for sweep in range(max_sweeps):
                top = ze
                for i in range(tid, n, nt):
                    top = max(top, G[i * n + i])
                red[tid] = top
                cuda.syncthreads()
                if tid == 0:
                    for i in range(1, nt):
                        top = max(top, red[i])
                    red[0] = top
                cuda.syncthreads()
                thr = tol * red[0]
                cuda.syncthreads()
                rotated = ze
                for rnd in range(mm - 1):
                    for k in range(tid, half, nt):
                        p = 0 if k == 0 else (rnd + k - 1) % (mm - 1) + 1
                        q = (rnd + mm - 2 - k) % (mm - 1) + 1
                        c = o
                        s_ = ze
                        if p < n and q < n:
                            gpq = G[p * n + q]
                            if abs(gpq) > thr:
                                tau = (G[q * n + q] - G[p * n + p]) / (gpq + gpq)
                                tt = o / (abs(tau) + math.sqrt(o + tau * tau))
                                if tau < ze:
                                    tt = -tt
                                c = o / math.sqrt(o + tt * tt)
                                s_ = tt * c
                                rotated = o
                        cs[k] = c
                        sn[k] = s_
                    cuda.syncthreads()
                    for e in range(tid, half * n, nt):     # columns p, q of G J
                        k = e // n
                        i = e - k * n
                        p = 0 if k == 0 else (rnd + k - 1) % (mm - 1) + 1
                        q = (rnd + mm - 2 - k) % (mm - 1) + 1
                        if p < n and q < n and sn[k] != ze:
                            x = G[i * n + p]
                            y = G[i * n + q]
                            G[i * n + p] = cs[k] * x - sn[k] * y
                            G[i * n + q] = sn[k] * x + cs[k] * y
                    cuda.syncthreads()
                    for e in range(tid, half * n, nt):     # rows p, q of Jᵀ (G J)
                        k = e // n
                        j = e - k * n
                        p = 0 if k == 0 else (rnd + k - 1) % (mm - 1) + 1
                        q = (rnd + mm - 2 - k) % (mm - 1) + 1
                        if p < n and q < n and sn[k] != ze:
                            x = G[p * n + j]
                            y = G[q * n + j]
                            G[p * n + j] = cs[k] * x - sn[k] * y
                            G[q * n + j] = sn[k] * x + cs[k] * y
                    cuda.syncthreads()
                if block_sum(red, rotated) == ze:
                    break
            top = ze
            for i in range(tid, n, nt):
                top = max(top, G[i * n + i])
            red[tid] = top
            cuda.syncthreads()
            if tid == 0:
                for i in range(1, nt):
                    top = max(top, red[i])
                out[pt] = math.sqrt(top)
            cuda.syncthreads()

    @jit
    def qr_steps(J, Q, out):
        """Benettin's QR for one sequence per block, fed J (B, m, n, n) in time order:
        A = J_t Q, then classical Gram–Schmidt twice (orthogonal to rounding, like Householder),
        ln R_ii = ln‖a_i − Q_{<i} Q_{<i}ᵀ a_i‖ (|R_ii| does not depend on the column signs, so it
        equals LAPACK's); Q (B, n, k) carries on.  Shared: A (n·k), Q (n·k), the projections (k),
        reduction."""
        buf = cuda.shared.array(0, FT)
        B, m, n, _ = J.shape
        kq = Q.shape[2]
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        A = buf[0:n * kq]
        Qs = buf[n * kq:2 * n * kq]
        r = buf[2 * n * kq:2 * n * kq + kq]
        red = buf[2 * n * kq + kq:2 * n * kq + kq + nt]
        for e in range(tid, n * kq, nt):
            Qs[e] = Q[b, e // kq, e - (e // kq) * kq]
        cuda.syncthreads()
        for t in range(m):
            for e in range(tid, n * kq, nt):
                i = e // kq
                c = e - i * kq
                v = zero(Qs[e])
                for l in range(n):
                    v += J[b, t, i, l] * Qs[l * kq + c]
                A[e] = v
            cuda.syncthreads()
            for c in range(kq):
                for _ in range(2):
                    for l in range(tid, c, nt):
                        v = zero(A[0])
                        for i in range(n):
                            v += Qs[i * kq + l] * A[i * kq + c]
                        r[l] = v
                    cuda.syncthreads()
                    for i in range(tid, n, nt):
                        v = A[i * kq + c]
                        for l in range(c):
                            v -= Qs[i * kq + l] * r[l]
                        A[i * kq + c] = v
                    cuda.syncthreads()
                q = zero(A[0])
                for i in range(tid, n, nt):
                    q += A[i * kq + c] * A[i * kq + c]
                nrm = math.sqrt(block_sum(red, q))
                if tid == 0:
                    out[b, t, c] = math.log(nrm) if nrm > zero(nrm) else NINF
                inv = one(nrm) / nrm
                for i in range(tid, n, nt):
                    Qs[i * kq + c] = A[i * kq + c] * inv
                cuda.syncthreads()
        for e in range(tid, n * kq, nt):
            Q[b, e // kq, e - (e // kq) * kq] = Qs[e]

    # ======================================================================== MASO reverse
    @jit
    def reverse(R, W, bias, S, a, gain, lam, incoming, has, cols, out, offset):
        """The MASO reverse pass through one one-line layer for one cotangent row per block
        (row r = b·C + c): λ ← λ + incoming_t, u = γ λ ⊙ s_t, out_t = u W, offset += u·b,
        λ ← a λ + u R, from t = T down; λ (B·C, D) holds λ_T on entry and λ_0 on exit.
        Shared: λ, u, λ' (D), reduction."""
        buf = cuda.shared.array(0, FT)
        B, T, D = S.shape
        din = W.shape[1]
        rr = cuda.blockIdx.x
        b = rr // cols
        c = rr - b * cols
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        L = buf[0:D]
        u = buf[D:2 * D]
        Ln = buf[2 * D:3 * D]
        red = buf[3 * D:3 * D + nt]
        for i in range(tid, D, nt):
            L[i] = lam[rr, i]
        cuda.syncthreads()
        total = zero(a)
        for t in range(T - 1, -1, -1):
            for i in range(tid, D, nt):
                v = L[i]
                if has:
                    v += incoming[b, c, t, i]
                    L[i] = v
                u[i] = gain * v * S[b, t, i]
            cuda.syncthreads()
            for mcol in range(tid, din, nt):
                v = zero(a)
                for i in range(D):
                    v += u[i] * W[i, mcol]
                out[b, c, t, mcol] = v
            q = zero(a)
            for i in range(tid, D, nt):
                q += u[i] * bias[i]
            total += block_sum(red, q)
            for j in range(tid, D, nt):
                v = zero(a)
                for i in range(D):
                    v += u[i] * R[i, j]
                Ln[j] = a * L[j] + v
            cuda.syncthreads()
            for j in range(tid, D, nt):
                L[j] = Ln[j]
            cuda.syncthreads()
        for i in range(tid, D, nt):
            lam[rr, i] = L[i]
        if tid == 0:
            offset[rr] = total

    # ======================================================================== implicit
    @jit
    def picard(A, C, act, leak, tol, max_iter, max_rate, Z, res, its, rate):
        """Picard Z ← f(Z Aᵀ + C) for one point per block (grid-stride), stopping as the
        reference's ``_picard`` does: residual max|f(zAᵀ + c) − z| ≤ tol, k = max_iter, or
        (k > 5) a contraction rate r_k/r_{k−1} above ``max_rate``; Z holds the start on entry.
        Shared: z, f(z) (U), reduction."""
        buf = cuda.shared.array(0, FT)
        N, U = C.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        z = buf[0:U]
        gz = buf[U:2 * U]
        red = buf[2 * U:2 * U + nt]
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            for i in range(tid, U, nt):
                z[i] = Z[pt, i]
            cuda.syncthreads()
            prev = math.inf
            k = 0
            rt = zero(tol)
            while True:
                mx = zero(tol)
                for i in range(tid, U, nt):
                    v = C[pt, i]
                    for j in range(U):
                        v += A[i, j] * z[j]
                    fv = phi(act, v, leak)
                    gz[i] = fv
                    dv = abs(fv - z[i])
                    if not math.isnan(mx) and (math.isnan(dv) or dv > mx):   # NaN is the maximum
                        mx = dv
                red[tid] = mx
                cuda.syncthreads()
                if tid == 0:
                    for i in range(1, nt):
                        if not math.isnan(mx) and (math.isnan(red[i]) or red[i] > mx):
                            mx = red[i]
                    red[0] = mx
                cuda.syncthreads()
                rn = red[0]
                cuda.syncthreads()
                if k > 0:
                    rt = rn / prev
                done = not (rn > tol) or k >= max_iter
                if k > 5 and rt > max_rate:
                    done = True
                if done:
                    break
                for i in range(tid, U, nt):
                    z[i] = gz[i]
                cuda.syncthreads()
                prev = rn
                k += 1
            for i in range(tid, U, nt):
                Z[pt, i] = z[i]
            if tid == 0:
                res[pt] = rn if math.isfinite(rn) else math.inf
                its[pt] = k
                rate[pt] = rt
            cuda.syncthreads()

    @jit
    def flow_rk4(A, C, act, leak, steps, dt, Z):
        """Classical RK4 on dZ/dt = f(Z Aᵀ + C) − Z, ``steps`` steps of ``dt`` from Z (in place),
        one point per block (grid-stride).  Shared: z, two stage inputs, the accumulated slope (U)."""
        buf = cuda.shared.array(0, FT)
        N, U = C.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        z = buf[0:U]
        ya = buf[U:2 * U]
        yb = buf[2 * U:3 * U]
        acc = buf[3 * U:4 * U]
        o = one(dt)
        two = o + o
        half = dt / two
        sixth = dt / (two + two + two)
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            for i in range(tid, U, nt):
                z[i] = Z[pt, i]
            cuda.syncthreads()
            for _ in range(steps):
                for stage in range(4):
                    for i in range(tid, U, nt):
                        v = C[pt, i]
                        if stage == 0:
                            for j in range(U):
                                v += A[i, j] * z[j]
                            k = phi(act, v, leak) - z[i]
                            acc[i] = k
                            ya[i] = z[i] + half * k
                        elif stage == 1:
                            for j in range(U):
                                v += A[i, j] * ya[j]
                            k = phi(act, v, leak) - ya[i]
                            acc[i] += two * k
                            yb[i] = z[i] + half * k
                        elif stage == 2:
                            for j in range(U):
                                v += A[i, j] * yb[j]
                            k = phi(act, v, leak) - yb[i]
                            acc[i] += two * k
                            ya[i] = z[i] + dt * k
                        else:
                            for j in range(U):
                                v += A[i, j] * ya[j]
                            k = phi(act, v, leak) - ya[i]
                            acc[i] += k
                    cuda.syncthreads()
                for i in range(tid, U, nt):
                    z[i] = z[i] + sixth * acc[i]
                cuda.syncthreads()
            for i in range(tid, U, nt):
                Z[pt, i] = z[i]
            cuda.syncthreads()

    return types.SimpleNamespace(sim_cell=sim_cell, sim_irnn=sim_irnn, sim_ctrnn=sim_ctrnn, sim_gated=sim_gated,
                                 jac_cell=jac_cell, jac_irnn=jac_irnn, jac_ctrnn=jac_ctrnn, jac_gated=jac_gated,
                                 tangent=tangent, products=products, top_sv=top_sv, qr_steps=qr_steps,
                                 reverse=reverse, picard=picard, flow_rk4=flow_rk4)


__all__ = ["kernels", "KERNEL_NAMES"]

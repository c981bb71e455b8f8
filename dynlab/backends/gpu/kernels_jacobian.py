"""The step-Jacobian kernels (``jac_cell``, ``jac_irnn``, ``jac_ctrnn``, ``jac_gated``): one block per
point, J (and Jx) written in full (``kernels.py``: the layout every kernel keeps).
"""
from __future__ import annotations

from numba import cuda  # a module global: the simulator swaps it for its own in the kernels' globals
from numba.extending import register_jitable

from ..cells import (dphi, one, zero, cell_update, cell_slope, irnn_inner, irnn_keep, irnn_slope, ctrnn_out, ctrnn_rate,
                     gru_unit, gru_slopes, lstm_unit, lstm_slopes)


def build(FT, NINF, NAN) -> dict:
    """The kernels of this module for the floating type FT (constants NINF, NAN in that type)."""
    jit = cuda.jit

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
                _tangent_update(U, W, M, Mn, sl, irnn_keep(ek, alpha), w, D, tid, nt)
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
                        kk = ctrnn_out(ye, dp[i] * u, tau, alpha)      # the rate's tangent
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
                    hv, cv, ig, fg, gg, og, tc = lstm_unit(GI[pt, i] + q0 + bhh[i], GI[pt, D + i] + q1 + bhh[D + i],
                                                           ag, GI[pt, 3 * D + i] + q3 + bhh[3 * D + i], cc, act, leak)
                    ci, cf, cg, ho, hc = lstm_slopes(cc, cv, ig, fg, gg, og, tc, ag, act, leak)
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

    return {"jac_cell": jac_cell, "jac_irnn": jac_irnn, "jac_ctrnn": jac_ctrnn, "jac_gated": jac_gated}

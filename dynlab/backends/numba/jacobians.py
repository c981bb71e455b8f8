"""@njit kernels for the closed-form one-step Jacobians, one point at a time, ``cache=True``.

The default for small D (the iRNN paper's 2-D cells, long horizons), where NumPy's batched
matmuls over tiny matrices cost more in overhead than in arithmetic.  The closed forms are
those of ``dynlab.backends.reference.jacobians``; the per-element arithmetic — the updates, and
the same updates applied to the tangents (the tangent of g' = g + η(φ(z) − α s) is
G' = G + η(φ'(z) Ż − α S): ``irnn_out`` with φ(z) replaced by φ'(z) Ż) — is the cells'
(``dynlab.backends.cells``).  Every kernel writes J (N, D, D) and Jx (N, D, dx); dx = 0 when the
input Jacobian is not wanted, so its loops run zero times.
"""
from __future__ import annotations


import numpy as np
from numba import njit

from ...config import NUMBA_CACHE
from .. import cells
from .loops import act_scalar


#: φ'(z) by activation id (``dynlab.backends.cells.dphi``).
dact_scalar = cells.dphi


@njit(cache=NUMBA_CACHE, inline="always")
def _drive(W, b, xn, c):
    """c = W x + b."""
    D, d = W.shape
    for i in range(D):
        acc = b[i]
        for j in range(d):
            acc += W[i, j] * xn[j]
        c[i] = acc


@njit(cache=NUMBA_CACHE)
def gated(R, W, b, a, gain, act, leak, x, hprev, J, Jx):
    """J = a I + gain·diag(φ'(z)) R,  Jx = gain·diag(φ'(z)) W,  z = R h + W x + b."""
    N, D = hprev.shape
    dx = Jx.shape[2]
    c = np.empty(D)
    for n in range(N):
        _drive(W, b, x[n], c)
        for i in range(D):
            z = c[i]
            for j in range(D):
                z += R[i, j] * hprev[n, j]
            q = cells.cell_slope(gain, z, act, leak)
            for j in range(D):
                J[n, i, j] = q * R[i, j]
            J[n, i, i] += a
            for j in range(dx):
                Jx[n, i, j] = q * W[i, j]


@njit(cache=NUMBA_CACHE)
def irnn(U, W, b, eta, alpha, K, g0prev, sign, act, leak, x, hprev, J, Jx):
    """iRNN eq. 5 with its tangents: s = g + σh, z = U s + c,
    G ← G + η_k (diag(φ'(z)) U (G + σI) − α (G + σI)),  Gx ← Gx + η_k (diag(φ'(z))(U Gx + W) − α Gx),
    g ← g + η_k (φ(z) − α s);  J = G_K, Jx = Gx_K.  eta is the per-point (N, K) table."""
    N, D = hprev.shape
    dx = Jx.shape[2]
    c = np.empty(D)
    g = np.empty(D)
    s = np.empty(D)
    dp = np.empty(D)
    ph = np.empty(D)
    G = np.empty((D, D))
    T = np.empty((D, D))
    Gx = np.empty((D, dx))
    Tx = np.empty((D, dx))
    for n in range(N):
        _drive(W, b, x[n], c)
        for i in range(D):
            g[i] = hprev[n, i] if g0prev else 0.0
            for j in range(D):
                G[i, j] = 1.0 if (g0prev and i == j) else 0.0
            for j in range(dx):
                Gx[i, j] = 0.0
        for k in range(K):
            e = eta[n, k]
            for i in range(D):
                s[i] = g[i] + sign * hprev[n, i]
            for i in range(D):
                z = c[i]
                for j in range(D):
                    z += U[i, j] * s[j]
                dp[i] = dact_scalar(act, z, leak)
                ph[i] = act_scalar(act, z, leak)
            # T = U (G + σI), Tx = U Gx + W
            for i in range(D):
                for j in range(D):
                    T[i, j] = sign * U[i, j]
                for j in range(dx):
                    Tx[i, j] = W[i, j]
                for m in range(D):
                    u = U[i, m]
                    for j in range(D):
                        T[i, j] += u * G[m, j]
                    for j in range(dx):
                        Tx[i, j] += u * Gx[m, j]
            for i in range(D):
                for j in range(D):
                    S = G[i, j] + (sign if i == j else 0.0)
                    G[i, j] = cells.irnn_out(G[i, j], S, dp[i] * T[i, j], e, alpha)
                for j in range(dx):
                    Gx[i, j] = cells.irnn_out(Gx[i, j], Gx[i, j], dp[i] * Tx[i, j], e, alpha)
                g[i] = cells.irnn_out(g[i], s[i], ph[i], e, alpha)
        for i in range(D):
            for j in range(D):
                J[n, i, j] = G[i, j]
            for j in range(dx):
                Jx[n, i, j] = Gx[i, j]


@njit(cache=NUMBA_CACHE, inline="always")
def _ctrnn_stage(U, W, c, tau, alpha, act, leak, y, Y, Yx, fy, FY, FX):
    """The slope at a stage and its tangents: fy = (φ(z) − αy)/τ, z = U y + c,
    FY = (diag(φ'(z)) U Y − αY)/τ,  FX = (diag(φ'(z))(U Yx + W) − αYx)/τ."""
    D = y.shape[0]
    dx = Yx.shape[1]
    for i in range(D):
        z = c[i]
        for j in range(D):
            z += U[i, j] * y[j]
        q = dact_scalar(act, z, leak)
        fy[i] = cells.ctrnn_rate(y[i], z, tau, alpha, act, leak)
        for j in range(D):
            FY[i, j] = 0.0
        for j in range(dx):
            FX[i, j] = W[i, j]
        for m in range(D):
            u = U[i, m]
            for j in range(D):
                FY[i, j] += u * Y[m, j]
            for j in range(dx):
                FX[i, j] += u * Yx[m, j]
        for j in range(D):
            FY[i, j] = cells.ctrnn_out(Y[i, j], q * FY[i, j], tau, alpha)
        for j in range(dx):
            FX[i, j] = cells.ctrnn_out(Yx[i, j], q * FX[i, j], tau, alpha)


@njit(cache=NUMBA_CACHE)
def ctrnn(U, W, b, tau, alpha, dt, substeps, rk4, act, leak, x, hprev, J, Jx):
    """``substeps`` Euler or RK4 steps of τ ġ = −α g + φ(U g + c), each stage carrying its
    tangents (Y, Yx); J = ∂g(Δt)/∂g(0), Jx = ∂g(Δt)/∂x of the discrete scheme."""
    N, D = hprev.shape
    dx = Jx.shape[2]
    hs = dt / substeps
    c = np.empty(D)
    g = np.empty(D)
    G = np.empty((D, D))
    Gx = np.empty((D, dx))
    y = np.empty(D)                 # stage input
    Y = np.empty((D, D))
    Yx = np.empty((D, dx))
    fy = np.empty(D)                # stage slope
    FY = np.empty((D, D))
    FX = np.empty((D, dx))
    ay = np.empty(D)                # Σ weight · slope
    AY = np.empty((D, D))
    AX = np.empty((D, dx))
    nst = 4 if rk4 else 1
    # RK4: stage j reads g + a_j·hs·(slope j−1) and adds w_j·slope to the sum; Euler: one stage
    a_in = np.array([0.0, 0.5, 0.5, 1.0])
    w = np.array([1.0, 2.0, 2.0, 1.0]) if rk4 else np.array([1.0, 0.0, 0.0, 0.0])
    scale = hs / 6.0 if rk4 else hs
    for n in range(N):
        _drive(W, b, x[n], c)
        for i in range(D):
            g[i] = hprev[n, i]
            for j in range(D):
                G[i, j] = 1.0 if i == j else 0.0
            for j in range(dx):
                Gx[i, j] = 0.0
        for _ in range(substeps):
            for i in range(D):
                ay[i] = 0.0
                for j in range(D):
                    AY[i, j] = 0.0
                for j in range(dx):
                    AX[i, j] = 0.0
            for st in range(nst):
                f = a_in[st] * hs
                for i in range(D):
                    y[i] = g[i] + f * fy[i] if st > 0 else g[i]
                    for j in range(D):
                        Y[i, j] = G[i, j] + f * FY[i, j] if st > 0 else G[i, j]
                    for j in range(dx):
                        Yx[i, j] = Gx[i, j] + f * FX[i, j] if st > 0 else Gx[i, j]
                _ctrnn_stage(U, W, c, tau, alpha, act, leak, y, Y, Yx, fy, FY, FX)
                ws = w[st]
                for i in range(D):
                    ay[i] += ws * fy[i]
                    for j in range(D):
                        AY[i, j] += ws * FY[i, j]
                    for j in range(dx):
                        AX[i, j] += ws * FX[i, j]
            for i in range(D):
                g[i] += scale * ay[i]
                for j in range(D):
                    G[i, j] += scale * AY[i, j]
                for j in range(dx):
                    Gx[i, j] += scale * AX[i, j]
        for i in range(D):
            for j in range(D):
                J[n, i, j] = G[i, j]
            for j in range(dx):
                Jx[n, i, j] = Gx[i, j]


# ----------------------------------------------------------------------------------------
# GRU and LSTM (PyTorch's equations, dynlab.models.gru_lstm; closed forms in its docstring).
# The gate pre-activations come in precomputed — gi = W_ih x + b_ih and gh = W_hh h + b_hh,
# (N, G·D) each, two BLAS products over all N points in the caller — so the per-point work
# is the gates and the rows of J, each a combination of the rows of three (GRU) or four
# (LSTM) weight blocks.  ``snew`` (N, n) receives the next state (a stack feeds it to the
# layer above); J (N, n, n), Jx (N, n, dx), dx = 0 when the input Jacobian is not wanted.

@njit(cache=NUMBA_CACHE)
def gru(W_ih, W_hh, gi, gh, act, leak, hprev, J, Jx, snew):
    """∂h'/∂h = diag(z) + rows  (1 − z)φ'(a_n)[r W_hn + q r' W_hr] + (h − n) z' W_hz,
    ∂h'/∂x = (1 − z)φ'(a_n)[W_in + q r' W_ir] + (h − n) z' W_iz,  q = W_hn h + b_hn."""
    N, D = hprev.shape
    dx = Jx.shape[2]
    for p in range(N):
        for i in range(D):
            q = gh[p, 2 * D + i]
            h = hprev[p, i]
            hn, r, z, n, a = cells.gru_unit(gi[p, i] + gh[p, i], gi[p, D + i] + gh[p, D + i], gi[p, 2 * D + i], q,
                                            h, act, leak)
            # the coefficients on W_hn (cn; W_in: A), W_hr (and W_ir: cr), W_hz (and W_iz: cz)
            cn, A, cr, cz, _ = cells.gru_slopes(h, r, z, n, a, q, act, leak)
            for j in range(D):
                J[p, i, j] = cn * W_hh[2 * D + i, j] + cr * W_hh[i, j] + cz * W_hh[D + i, j]
            J[p, i, i] += z
            for j in range(dx):
                Jx[p, i, j] = A * W_ih[2 * D + i, j] + cr * W_ih[i, j] + cz * W_ih[D + i, j]
            snew[p, i] = hn


@njit(cache=NUMBA_CACHE)
def lstm(W_ih, W_hh, gi, gh, act, leak, hprev, J, Jx, snew):
    """On s = [h; c]: ∂c'/∂h = rows c f' W_hf + g i' W_hi + i φ'(a_g) W_hg, ∂c'/∂c = diag(f),
    ∂h'/∂h = rows φ(c') o' W_ho + o φ'(c') ∂c'/∂h, ∂h'/∂c = diag(o φ'(c') f); ∂/∂x alike with
    the W_i· blocks.  hprev (N, 2D)."""
    N, S = hprev.shape
    D = S // 2
    dx = Jx.shape[2]
    for p in range(N):
        for k in range(D):
            ag = gi[p, 2 * D + k] + gh[p, 2 * D + k]
            c = hprev[p, D + k]
            h2, c2, ig, fg, g, o, tc = cells.lstm_unit(gi[p, k] + gh[p, k], gi[p, D + k] + gh[p, D + k], ag,
                                                       gi[p, 3 * D + k] + gh[p, 3 * D + k], c, act, leak)
            ci, cf, cg, ho, hc = cells.lstm_slopes(c, c2, ig, fg, g, o, tc, ag, act, leak)
            for j in range(S):
                J[p, k, j] = 0.0
                J[p, D + k, j] = 0.0
            for j in range(D):
                dc = cf * W_hh[D + k, j] + ci * W_hh[k, j] + cg * W_hh[2 * D + k, j]
                J[p, D + k, j] = dc
                J[p, k, j] = ho * W_hh[3 * D + k, j] + hc * dc
            J[p, D + k, D + k] = fg
            J[p, k, D + k] = hc * fg
            for j in range(dx):
                dc = cf * W_ih[D + k, j] + ci * W_ih[k, j] + cg * W_ih[2 * D + k, j]
                Jx[p, D + k, j] = dc
                Jx[p, k, j] = ho * W_ih[3 * D + k, j] + hc * dc
            snew[p, k] = h2
            snew[p, D + k] = c2


# ----------------------------------------------------------------------------------------
# The iRNN's J_t for large D, many points per call (``dynlab.analysis.jacobians.irnn_xp``'s
# product form, in one numba call that releases the GIL): Π = A_K ⋯ A_1 with
# A_k = (1 − η_k α) I + diag(η_k φ'(z_k)) U, kept as (D, q·D) for a block of q points so that
# every inner step after the first is ONE BLAS product U · Π (through ``np.dot``) and one fused
# pass Π ← keep·Π + scale ⊙ (U Π); the first inner step needs no product (Π_1 = A_1 itself).
# (BENCHMARKS.md: faster than the batched NumPy form, which does K products
# and three separate passes per inner step.

from .loops import _VEC, dphi_given, phi_f64  # noqa: E402


@njit(nogil=True, **_VEC)
def irnn_jacobians(U, UT, c, hprev, eta, alpha, K, g0prev, sign, act, leak, J, Pbuf, Tbuf, s, z, g, scale):
    """J (n, D, D) ← J_t = a·Π − σI at n points (c = W x + b and hprev (n, D), eta (n, K));
    Pbuf, Tbuf: (D·q·D,) scratch for blocks of q points; s, z, g, scale: (q, D) scratch."""
    n, D = hprev.shape
    q_max = s.shape[0]
    a = (1.0 + sign) if g0prev else sign
    keep0 = 1.0 if g0prev else 0.0
    for lo in range(0, n, q_max):
        q = min(n, lo + q_max) - lo
        P = Pbuf[:D * q * D].reshape(D, q * D)
        Tm = Tbuf[:D * q * D].reshape(D, q * D)
        for p in range(q):
            for j in range(D):
                g[p, j] = keep0 * hprev[lo + p, j]
        for k in range(K):
            for p in range(q):
                for j in range(D):
                    s[p, j] = g[p, j] + sign * hprev[lo + p, j]
            np.dot(s[:q], UT, z[:q])
            for p in range(q):
                e = eta[lo + p, k]
                for j in range(D):
                    zz = z[p, j] + c[lo + p, j]
                    av = phi_f64(act, zz, leak)
                    scale[p, j] = e * dphi_given(act, zz, av, leak)
                    g[p, j] = cells.irnn_out(g[p, j], s[p, j], av, e, alpha)
            if k == 0:
                for i in range(D):
                    for p in range(q):
                        keep = cells.irnn_keep(eta[lo + p, 0], alpha)
                        sc = scale[p, i]
                        for j in range(D):
                            P[i, p * D + j] = sc * U[i, j]
                        P[i, p * D + i] += keep
            else:
                np.dot(U, P, Tm)
                for i in range(D):
                    for p in range(q):
                        keep = cells.irnn_keep(eta[lo + p, k], alpha)
                        sc = scale[p, i]
                        for j in range(D):
                            P[i, p * D + j] = cells.cell_out(keep, sc, P[i, p * D + j], Tm[i, p * D + j])
        for p in range(q):
            for i in range(D):
                for j in range(D):
                    J[lo + p, i, j] = a * P[i, p * D + j]
                J[lo + p, i, i] -= sign

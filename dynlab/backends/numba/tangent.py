"""Batched multi-setting kernels for sweeps: ‖∂h_T/∂h_1‖₂ and ‖∂h_T/∂h_{T−1}‖₂ of many settings.

A sweep of the gradient-norm summaries runs S settings with the same shapes (D, d, T) as one
batch (``base.TangentBatch``): the recurrent matrices R, input weights W, biases b and inputs X
once per group of settings that share them, step sizes η (S, K_max) and per-setting scalars;
each setting's drive c_t = W x_t + b is computed at its step (D·d products beside the D² of R h).  Instead of the T one-step Jacobians and a
backward pass over all of them (``dynlab.gradient_norms``, which reports every t), only the
two norms the summaries need are built, in forward mode alongside the state:

    M_1 = I,   M_m = ∂h_m/∂h_1 = J_m M_{m−1}  (m = 2..T),   kept Frobenius-normalised,
    M_m = e^{ℓ_m} M̃_m,   so ln‖∂h_T/∂h_1‖₂ = ℓ_T + ln σ₁(M̃_T)   (finite at any horizon).

The tangent goes through the same update as the state.  iRNN (eq. 5), with s = g + σ h_{m−1}:

    g ← g + η_k (φ(U s + c_m) − α s),     G ← G + η_k (φ'(z) ⊙ (U S) − α S),   S = G + σ A,

starting from g_0 = 0 or h_{m−1} and G_0 = 0 or A (A the incoming tangent); h_m = g_K, and the
outgoing tangent is G_K.  Gated cells (rnn, fastrnn, antisymmetric, rin; ``Model.gated_form``):
h ← a h + γ φ(R h + c),  A ← a A + γ φ'(z) ⊙ (R A).  At the last step the tangent carries the
block [M_{T−1} | I], so the same pass also gives J_T = ∂h_T/∂h_{T−1}.  The 2-norms σ₁ of the
final M̃_T and J_T (``sweep_norms``, in parallel over settings): closed form for D ≤ 2, else the
certified power iteration of the gradient flow (``norms.top_sv``, relative ``config.NORM_RTOL``)
with its fallback where it cannot certify (clustered σ₁, e.g. T = 2 with small η: J_T ≈ I) —
Lanczos on the Gram matrix certified by a Cholesky test, else LAPACK's ``dsyevr``
(``lapack.gram_top``).

This module is the numba backend's: ``@njit(parallel=True)`` with ``prange`` over settings,
each setting's D×D products through BLAS (``np.dot`` into a preallocated buffer), the per-element
arithmetic the cells' (``dynlab.backends.cells``); the reference is
``dynlab.backends.reference.tangent``.

A non-finite state stops a setting and records the 1-based step (``diverged``, 0: none).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...config import NUMBA_CACHE
from .. import cells
from .jacobians import dact_scalar
from .lapack import gram_top as lapack_gram_top
from .norms import sv2, top_sv


# ============================================================================ numba, prange
@njit(cache=NUMBA_CACHE)
def _normalise(M, w):
    """Divide the first w columns of M by their Frobenius norm; return ln of that norm."""
    D = M.shape[0]
    f = 0.0
    for i in range(D):
        for j in range(w):
            f += M[i, j] * M[i, j]
    f = math.sqrt(f)
    if f > 0.0 and math.isfinite(f):
        inv = 1.0 / f
        for i in range(D):
            for j in range(w):
                M[i, j] *= inv
        return math.log(f)
    return -math.inf if f == 0.0 else math.nan


@njit(cache=NUMBA_CACHE)
def _irnn_step(U, c, hp, A, eta, K, alpha, sign, g0prev, act, leak, g, G, St, P, s, tangent):
    """One iRNN step of state and tangent: g (D,) ← h_m; G (D, w) ← ∂h_m/∂(·) from A = ∂h_{m−1}/∂(·)."""
    D = U.shape[0]
    w = A.shape[1]
    for i in range(D):
        g[i] = hp[i] if g0prev else 0.0
        if tangent:
            for j in range(w):
                G[i, j] = A[i, j] if g0prev else 0.0
    for k in range(K):
        e = eta[k]
        for i in range(D):
            s[i] = g[i] + sign * hp[i]
        if tangent:
            for i in range(D):
                for j in range(w):
                    St[i, j] = G[i, j] + sign * A[i, j]
            np.dot(U, St, P)
        for i in range(D):
            z = c[i]
            for j in range(D):
                z += U[i, j] * s[j]
            if tangent:
                q = dact_scalar(act, z, leak)
                for j in range(w):
                    G[i, j] = cells.irnn_out(G[i, j], St[i, j], q * P[i, j], e, alpha)
            g[i] = cells.irnn_inner(g[i], s[i], z, e, alpha, act, leak)


@njit(cache=NUMBA_CACHE)
def _gated_step(R, c, hp, A, a, gain, act, leak, g, G, P, tangent):
    """h ← a h + γ φ(R h + c),  A ← a A + γ φ'(z) ⊙ (R A)."""
    D = R.shape[0]
    w = A.shape[1]
    if tangent:
        np.dot(R, A, P)
    for i in range(D):
        z = c[i]
        for j in range(D):
            z += R[i, j] * hp[j]
        g[i] = cells.cell_update(a, gain, hp[i], z, act, leak)
        if tangent:
            q = cells.cell_slope(gain, z, act, leak)
            for j in range(w):
                G[i, j] = cells.cell_out(a, 1.0, A[i, j], q * P[i, j])


@njit(cache=NUMBA_CACHE)
def _finite(v):
    for i in range(v.shape[0]):
        if not math.isfinite(v[i]):
            return False
    return True


@njit(cache=NUMBA_CACHE)
def _drive(W, b, x, c):
    """c = W x + b for one step (W (D, d), x (d,))."""
    D, d = W.shape
    for i in range(D):
        v = b[i]
        for j in range(d):
            v += W[i, j] * x[j]
        c[i] = v


@njit(cache=NUMBA_CACHE)
def _one_setting(gated, R, W, b, X, eta, K, alpha, sign, g0prev, act, leak, M_out, J_out):
    """The whole forward pass of one setting (R, W, b, X its group's); returns (ℓ_T, diverged
    step or 0)."""
    T = X.shape[0]
    D = R.shape[0]
    h = np.zeros(D)
    c = np.empty(D)
    g = np.empty(D)
    s = np.empty(D)
    A1 = np.empty((D, D))       # M_{m−1}, normalised
    G1 = np.empty((D, D))
    S1 = np.empty((D, D))
    P1 = np.empty((D, D))
    wide = T > 2                # M_1 = I: at T = 2 the last step needs no [M | I] block (J_T = M_T)
    w2 = 2 * D if wide else 1
    A2 = np.zeros((D, w2))      # [M_{T−1} | I] for the last step
    G2 = np.empty((D, w2))
    S2 = np.empty((D, w2))
    P2 = np.empty((D, w2))
    for i in range(D):
        for j in range(D):
            A1[i, j] = 1.0 if i == j else 0.0
    logs = 0.0
    if T < 2:                   # no step to differentiate: M̃ = I, J = 0 (as the reference)
        for i in range(D):
            for j in range(D):
                M_out[i, j] = A1[i, j]
                J_out[i, j] = 0.0
    for t in range(T):
        last = t == T - 1
        tangent = t > 0
        if last and wide:
            for i in range(D):
                for j in range(D):
                    A2[i, j] = A1[i, j]
                    A2[i, D + j] = 1.0 if i == j else 0.0
            A, G, St, P = A2, G2, S2, P2
        else:
            A, G, St, P = A1, G1, S1, P1
        _drive(W, b, X[t], c)
        if gated:
            _gated_step(R, c, h, A, alpha, eta[0], act, leak, g, G, P, tangent)
        else:
            _irnn_step(R, c, h, A, eta, K, alpha, sign, g0prev, act, leak, g, G, St, P, s, tangent)
        if not _finite(g):
            return math.nan, t + 1
        for i in range(D):
            h[i] = g[i]
        if tangent:
            if last and not wide:
                for i in range(D):
                    for j in range(D):
                        J_out[i, j] = G[i, j]
            logs += _normalise(G, D)
            if last:
                for i in range(D):
                    for j in range(D):
                        M_out[i, j] = G[i, j]
                        if wide:
                            J_out[i, j] = G[i, D + j]
            else:
                for i in range(D):
                    for j in range(D):
                        A1[i, j] = G[i, j]
    return logs, 0


@njit(parallel=True, cache=NUMBA_CACHE)
def tangent_numba(gated, R, W, b, X, group, eta, K, alpha, sign, g0prev, act, leak, logs, M_out, J_out, diverged):
    """All S settings, ``prange`` over settings (see the module docstring for the recursion).

    gated : bool — gated cells (``alpha`` holds a, ``eta[:, 0]`` holds γ) or the iRNN
    R (G, D, D), W (G, D, d), b (G, D), X (G, T, d) per group; group (S,) int, each setting's;
    eta (S, K_max); K (S,) int; alpha, sign, leak (S,) float; g0prev (S,) bool; act (S,) int.
    Writes logs (S,) = ℓ_T, M_out (S, D, D) = M̃_T, J_out (S, D, D) = J_T, diverged (S,) int
    (1-based step, 0: none).
    """
    S = group.shape[0]
    for n in prange(S):
        q = group[n]
        l, bad = _one_setting(gated, R[q], W[q], b[q], X[q], eta[n], K[n], alpha[n], sign[n], g0prev[n], act[n],
                              leak[n], M_out[n], J_out[n])
        logs[n] = l
        diverged[n] = bad


# ============================================================================ σ₁
@njit(cache=NUMBA_CACHE)
def _sigma1(P, u0, u, w, v, tol, maxit, lmaxit):
    """‖P‖₂ of a square P: |P| (D = 1), closed form (D = 2), certified power iteration from u0
    (``norms.top_sv``); where it cannot certify, √λ_max of the Gram matrix (``lapack.gram_top``)
    — by Lanczos certified by a Cholesky test first when the iteration saw one dominant singular
    value (σ₁² > ‖P‖_F²/2: Lanczos converges in a few steps), straight by LAPACK's ``dsyevr``
    when it did not (clustered σ₁, e.g. J_T ≈ ηα I at small weight scales: Lanczos would need
    ≈ D steps).  NaN for a non-finite P."""
    D = P.shape[0]
    if D == 1:
        return abs(P[0, 0])
    if D == 2:
        return sv2(P)
    for i in range(D):
        u[i] = u0[i]
    s, ok = top_sv(P, u, w, v, tol, maxit)
    if ok:
        return s
    F = 0.0
    for i in range(D):
        for j in range(D):
            F += P[i, j] * P[i, j]
    for i in range(D):
        u[i] = u0[i]
    return lapack_gram_top(P, u, tol, lmaxit if s * s > 0.5 * F else 0)


@njit(parallel=True, cache=NUMBA_CACHE)
def sweep_norms(M, J, logs, u0, tol, maxit, lmaxit, log1, logT):
    """log1[n] = logs[n] + ln σ₁(M[n]), logT[n] = ln σ₁(J[n]) for every setting n (``_sigma1``),
    in parallel over settings (BLAS and LAPACK on one thread: the caller's limit).  u0 (D,) the
    power iteration's start.  J of shape (0, D, D): T = 2, where ∂h_T/∂h_1 = J_T (M_1 = I), so
    one σ₁ serves both (logT = log1)."""
    S, D, _ = M.shape
    same = J.shape[0] == 0
    for n in prange(S):
        u = np.empty(D)
        w = np.empty(D)
        v = np.empty(D)
        sm = _sigma1(M[n], u0, u, w, v, tol, maxit, lmaxit)
        log1[n] = logs[n] + _log(sm)
        logT[n] = log1[n] if same else _log(_sigma1(J[n], u0, u, w, v, tol, maxit, lmaxit))


@njit(cache=NUMBA_CACHE)
def _log(v):
    return math.log(v) if v > 0.0 else (-math.inf if v == 0.0 else math.nan)


__all__ = ["tangent_numba", "sweep_norms"]


def run_tangent_numba(*args):
    """``tangent_numba`` made safe to call from several threads (Dask workers with threads):
    ``parallel.launch``."""
    from .parallel import launch

    return launch(tangent_numba, *args)


def run_sweep_norms(*args):
    """``sweep_norms`` through ``parallel.launch`` (as ``run_tangent_numba``)."""
    from .parallel import launch

    return launch(sweep_norms, *args)


__all__ += ["run_tangent_numba", "run_sweep_norms"]

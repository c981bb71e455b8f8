"""Batched multi-setting kernels for sweeps: ‖∂h_T/∂h_1‖₂ and ‖∂h_T/∂h_{T−1}‖₂ of many settings.

A sweep of the gradient-norm summaries runs S settings with the same shapes (D, d, T) as one
batch: stacks of recurrent matrices R (S, D, D), drives C (S, T, D) with c_t = W x_t + b,
step sizes η (S, K_max) and per-setting scalars.  Instead of the T one-step Jacobians and a
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
final M̃_T and J_T come from LAPACK's SVD (batched), exact to rounding.

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
def _one_setting(gated, R, C, eta, K, alpha, sign, g0prev, act, leak, M_out, J_out):
    """The whole forward pass of one setting; returns (ℓ_T, diverged step or 0)."""
    T, D = C.shape
    h = np.zeros(D)
    g = np.empty(D)
    s = np.empty(D)
    A1 = np.empty((D, D))       # M_{m−1}, normalised
    G1 = np.empty((D, D))
    S1 = np.empty((D, D))
    P1 = np.empty((D, D))
    A2 = np.zeros((D, 2 * D))   # [M_{T−1} | I] for the last step
    G2 = np.empty((D, 2 * D))
    S2 = np.empty((D, 2 * D))
    P2 = np.empty((D, 2 * D))
    for i in range(D):
        for j in range(D):
            A1[i, j] = 1.0 if i == j else 0.0
    logs = 0.0
    for t in range(T):
        last = t == T - 1
        tangent = t > 0
        if last:
            for i in range(D):
                for j in range(D):
                    A2[i, j] = A1[i, j]
                    A2[i, D + j] = 1.0 if i == j else 0.0
            A, G, St, P = A2, G2, S2, P2
        else:
            A, G, St, P = A1, G1, S1, P1
        if gated:
            _gated_step(R, C[t], h, A, alpha, eta[0], act, leak, g, G, P, tangent)
        else:
            _irnn_step(R, C[t], h, A, eta, K, alpha, sign, g0prev, act, leak, g, G, St, P, s, tangent)
        if not _finite(g):
            return math.nan, t + 1
        for i in range(D):
            h[i] = g[i]
        if tangent:
            logs += _normalise(G, D)
            if last:
                for i in range(D):
                    for j in range(D):
                        M_out[i, j] = G[i, j]
                        J_out[i, j] = G[i, D + j]
            else:
                for i in range(D):
                    for j in range(D):
                        A1[i, j] = G[i, j]
    return logs, 0


@njit(parallel=True, cache=NUMBA_CACHE)
def tangent_numba(gated, R, C, eta, K, alpha, sign, g0prev, act, leak, logs, M_out, J_out, diverged):
    """All S settings, ``prange`` over settings (see the module docstring for the recursion).

    gated : bool — gated cells (``alpha`` holds a, ``eta[:, 0]`` holds γ) or the iRNN
    R (S, D, D); C (S, T, D); eta (S, K_max); K (S,) int; alpha, sign, leak (S,) float;
    g0prev (S,) bool; act (S,) int.  Writes logs (S,) = ℓ_T, M_out (S, D, D) = M̃_T,
    J_out (S, D, D) = J_T, diverged (S,) int (1-based step, 0: none).
    """
    S = R.shape[0]
    for n in prange(S):
        l, bad = _one_setting(gated, R[n], C[n], eta[n], K[n], alpha[n], sign[n], g0prev[n], act[n], leak[n],
                              M_out[n], J_out[n])
        logs[n] = l
        diverged[n] = bad


# ============================================================================ array namespace
def top_singular(M, xp=np):
    """σ₁ of every matrix of an (S, D, D) stack by batched SVD; NaN for a non-finite matrix."""
    out = xp.full(M.shape[0], xp.nan)
    ok = xp.isfinite(M).all(axis=(1, 2))
    if bool(ok.any()):
        out[ok] = xp.linalg.svd(M[ok], compute_uv=False)[:, 0]
    return out


__all__ = ["tangent_numba", "top_singular"]


def run_tangent_numba(*args):
    """``tangent_numba`` made safe to call from several threads (Dask workers with threads):
    ``parallel.launch``."""
    from .parallel import launch

    return launch(tangent_numba, *args)


__all__ += ["run_tangent_numba"]

"""@njit kernels for gradient flow: backward Jacobian products, their 2-norms, tangent QR.

Wrappers live in ``dynlab.analysis.gradients`` and ``dynlab.analysis.lyapunov``; these only
compute on plain float64 arrays.  Three pieces:

* ``top_sv`` – the largest singular value σ₁ of a square P, *certified* to a relative
  tolerance ``tol`` or flagged as not certified (the caller then takes LAPACK's SVD).
  Power iteration on A = P Pᵀ from a warm-start vector u (the previous step's), with the
  Kato–Temple bound as the stopping rule: for a unit u, ρ = ‖Pᵀu‖² = uᵀAu ≤ λ₁ and
  ε = ‖Au − ρu‖; every eigenvalue but λ₁ is ≤ a := tr A − ρ = ‖P‖_F² − ρ (they sum to at most
  tr A − λ₁), so when ρ > a the interval (a, ∞) holds λ₁ alone and Kato–Temple gives
  ρ ≤ λ₁ ≤ ρ + ε²/(ρ − a).  We stop when ε²/(ρ − a) ≤ 2·tol·ρ, i.e. when
  0 ≤ σ₁/√ρ − 1 ≤ tol (exact arithmetic; rounding adds O(D·2⁻⁵³) relative).  A 2×2 P uses
  the closed form σ₁ = (|(a+d, b−c)| + |(a−d, b+c)|)/2, exact to rounding.
* ``backward_chunk`` – the jitted loop for small D: P_t = P_{t+1} J_{t+1} kept Frobenius-
  normalised with its log scale accumulated, the norms of P_t and J_t, and ‖g P_t‖ for a
  cotangent g, one chunk of time steps at a time (the state is carried between chunks).
* ``qr_chunk`` – Benettin's tangent QR for small D: Z = J_t Q_{t-1}, Z = Q_t R_t by classical
  Gram–Schmidt applied twice (CGS2, orthogonal to working precision), ln|R_t[i, i]| out.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..config import NUMBA_CACHE


@njit(cache=NUMBA_CACHE, inline="always")
def sv2(P):
    """σ₁ of a 2×2 matrix [[a, b], [c, d]]: σ₁ ± σ₂ = |(a ± d, b ∓ c)| (no cancellation)."""
    a, b, c, d = P[0, 0], P[0, 1], P[1, 0], P[1, 1]
    return 0.5 * (math.hypot(a + d, b - c) + math.hypot(a - d, b + c))


@njit(cache=NUMBA_CACHE)
def top_sv(P, u, w, v, tol, maxit):
    """(σ₁, certified) of the square P by warm-started power iteration on P Pᵀ (module docstring).

    ``u`` (D,) is the start vector and is overwritten by the last iterate (the next call's
    warm start); ``w``, ``v`` (D,) are work buffers.  Gives up (certified False) after
    ``maxit`` iterations, or early when ρ stays ≤ tr A / 2 and has stopped growing (the trace
    bound can then never separate λ₁).
    """
    D = P.shape[0]
    F = 0.0
    for i in range(D):
        for j in range(D):
            F += P[i, j] * P[i, j]
    if F == 0.0:
        return 0.0, True
    if not math.isfinite(F):
        return math.nan, True
    nu = 0.0
    for i in range(D):
        nu += u[i] * u[i]
    if not (nu > 0.0 and math.isfinite(nu)):
        for i in range(D):
            u[i] = 1.0
        nu = D
    s = 1.0 / math.sqrt(nu)
    for i in range(D):
        u[i] *= s
    rho_old = 0.0
    for it in range(maxit):
        for j in range(D):  # w = Pᵀ u
            w[j] = 0.0
        for i in range(D):
            ui = u[i]
            for j in range(D):
                w[j] += P[i, j] * ui
        rho = 0.0
        for j in range(D):
            rho += w[j] * w[j]
        nv = 0.0
        eps2 = 0.0
        for i in range(D):  # v = P w = A u
            acc = 0.0
            for j in range(D):
                acc += P[i, j] * w[j]
            v[i] = acc
            r = acc - rho * u[i]
            eps2 += r * r
            nv += acc * acc
        gap = rho - (F - rho)
        if gap > 0.0 and eps2 <= 2.0 * tol * rho * gap:
            return math.sqrt(rho), True
        if nv == 0.0:
            break
        if it >= 2 and gap <= 0.0 and rho < rho_old * (1.0 + 1e-2):
            break  # ρ stalls below tr A / 2: the trace bound will not certify
        rho_old = rho
        s = 1.0 / math.sqrt(nv)
        for i in range(D):
            u[i] = v[i] * s
    return math.sqrt(rho), False


@njit(cache=NUMBA_CACHE)
def top_sv_stack(S, u, tol, maxit, sig, ok):
    """``top_sv`` of S[j] for j = n−1 … 0 (backward in time), warm-starting each from the last.

    S (n, D, D); u (D,) the warm start, updated; writes sig (n,), ok (n,) (uncertified
    entries are left for the caller's SVD).
    """
    n, D, _ = S.shape
    w = np.empty(D)
    v = np.empty(D)
    for j in range(n - 1, -1, -1):
        s, c = top_sv(S[j], u, w, v, tol, maxit)
        sig[j] = s
        ok[j] = c


@njit(cache=NUMBA_CACHE)
def _norm2(M, u, w, v, tol, maxit):
    """‖M‖₂ of a square M: closed form (D = 2), certified power iteration, else LAPACK's SVD."""
    D = M.shape[0]
    if D == 1:
        return abs(M[0, 0])
    if D == 2:
        return sv2(M)
    s, ok = top_sv(M, u, w, v, tol, maxit)
    if ok:
        return s
    return np.linalg.svd(np.ascontiguousarray(M))[1][0]


@njit(cache=NUMBA_CACHE)
def _log(v):
    return math.log(v) if v > 0.0 else (-math.inf if v == 0.0 else math.nan)


@njit(cache=NUMBA_CACHE)
def backward_chunk(J, P, logs, u, uJ, g, out_log, out_step, out_glog, tol, maxit):
    """One chunk of the backward pass, for every sequence b, over the chunk's steps j = n−1 … 0.

    J (B, n, D, D): J[b, j] = ∂h_t/∂h_{t-1} for the chunk's times t (ascending in j);
    P (B, D, D), logs (B,): the state on entry, P_{t_hi} = exp(logs)·P (‖P‖_F = 1 after the
    first step), updated in place to P_{t_lo − 1} on exit;
    u, uJ (B, D): warm starts of the power iterations for P_t and J_t;
    g (B, D) or (B, 0): the cotangent ∂L/∂h_T.
    Writes out_log[b, j] = ln‖P_t‖₂, out_step[b, j] = ‖J_t‖₂, out_glog[b, j] = ln‖g P_t‖₂.
    """
    B, n, D, _ = J.shape
    has_g = g.shape[1] == D
    tmp = np.empty((D, D))
    w = np.empty(D)
    v = np.empty(D)
    for b in range(B):
        Pb = P[b]
        for j in range(n - 1, -1, -1):
            Jj = J[b, j]
            out_log[b, j] = logs[b] + _log(_norm2(Pb, u[b], w, v, tol, maxit))
            out_step[b, j] = _norm2(Jj, uJ[b], w, v, tol, maxit)
            if has_g:
                acc = 0.0
                for k in range(D):
                    gk = 0.0
                    for i in range(D):
                        gk += g[b, i] * Pb[i, k]
                    acc += gk * gk
                out_glog[b, j] = logs[b] + 0.5 * _log(acc)
            f = 0.0
            for i in range(D):  # tmp = P J
                for k in range(D):
                    tmp[i, k] = 0.0
                for m in range(D):
                    pim = Pb[i, m]
                    for k in range(D):
                        tmp[i, k] += pim * Jj[m, k]
                for k in range(D):
                    f += tmp[i, k] * tmp[i, k]
            f = math.sqrt(f)
            if f > 0.0 and math.isfinite(f):
                inv = 1.0 / f
                for i in range(D):
                    for k in range(D):
                        Pb[i, k] = tmp[i, k] * inv
                logs[b] += math.log(f)
            else:  # an exactly singular product stays 0 (log −inf); non-finite J poisons it
                for i in range(D):
                    for k in range(D):
                        Pb[i, k] = tmp[i, k]
                logs[b] = -math.inf if f == 0.0 else math.nan


@njit(cache=NUMBA_CACHE)
def qr_chunk(J, Q, out):
    """Benettin's tangent QR over one chunk: Z = J_t Q, Q R = Z (CGS2), out[b, j, i] = ln|R_ii|.

    J (B, n, D, D) in time order; Q (B, D, k) orthonormal columns, updated in place.
    """
    B, n, D, _ = J.shape
    k = Q.shape[2]
    Z = np.empty((D, k))
    for b in range(B):
        Qb = Q[b]
        for j in range(n):
            Jj = J[b, j]
            for i in range(D):
                for c in range(k):
                    Z[i, c] = 0.0
                for m in range(D):
                    jim = Jj[i, m]
                    for c in range(k):
                        Z[i, c] += jim * Qb[m, c]
            for c in range(k):
                for _rep in range(2):  # Gram–Schmidt twice: orthogonal to working precision
                    for p in range(c):
                        dot = 0.0
                        for i in range(D):
                            dot += Qb[i, p] * Z[i, c]
                        for i in range(D):
                            Z[i, c] -= dot * Qb[i, p]
                nrm = 0.0
                for i in range(D):
                    nrm += Z[i, c] * Z[i, c]
                rcc = math.sqrt(nrm)
                out[b, j, c] = _log(rcc)
                if rcc > 0.0:  # (rcc = 0: J_t is singular on this direction, ln|R_cc| = −inf)
                    for i in range(D):
                        Qb[i, c] = Z[i, c] / rcc

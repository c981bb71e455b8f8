"""@njit kernels for gradient flow: backward Jacobian products, their 2-norms, tangent QR.

Wrappers live in ``dynlab.analysis.gradients`` and ``dynlab.analysis.lyapunov``; these only
compute on plain float64 arrays.  The pieces:

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
* ``irnn_tangent_qr_chunk`` – the same for an iRNN without J_t: the tangent block is carried
  through the K inner Euler steps (K products U·(D × k) per step).
* ``irnn_reverse_chunk`` / ``block_stack_norms`` – the iRNN's curve in reverse mode: the rows
  of P_t pulled back through the K inner steps, one block of rows per thread (``prange``), then
  the blocks put on one scale and every P_t's ``top_sv`` taken in parallel.  The clustered
  matrices ``top_sv`` cannot certify go to ``lapack.py``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...config import NUMBA_CACHE


@njit(cache=NUMBA_CACHE, inline="always")
def sv2(P):
    """σ₁ of a 2×2 matrix [[a, b], [c, d]]: σ₁ ± σ₂ = |(a ± d, b ∓ c)| (no cancellation)."""
    a, b, c, d = P[0, 0], P[0, 1], P[1, 0], P[1, 1]
    return 0.5 * (math.hypot(a + d, b - c) + math.hypot(a - d, b + c))


@njit(cache=NUMBA_CACHE, inline="always")
def unit_start(u):
    """Scale the start vector u of a power iteration to unit length (all ones if it is 0 or
    non-finite)."""
    D = u.shape[0]
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


@njit(cache=NUMBA_CACHE, fastmath={"reassoc", "contract"})
def top_sv(P, u, w, v, tol, maxit):
    """(σ₁, certified) of the square P by warm-started power iteration on P Pᵀ (module docstring).

    ``u`` (D,) is the start vector and is overwritten by the last iterate (the next call's
    warm start); ``w``, ``v`` (D,) are work buffers.  Gives up (certified False) after
    ``maxit`` iterations, or early when ρ stays ≤ tr A / 2 and has stopped growing (the trace
    bound can then never separate λ₁).  Compiled with reassociation allowed, so that the row
    sums of P w vectorise: they then differ from left-to-right sums by O(D·2⁻⁵³) relative, the
    rounding the certificate already allows for; NaN and Inf keep their IEEE meaning (no
    ``nnan``/``ninf`` flags).
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
    unit_start(u)
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
    return svd_top(M)


@njit(cache=NUMBA_CACHE)
def svd_top(M):
    """σ₁ of a finite square M by LAPACK's SVD (``gesdd``) of M / max|M|; where ``gesdd`` fails to
    converge (it can on finite matrices: seen once in a 32-unit training run), √λ_max of the
    scaled Gram matrix by ``syevd`` (``gram_top``)."""
    amax = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            a = abs(M[i, j])
            if a > amax:
                amax = a
    if amax == 0.0:
        return 0.0
    Ms = np.ascontiguousarray(M) / amax
    try:
        return amax * np.linalg.svd(Ms)[1][0]
    except Exception:
        return amax * gram_top(Ms)


@njit(cache=NUMBA_CACHE)
def gram_top(M):
    """σ₁ of M as √λ_max(Mᵀ M) by LAPACK's symmetric eigensolver: relative error O(ε) in σ₁ (the
    Gram matrix squares the condition of the small singular values, not of the largest)."""
    lam = np.linalg.eigvalsh(np.ascontiguousarray(M.T @ M))[-1]
    return math.sqrt(lam) if lam > 0.0 else 0.0


@njit(cache=NUMBA_CACHE)
def _log(v):
    return math.log(v) if v > 0.0 else (-math.inf if v == 0.0 else math.nan)


@njit(cache=NUMBA_CACHE)
def backward_chunk(J, P, logs, u, uJ, g, out_log, out_step, out_glog, tol, maxit, want_step=True):
    """One chunk of the backward pass, for every sequence b, over the chunk's steps j = n−1 … 0.

    J (B, n, D, D): J[b, j] = ∂h_t/∂h_{t-1} for the chunk's times t (ascending in j);
    P (B, D, D), logs (B,): the state on entry, P_{t_hi} = exp(logs)·P (‖P‖_F = 1 after the
    first step), updated in place to P_{t_lo − 1} on exit;
    u, uJ (B, D): warm starts of the power iterations for P_t and J_t;
    g (B, D) or (B, 0): the cotangent ∂L/∂h_T.
    Writes out_log[b, j] = ln‖P_t‖₂, out_step[b, j] = ‖J_t‖₂ (NaN when not ``want_step``),
    out_glog[b, j] = ln‖g P_t‖₂.
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
            out_step[b, j] = _norm2(Jj, uJ[b], w, v, tol, maxit) if want_step else math.nan
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


@njit(cache=NUMBA_CACHE, inline="always")
def _cgs2(Z, Q, logr):
    """Q R = Z by classical Gram–Schmidt applied twice (orthogonal to working precision):
    Q (D, k) overwritten column by column, logr (k,) = ln|R_cc|."""
    D, k = Z.shape
    for c in range(k):
        for _rep in range(2):
            for p in range(c):
                dot = 0.0
                for i in range(D):
                    dot += Q[i, p] * Z[i, c]
                for i in range(D):
                    Z[i, c] -= dot * Q[i, p]
        nrm = 0.0
        for i in range(D):
            nrm += Z[i, c] * Z[i, c]
        rcc = math.sqrt(nrm)
        logr[c] = _log(rcc)
        if rcc > 0.0:  # (rcc = 0: J_t is singular on this direction, ln|R_cc| = −inf)
            for i in range(D):
                Q[i, c] = Z[i, c] / rcc


@njit(cache=NUMBA_CACHE)
def irnn_tangent_qr_chunk(U, dpe, keep, a, sigma, Q, out):
    """Benettin's QR for the iRNN without forming J_t: Z = J_t Q = a·(A_K ⋯ A_1 Q) − σQ, each
    A_k Y = keep_k Y + diag(dpe_k)(U Y) one BLAS product of U with the D × k block, then
    Q R = Z by ``_cgs2``.

    U (D, D); dpe (n, K, D), keep (n, K) as in ``irnn_reverse_chunk`` (time order); Q (D, k)
    orthonormal, updated in place; writes out[j, i] = ln|R_t[i, i]| (n, k).
    """
    n, K, D = dpe.shape
    k = Q.shape[1]
    Y = np.empty((D, k))
    UY = np.empty((D, k))
    for j in range(n):
        for i in range(D):
            for c in range(k):
                Y[i, c] = Q[i, c]
        for kk in range(K):  # A_1 first
            np.dot(U, Y, UY)
            kp = keep[j, kk]
            for i in range(D):
                d = dpe[j, kk, i]
                for c in range(k):
                    Y[i, c] = kp * Y[i, c] + d * UY[i, c]
        for i in range(D):
            for c in range(k):
                Y[i, c] = a * Y[i, c] - sigma * Q[i, c]
        _cgs2(Y, Q, out[j])


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
            _cgs2(Z, Qb, out[b, j])


# ---------------------------------------------------------------- reverse-mode curve (iRNN)
@njit(cache=NUMBA_CACHE)
def _irnn_pullback_block(src, dst, U, dpe_j, keep_j, a, sigma, R, tmp, out):
    """dst = src J for one row block, J = a·A_K ⋯ A_1 − σI, A_k = keep_k I + diag(dpe_k) U.

    src, dst, R, tmp, out (m, D); dpe_j (K, D); keep_j (K,).  R A_k = keep_k R + (R diag(dpe_k)) U:
    one BLAS product per inner step, the column scaling of the next step fused into the update.
    Returns ‖dst‖_F² (before any normalisation)."""
    m, D = src.shape
    K = dpe_j.shape[0]
    for i in range(m):
        for c in range(D):
            r = src[i, c]
            R[i, c] = r
            tmp[i, c] = r * dpe_j[K - 1, c]
    f = 0.0
    for k in range(K - 1, -1, -1):
        np.dot(tmp, U, out)
        kp = keep_j[k]
        if k > 0:
            for i in range(m):
                for c in range(D):
                    r = kp * R[i, c] + out[i, c]
                    R[i, c] = r
                    tmp[i, c] = r * dpe_j[k - 1, c]
        else:
            for i in range(m):
                for c in range(D):
                    r = a * (kp * R[i, c] + out[i, c]) - sigma * src[i, c]
                    dst[i, c] = r
                    f += r * r
    return f


@njit(parallel=True, cache=NUMBA_CACHE)
def irnn_reverse_chunk(U, dpe, keep, a, sigma, P, blog, S, Slog, bounds):
    """Reverse-mode backward products of the iRNN over one chunk, in parallel over row blocks.

    The rows of P_t = ∂h_T/∂h_t evolve independently (row i of P_{t−1} is row i of P_t times
    J_t), so each thread carries its own block of rows through the whole chunk with its own
    Frobenius normalisation and log scale — no synchronisation per product, every BLAS call
    single-threaded.  J_t is never formed: P J = a·(P A_K ⋯ A_1) − σP costs K products of a
    block against U.

    U (D, D); dpe (n, K, D) = η_k φ'(z_k) and keep (n, K) = 1 − η_k α for the chunk's times in
    ascending order; a, σ: J = a·Π − σI (a = σ for g₀ = 0, 1 + σ for g₀ = h_{m−1});
    P (D, D), blog (nb,): the carried state P_{t_hi} (block b of rows bounds[b]:bounds[b+1]
    is e^{blog[b]} times the stored rows), updated in place to P_{t_lo − 1};
    writes S[j] (n, D, D), Slog[j, b] (n, nb): P_t of the chunk's j-th time in the same form.
    """
    n, K, D = dpe.shape
    nb = bounds.shape[0] - 1
    for b in prange(nb):
        r0 = bounds[b]
        r1 = bounds[b + 1]
        m = r1 - r0
        R = np.empty((m, D))
        tmp = np.empty((m, D))
        out = np.empty((m, D))
        for i in range(m):
            for c in range(D):
                S[n - 1, r0 + i, c] = P[r0 + i, c]
        lg = blog[b]
        for j in range(n - 1, -1, -1):
            Slog[j, b] = lg
            src = S[j, r0:r1]
            dst = S[j - 1, r0:r1] if j > 0 else P[r0:r1]
            f = math.sqrt(_irnn_pullback_block(src, dst, U, dpe[j], keep[j], a, sigma, R, tmp, out))
            if f > 0.0 and math.isfinite(f):
                inv = 1.0 / f
                for i in range(m):
                    for c in range(D):
                        dst[i, c] *= inv
                lg += math.log(f)
            else:  # an exactly zero block stays 0 (log −inf); a non-finite one poisons it
                lg = -math.inf if f == 0.0 else math.nan
        blog[b] = lg


@njit(parallel=True, cache=NUMBA_CACHE)
def block_stack_norms(S, Slog, bounds, g, useg, tol, maxit, sig, ok, logscale, glog):
    """Combine the row blocks of every S[j] to one scale and take its certified σ₁, in parallel.

    S (n, D, D), Slog (n, nb) as written by ``irnn_reverse_chunk``; every S[j] is rescaled in
    place so that P_t = e^{logscale[j]} S[j].  The times are split into useg.shape[0] contiguous
    segments, each swept backwards with ``top_sv`` warm-started from its own row of useg (D,);
    sig, ok (n,) as in ``top_sv_stack``.  With a cotangent g (D,) (else shape (0,)):
    glog[j] = ln‖g P_t‖₂.
    """
    n, D, _ = S.shape
    nb = bounds.shape[0] - 1
    nseg = useg.shape[0]
    has_g = g.shape[0] == D
    for s in prange(nseg):
        lo = (n * s) // nseg
        hi = (n * (s + 1)) // nseg
        w = np.empty(D)
        v = np.empty(D)
        u = useg[s]
        for j in range(hi - 1, lo - 1, -1):
            L = -math.inf
            for b in range(nb):
                if Slog[j, b] > L or math.isnan(Slog[j, b]):
                    L = Slog[j, b]
            logscale[j] = L
            if math.isfinite(L):
                for b in range(nb):
                    e = math.exp(Slog[j, b] - L)
                    if e != 1.0:
                        for i in range(bounds[b], bounds[b + 1]):
                            for c in range(D):
                                S[j, i, c] *= e
            else:
                for i in range(D):
                    for c in range(D):
                        S[j, i, c] = 0.0 if L == -math.inf else math.nan
            sj, cj = top_sv(S[j], u, w, v, tol, maxit)
            sig[j] = sj
            ok[j] = cj
            if has_g:  # g S[j] by rows (contiguous)
                for c in range(D):
                    w[c] = 0.0
                for i in range(D):
                    gi = g[i]
                    for c in range(D):
                        w[c] += gi * S[j, i, c]
                acc = 0.0
                for c in range(D):
                    acc += w[c] * w[c]
                glog[j] = L + 0.5 * _log(acc)


@njit(nogil=True, cache=NUMBA_CACHE, error_model="numpy")
def product_chain(J, P, logs, S, L, Pn):
    """The products of ``BackwardNorms`` for large D (BLAS through ``np.dot``), one chunk:
    for j = n−1 … 0, S[b, j] ← P̃ (the normalised P_t), L[b, j] ← its log scale, then
    P̃ ← P̃ J[b, j] / ‖P̃ J[b, j]‖_F with the log scale advanced (−inf for a zero product, NaN
    for a non-finite one, which then stays NaN).  J (B, n, D, D); P (B, D, D), logs (B,) carry
    the state between chunks; Pn: (D, D) scratch."""
    B, n, D = J.shape[0], J.shape[1], J.shape[2]
    for b in range(B):
        for j in range(n - 1, -1, -1):
            S[b, j] = P[b]
            L[b, j] = logs[b]
            np.dot(P[b], J[b, j], Pn)
            f2 = 0.0
            for i in range(D):
                for k in range(D):
                    f2 += Pn[i, k] * Pn[i, k]
            f = math.sqrt(f2)
            if f > 0.0 and f < math.inf:
                inv = 1.0 / f
                for i in range(D):
                    for k in range(D):
                        P[b, i, k] = Pn[i, k] * inv
                logs[b] = logs[b] + math.log(f)
            else:
                P[b] = Pn
                logs[b] = -math.inf if f == 0.0 else math.nan

"""LAPACK and BLAS callable from @njit code (and so from ``prange`` loops), cached: the exact
top singular value of matrices whose top singular values are clustered.

NumPy's and scipy's LAPACK wrappers hold the GIL, and Numba's ``np.linalg.eigvalsh`` computes
every eigenvalue (``syevd``, ≈ 2× the cost for one).  This module binds scipy's Cython LAPACK
``dsyevr``, ``dpotrf`` and BLAS ``dsyrk`` (the same library scipy.linalg uses) as Numba external
functions under fixed symbol names, registered with LLVM at import; the jitted callers therefore
stay cacheable.

* ``top_eig(G)`` — the largest eigenvalue of a symmetric G by ``dsyevr``, G overwritten;
* ``gram(M, G)`` — G = M Mᵀ by ``dsyrk`` (half the work of a product);
* ``lanczos_top(G, u, kmax, tol, …)`` — the Rayleigh quotient of the top Ritz vector of
  k ≤ kmax Lanczos steps on G (full reorthogonalisation): a lower bound of λ_max that converges
  fast even where power iteration crawls (the near-T products of a gradnorm curve: 8–19 steps
  for 1e-13);
* ``below(G, mu, A)`` — whether λ_max(G) < μ, by attempting the Cholesky factorisation of
  μI − G (``dpotrf``): the upper half of the certificate;
* ``gram_top(S, u, tol, maxit)`` — σ₁ of a square S as √λ_max(S Sᵀ): Lanczos, certified by the
  Cholesky test to relative ``tol``, else ``dsyevr``; exact for σ₁ to relative O(D ε) (its
  docstring);
* ``gram_top_stack(S, idx, sig, useg, tol, maxit)`` — ``gram_top`` of S[idx[i]] for every i, in
  parallel.
"""
from __future__ import annotations

import math

import llvmlite.binding as llvm
import numpy as np
from numba import njit, prange, types
from numba.extending import get_cython_function_address

from ...config import NUMBA_CACHE
from .norms import unit_start

_SYMBOL = "dynlab_scipy_dsyevr"
llvm.add_symbol(_SYMBOL, get_cython_function_address("scipy.linalg.cython_lapack", "dsyevr"))
_c = types.CPointer(types.int8)
_i = types.CPointer(types.int32)
_d = types.CPointer(types.float64)
#: dsyevr(jobz, range, uplo, n, a, lda, vl, vu, il, iu, abstol, m, w, z, ldz, isuppz, work,
#:        lwork, iwork, liwork, info)
_dsyevr = types.ExternalFunction(_SYMBOL, types.void(_c, _c, _c, _i, _d, _i, _d, _d, _i, _i, _d, _i, _d, _d,
                                                     _i, _i, _d, _i, _i, _i, _i))
llvm.add_symbol("dynlab_scipy_dpotrf", get_cython_function_address("scipy.linalg.cython_lapack", "dpotrf"))
#: dpotrf(uplo, n, a, lda, info)
_dpotrf = types.ExternalFunction("dynlab_scipy_dpotrf", types.void(_c, _i, _d, _i, _i))
llvm.add_symbol("dynlab_scipy_dsyrk", get_cython_function_address("scipy.linalg.cython_blas", "dsyrk"))
#: dsyrk(uplo, trans, n, k, alpha, a, lda, beta, c, ldc)
_dsyrk = types.ExternalFunction("dynlab_scipy_dsyrk", types.void(_c, _c, _i, _i, _d, _d, _i, _d, _d, _i))


@njit(cache=NUMBA_CACHE)
def top_eig(G):
    """(λ_max, info) of the symmetric (D, D) C-ordered G by LAPACK ``dsyevr`` (RANGE='I',
    il = iu = D, eigenvalue only); G is overwritten.  info ≠ 0: LAPACK failed, λ is NaN."""
    D = G.shape[0]
    ch = np.array([ord("N"), ord("I"), ord("L")], dtype=np.int8)
    # n, lda, il, iu, m, ldz, info, lwork, liwork
    ii = np.array([D, D, D, D, 0, 1, 0, -1, -1], dtype=np.int32)
    dd = np.zeros(3)                          # vl, vu, abstol (0: LAPACK's default, full accuracy)
    w = np.empty(D)
    z = np.empty(1)
    isuppz = np.empty(2, dtype=np.int32)
    work = np.empty(1)
    iwork = np.empty(1, dtype=np.int32)
    for rep in range(2):                      # a workspace query, then the call
        if rep == 1:
            ii[7] = max(1, int(work[0]))
            ii[8] = max(1, iwork[0])
            work = np.empty(ii[7])
            iwork = np.empty(ii[8], dtype=np.int32)
        _dsyevr(ch[0:].ctypes, ch[1:].ctypes, ch[2:].ctypes, ii[0:].ctypes, G.ctypes, ii[1:].ctypes,
                dd[0:].ctypes, dd[1:].ctypes, ii[2:].ctypes, ii[3:].ctypes, dd[2:].ctypes, ii[4:].ctypes,
                w.ctypes, z.ctypes, ii[5:].ctypes, isuppz.ctypes, work.ctypes, ii[7:].ctypes, iwork.ctypes,
                ii[8:].ctypes, ii[6:].ctypes)
        if ii[6] != 0:
            return math.nan, int(ii[6])
    return w[0], 0


@njit(cache=NUMBA_CACHE)
def gram(M, G):
    """G = M Mᵀ for square C-ordered M, G (D, D), by BLAS ``dsyrk`` (one triangle, mirrored).

    Column-major BLAS sees the C-ordered M as Mᵀ, so TRANS='T' gives (Mᵀ)ᵀ Mᵀ = M Mᵀ."""
    D = M.shape[0]
    ch = np.array([ord("U"), ord("T")], dtype=np.int8)
    ii = np.array([D, D, D], dtype=np.int32)          # n, k, ld
    dd = np.array([1.0, 0.0])                         # alpha, beta
    _dsyrk(ch[0:].ctypes, ch[1:].ctypes, ii[0:].ctypes, ii[1:].ctypes, dd[0:].ctypes, M.ctypes, ii[2:].ctypes,
           dd[1:].ctypes, G.ctypes, ii[2:].ctypes)
    for i in range(D):                                # BLAS's upper = C's lower triangle
        for j in range(i + 1, D):
            G[i, j] = G[j, i]


@njit(cache=NUMBA_CACHE)
def below(G, mu, A):
    """True when μI − G is positive definite to working precision (LAPACK ``dpotrf`` succeeds),
    i.e. λ_max(G) < μ up to the Cholesky backward error O(D ε ‖μI − G‖).  A (D, D) work array."""
    D = G.shape[0]
    for i in range(D):
        for j in range(D):
            A[i, j] = -G[i, j]
        A[i, i] += mu
    ch = np.array([ord("L")], dtype=np.int8)
    ii = np.array([D, D, 0], dtype=np.int32)          # n, lda, info
    _dpotrf(ch[0:].ctypes, ii[0:].ctypes, A.ctypes, ii[1:].ctypes, ii[2:].ctypes)
    return ii[2] == 0


@njit(cache=NUMBA_CACHE)
def tri_top(a, b, m):
    """The largest eigenvalue of the symmetric tridiagonal matrix with diagonal a[:m] and
    off-diagonal b[:m−1], by bisection on Sturm counts to full precision (returns the lower end
    of the final bracket)."""
    lo = a[0]
    hi = -math.inf
    for i in range(m):
        r = (abs(b[i - 1]) if i > 0 else 0.0) + (abs(b[i]) if i < m - 1 else 0.0)
        lo = max(lo, a[i])                            # λ_max ≥ every diagonal entry
        hi = max(hi, a[i] + r)                        # Gershgorin
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not (lo < mid < hi):
            break
        below_mid = 0                                 # eigenvalues < mid: negative pivots of T − mid I
        d = 1.0
        for i in range(m):
            d = a[i] - mid - (b[i - 1] * b[i - 1] / d if i > 0 else 0.0)
            if d == 0.0:
                d = -1e-300
            if d < 0.0:
                below_mid += 1
        if below_mid == m:
            hi = mid
        else:
            lo = mid
    return lo


@njit(cache=NUMBA_CACHE)
def tri_vec(a, b, m, theta, x):
    """An eigenvector estimate of the tridiagonal (a[:m], b[:m−1]) for the eigenvalue θ, by two
    steps of inverse iteration with Gaussian elimination without pivoting (a zero pivot is
    replaced by a tiny one); written to x[:m], unit 2-norm.  Only a good guess is needed: the
    caller takes the Rayleigh quotient of the vector it gives."""
    scale = 0.0
    for i in range(m):
        scale = max(scale, abs(a[i]) + (abs(b[i]) if i < m - 1 else 0.0))
    tiny = 1e-14 * max(scale, 1e-300)
    piv = np.empty(m)
    for i in range(m):
        x[i] = 1.0
    for _ in range(2):
        p = a[0] - theta
        if abs(p) < tiny:
            p = tiny
        piv[0] = p
        for i in range(1, m):                          # forward elimination of T − θI
            f = b[i - 1] / piv[i - 1]
            x[i] -= f * x[i - 1]
            p = a[i] - theta - f * b[i - 1]
            if abs(p) < tiny:
                p = tiny
            piv[i] = p
        x[m - 1] /= piv[m - 1]
        for i in range(m - 2, -1, -1):                 # back substitution
            x[i] = (x[i] - b[i] * x[i + 1]) / piv[i]
        nx = 0.0
        for i in range(m):
            nx += x[i] * x[i]
        nx = math.sqrt(nx)
        if not (nx > 0.0 and math.isfinite(nx)):
            for i in range(m):
                x[i] = 1.0 / math.sqrt(m)
            return
        for i in range(m):
            x[i] /= nx


@njit(cache=NUMBA_CACHE, fastmath={"reassoc", "contract"})
def lanczos_top(G, u, kmax, tol, Q, al, be, w):
    """(ρ, steps): a lower bound of λ_max of the symmetric G, converged by Lanczos.

    Lanczos from u (overwritten with the normalised start) with full reorthogonalisation done
    twice (one pass loses orthogonality when G q ≈ q, e.g. G ≈ I), stopped when the top Ritz
    value θ grows by less than tol·θ/100 over a step, or after kmax steps.  The value returned is
    not θ but ρ = yᵀGy/yᵀy for the Ritz vector y: a Rayleigh quotient, so ρ ≤ λ_max holds for
    any y whatever the rounding inside the recurrence (up to O(D ε) in ρ itself) — the lower
    half of the certificate; ``below`` gives the upper.  Q (kmax+1, D), al, be (kmax,), w (D,)
    are work arrays.  Reassociated sums (as ``top_sv``)."""
    D = G.shape[0]
    unit_start(u)
    for i in range(D):
        Q[0, i] = u[i]
    theta_old = -math.inf
    m = kmax
    for k in range(kmax):
        for i in range(D):
            w[i] = 0.0
        for j in range(D):                            # w = G q_k by rows of the symmetric G
            qj = Q[k, j]
            for i in range(D):
                w[i] += G[j, i] * qj
        a = 0.0
        for i in range(D):
            a += Q[k, i] * w[i]
        al[k] = a
        for _rep in range(2):                         # full reorthogonalisation, twice
            for p in range(k + 1):
                c = 0.0
                for i in range(D):
                    c += Q[p, i] * w[i]
                for i in range(D):
                    w[i] -= c * Q[p, i]
        nb = 0.0
        for i in range(D):
            nb += w[i] * w[i]
        nb = math.sqrt(nb)
        be[k] = nb
        if k >= 2 or k == D - 1:
            theta = tri_top(al, be, k + 1)
            if theta - theta_old <= 0.01 * tol * abs(theta):
                m = k + 1
                break
            theta_old = theta
        if not (nb > 1e-300 * max(abs(a), 1.0)) or k == D - 1:   # an invariant subspace
            m = k + 1
            break
        for i in range(D):
            Q[k + 1, i] = w[i] / nb
    theta = tri_top(al, be, m)
    s = np.empty(m)
    tri_vec(al, be, m, theta, s)
    y = np.zeros(D)
    for p in range(m):
        sp = s[p]
        for i in range(D):
            y[i] += sp * Q[p, i]
    for i in range(D):
        w[i] = 0.0
    for j in range(D):
        yj = y[j]
        for i in range(D):
            w[i] += G[j, i] * yj
    num = 0.0
    den = 0.0
    for i in range(D):
        num += y[i] * w[i]
        den += y[i] * y[i]
    return (num / den if den > 0.0 else -math.inf), m


@njit(cache=NUMBA_CACHE)
def gram_top(S, u=None, tol=0.0, maxit=0):
    """σ₁ of a square S as √λ_max(M Mᵀ)·f, M = S/f, f = max|S| (no over- or underflow in M Mᵀ):
    the Rayleigh quotient θ of the top Ritz vector of ≤ ``maxit`` Lanczos steps from u where
    μI − G with μ = θ(1 + 2 tol) is positive definite (then θ ≤ λ_max < μ: σ₁ = √θ to relative
    tol), else LAPACK's
    ``dsyevr``; the SVD answers where that does not converge.  NaN for a non-finite S.

    Exact to rounding for σ₁: λ_max of a symmetric matrix is found to absolute accuracy
    O(ε‖M Mᵀ‖) = O(ε σ₁²), and forming M Mᵀ perturbs it by O(D ε σ₁²), so σ₁ comes out to
    relative O(D ε) (only the small singular values lose accuracy in the Gram matrix, and they
    are not asked for).  ≈ 5× cheaper than the SVD at D = 128."""
    D = S.shape[0]
    f = 0.0
    for i in range(D):
        for j in range(D):
            a = abs(S[i, j])
            if not math.isfinite(a):
                return math.nan
            if a > f:
                f = a
    if f == 0.0:
        return 0.0
    M = S / f
    G = np.empty((D, D))
    gram(M, G)
    if u is not None and maxit > 0:
        kmax = min(maxit, D)
        theta, _ = lanczos_top(G, u, kmax, tol, np.empty((kmax + 1, D)), np.empty(kmax), np.empty(kmax),
                               np.empty(D))
        if theta > 0.0 and below(G, theta * (1.0 + 2.0 * tol), M):      # M is free now: the work array
            return f * math.sqrt(theta)
    lam, info = top_eig(G)
    if info != 0:
        return f * np.linalg.svd(S / f)[1][0]
    return f * math.sqrt(max(lam, 0.0))


@njit(parallel=True, cache=NUMBA_CACHE)
def gram_top_stack(S, idx, sig, useg, tol, maxit):
    """sig[idx[i]] = ``gram_top``(S[idx[i]]) for every i, in parallel (run BLAS on one thread).

    idx ascending; the list is cut into useg.shape[0] contiguous parts, each swept from its
    last entry down, the Lanczos start being its row of useg (D,) (maxit = 0: LAPACK for every
    matrix)."""
    n = idx.shape[0]
    nseg = useg.shape[0]
    for p in prange(nseg):
        u = useg[p].copy()
        for i in range((n * (p + 1)) // nseg - 1, (n * p) // nseg - 1, -1):
            sig[idx[i]] = gram_top(S[idx[i]], u, tol, maxit)

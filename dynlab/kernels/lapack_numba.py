"""LAPACK's ``dsyevr`` callable from @njit code (and so from ``prange`` loops), cached.

NumPy's and scipy's LAPACK wrappers hold the GIL, and Numba's ``np.linalg.eigvalsh`` computes
every eigenvalue (``syevd``, ≈ 2× the cost for one).  This module binds scipy's Cython LAPACK
``dsyevr`` (the same library scipy.linalg uses) as a Numba external function under a fixed
symbol name, registered with LLVM at import; the jitted callers therefore stay cacheable.

* ``top_eig(G)`` — the largest eigenvalue of a symmetric G, G overwritten;
* ``gram_power(G, u, v, tol, maxit)`` — λ_max of a Gram matrix certified by Kato–Temple with
  the Frobenius gap bound (cheap; fails on tightly clustered tops);
* ``gram_top(S, u, tol, maxit)`` — σ₁ of a square S as √λ_max(S Sᵀ) (``gram_power``, else
  ``dsyevr``), exact for σ₁ to relative O(D ε) (its docstring);
* ``gram_top_stack(S, idx, sig, useg, tol, maxit)`` — ``gram_top`` of S[idx[i]] for every i, in
  parallel.
"""
from __future__ import annotations

import math

import llvmlite.binding as llvm
import numpy as np
from numba import njit, prange, types
from numba.extending import get_cython_function_address

from ..config import NUMBA_CACHE
from .grad_numba import unit_start

_SYMBOL = "dynlab_scipy_dsyevr"
llvm.add_symbol(_SYMBOL, get_cython_function_address("scipy.linalg.cython_lapack", "dsyevr"))
_c = types.CPointer(types.int8)
_i = types.CPointer(types.int32)
_d = types.CPointer(types.float64)
#: dsyevr(jobz, range, uplo, n, a, lda, vl, vu, il, iu, abstol, m, w, z, ldz, isuppz, work,
#:        lwork, iwork, liwork, info)
_dsyevr = types.ExternalFunction(_SYMBOL, types.void(_c, _c, _c, _i, _d, _i, _d, _d, _i, _i, _d, _i, _d, _d,
                                                     _i, _i, _d, _i, _i, _i, _i))


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


@njit(cache=NUMBA_CACHE, fastmath={"reassoc", "contract"})
def gram_power(G, u, v, tol, maxit):
    """(λ, certified) for the top eigenvalue of a symmetric positive semidefinite G by power
    iteration from u (overwritten), stopped by the Kato–Temple bound with the Frobenius gap:
    for a unit u, ρ = uᵀGu ≤ λ₁ and λ₂² ≤ ‖G‖_F² − λ₁² ≤ ‖G‖_F² − ρ² =: a², so when ρ > a,
    ρ ≤ λ₁ ≤ ρ + ε²/(ρ − a), ε = ‖Gu − ρu‖; stops when that is ≤ 2·tol·ρ (σ₁ = √λ₁ to
    relative tol).  This separates λ₁ far sooner than the trace bound of ``top_sv`` (it needs
    Σ_{i>1} σ_i⁴ < σ₁⁴ rather than Σ_{i>1} σ_i² < σ₁²).  Gives up after ``maxit`` steps, or
    when ρ ≤ a and ρ has stopped growing.  Reassociated sums, as in ``top_sv``."""
    D = G.shape[0]
    F2 = 0.0
    for i in range(D):
        for j in range(D):
            F2 += G[i, j] * G[i, j]
    unit_start(u)
    rho = 0.0
    rho_old = 0.0
    for it in range(maxit):
        for i in range(D):
            v[i] = 0.0
        for j in range(D):          # v = G u by rows of the symmetric G (contiguous, vectorises)
            uj = u[j]
            for i in range(D):
                v[i] += G[j, i] * uj
        rho = 0.0
        for i in range(D):
            rho += u[i] * v[i]
        eps2 = 0.0
        nv = 0.0
        for i in range(D):
            r = v[i] - rho * u[i]
            eps2 += r * r
            nv += v[i] * v[i]
        a = math.sqrt(max(F2 - rho * rho, 0.0))
        if rho > a and eps2 <= 2.0 * tol * rho * (rho - a):
            return rho, True
        if nv == 0.0:
            break
        if it >= 4 and rho <= a and rho < rho_old * (1.0 + 1e-3):
            break
        rho_old = rho
        s = 1.0 / math.sqrt(nv)
        for i in range(D):
            u[i] = v[i] * s
    return rho, False


@njit(cache=NUMBA_CACHE)
def gram_top(S, u=None, tol=0.0, maxit=0):
    """σ₁ of a square S as √λ_max(M Mᵀ)·f, M = S/f, f = max|S| (no over- or underflow in M Mᵀ):
    by ``gram_power`` from u where it certifies to ``tol`` within ``maxit`` steps, else by
    LAPACK's ``dsyevr``; the SVD answers where that does not converge.  NaN for a non-finite S.

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
    G = np.dot(M, M.T)
    if u is not None and maxit > 0:
        rho, ok = gram_power(G, u, np.empty(D), tol, maxit)
        if ok:
            return f * math.sqrt(rho)
    lam, info = top_eig(G)
    if info != 0:
        return f * np.linalg.svd(M)[1][0]
    return f * math.sqrt(max(lam, 0.0))


@njit(parallel=True, cache=NUMBA_CACHE)
def gram_top_stack(S, idx, sig, useg, tol, maxit):
    """sig[idx[i]] = ``gram_top``(S[idx[i]]) for every i, in parallel (run BLAS on one thread).

    idx ascending; the list is cut into useg.shape[0] contiguous parts, each swept from its
    last entry down with ``gram_power`` warm-started from its row of useg (D,) (maxit = 0:
    LAPACK for every matrix)."""
    n = idx.shape[0]
    nseg = useg.shape[0]
    for p in prange(nseg):
        u = useg[p].copy()
        for i in range((n * (p + 1)) // nseg - 1, (n * p) // nseg - 1, -1):
            sig[idx[i]] = gram_top(S[idx[i]], u, tol, maxit)

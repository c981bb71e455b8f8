"""@njit kernels: scalar loops over (batch, time, inner step, unit), ``cache=True``.

They are the default for small per-step work (the iRNN paper's 2-D cells, long horizons),
where the per-call overhead of array libraries dominates.  Activation dispatch is by the
integer ids of ``dynlab.activations``.  Wrappers live in ``dynlab.simulation``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..config import NUMBA_CACHE


@njit(cache=NUMBA_CACHE, inline="always")
def act_scalar(act, z, leak):
    """φ(z) for the activation with integer id ``act`` (see dynlab.activations)."""
    if act == 0:
        return math.tanh(z)
    elif act == 1:
        return 0.0 if z < 0.0 else z  # NaN passes through, as in np.maximum
    elif act == 2:
        e = math.exp(-abs(z))
        return 1.0 / (1.0 + e) if z >= 0.0 else e / (1.0 + e)
    elif act == 3:
        return z
    elif act == 4:
        return leak * z if z < 0.0 else z
    else:
        return abs(z)


@njit(cache=NUMBA_CACHE, inline="always")
def _all_finite(v):
    for i in range(v.shape[0]):
        if not math.isfinite(v[i]):
            return False
    return True


_ROW_FORM_MAX = 8


@njit(cache=NUMBA_CACHE, inline="always")
def _affine(UT, v, cv, z):
    """z = cv + U v with UT = Uᵀ (C order), as column sweeps z += U[:, j] v_j: every z_i is
    summed in the same order j = 0, 1, … as the row dot product, so the result is bit-identical
    to it, but the inner loop runs over contiguous i and vectorises (simulation 3.3× faster at
    D = 128).  The kernels keep the row form for D ≤ ``_ROW_FORM_MAX`` (shorter loops: ≈ 12 %
    faster at D = 2)."""
    D = z.shape[0]
    for i in range(D):
        z[i] = cv[i]
    for j in range(v.shape[0]):
        vj = v[j]
        for i in range(D):
            z[i] += UT[j, i] * vj


@njit(cache=NUMBA_CACHE)
def gated(R, c, h0, a, gain, act, leak, stop, H, bad):
    """h_t = a h_{t-1} + gain φ(R h_{t-1} + c_t) for every sequence; writes H, bad."""
    B, T, D = c.shape
    hp = np.empty(D, dtype=H.dtype)
    z = np.empty(D, dtype=H.dtype)
    RT = np.ascontiguousarray(R.T)
    for bi in range(B):
        for i in range(D):
            hp[i] = h0[bi, i]
        bad[bi] = T
        for t in range(T):
            if D <= _ROW_FORM_MAX:  # written out: an inlined helper taking c[bi, t] costs 50 % at D = 2
                for i in range(D):
                    acc = c[bi, t, i]
                    for j in range(D):
                        acc += R[i, j] * hp[j]
                    z[i] = acc
            else:
                _affine(RT, hp, c[bi, t], z)
            for i in range(D):
                H[bi, t, i] = a * hp[i] + gain * act_scalar(act, z[i], leak)
            for i in range(D):
                hp[i] = H[bi, t, i]
            if not _all_finite(hp):
                if bad[bi] == T:
                    bad[bi] = t
                if stop:
                    break


@njit(cache=NUMBA_CACHE)
def irnn(U, c, h0, eta, alpha, K, g0prev, sign, act, leak, stop, H, bad):
    """iRNN eq. 5 (K inner Euler steps per time step); eta is a (rows, K) table."""
    B, T, D = c.shape
    rows = eta.shape[0]
    hp = np.empty(D, dtype=H.dtype)
    g = np.empty(D, dtype=H.dtype)
    s = np.empty(D, dtype=H.dtype)
    z = np.empty(D, dtype=H.dtype)
    UT = np.ascontiguousarray(U.T)
    for bi in range(B):
        for i in range(D):
            hp[i] = h0[bi, i]
        bad[bi] = T
        for t in range(T):
            r = t if rows > 1 else 0
            for i in range(D):
                g[i] = hp[i] if g0prev else 0.0
            for k in range(K):
                e = eta[r, k]
                for i in range(D):
                    s[i] = g[i] + sign * hp[i]
                if D <= _ROW_FORM_MAX:  # the row form, fused (forward-small, D = 2, is this loop)
                    for i in range(D):
                        acc = c[bi, t, i]
                        for j in range(D):
                            acc += U[i, j] * s[j]
                        g[i] = g[i] + e * (act_scalar(act, acc, leak) - alpha * s[i])
                else:
                    _affine(UT, s, c[bi, t], z)
                    for i in range(D):
                        g[i] = g[i] + e * (act_scalar(act, z[i], leak) - alpha * s[i])
            for i in range(D):
                hp[i] = g[i]
                H[bi, t, i] = g[i]
            if not _all_finite(hp):
                if bad[bi] == T:
                    bad[bi] = t
                if stop:
                    break


@njit(cache=NUMBA_CACHE, inline="always")
def _ctrnn_f(U, cv, y, tau, alpha, act, leak, out):
    D = y.shape[0]
    for i in range(D):
        z = cv[i]
        for j in range(D):
            z += U[i, j] * y[j]
        out[i] = (-alpha * y[i] + act_scalar(act, z, leak)) / tau


@njit(cache=NUMBA_CACHE)
def ctrnn(U, c, h0, tau, alpha, dt, substeps, rk4, act, leak, stop, H, bad):
    """Fixed-step Euler (rk4=False) or classical RK4 over each input interval."""
    B, T, D = c.shape
    g = np.empty(D, dtype=H.dtype)
    y = np.empty(D, dtype=H.dtype)
    k1 = np.empty(D, dtype=H.dtype)
    k2 = np.empty(D, dtype=H.dtype)
    k3 = np.empty(D, dtype=H.dtype)
    k4 = np.empty(D, dtype=H.dtype)
    h = dt / substeps
    for bi in range(B):
        for i in range(D):
            g[i] = h0[bi, i]
        bad[bi] = T
        for t in range(T):
            cv = c[bi, t]
            for _ in range(substeps):
                _ctrnn_f(U, cv, g, tau, alpha, act, leak, k1)
                if not rk4:
                    for i in range(D):
                        g[i] = g[i] + h * k1[i]
                    continue
                for i in range(D):
                    y[i] = g[i] + 0.5 * h * k1[i]
                _ctrnn_f(U, cv, y, tau, alpha, act, leak, k2)
                for i in range(D):
                    y[i] = g[i] + 0.5 * h * k2[i]
                _ctrnn_f(U, cv, y, tau, alpha, act, leak, k3)
                for i in range(D):
                    y[i] = g[i] + h * k3[i]
                _ctrnn_f(U, cv, y, tau, alpha, act, leak, k4)
                for i in range(D):
                    g[i] = g[i] + (h / 6.0) * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
            for i in range(D):
                H[bi, t, i] = g[i]
            if not _all_finite(g):
                if bad[bi] == T:
                    bad[bi] = t
                if stop:
                    break


# ----------------------------------------------------------------------------------------
# Fused element-wise passes for the vectorised kernels (dynlab.kernels.vectorised): each is
# one pass over the state block s = buf[:, :D] of the C-contiguous product operand
# buf = [s, x_t, 1] (indexing buf itself keeps the inner loop unit-stride, so LLVM
# vectorises it; a strided view of it would not be), and the finishing passes also report
# whether what they wrote is finite.  The check accumulates v − v (0 for a finite v, NaN for
# ±inf or NaN), which keeps the loop free of branches.

@njit(cache=NUMBA_CACHE)
def fused_axpby(buf, D, z, a, e):
    """s ← a·s + e·z for s = buf[:, :D]."""
    B = buf.shape[0]
    for i in range(B):
        for j in range(D):
            buf[i, j] = a * buf[i, j] + e * z[i, j]


@njit(cache=NUMBA_CACHE)
def fused_irnn_finish(buf, D, z, a, e, hprev, sign, start, out):
    """out ← a·s + e·z − sign·hprev;  s ← start·out;  returns all(out finite)."""
    B = buf.shape[0]
    acc = 0.0
    for i in range(B):
        for j in range(D):
            v = a * buf[i, j] + e * z[i, j] - sign * hprev[i, j]
            out[i, j] = v
            buf[i, j] = start * v
            acc += v - v
    return acc == 0.0


@njit(cache=NUMBA_CACHE)
def fused_gated_finish(buf, D, z, a, gain, out):
    """out ← a·h + gain·z;  h ← out for h = buf[:, :D];  returns all(out finite)."""
    B = buf.shape[0]
    acc = 0.0
    for i in range(B):
        for j in range(D):
            v = a * buf[i, j] + gain * z[i, j]
            out[i, j] = v
            buf[i, j] = v
            acc += v - v
    return acc == 0.0


# ----------------------------------------------------------------------------------------
# A float64 tanh that LLVM vectorises.  NumPy's float64 tanh calls libm once per element
# (≈17 ns here, no SIMD on AVX2 machines) and so does a scalar ``math.tanh`` in a loop; in
# the vectorised kernels it cost more than the BLAS product itself.  This one is branch-free
# arithmetic (selects, no calls), so a loop over it runs 4 lanes wide (≈5 ns per element):
#   |x| < 0.625:  tanh x = x + x³ P(x²)/Q(x²)        (Cephes' rational approximation)
#   |x| ≥ 0.625:  tanh x = (e − 1)/(e + 1), e = e^{2|x|} (2|x| clamped at 40, where tanh = 1
#                 in float64), e^y = 2^n e^r by Cody–Waite reduction (|r| ≤ ln2/2, a
#                 degree-13 Taylor polynomial, truncation < 1e-17) and 2^n built from the
#                 bits of n by exact multiplications by 2, 4, 16, 256, 65536, 2³².
# Both branches share one division.  Max relative error ≤ 2 ulp against libm over
# [−25, 25] and [1e-300, 30] (tests/test_activations.py); NaN, ±inf and −0 behave as
# np.tanh.  ``error_model="numpy"`` drops the ZeroDivisionError check that would keep the
# loop scalar; ``fastmath={"contract"}`` only allows fused multiply-adds (no NaN or
# reassociation assumptions).

_TP0, _TP1, _TP2 = -9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3
_TQ0, _TQ1, _TQ2 = 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93145751953125e-1
_LN2_LO = 1.42860682030941723212e-6
_VEC = dict(cache=NUMBA_CACHE, error_model="numpy", fastmath={"contract"})


@njit(inline="always", **_VEC)
def tanh_f64(x):
    """tanh(x), branch-free (see the comment above); ≤ 2 ulp from libm."""
    a = abs(x)
    a2 = a * a
    q = ((a2 + _TQ0) * a2 + _TQ1) * a2 + _TQ2
    num_small = a * q + a * a2 * ((_TP0 * a2 + _TP1) * a2 + _TP2)
    y = 2.0 * a
    y = y if y < 40.0 else 40.0
    n = np.floor(y * _LOG2E + 0.5)
    r = (y - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    # 2^n for the integer 0 ≤ n ≤ 58, one bit of n at a time (every factor is exact)
    h = np.floor(0.5 * n)
    s = 1.0 + (n - 2.0 * h)
    m = h
    h = np.floor(0.5 * m)
    s *= 1.0 + (m - 2.0 * h) * 3.0
    m = h
    h = np.floor(0.5 * m)
    s *= 1.0 + (m - 2.0 * h) * 15.0
    m = h
    h = np.floor(0.5 * m)
    s *= 1.0 + (m - 2.0 * h) * 255.0
    m = h
    h = np.floor(0.5 * m)
    s *= 1.0 + (m - 2.0 * h) * 65535.0
    m = h
    h = np.floor(0.5 * m)
    s *= 1.0 + (m - 2.0 * h) * 4294967295.0
    e = p * s
    small = a < 0.625
    v = (num_small if small else e - 1.0) / (q if small else e + 1.0)
    v = v if a == a else a  # NaN in, NaN out
    return math.copysign(v, x)


@njit(**_VEC)
def tanh_inplace(z):
    """z ← tanh(z) for a C-contiguous 2-D float64 array, 4 lanes wide."""
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            z[i, j] = tanh_f64(z[i, j])


@njit(**_VEC)
def sigmoid_inplace(z):
    """z ← σ(z) = (1 + tanh(z/2))/2 (stable for every z)."""
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            z[i, j] = 0.5 + 0.5 * tanh_f64(0.5 * z[i, j])

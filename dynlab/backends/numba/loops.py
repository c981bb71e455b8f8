"""@njit kernels: scalar loops over (batch, time, inner step, unit), ``cache=True``.

They are the default for small per-step work (the iRNN paper's 2-D cells, long horizons),
where the per-call overhead of array libraries dominates.  Activation dispatch is by the
integer ids of ``dynlab.activations``.  Wrappers live in ``dynlab.simulation``.
"""
from __future__ import annotations

import math
import os

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit
from numba.core import types
from numba.extending import intrinsic

from ...config import NUMBA_CACHE
from .. import cells


#: φ(z) by activation id, the cells' own (``dynlab.backends.cells.phi``): the scalar loops' activation.
act_scalar = cells.phi


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
                H[bi, t, i] = cells.cell_update(a, gain, hp[i], z[i], act, leak)
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
                        g[i] = cells.irnn_inner(g[i], s[i], acc, e, alpha, act, leak)
                else:
                    _affine(UT, s, c[bi, t], z)
                    for i in range(D):
                        g[i] = cells.irnn_inner(g[i], s[i], z[i], e, alpha, act, leak)
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
        out[i] = cells.ctrnn_rate(y[i], z, tau, alpha, act, leak)


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
# A float64 tanh that LLVM vectorises.  NumPy's float64 tanh calls libm once per element
# (≈17 ns here, no SIMD on AVX2 machines) and so does a scalar ``math.tanh`` in a loop; in
# the vectorised kernels it cost more than the BLAS product itself.  This one is branch-free
# arithmetic (selects, no calls), so a loop over it runs 4 lanes wide (≈1.7 ns per element on
# the 2-core AMD EPYC; 3.3 ns when 2^n was built by six multiplications, one per bit of n):
#   |x| < 0.625:  tanh x = x + x³ P(x²)/Q(x²)        (Cephes' rational approximation)
#   |x| ≥ 0.625:  tanh x = (e − 1)/(e + 1), e = e^{2|x|} (2|x| clamped at 40, where tanh = 1
#                 in float64), e^y = 2^n e^r by Cody–Waite reduction (|r| ≤ ln2/2, a
#                 degree-13 Taylor polynomial, truncation < 1e-17) and 2^n built from the
#                 bits of n (``pow2_f64``: integer add and shift, 4 lanes wide on AVX2).
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
def dot_rows(A, B, out, rows):
    """out = A B by ``np.dot`` (BLAS), in calls of ``rows`` rows of A each (the last may have
    fewer): ``_arrays.gemm_rows`` picks rows so that each call takes the BLAS's
    small-matrix path where it has one; rows ≥ len(A) is one call."""
    M = A.shape[0]
    if rows >= M:
        np.dot(A, B, out)
    else:
        for lo in range(0, M, rows):
            hi = min(M, lo + rows)
            np.dot(A[lo:hi], B, out[lo:hi])
_INF = math.inf


@intrinsic
def _pow2(typingctx, n):
    """2^n for an integer-valued float64 n in [−1022, 1023], exact, from its bits: n + 1.5·2⁵²
    holds n in the low bits of its mantissa, and ((those bits) + 1023) << 52 are the bits of
    2^n.  Emitted straight as LLVM IR (an add, two free reinterpretations, an integer add and
    shift), so it costs the callers no level of Numba's IR inlining, whose deep copy of the
    callee's IR per call site dominates the compile time of the GRU/LSTM kernels."""
    if n != types.float64:
        return None

    def codegen(context, builder, signature, args):
        i64 = llvm_ir.IntType(64)
        shifted = builder.fadd(args[0], llvm_ir.Constant(llvm_ir.DoubleType(), 6755399441055744.0))
        bits = builder.shl(builder.add(builder.bitcast(shifted, i64), llvm_ir.Constant(i64, 1023)),
                           llvm_ir.Constant(i64, 52))
        return builder.bitcast(bits, llvm_ir.DoubleType())

    return types.float64(types.float64), codegen


@njit(inline="always", **_VEC)
def pow2_f64(n):
    """2^n for an integer-valued float64 n in [−1022, 1023] (exact; ``_pow2``, callable from Python)."""
    return _pow2(n)


@njit(inline="always", **_VEC)
def exp_f64(y):
    """e^y for |y| ≤ 708 (≤ 2 ulp; no range check: callers clamp).  The degree-13 Taylor
    polynomial of e^r is 1 + r(1 + r q(r)), with q = 1/2! + r/3! + … + r¹¹/13! by Estrin's
    scheme (pairs c_i + c_{i+1} r, then the powers r², r⁴, r⁸): six fused multiply-adds deep
    instead of Horner's thirteen, and the last two steps as Horner's, so as accurate (against
    80-bit exp over [−708, 708]: max 0.88 ulp, mean 0.26, Horner 0.84 and 0.26; Estrin all the
    way to the constant term: 2.1 ulp).  Where the vectors are narrow the passes are bound by
    that dependency chain (Horner → this, per pass over 128 × 128 entries with AVX2 code:
    tanh ≈ 15 % faster, the gated steps' passes 10–15 %; with AVX-512 about even)."""
    n = np.floor(y * _LOG2E + 0.5)
    r = (y - n * _LN2_HI) - n * _LN2_LO
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    q0 = 0.5 + r * (1.0 / 6.0)
    q2 = 1.0 / 24.0 + r * (1.0 / 120.0)
    q4 = 1.0 / 720.0 + r * (1.0 / 5040.0)
    q6 = 1.0 / 40320.0 + r * (1.0 / 362880.0)
    q8 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0)
    q10 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0)
    q = ((q0 + q2 * r2) + (q4 + q6 * r2) * r4) + (q8 + q10 * r2) * r8
    p = (q * r + 1.0) * r + 1.0
    return p * _pow2(n)


@njit(inline="always", **_VEC)
def _tanh_vectorised(x):
    """tanh(x), branch-free (see the comment above); ≤ 2 ulp from libm."""
    a = abs(x)
    a2 = a * a
    q = ((a2 + _TQ0) * a2 + _TQ1) * a2 + _TQ2
    num_small = a * q + a * a2 * ((_TP0 * a2 + _TP1) * a2 + _TP2)
    y = 2.0 * a
    y = y if y < 40.0 else 40.0
    e = exp_f64(y)  # 2^n e^r, 0 ≤ n ≤ 58 (the same reduction and polynomial)
    small = a < 0.625
    v = (num_small if small else e - 1.0) / (q if small else e + 1.0)
    v = v if a == a else a  # NaN in, NaN out
    return math.copysign(v, x)


@njit(inline="always", **_VEC)
def _tanh_libm(x):
    return math.tanh(x)


@njit(**_VEC)
def tanh_inplace(z):
    """z ← tanh(z) for a C-contiguous 2-D float64 array, 4 lanes wide."""
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            z[i, j] = tanh_f64(z[i, j])


# ----------------------------------------------------------------------------------------
# The logistic sigmoid of the GRU/LSTM gates, vectorisable: the cells' formula
# (``cells.sigmoid_from``: 1/(1 + e) for x ≥ 0, e/(1 + e) below, e = e^{−|x|}) with e from
# ``exp_f64`` above (Cody–Waite reduction, degree-13 polynomial, 2^n from its bits: AVX2 has the
# 64-bit integer add and shift, so this stays 4 lanes wide).  Past |x| = 708 (where 2^n would
# leave the normal range) e is 0: σ is 1 or 0, within 1e-307 of the exact value; NaN stays NaN.


@njit(inline="always", **_VEC)
def _exp_neg_abs(x):
    """e^{−|x|} by ``exp_f64``, 0 past |x| = 708, NaN for NaN."""
    a = abs(x)
    return 0.0 if a > 708.0 else exp_f64(-a)


@njit(inline="always", **_VEC)
def _sigmoid_vectorised(x):
    """σ(x), branch-free: ``cells.sigmoid_from`` with ``_exp_neg_abs``; ≤ 3 ulp from the two-sided form."""
    return cells.sigmoid_from(x, _exp_neg_abs(x))


#: The batched and training passes' tanh and sigmoid: the vectorisable ones above, unless
#: ``DYNLAB_NUMBA_FAST_ACTIVATIONS=0`` at import (the A/B of ``benchmarks/ab.py``: the cells'
#: libm-based φ instead; set with a fresh ``NUMBA_CACHE_DIR``, since Numba's cache does not see it).
FAST_ACTIVATIONS = os.environ.get("DYNLAB_NUMBA_FAST_ACTIVATIONS", "1") != "0"
tanh_f64 = _tanh_vectorised if FAST_ACTIVATIONS else _tanh_libm
sigmoid_f64 = _sigmoid_vectorised if FAST_ACTIVATIONS else cells.sigmoid


@njit(inline="always", **_VEC)
def phi_f64(act, z, leak):
    """φ(z) in float64: the vectorisable tanh and sigmoid, ``act_scalar`` for the others."""
    if act == 0:
        return tanh_f64(z)
    elif act == 2:
        return sigmoid_f64(z)
    return act_scalar(act, z, leak)


@njit(inline="always", **_VEC)
def phi_other(act, z, leak):
    """``phi_f64`` for act ≠ 0, in the kernels' non-tanh branches (their tanh branch calls
    ``tanh_f64`` itself): the same numbers without a dead copy of ``tanh_f64`` inlined,
    which cut the LSTM kernels' first compile by ≈ 10 %."""
    return sigmoid_f64(z) if act == 2 else act_scalar(act, z, leak)


#: φ'(z) from z and a = φ(z) (``dynlab.backends.cells.dphi_at``: 1 − a² for tanh and a(1 − a) for
#: sigmoid need no second transcendental).
dphi_given = cells.dphi_at


@njit(**_VEC)
def sigmoid_exact_inplace(z):
    """z ← σ(z) for a C-contiguous 2-D float64 array with ``sigmoid_f64`` (≤ 3 ulp, relative,
    also deep in the tails)."""
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            z[i, j] = sigmoid_f64(z[i, j])


# ----------------------------------------------------------------------------------------
# Fused element-wise passes for the vectorised one-line and iRNN kernels
# (below).  After each product z = [s, x_t, 1]·[U W b]ᵀ ONE pass applies φ
# and the update together (φ(z) is never stored), over the state block s = buf[:, :D] of the
# C-contiguous operand buf, indexing buf itself so that the unit loop is unit-stride.  The
# passes that end a time step write h_t into H (B, T, D) by index — never through the strided
# view H[:, t], whose 'A' layout keeps LLVM from vectorising — read h_{t−1} the same way, and
# count non-finite entries in an integer (a float accumulator is a reduction LLVM may not
# reorder, which keeps the loop scalar).  The activation is dispatched once per row, outside
# the unit loop, with tanh written out (a separate φ pass plus a scalar finishing pass cost
# twice to four times as much per (256 × 128) block).  ``nogil``: the batch may be split between threads
# (``backend.run_blocks``).

@njit(nogil=True, **_VEC)
def irnn_inner(buf, D, z, a, e, act, leak):
    """s ← a·s + e·φ(z) for s = buf[:, :D] (an inner step that does not end the time step)."""
    for b in range(buf.shape[0]):
        if act == 0:
            for j in range(D):
                buf[b, j] = cells.cell_out(a, e, float(buf[b, j]), tanh_f64(float(z[b, j])))
        else:
            for j in range(D):
                buf[b, j] = cells.cell_out(a, e, float(buf[b, j]), phi_other(act, float(z[b, j]), leak))


@njit(nogil=True, **_VEC)
def irnn_last(buf, D, z, a, e, hp, H, t, sign, start, act, leak):
    """The inner step that ends time step t: h_t = a·s + e·φ(z) − sign·h_{t−1} into H[:, t]
    and into hp (which holds h_{t−1} on entry: a (B, D) array of its own, since reading
    H[:, t − 1] while writing H[:, t] keeps LLVM from vectorising), then s ← start·h_t, the
    next step's s_0.  Returns whether every entry of h_t is finite."""
    nb = 0
    for b in range(buf.shape[0]):
        if act == 0:
            for j in range(D):
                v = cells.cell_out(a, e, float(buf[b, j]), tanh_f64(float(z[b, j]))) - sign * float(hp[b, j])
                H[b, t, j] = v
                hp[b, j] = v
                buf[b, j] = start * v
                nb += 0 if abs(v) < _INF else 1
        else:
            for j in range(D):
                v = cells.cell_out(a, e, float(buf[b, j]), phi_other(act, float(z[b, j]), leak)) - sign * float(hp[b, j])
                H[b, t, j] = v
                hp[b, j] = v
                buf[b, j] = start * v
                nb += 0 if abs(v) < _INF else 1
    return nb == 0


@njit(nogil=True, **_VEC)
def ctrnn_rate_pass(out, v, ct, tau, alpha, act, leak):
    """out ← (φ(out + c) − α v)/τ, the CTRNN's vector field at v once out holds v Uᵀ and ct the
    input drive c = W x + b (``cells.ctrnn_rate``), φ in float64."""
    for b in range(out.shape[0]):
        if act == 0:
            for j in range(out.shape[1]):
                out[b, j] = cells.ctrnn_out(float(v[b, j]), tanh_f64(float(out[b, j]) + float(ct[b, j])), tau, alpha)
        else:
            for j in range(out.shape[1]):
                out[b, j] = cells.ctrnn_out(float(v[b, j]), phi_other(act, float(out[b, j]) + float(ct[b, j]), leak),
                                            tau, alpha)


@njit(nogil=True, **_VEC)
def gated_step(buf, D, z, a, gain, H, t, act, leak):
    """h_t = a·h + gain·φ(z) into H[:, t] and into h = buf[:, :D]; returns whether it is finite."""
    nb = 0
    for b in range(buf.shape[0]):
        if act == 0:
            for j in range(D):
                v = cells.cell_out(a, gain, float(buf[b, j]), tanh_f64(float(z[b, j])))
                H[b, t, j] = v
                buf[b, j] = v
                nb += 0 if abs(v) < _INF else 1
        else:
            for j in range(D):
                v = cells.cell_out(a, gain, float(buf[b, j]), phi_other(act, float(z[b, j]), leak))
                H[b, t, j] = v
                buf[b, j] = v
                nb += 0 if abs(v) < _INF else 1
    return nb == 0


# ----------------------------------------------------------------------------------------
# GRU and LSTM (PyTorch's equations and gate order; dynlab.models.gru_lstm).  The kernels
# take the input drive with the hidden biases that can be folded into it already added:
#   GRU:  gi = W_ih x + b_ih + [b_hr; b_hz; 0]   (b_hn stays apart: it sits inside r ⊙ (…))
#   LSTM: gi = W_ih x + b_ih + b_hh
# and gh = W_hh h (no bias).  One row of the update, from the gate pre-activations, is an
# inlined helper shared by the batch kernels (every row of the (B, ·) blocks) and the scalar
# loops (a (1, ·) block per sequence).  Gates are computed in float64, also for float32 arrays
# (the products run in the array's precision; the state is rounded to it when stored).
# What keeps the unit loop 4 lanes wide (measured, B = D = 128, 2 sigmoids + tanh per unit:
# ≈ 5 ns per unit instead of 32–35): the states are written into H (B, T, ·) by index, never
# through a strided view H[:, t] (an 'A'-layout array defeats the vectoriser); the finiteness
# check counts non-finite entries in an integer (a float sum is a reduction LLVM may not
# reorder, so it keeps the loop scalar); the activation is dispatched once per row, outside
# the unit loop, with tanh written out.



@njit(inline="always", **_VEC)
def _phi_tanh(act, z, leak):
    """φ = the vectorisable tanh whatever ``act`` (the unit loops written out for tanh)."""
    return tanh_f64(z)


#: The cells' GRU and LSTM units (``cells.gated_units``) with the vectorisable σ, for the unit
#: loops written out for tanh (``*_tanh``) and for the other activations (``*_other``).
_UNIT = njit(inline="always", **_VEC)
gru_tanh, lstm_tanh = cells.gated_units(sigmoid_f64, _phi_tanh, _UNIT)
gru_other, lstm_other = cells.gated_units(sigmoid_f64, phi_other, _UNIT)


@njit(inline="always", **_VEC)
def _gru_row(gi, gh, bhn, h, b, H, bh, t, act, leak):
    """Row b: h ← (1 − z) n + z h (``gru_tanh`` / ``gru_other``: r = σ(gi_r + gh_r),
    z = σ(gi_z + gh_z), a_n = gi_n + r (gh_n + b_hn)), H[bh, t] ← h; returns the number of
    non-finite entries."""
    D = h.shape[1]
    nb = 0
    if act == 0:
        for i in range(D):
            h[b, i] = gru_tanh(float(gi[b, i]) + float(gh[b, i]), float(gi[b, D + i]) + float(gh[b, D + i]),
                               float(gi[b, 2 * D + i]), float(gh[b, 2 * D + i]) + float(bhn[i]), float(h[b, i]),
                               act, leak)[0]
            w = h[b, i]
            H[bh, t, i] = w
            nb += 0 if abs(w) < _INF else 1
    else:
        for i in range(D):
            h[b, i] = gru_other(float(gi[b, i]) + float(gh[b, i]), float(gi[b, D + i]) + float(gh[b, D + i]),
                                float(gi[b, 2 * D + i]), float(gh[b, 2 * D + i]) + float(bhn[i]), float(h[b, i]),
                                act, leak)[0]
            w = h[b, i]
            H[bh, t, i] = w
            nb += 0 if abs(w) < _INF else 1
    return nb


@njit(inline="always", **_VEC)
def _lstm_row(gi, gh, h, c, b, H, bh, t, act, leak):
    """Row b: c ← f c + i g, h ← o φ(c) (``lstm_tanh`` / ``lstm_other`` on the pre-activations
    gi + gh), H[bh, t] ← [h; c]; returns the number of non-finite entries."""
    D = h.shape[1]
    nb = 0
    if act == 0:
        for k in range(D):
            hv, cv, _i, _f, _g, _o, _t = lstm_tanh(
                float(gi[b, k]) + float(gh[b, k]), float(gi[b, D + k]) + float(gh[b, D + k]),
                float(gi[b, 2 * D + k]) + float(gh[b, 2 * D + k]), float(gi[b, 3 * D + k]) + float(gh[b, 3 * D + k]),
                float(c[b, k]), act, leak)
            c[b, k] = cv
            cn = c[b, k]
            h[b, k] = hv
            hn = h[b, k]
            H[bh, t, k] = hn
            H[bh, t, D + k] = cn
            nb += (0 if abs(hn) < _INF else 1) + (0 if abs(cn) < _INF else 1)
    else:
        for k in range(D):
            hv, cv, _i, _f, _g, _o, _t = lstm_other(
                float(gi[b, k]) + float(gh[b, k]), float(gi[b, D + k]) + float(gh[b, D + k]),
                float(gi[b, 2 * D + k]) + float(gh[b, 2 * D + k]), float(gi[b, 3 * D + k]) + float(gh[b, 3 * D + k]),
                float(c[b, k]), act, leak)
            c[b, k] = cv
            cn = c[b, k]
            h[b, k] = hv
            hn = h[b, k]
            H[bh, t, k] = hn
            H[bh, t, D + k] = cn
            nb += (0 if abs(hn) < _INF else 1) + (0 if abs(cn) < _INF else 1)
    return nb


@njit(nogil=True, **_VEC)
def gru_finish(gi, gh, bhn, h, H, t, act, leak):
    """The GRU step of the whole batch from gi (B, 3D) and gh = h W_hhᵀ (B, 3D): h ← h',
    H[:, t] ← h'; returns whether every entry written is finite."""
    nb = 0
    for b in range(h.shape[0]):
        nb += _gru_row(gi, gh, bhn, h, b, H, b, t, act, leak)
    return nb == 0


@njit(nogil=True, **_VEC)
def lstm_finish(gi, gh, h, c, H, t, act, leak):
    """The LSTM step of the whole batch from gi (B, 4D) and gh = h W_hhᵀ (B, 4D): h, c ← h', c';
    H[:, t] ← [h', c']; returns whether every entry written is finite."""
    nb = 0
    for b in range(h.shape[0]):
        nb += _lstm_row(gi, gh, h, c, b, H, b, t, act, leak)
    return nb == 0


@njit(nogil=True, **_VEC)
def _drive_chunk(xT, W_ihT, bias, t, gi):
    """gi[:m] = x_t … x_{t+m−1} W_ihᵀ + bias for the next m = min(n, T − t) steps (gi (n, B, G)):
    one product over the chunk."""
    T, B, d = xT.shape
    G = gi.shape[2]
    m = min(gi.shape[0], T - t)
    flat = gi[:m].reshape(m * B, G)
    np.dot(xT[t:t + m].reshape(m * B, d), W_ihT, flat)
    for i in range(m * B):
        for j in range(G):
            flat[i, j] += bias[j]


@njit(nogil=True, **_VEC)
def gated_batch(xT, W_ihT, bias, W_hhT, bhn, h, c, H, lstm, act, leak, stop, gi, gh, rows):
    """The batched GRU's or LSTM's whole time loop in one call (``batched.gru`` /
    ``lstm``; no Python between the steps, the GIL released): the input drive a chunk of steps
    at a time (``_drive_chunk``), per step gh = h W_hhᵀ (``dot_rows``: calls of ``rows`` rows)
    and ``gru_finish``'s or ``lstm_finish``'s pass.  xT (T, B, d) time-major; h (B, D) and, for
    the LSTM, c (B, D): the state (the initial one on entry); bhn: the GRU's b_hn; H (B, T, D)
    or (B, T, 2D).  Returns
    the first step with a non-finite entry, or −1; with ``stop`` the loop ends there."""
    T = xT.shape[0]
    n = gi.shape[0]
    first = -1
    for t in range(T):
        if t % n == 0:
            _drive_chunk(xT, W_ihT, bias, t, gi)
        dot_rows(h, W_hhT, gh, rows)
        g = gi[t % n]
        ok = lstm_finish(g, gh, h, c, H, t, act, leak) if lstm else gru_finish(g, gh, bhn, h, H, t, act, leak)
        if not ok and first < 0:
            first = t
            if stop:
                break
    return first


@njit(inline="always", **_VEC)
def _drive_row(WT, bias, v, out):
    """out[0] = bias + W v with WT = Wᵀ (n_in, n_out) C order, as column sweeps over contiguous
    rows of WT (the loop over outputs vectorises; see ``_affine``)."""
    G = out.shape[1]
    for k in range(G):
        out[0, k] = bias[k]
    for j in range(v.shape[0]):
        vj = v[j]
        for k in range(G):
            out[0, k] += WT[j, k] * vj


@njit(**_VEC)
def gru(W_ihT, W_hhT, bi, bhn, x, h0, act, leak, stop, H, bad):
    """PyTorch's GRU over every sequence, one at a time (small cells, long horizons): per step
    gi = bi + W_ih x_t and gh = W_hh h by column sweeps, then the gates.  W_ihT (d, 3D), W_hhT
    (D, 3D), bi = b_ih + [b_hr; b_hz; 0], bhn (D); writes H (B, T, D) and bad (B)."""
    B, T, d = x.shape
    D = W_hhT.shape[0]
    G = W_hhT.shape[1]
    h = np.empty((1, D), dtype=H.dtype)
    gi = np.empty((1, G), dtype=H.dtype)
    gh = np.empty((1, G), dtype=H.dtype)
    zero = np.zeros(G, dtype=H.dtype)
    for b in range(B):
        for i in range(D):
            h[0, i] = h0[b, i]
        bad[b] = T
        for t in range(T):
            _drive_row(W_ihT, bi, x[b, t], gi)
            _drive_row(W_hhT, zero, h[0], gh)
            if _gru_row(gi, gh, bhn, h, 0, H, b, t, act, leak):
                if bad[b] == T:
                    bad[b] = t
                if stop:
                    break


@njit(**_VEC)
def lstm(W_ihT, W_hhT, bi, x, s0, act, leak, stop, H, bad):
    """PyTorch's LSTM over every sequence, one at a time, on the state s = [h; c]: W_ihT (d, 4D),
    W_hhT (D, 4D), bi = b_ih + b_hh; s0 (B, 2D); writes H (B, T, 2D) and bad (B)."""
    B, T, d = x.shape
    D = W_hhT.shape[0]
    G = W_hhT.shape[1]
    h = np.empty((1, D), dtype=H.dtype)
    c = np.empty((1, D), dtype=H.dtype)
    gi = np.empty((1, G), dtype=H.dtype)
    gh = np.empty((1, G), dtype=H.dtype)
    zero = np.zeros(G, dtype=H.dtype)
    for b in range(B):
        for i in range(D):
            h[0, i] = s0[b, i]
            c[0, i] = s0[b, D + i]
        bad[b] = T
        for t in range(T):
            _drive_row(W_ihT, bi, x[b, t], gi)
            _drive_row(W_hhT, zero, h[0], gh)
            if _lstm_row(gi, gh, h, c, 0, H, b, t, act, leak):
                if bad[b] == T:
                    bad[b] = t
                if stop:
                    break

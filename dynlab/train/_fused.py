"""Fused element-wise passes of one GRU / LSTM step for the BPTT tape (``dynlab.train.backprop``).

NumPy does each step's products (BLAS) and transcendental functions (its SIMD ``exp``/``tanh``);
what is left — the sigmoids' 1/(1 + e), the cell update, the GRU's blend and the whole
backward step, which is arithmetic only — is one jitted pass over the batch here instead of a
dozen ufunc calls over (B, D) arrays.  Arrays only (no models); every kernel works in place on
the tape's rows as documented, and the formulas are those of the backprop module docstring.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..config import NUMBA_CACHE


@njit(cache=NUMBA_CACHE, nogil=True)
def lstm_forward(a, c_prev, c):
    """a (B, 4D): [e^{−a_i} | e^{−a_f} | e^{−a_o} | g] → [i | f | o | g] in place (σ = 1/(1 + e));
    c ← f ⊙ c_prev + i ⊙ g.  Returns Σ c (finite exactly when every c is)."""
    B, D = c.shape
    total = 0.0
    for b in range(B):
        for j in range(D):
            i = 1.0 / (1.0 + a[b, j])
            f = 1.0 / (1.0 + a[b, D + j])
            a[b, j] = i
            a[b, D + j] = f
            a[b, 2 * D + j] = 1.0 / (1.0 + a[b, 2 * D + j])
            v = f * c_prev[b, j] + i * a[b, 3 * D + j]
            c[b, j] = v
            total += v
    return total


@njit(cache=NUMBA_CACHE, nogil=True)
def lstm_backward(a, tc, c_prev, hb, cb, dg, dt, tanh):
    """One LSTM step backwards, in place.  a (B, 4D): the gates [i | f | o | g] → their
    pre-activations' cotangents [ā_i | ā_f | ā_o | ā_g]; tc = φ(c_t); hb = h̄_t (read); cb:
    c̄_t → c̄_{t-1}.  φ'(a_g), φ'(c_t) are 1 − g², 1 − tc² when ``tanh``, else dg, dt."""
    B, D = tc.shape
    for b in range(B):
        for j in range(D):
            i = a[b, j]
            f = a[b, D + j]
            o = a[b, 2 * D + j]
            g = a[b, 3 * D + j]
            h = hb[b, j]
            t = tc[b, j]
            dtj = 1.0 - t * t if tanh else dt[b, j]
            dgj = 1.0 - g * g if tanh else dg[b, j]
            ct = cb[b, j] + h * o * dtj
            a[b, j] = ct * g * (i * (1.0 - i))
            a[b, D + j] = ct * c_prev[b, j] * (f * (1.0 - f))
            a[b, 2 * D + j] = h * t * (o * (1.0 - o))
            a[b, 3 * D + j] = ct * i * dgj
            cb[b, j] = ct * f


@njit(cache=NUMBA_CACHE, nogil=True)
def gru_gates(g, cn, an):
    """g (B, 3D): [e^{−a_r} | e^{−a_z} | q] → [r | z | q] in place; an ← r ⊙ q + c_n (the
    candidate's pre-activation)."""
    B, D = cn.shape
    for b in range(B):
        for j in range(D):
            r = 1.0 / (1.0 + g[b, j])
            g[b, j] = r
            g[b, D + j] = 1.0 / (1.0 + g[b, D + j])
            an[b, j] = r * g[b, 2 * D + j] + cn[b, j]


@njit(cache=NUMBA_CACHE, nogil=True)
def gru_blend(z, h_prev, n, h):
    """h ← n + z ⊙ (h_prev − n).  Returns Σ h (finite exactly when every h is)."""
    B, D = n.shape
    total = 0.0
    for b in range(B):
        for j in range(D):
            v = n[b, j] + z[b, j] * (h_prev[b, j] - n[b, j])
            h[b, j] = v
            total += v
    return total


@njit(cache=NUMBA_CACHE, nogil=True)
def gru_backward(g, n, h_prev, hb, dn, tanh):
    """One GRU step backwards, in place.  g (B, 3D): [r | z | q] → the cotangents of
    [a_r | a_z | q], [ā_r | ā_z | ā_n ⊙ r]; n: the candidate → ā_n; hb: h̄_t → h̄_t ⊙ z (the
    direct part of h̄_{t-1}; the caller adds [ā_r | ā_z | ā_n ⊙ r] W_hh).  φ'(a_n) is 1 − n²
    when ``tanh``, else dn."""
    B, D = n.shape
    for b in range(B):
        for j in range(D):
            r = g[b, j]
            z = g[b, D + j]
            q = g[b, 2 * D + j]
            nn = n[b, j]
            h = hb[b, j]
            dnj = 1.0 - nn * nn if tanh else dn[b, j]
            a_n = h * (1.0 - z) * dnj
            n[b, j] = a_n
            g[b, j] = a_n * q * (r * (1.0 - r))
            g[b, D + j] = h * (h_prev[b, j] - nn) * (z * (1.0 - z))
            g[b, 2 * D + j] = a_n * r
            hb[b, j] = h * z


# ----------------------------------------------------------------------------------------
# The iRNN's taped forward and backward inner steps (eq. 5; the backprop module docstring):
# after each product z = s_{k-1} Uᵀ (BLAS), ONE pass does the rest of the inner step — the
# input drive c = W x_m + b added, a = φ(z + c) and φ' stored on the tape, g updated, and the
# next step's s written straight into its tape slot — and backwards two passes bracket the
# product z̄ U: one forms z̄ and the two inner products η̄, ⟨ḡ, s⟩ need, one updates ḡ and h̄.
# φ is dynlab.kernels.numba_cpu's vectorised tanh/sigmoid (≤ 2–3 ulp), dispatched once per
# call, outside the loops.  Measured (issue 20, BENCHMARKS.md): the iRNN train step with
# these passes against NumPy's ufuncs.

from ..kernels.numba_cpu import _VEC, dphi_given, phi_f64, tanh_f64  # noqa: E402

_INF = float("inf")


# The two kernels below repeat their unit loop, once with tanh written out and once per the
# other activations, and the last inner step is a kernel of its own, on purpose: with the
# activation dispatched inside a shared inline helper the taped forward pass (B = 64, D = 128,
# K = 5, T = 200, one thread) took 0.129 s instead of 0.062 s (the loop no longer vectorised),
# and closing the time step in a second pass took 0.065 s.

@njit(nogil=True, **_VEC)
def irnn_tape_inner(z, c, s, g, hp, A, Dp, s_next, e, alpha, sign, act, leak):
    """An inner step k < K of the taped forward pass: a = φ(z + c) → A, φ' → Dp (not for tanh
    and sigmoid, whose φ' the backward pass takes from a), g ← g + e (a − α s),
    s_next ← g + sign·h_{m−1} (hp)."""
    B, D = z.shape
    for b in range(B):
        if act == 0:
            for j in range(D):
                a = tanh_f64(z[b, j] + c[b, j])
                A[b, j] = a
                gv = g[b, j] + e * (a - alpha * s[b, j])
                g[b, j] = gv
                s_next[b, j] = gv + sign * hp[b, j]
        else:
            for j in range(D):
                zz = z[b, j] + c[b, j]
                a = phi_f64(act, zz, leak)
                A[b, j] = a
                if act != 2:
                    Dp[b, j] = dphi_given(act, zz, a, leak)
                gv = g[b, j] + e * (a - alpha * s[b, j])
                g[b, j] = gv
                s_next[b, j] = gv + sign * hp[b, j]


@njit(nogil=True, **_VEC)
def irnn_tape_last(z, c, s, g, A, Dp, h, s_next, e, alpha, sign, prev, act, leak):
    """The inner step that ends time step m: as ``irnn_tape_inner``, then h_m = g → h, the next
    time step's g_0 (h_m when ``prev``, else 0) → g and s_0 = g_0 + sign·h_m → s_next.
    Returns the number of non-finite entries of h_m."""
    B, D = z.shape
    keep = 1.0 if prev else 0.0
    nb = 0
    for b in range(B):
        if act == 0:
            for j in range(D):
                a = tanh_f64(z[b, j] + c[b, j])
                A[b, j] = a
                hv = g[b, j] + e * (a - alpha * s[b, j])
                h[b, j] = hv
                g[b, j] = keep * hv
                s_next[b, j] = keep * hv + sign * hv
                nb += 0 if abs(hv) < _INF else 1
        else:
            for j in range(D):
                zz = z[b, j] + c[b, j]
                a = phi_f64(act, zz, leak)
                A[b, j] = a
                if act != 2:
                    Dp[b, j] = dphi_given(act, zz, a, leak)
                hv = g[b, j] + e * (a - alpha * s[b, j])
                h[b, j] = hv
                g[b, j] = keep * hv
                s_next[b, j] = keep * hv + sign * hv
                nb += 0 if abs(hv) < _INF else 1
    return nb


@njit(nogil=True, cache=NUMBA_CACHE, error_model="numpy", fastmath={"contract", "reassoc"})
def irnn_back_pre(gb, S, A, Dp, e, zb, act):
    """Before the product: z̄ = e ḡ ⊙ φ' → zb (φ' = 1 − a² for tanh, a(1 − a) for sigmoid,
    else read from Dp); returns (⟨ḡ, s⟩, ⟨ḡ, a⟩).  (The two sums may be reassociated, so that
    they vectorise: any order is as accurate.)"""
    B, D = gb.shape
    gs = 0.0
    ga = 0.0
    for b in range(B):
        if act == 0:
            for j in range(D):
                v = gb[b, j]
                a = A[b, j]
                gs += v * S[b, j]
                ga += v * a
                zb[b, j] = e * v * (1.0 - a * a)
        elif act == 2:
            for j in range(D):
                v = gb[b, j]
                a = A[b, j]
                gs += v * S[b, j]
                ga += v * a
                zb[b, j] = e * v * (a * (1.0 - a))
        else:
            for j in range(D):
                v = gb[b, j]
                gs += v * S[b, j]
                ga += v * A[b, j]
                zb[b, j] = e * v * Dp[b, j]
    return gs, ga


@njit(nogil=True, **_VEC)
def irnn_back_post(sb, gb, hpb, ae, sign):
    """After the product sb = z̄ U: s̄ = sb − α e ḡ, ḡ ← ḡ + s̄, h̄_{m−1} += sign·s̄ (hpb)."""
    B, D = gb.shape
    for b in range(B):
        for j in range(D):
            v = sb[b, j] - ae * gb[b, j]
            gb[b, j] += v
            hpb[b, j] += sign * v


@njit(nogil=True, **_VEC)
def irnn_forward(UT, cin, H, A, Dp, has_dp, eta, alpha, sign, prev, act, leak, z, g, s):
    """The iRNN's whole taped forward pass in one call (no Python between the steps, the GIL
    released): per inner step the product s_{k-1} Uᵀ (BLAS, through ``np.dot``) and one fused
    pass.  H[0] holds h_0 on entry; fills H[1:], A and, when ``has_dp`` (φ' not a function of
    φ), Dp (else a (1, 1, B, D) scratch).  The inner states s are not kept: the backward pass
    recomputes them from h_{m−1} and A (``irnn_inner_states``), in the same operations, so
    bitwise equal; s (2, B, D) is scratch.  Returns the first time step m (0-based) whose
    h_{m+1} is not finite, or −1."""
    T, K = A.shape[0], A.shape[1]
    keep = 1.0 if prev else 0.0
    h0 = H[0]
    B, D = h0.shape
    for b in range(B):
        for j in range(D):
            g[b, j] = keep * h0[b, j]
            s[0, b, j] = keep * h0[b, j] + sign * h0[b, j]
    cur = 0
    for m in range(T):
        for k in range(K):
            np.dot(s[cur], UT, z)
            dp = Dp[m, k] if has_dp else Dp[0, 0]
            if k < K - 1:
                irnn_tape_inner(z, cin[m], s[cur], g, H[m], A[m, k], dp, s[1 - cur], eta[m, k], alpha, sign,
                                act, leak)
            elif irnn_tape_last(z, cin[m], s[cur], g, A[m, k], dp, H[m + 1], s[1 - cur], eta[m, k], alpha, sign,
                                prev, act, leak):
                return m
            cur = 1 - cur
    return -1


@njit(nogil=True, **_VEC)
def irnn_inner_states(hp, A, eta_m, alpha, sign, prev, Sm, g):
    """s_0 … s_{K−1} of one time step (Sm (K, B, D)) from h_{m−1} (hp) and the tape's
    a_1 … a_K, by the forward pass's own operations (g (B, D) scratch): g_0 = h_{m−1} or 0,
    s_k = g_k + sign·h_{m−1}, g_{k+1} = g_k + η_k (a_k − α s_k)."""
    K, B, D = Sm.shape
    keep = 1.0 if prev else 0.0
    for b in range(B):
        for j in range(D):
            g[b, j] = keep * hp[b, j]
            Sm[0, b, j] = keep * hp[b, j] + sign * hp[b, j]
    for k in range(K - 1):
        e = eta_m[k]
        for b in range(B):
            for j in range(D):
                gv = g[b, j] + e * (A[k, b, j] - alpha * Sm[k, b, j])
                g[b, j] = gv
                Sm[k + 1, b, j] = gv + sign * hp[b, j]


@njit(nogil=True, **_VEC)
def irnn_backward(U, H, A, Dp, has_dp, eta, ext, alpha, sign, prev, act, Zm, Sm, Cb, Ubar, part, gs, etab, hb,
                  gb, hpb, sb, dh1):
    """The iRNN's whole backward pass in one call: per time step the inner states s_k
    recomputed (``irnn_inner_states``, into Sm (K, B, D)), then per inner step
    ``irnn_back_pre``, the product z̄ U (BLAS) and ``irnn_back_post``; per time step
    Ū += Σ_k z̄_kᵀ s_{k−1} (one product over the step's K inner steps, in cache) and
    Cb[m] = Σ_k z̄_k.  hb: zeros on entry, ∂L/∂h_0 on exit; dh1 ← ∂L/∂h_1."""
    T, K, B, D = A.shape
    for m in range(T - 1, -1, -1):
        for b in range(B):
            for j in range(D):
                v = hb[b, j] + ext[m, b, j]
                hb[b, j] = v
                gb[b, j] = v
                hpb[b, j] = 0.0
        if m == 0:
            dh1[...] = hb
        irnn_inner_states(H[m], A[m], eta[m], alpha, sign, prev, Sm, sb)
        for k in range(K - 1, -1, -1):
            e = eta[m, k]
            gsv, gav = irnn_back_pre(gb, Sm[k], A[m, k], Dp[m, k] if has_dp else A[m, k], e, Zm[k], act)
            gs[m, k] = gsv
            etab[m, k] = gav - alpha * gsv
            np.dot(Zm[k], U, sb)
            irnn_back_post(sb, gb, hpb, alpha * e, sign)
        np.dot(Zm.reshape(K * B, D).T, Sm.reshape(K * B, D), part)
        for i in range(D):
            for j in range(D):
                Ubar[i, j] += part[i, j]
        for b in range(B):
            for j in range(D):
                acc = 0.0
                for k in range(K):
                    acc += Zm[k, b, j]
                Cb[m, b, j] = acc
                hb[b, j] = hpb[b, j] + (gb[b, j] if prev else 0.0)

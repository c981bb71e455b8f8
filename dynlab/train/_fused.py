"""Fused element-wise passes of one GRU / LSTM step for the BPTT tape (``dynlab.train.backprop``).

NumPy does each step's products (BLAS) and transcendental functions (its SIMD ``exp``/``tanh``);
what is left — the sigmoids' 1/(1 + e), the cell update, the GRU's blend and the whole
backward step, which is arithmetic only — is one jitted pass over the batch here instead of a
dozen ufunc calls over (B, D) arrays.  Arrays only (no models); every kernel works in place on
the tape's rows as documented, and the formulas are those of the backprop module docstring.
"""
from __future__ import annotations

from numba import njit

from ..config import NUMBA_CACHE


@njit(cache=NUMBA_CACHE)
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


@njit(cache=NUMBA_CACHE)
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


@njit(cache=NUMBA_CACHE)
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


@njit(cache=NUMBA_CACHE)
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


@njit(cache=NUMBA_CACHE)
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

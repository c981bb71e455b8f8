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


@njit(cache=NUMBA_CACHE)
def gated(R, c, h0, a, gain, act, leak, stop, H, bad):
    """h_t = a h_{t-1} + gain φ(R h_{t-1} + c_t) for every sequence; writes H, bad."""
    B, T, D = c.shape
    hp = np.empty(D, dtype=H.dtype)
    for bi in range(B):
        for i in range(D):
            hp[i] = h0[bi, i]
        bad[bi] = T
        for t in range(T):
            for i in range(D):
                z = c[bi, t, i]
                for j in range(D):
                    z += R[i, j] * hp[j]
                H[bi, t, i] = a * hp[i] + gain * act_scalar(act, z, leak)
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
                for i in range(D):
                    z = c[bi, t, i]
                    for j in range(D):
                        z += U[i, j] * s[j]
                    g[i] = g[i] + e * (act_scalar(act, z, leak) - alpha * s[i])
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


class FusedOps:
    """The ``ops`` of ``dynlab.kernels.vectorised`` as single fused numba passes."""

    @staticmethod
    def axpby(buf, D, z, a, e):
        fused_axpby(buf, D, z, a, e)

    @staticmethod
    def irnn_finish(buf, D, z, a, e, hprev, sign, start, out):
        return bool(fused_irnn_finish(buf, D, z, a, e, hprev, sign, start, out))

    @staticmethod
    def gated_finish(buf, D, z, a, gain, out):
        return bool(fused_gated_finish(buf, D, z, a, gain, out))

"""@njit kernel of the "auto" implicit-network solver, one point at a time (small state sizes).

For a few units the batched NumPy solver is all call overhead (tens of µs per Picard step);
this scalar loop does the same algorithm — Picard (at most ``max_picard`` steps, while it
contracts by ≤ ``max_rate``), then Newton with J = I − D A and a halving line search, started
from the last Picard iterate (if Picard still contracted) or from ``steps`` RK4 steps of the flow
from Z0; if Newton stalls, again from the flow after 10× and 100× as many steps — in microseconds.
Points still unsolved are left to the NumPy rescues of ``solve_stacked``.
The wrapper is ``dynlab.analysis.implicit.solve_stacked``; tests compare it with the NumPy path.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...config import NUMBA_CACHE
from .jacobians import dact_scalar as _dact
from .loops import act_scalar


@njit(cache=NUMBA_CACHE, inline="always")
def _map(A, c, z, act, leak, pre, g):
    """pre = A z + c, g = f(pre)."""
    U = z.shape[0]
    for i in range(U):
        s = c[i]
        for j in range(U):
            s += A[i, j] * z[j]
        pre[i] = s
        g[i] = act_scalar(act, s, leak)


@njit(cache=NUMBA_CACHE)
def _newton(A, c, z, act, leak, tol, max_newton, pre, g, G, J, zc, Gc, its, n):
    """Newton with a halving line search on ‖G‖₂ from z (updated in place); returns (converged, ‖G‖∞)."""
    U = z.shape[0]
    _map(A, c, z, act, leak, pre, g)
    for i in range(U):
        G[i] = z[i] - g[i]
    for it in range(max_newton):
        rn = 0.0
        n0 = 0.0
        for i in range(U):
            rn = max(rn, abs(G[i]))
            n0 += G[i] * G[i]
        n0 = math.sqrt(n0)
        if rn <= tol or not math.isfinite(rn):
            break
        its[n] += 1
        for i in range(U):
            dfi = _dact(act, pre[i], leak)
            for j in range(U):
                J[i, j] = -dfi * A[i, j]
            J[i, i] += 1.0
        step = np.linalg.solve(J, -G)
        lam = 1.0
        while True:
            for i in range(U):
                zc[i] = z[i] + lam * step[i]
            _map(A, c, zc, act, leak, pre, g)
            nc = 0.0
            for i in range(U):
                Gc[i] = zc[i] - g[i]
                nc += Gc[i] * Gc[i]
            if math.sqrt(nc) <= (1.0 - 1e-4 * lam) * n0 or lam < 1e-10:
                break
            lam *= 0.5
        for i in range(U):
            z[i] = zc[i]
            G[i] = Gc[i]
    rn = 0.0
    for i in range(U):
        d = abs(G[i])
        if not (d <= rn):
            rn = d if math.isfinite(d) else math.inf
    return rn <= tol, rn


@njit(cache=NUMBA_CACHE)
def auto_solve(A, C, Z0, act, leak, tol, max_picard, max_rate, steps, dt, max_newton, Z, res, its, conv, code):
    """Solve Z_n = f(A Z_n + C_n) for every row n; writes Z, res (‖G‖∞), its, conv, code (1 Picard, 3 Newton)."""
    N, U = C.shape
    z = np.empty(U)
    g = np.empty(U)
    pre = np.empty(U)
    k1 = np.empty(U)
    k2 = np.empty(U)
    k3 = np.empty(U)
    k4 = np.empty(U)
    tmp = np.empty(U)
    G = np.empty(U)
    J = np.empty((U, U))
    zc = np.empty(U)
    Gc = np.empty(U)
    zf = np.empty(U)
    for n in range(N):
        c = C[n]
        for i in range(U):
            z[i] = Z0[n, i]
        # ---- Picard
        rn_prev = math.inf
        rate = 0.0
        rn = math.inf
        k = 0
        ok = False
        while True:
            _map(A, c, z, act, leak, pre, g)
            rn = 0.0
            for i in range(U):
                d = abs(g[i] - z[i])
                if not (d <= rn):  # NaN-safe max
                    rn = d if math.isfinite(d) else math.inf
            if rn <= tol:
                ok = True
                break
            if not math.isfinite(rn) or k >= max_picard:
                break
            if k > 5:
                rate = rn / rn_prev
                if rate > max_rate:
                    break
            rn_prev = rn
            for i in range(U):
                z[i] = g[i]
            k += 1
        its[n] = k
        code[n] = 1
        if not ok:
            code[n] = 3
            for i in range(U):
                zf[i] = Z0[n, i]
            flown = 0
            # attempts: Newton from the Picard iterate (if Picard contracted) or from the RK4 flow
            # after `steps` steps; then from the flow after 10× and 100× as long (a flow lingering
            # near a vanished equilibrium escapes it; Newton then finishes)
            for attempt in range(3):
                if attempt == 0 and rate < 1.0 and math.isfinite(rn):
                    pass  # z holds the last Picard iterate
                else:
                    target = steps * (1 if attempt == 0 else (10 if attempt == 1 else 100))
                    while flown < target:
                        _map(A, c, zf, act, leak, pre, g)
                        for i in range(U):
                            k1[i] = g[i] - zf[i]
                            tmp[i] = zf[i] + 0.5 * dt * k1[i]
                        _map(A, c, tmp, act, leak, pre, g)
                        for i in range(U):
                            k2[i] = g[i] - tmp[i]
                        for i in range(U):
                            tmp[i] = zf[i] + 0.5 * dt * k2[i]
                        _map(A, c, tmp, act, leak, pre, g)
                        for i in range(U):
                            k3[i] = g[i] - tmp[i]
                        for i in range(U):
                            tmp[i] = zf[i] + dt * k3[i]
                        _map(A, c, tmp, act, leak, pre, g)
                        for i in range(U):
                            k4[i] = g[i] - tmp[i]
                            zf[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
                        flown += 1
                        its[n] += 1
                    for i in range(U):
                        z[i] = zf[i]
                ok, rn = _newton(A, c, z, act, leak, tol, max_newton, pre, g, G, J, zc, Gc, its, n)
                if ok:
                    break
        for i in range(U):
            Z[n, i] = z[i]
        res[n] = rn
        conv[n] = ok

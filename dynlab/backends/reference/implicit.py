"""The reference solvers of the implicit networks' stacked equilibria Z = f(Z A + C).

Rows are the N points (Z, C (N, U)), A (U, U) applied from the right.  The methods (``rk4``,
``fixed-point``/``anderson``, ``newton``, ``scipy``, ``solve_ivp``) and the ``auto`` combination
are described in ``dynlab.analysis.implicit``; every one is plain NumPy/SciPy, batched over the
points where the method allows.
"""
from __future__ import annotations

import numpy as np

from ...activations import dphi, phi, sigmoid

#: integer codes of the per-point ``solver`` variable
SOLVER_CODES = {"rk4": 0, "fixed-point": 1, "anderson": 2, "newton": 3, "scipy": 4, "solve_ivp": 5}


def _f(act, leak, z):
    """f(z); the sigmoid by one vectorised tanh (``sigmoid(exact_tails=False)``: ≈ eps absolute, what
    these solvers' absolute tolerances need, ~7× faster than the exponential)."""
    if act == "sigmoid":
        return sigmoid(z, exact_tails=False)
    return phi(act, z, leak)


def residual(A, C, Z, act, leak=0.01):
    """G(Z) = Z − f(Z Aᵀ + C) for row-batched Z, C (N, U)."""
    return Z - _f(act, leak, Z @ A.T + C)


def _maxabs(G):
    out = np.max(np.abs(G), axis=-1) if G.shape[-1] else np.zeros(G.shape[:-1])
    return np.where(np.isfinite(out), out, np.inf)


def solve_rk4(A, C, act, leak=0.01, *, steps=30, dt=1.0, Z0=None):
    """Classical RK4 on dZ/dt = f(Z Aᵀ + C) − Z, ``steps`` steps of ``dt`` from Z0 (0)."""
    Z = np.zeros_like(C) if Z0 is None else np.array(Z0, dtype=np.float64)

    def F(Y):
        return _f(act, leak, Y @ A.T + C) - Y

    for _ in range(int(steps)):
        k1 = F(Z)
        k2 = F(Z + 0.5 * dt * k1)
        k3 = F(Z + 0.5 * dt * k2)
        k4 = F(Z + dt * k3)
        Z = Z + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return Z


def _f_inplace(act, leak, z):
    """z ← f(z) in place (``_f``'s values): no temporaries on the hot path."""
    if act == "sigmoid":
        return sigmoid(z, out=z, exact_tails=False)
    return phi(act, z, leak, out=z)


def _picard(A, C, act, leak, Z0, tol, max_iter, max_rate, rate_out):
    """Plain Picard Z ← f(Z Aᵀ + C), batched, with preallocated buffers and an active set."""
    N, U = C.shape
    AT = np.ascontiguousarray(A.T)
    Z = np.zeros_like(C) if Z0 is None else np.array(Z0, dtype=np.float64)
    res = np.full(N, np.inf)
    its = np.zeros(N, dtype=np.int64)
    idx = np.arange(N)
    z, c = Z.copy(), np.ascontiguousarray(C)
    g = np.empty_like(z)
    r = np.empty_like(z)
    rn_prev = np.full(N, np.inf)
    rate = np.zeros(N)
    k = 0
    while idx.size:
        np.matmul(z, AT, out=g)
        g += c
        g = _f_inplace(act, leak, g)
        np.subtract(g, z, out=r)
        np.abs(r, out=r)
        rn = r.max(axis=1)
        if k > 0:
            with np.errstate(divide="ignore", invalid="ignore"):
                rate = rn / rn_prev
        done = ~(rn > tol) | (k >= max_iter)  # NaN counts as done (reported, not converged)
        if max_rate is not None and k > 5:
            done |= rate > max_rate
        if done.any():
            sel = idx[done]
            Z[sel], res[sel], its[sel] = z[done], np.where(np.isfinite(rn[done]), rn[done], np.inf), k
            if rate_out is not None:
                rate_out[sel] = rate[done] if k > 0 else 0.0
            keep = ~done
            idx, z, g, c, rn = idx[keep], z[keep], g[keep], c[keep], rn[keep]
            r = r[keep]
            rate = rate[keep] if k > 0 else rate
        z, g = g, z
        rn_prev = rn
        k += 1
    return Z, res, its, res <= tol


def solve_fixed_point(A, C, act, leak=0.01, *, Z0=None, tol=1e-12, max_iter=1000, depth=5, max_rate=None,
                      rate_out=None):
    """Picard (depth=0) or Anderson-accelerated (depth ≥ 1) iteration, batched with an active set.

    Returns (Z, residual, iterations, converged); a point stops as soon as ‖G‖∞ ≤ tol, or —
    with ``max_rate`` — once its residual ratio over an iteration (after the first five)
    exceeds ``max_rate``: a map that contracts that slowly, or not at all, is better left to Newton.
    ``rate_out`` (N,), if given, receives each point's last residual ratio.
    """
    if depth == 0:
        return _picard(A, C, act, leak, Z0, tol, max_iter, max_rate, rate_out)
    N, U = C.shape
    Z = np.zeros_like(C) if Z0 is None else np.array(Z0, dtype=np.float64)
    res = np.full(N, np.inf)
    its = np.zeros(N, dtype=np.int64)
    act_idx = np.arange(N)
    z, c = Z.copy(), C
    g = _f(act, leak, z @ A.T + c)
    r = g - z
    rn = _maxabs(r)
    dR = np.zeros((N, U, max(depth, 1)))
    dG = np.zeros_like(dR)
    filled = np.zeros(N, dtype=np.int64)
    rate = np.zeros(N)
    k = 0
    while True:
        done = (rn <= tol) | ~np.isfinite(rn) | (k >= max_iter)
        if max_rate is not None and k > 5:
            done |= rate > max_rate
        if np.any(done):
            Z[act_idx[done]] = z[done]
            res[act_idx[done]] = rn[done]
            its[act_idx[done]] = k
            if rate_out is not None:
                rate_out[act_idx[done]] = rate[done]
            keep = ~done
            act_idx, z, c, g, r, rn = act_idx[keep], z[keep], c[keep], g[keep], r[keep], rn[keep]
            dR, dG, filled, rate = dR[keep], dG[keep], filled[keep], rate[keep]
        if act_idx.size == 0:
            break
        k += 1
        if depth == 0:
            z_new = g
        else:
            z_new = g.copy()
            use = filled > 0
            if np.any(use):
                # unused (zero) history columns get γ = 0 through the relative regularisation
                R_, G_ = dR[use], dG[use]
                M = np.einsum("nui,nuj->nij", R_, R_)
                scale = np.einsum("nii->n", M) + 1e-300
                M = M + (1e-13 * scale)[:, None, None] * np.eye(depth)
                rhs = np.einsum("nui,nu->ni", R_, r[use])
                gamma = np.linalg.solve(M, rhs[..., None])[..., 0]
                z_new[use] = g[use] - np.einsum("nuj,nj->nu", G_, gamma)
        g_new = _f(act, leak, z_new @ A.T + c)
        r_new = g_new - z_new
        rn_new = _maxabs(r_new)
        if depth:
            # safeguard: where mixing did not help, take the plain Picard step instead
            bad = ~(rn_new < rn)
            if np.any(bad):
                zb = g[bad]
                gb = _f(act, leak, zb @ A.T + c[bad])
                z_new[bad], g_new[bad] = zb, gb
                r_new[bad] = gb - zb
                rn_new[bad] = _maxabs(r_new[bad])
                filled[bad] = 0
            slot = (k - 1) % depth
            dR[:, :, slot] = r_new - r
            dG[:, :, slot] = g_new - g
            if np.any(bad):  # a reset point keeps only its newest difference
                other = np.arange(depth) != slot
                for arr in (dR, dG):
                    sub = arr[bad]
                    sub[:, :, other] = 0.0
                    arr[bad] = sub
            filled += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(rn > 0, rn_new / rn, 0.0)
        z, g, r, rn = z_new, g_new, r_new, rn_new
    return Z, res, its, res <= tol


def solve_newton(A, C, act, leak=0.01, *, Z0=None, tol=1e-12, max_iter=50):
    """Newton on G(Z) = Z − f(A Z + c) with J = I − D A and a per-point backtracking line search.

    Returns (Z, residual, iterations, converged).
    """
    N, U = C.shape
    Z = np.zeros_like(C) if Z0 is None else np.array(Z0, dtype=np.float64)
    res = np.full(N, np.inf)
    its = np.zeros(N, dtype=np.int64)
    act_idx = np.arange(N)
    z, c = Z.copy(), C
    zt = z @ A.T + c
    G = z - _f(act, leak, zt)
    rn = _maxabs(G)
    eye = np.eye(U)
    k = 0
    while True:
        done = (rn <= tol) | ~np.isfinite(rn) | (k >= max_iter)
        if np.any(done):
            Z[act_idx[done]], res[act_idx[done]], its[act_idx[done]] = z[done], rn[done], k
            keep = ~done
            act_idx, z, c, zt, G, rn = act_idx[keep], z[keep], c[keep], zt[keep], G[keep], rn[keep]
        if act_idx.size == 0:
            break
        k += 1
        J = eye - dphi(act, zt, leak)[:, :, None] * A[None]
        try:
            step = -np.linalg.solve(J, G[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = np.empty_like(G)
            for i in range(G.shape[0]):  # one singular Jacobian must not stop the others
                try:
                    step[i] = -np.linalg.solve(J[i], G[i])
                except np.linalg.LinAlgError:
                    step[i] = -G[i]
        n0 = np.linalg.norm(G, axis=1)
        lam = np.ones(z.shape[0])
        pending = np.ones(z.shape[0], dtype=bool)
        z_new, zt_new, G_new = z.copy(), zt.copy(), G.copy()
        for _ in range(40):
            idx = np.nonzero(pending)[0]
            zc = z[idx] + lam[idx, None] * step[idx]
            ztc = zc @ A.T + c[idx]
            Gc = zc - _f(act, leak, ztc)
            ok = np.linalg.norm(Gc, axis=1) <= (1.0 - 1e-4 * lam[idx]) * n0[idx]
            ok |= lam[idx] < 1e-10
            acc = idx[ok]
            z_new[acc], zt_new[acc], G_new[acc] = zc[ok], ztc[ok], Gc[ok]
            pending[acc] = False
            lam[idx[~ok]] *= 0.5
            if not pending.any():
                break
        z, zt, G = z_new, zt_new, G_new
        rn = _maxabs(G)
    return Z, res, its, res <= tol


def solve_scipy_root(A, C, act, leak=0.01, *, Z0=None, tol=1e-12):
    """``scipy.optimize.root`` (hybr) with the analytic Jacobian, one point at a time."""
    from scipy.optimize import root

    N, U = C.shape
    Z = np.zeros_like(C)
    res = np.empty(N)
    its = np.empty(N, dtype=np.int64)
    start = np.zeros_like(C) if Z0 is None else np.asarray(Z0, dtype=np.float64)
    eye = np.eye(U)
    for i in range(N):
        ci = C[i]

        def G(z):
            return z - _f(act, leak, A @ z + ci)

        def J(z):
            return eye - dphi(act, A @ z + ci, leak)[:, None] * A

        sol = root(G, start[i], jac=J, method="hybr", options={"xtol": 1e-15})
        Z[i] = sol.x
        res[i] = _maxabs(G(sol.x)[None])[0]
        its[i] = int(sol.nfev)
    return Z, res, its, res <= tol


def solve_ivp_reference(A, C, act, leak=0.01, *, t_max=60.0, rtol=1e-8, atol=1e-10, tol=1e-12):
    """``scipy.integrate.solve_ivp`` (RK45) of dZ/dt = f(A Z + c) − Z from 0 to ``t_max``, per point."""
    from scipy.integrate import solve_ivp

    N, U = C.shape
    Z = np.zeros_like(C)
    res = np.empty(N)
    its = np.empty(N, dtype=np.int64)
    for i in range(N):
        ci = C[i]
        sol = solve_ivp(lambda _t, z: _f(act, leak, A @ z + ci) - z, (0.0, t_max), np.zeros(U),
                        method="RK45", rtol=rtol, atol=atol)
        Z[i] = sol.y[:, -1]
        res[i] = _maxabs(residual(A, ci[None], Z[i:i + 1], act, leak))[0]
        its[i] = int(sol.nfev)
    return Z, res, its, res <= tol


def auto_solve(A, C, act, leak, tol, max_iter, steps, dt, Z0):
    rate = np.zeros(C.shape[0])
    Z, res, its, conv = solve_fixed_point(A, C, act, leak, Z0=Z0, tol=tol, max_iter=max_iter, depth=0,
                                          max_rate=0.9, rate_out=rate)
    return auto_newton(A, C, act, leak, tol, steps, dt, Z0, Z, res, its, conv, rate)


def auto_newton(A, C, act, leak, tol, steps, dt, Z0, Z, res, its, conv, rate, flow=None):
    """The ``auto`` method after its Picard pass (Z, res, its, conv and the last contraction
    ``rate`` per point): Newton for the points Picard left — from the last Picard iterate where
    it still contracted, from the RK4 flow of ``steps`` steps of ``dt`` from Z0 (0) where it did
    not; a point keeps Newton's answer where its residual is smaller.  ``flow(C_rows, Z0_rows or
    None)`` runs that flow (``solve_rk4`` by default; a backend passes its own kernel).
    Returns (Z, residual, iterations, converged, solver code)."""
    N = C.shape[0]
    code = np.full(N, SOLVER_CODES["fixed-point"], dtype=np.int8)
    left = np.nonzero(~conv)[0]
    if left.size:
        start = Z[left].copy()
        flows = ~(rate[left] < 1.0) | ~np.isfinite(res[left])
        if flows.any():
            rows = left[flows]
            z0 = None if Z0 is None else np.asarray(Z0)[rows]
            start[flows] = flow(C[rows], z0) if flow is not None else solve_rk4(A, C[rows], act, leak, steps=steps,
                                                                                dt=dt, Z0=z0)
        Zn, rn, itn, cn = solve_newton(A, C[left], act, leak, Z0=start, tol=tol, max_iter=50)
        better = rn < res[left]
        pick = left[better]
        Z[pick], res[pick], conv[pick] = Zn[better], rn[better], cn[better]
        its[left] += itn + np.where(flows, int(steps), 0)
        code[left] = SOLVER_CODES["newton"]
    return Z, res, its, conv, code


def solve_method(A, C, act, leak, *, method, tol, max_iter, Z0, steps, dt):
    """One of the methods on the stacked systems: (Z, residual, iterations, converged, solver code)."""
    N = C.shape[0]
    code = np.full(N, SOLVER_CODES.get(method, SOLVER_CODES["newton"]), dtype=np.int8)
    if method == "rk4":
        Z = solve_rk4(A, C, act, leak, steps=steps, dt=dt, Z0=Z0)
        res = _maxabs(residual(A, C, Z, act, leak))
        return Z, res, np.full(N, int(steps)), res <= tol, code
    if method in ("fixed-point", "anderson"):
        out = solve_fixed_point(A, C, act, leak, Z0=Z0, tol=tol, max_iter=max_iter or 1000,
                                depth=0 if method == "fixed-point" else 5)
        return (*out, code)
    if method == "newton":
        return (*solve_newton(A, C, act, leak, Z0=Z0, tol=tol, max_iter=max_iter or 50), code)
    if method == "scipy":
        return (*solve_scipy_root(A, C, act, leak, Z0=Z0, tol=tol), code)
    if method == "solve_ivp":
        return (*solve_ivp_reference(A, C, act, leak, tol=tol), code)
    return auto_solve(A, C, act, leak, tol, max_iter or 200, steps, dt, Z0)

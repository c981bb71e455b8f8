"""Equilibria of the iRNN step: s = g + sign·h_{m-1} solves  α s = φ(U s + W x + b).

Methods
-------
newton  Newton's method with the analytic Jacobian α I − diag(φ'(z)) U and a backtracking
        line search on ‖F‖₂ (F(s) = α s − φ(U s + W x + b)); the default.
euler   the iRNN recursion itself, s ← s + η(φ(U s + W x + b) − α s), until ‖F‖∞ ≤ tol.
scipy   ``scipy.optimize.root`` (hybr), the independent reference.

Every solve reports its residual (max-abs of F), iteration count and a converged flag;
non-convergence is reported, never hidden.
"""
from __future__ import annotations

import numpy as np

from ..activations import dphi, phi
from ..errors import ParameterError
from ..models import IRNN

METHODS = ("newton", "euler", "scipy")


def _check_irnn(model):
    if not isinstance(model, IRNN):
        raise ParameterError("model", f"iRNN equilibria need an irnn model, got {getattr(model, 'name', type(model).__name__)}")


def _F(model, s, c):
    return model.alpha * s - phi(model.activation, model.U @ s + c, model.leak)


def solve_newton(model: IRNN, c: np.ndarray, s0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 50):
    """Solve α s = φ(U s + c) from s0 by damped Newton.  Returns (s, residual, iterations, converged)."""
    s = np.array(s0, dtype=np.float64)
    D = s.shape[0]
    F = _F(model, s, c)
    res = float(np.max(np.abs(F)))
    it = 0
    while res > tol and it < max_iter:
        it += 1
        z = model.U @ s + c
        J = model.alpha * np.eye(D) - dphi(model.activation, z, model.leak)[:, None] * model.U
        try:
            step = np.linalg.solve(J, -F)
        except np.linalg.LinAlgError:
            step = -F  # singular Jacobian: fall back to a residual step
        norm0 = float(np.linalg.norm(F))
        lam = 1.0
        while True:
            s_new = s + lam * step
            F_new = _F(model, s_new, c)
            if np.linalg.norm(F_new) < (1 - 1e-4 * lam) * norm0 or lam < 1e-8:
                break
            lam *= 0.5
        s, F = s_new, F_new
        res = float(np.max(np.abs(F)))
    return s, res, it, bool(res <= tol)


def solve_euler(model: IRNN, c: np.ndarray, s0: np.ndarray, *, eta: float = 1.0, tol: float = 1e-12,
                max_iter: int = 10_000):
    """The iRNN recursion s_k = s_{k-1} + η(φ(U s_{k-1} + c) − α s_{k-1}) until ‖F‖∞ ≤ tol."""
    s = np.array(s0, dtype=np.float64)
    it = 0
    F = _F(model, s, c)
    res = float(np.max(np.abs(F)))
    while res > tol and it < max_iter and np.isfinite(res):
        s = s - eta * F
        F = _F(model, s, c)
        res = float(np.max(np.abs(F)))
        it += 1
    return s, res, it, bool(res <= tol)


def solve_scipy(model: IRNN, c: np.ndarray, s0: np.ndarray, *, tol: float = 1e-12):
    """scipy.optimize.root (hybr) with the analytic Jacobian — the independent reference."""
    from scipy.optimize import root

    D = s0.shape[0]

    def jac(s):
        return model.alpha * np.eye(D) - dphi(model.activation, model.U @ s + c, model.leak)[:, None] * model.U

    sol = root(lambda s: _F(model, s, c), np.asarray(s0, dtype=np.float64), jac=jac, method="hybr",
               options={"xtol": 1e-14})
    res = float(np.max(np.abs(_F(model, sol.x, c))))
    return sol.x, res, int(sol.nfev), bool(res <= tol)


def _solve(model, c, s0, method, tol, max_iter):
    if method == "newton":
        return solve_newton(model, c, s0, tol=tol, max_iter=max_iter)
    if method == "euler":
        eta = float(np.asarray(model.eta).ravel()[0])
        return solve_euler(model, c, s0, eta=eta, tol=tol, max_iter=max_iter)
    return solve_scipy(model, c, s0, tol=tol)


def equilibrium_curve(model: IRNN, xs, *, tol: float = 1e-12, max_iter: int = 50):
    """Equilibria along a path of inputs, by continuation (each solve starts from the last).

    Parameters
    ----------
    model : IRNN
    xs : (N, d) array of inputs, ordered along a path (e.g. a grid over the input's range).

    Returns
    -------
    s : (N, D) equilibrium points α s = φ(U s + W x + b)
    residual : (N,) max-abs residual ‖F(s)‖∞
    converged : (N,) bool, residual ≤ tol
    """
    _check_irnn(model)
    xs = np.asarray(xs, dtype=np.float64)
    if xs.ndim == 1 and model.inputs == 1:
        xs = xs[:, None]
    if xs.ndim != 2 or xs.shape[1] != model.inputs:
        raise ParameterError("xs", f"must have shape (N, {model.inputs}), got {np.shape(xs)}")
    N, D = xs.shape[0], model.hidden
    S = np.empty((N, D))
    res = np.empty(N)
    conv = np.empty(N, dtype=bool)
    s = None
    for n in range(N):
        c = model.W @ xs[n] + model.b
        if s is None:  # one Picard step from 0 is a good first guess
            s = phi(model.activation, c, model.leak) / max(model.alpha, 1e-12)
        s, r, _, ok = solve_newton(model, c, s, tol=tol, max_iter=max_iter)
        if not ok:  # continuation lost the branch: restart from the Picard guess
            s2, r2, _, ok2 = solve_newton(model, c, phi(model.activation, c, model.leak) / max(model.alpha, 1e-12),
                                          tol=tol, max_iter=max_iter)
            if r2 < r:
                s, r, ok = s2, r2, ok2
        S[n], res[n], conv[n] = s, r, ok
    return S, res, conv


def irnn_equilibrium(model: IRNN, x, h_prev=None, *, method: str = "newton", tol: float = 1e-12,
                     max_iter: int | None = None):
    """The iRNN step's equilibrium for inputs x and previous states h_prev, as a Dataset.

    Solves α s = φ(U s + W x + b) for s = g + sign·h_prev and returns h_eq = s − sign·h_prev,
    the state h_m that the inner recursion converges to (K → ∞).

    Parameters
    ----------
    x : (d,) or (N, d) inputs;  h_prev : (D,) or (N, D), zeros by default.
    method : "newton" (default), "euler" (the iRNN recursion) or "scipy" (reference).

    Returns
    -------
    xarray.Dataset with ``h_eq`` and ``s_eq`` ([batch,] unit), ``residual``, ``iterations``
    and ``converged`` ([batch]).

    Example
    -------
    >>> eq = irnn_equilibrium(m, x[0], h_prev)
    """
    import xarray as xr

    from .._dataset import base_attrs, model_attrs, model_variables

    _check_irnn(model)
    if method not in METHODS:
        raise ParameterError("method", f"must be one of {', '.join(METHODS)}, got {method!r}")
    if max_iter is None:
        max_iter = 10_000 if method == "euler" else 50
    xa = np.asarray(x, dtype=np.float64)
    single = xa.ndim == 1
    xa = np.atleast_2d(xa)
    if xa.ndim != 2 or xa.shape[1] != model.inputs or not np.all(np.isfinite(xa)):
        raise ParameterError("x", f"must be finite with shape ({model.inputs},) or (N, {model.inputs}), got {np.shape(x)}")
    N, D = xa.shape[0], model.hidden
    if h_prev is None:
        hp = np.zeros((N, D))
    else:
        hp = np.asarray(h_prev, dtype=np.float64)
        if hp.shape not in ((D,), (N, D)):
            raise ParameterError("h_prev", f"must have shape ({D},) or ({N}, {D}), got {hp.shape}")
        hp = np.broadcast_to(hp, (N, D))
    if not np.all(np.isfinite(hp)):
        raise ParameterError("h_prev", "must be finite")
    S = np.empty((N, D))
    res = np.empty(N)
    its = np.empty(N, dtype=np.int64)
    conv = np.empty(N, dtype=bool)
    for n in range(N):
        c = model.W @ xa[n] + model.b
        start = (1.0 + model.sign) * hp[n] if model.g0 == "previous" else model.sign * hp[n]
        S[n], res[n], its[n], conv[n] = _solve(model, c, start, method, tol, max_iter)
    lead = () if single else ("batch",)
    sel = 0 if single else slice(None)
    ds = xr.Dataset(
        {
            "h_eq": xr.Variable(lead + ("unit",), (S - model.sign * hp)[sel], {"long_name": "equilibrium state h_eq", "units": "1"}),
            "s_eq": xr.Variable(lead + ("unit",), S[sel], {"long_name": "equilibrium s = h_eq ± h_prev", "units": "1"}),
            "residual": xr.Variable(lead, res[sel], {"long_name": "max-abs residual of α s − φ(U s + W x + b)", "units": "1"}),
            "iterations": xr.Variable(lead, its[sel], {"long_name": "iterations", "units": "1"}),
            "converged": xr.Variable(lead, conv[sel].astype(np.int8), {"long_name": f"residual ≤ {tol:g}", "units": "1"}),
            "x": xr.Variable(lead + ("unit_in",), xa[sel], {"long_name": "input x", "units": "1"}),
            "h_prev": xr.Variable(lead + ("unit",), np.array(hp)[sel], {"long_name": "previous state h_{m-1}", "units": "1"}),
            **model_variables(model),
        },
        attrs={**model_attrs(model), **base_attrs("numpy", None), "method": method, "tol": tol},
    )
    return ds

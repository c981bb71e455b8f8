"""Continuation of equilibria over one scalar input or parameter; folds (bifurcation diagrams).

Pseudo-arclength continuation (Keller) of the branch {(y, λ) : F(y, λ) = 0}, with
F(y, λ) = γ φ(R y + c(λ)) − β(λ) y the equilibrium equation of
``dynlab.analysis.equilibria.System``.  λ is one of

* ``x`` (d = 1) or ``x<j>``: the constant input, or its component j (0-based);
* ``b`` (all biases set to λ; for D = 1 simply the bias) or ``b<i>``: one bias;
* ``alpha``: the leak α (irnn, ctrnn).

From X = (y, λ) with unit tangent t (the null vector of [F_y F_λ], oriented to continue the
previous one), the predictor X + h t is corrected by Newton on [F(X); tᵀ(X − X_pred)] = 0,
so the branch is followed through folds, where λ turns back.  A fold lies where the tangent's
λ-component changes sign; it is refined by Newton on the Moore–Spence system
F(y, λ) = 0, F_y v = 0, lᵀv = 1 (with the analytic φ''), which converges quadratically to the
point where F_y is singular.  For the step maps (gru, lstm, stack: F(s, λ) = step(s, x(λ)) − s
on the whole state, continued over x or x<j> only) the second-derivative rows of that Newton
matrix are central differences of the analytic step Jacobian (``_second_derivatives_fd``); the
residuals are exact.  For the piecewise-affine activations (φ'' = 0 on every piece) a
fold is a kink: it is reported where the branch turns, without refinement (``fold_refined`` 0).
Stability along the branch: as in ``dynlab.equilibrium``.
"""
from __future__ import annotations

from ..backends import get_backend

import re

import numpy as np

from ..activations import dphi, phi
from ..errors import ConvergenceError, ParameterError
from .equilibria import (STABILITY_ATTRS, System, _check_tol, _flow_label, _inputs, d2phi, eig_variables,
                         flow_eigenvalues, run_solver, stability_label)


class _Family:
    """F(y, λ) and its derivatives for one continuation parameter."""

    def __init__(self, system: System, over: str, x):
        model = system.model
        self.system, self.over = system, over
        D, d = model.state_size, model.inputs
        self.x = x
        m = re.fullmatch(r"(x|b)(\d*)|alpha", str(over).strip())
        if m is None:
            raise ParameterError("over", f"must be x, x<j>, b, b<i> or alpha, got {over!r}")
        if system.kind == "step" and m.group(0) == "alpha" or (system.kind == "step" and m.group(1) == "b"):
            raise ParameterError("over", f"{model.name} is continued over its input: x or x<j> (its biases are "
                                         f"b_ih/b_hh per gate; change them with model.replace), got {over!r}")
        self.kind = "alpha" if m.group(0) == "alpha" else m.group(1)
        idx = m.group(2) if m.group(0) != "alpha" else ""
        self.index = int(idx) if idx else None
        size = d if self.kind == "x" else D
        if self.index is not None and not 0 <= self.index < size:
            raise ParameterError("over", f"{over!r}: index must be in 0..{size - 1}")
        if self.kind == "alpha" and system.kind == "map":
            raise ParameterError("over", f"alpha is not a parameter of {model.name}; use x or b")
        sel = np.zeros(size)
        if self.index is None:
            sel[:] = 1.0
        else:
            sel[self.index] = 1.0
        self.sel = sel
        if system.kind == "step":
            self.dc = None  # F_λ = ∂step/∂x · sel, from the step's input Jacobian
        elif self.kind == "x":
            self.dc = model.W @ sel
        elif self.kind == "b":
            self.dc = sel.copy()
        else:
            self.dc = np.zeros(D)

    def value0(self):
        """λ's value in the model as given (for the docs/summary)."""
        model = self.system.model
        if self.kind == "alpha":
            return float(model.alpha)
        vec = self.x if self.kind == "x" else model.b
        return float(vec[self.index if self.index is not None else 0])

    def x_at(self, lam):
        return np.where(self.sel > 0, lam, self.x)

    def c_beta(self, lam):
        model, s = self.system.model, self.system
        if s.kind == "step":
            return self.x_at(lam), None
        x, b = self.x, model.b
        if self.kind == "x":
            x = np.where(self.sel > 0, lam, x)
        elif self.kind == "b":
            b = np.where(self.sel > 0, lam, b)
        beta = s.gamma * lam if self.kind == "alpha" else s.beta
        return model.W @ x + b, beta

    def F(self, y, lam):
        c, beta = self.c_beta(lam)
        s = self.system
        if s.kind == "step":
            return s.model.step(y[None], c[None])[0] - y
        return s.gamma * phi(s.activation, s.R @ y + c, s.leak) - beta * y

    def derivs(self, y, lam):
        """(F, F_y, F_λ, z)."""
        c, beta = self.c_beta(lam)
        s = self.system
        if s.kind == "step":
            J, Jx = s.model.step_jacobian(y[None], c[None], inputs=True)
            Fy = J[0] - np.eye(len(y))
            return s.model.step(y[None], c[None])[0] - y, Fy, Jx[0] @ self.sel, None
        z = s.R @ y + c
        d = dphi(s.activation, z, s.leak)
        Fy = (s.gamma * d)[:, None] * s.R - beta * np.eye(len(y))
        Fl = s.gamma * d * self.dc - (s.gamma * y if self.kind == "alpha" else 0.0)
        return s.gamma * phi(s.activation, z, s.leak) - beta * y, Fy, Fl, z


def _tangent(A, prev):
    """Unit null vector of the D×(D+1) matrix A, oriented along ``prev`` (or λ increasing)."""
    if prev is None:
        t = np.linalg.svd(A)[2][-1]
        return t if t[-1] >= 0 else -t
    M = np.vstack([A, prev[None]])
    rhs = np.zeros(A.shape[0] + 1)
    rhs[-1] = 1.0
    try:
        t = np.linalg.solve(M, rhs)
    except np.linalg.LinAlgError:
        t = np.linalg.svd(A)[2][-1]
    t /= np.linalg.norm(t)
    return t if t @ prev >= 0 else -t


def _correct(fam, Xp, t, tol, max_iter=12):
    X = Xp.copy()
    D = len(X) - 1
    for it in range(1, max_iter + 1):
        F, Fy, Fl, _ = fam.derivs(X[:D], X[D])
        G = np.concatenate([F, [t @ (X - Xp)]])
        if np.max(np.abs(F)) <= tol and abs(G[-1]) <= 1e-12 and it > 1:
            return X, True, it - 1
        Jg = np.zeros((D + 1, D + 1))
        Jg[:D, :D], Jg[:D, D], Jg[D] = Fy, Fl, t
        try:
            X = X - np.linalg.solve(Jg, G)
        except np.linalg.LinAlgError:
            return X, False, it
        if not np.all(np.isfinite(X)):
            return X, False, it
    F = fam.F(X[:D], X[D])
    return X, bool(np.max(np.abs(F)) <= tol), max_iter


def _moore_spence(fam, y, lam, tol, max_iter=30):
    """Newton on F = 0, F_y v = 0, lᵀv = 1; returns (y, λ, converged, residual)."""
    s = fam.system
    D = len(y)
    _, Fy, _, _ = fam.derivs(y, lam)
    v = np.linalg.svd(Fy)[2][-1]
    l_vec = v.copy()
    Z = np.concatenate([y, [lam], v])
    res = np.inf
    for _ in range(max_iter):
        y, lam, v = Z[:D], Z[D], Z[D + 1:]
        F, Fy, Fl, z = fam.derivs(y, lam)
        G = np.concatenate([F, Fy @ v, [l_vec @ v - 1.0]])
        res = float(np.max(np.abs(G)))
        if res <= tol:
            return y, lam, True, res
        J = np.zeros((2 * D + 1, 2 * D + 1))
        J[:D, :D], J[:D, D] = Fy, Fl
        if s.kind == "step":
            J[D:2 * D, :D], J[D:2 * D, D] = _second_derivatives_fd(fam, y, lam, v)
        else:
            Rv = s.R @ v
            dd = d2phi(s.activation, z, s.leak)
            J[D:2 * D, :D] = (s.gamma * dd * Rv)[:, None] * s.R
            J[D:2 * D, D] = s.gamma * dd * Rv * fam.dc - (s.gamma * v if fam.kind == "alpha" else 0.0)
        J[D:2 * D, D + 1:] = Fy
        J[2 * D, D + 1:] = l_vec
        try:
            Z = Z - np.linalg.solve(J, G)
        except np.linalg.LinAlgError:
            break
        if not np.all(np.isfinite(Z)):
            break
    return Z[:D], Z[D], False, res


def _second_derivatives_fd(fam, y, lam, v):
    """∂(F_y v)/∂y and ∂(F_y v)/∂λ for the step maps, by central differences of the analytic
    Jacobian: since ∂²F_i/∂y_j∂y_k is symmetric in j, k, ∂(F_y v)/∂y = D_v F_y, the derivative of
    F_y along v, ≈ (F_y(y + εv) − F_y(y − εv))/(2ε); ∂(F_y v)/∂λ ≈ (F_y(λ + ε) − F_y(λ − ε)) v/(2ε)
    (error O(ε²), ε ~ 1e-5 relative).  Only the Moore–Spence Newton *matrix* is approximate: the
    residuals F = 0 and F_y v = 0 it drives to ``tol`` are exact, so a converged fold is a fold."""
    ev = 1e-5 / max(np.linalg.norm(v), 1e-300)
    Jp = fam.derivs(y + ev * v, lam)[1]
    Jm = fam.derivs(y - ev * v, lam)[1]
    el = 1e-5 * max(1.0, abs(lam))
    Lp = fam.derivs(y, lam + el)[1]
    Lm = fam.derivs(y, lam - el)[1]
    return (Jp - Jm) / (2.0 * ev), (Lp - Lm) @ v / (2.0 * el)


def _smooth(system) -> bool:
    """Whether φ'' exists (Moore–Spence refinement of folds): tanh/sigmoid φ, or for the gated
    maps a smooth candidate activation (their gates are sigmoids)."""
    if system.kind == "step":
        model = system.model
        layers = getattr(model, "layers", (model,))
        return all(m.activation in ("tanh", "sigmoid", "identity") for m in layers)
    return system.activation in ("tanh", "sigmoid")


def continuation(model, over: str, lo: float, hi: float, *, x=None, start=None, ds=None, ds_max=None,
                 max_points: int = 4000, tol: float = 1e-12, stability_tol: float = 1e-9, command=None):
    """Follow the equilibria over a scalar input or parameter λ ∈ [lo, hi] by pseudo-arclength
    continuation, detect and refine folds, and label stability (a bifurcation diagram).

    Parameters
    ----------
    model : dynlab model (irnn: the step equilibrium with h_prev = 0, so h_eq = s)
    over : "x", "x<j>", "b", "b<i>" or "alpha" (module docstring)
    lo, hi : the range of λ; the branch starts at λ = lo and is followed until λ leaves [lo, hi]
    x : (d,) the constant input (zeros by default); the swept component is replaced by λ
    start : (D,) first guess of the equilibrium at λ = lo (default: one Picard step from 0; for
        the step maps 200 steps of the map from 0)
    ds, ds_max : first and largest arclength step (default (hi − lo)/200 and (hi − lo)/50); a
        step is halved when the corrector lands farther than 0.3·ds from the predictor or the
        tangent turns by more than ~18°, so the branch is not lost at sharp folds

    Returns
    -------
    xarray.Dataset along ``arc`` (the branch, in order): ``param`` λ, ``h_eq`` (arc, unit),
    ``residual``, ``converged``, ``iterations``, ``stability``, ``max_real``, ``eig_real``/``eig_imag`` (arc, eig),
    ``tangent_param`` (the λ-component of the unit tangent); along ``fold``: ``fold_param``,
    ``fold_h`` (fold, unit), ``fold_refined`` (1: Moore–Spence converged), ``fold_residual``;
    attrs ``over``, ``lo``, ``hi``, ``n_folds``, ``stop_reason``.

    Raises
    ------
    ConvergenceError when no equilibrium is found at λ = lo to start from.

    Example
    -------
    >>> neuron = CTRNN([[8.0]], [[0.0]], [0.0], activation="sigmoid")
    >>> br = continuation(neuron, "b", -8.0, 0.0)       # the hysteresis loop; br.fold_param
    """
    with get_backend(None):
        import xarray as xr

        from .._dataset import base_attrs, finish, model_attrs, model_variables

        system = System(model)
        tol = _check_tol(tol)
        try:
            lo, hi = float(lo), float(hi)
        except (TypeError, ValueError):
            raise ParameterError("range", f"must be two numbers, got {lo!r}, {hi!r}") from None
        if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
            raise ParameterError("range", f"needs finite lo < hi, got {lo}, {hi}")
        xa, _ = _inputs(model, np.zeros(model.inputs) if x is None else x)
        fam = _Family(system, over, xa[0])
        D = model.state_size
        span = hi - lo
        h = span / 200.0 if ds is None else float(ds)
        h_max = span / 50.0 if ds_max is None else float(ds_max)
        if not (h > 0 and h_max >= h):
            raise ParameterError("ds", f"needs 0 < ds ≤ ds_max, got {h}, {h_max}")
        h_min = 1e-10 * span

        c0, beta0 = fam.c_beta(lo)
        if start is None and system.kind == "step":
            y0 = np.zeros(D)  # the map run from 0 to where it settles (a stable point, usually)
            for _ in range(200):
                y0 = model.step(y0[None], c0[None])[0]
        elif start is None:
            y0 = phi(system.activation, c0, system.leak) * system.gamma / max(beta0, 1e-12)
        else:
            y0 = np.asarray(start, dtype=np.float64).reshape(D)
        if fam.kind == "alpha":
            system_lo = System(model.replace(alpha=lo))
        else:
            system_lo = system
        y, r, its0, ok = run_solver(system_lo, c0[None], y0[None], "newton", tol=tol, max_iter=100)
        if not ok[0]:
            raise ConvergenceError(f"continuation: no equilibrium found at {over} = {lo:g} to start from "
                                   f"(Newton's residual {r[0]:.3g}); give a start")
        X = np.concatenate([y[0], [lo]])
        _, Fy, Fl, _ = fam.derivs(X[:D], X[D])
        t = _tangent(np.column_stack([Fy, Fl]), None)
        pts, tans, iters = [X], [t], [int(its0[0])]
        folds = []
        reason = "max_points reached"
        while len(pts) < max_points:
            Xp = X + h * t
            Xn, ok, its = _correct(fam, Xp, t, tol)
            if ok and np.linalg.norm(Xn - Xp) > 0.3 * h:
                ok = False  # the corrector went far from the predictor: maybe another branch
            if ok:
                _, Fy, Fl, _ = fam.derivs(Xn[:D], Xn[D])
                tn = _tangent(np.column_stack([Fy, Fl]), t)
                ok = tn @ t >= 0.95  # the branch turned by more than ~18° in one step: too coarse
            if not ok:
                h *= 0.5
                if h < h_min:
                    reason = f"step size fell below {h_min:.3g} at {over} = {X[D]:.6g} (no corrector convergence)"
                    break
                continue
            if tn[-1] * t[-1] < 0:  # λ turned back: a fold between X and Xn
                w = t[-1] / (t[-1] - tn[-1])
                guess = (1 - w) * X + w * Xn
                if _smooth(system):
                    yf, lf, conv, res = _moore_spence(fam, guess[:D], guess[D], tol)
                    if not (conv and min(X[D], Xn[D]) - h <= lf <= max(X[D], Xn[D]) + h):
                        yf, lf, conv = guess[:D], guess[D], False
                        res = float(np.max(np.abs(fam.F(yf, lf))))
                else:
                    yf, lf, conv = guess[:D], guess[D], False
                    res = float(np.max(np.abs(fam.F(yf, lf))))
                folds.append((lf, yf, conv, res))
            X, t = Xn, tn
            pts.append(X)
            tans.append(t)
            iters.append(its)
            if its <= 3:
                h = min(1.5 * h, h_max)
            if X[D] > hi or X[D] < lo:
                reason = "left the range"
                break
        P = np.array(pts)
        lam = P[:, D]
        Y = P[:, :D]
        inside = (lam >= lo - 1e-12) & (lam <= hi + 1e-12)
        res = np.array([np.max(np.abs(fam.F(Y[i], lam[i]))) for i in range(len(lam))])
        eigs = np.array([flow_eigenvalues(_sys_at(system, fam, lam[i]), Y[i][None], fam.c_beta(lam[i])[0][None])[0]
                         for i in range(len(lam))])
        if system.discrete:
            stab = stability_label(eigs + 1.0, discrete=True, tol=stability_tol)
        else:
            stab = stability_label(eigs, discrete=False, tol=stability_tol)
        nf = len(folds)
        data = {
            "param": xr.Variable(("arc",), lam, {"long_name": f"continuation parameter {over}", "units": "1"}),
            "h_eq": xr.Variable(("arc", "unit"), Y, {"long_name": f"equilibrium ({system.variable})", "units": "1"}),
            "residual": xr.Variable(("arc",), res, {"long_name": "max-abs residual ‖F‖∞", "units": "1"}),
            "converged": xr.Variable(("arc",), (res <= tol).astype(np.int8), {"long_name": f"residual ≤ {tol:g}",
                                                                             "units": "1"}),
            "iterations": xr.Variable(("arc",), np.array(iters, dtype=np.int64),
                                      {"long_name": "corrector Newton iterations (the first point: its Newton solve)",
                                       "units": "1"}),
            "in_range": xr.Variable(("arc",), inside.astype(np.int8), {"long_name": f"lo ≤ {over} ≤ hi", "units": "1"}),
            "stability": xr.Variable(("arc",), stab, dict(STABILITY_ATTRS)),
            "max_real": xr.Variable(("arc",), eigs.real.max(axis=1), {"long_name": "largest real part of the eigenvalues",
                                                                      "units": "1"}),
            **eig_variables(eigs, ("arc",), what=_flow_label(system)),
            "tangent_param": xr.Variable(("arc",), np.array(tans)[:, D],
                                         {"long_name": f"{over}-component of the unit tangent", "units": "1"}),
            "fold_param": xr.Variable(("fold",), np.array([f[0] for f in folds]), {"long_name": f"{over} at the fold",
                                                                                   "units": "1"}),
            "fold_h": xr.Variable(("fold", "unit"), np.array([f[1] for f in folds]).reshape(nf, D),
                                  {"long_name": "equilibrium at the fold", "units": "1"}),
            "fold_refined": xr.Variable(("fold",), np.array([f[2] for f in folds], dtype=np.int8),
                                        {"long_name": "refined by the Moore–Spence system (1) or interpolated (0)",
                                         "units": "1"}),
            "fold_residual": xr.Variable(("fold",), np.array([f[3] for f in folds], dtype=np.float64),
                                         {"long_name": "max-abs residual at the fold", "units": "1"}),
            "x": xr.Variable(("unit_in",), xa[0], {"long_name": "constant input x (the swept part replaced by λ)",
                                                   "units": "1"}),
            **model_variables(model),
        }
        attrs = {**model_attrs(model), **base_attrs("numpy", command), "over": str(over), "lo": lo, "hi": hi,
                 "n_folds": nf, "stop_reason": reason, "tol": tol, "system": system.kind}
        from .equilibria import _part_coords

        return finish(xr.Dataset(data, attrs=attrs).assign_coords(_part_coords(model)), "continuation")


def _sys_at(system, fam, lam):
    if fam.kind != "alpha":
        return system
    return System(system.model.replace(alpha=lam))

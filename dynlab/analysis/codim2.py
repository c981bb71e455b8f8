"""Two-parameter continuation of a fold or a Hopf point: the curve in (λ₁, λ₂) along which the
equilibrium keeps that bifurcation (``bifurcation_curve``).

Unknowns u = (y, λ₁, λ₂) for a fold, (y, λ₁, λ₂, κ) for a Hopf point (κ = ω²); the curve is the
solution set of the minimally augmented systems (Govaerts 2000)

    fold:  F(y, λ₁, λ₂) = 0,  g = 0    with [F_y b; cᵀ 0][v; g] = [0; 1]
    Hopf:  F(y, λ₁, λ₂) = 0,  G_ab = G_cd = 0    with [A² + κI  B; Cᵀ 0][V; G] = [0; I₂], A = F_y

(the borders b, c and B, C are the null vectors at the previous point, renewed after every
accepted step; two of G's four entries — the best conditioned pair at the start — are used),
followed by pseudo-arclength continuation with a central-difference Jacobian of these exact
residuals.  λ₂ is applied to the model (``dynlab.analysis.family.apply_parameter``) and λ₁ is the
parameter of the one-parameter branch the point was found on.
"""
from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..errors import ParameterError
from . import bifurcations as bif
from .family import Family, apply_parameter


class _Curve:
    """The residual of the augmented system of one curve, with borders that can be renewed."""

    def __init__(self, model, x, over1, over2, kind, D):
        self.model, self.x, self.over1, self.over2, self.kind, self.D = model, x, over1, over2, kind, D
        self.pick = (0, 3)

    def family(self, lam2):
        m2, x2 = apply_parameter(self.model, self.x, self.over2, lam2)
        return Family(m2, self.over1, x2)

    def _A(self, fam, y, l1):
        return fam.jac(y, l1)

    def renew(self, u):
        D = self.D
        fam = self.family(u[D + 1])
        A = self._A(fam, u[:D], u[D])
        if self.kind == "fold":
            U, _, Vt = np.linalg.svd(A)
            self.b, self.c = U[:, -1:], Vt[-1][:, None]
        else:
            _, q, p = bif._eig_near(A, 1j * np.sqrt(max(u[D + 2], 0.0)))
            self.B, self.C = bif._real_basis(q), bif._real_basis(p)

    def full(self, u):
        D = self.D
        fam = self.family(u[D + 1])
        y, l1 = u[:D], u[D]
        A = self._A(fam, y, l1)
        if self.kind == "fold":
            return np.concatenate([fam.F(y, l1), bif._bordered(A, self.b, self.c)[0]])
        M = A @ A + u[D + 2] * np.eye(D)
        return np.concatenate([fam.F(y, l1), bif._bordered(M, self.B, self.C).ravel()])

    def __call__(self, u):
        g = self.full(u)
        if self.kind == "fold":
            return g
        return np.concatenate([g[:self.D], g[self.D + np.array(self.pick)]])

    def choose(self, u):
        """The pair of G's entries whose rows make the best-conditioned Jacobian at u."""
        if self.kind == "fold":
            return
        J = bif._fd_jacobian(self.full, u)
        best = -1.0
        for a in range(4):
            for b in range(a + 1, 4):
                rows = list(range(self.D)) + [self.D + a, self.D + b]
                s = np.linalg.svd(J[rows], compute_uv=False)[-2]  # m − 1 rows, m columns: rank m − 1
                if s > best:
                    best, self.pick = s, (a, b)


def _null(J, prev=None):
    t = np.linalg.svd(J)[2][-1]
    if prev is not None and t @ prev < 0:
        t = -t
    return t / np.linalg.norm(t)


def _correct(G, up, t, tol, max_iter=15):
    u = up.copy()
    for _ in range(max_iter):
        r = np.concatenate([G(u), [t @ (u - up)]])
        if np.max(np.abs(r[:-1])) <= tol and abs(r[-1]) <= 1e-12:
            return u, True
        J = np.vstack([bif._fd_jacobian(G, u), t[None]])
        try:
            u = u - np.linalg.solve(J, r)
        except np.linalg.LinAlgError:
            return u, False
        if not np.all(np.isfinite(u)):
            return u, False
    return u, bool(np.max(np.abs(G(u))) <= tol)


def bifurcation_curve(model, branch, point: int, over2: str, lo2: float, hi2: float, *, ds=None, ds_max=None,
                      max_points: int = 500, tol: float = 1e-10, command=None):
    """Continue a fold or Hopf point of a one-parameter branch in a second parameter.

    Parameters
    ----------
    model : the model ``branch`` was computed for
    branch : the Dataset of ``dynlab.continuation`` (its ``over``, range and input ``x`` are used)
    point : index along ``branch``'s ``special`` of a fold (type 1) or Hopf point (type 2)
    over2 : the second parameter ("x<j>", "b", "b<i>", "alpha"; not the branch's own)
    lo2, hi2 : its range; the curve is followed both ways from the point until λ₂ leaves [lo2, hi2]
        or λ₁ the branch's range, or ``max_points`` per direction
    ds, ds_max : first and largest arclength step (default (hi2 − lo2)/100 and (hi2 − lo2)/20)
    tol : residual tolerance of the augmented system (F and the bordered entries)

    Returns
    -------
    xarray.Dataset along ``arc``: ``param`` (λ₁), ``param2`` (λ₂), ``h_eq`` (arc, unit),
    ``frequency`` (Hopf ω = √κ; NaN for a fold), ``residual`` (‖F‖∞), ``test_residual`` (the
    bordered entries), ``half`` (0 from the point towards increasing λ₂ at first, 1 the other
    way; the second half reversed so the curve reads in order); attrs ``curve`` ("fold" or
    "hopf"), ``over``, ``over2``, ``start_param``, ``start_param2``, ``lo``, ``hi``, ``lo2``,
    ``hi2``, ``stop_reasons``.

    Example
    -------
    >>> br = dl.continuation(neuron, "b", -8, 0)
    >>> fc = dl.bifurcation_curve(neuron, br, 0, "x", -2, 2)    # the fold in (b, x)
    """
    with get_backend(None):
        import xarray as xr

        from .._dataset import base_attrs, finish, model_attrs, model_variables

        if "special_type" not in branch:
            raise ParameterError("branch", "needs the Dataset of dynlab.continuation (with special points)")
        n_sp = branch.sizes.get("special", 0)
        if not 0 <= int(point) < n_sp:
            raise ParameterError("point", f"must index the branch's {n_sp} special points (0..{n_sp - 1}), "
                                          f"got {point}")
        code = int(branch["special_type"].values[point])
        if code not in (bif.FOLD, bif.HOPF):
            raise ParameterError("point", f"special point {point} is a {bif.NAMES[code]}; a fold or a Hopf point "
                                          "can be continued")
        over1 = branch.attrs["over"]
        if str(over2).strip() == over1:
            raise ParameterError("over2", f"must differ from the branch's parameter {over1!r}")
        lo1, hi1 = float(branch.attrs["lo"]), float(branch.attrs["hi"])
        lo2, hi2 = float(lo2), float(hi2)
        if not (np.isfinite(lo2) and np.isfinite(hi2) and hi2 > lo2):
            raise ParameterError("range2", f"needs finite lo2 < hi2, got {lo2}, {hi2}")
        x = np.asarray(branch["x"].values, dtype=np.float64)
        D = model.state_size
        kind = "fold" if code == bif.FOLD else "hopf"
        fam2 = Family(model, str(over2).strip(), x)
        lam2_0 = fam2.value0()
        curve = _Curve(model, x, over1, str(over2).strip(), kind, D)
        u0 = np.concatenate([branch["special_h"].values[point], [float(branch["special_param"].values[point]),
                                                                 lam2_0]])
        if kind == "hopf":
            u0 = np.append(u0, float(branch["special_frequency"].values[point]) ** 2)
        curve.renew(u0)
        curve.choose(u0)
        span = hi2 - lo2
        h0 = span / 100.0 if ds is None else float(ds)
        h_max = span / 20.0 if ds_max is None else float(ds_max)
        u, ok = _correct_start(curve, u0, tol)
        if not ok:
            raise ParameterError("point", f"the {kind} point does not solve its augmented system at {over2} = "
                                          f"{lam2_0:g} (residual {np.max(np.abs(curve(u))):.3g})")
        halves, reasons = [], []
        J0 = bif._fd_jacobian(curve, u)
        t0 = _null(J0)
        if t0[D + 1] < 0:
            t0 = -t0
        for sgn in (1.0, -1.0):
            pts, t, uu, h = [u.copy()], sgn * t0, u.copy(), h0
            curve.renew(uu)
            reason = "max_points reached"
            while len(pts) < int(max_points):
                up = uu + h * t
                un, ok = _correct(curve, up, t, tol)
                if ok and np.linalg.norm(un - up) > 0.3 * h:
                    ok = False
                if ok:
                    tn = _null(bif._fd_jacobian(curve, un), t)
                    ok = tn @ t >= 0.95
                if not ok:
                    h *= 0.5
                    if h < 1e-9 * span:
                        reason = f"step size fell below {1e-9 * span:.3g} at ({over1}, {over2}) = ({uu[D]:.6g}, " \
                                 f"{uu[D + 1]:.6g})"
                        break
                    continue
                uu, t = un, tn
                curve.renew(uu)
                pts.append(uu.copy())
                h = min(1.5 * h, h_max)
                if not (lo2 <= uu[D + 1] <= hi2 and lo1 <= uu[D] <= hi1):
                    reason = "left the range"
                    break
                if kind == "hopf" and uu[D + 2] <= 0:
                    reason = f"ω² reached 0 at ({over1}, {over2}) = ({uu[D]:.6g}, {uu[D + 1]:.6g}) (a Bogdanov–Takens point)"
                    break
            halves.append(np.array(pts))
            reasons.append(reason)
        P = np.vstack([halves[1][::-1], halves[0][1:]])
        half = np.concatenate([np.ones(len(halves[1]), dtype=np.int8), np.zeros(len(halves[0]) - 1, dtype=np.int8)])
        res, tres = [], []
        for uu in P:
            g = curve.full(uu) if kind == "hopf" else curve(uu)
            res.append(float(np.max(np.abs(g[:D]))))
            tres.append(float(np.max(np.abs(curve(uu)[D:]))))
        freq = np.sqrt(np.maximum(P[:, D + 2], 0.0)) if kind == "hopf" else np.full(len(P), np.nan)
        data = {
            "param": xr.Variable(("arc",), P[:, D], {"long_name": f"continuation parameter {over1}", "units": "1"}),
            "param2": xr.Variable(("arc",), P[:, D + 1], {"long_name": f"second parameter {over2}", "units": "1"}),
            "h_eq": xr.Variable(("arc", "unit"), P[:, :D], {"long_name": f"equilibrium at the {kind} point",
                                                            "units": "1"}),
            "frequency": xr.Variable(("arc",), freq, {"long_name": "Hopf frequency ω (NaN for a fold)", "units": "1"}),
            "residual": xr.Variable(("arc",), np.array(res), {"long_name": "max-abs residual ‖F‖∞", "units": "1"}),
            "test_residual": xr.Variable(("arc",), np.array(tres), {"long_name": "max-abs bordered test entries",
                                                                    "units": "1"}),
            "half": xr.Variable(("arc",), half, {"long_name": "direction from the start (0 first, 1 the other)",
                                                 "units": "1"}),
            "x": xr.Variable(("unit_in",), x, {"long_name": "constant input x", "units": "1"}),
            **model_variables(model),
        }
        attrs = {**model_attrs(model), **base_attrs(fam2.system.backend.name, command), "curve": kind, "over": over1,
                 "over2": str(over2).strip(), "start_param": float(u[D]), "start_param2": float(u[D + 1]),
                 "lo": lo1, "hi": hi1, "lo2": lo2, "hi2": hi2, "tol": tol,
                 "stop_reasons": "; ".join(f"half {k}: {r}" for k, r in enumerate(reasons))}
        return finish(xr.Dataset(data, attrs=attrs), "bifurcation_curve")


def _correct_start(curve, u0, tol):
    """Newton at the start with λ₂ held (the point solves the augmented system with λ₂ as given)."""
    D = curve.D
    free = [k for k in range(u0.size) if k != D + 1]

    def G(v):
        u = u0.copy()
        u[free] = v
        return curve(u)

    v, ok, _ = bif.newton(G, u0[free], tol)
    u = u0.copy()
    u[free] = v
    return u, ok

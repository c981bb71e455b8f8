"""Continuation of equilibria over one scalar input or parameter: the bifurcation diagram, with its
folds, Hopf / Neimark–Sacker points, flips and branch points detected, located and classified,
and the other branch followed at each branch point.

Pseudo-arclength continuation (Keller) of the branch {(y, λ) : F(y, λ) = 0} of the family
``dynlab.analysis.family.Family`` (F the equilibrium residual of every model; λ one of ``x``,
``x<j>``, ``b``, ``b<i>``, ``alpha``).  From X = (y, λ) with unit tangent t (the null vector of
[F_y F_λ], oriented to continue the previous one), the predictor X + h t is corrected by Newton on
[F(X); tᵀ(X − X_pred)] = 0, so the branch is followed through folds, where λ turns back.  A fold
lies where the tangent's λ-component changes sign; it is refined by Newton on the Moore–Spence
system F = 0, F_y v = 0, lᵀv = 1 (analytic φ''; for the maps given by their step, central
differences of the analytic step Jacobian — only the Newton matrix is approximate, the residuals
it drives to ``tol`` are exact).  The other special points come from the test functions of
``dynlab.analysis.bifurcations`` (Hopf for flows, Neimark–Sacker and flip for maps, branch points
for both), located by Newton on minimally augmented systems and classified by their normal-form
coefficients.  For the piecewise-affine activations (φ'' = 0 on every piece) a special point is a
kink: it is reported where the test changes sign, located by bisection, without refinement
(``fold_refined``/``special_refined`` 0) and without a coefficient.  Stability along the branch:
as in ``dynlab.equilibrium``.
"""
from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..errors import ConvergenceError, ParameterError
from . import bifurcations as bif
from .equilibria import STABILITY_ATTRS, _check_tol, _inputs, eig_variables, fixed_point_map, stability_label
from .family import Family


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
    """Newton on [F(X); tᵀ(X − Xp)] = 0 from Xp; returns (X, converged, iterations, F_y, F_λ)."""
    X = Xp.copy()
    D = len(X) - 1
    Fy = Fl = None
    for it in range(1, max_iter + 1):
        F, Fy, Fl = fam.derivs(X[:D], X[D])
        G = np.concatenate([F, [t @ (X - Xp)]])
        if np.max(np.abs(F)) <= tol and abs(G[-1]) <= 1e-12 and it > 1:
            return X, True, it - 1, Fy, Fl
        Jg = np.zeros((D + 1, D + 1))
        Jg[:D, :D], Jg[:D, D], Jg[D] = Fy, Fl, t
        try:
            X = X - np.linalg.solve(Jg, G)
        except np.linalg.LinAlgError:
            return X, False, it, Fy, Fl
        if not np.all(np.isfinite(X)):
            return X, False, it, Fy, Fl
    F, Fy, Fl = fam.derivs(X[:D], X[D])
    return X, bool(np.max(np.abs(F)) <= tol), max_iter, Fy, Fl


class _Branch:
    """One traced branch: its points, tangents, iterations, eigenvalues, special points."""

    def __init__(self):
        self.X, self.t, self.its, self.eigs, self.special = [], [], [], [], []
        self.reason = "max_points reached"


def _trace(fam, X, t, its0, lo, hi, h, h_max, h_min, max_points, tol, detect, from_bp=False):
    """Follow the branch from X (tangent t) until λ leaves [lo, hi] or ``max_points``; detect and
    locate the special points on the way.  ``from_bp``: X is a branch point (no test there)."""
    D = fam.D
    br = _Branch()
    _, Fy, Fl = fam.derivs(X[:D], X[D])
    ev = fam.eigenvalues(Fy)
    tv = bif.tests(fam.discrete, Fy, Fl, t, ev) if detect and not from_bp else None
    br.X.append(X), br.t.append(t), br.its.append(its0), br.eigs.append(ev)
    first = True
    while len(br.X) < max_points:
        Xp = X + h * t
        Xn, ok, its, Fy, Fl = _correct(fam, Xp, t, tol)
        if ok and np.linalg.norm(Xn - Xp) > 0.3 * h:
            ok = False  # the corrector went far from the predictor: maybe another branch
        if ok:
            tn = _tangent(np.column_stack([Fy, Fl]), t)
            ok = tn @ t >= 0.95 or (from_bp and first and tn @ t >= 0.5)  # turned by > ~18°: too coarse
        if not ok:
            h *= 0.5
            if h < h_min:
                br.reason = f"step size fell below {h_min:.3g} at {fam.over} = {X[D]:.6g} (no corrector convergence)"
                break
            continue
        first = False
        evn = fam.eigenvalues(Fy)
        if tn[-1] * t[-1] < 0:  # λ turned back: a fold between X and Xn
            br.special.append(_fold(fam, X, Xn, t, tn, h, tol, len(br.X) - 1))
        if detect:
            tvn = bif.tests(fam.discrete, Fy, Fl, tn, evn)
            if tv is not None:
                for name, code in (("bp", bif.BP), ("hopf", bif.HOPF), ("ns", bif.NS), ("flip", bif.FLIP)):
                    if name in ("hopf", "ns") and name in tvn and tv[name][0] * tvn[name][0] < 0 \
                            and tv[name + "_n"] == tvn[name + "_n"] \
                            and not any(abs(q) <= bif.BOUNDARY_TOL for q in (tv[name][1], tvn[name][1])):
                        continue  # the product changed sign, no complex pair crossed (nor sits on the boundary):
                        # a neutral saddle
                    if name in tvn and tv[name][0] * tvn[name][0] < 0:
                        pt = bif.locate(code, fam, X, Xn, tv[name][1], tvn[name][1], tv[name][0], tol,
                                        _bisector(fam, X, Xn, tol, name))
                        if pt is not None:
                            pt["arc"] = len(br.X) - 1
                            pt["tangent"] = t if code == bif.BP else None
                            br.special.append(pt)
            tv = tvn
        X, t = Xn, tn
        br.X.append(X), br.t.append(t), br.its.append(its), br.eigs.append(evn)
        if its <= 3:
            h = min(1.5 * h, h_max)
        if X[D] > hi or X[D] < lo:
            br.reason = "left the range"
            break
    return br


def _fold(fam, X, Xn, t, tn, h, tol, arc):
    D = fam.D
    w = t[-1] / (t[-1] - tn[-1])
    guess = (1 - w) * X + w * Xn
    conv = False
    if fam.smooth:
        yf, lf, conv, res = bif.moore_spence(fam, guess[:D], guess[D], tol)
        conv = conv and min(X[D], Xn[D]) - h <= lf <= max(X[D], Xn[D]) + h
    if not conv:
        yf, lf = guess[:D], guess[D]
        res = float(np.max(np.abs(fam.F(yf, lf))))
    coef = bif.coefficient(bif.FOLD, fam, yf, lf)[0] if fam.smooth and conv else np.nan
    return {"type": bif.FOLD, "param": float(lf), "h": np.array(yf), "refined": bool(conv), "residual": float(res),
            "coefficient": float(coef), "criticality": bif.UNDETERMINED, "frequency": np.nan, "arc": arc,
            "tangent": None}


def _bisector(fam, Xa, Xb, tol, name):
    """s ↦ (the branch point on the hyperplane through (1 − s)Xa + sXb orthogonal to Xb − Xa, the
    sign of test ``name`` there)."""
    D = fam.D
    d = Xb - Xa
    n = d / np.linalg.norm(d)

    def at(s):
        X, ok, _, Fy, Fl = _correct(fam, (1 - s) * Xa + s * Xb, n, tol)
        if not ok:
            return None, 0.0
        t = _tangent(np.column_stack([Fy, Fl]), n)
        return X, bif.tests(fam.discrete, Fy, Fl, t, fam.eigenvalues(Fy))[name][0]

    return at


def continuation(model, over: str, lo: float, hi: float, *, x=None, start=None, ds=None, ds_max=None,
                 max_points: int = 4000, tol: float = 1e-12, stability_tol: float = 1e-9, detect: bool = True,
                 switch: bool = True, max_branches: int = 4, command=None):
    """Follow the equilibria over a scalar input or parameter λ ∈ [lo, hi] by pseudo-arclength
    continuation; detect, locate and classify its special points; follow the other branch at each
    branch point; label stability (a bifurcation diagram).

    Parameters
    ----------
    model : dynlab model (irnn: the step equilibrium with h_prev = 0, so h_eq = s)
    over : "x", "x<j>", "b", "b<i>" or "alpha" (``dynlab.analysis.family``)
    lo, hi : the range of λ; the branch starts at λ = lo and is followed until λ leaves [lo, hi]
    x : (d,) the constant input (zeros by default); the swept component is replaced by λ
    start : (D,) first guess of the equilibrium at λ = lo (default: one Picard step from 0; for
        the gated maps 200 steps of the map from 0)
    ds, ds_max : first and largest arclength step (default (hi − lo)/200 and max((hi − lo)/50, ds)); a
        step is halved when the corrector lands farther than 0.3·ds from the predictor or the
        tangent turns by more than ~18°, so the branch is not lost at sharp folds
    detect : test for Hopf / Neimark–Sacker points, flips and branch points (folds always)
    switch : follow the other branch at each branch point found (both directions), at most
        ``max_branches`` further branches; those are searched for special points too

    Returns
    -------
    xarray.Dataset along ``arc`` (every branch, in order, the first from λ = lo): ``param`` λ,
    ``h_eq`` (arc, unit), ``branch`` (0 the first, 1… the switched ones), ``residual``,
    ``converged``, ``iterations``, ``stability``, ``max_real``, ``eig_real``/``eig_imag`` (arc,
    eig), ``tangent_param`` (the λ-component of the unit tangent); along ``special``:
    ``special_type`` (1 fold, 2 Hopf, 3 Neimark–Sacker, 4 flip, 5 branch point), ``special_param``,
    ``special_h`` (special, unit), ``special_refined`` (1: Newton on the augmented system
    converged), ``special_residual`` (‖F‖∞ there), ``special_coefficient`` (fold: a; Hopf: the
    first Lyapunov coefficient l₁; flip: c; Neimark–Sacker: d; NaN for branch points and
    unrefined kinks), ``special_criticality`` (−1 supercritical, 1 subcritical, 0 undetermined or
    not applicable), ``special_frequency`` (Hopf: ω; Neimark–Sacker: θ), ``special_branch``,
    ``special_arc`` (the arc index just before it); the folds again along ``fold`` (``fold_param``,
    ``fold_h``, ``fold_refined``, ``fold_residual``); attrs ``over``, ``lo``, ``hi``, ``n_folds``,
    ``n_hopf``, ``n_neimark_sacker``, ``n_flips``, ``n_branch_points``, ``n_branches``,
    ``stop_reason`` (of the first branch), ``stop_reasons`` (every branch).

    Raises
    ------
    ConvergenceError when no equilibrium is found at λ = lo to start from.

    Example
    -------
    >>> neuron = CTRNN([[8.0]], [[0.0]], [0.0], activation="sigmoid")
    >>> br = continuation(neuron, "b", -8.0, 0.0)       # the hysteresis loop; br.fold_param
    """
    with get_backend(None):
        system = fixed_point_map(model)
        tol = _check_tol(tol)
        try:
            lo, hi = float(lo), float(hi)
        except (TypeError, ValueError):
            raise ParameterError("range", f"must be two numbers, got {lo!r}, {hi!r}") from None
        if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
            raise ParameterError("range", f"needs finite lo < hi, got {lo}, {hi}")
        if int(max_branches) < 0:
            raise ParameterError("max_branches", f"must be ≥ 0, got {max_branches}")
        xa, _ = _inputs(model, np.zeros(model.inputs) if x is None else x)
        fam = Family(model, over, xa[0])
        D = model.state_size
        span = hi - lo
        h = span / 200.0 if ds is None else float(ds)
        h_max = max(span / 50.0, h) if ds_max is None else float(ds_max)
        if not (h > 0 and h_max >= h):
            raise ParameterError("ds", f"needs 0 < ds ≤ ds_max, got {h}, {h_max}")
        h_min = 1e-10 * span
        y0 = fam.start(lo) if start is None else np.asarray(start, dtype=np.float64).reshape(D)
        y, r, its0, ok = fam.solve(y0, lo, tol)
        if not ok:
            raise ConvergenceError(f"continuation: no equilibrium found at {over} = {lo:g} to start from "
                                   f"(Newton's residual {r:.3g}); give a start")
        X = np.concatenate([y, [lo]])
        _, Fy, Fl = fam.derivs(X[:D], X[D])
        t = _tangent(np.column_stack([Fy, Fl]), None)
        branches = [_trace(fam, X, t, its0, lo, hi, h, h_max, h_min, max_points, tol, bool(detect))]
        if switch and detect:
            todo = [(0, s) for s in branches[0].special if s["type"] == bif.BP]
            while todo and len(branches) - 1 < int(max_branches):
                _, bp = todo.pop(0)
                Xb = np.concatenate([bp["h"], [bp["param"]]])
                t2 = bif.switch_direction(fam, Xb, bp["tangent"])
                for sgn in (1.0, -1.0):
                    if len(branches) - 1 >= int(max_branches):
                        break
                    nb = _trace(fam, Xb, sgn * t2, 0, lo, hi, h, h_max, h_min, max_points, tol, True, from_bp=True)
                    if len(nb.X) > 1:
                        branches.append(nb)
                        todo += [(len(branches) - 1, s) for s in nb.special if s["type"] == bif.BP
                                 and not _seen(s, branches)]
        return _dataset(model, system, fam, xa, branches, lo, hi, tol, stability_tol, command)


def _seen(pt, branches) -> bool:
    """Whether a branch point was already found (on an earlier branch)."""
    n = 0
    for br in branches:
        for s in br.special:
            if s["type"] == bif.BP and abs(s["param"] - pt["param"]) <= 1e-7 * (1 + abs(pt["param"])) \
                    and np.linalg.norm(s["h"] - pt["h"]) <= 1e-6 * (1 + np.linalg.norm(pt["h"])):
                n += 1
    return n > 1


def _dataset(model, system, fam, xa, branches, lo, hi, tol, stability_tol, command):
    import xarray as xr

    from .._dataset import base_attrs, finish, model_attrs, model_variables
    from .equilibria import _part_coords

    D = fam.D
    over = fam.over
    P = np.vstack([np.array(b.X) for b in branches])
    T = np.vstack([np.array(b.t) for b in branches])
    bid = np.concatenate([np.full(len(b.X), k, dtype=np.int64) for k, b in enumerate(branches)])
    offs = np.concatenate([[0], np.cumsum([len(b.X) for b in branches])])
    lam, Y = P[:, D], P[:, :D]
    eigs = np.vstack([np.array(b.eigs) for b in branches])
    iters = np.concatenate([b.its for b in branches]).astype(np.int64)
    inside = (lam >= lo - 1e-12) & (lam <= hi + 1e-12)
    res = np.array([np.max(np.abs(fam.F(Y[i], lam[i]))) for i in range(len(lam))])
    stab = stability_label(eigs + 1.0 if system.discrete else eigs, discrete=system.discrete, tol=stability_tol)
    specials = []
    for k, b in enumerate(branches):
        for s in b.special:
            specials.append({**s, "branch": k, "arc": int(offs[k] + s["arc"])})
    if len(branches) > 1:  # a branch point is met again by the branches switched from it: keep it once
        kept = []
        for s in specials:
            if s["type"] == bif.BP and any(o["type"] == bif.BP and abs(o["param"] - s["param"])
                                           <= 1e-7 * (1 + abs(s["param"])) and
                                           np.linalg.norm(o["h"] - s["h"]) <= 1e-6 * (1 + np.linalg.norm(s["h"]))
                                           for o in kept):
                continue
            kept.append(s)
        specials = kept
    ns = len(specials)

    def col(key, dtype=np.float64):
        return np.array([s[key] for s in specials], dtype=dtype).reshape(ns)

    folds = [s for s in specials if s["type"] == bif.FOLD]
    nf = len(folds)
    sp_attrs = {"long_name": "special point (1 fold, 2 Hopf, 3 Neimark–Sacker, 4 flip, 5 branch point)",
                "units": "1", "flag_values": np.array(sorted(bif.NAMES), dtype=np.int8),
                "flag_meanings": " ".join(bif.NAMES[k].replace("-", "_") for k in sorted(bif.NAMES))}
    data = {
        "param": xr.Variable(("arc",), lam, {"long_name": f"continuation parameter {over}", "units": "1"}),
        "h_eq": xr.Variable(("arc", "unit"), Y, {"long_name": f"equilibrium ({system.variable})", "units": "1"}),
        "branch": xr.Variable(("arc",), bid, {"long_name": "branch (0 the first; 1… switched at branch points)",
                                              "units": "1"}),
        "residual": xr.Variable(("arc",), res, {"long_name": "max-abs residual ‖F‖∞", "units": "1"}),
        "converged": xr.Variable(("arc",), (res <= tol).astype(np.int8), {"long_name": f"residual ≤ {tol:g}",
                                                                         "units": "1"}),
        "iterations": xr.Variable(("arc",), iters, {"long_name": "corrector Newton iterations (a branch's first "
                                                                 "point: its Newton solve)", "units": "1"}),
        "in_range": xr.Variable(("arc",), inside.astype(np.int8), {"long_name": f"lo ≤ {over} ≤ hi", "units": "1"}),
        "stability": xr.Variable(("arc",), stab, dict(STABILITY_ATTRS)),
        "max_real": xr.Variable(("arc",), eigs.real.max(axis=1), {"long_name": "largest real part of the eigenvalues",
                                                                  "units": "1"}),
        **eig_variables(eigs, ("arc",), what=system.eig_label),
        "tangent_param": xr.Variable(("arc",), T[:, D], {"long_name": f"{over}-component of the unit tangent",
                                                         "units": "1"}),
        "special_type": xr.Variable(("special",), col("type", np.int8), sp_attrs),
        "special_param": xr.Variable(("special",), col("param"), {"long_name": f"{over} at the special point",
                                                                  "units": "1"}),
        "special_h": xr.Variable(("special", "unit"), np.array([s["h"] for s in specials]).reshape(ns, D),
                                 {"long_name": "equilibrium at the special point", "units": "1"}),
        "special_refined": xr.Variable(("special",), col("refined", np.int8),
                                       {"long_name": "located by Newton on the augmented system (1) or by bisection "
                                                     "of the test function (0)", "units": "1"}),
        "special_residual": xr.Variable(("special",), col("residual"), {"long_name": "max-abs residual there "
                                                                                     "(the located system's)",
                                                                        "units": "1"}),
        "special_coefficient": xr.Variable(("special",), col("coefficient"),
                                           {"long_name": "normal-form coefficient (fold a, Hopf l1, flip c, "
                                                         "Neimark–Sacker d)", "units": "1"}),
        "special_criticality": xr.Variable(("special",), col("criticality", np.int8),
                                           {"long_name": "criticality (-1 supercritical, 1 subcritical, 0 "
                                                         "undetermined or not applicable)", "units": "1",
                                            "flag_values": np.array([-1, 0, 1], dtype=np.int8),
                                            "flag_meanings": "supercritical undetermined subcritical"}),
        "special_frequency": xr.Variable(("special",), col("frequency"),
                                         {"long_name": "Hopf ω or Neimark–Sacker angle θ (rad)", "units": "1"}),
        "special_branch": xr.Variable(("special",), col("branch", np.int64), {"long_name": "branch", "units": "1"}),
        "special_arc": xr.Variable(("special",), col("arc", np.int64),
                                   {"long_name": "arc index just before the point", "units": "1"}),
        "fold_param": xr.Variable(("fold",), np.array([f["param"] for f in folds]),
                                  {"long_name": f"{over} at the fold", "units": "1"}),
        "fold_h": xr.Variable(("fold", "unit"), np.array([f["h"] for f in folds]).reshape(nf, D),
                              {"long_name": "equilibrium at the fold", "units": "1"}),
        "fold_refined": xr.Variable(("fold",), np.array([f["refined"] for f in folds], dtype=np.int8),
                                    {"long_name": "refined by the Moore–Spence system (1) or interpolated (0)",
                                     "units": "1"}),
        "fold_residual": xr.Variable(("fold",), np.array([f["residual"] for f in folds], dtype=np.float64),
                                     {"long_name": "max-abs residual at the fold", "units": "1"}),
        "x": xr.Variable(("unit_in",), xa[0], {"long_name": "constant input x (the swept part replaced by λ)",
                                               "units": "1"}),
        **model_variables(model),
    }
    types = col("type", np.int64)
    attrs = {**model_attrs(model), **base_attrs(system.backend.name, command), "over": str(over), "lo": lo, "hi": hi,
             "n_folds": nf, "n_hopf": int((types == bif.HOPF).sum()), "n_neimark_sacker": int((types == bif.NS).sum()),
             "n_flips": int((types == bif.FLIP).sum()), "n_branch_points": int((types == bif.BP).sum()),
             "n_branches": len(branches), "stop_reason": branches[0].reason,
             "stop_reasons": "; ".join(f"branch {k}: {b.reason}" for k, b in enumerate(branches)),
             "tol": tol, "system": system.name, "discrete": int(system.discrete)}
    return finish(xr.Dataset(data, attrs=attrs).assign_coords(_part_coords(model)), "continuation")

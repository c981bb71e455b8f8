"""Equilibria of the iRNN step: s = g + sign·h_{m-1} solves  α s = φ(U s + W x + b).

Methods
-------
newton  Newton's method with the analytic Jacobian α I − diag(φ'(z)) U and a backtracking
        line search on ‖F‖₂ (F(s) = α s − φ(U s + W x + b)); the default.
euler   the iRNN recursion itself, s ← s + η(φ(U s + W x + b) − α s), until ‖F‖∞ ≤ tol.
scipy   ``scipy.optimize.root`` (hybr), the independent reference.

Every solve reports its residual (max-abs of F), iteration count and a converged flag;
non-convergence is reported, never hidden.

``irnn_equilibrium`` (the core API) and ``equilibrium`` (any model, with eigenvalues) share the
batched solvers below (``run_solver`` on the form's fixed-point map, ``fixed_point_map``);
``solve_newton`` remains for the path continuation of ``equilibrium_curve``, where each solve
starts from the previous one.

Where these solvers run, and what a Dataset's ``backend`` attr says: F and ∂F of the iRNN, the
CTRNN and the one-line cells are closed forms in NumPy on the host — the reference backend's
arithmetic —; the step maps (gru, lstm, stack) take their step from the reference backend and
their step Jacobians from the default backend.  The attr names the backend of the Jacobians,
``fmap.backend.name`` (``dynlab.models.fixed_point``), never a literal.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._dataset import eigenvalues_from, finish  # noqa: F401  (eigenvalues_from: public, dl.eigenvalues_from)
from .._progress import progress
from ..backends import get_backend
from ..errors import ParameterError

if TYPE_CHECKING:
    from ..models import IRNN

METHODS = ("newton", "euler", "scipy")


def _check_irnn(model):
    if not (getattr(model, "SEQUENCE", False) and model.form().kind == "irnn"):
        raise ParameterError("model", f"iRNN equilibria need an irnn model, got {getattr(model, 'name', type(model).__name__)}")


def solve_newton(fmap, c: np.ndarray, s0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 50):
    """Solve F(s) = 0 of the iRNN's fixed-point map ``fmap`` (``dynlab.models.fixed_point``:
    F(s) = φ(U s + c) − α s, its one-point ``F1``/``jac1``) at one c (D,) from s0 by damped Newton
    (backtracking on ‖F‖₂).  Returns (s, residual, iterations, converged)."""
    s = np.array(s0, dtype=np.float64)
    beta = fmap.beta
    F = fmap.F1(s, c, beta)
    res = float(np.max(np.abs(F)))
    it = 0
    while res > tol and it < max_iter:
        it += 1
        try:
            step = np.linalg.solve(fmap.jac1(s, c, beta), -F)
        except np.linalg.LinAlgError:
            step = F  # singular Jacobian: fall back to a residual step (F points along −(α s − φ))
        norm0 = float(np.linalg.norm(F))
        lam = 1.0
        while True:
            s_new = s + lam * step
            F_new = fmap.F1(s_new, c, beta)
            if np.linalg.norm(F_new) < (1 - 1e-4 * lam) * norm0 or lam < 1e-8:
                break
            lam *= 0.5
        s, F = s_new, F_new
        res = float(np.max(np.abs(F)))
    return s, res, it, bool(res <= tol)


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
    with get_backend(None):
        _check_irnn(model)
        xs = np.asarray(xs, dtype=np.float64)
        if xs.ndim == 1 and model.inputs == 1:
            xs = xs[:, None]
        if xs.ndim != 2 or xs.shape[1] != model.inputs:
            raise ParameterError("xs", f"must have shape (N, {model.inputs}), got {np.shape(xs)}")
        N, D = xs.shape[0], model.hidden
        fmap = fixed_point_map(model)
        C = fmap.c(xs)
        S = np.empty((N, D))
        res = np.empty(N)
        conv = np.empty(N, dtype=bool)
        s = None
        for n in range(N):
            picard = fmap.guess(C[n:n + 1], fmap.beta)[0]   # one Picard step from 0: φ(c) / α
            if s is None:
                s = picard
            s, r, _, ok = solve_newton(fmap, C[n], s, tol=tol, max_iter=max_iter)
            if not ok:  # continuation lost the branch: restart from the Picard guess
                s2, r2, _, ok2 = solve_newton(fmap, C[n], picard, tol=tol, max_iter=max_iter)
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
    be = get_backend(None)      # the map is closed-form NumPy; its attrs name the reference
    with be:
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
        # every input at once through the batched solvers of ``equilibrium`` (same iterates, same
        # counts as one solve per input: each row runs its own Newton/Euler/scipy iteration)
        fmap = fixed_point_map(model, be)
        S, res, its, conv = run_solver(fmap, fmap.c(xa), fmap.start(hp), method, tol=tol, max_iter=max_iter)
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
            attrs={**model_attrs(model), **base_attrs(fmap.backend.name, None), "method": method, "tol": tol},
        )
        return finish(ds, "irnn_equilibrium")


# =============================================================================================
# Equilibria and fixed points of every model: one residual form, four solvers, batched.
# =============================================================================================
#
# Every model's equilibria are the zeros of its form's fixed-point map F
# (``form.fixed_point_map()``, ``dynlab.models.fixed_point``): γ φ(R y + c) − β y for the iRNN's
# step equilibrium, the CTRNN's flow and the one-line cells, step(s, x) − s for the maps given by
# their step alone (gru, lstm, stack).  The solvers below see only F, ∂F/∂y and c(x).
#
# The "euler" method is y ← y + η F(y): the iRNN recursion itself for the iRNN (η its step
# size), forward Euler on the CTRNN flow (η = τ by default), plain iteration h ← step(h) for
# the maps (η = 1).  "rk4" integrates dy/dt = F(y) with fixed steps.


#: Solvers of ``equilibrium``.
EQ_METHODS = ("newton", "euler", "rk4", "scipy")
#: Stability codes (CF flag_values): stable, marginal (within ``stability_tol``), unstable.
STABLE, MARGINAL, UNSTABLE = 1, 0, -1
STABILITY_ATTRS = {"long_name": "stability (1 stable, 0 marginal, -1 unstable)", "units": "1",
                   "flag_values": np.array([-1, 0, 1], dtype=np.int8),
                   "flag_meanings": "unstable marginal stable"}
#: Lipschitz constant of φ itself (the contraction bound of ``dynlab.convergence``).
PHI_LIPSCHITZ = {"tanh": 1.0, "relu": 1.0, "sigmoid": 0.25, "identity": 1.0, "leaky-relu": 1.0, "abs": 1.0}


def fixed_point_map(model, backend=None):
    """The fixed-point map of ``model``'s form (``dynlab.models.fixed_point``), or a
    ParameterError naming the model when it has none; ``backend``: where a step map's Jacobians
    run (None: the default backend)."""
    try:
        return model.form().fixed_point_map(backend)
    except ParameterError:
        raise ParameterError("model", f"equilibria are not defined for model {getattr(model, 'name', model)!r}") from None


def _maxabs(F):
    with np.errstate(invalid="ignore"):
        r = np.max(np.abs(F), axis=-1)
    return np.where(np.isfinite(r), r, np.inf)


def _solve_batched(J, rhs):
    """J⁻¹ rhs for a stack; a singular matrix falls back to its least-squares solution."""
    try:
        return np.linalg.solve(J, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:
        out = np.empty_like(rhs)
        for n in range(J.shape[0]):
            try:
                out[n] = np.linalg.solve(J[n], rhs[n])
            except np.linalg.LinAlgError:
                out[n] = np.linalg.lstsq(J[n], rhs[n], rcond=None)[0]
        return out


#: The progress stage of the batched solvers (its total, the sweeps, is not known ahead).
SOLVE_STAGE = "equilibria (iterations)"


def _iterate_rows(system, c, y0, tol, max_iter, advance):
    """The loop shared by the batched solvers: every row not yet at ‖F‖∞ ≤ tol (and finite)
    takes one step ``advance(y_rows, c_rows, F_rows) → (y_new, F_new)`` per sweep, at most
    ``max_iter`` sweeps.  Returns (y, residual ‖F‖∞, iterations, converged)."""
    y = np.array(y0, dtype=np.float64)
    F = system.F(y, c)
    res = _maxabs(F)
    its = np.zeros(y.shape[0], dtype=np.int64)
    active = res > tol
    N, done = y.shape[0], 0
    for i in range(max_iter):
        idx = np.flatnonzero(active & np.isfinite(res))
        # how many sweeps is not known ahead: a count and a rate, the rows converged as the note
        progress(SOLVE_STAGE, i, None, note=f"{N - idx.size} of {N} rows converged")
        if idx.size == 0:
            break
        y[idx], F[idx] = advance(y[idx], c[idx], F[idx])
        res[idx] = _maxabs(F[idx])
        its[idx] += 1
        active[idx] = res[idx] > tol
        done = i + 1
    progress(SOLVE_STAGE, done, done)
    return y, res, its, res <= tol


def newton_batched(system, c, y0, *, tol=1e-12, max_iter=50):
    """Newton's method with the analytic Jacobian and a backtracking line search on ‖F‖₂,
    for every row at once.  Returns (y, residual ‖F‖∞, iterations, converged)."""
    def advance(yi, ci, Fi):
        step = _solve_batched(system.jac(yi, ci), -Fi)
        n0 = np.linalg.norm(Fi, axis=1)
        lam = np.ones(yi.shape[0])
        y_new = yi + step
        F_new = system.F(y_new, ci)
        for _ in range(40):  # backtracking: halve λ where ‖F‖₂ did not decrease enough
            with np.errstate(invalid="ignore"):
                bad = ~(np.linalg.norm(F_new, axis=1) < (1.0 - 1e-4 * lam) * n0)
            if not bad.any():
                break
            lam[bad] *= 0.5
            y_new[bad] = yi[bad] + lam[bad, None] * step[bad]
            F_new[bad] = system.F(y_new[bad], ci[bad])
        return y_new, F_new

    return _iterate_rows(system, c, y0, tol, max_iter, advance)


def euler_batched(system, c, y0, *, step_size, tol=1e-12, max_iter=10_000):
    """y ← y + η F(y) (the iRNN recursion for the iRNN) until ‖F‖∞ ≤ tol, every row at once."""
    def advance(yi, ci, Fi):
        y_new = yi + step_size * Fi
        return y_new, system.F(y_new, ci)

    return _iterate_rows(system, c, y0, tol, max_iter, advance)


def rk4_batched(system, c, y0, *, step_size, tol=1e-12, max_iter=30):
    """Classical RK4 with fixed step η on dy/dt = F(y), at most ``max_iter`` steps, stopping a
    row once ‖F‖∞ ≤ tol (the implicit-networks paper's fixed-step solve)."""
    h = step_size

    def advance(yi, ci, k1):
        k2 = system.F(yi + 0.5 * h * k1, ci)
        k3 = system.F(yi + 0.5 * h * k2, ci)
        k4 = system.F(yi + h * k3, ci)
        y_new = yi + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        return y_new, system.F(y_new, ci)

    return _iterate_rows(system, c, y0, tol, max_iter, advance)


def scipy_roots(system, c, y0, *, tol=1e-12):
    """``scipy.optimize.root`` (MINPACK hybrd, i.e. ``fsolve``) per row with the analytic
    Jacobian — the independent reference; Levenberg–Marquardt ("lm") where hybr stalls.
    Returns (y, residual, function evaluations, converged)."""
    from scipy.optimize import root

    N = y0.shape[0]
    y = np.empty_like(y0, dtype=np.float64)
    res = np.empty(N)
    its = np.zeros(N, dtype=np.int64)
    for n in range(N):
        cn = c[n:n + 1]

        def fun(v, cn=cn):
            return system.F(v[None], cn)[0]

        def jac(v, cn=cn):
            return system.jac(v[None], cn)[0]

        best = None
        for method, opts in (("hybr", {"xtol": 1e-15}), ("lm", {"xtol": 1e-15, "ftol": 1e-15})):
            sol = root(fun, np.asarray(y0[n], dtype=np.float64), jac=jac, method=method, options=opts)
            r = float(_maxabs(fun(sol.x)[None])[0])
            its[n] += int(getattr(sol, "nfev", 0))
            if best is None or r < best[1]:
                best = (sol.x, r)
            if r <= tol:
                break
        y[n], res[n] = best
    return y, res, its, res <= tol


def run_solver(system, c, y0, method: str, *, tol=1e-12, max_iter=None, step_size=None):
    """Dispatch to one of ``EQ_METHODS``; returns (y, residual, iterations, converged)."""
    if method not in EQ_METHODS:
        raise ParameterError("method", f"must be one of {', '.join(EQ_METHODS)}, got {method!r}")
    if step_size is None:
        step_size = system.step_size
    elif not (np.isfinite(step_size) and step_size > 0):
        raise ParameterError("step_size", f"must be finite and > 0, got {step_size}")
    if max_iter is not None and int(max_iter) < 0:
        raise ParameterError("max_iter", f"must be ≥ 0, got {max_iter}")
    if method == "newton":
        return newton_batched(system, c, y0, tol=tol, max_iter=50 if max_iter is None else int(max_iter))
    if method == "euler":
        return euler_batched(system, c, y0, step_size=step_size, tol=tol,
                             max_iter=10_000 if max_iter is None else int(max_iter))
    if method == "rk4":
        return rk4_batched(system, c, y0, step_size=step_size, tol=tol,
                           max_iter=30 if max_iter is None else int(max_iter))
    return scipy_roots(system, c, y0, tol=tol)


# ------------------------------------------------------------------ eigenvalues and labels
def flow_eigenvalues(system, y, c, *, chunk: int = 256):
    """Eigenvalues of ∂F/∂y = γ ∇φ(R y + c) R − β I at every row (∇φ U − α I for the iRNN),
    sorted by decreasing real part.  Returns a complex (N, D) array.

    Built and solved a chunk of points at a time (batched LAPACK ``geev``) to bound memory.
    """
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    c = np.atleast_2d(c)
    c = np.broadcast_to(c, (y.shape[0], c.shape[-1]))
    N, D = y.shape
    out = np.empty((N, D), dtype=np.complex128)
    for lo in range(0, N, chunk):
        hi = min(N, lo + chunk)
        ev = np.linalg.eigvals(system.jac(y[lo:hi], c[lo:hi]))
        out[lo:hi] = np.sort(ev, axis=-1)[:, ::-1]
        progress("eigenvalues (points)", hi, N)
    return out


def stability_label(eigs, *, discrete: bool, tol: float = 1e-9):
    """Stability codes from eigenvalues: flow (continuous) — every Re λ < −tol stable, some
    Re λ > tol unstable; map (discrete) — every |μ| < 1 − tol stable, some |μ| > 1 + tol
    unstable; marginal otherwise."""
    eigs = np.asarray(eigs)
    if discrete:
        m = np.max(np.abs(eigs), axis=-1)
        return np.where(m < 1 - tol, STABLE, np.where(m > 1 + tol, UNSTABLE, MARGINAL)).astype(np.int8)
    m = np.max(eigs.real, axis=-1)
    return np.where(m < -tol, STABLE, np.where(m > tol, UNSTABLE, MARGINAL)).astype(np.int8)


def eig_variables(eigs, lead, name="eig", what="eigenvalue of ∇φ·U − αI"):
    """Complex eigenvalues as two real variables (NetCDF has no complex type; docs/design.md, *Data contract*):
    ``{name}_real`` and ``{name}_imag`` with the ``eig`` dimension last."""
    import xarray as xr

    eigs = np.asarray(eigs)
    return {f"{name}_real": xr.Variable(lead + ("eig",), eigs.real.copy(), {"long_name": f"real part of the {what}",
                                                                             "units": "1"}),
            f"{name}_imag": xr.Variable(lead + ("eig",), eigs.imag.copy(), {"long_name": f"imaginary part of the {what}",
                                                                             "units": "1"})}


def _inputs(model, x, param="x"):
    xa = np.asarray(x, dtype=np.float64)
    single = xa.ndim == 1
    xa = np.atleast_2d(xa)
    if xa.ndim != 2 or xa.shape[1] != model.inputs or not np.all(np.isfinite(xa)):
        raise ParameterError(param, f"must be finite with shape ({model.inputs},) or (N, {model.inputs}), got {np.shape(x)}")
    return xa, single


def _states(model, h, N, param):
    D = model.state_size
    if h is None:
        return np.zeros((N, D))
    ha = np.asarray(h, dtype=np.float64)
    if ha.shape not in ((D,), (N, D)):
        raise ParameterError(param, f"must have shape ({D},) or ({N}, {D}), got {ha.shape}")
    if not np.all(np.isfinite(ha)):
        raise ParameterError(param, "must be finite")
    return np.array(np.broadcast_to(ha, (N, D)))


def _check_tol(tol):
    try:
        tol = float(tol)
    except (TypeError, ValueError):
        raise ParameterError("tol", f"must be a number, got {tol!r}") from None
    if not (np.isfinite(tol) and tol > 0):
        raise ParameterError("tol", f"must be finite and > 0, got {tol}")
    return tol


def equilibrium(model, x, h_prev=None, *, method: str = "newton", tol: float = 1e-12, max_iter=None,
                step_size=None, stability_tol: float = 1e-9, derivatives: bool = False, backend=None, command=None):
    """Equilibria at constant inputs, batched: the iRNN step's, or a fixed point of any other model.

    iRNN: s = h_eq + sign·h_prev solves α s = φ(U s + W x + b), and h_eq is the state the
    inner recursion tends to as K → ∞ (started from the model's g_0).  CTRNN: −α g + φ(U g +
    W x + b) = 0.  rnn, fastrnn, antisymmetric, rin: h = step(h, x); gru, lstm, stack: s = step(s, x)
    on the whole state (an LSTM's [h; c], 2D entries).  For the non-iRNN models
    ``h_prev`` is the state each solve starts from (zeros by default).

    Parameters
    ----------
    model : dynlab model
    x : (d,) or (N, d) constant inputs;  h_prev : (D,) or (N, D), optional
    method : "newton" (analytic Jacobian, line search; default), "euler" (the iRNN recursion /
        forward Euler / plain iteration, step ``step_size``), "rk4" (fixed-step RK4 on
        dy/dt = F(y), at most ``max_iter`` steps; 30 by default) or "scipy" (``root``, reference)
    tol : the solve stops when ‖F‖∞ ≤ tol; ``converged`` records whether it got there
    step_size : η of "euler"/"rk4" (default: the iRNN's η — its mean when η varies with k or
        time —, the CTRNN's τ, 1 for the maps)
    derivatives : also the implicit-function derivatives at the solution: ``dh_dx`` ([batch,]
        unit, unit_in) = −F_y⁻¹ ∂F/∂x (for the iRNN (αI − ∇φU)⁻¹ ∇φ W), and for the iRNN
        ``dh_dhprev`` ([batch,] unit, unit_from) = −F_y⁻¹ ∂F/∂h_prev, which is −sign·I: at the
        equilibrium the step forgets h_{m-1} except for the sign (iRNN paper, §3)
    backend : where the step Jacobians of a gru, lstm or stack map run (a name or a Backend; None:
        the default backend), named by the ``backend`` attr; the closed-form maps of the other
        models are NumPy on the host (the reference's arithmetic) whatever is given

    Returns
    -------
    xarray.Dataset with ``h_eq`` ([batch,] unit), ``residual`` ‖F(y)‖∞, ``iterations``,
    ``converged`` (0/1), ``eig_real``/``eig_imag`` ([batch,] eig): eigenvalues of ∂F/∂y (for the
    iRNN ∇φ·U − αI; sorted by decreasing real part), ``max_real``, ``stability`` (1/0/−1; for
    the maps from the step Jacobian's spectral radius, ``step_radius``), ``x``, ``h_prev``,
    the iRNN's ``s_eq``, the model's parameters; attrs ``solve_method`` (not ``method``, which is
    a CTRNN's own setting), ``tol``, ``n_converged``.
    Non-convergence is never hidden: ``converged`` is 0 and the residual is the one reached.

    Example
    -------
    >>> eq = equilibrium(m, x[0], h_prev)            # one input
    >>> eq = equilibrium(m, x, method="scipy")       # (N, d) inputs
    """
    be = get_backend(backend)      # resolved once
    with be:
        import xarray as xr

        from .._dataset import base_attrs, model_attrs, model_variables

        system = fixed_point_map(model, be)
        tol = _check_tol(tol)
        xa, single = _inputs(model, x)
        N = xa.shape[0]
        hp = _states(model, h_prev, N, "h_prev")
        c = system.c(xa)
        y, res, its, conv = run_solver(system, c, system.start(hp), method, tol=tol, max_iter=max_iter,
                                       step_size=step_size)
        h_eq = system.state(y, hp)
        eigs = flow_eigenvalues(system, y, c)
        lead = () if single else ("batch",)
        sel = 0 if single else slice(None)
        data = {
            "h_eq": xr.Variable(lead + ("unit",), h_eq[sel], {"long_name": "equilibrium state h_eq", "units": "1"}),
            "residual": xr.Variable(lead, res[sel], {"long_name": "max-abs residual ‖F‖∞ of the equilibrium equation",
                                                     "units": "1"}),
            "iterations": xr.Variable(lead, its[sel], {"long_name": f"{method} iterations", "units": "1"}),
            "converged": xr.Variable(lead, conv[sel].astype(np.int8), {"long_name": f"residual ≤ {tol:g}", "units": "1"}),
            **eig_variables(eigs[sel], lead, what=system.eig_label),
            "max_real": xr.Variable(lead, eigs.real.max(axis=1)[sel], {"long_name": "largest real part of the eigenvalues",
                                                                       "units": "1"}),
            "x": xr.Variable(lead + ("unit_in",), xa[sel], {"long_name": "constant input x", "units": "1"}),
            "h_prev": xr.Variable(lead + ("unit",), hp[sel], {"long_name": system.h_prev_role, "units": "1"}),
            **model_variables(model),
        }
        if system.discrete:
            radius = np.abs(eigs + 1.0).max(axis=1)  # step Jacobian = ∂F/∂h + I
            data["step_radius"] = xr.Variable(lead, radius[sel], {"long_name": "spectral radius of the step Jacobian",
                                                                  "units": "1"})
            stab = stability_label(eigs + 1.0, discrete=True, tol=stability_tol)
        else:
            stab = stability_label(eigs, discrete=False, tol=stability_tol)
        data["stability"] = xr.Variable(lead, stab[sel], dict(STABILITY_ATTRS))
        if system.shifted:
            data["s_eq"] = xr.Variable(lead + ("unit",), y[sel], {"long_name": "equilibrium s = h_eq ± h_prev", "units": "1"})
        if derivatives:
            dx, dhp = implicit_derivatives(system, y, c)
            data["dh_dx"] = xr.Variable(lead + ("unit", "unit_in"), dx[sel], {"long_name": "∂h_eq/∂x (implicit function)",
                                                                               "units": "1"})
            if dhp is not None:
                data["dh_dhprev"] = xr.Variable(lead + ("unit", "unit_from"), dhp[sel],
                                                {"long_name": "∂h_eq/∂h_(m-1) (implicit function)", "units": "1"})
        # the solve's method as "solve_method": a CTRNN's own setting ``method`` is an attr of the model
        attrs = {**model_attrs(model), **base_attrs(system.backend.name, command), "solve_method": method, "tol": tol,
                 "step_size": float(system.step_size if step_size is None else step_size),
                 "n_converged": int(conv.sum()), "n_points": int(N), "system": system.name,
                 "equation": system.equation}
        return finish(xr.Dataset(data, attrs=attrs).assign_coords(_part_coords(model)), "equilibrium")


def implicit_derivatives(system, y, c):
    """Derivatives of the equilibrium by the implicit function theorem, by linear solves.

    F(y; x) = 0 with F_y = ∂F/∂y gives ∂y/∂x = −F_y⁻¹ γ ∇φ W (iRNN: (αI − ∇φU)⁻¹ ∇φ W).  For the
    iRNN, G(h_eq, h_prev) = F(h_eq + sign·h_prev) = 0 gives ∂h_eq/∂h_prev = −F_y⁻¹ (sign·F_y),
    computed as written (so that a test sees −sign·I come out of the solve).  Returns
    (dy_dx (N, D, d), dh_dhprev (N, D, D) or None).
    """
    Fy = system.jac(y, c)
    dx = -np.linalg.solve(Fy, system.dF_dx(y, c))
    dFdh = system.dF_dhprev(Fy)
    return dx, None if dFdh is None else -np.linalg.solve(Fy, dFdh)


def _part_coords(model) -> dict:
    """The ``part`` coordinate ("h"/"c", "h1", …) on ``unit`` for the models whose state has parts."""
    labels = model.state_labels()
    if labels is None:
        return {}
    return {"part": ("unit", np.array(labels, dtype=object),
                     {"long_name": "part of the state (h: hidden output, c: LSTM cell)", "units": "1"})}

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
batched solvers below (``System``, ``run_solver``); ``solve_newton`` remains for the path
continuation of ``equilibrium_curve``, where each solve starts from the previous one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._dataset import eigenvalues_from, finish  # noqa: F401  (eigenvalues_from: public, dl.eigenvalues_from)
from .._resources import check_fixed_points, progress
from ..activations import dphi, phi
from ..backends import get_backend
from ..errors import ParameterError
from .reachable import state_box, task_states

if TYPE_CHECKING:
    from ..models import IRNN

METHODS = ("newton", "euler", "scipy")


def _check_irnn(model):
    if not (getattr(model, "SEQUENCE", False) and model.form().kind == "irnn"):
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
    with get_backend(None):
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
        system = System(model)
        start = (1.0 + model.sign) * hp if model.g0 == "previous" else model.sign * hp
        S, res, its, conv = run_solver(system, system.c(xa), start, method, tol=tol, max_iter=max_iter)
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
        return finish(ds, "irnn_equilibrium")


# =============================================================================================
# Equilibria and fixed points of every model: one residual form, four solvers, batched.
# =============================================================================================
#
# Every system whose equilibria dynlab finds is written as
#
#     F(y) = γ φ(R y + c) − β y = 0,        ∂F/∂y = γ diag(φ'(R y + c)) R − β I,
#
# with c = W x + b for a constant input x:
#
#   irnn     y = s = h_eq + sign·h_prev (the step equilibrium), R = U, γ = 1, β = α:
#            F is the iRNN's own increment, so ∂F/∂y = ∇φ U − α I;
#   ctrnn    y = g, R = U, γ = 1/τ, β = α/τ: F is the flow τ⁻¹(−α g + φ(U g + W x + b));
#   rnn, fastrnn, antisymmetric, rin (gated form h ← a h + c·φ(R h + W x + b))
#            y = h, γ = c, β = 1 − a: F(h) = step(h) − h, a fixed point of the map.
#
# The models given by their step map alone (gru, lstm, stack; ``MAP``) are not of that form:
# their ``System`` (kind "step") has F(s) = step(s, x) − s on the whole state s (an LSTM's
# [h; c], a stack's concatenated layers) and ∂F/∂s = ∂step/∂s − I, the closed-form step
# Jacobian; c is then the constant input x itself.  Stability, as for every map, is judged by
# the step Jacobian's eigenvalues μ = λ + 1 against the unit circle.  The certificate uses the
# Lipschitz bound of ``dynlab.analysis.lipschitz`` (GRU, LSTM, one-layer stacks; deeper stacks
# and non-smooth candidate activations are never certified).
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
#: sup |φ''| of the smooth activations (Lipschitz constant of φ'), for the Kantorovich certificate.
_DPHI_LIPSCHITZ = {"tanh": 4.0 / (3.0 * np.sqrt(3.0)), "sigmoid": 1.0 / (6.0 * np.sqrt(3.0)), "identity": 0.0}
#: Lipschitz constant of φ itself (the contraction bound of ``dynlab.convergence``).
PHI_LIPSCHITZ = {"tanh": 1.0, "relu": 1.0, "sigmoid": 0.25, "identity": 1.0, "leaky-relu": 1.0, "abs": 1.0}


def d2phi(name: str, z, leak: float = 0.01):
    """φ''(z) elementwise (0 on the pieces of the piecewise-affine activations)."""
    if name == "tanh":
        t = np.tanh(z)
        return -2.0 * t * (1.0 - t * t)
    if name == "sigmoid":
        s = phi("sigmoid", z)
        return s * (1.0 - s) * (1.0 - 2.0 * s)
    return np.zeros_like(z)


class System:
    """F(y) = γ φ(R y + c) − β y for one model (see the comment above), on row-batched y.

    Attributes: ``kind`` ("irnn", "ctrnn" or "map"), ``R``, ``gamma``, ``beta``,
    ``activation``, ``leak``, ``step_size`` (the natural Euler step η), ``discrete``
    (stability judged by the map's step Jacobian, not the flow), ``variable`` (the unknown's
    name in the papers).
    """

    def __init__(self, model):
        self.model = model
        self.activation, self.leak = model.activation, model.leak
        form = model.form() if model.SEQUENCE else None
        kind = None if form is None else form.kind
        if kind == "irnn":
            eta = np.asarray(model.eta, dtype=np.float64)
            self.kind, self.R, self.gamma, self.beta = "irnn", form.U, 1.0, float(form.alpha)
            self.step_size = float(eta.ravel()[0]) if eta.size == 1 or np.all(eta == eta.ravel()[0]) else float(eta.mean())
            self.variable = "s = h_eq + sign·h_prev"
        elif kind == "ctrnn":
            self.kind, self.R = "ctrnn", form.U
            self.gamma, self.beta = 1.0 / form.tau, form.alpha / form.tau
            self.step_size = float(form.tau)
            self.variable = "g"
        elif kind in ("gru", "lstm", "stack"):
            # F(s) = step(s, x) − s on the whole state s (an LSTM's [h; c])
            self.kind, self.R, self.gamma, self.beta = "step", None, 1.0, 1.0
            self.step_size = 1.0
            labels = model.state_labels()
            self.variable = "h" if labels is None or len(set(labels)) == 1 else "s = " + _state_name(labels)
        elif kind == "cell":
            self.kind, self.R, self.gamma, self.beta = "map", form.R, float(form.gain), 1.0 - float(form.a)
            self.step_size = 1.0
            self.variable = "h"
        else:
            raise ParameterError("model", f"equilibria are not defined for model {getattr(model, 'name', model)!r}")
        self.discrete = self.kind in ("map", "step")
        self.D = model.state_size

    def c(self, x):
        """c = W x + b for row-batched x (N, d) → (N, D); for the step maps (gru, lstm, stack) the
        constant input x itself (N, d), which ``step`` reads."""
        if self.kind == "step":
            return np.array(x, dtype=np.float64, ndmin=2)
        return np.asarray(x, dtype=np.float64) @ self.model.W.T + self.model.b

    def c_rows(self, x, n):
        """``c(x)`` of one input (1, d) repeated for n rows (a writable copy)."""
        c = self.c(x)
        return np.array(np.broadcast_to(c, (n, c.shape[-1])))

    def step_jacobian(self, y, c, inputs=False):
        """The step maps' ∂step/∂s (and ∂step/∂x) at row-batched (y, x = c), through
        ``dynlab.analysis.jacobians.jacobian_at`` (its fastest path for the model)."""
        from .jacobians import jacobian_at

        return jacobian_at(self.model, np.asarray(c, dtype=np.float64), np.asarray(y, dtype=np.float64),
                           inputs=inputs)

    def F(self, y, c):
        if self.kind == "step":
            return self.model.step(y, c) - y
        return self.gamma * phi(self.activation, y @ self.R.T + c, self.leak) - self.beta * y

    def jac(self, y, c):
        """∂F/∂y (N, D, D)."""
        if self.kind == "step":
            J = np.array(self.step_jacobian(y, c))
            idx = np.arange(self.D)
            J[:, idx, idx] -= 1.0
            return J
        d = dphi(self.activation, y @ self.R.T + c, self.leak)
        J = (self.gamma * d)[:, :, None] * self.R[None]
        idx = np.arange(self.D)
        J[:, idx, idx] -= self.beta
        return J

    # ------------------------------------------------------------------ certificate
    def certify(self, y, c, F=None, J=None):
        """A posteriori certificate that a true root lies near each y.

        Smooth φ: the Newton–Kantorovich theorem.  With β_K = ‖J(y)⁻¹‖₂, η_K = ‖J(y)⁻¹F(y)‖₂
        and L = γ·sup|φ''|·‖R‖₂² a Lipschitz constant of ∂F, h = β_K L η_K ≤ ½ proves a unique
        root within r = (1 − √(1 − 2h))/(β_K L) of y (r = η_K when L = 0).  Piecewise-affine φ:
        F is affine inside the region where no R y + c changes sign; when the ball of radius
        2η_K about y lies inside it (‖R‖₂·2η_K < min_i |z_i|) the Newton point y − J⁻¹F is an
        exact root within η_K.  Returns (certified (N,) bool, radius (N,), NaN if not certified).
        """
        y = np.atleast_2d(y)
        F = self.F(y, c) if F is None else F
        J = self.jac(y, c) if J is None else J
        N = y.shape[0]
        ok = np.zeros(N, dtype=bool)
        radius = np.full(N, np.nan)
        if self.kind == "step":
            return self._certify_step(y, c, F, J, ok, radius)
        normR = float(np.linalg.norm(self.R, 2))
        for n in range(N):
            if not (np.all(np.isfinite(y[n])) and np.all(np.isfinite(J[n]))):
                continue
            svals = np.linalg.svd(J[n], compute_uv=False)
            if svals[-1] <= 1e-14 * max(svals[0], 1e-300):
                continue
            try:
                step = np.linalg.solve(J[n], F[n])
            except np.linalg.LinAlgError:
                continue
            beta_k, eta_k = 1.0 / svals[-1], float(np.linalg.norm(step))
            if self.activation in _DPHI_LIPSCHITZ:
                L = self.gamma * _DPHI_LIPSCHITZ[self.activation] * normR ** 2
                if L == 0.0:
                    ok[n], radius[n] = True, eta_k
                    continue
                h = beta_k * L * eta_k
                if h <= 0.5:
                    ok[n], radius[n] = True, (1.0 - np.sqrt(1.0 - 2.0 * h)) / (beta_k * L)
            else:
                z = self.R @ y[n] + c[n]
                if normR * 2.0 * eta_k < np.min(np.abs(z)):
                    ok[n], radius[n] = True, eta_k
        return ok, radius

    #: radius ρ of the ball about y on which the step maps' Lipschitz bound is taken
    CERT_BALL = 0.5

    def _certify_step(self, y, c, F, J, ok, radius):
        """Newton–Kantorovich for the step maps: L = ``jacobian_lipschitz`` bounds the Lipschitz
        constant of ∂F = ∂step/∂s − I on the ball B(y, ρ), ρ = ``CERT_BALL``; certified when
        h = β_K L η_K ≤ ½ and the root's ball r = (1 − √(1 − 2h))/(β_K L) lies inside B(y, ρ).
        Models without a derived bound (stacks of more than one layer, non-smooth activations)
        are never certified."""
        from .lipschitz import jacobian_lipschitz

        rho = self.CERT_BALL
        L = jacobian_lipschitz(self.model, y, c, rho)
        if L is None:
            return ok, radius
        for n in range(y.shape[0]):
            if not (np.all(np.isfinite(y[n])) and np.all(np.isfinite(J[n])) and np.isfinite(L[n])):
                continue
            svals = np.linalg.svd(J[n], compute_uv=False)
            if svals[-1] <= 1e-14 * max(svals[0], 1e-300):
                continue
            beta_k = 1.0 / svals[-1]
            eta_k = float(np.linalg.norm(np.linalg.solve(J[n], F[n])))
            h = beta_k * L[n] * eta_k
            if L[n] == 0.0:
                r = eta_k
            elif h <= 0.5:
                r = (1.0 - np.sqrt(1.0 - 2.0 * h)) / (beta_k * L[n])
            else:
                continue
            if r <= rho:
                ok[n], radius[n] = True, r
        return ok, radius


def _state_name(labels) -> str:
    """"[h; c]" for an LSTM's state labels, "[h1; c1; h2; c2]" for a stack's."""
    seen = []
    for lab in labels:
        if lab not in seen:
            seen.append(lab)
    return "[" + "; ".join(seen) + "]"


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


def _iterate_rows(system: System, c, y0, tol, max_iter, advance):
    """The loop shared by the batched solvers: every row not yet at ‖F‖∞ ≤ tol (and finite)
    takes one step ``advance(y_rows, c_rows, F_rows) → (y_new, F_new)`` per sweep, at most
    ``max_iter`` sweeps.  Returns (y, residual ‖F‖∞, iterations, converged)."""
    y = np.array(y0, dtype=np.float64)
    F = system.F(y, c)
    res = _maxabs(F)
    its = np.zeros(y.shape[0], dtype=np.int64)
    active = res > tol
    for i in range(max_iter):
        idx = np.flatnonzero(active & np.isfinite(res))
        progress("equilibria (Newton: rows converged)", y.shape[0] - idx.size, y.shape[0])
        if idx.size == 0:
            break
        y[idx], F[idx] = advance(y[idx], c[idx], F[idx])
        res[idx] = _maxabs(F[idx])
        its[idx] += 1
        active[idx] = res[idx] > tol
    return y, res, its, res <= tol


def newton_batched(system: System, c, y0, *, tol=1e-12, max_iter=50):
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


def euler_batched(system: System, c, y0, *, step_size, tol=1e-12, max_iter=10_000):
    """y ← y + η F(y) (the iRNN recursion for the iRNN) until ‖F‖∞ ≤ tol, every row at once."""
    def advance(yi, ci, Fi):
        y_new = yi + step_size * Fi
        return y_new, system.F(y_new, ci)

    return _iterate_rows(system, c, y0, tol, max_iter, advance)


def rk4_batched(system: System, c, y0, *, step_size, tol=1e-12, max_iter=30):
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


def scipy_roots(system: System, c, y0, *, tol=1e-12):
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


def run_solver(system: System, c, y0, method: str, *, tol=1e-12, max_iter=None, step_size=None):
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
def flow_eigenvalues(system: System, y, c, *, chunk: int = 256):
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


def _flow_label(system: System) -> str:
    if system.kind == "irnn":
        return "eigenvalue of ∇φ·U − αI"
    if system.kind == "ctrnn":
        return "eigenvalue of (∇φ·U − αI)/τ"
    if system.kind == "step":
        return "eigenvalue of ∂step/∂s − I"
    return "eigenvalue of ∂step/∂h − I"


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
                step_size=None, stability_tol: float = 1e-9, derivatives: bool = False, command=None):
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

    Returns
    -------
    xarray.Dataset with ``h_eq`` ([batch,] unit), ``residual`` ‖F(y)‖∞, ``iterations``,
    ``converged`` (0/1), ``eig_real``/``eig_imag`` ([batch,] eig): eigenvalues of ∂F/∂y (for the
    iRNN ∇φ·U − αI; sorted by decreasing real part), ``max_real``, ``stability`` (1/0/−1; for
    the maps from the step Jacobian's spectral radius, ``step_radius``), ``x``, ``h_prev``,
    the iRNN's ``s_eq``, the model's parameters; attrs ``method``, ``tol``, ``n_converged``.
    Non-convergence is never hidden: ``converged`` is 0 and the residual is the one reached.

    Example
    -------
    >>> eq = equilibrium(m, x[0], h_prev)            # one input
    >>> eq = equilibrium(m, x, method="scipy")       # (N, d) inputs
    """
    with get_backend(None):
        import xarray as xr

        from .._dataset import base_attrs, model_attrs, model_variables

        system = System(model)
        tol = _check_tol(tol)
        xa, single = _inputs(model, x)
        N = xa.shape[0]
        hp = _states(model, h_prev, N, "h_prev")
        c = system.c(xa)
        if system.kind == "irnn":
            y0 = (1.0 + model.sign) * hp if model.g0 == "previous" else model.sign * hp
        else:
            y0 = hp.copy()
        y, res, its, conv = run_solver(system, c, y0, method, tol=tol, max_iter=max_iter, step_size=step_size)
        h_eq = y - model.sign * hp if system.kind == "irnn" else y
        eigs = flow_eigenvalues(system, y, c)
        lead = () if single else ("batch",)
        sel = 0 if single else slice(None)
        data = {
            "h_eq": xr.Variable(lead + ("unit",), h_eq[sel], {"long_name": "equilibrium state h_eq", "units": "1"}),
            "residual": xr.Variable(lead, res[sel], {"long_name": "max-abs residual ‖F‖∞ of the equilibrium equation",
                                                     "units": "1"}),
            "iterations": xr.Variable(lead, its[sel], {"long_name": f"{method} iterations", "units": "1"}),
            "converged": xr.Variable(lead, conv[sel].astype(np.int8), {"long_name": f"residual ≤ {tol:g}", "units": "1"}),
            **eig_variables(eigs[sel], lead, what=_flow_label(system)),
            "max_real": xr.Variable(lead, eigs.real.max(axis=1)[sel], {"long_name": "largest real part of the eigenvalues",
                                                                       "units": "1"}),
            "x": xr.Variable(lead + ("unit_in",), xa[sel], {"long_name": "constant input x", "units": "1"}),
            "h_prev": xr.Variable(lead + ("unit",), hp[sel], {"long_name": "previous state h_{m-1}" if system.kind == "irnn"
                                                              else "start of the solve", "units": "1"}),
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
        if system.kind == "irnn":
            data["s_eq"] = xr.Variable(lead + ("unit",), y[sel], {"long_name": "equilibrium s = h_eq ± h_prev", "units": "1"})
        if derivatives:
            dx, dhp = implicit_derivatives(system, y, c)
            data["dh_dx"] = xr.Variable(lead + ("unit", "unit_in"), dx[sel], {"long_name": "∂h_eq/∂x (implicit function)",
                                                                               "units": "1"})
            if dhp is not None:
                data["dh_dhprev"] = xr.Variable(lead + ("unit", "unit_from"), dhp[sel],
                                                {"long_name": "∂h_eq/∂h_(m-1) (implicit function)", "units": "1"})
        attrs = {**model_attrs(model), **base_attrs("numpy", command), "method": method, "tol": tol,
                 "step_size": float(system.step_size if step_size is None else step_size),
                 "n_converged": int(conv.sum()), "n_points": int(N), "system": system.kind,
                 "equation": _EQUATIONS[system.kind]}
        return finish(xr.Dataset(data, attrs=attrs).assign_coords(_part_coords(model)), "equilibrium")


def implicit_derivatives(system: System, y, c):
    """Derivatives of the equilibrium by the implicit function theorem, by linear solves.

    F(y; x) = 0 with F_y = ∂F/∂y gives ∂y/∂x = −F_y⁻¹ γ ∇φ W (iRNN: (αI − ∇φU)⁻¹ ∇φ W).  For the
    iRNN, G(h_eq, h_prev) = F(h_eq + sign·h_prev) = 0 gives ∂h_eq/∂h_prev = −F_y⁻¹ (sign·F_y),
    computed as written (so that a test sees −sign·I come out of the solve).  Returns
    (dy_dx (N, D, d), dh_dhprev (N, D, D) or None).
    """
    model = system.model
    Fy = system.jac(y, c)
    if system.kind == "step":
        _, Jx = system.step_jacobian(y, c, inputs=True)
        return -np.linalg.solve(Fy, Jx), None
    d = dphi(system.activation, y @ system.R.T + c, system.leak)
    dFdx = (system.gamma * d)[:, :, None] * model.W[None]
    dx = -np.linalg.solve(Fy, dFdx)
    dhp = -np.linalg.solve(Fy, model.sign * Fy) if system.kind == "irnn" else None
    return dx, dhp


_EQUATIONS = {"irnn": "α s = φ(U s + W x + b), s = h_eq + sign·h_prev",
              "ctrnn": "0 = −α g + φ(U g + W x + b)",
              "map": "h = step(h, x)",
              "step": "s = step(s, x) (F(s) = step(s, x) − s)"}


# ------------------------------------------------------------------ multi-start search
def fixed_points(model, x=None, *, n_starts: int = 64, trajectory_steps: int = 50, spread: float = 2.0,
                 starts=None, trajectories=None, start_noise: float = 0.0, n_components: int = 3, seed: int = 0,
                 tol: float = 1e-12, slow_tol: float = 1e-6, dedup_tol: float = 1e-6, max_iter: int = 200,
                 stability_tol: float = 1e-9, keep_unreachable: bool = False, command=None):
    """All the equilibria a multi-start search finds at one constant input, each certified and
    linearised (eigenvalues; eigenvectors of the unstable modes, so saddles are told apart).

    As the fixed-point finders for RNNs do (Sussillo & Barak 2013), starts are taken along
    trajectories of the system itself: either from ``trajectories`` (states the network visited,
    e.g. ``simulate(...)["h"]`` on the task's inputs: ``n_starts`` of them drawn uniformly, each
    plus N(0, start_noise²) noise — the FixedPointFinder workflow), or else ``n_starts`` random
    states y ~ N(0, spread²), each run up to ``trajectory_steps`` Euler steps of the natural step
    size (for the maps: steps of the map itself; start n is the point after
    ⌊trajectory_steps·u_n²⌋ steps, u_n uniform, so early points — far from the attractors, near
    saddles and slow regions — are favoured).  From each, batched damped Newton runs first
    (``NEWTON_FIRST_ITERS`` iterations: most starts converge to a root in a few) and
    q(y) = ½‖F(y)‖² is minimised by batched Levenberg–Marquardt for the rest.  Minima with ‖F‖∞ reachable to ``tol`` are polished by Newton and kept
    as roots, deduplicated (distance ≤ ``dedup_tol``·(1 + ‖y‖)), and certified by the
    Newton–Kantorovich test of ``System.certify``; minima that are no roots but have
    q ≤ ``slow_tol`` are kept as slow points (``kind`` 0).  A second pass starts halfway between
    every pair of distinct minima of the first, where saddles usually lie.

    Only points a trajectory can reach are answers: outside the box of states the dynamics keep a
    trajectory in (``dynlab.analysis.reachable.state_box``: |h| ≤ 1 for a tanh GRU's h, h = φ(·) for
    the Elman cells, …) the search finds "fixed points" where a gate has saturated in floating
    point and slow points on flat plateaus that no trajectory visits.  They are left out of the
    result (attr ``n_unreachable`` counts them) unless ``keep_unreachable``, which keeps them with
    ``reachable`` = 0.  Random starts are drawn inside the box.

    For the iRNN the roots are those of the step equation α s = φ(U s + W x + b) in s (with
    h_prev = 0, h_eq = s); for the CTRNN the zeros of the flow; for the cells the fixed points of
    the map; for gru, lstm and stack the fixed points s = step(s, x) of the whole state (an
    LSTM's [h; c]), stability from the step Jacobian against the unit circle.

    Parameters
    ----------
    model : dynlab model;  x : (d,) constant input, any value (zeros by default)
    starts : (n, D) array, optional — extra starting points (in the solve's variable y)
    trajectories : (B, T, D) or (N, D) states of the network's own trajectories, or a ``Task``
        (``dynlab.make_task``: the states the model visits on its test inputs), optional: the
        random starts are drawn from them, and the Dataset gets their top ``n_components``
        principal components with every point, unstable direction and trajectory projected
        (what ``dynlab.plot.plot_fixed_points`` draws)
    keep_unreachable : keep the points outside the reachable states (flagged), see above
    start_noise : standard deviation of the noise added to starts drawn from ``trajectories``

    Returns
    -------
    xarray.Dataset along ``point``: ``h_eq`` (point, unit), ``q``, ``residual``, ``iterations``,
    ``converged``, ``certified``, ``certified_radius``, ``kind`` (1 root, 0 slow point),
    ``eig_real``/``eig_imag`` (point, eig) of ∂F, ``max_real``, ``stability``, ``hits`` (how many
    starts ended there), ``n_unstable`` (unstable modes: step-Jacobian eigenvalues with
    |μ| > 1 + stability_tol for the maps, Re λ > stability_tol for the flows),
    ``unstable_eig_real``/``unstable_eig_imag`` (point, mode) and ``unstable_vectors`` /
    ``unstable_vectors_imag`` (point, mode, unit): their eigenvalues and unit eigenvectors, most
    unstable first, NaN beyond a point's ``n_unstable``; for the maps also ``step_eig_real`` /
    ``step_eig_imag`` (the step Jacobian's eigenvalues μ = λ + 1) and ``step_radius``; ``reachable``
    (1 inside the reachable box; 0 only with ``keep_unreachable``); ``x``; with
    ``trajectories`` also ``pc_axes`` (pc, unit), ``pc_mean``, ``pc_explained``, ``h_pc``
    (point, pc), ``unstable_pc`` (point, mode, pc), ``trajectory_pc`` (trajectory, time, pc).
    Roots come first, ordered by their first coordinate.  attrs ``n_roots``, ``n_slow``,
    ``n_stable`` (stable roots), ``n_saddles`` (roots with exactly one unstable mode),
    ``n_unreachable`` (points outside the reachable box: left out, or kept and flagged),
    ``state_box`` (the rule of that box), ``certificate`` (what certifies the roots, or why none
    is claimed).  The counts are of the points in the result.

    Example
    -------
    >>> fp = fixed_points(make_model("ctrnn", 2, 1, weight_scale=3, seed=1), [0.0])
    """
    with get_backend(None):
        import xarray as xr

        from .._dataset import base_attrs, model_attrs, model_variables

        system = System(model)
        tol = _check_tol(tol)
        xa, _ = _inputs(model, np.zeros(model.inputs) if x is None else x)
        if xa.shape[0] != 1:
            raise ParameterError("x", "fixed_points takes one constant input (d,)")
        if int(n_starts) < 1 and starts is None:
            raise ParameterError("n_starts", f"must be ≥ 1, got {n_starts}")
        D = model.state_size
        check_fixed_points(max(int(n_starts), 0) + (0 if starts is None else len(starts)), D)  # before allocating
        rng = np.random.default_rng(seed)
        box = state_box(model, xa[0])
        traj = None
        if trajectories is not None and hasattr(trajectories, "batch"):  # a Task: the states on its test inputs
            trajectories = task_states(model, trajectories)
        if trajectories is not None:
            traj = np.asarray(trajectories, dtype=np.float64)
            if traj.ndim == 2:
                traj = traj[None]
            if traj.ndim != 3 or traj.shape[2] != D or traj.shape[1] < 1 or not np.all(np.isfinite(traj)):
                raise ParameterError("trajectories", f"must be finite states (B, T, {D}) or (N, {D}), "
                                                     f"got shape {np.shape(trajectories)}")
            if not (np.isfinite(start_noise) and start_noise >= 0):
                raise ParameterError("start_noise", f"must be finite and ≥ 0, got {start_noise}")
        Y = [np.empty((0, D))]
        if int(n_starts) > 0 and traj is not None:
            flat = traj.reshape(-1, D)
            y = flat[rng.integers(0, flat.shape[0], int(n_starts))]
            Y.append(y + float(start_noise) * rng.standard_normal(y.shape))
        elif int(n_starts) > 0:
            y = box.clip(rng.standard_normal((int(n_starts), D)) * float(spread))
            c = system.c_rows(xa, y.shape[0])
            # where along its trajectory each start is taken: early points (where the dynamics is
            # still far from the attractors, near saddles and slow regions) are favoured
            stop = np.floor(int(trajectory_steps) * rng.random(y.shape[0]) ** 2).astype(np.int64)
            with np.errstate(all="ignore"):
                for k in range(int(trajectory_steps)):
                    move = stop > k
                    y[move] += system.step_size * system.F(y[move], c[move])
            Y.append(y[np.all(np.isfinite(y), axis=1)])
        if starts is not None:
            s = np.asarray(starts, dtype=np.float64)
            if s.ndim != 2 or s.shape[1] != D or not np.all(np.isfinite(s)):
                raise ParameterError("starts", f"must be a finite (n, {D}) array, got shape {s.shape}")
            Y.append(s)
        Y = np.vstack(Y)
        c = system.c_rows(xa, Y.shape[0])
        Y, q, its = _search(system, c, Y, tol, max_iter)
        # second pass: saddles separate attractors, so start again halfway between every pair of
        # distinct minima found (a cheap way not to miss the unstable equilibria between them)
        good = Y[q <= max(slow_tol, tol)]
        uniq = []
        for yv in good:
            if all(np.linalg.norm(yv - u) > 1e-3 * (1.0 + np.linalg.norm(u)) for u in uniq):
                uniq.append(yv)
        mids = [0.5 * (a + b) for i, a in enumerate(uniq) for b in uniq[i + 1:]][:1000]
        if mids:
            M = np.array(mids)
            cM = system.c_rows(xa, M.shape[0])
            M, qM, itsM = _search(system, cM, M, tol, max_iter)
            Y, q, c, its = np.vstack([Y, M]), np.concatenate([q, qM]), np.vstack([c, cM]), np.concatenate([its, itsM])
        # polish every start whose q is small enough to be a root or a slow point
        cand = q <= max(slow_tol, tol)
        Yp, rp, itp, okp = newton_batched(system, c[cand], Y[cand], tol=tol, max_iter=50)
        itp = itp + its[cand]
        roots, slow = [], []
        for yv, r, it, ok, y_lm, q_lm in zip(Yp, rp, itp, okp, Y[cand], q[cand]):
            if ok:
                roots.append((yv, it))
            else:
                slow.append((y_lm, q_lm, it))
        pts, hits, kinds, iters = _dedup_roots(roots, dedup_tol)
        for yv, qv, it in sorted(slow, key=lambda t: t[1]):
            for i, p in enumerate(pts):
                if np.linalg.norm(yv - p) <= 1e-3 * (1.0 + np.linalg.norm(p)):
                    hits[i] += 1
                    break
            else:
                pts.append(yv)
                hits.append(1)
                kinds.append(0)
                iters.append(it)
        P = np.array(pts).reshape(-1, D)
        reach = box.contains(P)
        n_unreachable = int((~reach).sum())
        if not keep_unreachable:  # left out: an answer no trajectory can reach is no answer
            hits, kinds, iters = ([v for v, r in zip(lst, reach) if r] for lst in (hits, kinds, iters))
            P, reach = P[reach], reach[reach]
        n = P.shape[0]
        cP = system.c_rows(xa, n)
        FP = system.F(P, cP) if n else np.empty((0, D))
        resP = _maxabs(FP) if n else np.empty(0)
        cert, radius = system.certify(P, cP, FP) if n else (np.zeros(0, bool), np.empty(0))
        eigs, vecs = _eig_with_vectors(system, P, cP)
        growth = eigs + 1.0 if system.discrete else eigs
        stab = stability_label(growth, discrete=system.discrete, tol=stability_tol)
        kinds = np.array(kinds, dtype=np.int8)
        lab = _flow_label(system)
        data = {
            "h_eq": xr.Variable(("point", "unit"), P, {"long_name": f"equilibrium ({system.variable})", "units": "1"}),
            "q": xr.Variable(("point",), 0.5 * np.sum(FP ** 2, axis=1), {"long_name": "q = ½‖F‖²", "units": "1"}),
            "residual": xr.Variable(("point",), resP, {"long_name": "max-abs residual ‖F‖∞", "units": "1"}),
            "converged": xr.Variable(("point",), (resP <= tol).astype(np.int8), {"long_name": f"residual ≤ {tol:g}",
                                                                                "units": "1"}),
            "iterations": xr.Variable(("point",), np.array(iters, dtype=np.int64),
                                      {"long_name": "Newton iterations (search and polish) of the first start that "
                                                    "ended here; Levenberg–Marquardt steps not counted", "units": "1"}),
            "certified": xr.Variable(("point",), cert.astype(np.int8),
                                     {"long_name": "a unique true root proven nearby (Newton–Kantorovich)", "units": "1"}),
            "certified_radius": xr.Variable(("point",), radius, {"long_name": "radius of the ball holding the true root",
                                                                 "units": "1"}),
            "kind": xr.Variable(("point",), kinds, {"long_name": "1 root, 0 slow point", "units": "1",
                                                    "flag_values": np.array([0, 1], dtype=np.int8),
                                                    "flag_meanings": "slow_point root"}),
            "hits": xr.Variable(("point",), np.array(hits, dtype=np.int64), {"long_name": "starts that ended here",
                                                                              "units": "1"}),
            **eig_variables(eigs, ("point",), what=lab),
            "max_real": xr.Variable(("point",), eigs.real.max(axis=1) if n else np.empty(0),
                                    {"long_name": "largest real part of the eigenvalues", "units": "1"}),
            "stability": xr.Variable(("point",), stab, dict(STABILITY_ATTRS)),
            "x": xr.Variable(("unit_in",), xa[0], {"long_name": "constant input x", "units": "1"}),
            "reachable": xr.Variable(("point",), reach.astype(np.int8),
                                     {"long_name": "inside the states a trajectory can reach", "units": "1"}),
            **_unstable_modes(eigs, vecs, growth, system.discrete, stability_tol, lab),
            **model_variables(model),
        }
        if system.discrete:
            data.update(eig_variables(eigs + 1.0, ("point",), name="step_eig",
                                      what="eigenvalue of the step Jacobian ∂s_t/∂s_(t-1)"))
            data["step_radius"] = xr.Variable(("point",), np.abs(eigs + 1.0).max(axis=1) if n else np.empty(0),
                                              {"long_name": "spectral radius of the step Jacobian", "units": "1"})
        if traj is not None:
            data.update(_projection(traj, P, data, int(n_components)))
        n_unst = data["n_unstable"].values
        attrs = {**model_attrs(model), **base_attrs("numpy", command), "tol": tol, "slow_tol": slow_tol,
                 "n_starts": int(Y.shape[0]), "trajectory_steps": int(trajectory_steps), "spread": float(spread),
                 "starts_from": "trajectories" if traj is not None else "random states run along the dynamics",
                 "start_noise": float(start_noise), "dedup_tol": float(dedup_tol),
                 "search_seed": int(seed), "n_roots": int((kinds == 1).sum()), "n_slow": int((kinds == 0).sum()),
                 "n_stable": int(((kinds == 1) & (stab == STABLE)).sum()),
                 "n_saddles": int(((kinds == 1) & (n_unst == 1)).sum()),
                 "n_unreachable": n_unreachable, "state_box": box.rule,
                 "certificate": _certificate_note(system),
                 "system": system.kind, "equation": _EQUATIONS[system.kind]}
        ds = xr.Dataset(data, attrs=attrs)
        ds = ds.assign_coords(_part_coords(model))
        return finish(ds, "fixed_points")


#: Newton iterations from every start before the rows that have not converged go on by
#: Levenberg–Marquardt (``_search``).
NEWTON_FIRST_ITERS = 20


def _search(system, c, Y, tol, max_iter):
    """Roots and minima of q = ½‖F‖² from every row: damped Newton (line search on ‖F‖₂, which
    only decreases ‖F‖) for ``NEWTON_FIRST_ITERS`` iterations — most starts near an attractor
    or a saddle converge in a few —, then batched Levenberg–Marquardt from where Newton stopped
    for the rows that did not converge.  Returns (y, q, Newton iterations)."""
    Yn, res, its, ok = newton_batched(system, c, Y, tol=tol, max_iter=NEWTON_FIRST_ITERS)
    F = system.F(Yn, c)
    with np.errstate(over="ignore", invalid="ignore"):
        q = 0.5 * np.sum(F * F, axis=1)
    rest = np.flatnonzero(~ok)
    if rest.size:  # from the start again: where Newton did not converge it may have wandered off
        Yn[rest], q[rest] = _levenberg_marquardt(system, c[rest], Y[rest], max_iter=max_iter)
        its[rest] = 0
    return Yn, np.where(np.isfinite(q), q, np.inf), its


def _dedup_roots(roots, dedup_tol):
    """Distinct roots (distance ≤ dedup_tol·(1 + ‖p‖) is the same point), ordered by their
    coordinates; returns lists (points, hits, kinds = 1, iterations)."""
    pts, hits, iters = [], [], []
    for yv, it in roots:
        for i, p in enumerate(pts):
            if np.linalg.norm(yv - p) <= dedup_tol * (1.0 + np.linalg.norm(p)):
                hits[i] += 1
                break
        else:
            pts.append(yv)
            hits.append(1)
            iters.append(it)
    order = sorted(range(len(pts)), key=lambda i: tuple(pts[i]))
    return ([pts[i] for i in order], [hits[i] for i in order], [1] * len(order), [iters[i] for i in order])


def _eig_with_vectors(system, P, cP):
    """Eigenvalues (n, D) of ∂F at every point, sorted by decreasing real part, and the matching
    unit eigenvectors (n, D, D) (columns)."""
    n, D = P.shape
    if n == 0:
        return np.empty((0, D), complex), np.empty((0, D, D), complex)
    w, V = np.linalg.eig(system.jac(P, cP))
    order = np.argsort(-w.real, axis=1, kind="stable")
    w = np.take_along_axis(w, order, axis=1)
    V = np.take_along_axis(V, order[:, None, :], axis=2)
    return w.astype(np.complex128), V.astype(np.complex128)


def _unstable_modes(eigs, vecs, growth, discrete, tol, what):
    """``n_unstable``, the unstable eigenvalues and their unit eigenvectors, most unstable first
    (NaN-padded to the largest count, at least one mode so the variables always exist)."""
    import xarray as xr

    n, D = eigs.shape
    size = np.abs(growth) if discrete else growth.real
    unstable = size > (1.0 + tol if discrete else tol)
    counts = unstable.sum(axis=1).astype(np.int64)
    K = max(1, int(counts.max()) if n else 1)
    ev = np.full((n, K), np.nan + 0j)
    vv = np.full((n, K, D), np.nan + 0j)
    for p in range(n):
        idx = np.flatnonzero(unstable[p])
        idx = idx[np.argsort(-size[p, idx], kind="stable")]
        for k, j in enumerate(idx):
            v = vecs[p, :, j]
            v = v / np.linalg.norm(v)
            big = np.argmax(np.abs(v))
            v = v * (np.abs(v[big]) / v[big])  # the largest component real and positive
            ev[p, k], vv[p, k] = eigs[p, j], v
    crit = "|μ| > 1 of the step Jacobian" if discrete else "Re λ > 0"
    return {
        "n_unstable": xr.Variable(("point",), counts, {"long_name": f"unstable modes ({crit})", "units": "1"}),
        "unstable_eig_real": xr.Variable(("point", "mode"), ev.real.copy(),
                                         {"long_name": f"real part of the unstable {what}", "units": "1"}),
        "unstable_eig_imag": xr.Variable(("point", "mode"), ev.imag.copy(),
                                         {"long_name": f"imaginary part of the unstable {what}", "units": "1"}),
        "unstable_vectors": xr.Variable(("point", "mode", "unit"), vv.real.copy(),
                                        {"long_name": "unit eigenvector of the unstable mode (real part)",
                                         "units": "1"}),
        "unstable_vectors_imag": xr.Variable(("point", "mode", "unit"), vv.imag.copy(),
                                             {"long_name": "unit eigenvector of the unstable mode (imaginary part)",
                                              "units": "1"}),
    }


def _projection(traj, P, data, n_components):
    """Top principal components of the trajectories' states and everything projected on them."""
    import xarray as xr

    flat = traj.reshape(-1, traj.shape[2])
    mean = flat.mean(axis=0)
    _, sv, Vt = np.linalg.svd(flat - mean, full_matrices=False)
    k = max(1, min(int(n_components), Vt.shape[0]))
    axes = Vt[:k]
    for i in range(k):  # a deterministic sign: the largest loading positive
        if axes[i, np.argmax(np.abs(axes[i]))] < 0:
            axes[i] = -axes[i]
    var = sv ** 2
    vec = data["unstable_vectors"].values
    return {
        "pc_axes": xr.Variable(("pc", "unit"), axes, {"long_name": "principal axes of the trajectories' states",
                                                      "units": "1"}),
        "pc_mean": xr.Variable(("unit",), mean, {"long_name": "mean state of the trajectories", "units": "1"}),
        "pc_explained": xr.Variable(("pc",), var[:k] / max(var.sum(), 1e-300),
                                    {"long_name": "fraction of the trajectories' variance explained", "units": "1"}),
        "h_pc": xr.Variable(("point", "pc"), (P - mean) @ axes.T, {"long_name": "fixed point in the principal "
                                                                                 "components", "units": "1"}),
        "unstable_pc": xr.Variable(("point", "mode", "pc"), vec @ axes.T,
                                   {"long_name": "unstable eigenvector (real part) in the principal components",
                                    "units": "1"}),
        "trajectory_pc": xr.Variable(("trajectory", "time", "pc"), (traj - mean) @ axes.T,
                                     {"long_name": "trajectory in the principal components", "units": "1"}),
    }


def _part_coords(model) -> dict:
    """The ``part`` coordinate ("h"/"c", "h1", …) on ``unit`` for the models whose state has parts."""
    labels = model.state_labels()
    if labels is None:
        return {}
    return {"part": ("unit", np.array(labels, dtype=object),
                     {"long_name": "part of the state (h: hidden output, c: LSTM cell)", "units": "1"})}


def _certificate_note(system) -> str:
    if system.kind != "step":
        return "Newton–Kantorovich with L = γ·sup|φ''|·‖R‖₂² (smooth φ), the affine region (piecewise-affine φ)"
    from .lipschitz import jacobian_lipschitz

    probe = jacobian_lipschitz(system.model, np.zeros((1, system.D)), np.zeros((1, system.model.inputs)), 0.1)
    if probe is None:
        return (f"not certified: no Lipschitz bound of the step Jacobian is derived for {system.model.name} "
                f"(activation {system.model.activation}); roots are checked by residual only")
    return (f"Newton–Kantorovich with the Lipschitz bound of dynlab.analysis.lipschitz on the ball of radius "
            f"{System.CERT_BALL} about each point")



#: Levenberg–Marquardt hands a row to the Newton polish once ‖F‖∞ ≤ this (deep inside Newton's
#: quadratic basin for every model dynlab has; the polish takes it to ``tol``).
LM_FTOL = 1e-9


def _levenberg_marquardt(system: System, c, y, *, max_iter=200, gtol=1e-15, ftol=LM_FTOL):
    """Minimise q(y) = ½‖F(y)‖² from every row at once (batched Levenberg–Marquardt:
    (JᵀJ + μI) δ = −JᵀF, μ shrunk on success and grown on failure); a row stops at a stationary
    point (‖JᵀF‖∞ ≤ gtol), at ‖F‖∞ ≤ ftol (a root for Newton to polish) or when μ > 1e12.
    Returns (y, q)."""
    y = y.copy()
    N, D = y.shape
    F = system.F(y, c)
    q = 0.5 * np.sum(F * F, axis=1)
    mu = np.full(N, 1e-3)
    eye = np.eye(D)
    active = np.isfinite(q) & (q > 0)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        progress("fixed points (Levenberg–Marquardt: rows done)", active.size - idx.size, active.size)
        if idx.size == 0:
            break
        J = system.jac(y[idx], c[idx])
        JT = np.swapaxes(J, 1, 2)
        g = np.einsum("nij,ni->nj", J, F[idx])
        A = JT @ J
        scale = np.maximum(np.einsum("nii->n", A) / D, 1e-300)
        step = _solve_batched(A + (mu[idx] * scale)[:, None, None] * eye, -g)
        y_new = y[idx] + step
        with np.errstate(all="ignore"):
            F_new = system.F(y_new, c[idx])
            q_new = 0.5 * np.sum(F_new * F_new, axis=1)
        better = np.isfinite(q_new) & (q_new < q[idx])
        b = idx[better]
        y[b], F[b], q[b] = y_new[better], F_new[better], q_new[better]
        mu[b] = np.maximum(mu[b] / 3.0, 1e-12)
        mu[idx[~better]] *= 4.0
        small = ((np.max(np.abs(g), axis=1) <= gtol) | (q[idx] <= 1e-30) | (mu[idx] > 1e12)
                 | (np.max(np.abs(F[idx]), axis=1) <= ftol))
        active[idx[small]] = False
    return y, q

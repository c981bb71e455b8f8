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
from .._progress import progress
from ..activations import dphi, phi
from ..backends import get_backend
from ..errors import ParameterError

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
    the iRNN's ``s_eq``, the model's parameters; attrs ``solve_method`` (not ``method``, which is
    a CTRNN's own setting), ``tol``, ``n_converged``.
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
        # the solve's method as "solve_method": a CTRNN's own setting ``method`` is an attr of the model
        attrs = {**model_attrs(model), **base_attrs("numpy", command), "solve_method": method, "tol": tol,
                 "step_size": float(system.step_size if step_size is None else step_size),
                 "n_converged": int(conv.sum()), "n_points": int(N), "system": system.kind,
                 "equation": _EQUATIONS[system.kind]}
        return finish(xr.Dataset(data, attrs=attrs).assign_coords(_part_coords(model)), "equilibrium")


_EQUATIONS = {"irnn": "α s = φ(U s + W x + b), s = h_eq + sign·h_prev",
              "ctrnn": "0 = −α g + φ(U g + W x + b)",
              "map": "h = step(h, x)",
              "step": "s = step(s, x) (F(s) = step(s, x) − s)"}


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


def _part_coords(model) -> dict:
    """The ``part`` coordinate ("h"/"c", "h1", …) on ``unit`` for the models whose state has parts."""
    labels = model.state_labels()
    if labels is None:
        return {}
    return {"part": ("unit", np.array(labels, dtype=object),
                     {"long_name": "part of the state (h: hidden output, c: LSTM cell)", "units": "1"})}

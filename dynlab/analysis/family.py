"""The equation family F(y, λ) = 0 of one model over one scalar parameter λ, with its derivatives:
what continuation (``dynlab.analysis.continuation``), the bifurcation detectors
(``dynlab.analysis.bifurcations``) and the two-parameter curves (``dynlab.analysis.codim2``) see
of a model — the one place where they read the model and its form's fixed-point map.

F is the form's fixed-point map (``form.fixed_point_map()``, ``dynlab.models.fixed_point``):
γ φ(R y + c) − β y for irnn, ctrnn and the cells (c = W x + b), step(s, x) − s for gru, lstm and
stack (c = x); the map computes F and its derivatives at one point, the family moves λ.  λ is

* ``x`` (d = 1) or ``x<j>`` — the constant input or its component j (0-based), every model;
* ``b`` or ``b<i>`` — every bias set to λ, or bias i: irnn, ctrnn and the cells their b; gru and
  lstm their input-side gate biases ``b_ih`` (G·D entries, PyTorch's gate order), a stack every
  layer's ``b_ih`` (or an rnn layer's ``b``) concatenated, layer 1 first;
* ``alpha`` — the leak α of irnn and ctrnn (β = γ α), FastRNN's gate parameter α (γ = σ(α)).

Derivatives: F_y is analytic for every model (the step Jacobian for the maps); F_λ analytic
for x, for b of the γφ(·) − βy systems and for the leak α, else a central difference in λ
(step 1e-6·(1 + |λ|): error ~1e-10, which slows a Newton iteration a little and changes no
residual).  The multilinear forms of the normal forms, B(u, v) = D²F(y)[u, v] and
C(u, v, w) = D³F(y)[u, v, w], are analytic for the γφ(·) − βy systems (γ φ''(z) Ru ⊙ Rv,
γ φ'''(z) Ru ⊙ Rv ⊙ Rw) and central differences of the analytic step Jacobian for the maps
given by their step (B: error ~1e-10; C: four Jacobians at ±ε, ε = 1e-4, error ~1e-8).
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import ParameterError
from ..models import fixed_point
from .equilibria import fixed_point_map

#: Relative step of the central differences in λ.
FD_PARAM = 1e-6
#: Steps of the central differences of the step Jacobian (second and third derivatives; the step
#: maps' ``B1``/``C1`` read them from ``dynlab.models.fixed_point``).
FD_B, FD_C = fixed_point.FD_B, fixed_point.FD_C


def _bias_segments(model):
    """[(replace key, current vector)] of a model's biases: b, a gated map's input-side b_ih, a
    stack's layers' ones."""
    layers = getattr(model, "layers", None)
    if layers is None:
        key = "b_ih" if hasattr(model, "b_ih") else "b"
        return [(key, np.asarray(getattr(model, key)))]
    out = []
    for ell, m in enumerate(layers, start=1):
        key = "b_ih" if hasattr(m, "b_ih") else "b"
        out.append((f"layer{ell}_{key}", np.asarray(getattr(m, key))))
    return out


def _set_bias(model, sel, lam):
    """``model`` with the biases selected by ``sel`` (over the concatenated segments) set to λ."""
    changes, k = {}, 0
    for key, vec in _bias_segments(model):
        part = sel[k:k + vec.size]
        if part.any():
            changes[key] = np.where(part > 0, lam, vec)
        k += vec.size
    return model.replace(**changes)


def apply_parameter(model, x, over: str, lam: float):
    """(model, x) with the parameter ``over`` set to λ — how a second parameter of a two-parameter
    curve is applied before the family of the first is formed."""
    fam = Family(model, over, x)
    return fam.model_at(lam), fam.x_at(lam)


class Family:
    """F(y, λ) and its derivatives for one model and one continuation parameter (module docstring)."""

    def __init__(self, model, over: str, x):
        system = fixed_point_map(model)
        self.system, self.over, self.model = system, str(over).strip(), model
        self.x = np.asarray(x, dtype=np.float64).reshape(model.inputs)
        self.D = model.state_size
        m = re.fullmatch(r"(x|b)(\d*)|alpha", self.over)
        if m is None:
            raise ParameterError("over", f"must be x, x<j>, b, b<i> or alpha, got {over!r}")
        self.kind = "alpha" if m.group(0) == "alpha" else m.group(1)
        idx = m.group(2) if m.group(0) != "alpha" else ""
        self.index = int(idx) if idx else None
        if self.kind == "alpha" and "alpha" not in model.params():
            raise ParameterError("over", f"alpha is not a parameter of {model.name} (irnn and ctrnn: the leak α; "
                                         f"fastrnn: its gate α); use x or b")
        if self.kind == "x":
            size = model.inputs
        elif self.kind == "b":
            size = sum(v.size for _, v in _bias_segments(model))
        else:
            size = 1
        if self.index is not None and not 0 <= self.index < size:
            raise ParameterError("over", f"{over!r}: index must be in 0..{size - 1}")
        sel = np.zeros(size)
        if self.index is None:
            sel[:] = 1.0
        else:
            sel[self.index] = 1.0
        self.sel = sel
        # "model" mode: λ changes the model itself (FastRNN's gate α, a gated map's biases); F_λ by
        # differences.  Else λ moves c (dc = ∂c/∂λ) or the leak β = γ α.
        self.mode = "model" if (self.kind == "alpha" and not system.leak_alpha) or \
            (self.kind == "b" and not system.c_has_bias) else "analytic"
        if self.mode == "analytic":
            self.dc = system.c_dx(sel) if self.kind == "x" else (sel.copy() if self.kind == "b" else np.zeros(self.D))
        self._cache = (None, None)

    # ------------------------------------------------------------------ the parameter
    @property
    def discrete(self) -> bool:
        """A map (stability and bifurcations of its step), not a flow."""
        return self.system.discrete

    @property
    def smooth(self) -> bool:
        """Whether φ'' exists (the second- and third-order terms of the normal forms)."""
        return self.system.smooth

    def value0(self) -> float:
        """λ's value in the model as given."""
        model = self.model
        if self.kind == "alpha":
            return float(model.alpha)
        if self.kind == "x":
            return float(self.x[self.index if self.index is not None else 0])
        vec = np.concatenate([v for _, v in _bias_segments(model)])
        return float(vec[self.index if self.index is not None else 0])

    def x_at(self, lam):
        return np.where(self.sel > 0, lam, self.x) if self.kind == "x" else self.x.copy()

    def model_at(self, lam):
        """The model with λ applied (the input x is applied by ``x_at``)."""
        model = self.model
        if self.kind == "alpha":
            return model.replace(alpha=float(lam))
        if self.kind == "b":
            return _set_bias(model, self.sel, float(lam))
        return model

    def _at(self, lam):
        """(fixed-point map, c, β) at λ: c = W x + b (the input x for the step maps)."""
        lam = float(lam)
        if self._cache[0] == lam:
            return self._cache[1]
        s = self.system
        if self.mode == "model":
            sys_l = fixed_point_map(self.model_at(lam))
            out = (sys_l, sys_l.c(self.x_at(lam)[None])[0], sys_l.beta)
        else:
            x, b = self.x, s.b
            if self.kind == "x":
                x = np.where(self.sel > 0, lam, x)
            elif self.kind == "b":
                b = np.where(self.sel > 0, lam, b)
            beta = s.gamma * lam if self.kind == "alpha" else s.beta
            out = (s, s.c1(x, b), beta)
        self._cache = (lam, out)
        return out

    # ------------------------------------------------------------------ F and its derivatives
    def F(self, y, lam):
        sys_l, c, beta = self._at(lam)
        return sys_l.F1(y, c, beta)

    def jac(self, y, lam):
        """F_y (D, D)."""
        sys_l, c, beta = self._at(lam)
        return sys_l.jac1(y, c, beta)

    def derivs(self, y, lam):
        """(F, F_y, F_λ)."""
        if self.mode == "model":
            e = FD_PARAM * (1.0 + abs(lam))
            Fl = (self.F(y, lam + e) - self.F(y, lam - e)) / (2.0 * e)
            return self.F(y, lam), self.jac(y, lam), Fl
        sys_l, c, beta = self._at(lam)
        return sys_l.derivs1(y, c, beta, self.dc, self.kind == "alpha")

    def second(self, y, lam, v):
        """(∂(F_y v)/∂y (D, D), ∂(F_y v)/∂λ (D,)): the Moore–Spence rows."""
        sys_l, c, beta = self._at(lam)
        if not sys_l.closed_form_higher or self.mode == "model":
            ev = FD_B / max(np.linalg.norm(v), 1e-300)
            Jy = (self.jac(y + ev * v, lam) - self.jac(y - ev * v, lam)) / (2.0 * ev)
            el = FD_B * max(1.0, abs(lam))
            Jl = (self.jac(y, lam + el) - self.jac(y, lam - el)) @ v / (2.0 * el)
            return Jy, Jl
        return sys_l.second1(y, c, v, self.dc, self.kind == "alpha")

    def B(self, y, lam, u, v):
        """D²F(y)[u, v] (complex u, v allowed)."""
        sys_l, c, beta = self._at(lam)
        return sys_l.B1(y, c, u, v, beta)

    def C(self, y, lam, u, v, w):
        """D³F(y)[u, v, w] (complex allowed)."""
        sys_l, c, beta = self._at(lam)
        return sys_l.C1(y, c, u, v, w, beta)

    # ------------------------------------------------------------------ stability
    def eigenvalues(self, Fy):
        """Eigenvalues of F_y, sorted by decreasing real part (as ``flow_eigenvalues``)."""
        ev = np.linalg.eigvals(Fy)
        return np.sort(ev)[::-1]

    def start(self, lo):
        """A first guess of the equilibrium at λ = lo: 200 steps of a gated map from 0 (where it settles,
        a stable point usually), one Picard step from 0 for the others."""
        sys_l, c, beta = self._at(lo)
        return sys_l.guess(c, beta)

    def solve(self, y0, lam, tol, max_iter=100):
        """Newton at fixed λ: (y, residual, iterations, converged)."""
        from .equilibria import run_solver

        sys_l, c, beta = self._at(lam)
        if self.kind == "alpha" and self.mode == "analytic":
            sys_l = fixed_point_map(self.model.replace(alpha=float(lam)))
        y, r, its, ok = run_solver(sys_l, c[None], np.asarray(y0, dtype=np.float64)[None], "newton", tol=tol,
                                   max_iter=max_iter)
        return y[0], float(r[0]), int(its[0]), bool(ok[0])

"""Fixed-point maps: what a kernel form hands the equilibrium analyses.

Every sequence form (``dynlab.models.forms``) gives ``form.fixed_point_map()``: the function F
whose zeros the equilibrium, fixed-point, continuation, bifurcation and convergence analyses
(``dynlab.analysis``) solve, with its Jacobian ∂F/∂y, its certificate and the few facts the
analyses write into their Datasets.  The analyses ask the map; they never branch on a form's kind.

Two shapes:

``ResidualMap``   F(y) = γ φ(R y + c) − β y,  ∂F/∂y = γ diag(φ'(R y + c)) R − β I,  c = W x + b:
                  the iRNN's step equilibrium (y = s = h_eq + sign·h_prev, R = U, γ = 1, β = α;
                  ``IRNNMap``), the CTRNN's flow (y = g, γ = 1/τ, β = α/τ; ``CTRNNMap``) and the one-line
                  cells' map h ← a h + γ φ(R h + W x + b) (y = h, β = 1 − a).  Closed forms
                  throughout, NumPy on the host: the reference backend's arithmetic.
``StepMap``       F(s) = step(s, x) − s on the whole state s (an LSTM's [h; c], a stack's
                  layers), ∂F/∂s = ∂step/∂s − I, c = x: the models given by their step map alone
                  (gru, lstm, stack).  The step runs on the reference backend (a few host points
                  per Newton iteration, where a compiled backend's dispatch costs more than the
                  step); the step Jacobians on ``backend`` (the default backend unless one is
                  given) — ``backend`` is what a Dataset's ``backend`` attr names.

The "euler" method of ``dynlab.analysis.equilibria`` is y ← y + η F(y) with η = ``step_size``.
"""
from __future__ import annotations

import functools

import numpy as np

from ..activations import dphi, phi

#: Steps of the central differences of a step map's Jacobian (its second and third derivatives).
FD_B, FD_C = 1e-5, 1e-4
#: sup |φ''| of the smooth activations (Lipschitz constant of φ'), for the Kantorovich certificate.
DPHI_LIPSCHITZ = {"tanh": 4.0 / (3.0 * np.sqrt(3.0)), "sigmoid": 1.0 / (6.0 * np.sqrt(3.0)), "identity": 0.0}


def d2phi(name: str, z, leak: float = 0.01):
    """φ''(z) elementwise (0 on the pieces of the piecewise-affine activations)."""
    if name == "tanh":
        t = np.tanh(z)
        return -2.0 * t * (1.0 - t * t)
    if name == "sigmoid":
        s = phi("sigmoid", z)
        return s * (1.0 - s) * (1.0 - 2.0 * s)
    return np.zeros_like(z)


def d3phi(name: str, z):
    """φ'''(z) elementwise (0 on the pieces of the piecewise-affine activations)."""
    if name == "tanh":
        t = np.tanh(z)
        return (1.0 - t * t) * (6.0 * t * t - 2.0)
    if name == "sigmoid":
        s = phi("sigmoid", z)
        return s * (1.0 - s) * (1.0 - 6.0 * s + 6.0 * s * s)
    return np.zeros_like(np.asarray(z, dtype=np.float64))


@functools.lru_cache(maxsize=1)
def _reference():
    """The reference backend, fetched from the registry once per process: the host arithmetic of
    the maps is its role, not a choice of the caller's (which the map's ``backend`` is)."""
    from ..backends import get_backend

    return get_backend("reference")


def _state_name(labels) -> str:
    """"[h; c]" for an LSTM's state labels, "[h1; c1; h2; c2]" for a stack's."""
    seen = []
    for lab in labels:
        if lab not in seen:
            seen.append(lab)
    return "[" + "; ".join(seen) + "]"


class _Map:
    """What every fixed-point map offers (the module docstring); subclasses fill in F and ∂F."""

    #: the Dataset attr ``system`` (a name, never branched on)
    name = ""
    #: the equation solved, as a Dataset attr
    equation = ""
    #: what the eigenvalues of ∂F/∂y are of, for the eigenvalue variables' long_name
    eig_label = ""
    #: what F is in a phase portrait's vector field
    field_label = "step(h) − h"
    #: stability judged by the step Jacobian ∂F/∂y + I against the unit circle (a map), not the flow
    discrete = True
    #: the natural step η of the "euler" method
    step_size = 1.0
    #: the unknown is s = h_eq + sign·h_prev (the iRNN's step equilibrium), not the state itself
    shifted = False
    #: what ``h_prev`` is to the solve (a Dataset long_name)
    h_prev_role = "start of the solve"
    #: the bias b enters F only through c = W x + b (else a change of b is a change of the model)
    c_has_bias = True
    #: D²F and D³F in closed form (else central differences of ∂F)
    closed_form_higher = True
    #: β = γ α with α the model's setting ``alpha`` (a leak: a family over α moves β only)
    leak_alpha = False
    #: F = γ φ(R y + c) − β y (the piecewise-affine enumeration of ``dynlab.analysis.pwa`` applies)
    residual_form = False
    #: radius ρ of the ball about y on which the step maps' Lipschitz bound is taken
    CERT_BALL = 0.5

    def c_rows(self, x, n):
        """``c(x)`` of one input (1, d) repeated for n rows (a writable copy)."""
        c = self.c(x)
        return np.array(np.broadcast_to(c, (n, c.shape[-1])))

    def start(self, h_prev):
        """The unknown y a solve starts from, for previous states (or starts) h_prev (N, D)."""
        return h_prev.copy()

    def state(self, y, h_prev):
        """The equilibrium state h_eq of the solution y."""
        return y

    def at_step(self, h, h_prev):
        """The unknown y at a step h_prev → h of a trajectory (the point the flow is linearised at)."""
        return h_prev.copy()

    def dF_dhprev(self, Fy):
        """∂F/∂h_prev at the solution, or None when F does not depend on h_prev."""
        return None

    def certify(self, y, c, F=None, J=None):
        """A posteriori certificate that a true root lies near each row of y (F and ∂F at y are
        computed unless given): (certified (N,) bool, radius (N,), NaN where not certified).
        How, is the subclass's ``_certify_rows``."""
        y = np.atleast_2d(y)
        F = self.F(y, c) if F is None else F
        J = self.jac(y, c) if J is None else J
        ok = np.zeros(y.shape[0], dtype=bool)
        radius = np.full(y.shape[0], np.nan)
        self._certify_rows(y, c, F, J, ok, radius)
        return ok, radius


class ResidualMap(_Map):
    """F(y) = γ φ(R y + c) − β y with c = W x + b (module docstring), on row-batched y."""

    field_label = "step(h) − h"
    residual_form = True

    def __init__(self, *, name, R, W, b, gamma, beta, activation, leak, step_size, variable, discrete,
                 equation, eig_label):
        self.name, self.R, self.W, self.b = name, R, W, b
        self.gamma, self.beta, self.activation, self.leak = gamma, beta, activation, leak
        self.step_size, self.variable, self.discrete = step_size, variable, discrete
        self.equation, self.eig_label = equation, eig_label
        self.D = int(R.shape[0])
        #: the backend whose arithmetic computes F and ∂F: NumPy on the host, the reference's
        self.backend = _reference()

    @property
    def smooth(self) -> bool:
        """Whether φ'' exists (the second- and third-order terms of the normal forms)."""
        return self.activation in ("tanh", "sigmoid")

    # ------------------------------------------------------------------ row-batched
    def c(self, x):
        """c = W x + b for row-batched x (N, d) → (N, D)."""
        return np.asarray(x, dtype=np.float64) @ self.W.T + self.b

    def F(self, y, c):
        return self.gamma * phi(self.activation, y @ self.R.T + c, self.leak) - self.beta * y

    def jac(self, y, c):
        """∂F/∂y (N, D, D)."""
        d = dphi(self.activation, y @ self.R.T + c, self.leak)
        J = (self.gamma * d)[:, :, None] * self.R[None]
        idx = np.arange(self.D)
        J[:, idx, idx] -= self.beta
        return J

    def dF_dx(self, y, c):
        """∂F/∂x (N, D, d) = γ ∇φ W."""
        d = dphi(self.activation, y @ self.R.T + c, self.leak)
        return (self.gamma * d)[:, :, None] * self.W[None]

    def _certify_rows(self, y, c, F, J, ok, radius):
        """The certificate (``certify``), into ``ok`` and ``radius``.

        Smooth φ: the Newton–Kantorovich theorem.  With β_K = ‖J(y)⁻¹‖₂, η_K = ‖J(y)⁻¹F(y)‖₂
        and L = γ·sup|φ''|·‖R‖₂² a Lipschitz constant of ∂F, h = β_K L η_K ≤ ½ proves a unique
        root within r = (1 − √(1 − 2h))/(β_K L) of y (r = η_K when L = 0).  Piecewise-affine φ:
        F is affine inside the region where no R y + c changes sign; when the ball of radius
        2η_K about y lies inside it (‖R‖₂·2η_K < min_i |z_i|) the Newton point y − J⁻¹F is an
        exact root within η_K.
        """
        normR = float(np.linalg.norm(self.R, 2))
        for n in range(y.shape[0]):
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
            if self.activation in DPHI_LIPSCHITZ:
                L = self.gamma * DPHI_LIPSCHITZ[self.activation] * normR ** 2
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

    # ------------------------------------------------------------------ one point (continuation)
    # β is an argument: a family over the leak α moves β = γ α with c fixed.
    def c1(self, x, b):
        """c = W x + b of one input (d,) and bias (D,)."""
        return self.W @ x + b

    def c_dx(self, dx):
        """∂c/∂x · dx."""
        return self.W @ dx

    def F1(self, y, c, beta):
        return self.gamma * phi(self.activation, self.R @ y + c, self.leak) - beta * y

    def jac1(self, y, c, beta):
        d = dphi(self.activation, self.R @ y + c, self.leak)
        return (self.gamma * d)[:, None] * self.R - beta * np.eye(self.D)

    def derivs1(self, y, c, beta, dc, leak_family: bool):
        """(F, F_y, F_λ) for c moving along dc (and β = γ λ when ``leak_family``)."""
        z = self.R @ y + c
        d = dphi(self.activation, z, self.leak)
        Fy = (self.gamma * d)[:, None] * self.R - beta * np.eye(self.D)
        Fl = self.gamma * d * dc - (self.gamma * y if leak_family else 0.0)
        return self.gamma * phi(self.activation, z, self.leak) - beta * y, Fy, Fl

    def second1(self, y, c, v, dc, leak_family: bool):
        """(∂(F_y v)/∂y, ∂(F_y v)/∂λ) in closed form."""
        z = self.R @ y + c
        Rv = self.R @ v
        dd = d2phi(self.activation, z, self.leak)
        Jy = (self.gamma * dd * Rv)[:, None] * self.R
        Jl = self.gamma * dd * Rv * dc - (self.gamma * v if leak_family else 0.0)
        return Jy, Jl

    def B1(self, y, c, u, v, beta=None):
        """D²F(y)[u, v] = γ φ''(z) Ru ⊙ Rv."""
        dd = d2phi(self.activation, self.R @ y + c, self.leak)
        return self.gamma * dd * (self.R @ u) * (self.R @ v)

    def C1(self, y, c, u, v, w, beta=None):
        """D³F(y)[u, v, w] = γ φ'''(z) Ru ⊙ Rv ⊙ Rw."""
        d3 = d3phi(self.activation, self.R @ y + c)
        return self.gamma * d3 * (self.R @ u) * (self.R @ v) * (self.R @ w)

    def guess(self, c, beta):
        """A first guess of the root: one Picard step from 0."""
        return phi(self.activation, c, self.leak) * self.gamma / max(beta, 1e-12)


class IRNNMap(ResidualMap):
    """The iRNN's step equilibrium: the unknown is s = h_eq + sign·h_prev, solved from the start
    the inner recursion takes (g_0 = 0 or h_prev)."""

    shifted = True
    leak_alpha = True
    h_prev_role = "previous state h_{m-1}"
    field_label = "the iRNN increment φ(U s + W x + b) − α s"

    def __init__(self, *, sign, g0prev, **kw):
        super().__init__(**kw)
        self.sign, self.g0prev = sign, g0prev

    def start(self, h_prev):
        return (1.0 + self.sign) * h_prev if self.g0prev else self.sign * h_prev

    def state(self, y, h_prev):
        return y - self.sign * h_prev

    def at_step(self, h, h_prev):
        return h + self.sign * h_prev

    def dF_dhprev(self, Fy):
        """G(h_eq, h_prev) = F(h_eq + sign·h_prev) gives ∂G/∂h_prev = sign·F_y (written as such,
        so a test sees −sign·I come out of the implicit-function solve)."""
        return self.sign * Fy


class CTRNNMap(ResidualMap):
    """The CTRNN's equilibria: F = τ⁻¹(−α g + φ(U g + W x + b)), the flow dg/dt itself."""

    field_label = "dg/dt"
    leak_alpha = True


class StepMap(_Map):
    """F(s) = step(s, x) − s on the whole state (module docstring), on row-batched s; c = x."""

    name = "step"
    equation = "s = step(s, x) (F(s) = step(s, x) − s)"
    eig_label = "eigenvalue of ∂step/∂s − I"
    c_has_bias = False
    closed_form_higher = False
    gamma, beta = 1.0, 1.0

    def __init__(self, form, backend=None):
        from ..backends import get_backend

        self.form = form
        self.D = int(form.state_size)
        labels = form.state_labels()
        self.variable = "h" if labels is None or len(set(labels)) == 1 else "s = " + _state_name(labels)
        self.b = None
        self._reference = _reference()
        #: the backend of the step Jacobians (the default one unless given)
        self.backend = get_backend(backend)

    @property
    def smooth(self) -> bool:
        return all(a in ("tanh", "sigmoid", "identity") for a in self.form.activations)

    def step(self, S, X):
        """One step of the update on row-batched (S, X), by the reference backend (as ``Model.step``)."""
        from ..backends import to_numpy

        be = self._reference
        S = np.ascontiguousarray(np.atleast_2d(S), dtype=np.float64)
        X = np.ascontiguousarray(np.atleast_2d(X), dtype=np.float64)
        with be:
            H, _, _ = be.simulate(self.form, X[:, None, :], S, stop=False)
        return to_numpy(H[:, 0])

    def step_jacobian(self, y, c, inputs=False):
        """∂step/∂s (and ∂step/∂x) at row-batched (y, x = c), on ``backend``."""
        from .._validate import as_points

        be = self.backend
        be.require("jacobians", self.form)
        y = as_points(y, self.D, "hprev")
        x = as_points(c, self.form.inputs, "x", y.shape[0])
        with be:
            J, Jx, _ = be.jacobians(self.form, x, y, eta=None, inputs=bool(inputs))
        return (J, Jx) if inputs else J

    # ------------------------------------------------------------------ row-batched
    def c(self, x):
        """The constant input x itself (N, d), which ``step`` reads."""
        return np.array(x, dtype=np.float64, ndmin=2)

    def F(self, y, c):
        return self.step(y, c) - y

    def jac(self, y, c):
        J = np.array(self.step_jacobian(y, c))
        idx = np.arange(self.D)
        J[:, idx, idx] -= 1.0
        return J

    def dF_dx(self, y, c):
        return self.step_jacobian(y, c, inputs=True)[1]

    def _certify_rows(self, y, c, F, J, ok, radius):
        """Newton–Kantorovich for the step maps: L = ``jacobian_lipschitz`` bounds the Lipschitz
        constant of ∂F = ∂step/∂s − I on the ball B(y, ρ), ρ = ``CERT_BALL``; certified when
        h = β_K L η_K ≤ ½ and the root's ball r = (1 − √(1 − 2h))/(β_K L) lies inside B(y, ρ).
        Forms without a derived bound (stacks of more than one layer, non-smooth activations)
        are never certified."""
        from .lipschitz import form_lipschitz

        rho = self.CERT_BALL
        L = form_lipschitz(self.form, y, c, rho)
        if L is None:
            return
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

    # ------------------------------------------------------------------ one point (continuation)
    def c1(self, x, b):
        return x

    def c_dx(self, dx):
        return dx

    def F1(self, y, c, beta):
        return self.step(y[None], c[None])[0] - y

    def jac1(self, y, c, beta):
        return self.step_jacobian(y[None], c[None])[0] - np.eye(self.D)

    def derivs1(self, y, c, beta, dc, leak_family: bool):
        J, Jx = self.step_jacobian(y[None], c[None], inputs=True)
        return self.step(y[None], c[None])[0] - y, J[0] - np.eye(self.D), Jx[0] @ dc

    def B1(self, y, c, u, v, beta=1.0):
        """D²F(y)[u, v] (complex u, v allowed): a central difference of ∂F along u, step
        ``FD_B``/‖u‖ (error ~1e-10)."""
        if np.iscomplexobj(u) or np.iscomplexobj(v):
            u, v = np.asarray(u, complex), np.asarray(v, complex)
            rr, ii = self.B1(y, c, u.real, v.real, beta), self.B1(y, c, u.imag, v.imag, beta)
            ri, ir = self.B1(y, c, u.real, v.imag, beta), self.B1(y, c, u.imag, v.real, beta)
            return (rr - ii) + 1j * (ri + ir)
        n = np.linalg.norm(u)
        if n == 0.0:
            return np.zeros(self.D)
        e = FD_B / n
        return (self.jac1(y + e * u, c, beta) - self.jac1(y - e * u, c, beta)) @ v / (2.0 * e)

    def C1(self, y, c, u, v, w, beta=1.0):
        """D³F(y)[u, v, w] (complex allowed): four Jacobians at ±ε along u and w, ε = ``FD_C``
        relative (error ~1e-8)."""
        args = [np.asarray(a) for a in (u, v, w)]
        if any(np.iscomplexobj(a) for a in args):
            out = 0.0
            # trilinear in (u, v, w): expand each into real and imaginary parts
            for mask in range(8):
                parts, coef = [], 1.0 + 0j
                for k, a in enumerate(args):
                    a = np.asarray(a, complex)
                    if mask >> k & 1:
                        parts.append(a.imag)
                        coef *= 1j
                    else:
                        parts.append(a.real)
                if all(np.any(p) for p in parts):
                    out = out + coef * self.C1(y, c, *parts, beta)
            return out * np.ones(self.D)
        nu, nw = np.linalg.norm(u), np.linalg.norm(w)
        if nu == 0.0 or nw == 0.0:
            return np.zeros(self.D)
        a, b = FD_C / nu, FD_C / nw
        J = self.jac1
        return ((J(y + a * u + b * w, c, beta) - J(y + a * u - b * w, c, beta) - J(y - a * u + b * w, c, beta)
                 + J(y - a * u - b * w, c, beta)) @ v) / (4.0 * a * b)

    def guess(self, c, beta):
        """200 steps of the map from 0 (where it settles, a stable point usually)."""
        y = np.zeros(self.D)
        for _ in range(200):
            y = self.step(y[None], c[None])[0]
        return y

"""The continuous-time RNN (Rosenblatt; iRNN paper eq. 1):  τ ġ = −α g + φ(U g + W x(t) + b).

A discrete sequence x_1..x_T is read as a piecewise-constant input: x(t) = x_m on
((m−1)Δt, mΔt].  ``simulate`` returns h_m = g(mΔt).  Each interval is integrated with
``substeps`` fixed steps of Euler or classical RK4, or by scipy's ``solve_ivp`` (method
"RK45", "DOP853", "Radau", "BDF", "LSODA"; "scipy" means DOP853) at tolerances
``rtol``/``atol`` — the independent reference.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .._validate import as_int, as_matrix, as_scalar
from ..errors import ParameterError
from .base import Model
from .forms import CTRNNForm

FIXED_STEP = ("euler", "rk4")
SCIPY_METHODS = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)  # repr: Model.__repr__
class CTRNN(Model):
    """Continuous-time RNN sampled every ``dt`` time units."""

    U: np.ndarray
    W: np.ndarray
    b: np.ndarray
    tau: float = 1.0
    alpha: float = 1.0
    dt: float = 0.1
    substeps: int = 1
    method: str = "rk4"
    rtol: float = 1e-10
    atol: float = 1e-12
    activation: str = "tanh"
    leak: float = 0.01
    seed: int | None = None
    weight_scale: float | None = None

    name: ClassVar[str] = "ctrnn"
    FORM: ClassVar[type] = CTRNNForm
    PARAMS: ClassVar[tuple[str, ...]] = ("U", "W", "b", "tau", "alpha")
    SETTINGS: ClassVar[tuple[str, ...]] = ("activation", "leak", "dt", "substeps", "method", "rtol", "atol")
    DESCRIPTION: ClassVar[str] = "continuous-time RNN τ dg/dt = −α g + φ(U g + W x(t) + b) (Euler, RK4, scipy)"

    def __post_init__(self):
        D, _ = self._check_common()
        self._set("U", as_matrix(self.U, "U", (D, D)))
        self._set("tau", as_scalar(self.tau, "tau", low=0.0, low_open=True))
        self._set("alpha", as_scalar(self.alpha, "alpha", low=0.0))
        self._set("dt", as_scalar(self.dt, "dt", low=0.0, low_open=True))
        self._set("substeps", as_int(self.substeps, "substeps", low=1))
        self._set("rtol", as_scalar(self.rtol, "rtol", low=0.0, low_open=True))
        self._set("atol", as_scalar(self.atol, "atol", low=0.0, low_open=True))
        method = self.method
        if isinstance(method, str) and method.lower() in FIXED_STEP:
            method = method.lower()
        elif method == "scipy":
            method = "DOP853"
        elif method not in SCIPY_METHODS:
            raise ParameterError("method", f"must be one of {', '.join(FIXED_STEP + SCIPY_METHODS)} or 'scipy', got {self.method!r}")
        self._set("method", method)

    @property
    def time_step(self) -> float:
        return float(self.dt)

    def _make_form(self):
        return CTRNNForm(self.activation, float(self.leak), U=self.U, W=self.W, b=self.b, tau=float(self.tau),
                         alpha=float(self.alpha), dt=float(self.dt), substeps=int(self.substeps),
                         method=self.method, rtol=float(self.rtol), atol=float(self.atol))

    def vector_field(self, g, x):
        """dg/dt = (−α g + φ(U g + W x + b)) / τ for row-batched g (…, D) and x (…, d)
        (the reference's rate, ``dynlab.backends.reference.cells.ctrnn_rate``)."""
        from ..backends.reference.cells import ctrnn_rate
        g = np.asarray(g, dtype=np.float64)
        z = g @ self.U.T + np.asarray(x, dtype=np.float64) @ self.W.T + self.b
        return ctrnn_rate(g, z, self.tau, self.alpha, self.activation, self.leak)

    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, tau=1.0, alpha=1.0, dt=0.1,
               substeps=1, method="rk4", rtol=1e-10, atol=1e-12, activation=None, leak=0.01):
        rng, D, d, seed, ws = cls._rng_and_sizes(hidden, inputs, seed, weight_scale, cls.DEFAULT_WEIGHT_SCALE)
        U, W, b = cls._gaussian_weights(rng, D, d, ws)
        return cls(U, W, b, tau=tau, alpha=alpha, dt=dt, substeps=substeps, method=method, rtol=rtol,
                   atol=atol, activation=activation or cls.DEFAULT_ACTIVATION, leak=leak, seed=seed,
                   weight_scale=ws)

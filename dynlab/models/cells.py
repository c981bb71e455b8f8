"""Gated one-line cells: Elman RNN, FastRNN, AntisymmetricRNN, Recurrent Identity Network.

All four are instances of one update,

    h_t = a · h_{t-1} + c · φ(R h_{t-1} + W x_t + b),

with (a, c, R) = (0, 1, U) for the RNN, (σ(β), σ(α), U) for FastRNN,
(1, ε, M − Mᵀ − γI) for the AntisymmetricRNN and (0, 1, U + I) for the RIN.
``gated_form()`` returns (a, c, R); one kernel simulates them all.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .._validate import as_bool, as_matrix, as_scalar
from ..activations import dphi, sigmoid
from .base import Model
from .forms import CellForm


class _GatedCell(Model):
    """The update h_t = a h_{t-1} + c φ(R h_{t-1} + W x_t + b) of ``gated_form()``."""

    FORM: ClassVar[type] = CellForm

    def _make_form(self):
        a, gain, R = self.gated_form()
        return CellForm(self.activation, float(self.leak), R=R, W=self.W, b=self.b, a=float(a), gain=float(gain))

    def drive(self, X):
        """W x + b for row-batched x: (N, D)."""
        return np.asarray(X, dtype=np.float64) @ self.W.T + self.b


@dataclasses.dataclass(frozen=True, eq=False, repr=False)  # repr: Model.__repr__
class RNN(_GatedCell):
    """Elman RNN, h_t = φ(U h_{t-1} + W x_t + b).

    ``make_model("rnn", ..., identity_init=True)`` gives the IRNN of Le et al. (2015):
    U = weight_scale · I, b = 0, ReLU unless another activation is asked for.
    """

    U: np.ndarray
    W: np.ndarray
    b: np.ndarray
    activation: str = "tanh"
    leak: float = 0.01
    seed: int | None = None
    weight_scale: float | None = None
    init: str = "gaussian"

    name: ClassVar[str] = "rnn"
    PARAMS: ClassVar[tuple[str, ...]] = ("U", "W", "b")
    SETTINGS: ClassVar[tuple[str, ...]] = ("activation", "leak", "init")
    DESCRIPTION: ClassVar[str] = "Elman RNN h_t = φ(U h_{t-1} + W x_t + b); identity_init gives Le et al.'s IRNN"

    def __post_init__(self):
        D, _ = self._check_common()
        self._set("U", as_matrix(self.U, "U", (D, D)))
        if self.init not in ("gaussian", "identity", "given"):
            from ..errors import ParameterError
            raise ParameterError("init", f"must be 'gaussian', 'identity' or 'given', got {self.init!r}")

    def gated_form(self):
        return 0.0, 1.0, self.U

    def pullback(self, g):
        return {"U": g["R"], "W": g["W"], "b": g["b"]}

    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, identity_init=False,
               activation=None, leak=0.01):
        rng, D, d, seed, ws = cls._rng_and_sizes(hidden, inputs, seed, weight_scale, cls.DEFAULT_WEIGHT_SCALE)
        U, W, b = cls._gaussian_weights(rng, D, d, ws)
        identity_init = as_bool(identity_init, "identity_init")
        if identity_init:
            U, b = ws * np.eye(D), np.zeros(D)
            activation = activation or "relu"
        return cls(U, W, b, activation=activation or cls.DEFAULT_ACTIVATION, leak=leak, seed=seed,
                   weight_scale=ws, init="identity" if identity_init else "gaussian")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)  # repr: Model.__repr__
class FastRNN(_GatedCell):
    """FastRNN (Kusupati et al. 2018, EdgeML form):
    h_t = σ(β) h_{t-1} + σ(α) φ(U h_{t-1} + W x_t + b), with α₀ = −3, β₀ = 3.

    ``alpha`` and ``beta`` are the raw (pre-sigmoid) gate parameters.
    """

    U: np.ndarray
    W: np.ndarray
    b: np.ndarray
    alpha: float = -3.0
    beta: float = 3.0
    activation: str = "tanh"
    leak: float = 0.01
    seed: int | None = None
    weight_scale: float | None = None

    name: ClassVar[str] = "fastrnn"
    PARAMS: ClassVar[tuple[str, ...]] = ("U", "W", "b", "alpha", "beta")
    DESCRIPTION: ClassVar[str] = "FastRNN h_t = σ(β) h_{t-1} + σ(α) φ(U h_{t-1} + W x_t + b)"

    def __post_init__(self):
        D, _ = self._check_common()
        self._set("U", as_matrix(self.U, "U", (D, D)))
        self._set("alpha", as_scalar(self.alpha, "alpha"))
        self._set("beta", as_scalar(self.beta, "beta"))

    def gated_form(self):
        return float(sigmoid(self.beta)), float(sigmoid(self.alpha)), self.U

    def pullback(self, g):
        """a = σ(β), γ = σ(α) on the raw gates: β̄ = ā σ'(β), ᾱ = γ̄ σ'(α)."""
        return {"U": g["R"], "W": g["W"], "b": g["b"], "alpha": g["gain"] * float(dphi("sigmoid", self.alpha)),
                "beta": g["a"] * float(dphi("sigmoid", self.beta))}

    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, alpha=-3.0, beta=3.0,
               activation=None, leak=0.01):
        rng, D, d, seed, ws = cls._rng_and_sizes(hidden, inputs, seed, weight_scale, cls.DEFAULT_WEIGHT_SCALE)
        U, W, b = cls._gaussian_weights(rng, D, d, ws)
        return cls(U, W, b, alpha=alpha, beta=beta, activation=activation or cls.DEFAULT_ACTIVATION,
                   leak=leak, seed=seed, weight_scale=ws)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)  # repr: Model.__repr__
class AntisymmetricRNN(_GatedCell):
    """AntisymmetricRNN (Chang et al. 2019), ungated:
    h_t = h_{t-1} + ε φ((M − Mᵀ − γI) h_{t-1} + W x_t + b).

    Every eigenvalue of M − Mᵀ − γI has real part −γ (M − Mᵀ is skew-symmetric).
    """

    M: np.ndarray
    W: np.ndarray
    b: np.ndarray
    eps: float = 0.01
    gamma: float = 0.01
    activation: str = "tanh"
    leak: float = 0.01
    seed: int | None = None
    weight_scale: float | None = None

    name: ClassVar[str] = "antisymmetric"
    #: ε > 0 (kept ≥ 1e-6 by the optimiser's projection), γ ≥ 0.
    TRAIN_LOWER: ClassVar[dict] = {"eps": 1e-6, "gamma": 0.0}
    PARAMS: ClassVar[tuple[str, ...]] = ("M", "W", "b", "eps", "gamma")
    DESCRIPTION: ClassVar[str] = "AntisymmetricRNN h_t = h_{t-1} + ε φ((M − Mᵀ − γI) h_{t-1} + W x_t + b)"

    def __post_init__(self):
        D, _ = self._check_common()
        self._set("M", as_matrix(self.M, "M", (D, D)))
        self._set("eps", as_scalar(self.eps, "eps", low=0.0, low_open=True))
        self._set("gamma", as_scalar(self.gamma, "gamma", low=0.0))

    @property
    def U(self) -> np.ndarray:
        """The effective recurrent matrix M − Mᵀ − γI."""
        return self.M - self.M.T - self.gamma * np.eye(self.hidden)

    def gated_form(self):
        return 1.0, self.eps, self.U

    def pullback(self, g):
        """R = M − Mᵀ − γI, γ_cell = ε: M̄ = R̄ − R̄ᵀ, γ̄ = −tr R̄, ε̄ = γ̄_cell."""
        R = g["R"]
        return {"M": R - R.T, "W": g["W"], "b": g["b"], "eps": g["gain"], "gamma": -float(np.trace(R))}

    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, eps=0.01, gamma=0.01,
               activation=None, leak=0.01):
        rng, D, d, seed, ws = cls._rng_and_sizes(hidden, inputs, seed, weight_scale, cls.DEFAULT_WEIGHT_SCALE)
        M, W, b = cls._gaussian_weights(rng, D, d, ws)
        return cls(M, W, b, eps=eps, gamma=gamma, activation=activation or cls.DEFAULT_ACTIVATION,
                   leak=leak, seed=seed, weight_scale=ws)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)  # repr: Model.__repr__
class RIN(_GatedCell):
    """Recurrent Identity Network: h_t = φ(W x_t + (U + I) h_{t-1} + b), ReLU by default.

    U is initialised small (weight_scale 0.1) so the recurrence starts near the identity.
    """

    U: np.ndarray
    W: np.ndarray
    b: np.ndarray
    activation: str = "relu"
    leak: float = 0.01
    seed: int | None = None
    weight_scale: float | None = None

    name: ClassVar[str] = "rin"
    PARAMS: ClassVar[tuple[str, ...]] = ("U", "W", "b")
    DEFAULT_ACTIVATION: ClassVar[str] = "relu"
    DEFAULT_WEIGHT_SCALE: ClassVar[float] = 0.1
    DESCRIPTION: ClassVar[str] = "Recurrent Identity Network h_t = φ(W x_t + (U + I) h_{t-1} + b)"

    def __post_init__(self):
        D, _ = self._check_common()
        self._set("U", as_matrix(self.U, "U", (D, D)))

    @property
    def recurrent(self) -> np.ndarray:
        return self.U + np.eye(self.hidden)

    def gated_form(self):
        return 0.0, 1.0, self.recurrent

    def pullback(self, g):
        return {"U": g["R"], "W": g["W"], "b": g["b"]}   # R = U + I

    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, activation=None, leak=0.01):
        rng, D, d, seed, ws = cls._rng_and_sizes(hidden, inputs, seed, weight_scale, cls.DEFAULT_WEIGHT_SCALE)
        U, W, b = cls._gaussian_weights(rng, D, d, ws)
        return cls(U, W, b, activation=activation or cls.DEFAULT_ACTIVATION, leak=leak, seed=seed,
                   weight_scale=ws)

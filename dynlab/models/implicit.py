"""Implicit recurrent networks (Sanokowski 2022): the layer's output is an equilibrium.

One layer (paper eq. 3)::

    Y = f(W Y + Q X + T),          Y ∈ R^n, X ∈ R^m

Two layers with feedback (paper §3.2, appendix B), written here with layer 1 the hidden layer
that reads the input and layer 2 the output layer (the paper numbers them the other way round:
its l₂ is our layer 1, its l₁ our layer 2, its R^{l₁l₂} our R)::

    Y1 = f(W Y1 + Q X + R Y2 + T)          (hidden, n units)
    Y2 = f(W2 Y2 + Q2 Y1 + T2)             (output, n2 units)

Both are one fixed point of the stacked state Z = [Y1; Y2] ∈ R^{n+n2}::

    Z = f(A Z + c(X)),   A = [[W, R], [Q2, W2]],   c(X) = [Q X + T; T2]

which is how ``dynlab.analysis.implicit`` solves and differentiates them (``stacked()``).
Batches of inputs are ROWS: X is (N, m), Z is (N, n + n2), so  A Z + c  reads
``Z @ A.T + X @ Q.T + T`` (the convention of every dynlab model).

Random construction follows the paper (§3.1–3.2): Q, T (and Q2, T2) ~ U[−0.5, 0.5]; the
recurrent weights W, W2 and the feedback R ~ N(0, s²/n) with s = ``weight_scale`` (1.0 by
default; ``weight_scale=0`` gives the paper's training initialisation W = W2 = R = 0).
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .._validate import as_int, as_matrix
from ..errors import ParameterError
from .base import Model
from .forms import ImplicitForm

#: Dataset dimensions of each parameter (the Dataset builder reads ``PARAM_DIMS``).
_DIMS = {
    "W": ("unit", "unit_from"), "Q": ("unit", "unit_in"), "T": ("unit",),
    "R": ("unit", "unit_out_from"), "W2": ("unit_out", "unit_out_from"), "Q2": ("unit_out", "unit_from"),
    "T2": ("unit_out",),
}
_LABELS = {
    "W": ("lateral weights W (layer 1)", "1"), "Q": ("input weights Q (layer 1)", "1"),
    "T": ("bias T (layer 1)", "1"), "R": ("feedback weights R (layer 2 → layer 1)", "1"),
    "W2": ("lateral weights W2 (layer 2)", "1"), "Q2": ("feed-forward weights Q2 (layer 1 → layer 2)", "1"),
    "T2": ("bias T2 (layer 2)", "1"),
}
LAYER2 = ("W2", "Q2", "R", "T2")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)  # repr: Model.__repr__
class Implicit(Model):
    """An implicit recurrent network with one layer (``hidden2 == 0``) or two (``hidden2 > 0``)."""

    W: np.ndarray
    Q: np.ndarray
    T: np.ndarray
    W2: np.ndarray | None = None
    Q2: np.ndarray | None = None
    R: np.ndarray | None = None
    T2: np.ndarray | None = None
    activation: str = "sigmoid"
    leak: float = 0.01
    seed: int | None = None
    weight_scale: float | None = None

    name: ClassVar[str] = "implicit"
    PARAMS: ClassVar[tuple[str, ...]] = ("W", "Q", "T", "W2", "Q2", "R", "T2")
    SETTINGS: ClassVar[tuple[str, ...]] = ("activation", "leak")
    DEFAULT_ACTIVATION: ClassVar[str] = "sigmoid"
    DEFAULT_WEIGHT_SCALE: ClassVar[float] = 1.0
    DESCRIPTION: ClassVar[str] = ("implicit network Y = f(W Y + Q X + T) at equilibrium; hidden2 > 0 adds an "
                                  "output layer Y2 = f(W2 Y2 + Q2 Y1 + T2) with feedback R Y2 into layer 1")
    #: not a sequence model: ``simulate`` refuses it with a ParameterError on ``model``
    SEQUENCE: ClassVar[bool] = False
    FORM: ClassVar[type] = ImplicitForm
    PARAM_DIMS: ClassVar[dict] = _DIMS
    PARAM_LABELS: ClassVar[dict] = _LABELS
    REPR_SIZES: ClassVar[tuple[str, ...]] = ("hidden", "hidden2", "inputs")

    def __post_init__(self):
        from .._validate import as_scalar
        from ..activations import check_activation

        self._set("activation", check_activation(self.activation))
        self._set("leak", as_scalar(self.leak, "leak", low=0.0, high=1.0))
        Q = as_matrix(self.Q, "Q", (None, None))
        n, m = Q.shape
        if n < 1 or m < 1:
            raise ParameterError("Q", f"must be non-empty, got shape {Q.shape}")
        self._set("Q", Q)
        self._set("W", as_matrix(self.W, "W", (n, n)))
        self._set("T", as_matrix(self.T, "T", (n,)))
        given = [k for k in LAYER2 if getattr(self, k) is not None]
        if given and len(given) != len(LAYER2):
            missing = [k for k in LAYER2 if k not in given]
            raise ParameterError(missing[0], f"a two-layer network needs all of {', '.join(LAYER2)}; "
                                             f"{', '.join(missing)} missing")
        if given:
            T2 = as_matrix(self.T2, "T2", (None,))
            n2 = T2.shape[0]
            if n2 < 1:
                raise ParameterError("T2", "must be non-empty")
            self._set("T2", T2)
            self._set("W2", as_matrix(self.W2, "W2", (n2, n2)))
            self._set("Q2", as_matrix(self.Q2, "Q2", (n2, n)))
            self._set("R", as_matrix(self.R, "R", (n, n2)))
        if self.seed is not None:
            self._set("seed", as_int(self.seed, "seed", low=0))

    # ----------------------------------------------------------------- sizes
    @property
    def hidden(self) -> int:
        """Units of layer 1 (the layer that reads the input)."""
        return int(self.Q.shape[0])

    @property
    def inputs(self) -> int:
        return int(self.Q.shape[1])

    @property
    def hidden2(self) -> int:
        """Units of the output layer 2 (0: a one-layer network)."""
        return 0 if self.T2 is None else int(self.T2.shape[0])

    @property
    def layers(self) -> int:
        return 1 if self.T2 is None else 2

    @property
    def units(self) -> int:
        """Size of the stacked state Z = [Y1; Y2]."""
        return self.hidden + self.hidden2

    @property
    def outputs(self) -> slice:
        """The slice of Z that is the network's output: all of Y (one layer) or Y2 (two)."""
        return slice(0, self.hidden) if self.layers == 1 else slice(self.hidden, self.units)

    @property
    def recurrent(self) -> np.ndarray:
        return self.stacked()[0]

    def params(self) -> dict:
        return {k: getattr(self, k) for k in self.PARAMS if getattr(self, k) is not None}

    # ------------------------------------------------------------- stacking
    def _make_form(self):
        return ImplicitForm(self.activation, float(self.leak), A=self.stacked()[0])

    def stacked(self) -> tuple[np.ndarray, np.ndarray]:
        """(A, A_ff): the joint matrix A = [[W, R], [Q2, W2]] and its feed-forward part
        A_ff = [[0, 0], [Q2, 0]] (the only path the semi-gradient keeps).  One layer: (W, 0)."""
        if self.layers == 1:
            return np.array(self.W), np.zeros_like(self.W)
        n, n2 = self.hidden, self.hidden2
        A = np.zeros((n + n2, n + n2))
        A[:n, :n], A[:n, n:], A[n:, :n], A[n:, n:] = self.W, self.R, self.Q2, self.W2
        A_ff = np.zeros_like(A)
        A_ff[n:, :n] = self.Q2
        return A, A_ff

    def drive(self, X) -> np.ndarray:
        """c(X) for row-batched inputs X (N, m): rows [Q x + T, T2] of shape (N, n + n2)."""
        X = np.asarray(X, dtype=np.float64)
        c1 = X @ self.Q.T + self.T
        if self.layers == 1:
            return c1
        return np.concatenate([c1, np.broadcast_to(self.T2, c1.shape[:-1] + (self.hidden2,))], axis=-1)

    @classmethod
    def from_stacked(cls, like: "Implicit", A: np.ndarray, Q: np.ndarray, T: np.ndarray,
                     T2: np.ndarray | None = None) -> "Implicit":
        """The model of the same shape and settings as ``like`` with the blocks of A."""
        n = like.hidden
        fields = dict(W=A[:n, :n], Q=Q, T=T)
        if like.layers == 2:
            fields.update(R=A[:n, n:], Q2=A[n:, :n], W2=A[n:, n:], T2=T2)
        return dataclasses.replace(like, **fields)

    # ---------------------------------------------------------------- random
    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, hidden2=0, activation=None, leak=0.01):
        """Paper initialisation: Q, T, Q2, T2 ~ U[−0.5, 0.5]; W, W2, R ~ N(0, s²/n)."""
        rng, n, m, seed, ws = cls._rng_and_sizes(hidden, inputs, seed, weight_scale, cls.DEFAULT_WEIGHT_SCALE)
        n2 = as_int(hidden2, "hidden2", low=0)
        Q = rng.uniform(-0.5, 0.5, (n, m))
        T = rng.uniform(-0.5, 0.5, n)
        W = rng.standard_normal((n, n)) * (ws / np.sqrt(n))
        extra = {}
        if n2:
            extra = dict(Q2=rng.uniform(-0.5, 0.5, (n2, n)), T2=rng.uniform(-0.5, 0.5, n2),
                         W2=rng.standard_normal((n2, n2)) * (ws / np.sqrt(n2)),
                         R=rng.standard_normal((n, n2)) * (ws / np.sqrt(n)))
        return cls(W, Q, T, activation=activation or cls.DEFAULT_ACTIVATION, leak=leak, seed=seed,
                   weight_scale=ws, **extra)

"""Gated recurrent cells with PyTorch's exact equations and gate order: GRU and LSTM.

GRU (``torch.nn.GRU``; gates stacked r, z, n in ``W_ih`` (3D, d), ``W_hh`` (3D, D), ``b_ih``,
``b_hh`` (3D)), with b_hn *inside* the reset product:

    r = σ(W_ir x + b_ir + W_hr h + b_hr)
    z = σ(W_iz x + b_iz + W_hz h + b_hz)
    n = φ(W_in x + b_in + r ⊙ (W_hn h + b_hn))
    h' = (1 − z) ⊙ n + z ⊙ h

LSTM (``torch.nn.LSTM``; gates stacked i, f, g, o in ``W_ih`` (4D, d), ``W_hh`` (4D, D), ``b_ih``,
``b_hh`` (4D)):

    i = σ(W_ii x + b_ii + W_hi h + b_hi),  f = σ(…_f),  g = φ(…_g),  o = σ(…_o)
    c' = f ⊙ c + i ⊙ g,   h' = o ⊙ φ(c')

σ is the logistic sigmoid and φ = tanh in PyTorch.  The gates stay sigmoids (that is what makes
them gates); ``activation`` replaces φ — the GRU's candidate, the LSTM's cell input g and the
squashing of c — for studies that want another nonlinearity (PyTorch has none there to match).

The dynamical state of an LSTM is s = [h; c] ∈ R^{2D}: ``state_size`` is 2D, every analysis
(Jacobians, gradient norms, Lyapunov spectra, fixed points) works on s, and the output h is the
first D entries (``output_slice``).  ``hidden`` is D, PyTorch's ``hidden_size``.

The update and its closed-form Jacobians (the NumPy reference: ``dynlab.backends.reference``;
``Model.step``/``step_jacobian`` evaluate them on row-batched states):

GRU, with a_r, a_z, a_n the pre-activations, q = W_hn h + b_hn, r' = r(1 − r), z' = z(1 − z):

    ∂h'/∂h = diag(1 − z) diag(φ'(a_n)) (diag(r) W_hn + diag(q r') W_hr) + diag(z) + diag((h − n) z') W_hz
    ∂h'/∂x = diag(1 − z) diag(φ'(a_n)) (W_in + diag(q r') W_ir) + diag((h − n) z') W_iz

LSTM, with t = φ(c'):

    ∂c'/∂h = diag(c f') W_hf + diag(g i') W_hi + diag(i φ'(a_g)) W_hg,    ∂c'/∂c = diag(f)
    ∂h'/∂h = diag(t o') W_ho + diag(o φ'(c')) ∂c'/∂h,                  ∂h'/∂c = diag(o φ'(c') f)
    (∂/∂x alike with the W_i· blocks).

Random construction follows PyTorch's: every weight and bias ~ U(−s/√D, s/√D) with
s = ``weight_scale`` (1 by default, PyTorch's own initialisation).
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .._validate import as_matrix
from ..activations import DEFAULT_LEAK, check_activation
from ..errors import ParameterError
from .base import Model
from .forms import GRUForm, LSTMForm


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class _TorchCell(Model):
    """Shared layout of the PyTorch-style cells: G gate blocks of D rows each."""

    W_ih: np.ndarray
    W_hh: np.ndarray
    b_ih: np.ndarray
    b_hh: np.ndarray
    activation: str = "tanh"
    leak: float = DEFAULT_LEAK
    seed: int | None = None
    weight_scale: float | None = None

    GATES: ClassVar[str] = ""
    PARAMS: ClassVar[tuple[str, ...]] = ("W_ih", "W_hh", "b_ih", "b_hh")
    SETTINGS: ClassVar[tuple[str, ...]] = ("activation", "leak")
    PARAM_DIMS: ClassVar[dict] = {"W_ih": ("gate_row", "unit_in"), "W_hh": ("gate_row", "cell_unit"),
                                  "b_ih": ("gate_row",), "b_hh": ("gate_row",)}
    MAP: ClassVar[bool] = True  # a discrete map given by ``step``/``step_jacobian``

    def __post_init__(self):
        from .._validate import as_int, as_scalar

        G = len(self.GATES)
        self._set("activation", check_activation(self.activation))
        self._set("leak", as_scalar(self.leak, "leak", low=0.0, high=1.0))
        W_hh = as_matrix(self.W_hh, "W_hh", (None, None))
        D = W_hh.shape[1]
        if D < 1 or W_hh.shape[0] != G * D:
            raise ParameterError("W_hh", f"must have shape ({G}·D, D) (gates {', '.join(self.GATES)} stacked), "
                                         f"got {W_hh.shape}")
        W_ih = as_matrix(self.W_ih, "W_ih", (G * D, None))
        if W_ih.shape[1] < 1:
            raise ParameterError("W_ih", f"must have at least one input column, got shape {W_ih.shape}")
        self._set("W_hh", W_hh)
        self._set("W_ih", W_ih)
        self._set("b_ih", as_matrix(self.b_ih, "b_ih", (G * D,)))
        self._set("b_hh", as_matrix(self.b_hh, "b_hh", (G * D,)))
        if self.seed is not None:
            self._set("seed", as_int(self.seed, "seed", low=0))

    # ----------------------------------------------------------------- sizes
    @property
    def hidden(self) -> int:
        return int(self.W_hh.shape[1])

    @property
    def inputs(self) -> int:
        return int(self.W_ih.shape[1])

    @property
    def recurrent(self) -> np.ndarray:
        return self.W_hh

    def block(self, name: str, gate: str) -> np.ndarray:
        """The D rows of ``W_ih``/``W_hh``/``b_ih``/``b_hh`` belonging to ``gate``."""
        k = self.GATES.index(gate)
        D = self.hidden
        return getattr(self, name)[k * D:(k + 1) * D]

    def drive(self, X) -> np.ndarray:
        """The input part of every gate's pre-activation, W_ih x + b_ih: (N, G·D)."""
        return np.asarray(X, dtype=np.float64) @ self.W_ih.T + self.b_ih

    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, activation=None, leak=DEFAULT_LEAK):
        rng, D, d, seed, ws = cls._rng_and_sizes(hidden, inputs, seed, weight_scale, cls.DEFAULT_WEIGHT_SCALE)
        G = len(cls.GATES)
        k = ws / np.sqrt(D)
        W_ih = rng.uniform(-k, k, (G * D, d))
        W_hh = rng.uniform(-k, k, (G * D, D))
        b_ih = rng.uniform(-k, k, G * D)
        b_hh = rng.uniform(-k, k, G * D)
        return cls(W_ih, W_hh, b_ih, b_hh, activation=activation or cls.DEFAULT_ACTIVATION, leak=leak, seed=seed,
                   weight_scale=ws)

    def _make_form(self):
        return self.FORM(self.activation, float(self.leak), W_ih=self.W_ih, W_hh=self.W_hh, b_ih=self.b_ih, b_hh=self.b_hh)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GRU(_TorchCell):
    """PyTorch's GRU cell (gates r, z, n; module docstring): h' = (1 − z) ⊙ n + z ⊙ h."""

    name: ClassVar[str] = "gru"
    FORM: ClassVar[type] = GRUForm
    GATES: ClassVar[str] = "rzn"
    DESCRIPTION: ClassVar[str] = ("PyTorch GRU: r, z, n gates, h' = (1 − z) ⊙ n + z ⊙ h, "
                                  "n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LSTM(_TorchCell):
    """PyTorch's LSTM cell (gates i, f, g, o; module docstring) on the state s = [h; c] ∈ R^{2D}."""

    name: ClassVar[str] = "lstm"
    FORM: ClassVar[type] = LSTMForm
    GATES: ClassVar[str] = "ifgo"
    DESCRIPTION: ClassVar[str] = ("PyTorch LSTM: i, f, g, o gates, c' = f ⊙ c + i ⊙ g, h' = o ⊙ tanh(c'); "
                                  "the state is s = [h; c] (2·hidden)")

    @property
    def state_size(self) -> int:
        return 2 * self.hidden

    def state_labels(self):
        return self.form().state_labels()

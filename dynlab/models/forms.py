"""Kernel forms: what a model hands the backends — a kind and its arrays, never itself.

Every sequence model reduces to one of five update rules; ``model.form()`` returns the rule's
frozen record, and the backends (``dynlab.backends``) simulate, differentiate and train on it
without knowing which model class made it:

``CellForm``   the one-line cells,  h_t = a h_{t−1} + γ φ(R h_{t−1} + W x_t + b)
               (RNN: a = 0, γ = 1, R = U;  FastRNN: σ(β), σ(α), U;  AntisymmetricRNN: 1, ε,
               M − Mᵀ − γI;  RIN: 0, 1, U + I).
``IRNNForm``   the incremental RNN (iRNN paper eq. 5), K Euler steps from g_0 ∈ {0, h_{m−1}}:
               g_k = g_{k−1} + η_k (φ(U s_k + W x_m + b) − α s_k),  s_k = g_{k−1} + σ h_{m−1},
               h_m = g_K  (σ = ``sign``; the paper's eq. 9 hands the same rule with U, W, b
               pre-multiplied by P).
``CTRNNForm``  τ ġ = −α g + φ(U g + W x + b), x held over each interval Δt; fixed-step Euler or
               RK4 (``substeps`` per interval), or scipy's ``solve_ivp`` (``method``).
``GRUForm``, ``LSTMForm``  PyTorch's equations and gate order (``dynlab.models.gru_lstm``); the
               LSTM's state is s = [h; c].
``StackForm``  layers in order, layer ℓ > 1 reading layer ℓ − 1's output; the state is the
               concatenation of the layers' states.

A form's arrays are float64, C-contiguous and read-only; its scalars are Python floats and ints
(the settings, typed: an iRNN's ``K`` is an int field, never read back with ``getattr``).
``kind`` names the rule, ``state_size`` the size n of the state every analysis works on.

What the analyses ask of a form instead of branching on its kind:

``fixed_point_map()``  the function F whose zeros the equilibrium, fixed-point, continuation and
               convergence analyses solve, with ∂F/∂y (``dynlab.models.fixed_point``);
``gates``, ``inner_steps``  its cost per step: weight blocks per layer (GRU 3, LSTM 4, else 1)
               and inner iterations per step (the iRNN's K, else 1) — what the memory and work
               estimates of ``dynlab._resources`` multiply by;
``state_labels()``  what each entry of the state is (None when it is the hidden state h).
"""
from __future__ import annotations

import dataclasses
import typing

import numpy as np

from ..activations import ACTIVATION_IDS


class StepCost(typing.NamedTuple):
    """The cost of one step of a form: ``gates`` weight blocks per layer (PyTorch's gate blocks:
    GRU 3, LSTM 4, else 1) and ``inner_steps`` inner iterations (an iRNN's K, else 1)."""

    gates: int
    inner_steps: int


def frozen_array(a) -> np.ndarray:
    """``a`` as a read-only C-contiguous float64 array (no copy when it already is one)."""
    v = np.ascontiguousarray(a, dtype=np.float64)
    if v.flags.writeable:
        v = v.view()
        v.flags.writeable = False
    return v


@dataclasses.dataclass(frozen=True, eq=False)
class _Form:
    act: str
    leak: float

    kind = "form"
    #: weight blocks per layer (PyTorch's gate blocks: GRU 3, LSTM 4), a cost per step
    gates = 1
    #: the array multiplying the previous state (its columns are the hidden units)
    recurrent = ""
    #: the array multiplying the input (its columns are the input features)
    input_weights = "W"

    @property
    def hidden(self) -> int:
        return int(getattr(self, self.recurrent).shape[1])

    @property
    def inputs(self) -> int:
        return int(getattr(self, self.input_weights).shape[1])

    @property
    def act_id(self) -> int:
        """The activation's integer id (``dynlab.activations.ACTIVATION_IDS``), for jitted kernels."""
        return ACTIVATION_IDS[self.act]

    @property
    def state_size(self) -> int:
        return self.hidden

    @property
    def output(self) -> slice:
        """The entries of the state that are the cell's output h (what the next layer reads)."""
        return slice(0, self.hidden)

    @property
    def inner_steps(self) -> int:
        """Inner iterations per step (the iRNN's K), a cost per step."""
        return 1

    @property
    def time_rows(self) -> int:
        """Rows of the per-time parameter tables: 1 when the rule is the same at every step (an
        iRNN whose η varies over time: its T rows)."""
        return 1

    @property
    def cost(self) -> StepCost:
        """The cost of one step (``StepCost``)."""
        return StepCost(int(self.gates), int(self.inner_steps))

    @classmethod
    def cost_of(cls, model) -> StepCost:
        """``cost`` of the form ``model`` would make, without making it (``Model.step_cost``)."""
        return StepCost(int(cls.gates), 1)

    @property
    def activations(self) -> tuple:
        """The activation of every layer."""
        return (self.act,)

    def state_labels(self):
        """What each entry of the state is (``("h", …, "c", …)`` for an LSTM), or None when the
        state is the hidden state h itself."""
        return None

    def fixed_point_map(self, backend=None):
        """The function whose zeros the equilibrium analyses solve (``dynlab.models.fixed_point``);
        ``backend``: where a step map's Jacobians run (None: the default backend)."""
        from ..errors import ParameterError
        raise ParameterError("model", f"equilibria are not defined for a {self.kind} form")

    def reachable_box(self, x_lo, x_hi):
        """(lo, hi, out_lo, out_hi, words): the box of states a trajectory can reach at constant
        inputs in [x_lo, x_hi], of the output the layer above reads, and the rule in words
        (``dynlab.models.boxes``; ``dynlab.analysis.reachable`` states the table); by default the
        whole space."""
        from . import boxes
        lo, hi, words = boxes.unbounded(self, f"unbounded ({self.kind})")
        return lo, hi, lo, hi, words

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                object.__setattr__(self, f.name, frozen_array(v))


@dataclasses.dataclass(frozen=True, eq=False)
class CellForm(_Form):
    """h_t = a h_{t−1} + γ φ(R h_{t−1} + W x_t + b)."""

    R: np.ndarray
    W: np.ndarray
    b: np.ndarray
    a: float
    gain: float

    kind = "cell"
    recurrent = "R"

    def fixed_point_map(self, backend=None):
        """h = step(h, x): F(h) = γ φ(R h + c) − (1 − a) h, a fixed point of the map."""
        from .fixed_point import ResidualMap
        return ResidualMap(name="map", R=self.R, W=self.W, b=self.b, gamma=float(self.gain), beta=1.0 - float(self.a),
                           activation=self.act, leak=self.leak, step_size=1.0, variable="h", discrete=True,
                           equation="h = step(h, x)", eig_label="eigenvalue of ∂step/∂h − I")

    def reachable_box(self, x_lo, x_hi):
        """hull(0, range φ)·γ/(1 − a) (``boxes.cell_box``), whatever the input."""
        from . import boxes
        lo, hi, words = boxes.cell_box(self)
        return lo, hi, lo, hi, words


@dataclasses.dataclass(frozen=True, eq=False)
class IRNNForm(_Form):
    """K Euler steps of the iRNN; ``eta`` is the (rows, K) table of η_k, rows = 1 (shared over
    time) or one per time step."""

    U: np.ndarray
    W: np.ndarray
    b: np.ndarray
    eta: np.ndarray
    alpha: float
    K: int
    g0prev: bool
    sign: float

    kind = "irnn"
    recurrent = "U"

    @property
    def inner_steps(self) -> int:
        return self.K

    @property
    def time_rows(self) -> int:
        return int(self.eta.shape[0])

    @classmethod
    def cost_of(cls, model) -> StepCost:
        return StepCost(1, int(model.K))

    def fixed_point_map(self, backend=None):
        """The step equilibrium α s = φ(U s + W x + b), s = h_eq + sign·h_prev: F is the iRNN's
        own increment; the natural Euler step is η (its mean when η varies with k or time)."""
        from .fixed_point import IRNNMap
        eta = self.eta
        step = float(eta.ravel()[0]) if eta.size == 1 or np.all(eta == eta.ravel()[0]) else float(eta.mean())
        return IRNNMap(name="irnn", R=self.U, W=self.W, b=self.b, gamma=1.0, beta=float(self.alpha),
                       activation=self.act, leak=self.leak, step_size=step, variable="s = h_eq + sign·h_prev",
                       discrete=False, equation="α s = φ(U s + W x + b), s = h_eq + sign·h_prev",
                       eig_label="eigenvalue of ∇φ·U − αI", sign=self.sign, g0prev=self.g0prev)

    def reachable_box(self, x_lo, x_hi):
        """hull(0, range φ)/α in s (``boxes.alpha_box``): the roots of the step equation."""
        from . import boxes
        lo, hi, words = boxes.alpha_box(self)
        return lo, hi, lo, hi, words

    def eta_rows(self, t: np.ndarray) -> np.ndarray:
        """η for 0-based time indices ``t``: an (N, K) table."""
        if self.eta.shape[0] == 1:
            return np.ascontiguousarray(np.broadcast_to(self.eta, (len(t), self.K)))
        return np.ascontiguousarray(self.eta[np.asarray(t, dtype=np.int64)])


@dataclasses.dataclass(frozen=True, eq=False)
class CTRNNForm(_Form):
    """τ ġ = −α g + φ(U g + W x + b) over intervals of length ``dt``."""

    U: np.ndarray
    W: np.ndarray
    b: np.ndarray
    tau: float
    alpha: float
    dt: float
    substeps: int
    method: str
    rtol: float
    atol: float

    kind = "ctrnn"
    recurrent = "U"

    def fixed_point_map(self, backend=None):
        """The flow's equilibria: F = τ⁻¹(−α g + φ(U g + W x + b)); the natural Euler step is τ."""
        from .fixed_point import CTRNNMap
        return CTRNNMap(name="ctrnn", R=self.U, W=self.W, b=self.b, gamma=1.0 / self.tau, beta=self.alpha / self.tau,
                        activation=self.act, leak=self.leak, step_size=float(self.tau), variable="g",
                        discrete=False, equation="0 = −α g + φ(U g + W x + b)",
                        eig_label="eigenvalue of (∇φ·U − αI)/τ")

    def reachable_box(self, x_lo, x_hi):
        """hull(0, range φ)/α (``boxes.alpha_box``): the flow's invariant box."""
        from . import boxes
        lo, hi, words = boxes.alpha_box(self)
        return lo, hi, lo, hi, words

    @property
    def fixed_step(self) -> bool:
        """Euler or RK4 with fixed steps (else scipy's adaptive ``solve_ivp``)."""
        return self.method in ("euler", "rk4")


@dataclasses.dataclass(frozen=True, eq=False)
class _GatedForm(_Form):
    """PyTorch's gate blocks: W_ih (G·D, d), W_hh (G·D, D), b_ih, b_hh (G·D)."""

    W_ih: np.ndarray
    W_hh: np.ndarray
    b_ih: np.ndarray
    b_hh: np.ndarray

    recurrent = "W_hh"
    input_weights = "W_ih"

    def fixed_point_map(self, backend=None):
        """s = step(s, x) on the whole state (``dynlab.models.fixed_point.StepMap``)."""
        from .fixed_point import StepMap
        return StepMap(self, backend)


@dataclasses.dataclass(frozen=True, eq=False)
class GRUForm(_GatedForm):
    """PyTorch's GRU (gates r, z, n)."""

    kind = "gru"
    gates = 3

    def reachable_box(self, x_lo, x_hi):
        from . import boxes
        return boxes.gru_box(self, x_lo, x_hi)


@dataclasses.dataclass(frozen=True, eq=False)
class LSTMForm(_GatedForm):
    """PyTorch's LSTM (gates i, f, g, o); the state is s = [h; c]."""

    kind = "lstm"
    gates = 4

    def reachable_box(self, x_lo, x_hi):
        from . import boxes
        return boxes.lstm_box(self, x_lo, x_hi)

    @property
    def state_size(self) -> int:
        return 2 * self.hidden

    def state_labels(self):
        return ("h",) * self.hidden + ("c",) * self.hidden


@dataclasses.dataclass(frozen=True, eq=False)
class StackForm:
    """Layers in order; layer ℓ > 1 reads layer ℓ − 1's output at the same step."""

    layers: tuple

    kind = "stack"

    @property
    def hidden(self) -> int:
        return self.layers[0].hidden

    @property
    def gates(self) -> int:
        """The layers' weight blocks (alike layers: the first one's)."""
        return self.layers[0].gates

    @property
    def inner_steps(self) -> int:
        return 1

    def reachable_box(self, x_lo, x_hi):
        """Each layer's box, its input (x, then the layer below's output) bounded by the box below."""
        los, his, rules = [], [], []
        out_lo, out_hi = x_lo, x_hi
        for layer in self.layers:
            lo, hi, out_lo, out_hi, words = layer.reachable_box(out_lo, out_hi)
            los.append(lo)
            his.append(hi)
            rules.append(f"{layer.kind}: {words}")
        return np.concatenate(los), np.concatenate(his), out_lo, out_hi, "; ".join(rules)

    time_rows = _Form.time_rows
    cost = _Form.cost

    @classmethod
    def cost_of(cls, model) -> StepCost:
        return StepCost(model.layers[0].step_cost().gates, 1)

    @property
    def activations(self) -> tuple:
        return tuple(a for f in self.layers for a in f.activations)

    def state_labels(self):
        """Each layer's labels with its 1-based index ("h1", "c1", "h2", …)."""
        out = []
        for ell, f in enumerate(self.layers, start=1):
            own = f.state_labels() or ("h",) * f.state_size
            out.extend(f"{p}{ell}" for p in own)
        return tuple(out)

    def fixed_point_map(self, backend=None):
        """s = step(s, x) on the concatenated state (``dynlab.models.fixed_point.StepMap``)."""
        from .fixed_point import StepMap
        return StepMap(self, backend)

    @property
    def inputs(self) -> int:
        return self.layers[0].inputs

    @property
    def offsets(self) -> np.ndarray:
        """Where each layer's state starts in the concatenated state (L + 1 entries)."""
        return np.concatenate([[0], np.cumsum([f.state_size for f in self.layers])]).astype(np.int64)

    @property
    def state_size(self) -> int:
        return int(sum(f.state_size for f in self.layers))

    @property
    def output(self) -> slice:
        """The top layer's output inside the concatenated state."""
        o = int(self.offsets[-2])
        top = self.layers[-1].output
        return slice(o + top.start, o + top.stop)


@dataclasses.dataclass(frozen=True, eq=False)
class ImplicitForm(_Form):
    """An implicit network's stacked equilibrium Z = f(Z Aᵀ + C) (``dynlab.models.implicit``):
    A (U, U) the joint matrix, ``drive`` C = the inputs' part, computed by the model."""

    A: np.ndarray

    kind = "implicit"
    recurrent = "A"
    input_weights = ""


#: Every sequence form, by kind.
FORMS = {f.kind: f for f in (CellForm, IRNNForm, CTRNNForm, GRUForm, LSTMForm, StackForm)}

"""A stack of discrete recurrent layers (``torch.nn.RNN``/``GRU``/``LSTM`` with ``num_layers`` > 1).

Layer 1 reads the input x_t; layer ℓ > 1 reads layer ℓ − 1's output at the same step (PyTorch's
multi-layer semantics, no dropout):

    s^(1)_t = step_1(s^(1)_{t-1}, x_t),   s^(ℓ)_t = step_ℓ(s^(ℓ)_{t-1}, out(s^(ℓ−1)_t)).

The dynamical state is the concatenation s = [s^(1); …; s^(L)] (an LSTM layer contributes
[h; c]), so the top layer's output comes last; every analysis runs on s.  Its one-step Jacobian
is block lower triangular,

    ∂s^(ℓ)_t/∂s_{t-1} = [0 … J_ℓ … 0] + Jx_ℓ P_{ℓ−1} ∂s^(ℓ−1)_t/∂s_{t-1},

with J_ℓ, Jx_ℓ the layer's own state and input Jacobians and P_{ℓ−1} the selection of layer
ℓ − 1's output (``output_slice``).  Layers: ``rnn`` (and the other one-line cells), ``gru``,
``lstm`` — any model with ``step``/``step_jacobian``.

Parameters are stored per layer under ``layer{ℓ}_`` (``layer2_W_hh``); the dimensions of a
layer's matrices are renamed so they cannot clash with the stack's state dimension ``unit``
(``cell_unit``, ``cell_unit_from``, ``gate_row``).
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .._validate import as_int
from ..errors import ParameterError
from .base import Model
from .forms import StackForm

#: Layer kinds ``make_model("stack", …, cell=…)`` builds.
CELLS = ("rnn", "gru", "lstm")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Stack(Model):
    """L ≥ 1 discrete recurrent layers; layer ℓ > 1 reads layer ℓ − 1's output (module docstring).

    Example
    -------
    >>> m = make_model("stack", 16, 3, cell="lstm", layers=2, seed=0)
    >>> m.state_size          # [h1; c1; h2; c2]
    64
    """

    layers: tuple
    seed: int | None = None
    weight_scale: float | None = None

    name: ClassVar[str] = "stack"
    FORM: ClassVar[type] = StackForm
    SETTINGS: ClassVar[tuple[str, ...]] = ("cell", "n_layers")
    MAP: ClassVar[bool] = True
    DESCRIPTION: ClassVar[str] = ("stack of rnn/gru/lstm layers (PyTorch num_layers > 1): layer ℓ reads layer ℓ−1's "
                                  "output; the state is every layer's state, the top layer's last")

    def __post_init__(self):
        layers = tuple(self.layers) if isinstance(self.layers, (list, tuple)) else ()
        if not layers:
            raise ParameterError("layers", "must be a non-empty sequence of recurrent layers")
        for i, m in enumerate(layers):
            if not isinstance(m, Model):
                raise ParameterError("layers", f"layer {i + 1} must be a discrete cell with a step map "
                                               f"(rnn, gru, lstm, …), got {type(m).__name__}")
            kind = m.form().kind if m.SEQUENCE else m.name
            if kind == "stack":
                raise ParameterError("layers", f"layer {i + 1} is itself a stack; give its layers instead")
            if kind not in ("cell", "gru", "lstm"):
                raise ParameterError("layers", f"layer {i + 1} must be a discrete cell with a step map "
                                               f"(rnn, gru, lstm, …), got {m.name}")
        kinds = {(type(m), m.hidden) for m in layers}
        if len(kinds) > 1:
            raise ParameterError("layers", "every layer must be of one kind and one hidden size (as in "
                                           "PyTorch's multi-layer modules), got "
                                           + ", ".join(f"{m.name}({m.hidden})" for m in layers))
        for i in range(1, len(layers)):
            want = layers[i - 1].hidden
            if layers[i].inputs != want:
                raise ParameterError("layers", f"layer {i + 1} takes {layers[i].inputs} inputs but layer {i} "
                                               f"outputs {want}")
        self._set("layers", layers)
        if self.seed is not None:
            self._set("seed", as_int(self.seed, "seed", low=0))

    # ----------------------------------------------------------------- sizes
    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def hidden(self) -> int:
        """The top layer's hidden size (the size of the network's output)."""
        return self.layers[-1].hidden

    @property
    def inputs(self) -> int:
        return self.layers[0].inputs

    @property
    def activation(self) -> str:
        acts = [m.activation for m in self.layers]
        return acts[0] if len(set(acts)) == 1 else ",".join(acts)

    @property
    def leak(self) -> float:
        return self.layers[0].leak

    @property
    def cell(self) -> str:
        names = [m.name for m in self.layers]
        return names[0] if len(set(names)) == 1 else ",".join(names)

    @property
    def offsets(self) -> np.ndarray:
        """Where each layer's state starts in s (length L + 1; the last entry is ``state_size``)."""
        return np.concatenate([[0], np.cumsum([m.state_size for m in self.layers])]).astype(np.int64)

    @property
    def state_size(self) -> int:
        return int(self.offsets[-1])

    def state_labels(self):
        return self.form().state_labels()

    @property
    def output_slice(self) -> slice:
        top = self.layers[-1].output_slice
        o = int(self.offsets[-2])
        return slice(o + top.start, o + top.stop)

    # ---------------------------------------------------------- parameters
    def params(self) -> dict:
        out = {}
        for ell, m in enumerate(self.layers, start=1):
            out.update({f"layer{ell}_{k}": v for k, v in m.params().items()})
        return out

    def settings(self) -> dict:
        out = {"cell": self.cell, "n_layers": self.n_layers, "activation": self.activation}
        for ell, m in enumerate(self.layers, start=1):
            out.update({f"layer{ell}_{k}": v for k, v in m.settings().items()})
        return out

    @property
    def PARAM_DIMS(self) -> dict:  # noqa: N802  (read like the class attribute of the other models)
        """Per-layer dimension names that cannot clash with the stack's state dimension ``unit``."""
        from .._dataset import _dims_of

        out = {}
        for ell, m in enumerate(self.layers, start=1):
            own = getattr(m, "PARAM_DIMS", {})
            for k, v in m.params().items():
                dims = own.get(k) or _dims_of(k, np.asarray(v))
                ren = {"unit": "cell_unit", "unit_from": "cell_unit_from"}
                if ell > 1:
                    ren["unit_in"] = "cell_unit_from" if "cell_unit" not in dims and "unit" in dims else "cell_unit"
                out[f"layer{ell}_{k}"] = tuple(ren.get(d, d) for d in dims)
        return out

    def replace(self, **changes) -> "Stack":
        """A copy with some fields changed; ``layer{ℓ}_<param>`` keys change one layer's parameter."""
        layered = {k: v for k, v in changes.items() if k.startswith("layer") and "_" in k}
        rest = {k: v for k, v in changes.items() if k not in layered}
        layers = list(self.layers)
        for key, value in layered.items():
            head, _, param = key.partition("_")
            ell = int(head[5:]) - 1
            layers[ell] = layers[ell].replace(**{param: value})
        return dataclasses.replace(self, layers=tuple(layers), **rest)

    # -------------------------------------------------------------- the map
    def _make_form(self):
        return StackForm(tuple(layer.form() for layer in self.layers))

    def pullback(self, g):
        """Each layer's own pullback, under its ``layer{ℓ}_`` names."""
        out = {}
        for ell, layer in enumerate(self.layers, start=1):
            head = f"layer{ell}_"
            mine = layer.pullback({k[len(head):]: v for k, v in g.items() if k.startswith(head)})
            out.update({head + k: v for k, v in mine.items()})
        return {k: out[k] for k in self.params()}

    def with_params(self, params):
        """``layer{ℓ}_<name>`` keys replace that layer's parameter (each layer validated as a model)."""
        names = self.params()
        layers = list(self.layers)
        for ell, layer in enumerate(layers, start=1):
            head = f"layer{ell}_"
            mine = {k[len(head):]: v for k, v in params.items() if k.startswith(head) and k in names}
            if mine:
                layers[ell - 1] = layer.with_params(mine)
        return dataclasses.replace(self, layers=tuple(layers))

    def split(self, S) -> list:
        o = self.offsets
        return [S[:, o[i]:o[i + 1]] for i in range(self.n_layers)]

    # ---------------------------------------------------------------- random
    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, cell="gru", layers=2, activation=None,
               leak=None, identity_init=False):
        """L random layers of one cell kind: layer ℓ is ``make_model(cell, hidden, d_ℓ, seed=seed + ℓ − 1,
        …)`` with d_1 = inputs and d_ℓ = hidden above (``identity_init``: rnn layers only, Le et
        al.'s U = s·I, b = 0, ReLU)."""
        from .._validate import as_bool
        from .cells import RNN
        from .gru_lstm import GRU, LSTM

        L = as_int(layers, "layers", low=1)
        cell = str(cell).strip().lower()
        if cell not in CELLS:
            raise ParameterError("cell", f"must be one of {', '.join(CELLS)}, got {cell!r}")
        kind = {"rnn": RNN, "gru": GRU, "lstm": LSTM}[cell]
        if seed is not None:
            seed = as_int(seed, "seed", low=0)
        extra = {} if activation is None else {"activation": activation}
        if leak is not None:
            extra["leak"] = leak
        if as_bool(identity_init, "identity_init"):
            if cell != "rnn":
                raise ParameterError("identity_init", f"applies to rnn layers, not {cell}")
            extra["identity_init"] = True
        built = []
        d = inputs
        for ell in range(L):
            m = kind.random(hidden, d, seed=None if seed is None else seed + ell, weight_scale=weight_scale, **extra)
            built.append(m)
            d = m.hidden
        return cls(tuple(built), seed=seed, weight_scale=built[0].weight_scale)

    def __repr__(self) -> str:
        """One line, in the style of every model's: sizes, settings, then each layer's arrays by
        shape under ``layer{ℓ}_`` (``Stack(hidden=16, inputs=3, cell='lstm', n_layers=2, …,
        layer1_W_ih=<array 64×3>, …)``)."""
        from .._repr import value

        head = [f"hidden={self.hidden}", f"inputs={self.inputs}", f"state_size={self.state_size}",
                f"cell={self.cell!r}", f"n_layers={self.n_layers}", f"activation={self.activation!r}",
                f"seed={self.seed}", f"weight_scale={self.weight_scale}"]
        arrays = [f"{k}={value(v)}" for k, v in self.params().items()]
        return f"Stack({', '.join(head + arrays)})"

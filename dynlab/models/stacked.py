"""A stack of Elman RNN layers (MASO paper eq. 1, L layers).

    h^(ℓ,t) = φ(W^(ℓ) h^(ℓ−1,t) + U^(ℓ) h^(ℓ,t−1) + b^(ℓ)),   h^(0,t) := x_t,   ℓ = 1..L,

so layer ℓ > 1 takes layer ℓ−1's state *at the same step* as its input.  Each layer is an
ordinary ``RNN`` (so the one-layer ``rnn`` model, its kernels and its Jacobians are untouched);
a stack is simulated layer by layer with the existing kernels.  ``StackedRNN`` is not in the
``MODELS`` registry (``simulate``/``gradients`` take one-layer models); the MASO partition
analyses (``dynlab.analysis.partition``) and ``dynlab partition --layers L`` take it.

Every layer has the same hidden size D (so codes and states share a (unit, layer) grid).
"""
from __future__ import annotations

import dataclasses

from .._validate import as_int
from ..errors import ParameterError
from .cells import RNN


@dataclasses.dataclass(frozen=True, eq=False)
class StackedRNN:
    """L ≥ 1 ``RNN`` layers of equal hidden size; layer 1 reads x, layer ℓ reads h^(ℓ−1).

    Parameters
    ----------
    layers : tuple of RNN
        ``layers[0].inputs`` is d; every later layer has ``inputs == hidden == layers[0].hidden``.

    Example
    -------
    >>> m = StackedRNN.random(8, 1, layers=2, activation="relu", seed=0)
    >>> m.layers[1].W.shape
    (8, 8)
    """

    layers: tuple

    name = "stacked-rnn"

    def __post_init__(self):
        layers = tuple(self.layers) if isinstance(self.layers, (list, tuple)) else None
        if not layers:
            raise ParameterError("layers", "must be a non-empty sequence of RNN models")
        for i, m in enumerate(layers):
            if not isinstance(m, RNN):
                raise ParameterError("layers", f"layer {i + 1} must be an RNN (dynlab.RNN), got {type(m).__name__}")
        D = layers[0].hidden
        for i, m in enumerate(layers[1:], start=2):
            if m.hidden != D or m.inputs != D:
                raise ParameterError("layers", f"layer {i} must have hidden = inputs = {D} (the size of layer "
                                               f"{i - 1}), got hidden={m.hidden}, inputs={m.inputs}")
        object.__setattr__(self, "layers", layers)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def hidden(self) -> int:
        return self.layers[0].hidden

    @property
    def inputs(self) -> int:
        return self.layers[0].inputs

    @property
    def activation(self) -> str:
        """The activation when all layers share it, else the comma-joined list."""
        acts = [m.activation for m in self.layers]
        return acts[0] if len(set(acts)) == 1 else ",".join(acts)

    @property
    def seed(self):
        return self.layers[0].seed

    def __repr__(self) -> str:
        """One line: ``StackedRNN(layers=2, hidden=8, inputs=1, activation='relu', seed=0,
        weight_scale=1.0)`` (the seed and weight scale of layer 1; layer ℓ used seed + ℓ − 1)."""
        from .._repr import value

        first = self.layers[0]
        return (f"StackedRNN(layers={self.n_layers}, hidden={self.hidden}, inputs={self.inputs}, "
                f"activation={self.activation!r}, seed={value(first.seed)}, weight_scale={value(first.weight_scale)})")

    @classmethod
    def random(cls, hidden: int, inputs: int, *, layers: int = 2, seed: int | None = None,
               weight_scale: float | None = None, identity_init: bool = False, activation: str | None = None,
               leak: float = 0.01) -> "StackedRNN":
        """L random layers built like ``make_model("rnn", ...)``.

        Layer 1 is exactly ``make_model("rnn", hidden, inputs, seed=seed, ...)``; layer ℓ ≥ 2 is
        ``make_model("rnn", hidden, hidden, seed=seed + ℓ − 1, ...)`` (W ~ N(0, 1/D)); with
        ``seed=None`` every layer is drawn from fresh entropy.
        """
        L = as_int(layers, "layers", low=1)
        if seed is not None:
            seed = as_int(seed, "seed", low=0)
        out = []
        for ell in range(L):
            s = None if seed is None else seed + ell
            out.append(RNN.random(hidden, inputs if ell == 0 else hidden, seed=s, weight_scale=weight_scale,
                                  identity_init=identity_init, activation=activation, leak=leak))
        return cls(tuple(out))

"""``StackedRNN``: deprecated — a ``dynlab.Stack`` of ``rnn`` layers is the one stack type.

A stack of Elman RNN layers (MASO paper eq. 1, L layers),

    h^(ℓ,t) = φ(W^(ℓ) h^(ℓ−1,t) + U^(ℓ) h^(ℓ,t−1) + b^(ℓ)),   h^(0,t) := x_t,   ℓ = 1..L,

is ``make_model("stack", D, d, cell="rnn", layers=L, …)`` or ``Stack(layers)``; every analysis
(the MASO partition analyses included) takes it.  ``StackedRNN`` remains for one release as a
subclass of ``Stack`` that warns when used; it will be removed in dynlab 0.3 (``dynlab._deprecate``).
"""
from __future__ import annotations

import dataclasses
import warnings

from .._deprecate import REMOVED_IN
from .stack import Stack

_MESSAGE = ("dynlab.StackedRNN is deprecated: use dynlab.Stack (make_model('stack', D, d, cell='rnn', "
            f"layers=L, ...)), the one stack type; StackedRNN will be removed in dynlab {REMOVED_IN}")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class StackedRNN(Stack):
    """Deprecated: a ``Stack`` of ``rnn`` layers (module docstring)."""

    def __post_init__(self):
        warnings.warn(_MESSAGE, DeprecationWarning, stacklevel=3)
        super().__post_init__()

    @classmethod
    def random(cls, hidden: int, inputs: int, *, layers: int = 2, seed: int | None = None,
               weight_scale: float | None = None, identity_init: bool = False, activation: str | None = None,
               leak: float = 0.01) -> Stack:
        """Deprecated: ``Stack.random(hidden, inputs, cell="rnn", …)``."""
        warnings.warn(_MESSAGE, DeprecationWarning, stacklevel=2)
        return Stack.random(hidden, inputs, cell="rnn", layers=layers, seed=seed, weight_scale=weight_scale,
                            identity_init=identity_init, activation=activation, leak=leak)

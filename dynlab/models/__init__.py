"""The model zoo: frozen parameter dataclasses and the registry keyed by name."""
from __future__ import annotations

import functools
import inspect

from ..errors import ParameterError
from .base import Model
from .cells import RIN, RNN, AntisymmetricRNN, FastRNN
from .ctrnn import CTRNN
from .gru_lstm import GRU, LSTM
from .implicit import Implicit
from .irnn import IRNN
from .stack import Stack

#: name → model class; ``make_model`` and the CLI's ``--model`` read this.
MODELS: dict[str, type[Model]] = {cls.name: cls for cls in (RNN, FastRNN, AntisymmetricRNN, RIN, IRNN, CTRNN,
                                                                  Implicit, GRU, LSTM, Stack)}


def get_model_class(name: str, param: str = "model") -> type[Model]:
    """The class registered under ``name`` (case-insensitive), or a ParameterError."""
    key = str(name).strip().lower()
    if key not in MODELS:
        raise ParameterError(param, f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return MODELS[key]


def gates_of(name: str, settings: dict | None = None) -> int:
    """Weight blocks per layer of the model ``make_model(name, …, **settings)`` builds, before it
    is built: its form class's ``gates`` (GRU 3, LSTM 4, else 1; a stack's layers are of its
    setting ``cell``); 1 for a name that is no model (the model's own check names it)."""
    key = str(name).strip().lower()
    if key == "stack":
        key = str((settings or {}).get("cell", "rnn")).strip().lower()
    cls = MODELS.get(key)
    form = None if cls is None or key == "stack" else cls.FORM
    return 1 if form is None else int(form.gates)


def model_options(name: str) -> dict[str, object]:
    """The keyword settings ``make_model(name, ...)`` accepts, with their defaults."""
    return dict(_keyword_defaults(get_model_class(name)))


@functools.lru_cache(maxsize=None)
def _keyword_defaults(cls) -> tuple:
    """(name, default) of the keyword settings of ``cls.random``, read once per class (``inspect``
    costs ≈ 0.1 ms a call, and ``make_model`` asks at every model a sweep builds)."""
    out = []
    for p in inspect.signature(cls.random).parameters.values():
        if p.kind is p.KEYWORD_ONLY:
            default = p.default
            if p.name == "weight_scale":
                default = cls.DEFAULT_WEIGHT_SCALE
            if p.name == "activation":
                default = cls.DEFAULT_ACTIVATION
            out.append((p.name, default))
    return tuple(out)


def make_model(name: str, hidden: int, inputs: int, *, seed: int | None = None,
               weight_scale: float | None = None, **settings) -> Model:
    """Build a random model of the named kind.

    Initialisation (documented default, per model in ``Model.random``): U ~ N(0, s²/D)
    with s = ``weight_scale`` (1.0; 0.5 for irnn, 0.1 for rin), W ~ N(0, 1/d), b ~ N(0, 0.1²).
    ``rnn`` with ``identity_init=True`` uses U = s·I, b = 0 and ReLU (Le et al.).

    Example
    -------
    >>> m = make_model("irnn", hidden=2, inputs=1, K=5, eta=0.5, seed=0)
    """
    cls = get_model_class(name)
    allowed = model_options(cls.name)
    for key in settings:
        if key not in allowed:
            raise ParameterError(key, f"is not a setting of model {cls.name!r}; it takes "
                                      f"{', '.join(k for k in allowed if k not in ('seed', 'weight_scale'))}")
    from .._resources import check_model
    from .._validate import as_int

    check_model(cls.name, as_int(hidden, "hidden", low=1), as_int(inputs, "inputs", low=1), settings,
                gates_of(cls.name, settings))
    return cls.random(hidden, inputs, seed=seed, weight_scale=weight_scale, **settings)


__all__ = ["MODELS", "Model", "RNN", "FastRNN", "AntisymmetricRNN", "RIN", "IRNN", "CTRNN", "Implicit", "GRU", "LSTM",
           "Stack",
           "make_model", "get_model_class", "model_options", "gates_of"]

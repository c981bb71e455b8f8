"""What training trains of a model: the parameters frozen by default, those trained in log space,
the bounds each step is projected onto, and the L2 penalty (``train_model``'s ``penalty``).

``dynlab.train.loop`` and ``dynlab.train.checkpoint`` both read these (a checkpoint's optimiser
moments are keyed by the trained, log-space names).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError


def _default_freeze(model):
    return tuple(model.TRAIN_FROZEN)


def _log_params(model, params):
    """Positive parameters trained in log space (``Model.TRAIN_LOG``: an iRNN's η)."""
    return [k for k in model.TRAIN_LOG if k in params]


def _project(model, params):
    """The optimiser's step projected onto the model's bounds (``Model.TRAIN_LOWER``)."""
    for k, low in model.TRAIN_LOWER.items():
        if k in params:
            params[k] = np.maximum(params[k], low)
    return params


def _check_penalty(model, penalty) -> dict:
    """``train_model``'s ``penalty`` as ``{name: [λ, c]}`` (JSON-safe); a ParameterError on ``penalty``."""
    if penalty is None:
        return {}
    if not isinstance(penalty, dict):
        raise ParameterError("penalty", f"must be a dict {{parameter: λ or (λ, c)}}, got {type(penalty).__name__}")
    params = model.params()
    out = {}
    for name, spec in penalty.items():
        if name not in params:
            raise ParameterError("penalty", f"{name!r} is not a parameter of {model.name} ({', '.join(params)})")
        try:
            lam, c = (spec, 0.0) if np.ndim(spec) == 0 else spec
            lam, c = float(lam), float(c)
        except (TypeError, ValueError):
            raise ParameterError("penalty", f"{name}: give λ or (λ, c) with numbers, got {spec!r}") from None
        if not (math.isfinite(lam) and lam >= 0 and math.isfinite(c)):
            raise ParameterError("penalty", f"{name}: λ must be finite and ≥ 0 and c finite, got {spec!r}")
        shape = np.shape(params[name])
        if c != 0.0 and (len(shape) != 2 or shape[0] != shape[1]):
            raise ParameterError("penalty", f"{name}: a centre c·I needs a square matrix, {name} has shape {shape}")
        out[str(name)] = [lam, c]
    return out


def penalty_terms(model, penalty) -> tuple[float, dict]:
    """The L2 penalty Σ λ‖θ − c·I‖²_F of ``train_model`` (``penalty`` as there) and its exact
    gradient {name: 2λ(θ − c·I)}; returns (value, gradients)."""
    value, grads = 0.0, {}
    params = model.params()
    for name, (lam, c) in _check_penalty(model, penalty).items():
        theta = np.asarray(params[name], dtype=np.float64)
        diff = theta - c * np.eye(theta.shape[0]) if c != 0.0 else theta
        value += lam * float(np.sum(diff * diff))
        grads[name] = 2.0 * lam * diff
    return value, grads


__all__ = ["penalty_terms"]

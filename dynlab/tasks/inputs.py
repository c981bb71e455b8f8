"""Driving inputs: random walk, constant, sine, Gaussian noise."""
from __future__ import annotations

import numpy as np

from .._validate import as_int, as_scalar
from ..errors import ParameterError


def _shape(steps, inputs, batch):
    from .._resources import check_input

    steps = as_int(steps, "steps", low=1)
    inputs = as_int(inputs, "inputs", low=1)
    if batch is not None:
        batch = as_int(batch, "batch", low=1)
    check_input(steps, inputs, batch)  # before drawing: refuses what this machine cannot hold
    if batch is None:
        return (steps, inputs), False
    return (batch, steps, inputs), True


def random_walk(steps: int, inputs: int = 1, *, variance: float = 1.0, batch: int | None = None,
                seed: int | None = None, start: float = 0.0) -> np.ndarray:
    """x_t = x_{t-1} + ε_t, ε_t ~ N(0, variance), x_0 = start (the iRNN paper's Fig. 2 input)."""
    shape, _ = _shape(steps, inputs, batch)
    variance = as_scalar(variance, "variance", low=0.0)
    rng = np.random.default_rng(seed)
    steps_axis = len(shape) - 2
    return start + np.cumsum(rng.standard_normal(shape) * np.sqrt(variance), axis=steps_axis)


def constant(steps: int, inputs: int = 1, *, value: float | np.ndarray = 1.0, batch: int | None = None,
             seed: int | None = None) -> np.ndarray:
    """x_t = value for every t (value a scalar or a (d,) vector); ``seed`` is unused."""
    shape, _ = _shape(steps, inputs, batch)
    v = np.asarray(value, dtype=np.float64)
    if v.ndim not in (0, 1) or (v.ndim == 1 and v.shape[0] != shape[-1]):
        raise ParameterError("value", f"must be a scalar or a vector of length inputs={shape[-1]}")
    if not np.all(np.isfinite(v)):
        raise ParameterError("value", "must be finite")
    return np.broadcast_to(v, shape).copy()


def sine(steps: int, inputs: int = 1, *, amplitude: float = 1.0, period: float = 50.0,
         batch: int | None = None, seed: int | None = None) -> np.ndarray:
    """x_t,i = amplitude · sin(2π t / period + φ_i), phases φ_i ~ U[0, 2π) (φ = 0 when seed is None)."""
    shape, _ = _shape(steps, inputs, batch)
    amplitude = as_scalar(amplitude, "amplitude")
    period = as_scalar(period, "period", low=0.0, low_open=True)
    t = np.arange(1, shape[-2] + 1, dtype=np.float64)
    lead = shape[:-2]
    if seed is None:
        phase = np.zeros(lead + (1, shape[-1]))
    else:
        phase = np.random.default_rng(seed).uniform(0, 2 * np.pi, lead + (1, shape[-1]))
    return amplitude * np.sin(2 * np.pi * t[:, None] / period + phase)


def noise(steps: int, inputs: int = 1, *, variance: float = 1.0, batch: int | None = None,
          seed: int | None = None) -> np.ndarray:
    """x_t ~ N(0, variance) i.i.d."""
    shape, _ = _shape(steps, inputs, batch)
    variance = as_scalar(variance, "variance", low=0.0)
    return np.random.default_rng(seed).standard_normal(shape) * np.sqrt(variance)


INPUTS = {"random-walk": random_walk, "constant": constant, "sine": sine, "noise": noise}


def make_input(kind: str, steps: int, inputs: int = 1, *, batch: int | None = None,
               seed: int | None = None, **options) -> np.ndarray:
    """The input named ``kind`` (``random-walk``, ``constant``, ``sine``, ``noise``)."""
    key = str(kind).strip().lower().replace("_", "-")
    if key not in INPUTS:
        raise ParameterError("input", f"unknown input {kind!r}; choose from {', '.join(INPUTS)}")
    return INPUTS[key](steps, inputs, batch=batch, seed=seed, **options)

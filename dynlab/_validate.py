"""Validation of user-given values, shared by every layer (models, tasks, analyses, training).

Each helper returns the value in its canonical type or raises a ``ParameterError`` naming the
parameter.  This module is neutral: it imports only NumPy and ``dynlab.errors``, so models,
tasks and analyses import it without importing each other (``dynlab.models.base`` re-exports
the names for code written against the old path).
"""
from __future__ import annotations

import numpy as np

from .errors import ParameterError


def as_matrix(value, param: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A read-only float64 copy of ``value`` with the given shape (None entries: any); complex
    values are refused (their imaginary part would be dropped silently)."""
    try:
        complex_given = np.iscomplexobj(value)
    except Exception:  # ragged or exotic input: as_matrix's own conversion below names the problem
        complex_given = False
    if complex_given:
        raise ParameterError(param, "must be real, got complex values (their imaginary part would be lost)")
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(param, f"must be numeric ({exc})") from None
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "×".join("?" if s is None else str(s) for s in shape) or "scalar"
            raise ParameterError(param, f"must have shape {want}, got {arr.shape or 'scalar'}")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ParameterError(param, f"contains a non-finite value at index {tuple(int(i) for i in bad)}")
    arr.setflags(write=False)
    return arr


def as_bool(value, param: str) -> bool:
    """True/False from a bool, 0/1, or the strings "true"/"false" (any case); anything else is
    refused — "maybe" or "yes" is not silently read as true."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ParameterError(param, f"must be true or false, got {value!r}")


def as_scalar(value, param: str, *, low: float | None = None, low_open: bool = False,
              high: float | None = None) -> float:
    """A finite float within [low, high] (or (low, high] when ``low_open``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(param, f"must be a number, got {value!r}") from None
    if not np.isfinite(v):
        raise ParameterError(param, f"must be finite, got {v}")
    if low is not None and (v <= low if low_open else v < low):
        raise ParameterError(param, f"must be {'>' if low_open else '≥'} {low:g}, got {v:g}")
    if high is not None and v > high:
        raise ParameterError(param, f"must be ≤ {high:g}, got {v:g}")
    return v


def as_int(value, param: str, *, low: int | None = None) -> int:
    """An int ≥ ``low``: an integral float is accepted, a bool or a fractional value is not."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise ParameterError(param, f"must be an integer, got {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ParameterError(param, f"must be ≥ {low}, got {value}")
    return value


def as_points(x, n_cols: int, param: str, N: int | None = None) -> np.ndarray:
    """A (N, n_cols) float64 C-contiguous array with finite entries, or a ParameterError."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(param, f"must be a numeric array ({exc})") from None
    if arr.ndim != 2 or arr.shape[1] != n_cols or (N is not None and arr.shape[0] != N):
        want = f"({'N' if N is None else N}, {n_cols})"
        raise ParameterError(param, f"must have shape {want}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        n, i = np.argwhere(~np.isfinite(arr))[0]
        raise ParameterError(param, f"contains a non-finite value ({arr[n, i]}) at point {n}, entry {i}")
    return np.ascontiguousarray(arr)

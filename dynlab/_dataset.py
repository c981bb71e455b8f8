"""Wrapping results into xarray Datasets that follow the data contract (DESIGN §3).

Dimensions: ``batch``, ``time``, ``unit``, ``unit_in``; matrices mapping units to units use
(``unit``, ``unit_from``) — U[i, j] is the weight from unit j to unit i; the low-rank
factors use ``rank``; a per-(time, k) η uses (``eta_time``, ``k``).
"""
from __future__ import annotations

import sys

import numpy as np

from ._version import __version__
from .models import Model

LABELS = {
    "U": ("recurrent weights U", "1"),
    "M": ("antisymmetric generator M", "1"),
    "W": ("input weights W", "1"),
    "b": ("bias b", "1"),
    "V": ("low-rank factor V (U = I + V H)", "1"),
    "H": ("low-rank factor H (U = I + V H)", "1"),
    "eta": ("step size η", "1"),
    "alpha": ("α", "1"),
    "beta": ("β", "1"),
    "eps": ("ε", "1"),
    "gamma": ("γ", "1"),
    "tau": ("time constant τ", "time"),
}


def _dims_of(name: str, value: np.ndarray) -> tuple[str, ...]:
    if value.ndim == 0:
        return ()
    if name in ("U", "M"):
        return ("unit", "unit_from")
    if name == "W":
        return ("unit", "unit_in")
    if name == "b":
        return ("unit",)
    if name == "V":
        return ("unit", "rank")
    if name == "H":
        return ("rank", "unit_from")
    if name == "eta":
        return ("k",) if value.ndim == 1 else ("eta_time", "k")
    return tuple(f"{name}_dim{i}" for i in range(value.ndim))


def clean_attr(value):
    """A value NetCDF can store as an attribute (no None, no bool)."""
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


def model_variables(model: Model, prefix: str = "") -> dict:
    """The model's parameters as DataArrays (name → (dims, values, attrs))."""
    import xarray as xr

    out = {}
    for name, value in model.params().items():
        arr = np.asarray(value, dtype=np.float64)
        long_name, units = getattr(model, "PARAM_LABELS", {}).get(name) or LABELS.get(name, (name, "1"))
        dims = getattr(model, "PARAM_DIMS", {}).get(name) or _dims_of(name, arr)
        out[prefix + name] = xr.Variable(dims, arr,
                                         {"long_name": (prefix.rstrip("_") + " " if prefix else "") + long_name,
                                          "units": units})
    return out


def model_attrs(model: Model, prefix: str = "") -> dict:
    attrs = {prefix + "model": model.name}
    for k, v in model.settings().items():
        attrs[prefix + k] = clean_attr(v)
    attrs[prefix + "seed"] = -1 if model.seed is None else int(model.seed)
    attrs[prefix + "weight_scale"] = clean_attr(model.weight_scale)
    return attrs


def command_line() -> str:
    """The command that produced a result: the CLI line, or the Python entry point."""
    argv = sys.argv
    if argv and argv[0].endswith("dynlab"):
        return "dynlab " + " ".join(argv[1:])
    return "python: " + " ".join(argv) if argv and argv[0] else "python"


def base_attrs(backend: str, command: str | None) -> dict:
    return {"backend": backend, "dynlab_version": __version__,
            "command": command if command is not None else command_line()}

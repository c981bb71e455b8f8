"""Wrapping results into xarray Datasets that follow the data contract (docs/design.md, *Data contract*).

Dimensions: ``batch``, ``time``, ``unit``, ``unit_in``; matrices mapping units to units use
(``unit``, ``unit_from``) — U[i, j] is the weight from unit j to unit i; the low-rank
factors use ``rank``; a per-(time, k) η uses (``eta_time``, ``k``).

``finish(ds, result)`` is the last step of every public call: it names the call in
``attrs["result"]`` (``dynlab.plot.draw`` picks the picture from it) and gives every
dimension that has none an integer coordinate (``INDEX_COORDS``), so every dimension of every
result is labelled.

This module is neutral: it imports no model, analysis or kernel module, so both the computing
layers and ``dynlab.plot`` (which only reads Datasets) can use it.
"""
from __future__ import annotations

import sys

import numpy as np

from ._version import __version__

#: Coordinates given to a dimension that has none: dimension → (first value, long_name, units).
#: Time steps count from 1 (h_1 … h_T), as the papers write them; ``k`` counts the inner
#: iterations from 0 (g_0 is the start); every other index counts from 0, as NumPy indexes.
INDEX_COORDS = {
    "time": (1, "time step t", "step"),
    "batch": (0, "sequence", "1"),
    "unit": (0, "hidden unit", "1"),
    "unit_from": (0, "presynaptic unit", "1"),
    "unit_in": (0, "input feature", "1"),
    "k": (0, "inner iteration k", "1"),
    "eig": (0, "eigenvalue index", "1"),
    "exponent": (1, "exponent index i", "1"),
    "point": (0, "point", "1"),
    "arc": (0, "point along the branch", "1"),
    "fold": (0, "fold", "1"),
    "rank": (0, "rank index", "1"),
    "eta_time": (1, "time step of η", "step"),
    "class": (0, "class", "1"),
    "output": (0, "read-out output", "1"),
    "iteration": (0, "training iteration", "1"),
    "layer": (1, "layer", "1"),
    "slice": (0, "time slice", "1"),
    "coord": (0, "embedding coordinate", "1"),
}


def finish(ds, result: str):
    """``ds`` with ``attrs["result"] = result`` and an integer coordinate on every dimension
    that has none (``INDEX_COORDS``; an unknown dimension counts from 0)."""
    missing = {}
    for dim, size in ds.sizes.items():
        if dim in ds.coords:
            continue
        start, long_name, units = INDEX_COORDS.get(dim, (0, f"{dim} index", "1"))
        missing[dim] = (dim, np.arange(start, start + size), {"long_name": long_name, "units": units})
    if missing:
        ds = ds.assign_coords(missing)
    ds.attrs["result"] = result
    return ds


def eigenvalues_from(ds, name="eig"):
    """The complex eigenvalues a Dataset stores as ``{name}_real`` and ``{name}_imag``
    (NetCDF has no complex type): ``ds[name_real] + 1j·ds[name_imag]`` as a NumPy array."""
    return ds[f"{name}_real"].values + 1j * ds[f"{name}_imag"].values

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


def model_variables(model, prefix: str = "") -> dict:
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


def model_attrs(model, prefix: str = "") -> dict:
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

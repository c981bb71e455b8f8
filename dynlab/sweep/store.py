"""The sweep store: one Zarr group holding the whole grid, written region by region.

Layout: every summary variable spans the sweep dimensions (then its own extra dimensions);
the Zarr chunks along the sweep dimensions ARE the regions, so two regions never share a
chunk (workers of a Dask cluster write theirs concurrently without locks).  The template —
coordinates, attrs, every variable filled with NaN (−1 for integers), ``done`` = 0 — is
written once before any point is computed.  A region is then written in two steps:

1. its data variables and ``computed_at`` (the wall-clock time each point was computed);
2. ``done`` = 1 over the region.

zarr-python ≥ 3.1 writes every chunk to a temporary file and renames it into place, so a
chunk is either the old or the new one, never torn.  A crash (or SIGKILL) therefore loses at
most the regions in flight: their ``done`` is still 0, and ``resume`` recomputes exactly the
regions not marked done, leaving the finished ones (and their ``computed_at``) untouched.

The store's attrs hold the sweep's fingerprint (``sweep_spec``, canonical JSON of the
analysis, axes and fixed settings): resuming with a different spec is refused, and an
existing store is never overwritten.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..errors import ParameterError

#: Variables every sweep store has beside the target's.
BOOKKEEPING = ("done", "computed_at")


#: Integer variables of a point not yet computed (``done`` = 0) hold this value.
INT_NOT_COMPUTED = -1


def template(spec, target, chunks, attrs: dict):
    """The full-size Dataset of a sweep before any point is computed (NumPy-backed)."""
    import xarray as xr

    settings0 = spec.point((0,) * len(spec.axes))
    variables = target.variables_for(settings0)
    coords = {}
    for axis in spec.axes:
        if axis.zipped:
            coords[axis.dim] = (axis.dim, np.arange(axis.size), {"long_name": f"index along {axis.dim}", "units": "1"})
            for name, vals in zip(axis.names, axis.values):
                coords[name] = (axis.dim, np.asarray(vals), {"long_name": name, "units": "1"})
        else:
            coords[axis.dim] = (axis.dim, np.asarray(axis.values[0]), {"long_name": axis.dim, "units": "1"})
    if target.coords is not None:
        for dim, (vals, a) in target.coords(settings0).items():
            coords[dim] = (dim, np.asarray(vals), dict(a))
    dims = spec.dims
    shape = spec.shape
    data = {}
    for name, var in variables.items():
        extra = tuple(d for d, _ in var.dims)
        full = shape + tuple(n for _, n in var.dims)
        dt = np.dtype(var.dtype)
        fill = np.nan if dt.kind == "f" else INT_NOT_COMPUTED
        data[name] = xr.Variable(dims + extra, np.full(full, fill, dtype=dt),
                                 {"long_name": var.long_name, "units": var.units})
    data["done"] = xr.Variable(dims, np.zeros(shape, dtype=np.int8),
                               {"long_name": "point computed and written (1) or not yet (0)", "units": "1"})
    data["computed_at"] = xr.Variable(dims, np.full(shape, np.nan),
                                      {"long_name": "wall-clock time the point was computed (seconds since the Unix epoch)",
                                       "units": "s"})
    ds = xr.Dataset(data, coords=coords, attrs={**attrs, "result": "sweep"})
    return ds, {name: tuple(chunks) + tuple(n for _, n in v.dims) for name, v in variables.items()}


def _encoding(ds, var_chunks, chunks):
    enc = {name: {"chunks": c} for name, c in var_chunks.items()}
    enc["done"] = {"chunks": tuple(chunks)}
    enc["computed_at"] = {"chunks": tuple(chunks)}
    return enc


def create(path: str, ds, var_chunks: dict, chunks: tuple) -> None:
    """Write the template to a new store; refuse an existing path (never overwrite)."""
    if os.path.exists(path):
        raise ParameterError("store", f"{path} already exists; resume it (--resume) or choose another path")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ParameterError("store", f"the folder {parent} of {path} does not exist")
    # Consolidated metadata is written once here: region writes change chunk data only, never
    # the metadata, so the consolidated copy stays valid and xr.open_zarr(path) opens it quietly.
    # (zarr 3 warns that consolidation is outside its format spec; xarray and zarr-python read it.)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        ds.to_zarr(path, mode="w-", encoding=_encoding(ds, var_chunks, chunks), consolidated=True)


def open_existing(path: str, fingerprint: str):
    """The store at ``path`` (lazily), after checking it holds this very sweep."""
    import xarray as xr

    if not os.path.isdir(path):
        raise ParameterError("store", f"nothing to resume: {path} does not exist")
    try:
        ds = xr.open_zarr(path, consolidated=False)
    except Exception as exc:  # not a Zarr store at all
        raise ParameterError("store", f"{path} is not a readable Zarr store ({type(exc).__name__}: {exc})") from None
    old = ds.attrs.get("sweep_spec")
    if old is None or "done" not in ds:
        raise ParameterError("store", f"{path} is not a dynlab sweep store; refusing to write into it")
    if old != fingerprint:
        raise ParameterError("store", f"{path} was written by another sweep spec ({describe_difference(old, fingerprint)}); "
                                      "its results are kept; choose another path")
    return ds


def describe_difference(old: str, new: str) -> str:
    """A short description of how two fingerprints differ."""
    import json

    a, b = json.loads(old), json.loads(new)
    parts = []
    if a["analysis"] != b["analysis"]:
        parts.append(f"analysis {a['analysis']!r} vs {b['analysis']!r}")
    fa, fb = dict(map(tuple, a["fixed"])), dict(map(tuple, b["fixed"]))
    for k in sorted(set(fa) | set(fb)):
        if fa.get(k) != fb.get(k):
            parts.append(f"{k}: {fa.get(k, 'unset')!r} in the store vs {fb.get(k, 'unset')!r}")
    axa = {ax[0]: ax for ax in a["axes"]}
    axb = {ax[0]: ax for ax in b["axes"]}
    for k in sorted(set(axa) | set(axb)):
        if axa.get(k) != axb.get(k):
            parts.append(f"axis {k!r} differs")
    return "; ".join(parts) or "the order of the axes differs"


def read_done(path: str) -> np.ndarray:
    """The ``done`` mask of a store as a NumPy bool array."""
    import zarr

    return np.asarray(zarr.open_array(os.path.join(path, "done"), mode="r")[...]).astype(bool)


def store_chunks(path: str) -> tuple:
    import zarr

    return tuple(zarr.open_array(os.path.join(path, "done"), mode="r").chunks)


def write_region(path: str, dims: tuple, region: tuple, values: dict, variables: dict) -> None:
    """Write one region's data variables and ``computed_at``, then mark it done (module docstring).

    The arrays are written straight into the Zarr arrays of the template (plain float64 /
    integer data, no CF encoding to apply): xarray's ``to_zarr(region=…)`` writes the same
    bytes but re-reads and checks the whole store's metadata, ≈ 75 ms a call here against
    ≈ 5 ms, which would dominate small regions.
    """
    import zarr

    group = zarr.open_group(path, mode="r+")
    for name, arr in values.items():
        group[name][region] = np.asarray(arr, dtype=group[name].dtype)
    shape = tuple(s.stop - s.start for s in region)
    group["done"][region] = np.ones(shape, dtype=np.int8)


def load(path: str):
    """The whole store as an in-memory Dataset."""
    import xarray as xr

    with xr.open_zarr(path, consolidated=False) as ds:
        return ds.load()

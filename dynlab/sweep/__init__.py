"""Sweeps: one analysis over a grid of settings → an ``xarray.Dataset`` (and a Zarr store).

``dynlab.sweep(analysis, grid, *, fixed=…, store=None, backend=None, scheduler=None)`` —
the module itself is callable, so ``dl.sweep("gradient_norms", {"K": [1, 5]})`` runs a sweep
and ``dl.sweep.TARGETS`` lists the analyses.  Pieces:

* ``grid``    — the sweep spec: axes (cartesian, zipped, seeds), fixed settings, validation;
* ``targets`` — the registry name → per-point summary function (how to add one: its docstring);
* ``store``   — the Zarr store written region by region, the ``done`` mask, resume;
* ``driver``  — ``sweep`` itself: regions in process or as Dask tasks;
* ``specfile`` — ``dynlab sweep SPEC.toml``: TOML → the same call;
* batched kernels in ``dynlab.backends.numba.batched`` (numba prange; array namespace for CuPy).
"""
from __future__ import annotations

import sys
import types

from .driver import compute_region, sweep
from .grid import Axis, SweepSpec, make_sweep_spec, region_chunks
from .specfile import load_spec_file, sweep_from_file
from .targets import TARGETS, Target, Var, batched_gradient_summaries, get_target, model_and_input, register_target

__all__ = ["sweep", "TARGETS", "Target", "Var", "register_target", "get_target", "model_and_input",
           "make_sweep_spec", "SweepSpec", "Axis", "region_chunks", "compute_region", "load_spec_file",
           "sweep_from_file", "batched_gradient_summaries"]


class _CallableModule(types.ModuleType):
    """``dynlab.sweep`` is both this package and, called, the ``sweep`` function."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

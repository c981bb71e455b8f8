"""Workload ``sweep-host`` (docs/design.md, *Benchmarks*): everything of the ``sweep`` workload but the kernels, µs per setting.

The ``sweep`` workload's full grid — iRNN, D = 32, d = 1, T = 200, tanh, random walk, seed 0,
K = 1..10 × 25 η × 40 weight scales = 10⁴ settings — through ``dl.sweep`` as a user calls it (spec
validation, regions, settings, models and inputs, the ``TangentBatch``, the summaries, the
Dataset), on a backend whose ``sweep_gradients`` does no kernel work: ``HostOnly``, the numba
backend with ``sweep_gradients`` replaced by a few O(S) sums of the batch's contents (so that each
row's result says which batch it built, and the rows are checked to build the same one).  What it
measures is the host side a GPU sweep pays before its kernel (ISSUE 41: a GPU at 10⁵ settings/s
leaves 10 µs per setting for everything else); goal ≤ 10 µs per setting on this CPU.

Rows:

* ``columns, one region`` (reference): the vectorised path (``dynlab.sweep.columns``), the whole
  grid one region — as the GPU backend sizes it (a region fills half its free memory);
* ``columns, numba's regions``: the same with the numba backend's region size (64 at T = 200);
* ``model per setting (the list path)`` (baseline): ``Target.batched``, one model and input per
  setting, stacked by ``stack_tangent`` — the path every sweep took before the columns.
"""
from __future__ import annotations

import dataclasses

import numpy as np

import dynlab as dl
from dynlab.backends import register_backend
from dynlab.backends.numba import NumbaBackend

from .harness import Impl, Workload
from .sweep import D, FIXED, T

#: The ``sweep`` workload's full grid (its info line ``full sweep``).
GRID = {"K": list(range(1, 11)), "eta": np.linspace(0.04, 1.0, 25).tolist(),
        "weight_scale": np.linspace(0.05, 2.0, 40).tolist()}
QUICK_GRID = {**GRID, "weight_scale": GRID["weight_scale"][:4]}


class HostOnly(NumbaBackend):
    """The numba backend without kernels: ``sweep_gradients`` returns sums of each setting's batch
    rows (its η row, K, α, σ, g₀, and its group's R, W, b, X) instead of the norms."""

    name = "numba-host"
    description = "the numba backend's host side, kernels replaced by sums of the batch (benchmarks only)"

    def sweep_gradients(self, forms, xs=None):
        from dynlab.backends.base import as_tangent_batch

        b = as_tangent_batch(forms, xs)
        per_group = b.R.sum(axis=(1, 2)) + b.W.sum(axis=(1, 2)) + b.b.sum(axis=1) + b.X.sum(axis=(1, 2))
        log1 = b.eta.sum(axis=1) + 1e-3 * b.K + b.alpha + 0.5 * b.sign + 0.25 * b.g0prev
        return log1, per_group[b.group], np.zeros(b.size, dtype=np.int64)


register_backend(HostOnly.name, "benchmarks.sweep_host:HostOnly")
_LIST = "gradient_norms_list_path"


def _list_target():
    """``gradient_norms`` without its vectorised path: the driver then takes ``Target.batched``."""
    from dynlab.sweep import TARGETS, register_target

    if _LIST not in TARGETS:
        register_target(dataclasses.replace(TARGETS["gradient_norms"], name=_LIST, vectorised=None))
    return _LIST


def _run(grid, analysis="gradient_norms", region_size=None):
    def call():
        ds = dl.sweep(analysis, grid, fixed=FIXED, backend=HostOnly.name, region_size=region_size, progress=False)
        return ds["log_jac_norm_1"].values.ravel(), ds["log_step_norm_T"].values.ravel()
    return call


def build(quick: bool):
    grid = QUICK_GRID if quick else GRID
    n = int(np.prod([len(v) for v in grid.values()]))
    impls = [
        Impl("columns, one region", _run(grid, region_size=n)),
        Impl("columns, numba's regions", _run(grid)),
        Impl("model per setting (the list path)", _run(grid, _list_target())),
    ]
    info = {"sizes": f"iRNN D={D}, d=1, T={T}, tanh, float64; {n} settings "
                     f"({' × '.join(str(len(v)) for v in grid.values())}) per call; goal ≤ 10 µs per setting",
            "per_item": (n, "setting")}
    return impls, info


WORKLOADS = [
    Workload("sweep-host", "dl.sweep of the 10⁴-setting sweep grid with the kernels stubbed out (host side only), "
             "iRNN D=32, T=200", build, baseline="model per setting (the list path)", rtol=1e-12, repeat=3),
]

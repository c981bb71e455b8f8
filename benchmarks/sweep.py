"""Workload ``sweep`` (docs/design.md, *Benchmarks*): gradient norms for 10⁴ (K, η, weight-scale) settings, D=32, T=200.

Rows, all on the same 64 settings (K ∈ {1, 4, 7, 10} × η ∈ {0.1, 0.4, 0.7, 1.0} × weight
scale ∈ {0.5, 1, 1.5, 2}; iRNN, tanh, d = 1, random walk of variance 1, seed 0), each
returning ln‖∂h_T/∂h_1‖₂ of every setting:

* ``Python loop: dl.gradient_norms per setting`` (reference and baseline): the public analysis
  called once per setting (numba backend: closed-form J_t, one backward pass, certified
  norms of every P_t and J_t, the Dataset), the summary read from it;
* ``dl.sweep, numba prange batched``: the sweep (in memory) with the batched forward-tangent
  kernel (``dynlab.backends.numba.tangent.tangent_numba``) and σ₁ by the certified power
  iteration (``tangent.sweep_norms``), regions of the backend's size (64 here);
* ``dl.sweep, NumPy array-namespace kernel``: the same algorithm as the reference's batched NumPy
  matmuls, σ₁ by LAPACK's SVD (the name is historical: the GPU runs its own fused kernel);
* ``dl.sweep per point (batched=False)``: the sweep machinery calling the public analysis.

Info lines: the full 10⁴-setting sweep (K 1..10 × 25 η × 40 weight scales), run once, into a
Zarr store, in settings per second; and settings per second of every row.  The host side of the
same sweep alone is the ``sweep-host`` workload (``benchmarks/sweep_host.py``).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time

import numpy as np

import dynlab as dl

from .harness import Impl, Workload

D, T = 32, 200
FIXED = {"model": "irnn", "hidden": D, "steps": T, "input": "random-walk"}
SUBSET = {"K": [1, 4, 7, 10], "eta": [0.1, 0.4, 0.7, 1.0], "weight_scale": [0.5, 1.0, 1.5, 2.0]}


def _loop():
    out = []
    for K in SUBSET["K"]:
        for eta in SUBSET["eta"]:
            for ws in SUBSET["weight_scale"]:
                m = dl.make_model("irnn", D, 1, seed=0, K=K, eta=eta, weight_scale=ws)
                x = dl.tasks.random_walk(T, 1, seed=0)
                out.append(float(dl.gradient_norms(m, x)["log_jac_norm"][0]))
    return np.array(out)


def _sweep(**kw):
    def call():
        return dl.sweep("gradient_norms", SUBSET, fixed=FIXED, **kw)["log_jac_norm_1"].values.ravel()
    return call


def _full(quick: bool) -> str:
    grid = {"K": list(range(1, 11)), "eta": np.linspace(0.04, 1.0, 25).tolist(),
            "weight_scale": np.linspace(0.05, 2.0, 4 if quick else 40).tolist()}
    n = 10 * 25 * len(grid["weight_scale"])
    tmp = tempfile.mkdtemp()
    try:
        t0 = time.perf_counter()
        ds = dl.sweep("gradient_norms", grid, fixed=FIXED, store=os.path.join(tmp, "s.zarr"))
        dt = time.perf_counter() - t0
        assert bool(ds["done"].all()) and int(ds["diverged_at"].max()) == 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return f"{n} settings in {dt:.1f} s = {n / dt:.0f} settings/s (numba prange batched, written to a Zarr store)"


def build(quick: bool):
    n = int(np.prod([len(v) for v in SUBSET.values()]))
    impls = [
        Impl("Python loop: dl.gradient_norms per setting", _loop),
        Impl("dl.sweep, numba prange batched", _sweep(backend="numba")),
        Impl("dl.sweep, NumPy array-namespace kernel", _sweep(backend="numpy")),
        Impl("dl.sweep per point (batched=False)", _sweep(batched=False)),
    ]
    _sweep(backend="numba")()  # compile before the full run
    info = {"sizes": f"iRNN D={D}, d=1, T={T}, tanh, float64; {n} settings per timed call "
                     "(settings/s = 64 / median)",
            "full sweep": _full(quick),
            "GPU": "not timed here (python -m benchmarks.run --gpu)",
            "rtol": {}}
    return impls, info


WORKLOADS = [
    Workload("sweep", "gradient norms for (K, η, weight-scale) settings, iRNN D=32, T=200", build,
             baseline="Python loop: dl.gradient_norms per setting", rtol=1e-11, repeat=3),
]

"""The pieces the GPU table's machinery (``benchmarks/gpu.py``) and its rows (``benchmarks/gpu_rows.py``)
share: the sizes, the workload inputs, the agreement measure, timing, and a row's record."""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time

import numpy as np

#: Agreement bound of every float64 row: the implementations differ in summation order only, a few
#: ε per operation over at most T·K·D ≈ 10⁶ operations of contracting updates.
F64_AGREEMENT = 1e-10


# ============================================================================ sizes and inputs
@dataclasses.dataclass(frozen=True)
class Sizes:
    """The workloads' sizes: ``full`` (the goals'), ``quick`` (≤ 3 min), ``tiny`` (the simulator)."""

    name: str
    sweep_scales: int = 40          # weight scales of the sweep grid (× 10 K × 25 η)
    sweep_ks: int = 10              # K = 1 … sweep_ks
    sweep_etas: int = 25
    sweep_hidden: int = 32
    sweep_steps: int = 200
    sweep_largest: int = 50_000     # cap of the largest-sweep row (its host side today: ≈ 0.6 ms a setting)
    fwd_batch: int = 256
    fwd_big_batch: int = 4096
    fwd_hidden: int = 128
    fwd_steps: int = 1000
    gated_batch: int = 1024
    gated_hidden: int = 256
    gated_steps: int = 500
    flow_hidden: int = 128
    flow_steps: int = 1000


SIZES = {"full": Sizes("full"),
         "quick": Sizes("quick", sweep_scales=4, sweep_steps=100, sweep_largest=20_000, fwd_steps=100,
                        fwd_big_batch=1024, gated_batch=256, gated_steps=50, flow_steps=100),
         "tiny": Sizes("tiny", sweep_scales=1, sweep_ks=2, sweep_etas=2, sweep_hidden=3, sweep_steps=4, sweep_largest=8,
                       fwd_batch=2,
                       fwd_big_batch=3, fwd_hidden=4, fwd_steps=3, gated_batch=8, gated_hidden=3, gated_steps=3,
                       flow_hidden=4, flow_steps=3)}


def sweep_grid(quick: bool = False, scales: int | None = None, ks: int = 10, etas: int = 25) -> dict:
    """The issue's sweep grid: K 1..10 × 25 η × 40 weight scales (10⁴ settings; quick: 4 scales)."""
    n = scales if scales is not None else (4 if quick else 40)
    return {"K": list(range(1, ks + 1)), "eta": np.linspace(0.04, 1.0, etas).tolist(),
            "weight_scale": np.linspace(0.05, 2.0, n).tolist()}


def sweep_models(grid: dict, hidden: int = 32, steps: int = 200):
    """The iRNN models and inputs of every setting of ``grid`` (seed 0, random walk, d = 1), in
    ``dl.sweep``'s order (K, η, weight scale)."""
    import dynlab as dl

    x = dl.tasks.random_walk(steps, 1, seed=0)
    models = [dl.make_model("irnn", hidden, 1, seed=0, K=K, eta=eta, weight_scale=ws)
              for K in grid["K"] for eta in grid["eta"] for ws in grid["weight_scale"]]
    return models, [x] * len(models)


def irnn_inputs(B: int, D: int, d: int, K: int, T: int, seed: int = 0):
    """(model, x (B, T, d), h0 (B, D)) of the forward workloads: tanh iRNN, η = 0.5."""
    import dynlab as dl

    m = dl.make_model("irnn", D, d, seed=seed, K=K, eta=0.5)
    rng = np.random.default_rng(seed)
    return m, rng.standard_normal((B, T, d)), np.zeros((B, D))


def gated_inputs(kind: str, B: int, D: int, d: int, T: int, seed: int = 0):
    """(model, x, h0) of the GRU/LSTM forwards (PyTorch's initialisation, tanh)."""
    import dynlab as dl

    m = dl.make_model(kind, D, d, seed=seed)
    rng = np.random.default_rng(seed)
    return m, rng.standard_normal((B, T, d)), np.zeros((B, m.state_size))


def agreement(result, reference) -> float:
    """The largest relative difference max|a − r| / max(1, |r|) over the finite entries; inf when
    the shapes or the NaN/inf positions differ."""
    a = np.asarray(result, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    if a.shape != r.shape or not np.array_equal(np.isfinite(a), np.isfinite(r)):
        return float("inf")
    ok = np.isfinite(r)
    if not ok.any():
        return 0.0
    return float(np.max(np.abs(a[ok] - r[ok]) / np.maximum(1.0, np.abs(r[ok]))))


# ============================================================================ timing
def median_time(fn, repeat: int = 3) -> float:
    """Median wall-clock seconds of ``repeat`` calls after one warm-up call (compilation)."""
    fn()
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@contextlib.contextmanager
def cores(n: int | None):
    """Numba's threads and BLAS's held to ``n`` (None: as they are)."""
    if n is None:
        yield
        return
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        with threadpool_limits(n):
            yield
    finally:
        numba.set_num_threads(old)


# ============================================================================ rows and the table
#: The table's columns: (key, heading).  ``*-host``: NumPy in, NumPy out (dynlab's public call);
#: ``*-device``: inputs and results on the GPU, the device synchronised.
COLUMNS = (("dynlab-host", "dynlab public call"), ("dynlab-device", "dynlab device-resident"),
           ("jax-host", "JAX host→host"), ("jax-device", "JAX device-resident"),
           ("torch-host", "torch host→host"), ("torch-device", "torch device-resident"),
           ("numba", "dynlab numba (all cores)"), ("numba2", "dynlab numba (2 cores)"))


@dataclasses.dataclass
class Row:
    """One workload's results: ``times`` {column key: seconds, or settings/s for ``unit``
    "settings/s"}, ``agrees`` {column key: largest relative difference to the reference},
    ``threshold`` the agreement bound, ``notes`` (peers not run, goals, ratios), ``error`` (the
    exception and where, when the row failed)."""

    workload: str
    size: str = ""
    unit: str = "s"
    precision: str = "float64"
    threshold: float = F64_AGREEMENT
    times: dict = dataclasses.field(default_factory=dict)
    agrees: dict = dataclasses.field(default_factory=dict)
    notes: list = dataclasses.field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def disagrees(self) -> list:
        return [k for k, v in self.agrees.items() if not v <= self.threshold]

    @property
    def ok(self) -> bool:
        return self.error is None and not self.disagrees

    def status(self) -> str:
        if self.error is not None:
            return f"FAILED: {self.error}"
        if self.disagrees:
            return "DISAGREES: " + ", ".join(f"{k} {self.agrees[k]:.1e}" for k in self.disagrees)
        return "ok"


__all__ = ["F64_AGREEMENT", "Sizes", "SIZES", "sweep_grid", "sweep_models", "irnn_inputs", "gated_inputs", "agreement",
           "median_time", "cores", "COLUMNS", "Row"]

"""``python -m benchmarks.run --gpu [--quick] [--markdown FILE]``: the GPU table (DESIGN §7 ``gpu``,
issue 41's goals), one short GPU run that can judge them.

The machinery is here; the rows are ``benchmarks/gpu_rows.py``.  One row per workload:

* every implementation **at two scopes, side by side**: the public call from host arrays to host
  results (dynlab: ``dl.simulate``, ``dl.sweep``, ``dl.gradient_norms``, ``dl.lyapunov`` with
  ``backend="cupy"``; the peers: NumPy in, NumPy out) and **device-resident** — inputs already on
  the GPU, results left there, the device synchronised (dynlab: the backend's operations inside
  ``GPUBackend.results_on_device()``; JAX: device arrays, ``block_until_ready``; torch: ``cuda``
  tensors, ``torch.cuda.synchronize``) — and dynlab's numba backend on all cores and on two;
* every result checked against the reference (dynlab's numba backend in float64, itself tested
  against the NumPy reference) before it is timed, the largest relative difference
  max|a − r|/max(1, |r|) **thresholded**: float64 ≤ ``F64_AGREEMENT`` (1e-10); float32 rows state
  their own bound (``Row.threshold``) with its reason;
* each row **printed and flushed as it finishes**, and written to ``--markdown`` then too; a row that
  raises is reported (the exception and where) and the run goes on; the exit status is 1 when a row
  failed or disagreed;
* JAX on the GPU with preallocation off (``XLA_PYTHON_CLIENT_PREALLOCATE=false`` is set before JAX
  is imported; a JAX that does not run on the GPU is reported and not timed); torch on ``cuda``;
* the header names the GPU, its driver, CUDA, CuPy, numba-cuda, Numba, NumPy, JAX and torch.

``--quick`` runs every row at reduced sizes (budget ≤ 3 minutes on an H100, compilation included);
the full run's budget is 8 minutes (the numba backend's two-core column then runs a tenth of the
sweep: a rate).  ``--tiny`` runs every row at toy sizes under Numba's CUDA simulator (against the
NumPy reference, no CPU columns, peers off unless ``--peers``): how the tests exercise this
machinery without a GPU; its timings mean nothing.

Without a usable GPU (no device, no CuPy, or only the simulator without ``--tiny``) it refuses in
one line.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import sys
import time
import traceback

import numpy as np

#: Agreement bound of every float64 row: the implementations differ in summation order only, a few
#: ε per operation over at most T·K·D ≈ 10⁶ operations of contracting updates.
F64_AGREEMENT = 1e-10


def gpu_problem(tiny: bool = False) -> str | None:
    """None when dynlab's GPU backend runs on a real device here (or, with ``tiny``, under the
    simulator), else why not (one line)."""
    from dynlab.backends.gpu.device import runtime

    rt = runtime()
    if rt.problem is not None:
        return rt.problem
    if rt.simulator and not tiny:
        return "only Numba's CUDA simulator is active (NUMBA_ENABLE_CUDASIM=1): nothing to time (--tiny runs the " \
               "machinery there)"
    if tiny and not rt.simulator:
        return "--tiny runs under Numba's CUDA simulator only (NUMBA_ENABLE_CUDASIM=1)"
    return None


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


def _cell(v, unit: str) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f}" if unit == "settings/s" else f"{v:.4g} s"


def _md(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def format_row(r: Row) -> str:
    """One Markdown table line for ``r``."""
    cells = [_cell(r.times.get(k), r.unit) for k, _ in COLUMNS]
    worst = max(r.agrees.values()) if r.agrees else None
    agree = "—" if worst is None else f"{worst:.1e} (≤ {r.threshold:g})"
    return (f"| `{r.workload}` | {_md(r.size)} | {r.precision} | " + " | ".join(cells)
            + f" | {agree} | {_md(r.status())} |")


def table_head() -> list:
    heads = [h for _, h in COLUMNS]
    return ["| workload | size | precision | " + " | ".join(heads) + " | max rel. diff (bound) | status |",
            "|---|---|---|" + "---:|" * len(heads) + "---:|---|"]


def format_table(rows: list, header: str = "") -> str:
    """The whole table (Markdown), the header line first when given, then each row's notes."""
    lines = ([header, ""] if header else []) + table_head() + [format_row(r) for r in rows]
    notes = [f"- `{r.workload}` ({r.seconds:.0f} s): " + "; ".join(_md(n) for n in r.notes) for r in rows if r.notes]
    return "\n".join(lines + ([""] + notes if notes else []))


def write_markdown(path: str, header: str, command: str, rows: list, finished: bool) -> None:
    """The report: what ran where, the table so far, each row's notes (rewritten after every row, so
    a run cut short keeps what it measured)."""
    state = "finished" if finished else f"in progress ({len(rows)} rows so far)"
    text = ["# dynlab on a GPU", "",
            "One run of `" + command + "` (`benchmarks/gpu.py`): every implementation checked against dynlab's "
            "numba backend in float64 before it is timed (median of the timed calls after a warm-up); public call "
            "= host arrays in and out, device-resident = inputs and results on the GPU, the device synchronised.",
            "", f"- **Run**: {state}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", f"- **Machine**: {header}",
            "", format_table(rows), ""]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(text))


def run_rows(specs, ctx, *, log=None, markdown: str | None = None, header: str = "", command: str = "") -> list:
    """Run each (name, function) of ``specs`` as ``function(ctx) → Row``, one after the other:
    each row printed and flushed as it finishes (and the Markdown rewritten), a row that raises
    reported with its exception and where, and the run going on."""
    log = log or (lambda s: print(s, flush=True))
    rows = []
    for line in table_head():
        log(line)
    for name, fn in specs:
        t0 = time.perf_counter()
        try:
            row = fn(ctx)
        except Exception as exc:
            tb = traceback.extract_tb(exc.__traceback__)
            where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
            row = Row(name, error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} (at {where})")
        row.seconds = time.perf_counter() - t0
        rows.append(row)
        log(format_row(row))
        for note in row.notes:
            log(f"    {row.workload}: {note}")
        if markdown:
            write_markdown(markdown, header, command, rows, finished=False)
    if markdown:
        write_markdown(markdown, header, command, rows, finished=True)
    return rows


# ============================================================================ what ran where
def versions() -> str:
    """The GPU, its driver, CUDA, and the versions of CuPy, numba-cuda, Numba, NumPy, JAX, torch."""
    from importlib.metadata import PackageNotFoundError, version

    from dynlab.backends.gpu.device import runtime

    rt = runtime()
    out = [f"GPU: {rt.device}"]
    try:
        import cupy

        drv, rtv = cupy.cuda.runtime.driverGetVersion(), cupy.cuda.runtime.runtimeGetVersion()
        out.append(f"CUDA driver API {drv // 1000}.{drv % 1000 // 10}, CUDA runtime {rtv // 1000}.{rtv % 1000 // 10}")
    except Exception as exc:
        out.append(f"CuPy/CUDA: {type(exc).__name__}")
    try:
        import subprocess

        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if smi.returncode == 0 and smi.stdout.strip():
            out.append(f"driver {smi.stdout.strip().splitlines()[0]}")
    except (OSError, Exception):
        pass
    for dist in ("cupy-cuda13x", "cupy-cuda12x", "cupy", "numba-cuda", "numba", "numpy", "jax", "jaxlib", "torch"):
        try:
            out.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            continue
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "version", None) is not None:
        out.append(f"torch CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    return "; ".join(out)


def main(quick: bool = False, repeat: int = 3, markdown: str | None = None, tiny: bool = False,
         peers: str = "auto", command: str = "python -m benchmarks.run --gpu", log=None) -> int:
    """Run the table (module docstring): 0 when every row ran and agreed, 1 when one did not, 2 with
    one line on stderr where there is nothing to run on."""
    problem = gpu_problem(tiny)
    if problem is not None:
        print(f"benchmarks --gpu: no GPU to benchmark here: {problem}", file=sys.stderr)
        return 2
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # before JAX is imported (gpu_rows)
    if tiny:
        sys.setswitchinterval(1e-4)   # the simulator's barriers hand the GIL round its threads: ≈ 15× faster
    from . import gpu_rows

    ctx = gpu_rows.Context.make(SIZES["tiny" if tiny else "quick" if quick else "full"], repeat=repeat, peers=peers,
                                tiny=tiny)
    header = versions() + "; " + ctx.peer_state()
    (log or print)(f"# {header}", **({} if log else {"flush": True}))
    rows = run_rows(gpu_rows.ROWS, ctx, log=log, markdown=markdown, header=header, command=command)
    if markdown:
        (log or print)(f"wrote {markdown}")
    return 0 if all(r.ok for r in rows) else 1


__all__ = ["gpu_problem", "Sizes", "SIZES", "sweep_grid", "sweep_models", "irnn_inputs", "gated_inputs", "agreement",
           "median_time", "cores", "Row", "COLUMNS", "format_row", "format_table", "write_markdown", "run_rows",
           "versions", "main", "F64_AGREEMENT"]

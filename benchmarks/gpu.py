"""``python -m benchmarks.run --gpu [--quick] [--markdown FILE]``: the GPU table (the ``gpu`` workload of
docs/design.md, issue 41's goals), one short GPU run that can judge them.

The machinery is here; the rows are ``benchmarks/gpu_rows.py``, what both use ``benchmarks/gpu_common.py``.
One row per workload:

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

import os
import sys
import time
import traceback

from .gpu_common import (COLUMNS, F64_AGREEMENT, SIZES, Row, Sizes, agreement, cores, gated_inputs, irnn_inputs,
                         median_time, sweep_grid, sweep_models)


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


# ============================================================================ the table
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


def run_rows(specs, ctx, *, log=None, markdown: str | None = None, header: str = "", command: str = "",
             after=None) -> list:
    """Run each (name, function) of ``specs`` as ``function(ctx) → Row``, one after the other:
    each row printed and flushed as it finishes (and the Markdown rewritten), a row that raises
    reported with its exception and where, and the run going on; ``after()`` (when given) after
    every row."""
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
        if after is not None:
            after()
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
    rows = run_rows(gpu_rows.ROWS, ctx, log=log, markdown=markdown, header=header, command=command,
                    after=ctx.release_memory)
    if markdown:
        (log or print)(f"wrote {markdown}")
    return 0 if all(r.ok for r in rows) else 1


__all__ = ["gpu_problem", "Sizes", "SIZES", "sweep_grid", "sweep_models", "irnn_inputs", "gated_inputs", "agreement",
           "median_time", "cores", "Row", "COLUMNS", "format_row", "format_table", "write_markdown", "run_rows",
           "versions", "main", "F64_AGREEMENT"]

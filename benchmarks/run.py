"""Run benchmark workloads: ``python -m benchmarks.run [NAME ...] [--repeat N] [--quick] [--markdown FILE] [--isa LEVEL]``.

``python -m benchmarks.run --gpu [--quick] [--markdown FILE] [--repeat N]`` prints the GPU table
instead (``benchmarks/gpu.py``: dynlab's cupy backend at the public call and device-resident, its
numba backend on all cores and two, JAX and torch on the same GPU, each row as it finishes); without
a GPU it refuses in one line (``--tiny`` runs its machinery under Numba's CUDA simulator).

Prints, per workload, every implementation's median and best time and its speed relative to
the baseline, all measured in this one run, after checking each result against the
reference.  ``--markdown FILE`` writes the run as one current report (``report``): the machine,
the versions, the date and the command, then one table of every workload run with its peers and
their ratios, and each workload's sizes and derived ratios (BENCHMARKS.md is this report; its
history is in git).  ``--isa avx2`` or ``--isa sse4.2`` runs them with every library held to
that x86 level (benchmarks/isa.py): how an older CPU would run them, on this one.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import subprocess
import sys

from . import isa
from .harness import format_rows, run_workload


def _modules():
    from . import (cli, complete_fixed_points, equilibria, fixed_points, forward, gated, gradnorm, partition, spectra,
                   sweep, sweep_host, train, train_torch)

    return (forward, gated, cli, gradnorm, equilibria, fixed_points, complete_fixed_points, spectra, sweep, sweep_host,
            partition, train, train_torch)


def all_workloads():
    found = []
    for module in _modules():
        found.extend(module.WORKLOADS)
    return {w.name: w for w in found}


def groups():
    """Names that stand for several workloads (a module's ``GROUPS``), e.g. ``gated-forward``."""
    out = {}
    for module in _modules():
        out.update(getattr(module, "GROUPS", {}))
    return out


def machine() -> str:
    import numpy as np

    import dynlab

    try:
        import numba
        nb = numba.__version__
    except ImportError:
        nb = "absent"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    blas = ""
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {}).get("name", "")
    except Exception:
        pass
    return (f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, NumPy {np.__version__}"
            f"{' (' + blas + ')' if blas else ''}, Numba {nb}, dynlab {dynlab.__version__}")


def gpu_main(argv) -> int:
    """``--gpu``: the GPU table alone (benchmarks/gpu.py; it needs none of the CPU workloads' modules)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.run --gpu")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--quick", action="store_true", help="every row at reduced sizes (≤ 3 minutes on an H100)")
    p.add_argument("--tiny", action="store_true",
                   help="toy sizes under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1): the machinery, not a timing")
    p.add_argument("--repeat", type=int, default=None, help="timed calls per implementation (default 3; --tiny 1)")
    p.add_argument("--markdown", metavar="FILE", help="write the report to FILE, rewritten after every row")
    p.add_argument("--peers", choices=["auto", "none", "on"], default="auto",
                   help="JAX and torch on the same GPU where installed (auto), none, or on (--tiny: on the CPU)")
    args = p.parse_args(argv)
    from . import gpu

    repeat = args.repeat if args.repeat is not None else (1 if args.tiny else 3)
    return gpu.main(quick=args.quick, repeat=repeat, markdown=args.markdown, tiny=args.tiny, peers=args.peers,
                    command="python -m benchmarks.run " + shlex.join(argv))


#: Packages whose versions the report names (``absent`` when not installed; nothing is imported).
VERSIONS = ("numpy", "scipy", "numba", "llvmlite", "xarray", "threadpoolctl", "scipy-openblas32", "jax", "jaxlib", "torch",
            "cupy-cuda12x")


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in VERSIONS:
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            if name in ("numpy", "scipy", "numba", "jax", "torch"):
                out.append(f"{name} absent")
    return ", ".join(out)


def _commit() -> str:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                           cwd=os.path.dirname(os.path.abspath(__file__)))
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        return (r.stdout.strip() + (" (with uncommitted changes)" if dirty else "")) if r.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def report(results, *, header: str, command: str, quick: bool, skipped=(), when=None) -> str:
    """The Markdown report of one run: ``results`` is [(workload, rows, info)] in the order run."""
    when = when or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# dynlab benchmarks", "",
             "One run of `python -m benchmarks.run` (`benchmarks/run.py`): every implementation of a workload is "
             "checked against the workload's reference, then all are timed in interleaved rounds of the same run, so "
             "the ratios compare like with like; peers (JAX, PyTorch) run where installed (`pip install \".[bench]\"`). "
             "Machines are noisy: read the ratios, not one machine's seconds. Earlier reports are in this file's "
             "git history.", "",
             f"- **Date**: {when}",
             f"- **Command**: `{command}`" + (" (reduced sizes: a smoke run, not a measurement)" if quick else ""),
             f"- **Machine**: {header}",
             f"- **Versions**: {versions()}",
             f"- **dynlab commit**: {_commit()}"]
    if skipped:
        lines.append(f"- **Not run in this report**: {', '.join(f'`{s}`' for s in skipped)}")
    lines += ["", "## Every workload", "",
              "Speed is the baseline's median over the implementation's (higher is faster); agreement is the largest "
              "relative difference from the workload's reference implementation.", "",
              "| workload | implementation | median (s) | best (s) | speed vs baseline | agreement |",
              "|---|---|---:|---:|---:|---|"]
    for w, rows, info in results:
        for i, r in enumerate(rows):
            if r.agrees is None:
                agree = "reference" if i == 0 else "not compared" + (f" ({_cell(r.note)})" if r.note else "")
            else:
                agree = f"{r.error:.1e}" + ("" if r.agrees else " **MISMATCH**")
            base = " (baseline)" if r.name == w.baseline else ""
            lines.append(f"| {'`' + w.name + '`' if i == 0 else ''} | {_cell(r.name)}{base} | {r.median:.4g} | "
                         f"{r.best:.4g} | {r.ratio:.3g}× | {agree} |")
    lines += ["", "## The workloads", ""]
    for w, rows, info in results:
        facts = "; ".join(f"{k}: {_cell(v)}" for k, v in info.items() if k != "rtol")
        lines.append(f"- **`{w.name}`**: {_cell(w.description)}." + (f" {facts}." if facts else ""))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if "--gpu" in args_in:
        return gpu_main(args_in)
    known = all_workloads()
    grouped = groups()
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    group_help = "; ".join(f"{k} = {' + '.join(v)}" for k, v in grouped.items())
    p.add_argument("names", nargs="*", help=f"workloads (default: all): {', '.join(known)}; groups: {group_help}")
    p.add_argument("--repeat", type=int, default=None, help="timed calls per implementation")
    p.add_argument("--quick", action="store_true", help="reduced sizes (a smoke run)")
    p.add_argument("--markdown", metavar="FILE", help="write the run as one report to FILE (replacing it)")
    p.add_argument("--isa", choices=["native", *isa.LEVELS], default="native",
                   help="hold Numba, BLAS, NumPy, torch and XLA to this x86 level (benchmarks/isa.py)")
    p.add_argument("--gpu", action="store_true", help="the GPU table (benchmarks/gpu.py) instead of the workloads")
    raw = args_in
    args = p.parse_args(argv)
    names = [n for name in (args.names or list(known)) for n in grouped.get(name, [name])]
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    if args.isa != "native" and os.environ.get(isa.MARK) != args.isa:
        try:
            isa.environment(args.isa)
        except ValueError as e:
            p.error(str(e))
        isa.reexec(args.isa, raw)
    header = f"{machine()}" + (f"; {isa.describe(args.isa)}" if args.isa != "native" else "")
    print(f"Machine: {header}")
    results = []
    for n in names:
        w = known[n]
        print(f"\n{w.name}: {w.description}")
        rows, info = run_workload(w, repeat=args.repeat, quick=args.quick)
        print(format_rows(w, rows, info))
        results.append((w, rows, info))
        bad = [r.name for r in rows if r.agrees is False]
        if bad:
            print(f"WARNING: {', '.join(bad)} disagree with the reference", file=sys.stderr)
    if args.markdown:
        text = report(results, header=header, command="python -m benchmarks.run " + shlex.join(raw), quick=args.quick,
                      skipped=[n for n in known if n not in names])
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"\nwrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

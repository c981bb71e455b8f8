"""Run benchmark workloads: ``python -m benchmarks.run [NAME ...] [--repeat N] [--quick] [--markdown FILE] [--isa LEVEL]``.

``python -m benchmarks.run --gpu [--quick] [--repeat N]`` prints the GPU table instead
(``benchmarks/gpu.py``: dynlab's cupy backend, its numba backend on all cores and two, JAX and
torch on the same GPU); without a GPU it refuses in one line.

Prints, per workload, every implementation's median and best time and its speed relative to
the baseline, all measured in this one run, after checking each result against the
reference.  ``--markdown FILE`` appends the tables (with the machine and versions) to FILE.
``--isa avx2`` or ``--isa sse4.2`` runs them with every library held to that x86 level
(benchmarks/isa.py): how an older CPU would run them, on this one.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys

from . import isa
from .harness import format_rows, run_workload


def _modules():
    from . import cli, equilibria, fixed_points, forward, gated, gradnorm, partition, spectra, sweep, train

    return (forward, gated, cli, gradnorm, equilibria, fixed_points, spectra, sweep, partition, train)


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
    """``--gpu``: the GPU table alone (it needs none of the CPU workloads' modules)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.run --gpu")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--quick", action="store_true", help="reduced sizes (a smoke run)")
    p.add_argument("--repeat", type=int, default=3, help="timed calls per implementation")
    args = p.parse_args(argv)
    from . import gpu

    return gpu.main(quick=args.quick, repeat=args.repeat)


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
    p.add_argument("--markdown", metavar="FILE", help="append the result tables to FILE")
    p.add_argument("--isa", choices=["native", *isa.LEVELS], default="native",
                   help="hold Numba, BLAS, NumPy, torch and XLA to this x86 level (benchmarks/isa.py)")
    p.add_argument("--gpu", action="store_true", help="the GPU table (benchmarks/gpu.py) instead of the workloads")
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
        isa.reexec(args.isa, list(sys.argv[1:] if argv is None else argv))
    header = f"Machine: {machine()}" + (f"; {isa.describe(args.isa)}" if args.isa != "native" else "")
    print(header)
    tables = []
    for n in names:
        w = known[n]
        print(f"\n{w.name}: {w.description}")
        rows, info = run_workload(w, repeat=args.repeat, quick=args.quick)
        table = format_rows(w, rows, info)
        print(table)
        tables.append(table)
        bad = [r.name for r in rows if r.agrees is False]
        if bad:
            print(f"WARNING: {', '.join(bad)} disagree with the reference", file=sys.stderr)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(header + ("  (--quick)" if args.quick else "") + "\n\n" + "\n\n".join(tables) + "\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

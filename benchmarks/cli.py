"""Workload ``cli`` (docs/design.md, *Benchmarks*): wall-clock of whole ``dynlab`` processes.

help        ``dynlab --help`` (target: under 0.5 s — the CLI imports numpy, xarray and
            matplotlib only inside the command that needs them)
version     ``dynlab --version``
phase       ``dynlab phase --model irnn --K 5 --out FILE.png`` repeated, so the Numba cache
            is warm (target: under 3 s); the first, possibly cold, call is reported apart
            by the harness's "first call" line.

Each row runs the installed ``dynlab`` console script in a fresh process, as a user would.
Ratios are taken against ``dynlab --help``; they only show where the time goes.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from .harness import Impl, Workload


def _command() -> list[str]:
    exe = shutil.which("dynlab")
    if exe is None:  # not on PATH: the module entry point of this interpreter
        return [sys.executable, "-m", "dynlab.cli"]
    return [exe]


def _runner(args: list[str]):
    cmd = _command() + args

    def call():
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"))
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc.returncode

    return call


def build(quick: bool):
    out = os.path.join(tempfile.mkdtemp(prefix="dynlab-bench-"), "phase.png")
    impls = [
        Impl("dynlab --help", _runner(["--help"]), check=False),
        Impl("dynlab --version", _runner(["--version"]), check=False),
        Impl("dynlab phase --model irnn --K 5 --out phase.png", _runner(["phase", "--model", "irnn", "--K", "5",
                                                                       "--out", out]), check=False),
        Impl("dynlab phase --model irnn --K 5 --compare rnn,fastrnn", _runner(
            ["phase", "--model", "irnn", "--K", "5", "--compare", "rnn,fastrnn", "--out", out]), check=False),
    ]
    return impls, {"command": " ".join(_command()), "targets": "--help < 0.5 s; repeated phase < 3 s"}


WORKLOADS = [
    Workload("cli", "whole dynlab processes (--help, phase with a warm Numba cache)", build,
             baseline="dynlab --help", repeat=5),
]

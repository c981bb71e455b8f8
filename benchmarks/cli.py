"""Workload ``cli`` (docs/design.md, *Benchmarks*): wall-clock of whole ``dynlab`` processes.

help        ``dynlab --help`` (target: under 0.5 s — the CLI imports numpy, xarray and
            matplotlib only inside the command that needs them)
version     ``dynlab --version``
phase       ``dynlab phase --model irnn --K 5 --out FILE.png`` repeated, so the Numba cache
            is warm (target: under 3 s); the first, possibly cold, call is reported apart
            by the harness's "first call" line.

Each row runs the installed ``dynlab`` console script in a fresh process, as a user would.
Ratios are taken against ``dynlab --help``; they only show where the time goes.

Workload ``cli-first-run``: the first run after an install, when Numba compiles dynlab's kernels.
Each *cold* call gets an empty ``NUMBA_CACHE_DIR`` of its own (what a fresh install sees); each
*warm* call reuses one filled by a first call.  Commands: the README's main job (``phase --compare
rnn,fastrnn``) and the slowest first run measured so far (``gradients --hidden 128 --steps 1000
--no-step-norms``).  The goal (issue 20): a first run within 10 s, or the user told once that
kernels are being compiled, how long it takes and where they are cached: a cold call fails here if
its stderr lacks that notice (``dynlab/_compile_notice.py``), a warm call if it has it.
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


def _first_runner(args: list[str], cache: str | None):
    """A call of ``dynlab ARGS`` with an empty Numba cache each time (``cache`` None) or the warm
    cache ``cache``; checks that the first-run notice is there exactly when kernels compile."""
    cmd = _command() + args

    def call():
        where = cache if cache is not None else tempfile.mkdtemp(prefix="dynlab-cold-")
        env = dict(os.environ, MPLBACKEND="Agg", NUMBA_CACHE_DIR=where)
        env.pop("DYNLAB_COMPILE_NOTICE", None)
        env.pop("DYNLAB_QUIET", None)   # the notice is what is checked: a quiet caller must not silence it
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        told = "dynlab: compiling its Numba kernels" in proc.stderr
        if told != (cache is None):
            raise RuntimeError(f"{' '.join(cmd)}: the first-run notice {'is missing' if cache is None else 'appeared'}"
                               f" with a {'cold' if cache is None else 'warm'} cache")
        if cache is None:
            shutil.rmtree(where, ignore_errors=True)
        return proc.returncode

    return call


def build_first_run(quick: bool):
    tmp = tempfile.mkdtemp(prefix="dynlab-bench-")
    steps = "200" if quick else "1000"
    commands = {
        "phase --compare rnn,fastrnn": ["phase", "--model", "irnn", "--K", "5", "--compare", "rnn,fastrnn",
                                        "--out", os.path.join(tmp, "phase.png")],
        f"gradients --hidden 128 --steps {steps} --no-step-norms": [
            "gradients", "--hidden", "128", "--steps", steps, "--no-step-norms", "--out", os.path.join(tmp, "g.png")],
    }
    warm = os.path.join(tmp, "numba-cache")
    impls = []
    for label, args in commands.items():
        subprocess.run(_command() + args, capture_output=True, env=dict(os.environ, MPLBACKEND="Agg",
                                                                         NUMBA_CACHE_DIR=warm))
        impls.append(Impl(f"{label}, cold cache", _first_runner(args, None), check=False))
        impls.append(Impl(f"{label}, warm cache", _first_runner(args, warm), check=False))
    return impls, {"command": " ".join(_command()),
                   "targets": "a cold first run within 10 s, or the compile notice on stderr (checked)"}


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
    Workload("cli-first-run", "the first run after an install: empty vs warm Numba cache (compile notice checked)",
             build_first_run, baseline="phase --compare rnn,fastrnn, warm cache", repeat=3),
]

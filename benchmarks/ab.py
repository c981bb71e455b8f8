"""A/B of the numba backend's CPU-specific paths: each switched off against on, on the workloads
it serves, in one run: ``python -m benchmarks.ab [SWITCH ...] [--rounds N] [--repeat N] [--quick]
[--markdown FILE]``.

A CPU-specific path stays only where switching it off costs at least ``KEEP`` (10 %) on a
workload it serves (docs/design.md, *Architecture*).  Each switch is a setting of
``dynlab.config`` (read at call time) or, for what Numba compiles in, an environment variable
with a fresh ``NUMBA_CACHE_DIR`` (so that no kernel compiled the other way is loaded from the
cache).  Every measurement runs in a child process of its own; the two variants alternate round
by round (A B, B A, …), so a slow spell of the machine hits both; each child warms up (compiles)
before it times ``repeat`` calls, and the medians of all the rounds' calls are compared.

The switches and what each serves:

``fast-activations``  the vectorisable float64 tanh and sigmoid of the batched and training passes
                      (``loops._tanh_vectorised``) against libm's (``DYNLAB_NUMBA_FAST_ACTIVATIONS=0``)
``small-gemm``        per-step products cut by rows for OpenBLAS's small-matrix path
                      (``config.BLAS_SMALL_GEMM = False``)
``tape-pool``         tape arrays reused between training steps without a workspace
                      (``config.TAPE_POOL_BYTES = 0``)
``blas-threads``      BLAS on one thread inside the numba backend (``config.NUMBA_BLAS_THREADS = None``)
``thread-splits``     independent blocks of sequences or points on dynlab's own threads
                      (``config.*_THREADS = 1``)
``certified-norms``   σ₁ by certified power iteration and Lanczos (``config.NORM_MAXIT = 0``,
                      ``GRAM_LANCZOS_MAXIT = 0``: LAPACK's ``dsyevr`` for every norm)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

#: The cost of switching a path off, above which it stays (off/on median ratio).
KEEP = 1.10

THREADS = ("TRAIN_THREADS", "VECTORISED_SIMULATION_THREADS", "GATED_SIMULATION_THREADS", "JACOBIAN_THREADS",
           "PARTITION_THREADS")

#: switch → (what switches it off: {"config": {...}} or {"env": {...}}, the cases it serves)
SWITCHES = {
    "fast-activations": ({"env": {"DYNLAB_NUMBA_FAST_ACTIVATIONS": "0"}},
                         ("forward-large", "train-irnn", "train-gru", "train-lstm")),
    "small-gemm": ({"config": {"BLAS_SMALL_GEMM": False}}, ("forward-large", "train-irnn", "train-gru")),
    "tape-pool": ({"config": {"TAPE_POOL_BYTES": 0}}, ("train-irnn", "train-gru")),
    "blas-threads": ({"config": {"NUMBA_BLAS_THREADS": None}}, ("gradnorm", "train-irnn", "templates", "implicit")),
    "thread-splits": ({"config": {k: 1 for k in THREADS}}, ("forward-large", "train-irnn", "templates",
                                                            "jacobians")),
    "certified-norms": ({"config": {"NORM_MAXIT": 0, "GRAM_LANCZOS_MAXIT": 0}}, ("gradnorm",)),
}


def _cases(quick: bool) -> dict:
    """name → a no-argument call of dynlab's numba backend (built once; sizes as BENCHMARKS.md's)."""
    import numpy as np

    import dynlab as dl
    from dynlab.train import backprop as bp

    s = 4 if quick else 1
    rng = np.random.default_rng(0)

    def forward_large():
        m = dl.make_model("irnn", 128, 8, K=5, eta=0.5, seed=0)
        x = rng.standard_normal((256 // s, 1000 // s, 8))
        return lambda: dl.simulate(m, x)

    def train(kind):
        def build():
            kw = {"K": 5, "eta": 0.5} if kind == "irnn" else {}
            m = dl.make_model(kind, 128 // s, 2, seed=0, **kw)
            x, y = dl.tasks.adding_problem(200 // s, 128 // s, seed=0)
            ro = bp.init_readout(m.hidden, 1, seed=0)
            return lambda: bp.loss_and_grads(m, ro, x, y, loss="mse")
        return build

    def gradnorm():
        m = dl.make_model("irnn", 128 // s, 1, K=5, eta=0.5, seed=0)
        x = dl.tasks.random_walk(1000 // s, 1, variance=1.0, seed=0)
        return lambda: dl.gradient_norms(m, x)

    def templates():
        m = dl.make_model("rnn", 128 // s, 1, activation="relu", seed=0)
        x = rng.uniform(0, 1, (4, 200 // s, 1))
        W = rng.standard_normal((10, m.hidden))
        return lambda: dl.templates(m, x, W)

    def implicit():
        m = dl.make_model("implicit", 64, 16, seed=0)
        X = rng.standard_normal((1000 // s, 16))
        return lambda: dl.implicit_equilibrium(m, X)

    def jacobians():
        m = dl.make_model("irnn", 64, 2, K=5, eta=0.5, seed=0)
        x = rng.standard_normal((4, 500 // s, 2))
        return lambda: dl.jacobians(m, x, inputs=False)

    builders = {"forward-large": forward_large, "train-irnn": train("irnn"), "train-gru": train("gru"),
                "train-lstm": train("lstm"), "gradnorm": gradnorm, "templates": templates, "implicit": implicit,
                "jacobians": jacobians}
    return builders


def _child(switch: str, variant: str, case: str, repeat: int, quick: bool) -> list:
    """Times ``repeat`` calls of ``case`` with ``switch`` on or off (after one warm-up call)."""
    from dynlab import config

    off, _ = SWITCHES[switch]
    if variant == "off":
        for k, v in off.get("config", {}).items():
            setattr(config, k, v)
    call = _cases(quick)[case]()
    call()
    times = []
    for _ in range(repeat):
        time.sleep(0.05)
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def _run_child(switch, variant, case, repeat, quick, caches) -> list:
    off, _ = SWITCHES[switch]
    env = dict(os.environ)
    if "env" in off:
        env["NUMBA_CACHE_DIR"] = caches[variant]
        if variant == "off":
            env.update(off["env"])
    cmd = [sys.executable, "-m", "benchmarks.ab", "--child", switch, variant, case, "--repeat", str(repeat)]
    if quick:
        cmd.append("--quick")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(switches, rounds: int, repeat: int, quick: bool) -> list:
    """[(switch, case, median on, median off, off/on, kept)] for every switch and case it serves."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        caches = {"on": os.path.join(tmp, "on"), "off": os.path.join(tmp, "off")}
        for switch in switches:
            for case in SWITCHES[switch][1]:
                times = {"on": [], "off": []}
                for r in range(rounds):
                    for variant in (("on", "off") if r % 2 == 0 else ("off", "on")):
                        times[variant] += _run_child(switch, variant, case, repeat, quick, caches)
                on, off = statistics.median(times["on"]), statistics.median(times["off"])
                rows.append((switch, case, on, off, off / on, off / on >= KEEP))
                print(f"{switch:17s} {case:14s} on {on * 1e3:9.1f} ms  off {off * 1e3:9.1f} ms  "
                      f"off/on {off / on:5.2f}  {'kept' if off / on >= KEEP else 'below 1.10'}", flush=True)
    return rows


def markdown(rows) -> str:
    lines = ["| switch | workload | on (ms) | off (ms) | off/on | ≥ 1.10? |", "|---|---|---:|---:|---:|---|"]
    for switch, case, on, off, ratio, kept in rows:
        lines.append(f"| {switch} | {case} | {on * 1e3:.1f} | {off * 1e3:.1f} | {ratio:.2f} | {'yes' if kept else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__.split("\n\n")[0])
    p.add_argument("switches", nargs="*", help=f"default: all of {', '.join(SWITCHES)}")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--markdown", metavar="FILE")
    p.add_argument("--child", nargs=3, metavar=("SWITCH", "VARIANT", "CASE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child, args.repeat, args.quick)))
        return 0
    unknown = [s for s in args.switches if s not in SWITCHES]
    if unknown:
        p.error(f"unknown switch {unknown[0]!r}; choose from {', '.join(SWITCHES)}")
    rows = measure(args.switches or list(SWITCHES), args.rounds, args.repeat, args.quick)
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as fh:
            fh.write(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

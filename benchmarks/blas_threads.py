"""BLAS threads: every path with loops of BLAS products, timed with 1 and with 2 BLAS threads.

``python -m benchmarks.blas_threads [FAMILY ...] [--repeat N]`` prints, per path, the median
(and best) wall time with BLAS on 1 thread and on 2 threads and their ratio, the two runs
interleaved round by round so that a slow spell of a shared machine hits both alike.  The
``*_BLAS_THREADS`` tunables of ``dynlab.config`` are set to None for the run, so the outer
limit (``dynlab._blas.limit_blas_threads``) alone decides the threads: the numbers say which
default each family's tunable should have (documented there).  Families: ``train``,
``gradients``, ``lyapunov``, ``spectra``, ``equilibria``, ``continuation``, ``partition``,
``simulation``, ``sweep``.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

import numpy as np

import dynlab as dl
from dynlab import config
from dynlab.backends.numba.threads import limit_blas_threads

#: Tunables switched off for the measurement (the outer limit decides).
TUNABLES = tuple(n for n in dir(config) if n.endswith("_BLAS_THREADS"))


def _irnn(D, K=5, d=1, seed=0, **kw):
    return dl.make_model("irnn", D, d, K=K, eta=kw.pop("eta", 0.5), seed=seed, **kw)


def _walk(T, B, d=1, seed=0):
    return dl.tasks.random_walk(steps=T, inputs=d, variance=10.0, batch=B, seed=seed)


# ---------------------------------------------------------------------------- the paths
def _train():
    from dynlab.train import backprop as bp

    out = []
    for D, K, T, B in ((128, 5, 200, 128), (32, 5, 200, 128), (8, 5, 200, 128)):
        m = dl.make_model("irnn", D, 2, K=K, eta=0.5, seed=0)
        x, y = dl.tasks.adding_problem(T, B, seed=0)
        ro = bp.init_readout(D, 1, seed=0)
        out.append((f"loss_and_grads iRNN D={D} K={K} T={T} B={B}",
                    lambda m=m, x=x, y=y, ro=ro: bp.loss_and_grads(m, ro, x, y, loss="mse")))
    m = dl.make_model("rnn", 128, 2, seed=0)
    x, y = dl.tasks.adding_problem(200, 128, seed=0)
    ro = bp.init_readout(128, 1, seed=0)
    out.append(("loss_and_grads RNN D=128 T=200 B=128", lambda: bp.loss_and_grads(m, ro, x, y, loss="mse")))
    task = dl.tasks.make_task("adding", 100, seed=0)
    m64 = dl.make_model("irnn", 64, 2, K=5, eta=0.1, seed=0)
    out.append(("train_model iRNN D=64 K=5 adding T=100, 4 iterations (batch 128, 1 record)",
                lambda: dl.train_model(m64, task, iterations=4, lr=1e-3, record_every=4, progress=False)))
    out.append(("train_implicit oscillator, 1000 samples, hidden 64 + 2, 20 full-batch steps",
                lambda: dl.train_implicit("oscillator", hidden=64, hidden2=2, iterations=20, samples=1000, seed=0)))
    return out


def _gradients():
    out = []
    for D, T in ((64, 500), (128, 300)):
        m = _irnn(D)
        x = _walk(T, 1)
        out.append((f"gradient_norms iRNN D={D} K=5 T={T}", lambda m=m, x=x: dl.gradient_norms(m, x)))
    m = _irnn(64)
    x = _walk(500, 4)
    out.append(("jacobians iRNN D=64 K=5 T=500 B=4", lambda: dl.jacobians(m, x)))
    return out


def _lyapunov():
    out = []
    m = dl.make_model("rnn", 64, 1, seed=0)
    x = _walk(1000, 1)
    out.append(("lyapunov RNN D=64 T=1000 (k=D: J_t, QR per step)", lambda: dl.lyapunov(m, x)))
    m = _irnn(64)
    out.append(("lyapunov iRNN D=64 K=5 T=500 k=64", lambda: dl.lyapunov(m, x[:500])))
    m2 = _irnn(2)
    x2 = _walk(5000, 1)
    out.append(("lyapunov iRNN D=2 K=5 T=5000", lambda: dl.lyapunov(m2, x2)))
    return out


def _spectra():
    out = []
    m = _irnn(2)
    x = _walk(1000, 1)
    out.append(("spectrum iRNN D=2 T=1000 (step too)", lambda: dl.spectrum(m, x)))
    m = _irnn(64)
    x = _walk(250, 2)
    out.append(("spectrum iRNN D=64 T=250 B=2 (step too)", lambda: dl.spectrum(m, x)))
    out.append(("spectrum iRNN D=64 T=250 B=2 at equilibrium", lambda: dl.spectrum(m, x, at="equilibrium")))
    return out


def _equilibria():
    out = []
    m = _irnn(32)
    out.append(("fixed_points iRNN D=32 (64 starts)", lambda: dl.fixed_points(m, np.zeros(1))))
    m2 = dl.make_model("rnn", 64, 1, seed=0, weight_scale=1.5)
    out.append(("fixed_points RNN D=64 (64 starts)", lambda: dl.fixed_points(m2, np.zeros(1))))
    m3 = _irnn(64)
    xs = np.linspace(-3, 3, 400)[:, None]
    out.append(("equilibrium iRNN D=64 at 400 inputs (newton)", lambda: dl.equilibrium(m3, xs)))
    m4 = _irnn(2)
    out.append(("irnn_equilibrium iRNN D=2 at 2000 inputs", lambda: dl.irnn_equilibrium(m4, np.linspace(-3, 3, 2000)[:, None])))
    m5 = dl.make_model("irnn", 64, 1, K=5, eta=0.5, weight_scale=0.4, seed=0)
    x5 = _walk(500, 1)[0]
    h5 = dl.simulate(m5, x5)["h"].values
    hp5 = np.vstack([np.zeros((1, 64)), h5[:-1]])
    out.append(("convergence iRNN D=64 T=500 K_max=50", lambda: dl.convergence(m5, x5, hp5, K_max=50)))
    return out


def _continuation():
    out = []
    m = _irnn(2, eta=0.5)
    out.append(("continuation iRNN D=2 over x in [-5, 5]", lambda: dl.continuation(m, "x", -5.0, 5.0)))
    for D in (32, 128):
        m = dl.make_model("ctrnn", D, 1, seed=0, weight_scale=2.0)
        out.append((f"continuation CTRNN D={D} over x in [-5, 5]", lambda m=m: dl.continuation(m, "x", -5.0, 5.0)))
    return out


def _partition():
    out = []
    rng = np.random.default_rng(0)
    m = dl.make_model("rnn", 128, 1, activation="relu", seed=0)
    x = rng.uniform(0, 1, (4, 200, 1))
    Wo, bo = rng.standard_normal((10, 128)) / np.sqrt(128), rng.standard_normal(10)
    out.append(("templates ReLU RNN D=128 T=200 B=4 C=10", lambda: dl.templates(m, x, Wo, bo)))
    m2 = dl.make_model("rnn", 32, 1, activation="relu", seed=0)
    x2 = rng.uniform(0, 1, (64, 100, 1))
    W2, b2 = rng.standard_normal((10, 32)) / np.sqrt(32), np.zeros(10)
    y2 = rng.integers(0, 10, 64)
    out.append(("random_h0_monte_carlo ReLU RNN D=32 T=100 B=64, 64 pairs",
                lambda: dl.random_h0_monte_carlo(m2, x2, y2, W2, b2, sigma=0.1, loss="ce", pairs=64)))
    out.append(("partition ReLU RNN D=128 T=200 B=4", lambda: dl.partition(m, x)))
    return out


def _simulation():
    out = []
    for D, B, T in ((128, 128, 200), (256, 256, 100), (64, 1024, 100)):
        m = _irnn(D, d=2)
        x = np.random.default_rng(0).standard_normal((B, T, 2))
        out.append((f"simulate iRNN D={D} K=5 B={B} T={T} (vectorised kernel)", lambda m=m, x=x: dl.simulate(m, x)))
    m = dl.make_model("rnn", 256, 2, seed=0)
    x = np.random.default_rng(0).standard_normal((256, 200, 2))
    out.append(("simulate RNN D=256 B=256 T=200 (vectorised kernel)", lambda: dl.simulate(m, x)))
    return out


def _sweep():
    out = []
    out.append(("sweep lyapunov, RNN D=32 T=300, 4 points",
                lambda: dl.sweep("lyapunov", {"weight_scale": [0.5, 1.0, 1.5, 2.0]},
                                 fixed={"model": "rnn", "hidden": 32, "steps": 300})))
    out.append(("sweep spectrum, iRNN D=32 T=100, 4 points",
                lambda: dl.sweep("spectrum", {"eta": [0.1, 0.2, 0.4, 0.8]},
                                 fixed={"model": "irnn", "hidden": 32, "steps": 100})))
    return out


FAMILIES = {"train": _train, "gradients": _gradients, "lyapunov": _lyapunov, "spectra": _spectra,
            "equilibria": _equilibria, "continuation": _continuation, "partition": _partition,
            "simulation": _simulation, "sweep": _sweep}


# ---------------------------------------------------------------------------- timing
def time_threads(fn, repeat: int, threads=(1, 2)) -> dict:
    """Median and best seconds of ``fn()`` with BLAS on each number of ``threads``, interleaved."""
    for n in threads:  # warm up: JIT compilation, caches
        with limit_blas_threads(n):
            fn()
    times = {n: [] for n in threads}
    for _ in range(repeat):
        for n in threads:
            gc.collect()
            with limit_blas_threads(n):
                t0 = time.perf_counter()
                fn()
                times[n].append(time.perf_counter() - t0)
    return {n: (statistics.median(v), min(v)) for n, v in times.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.blas_threads", description=__doc__.split("\n\n")[0])
    p.add_argument("families", nargs="*", help=f"default: all of {', '.join(FAMILIES)}")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--match", default="", help="only the paths whose label contains this text")
    args = p.parse_args(argv)
    names = args.families or list(FAMILIES)
    for n in names:
        if n not in FAMILIES:
            p.error(f"unknown family {n!r}; choose from {', '.join(FAMILIES)}")
    saved = {n: getattr(config, n) for n in TUNABLES}
    for n in TUNABLES:
        setattr(config, n, None)
    try:
        print(f"load average at start: {os.getloadavg()}; {os.cpu_count()} cores; repeat {args.repeat}")
        print("| family | path | 1 thread median (best) s | 2 threads median (best) s | 2 threads / 1 thread |")
        print("|---|---|---:|---:|---:|")
        for fam in names:
            for label, fn in FAMILIES[fam]():
                if args.match not in label:
                    continue
                r = time_threads(fn, args.repeat)
                (m1, b1), (m2, b2) = r[1], r[2]
                print(f"| {fam} | {label} | {m1:.4g} ({b1:.4g}) | {m2:.4g} ({b2:.4g}) | {m2 / m1:.2f} |", flush=True)
        print(f"load average at end: {os.getloadavg()}")
    finally:
        for n, v in saved.items():
            setattr(config, n, v)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The cost of each gallery item at the paper's sizes and budget on this machine (issue 42).

``python -m dynlab.figures._estimate [--out FILE]`` times a few training steps of every cell an item
trains, at the paper's sizes (hidden D, sequence length T, inputs, batch, the optimiser), on synthetic
inputs of the paper's shapes (a step's cost does not depend on the values, so the real MNIST / HAR data
are not needed to time it), and extrapolates: seconds per step × the paper's steps × cells × seeds.
It writes ``paper_costs.json`` beside this module; each recipe's ``Recipe.paper_cost`` is read from it
(``cost_of``), so the estimate a record prints is the one this code measured, with the machine's load.

The papers' budgets where they state none are assumptions, said in each line: the iRNN paper's copy
task is taken at its adding budget (2000 iterations); its MNIST / HAR items at 20 and 30 epochs; the
MASO paper's "200 epochs" at batch 64; the implicit paper's "400 epochs of 200 steps" at a batch that
makes an epoch one pass over its 3.2·10⁶ training samples (16 000).
"""
from __future__ import annotations

import json
import os
import time

import numpy as np

PATH = os.path.join(os.path.dirname(__file__), "paper_costs.json")
SEEDS = 5


def _task(T: int, d: int, outputs: int, loss: str, n: int = 512):
    """A sequence task of the paper's shapes with random inputs and labels (timing only)."""
    from ..tasks.sequences import Task

    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, T, d))
    if loss == "mse":
        y = rng.random((n, 1))
    elif loss == "ce-seq":
        y = rng.integers(0, outputs, (n, T))
    else:
        y = rng.integers(0, outputs, n)
    data = {k: (x, y) for k in ("train", "val", "test")}
    return Task("timing", loss, d, outputs, T, 1.0, "none", data, {}, 0)


def step_seconds(key: str, *, T: int, d: int, D: int, batch: int, outputs: int = 1, loss: str = "mse",
                 optimiser: str = "adam", steps: int = 3) -> float:
    """Seconds per training step of the ``irnn._training`` setting ``key`` (or ``relu-rnn``,
    ``relu-rnn-2``: the MASO paper's identity-initialised ReLU RNN of 1 or 2 layers) at these sizes."""
    import dynlab as dl

    from .irnn._training import build
    from .maso._tables import network

    task = _task(T, d, outputs, loss)
    if key.startswith("relu-rnn"):
        m, freeze = network(2 if key.endswith("-2") else 1, D, d, 0), None
    else:
        m, freeze = build(key, D, d, T, 0)
    kw = dict(lr=1e-3, batch=batch, optimiser=optimiser, freeze=freeze, progress=False, seed=0)
    dl.train_model(m, task, iterations=1, record_every=1, diag_batch=1, **kw)          # compile, warm caches
    t0 = time.perf_counter()
    dl.train_model(m, task, iterations=steps, record_every=steps, diag_batch=1, **kw)
    return (time.perf_counter() - t0) / steps


def implicit_step_seconds(hidden: int, batch: int, *, feedforward: bool = False, steps: int = 2) -> float:
    """Seconds per step of the two-layer implicit (or feed-forward) oscillator net at ``batch``."""
    import dynlab as dl

    task = dl.tasks.damped_oscillator(max(batch * 2, 2000), window=20, seed=0)
    kw = dict(hidden=hidden, hidden2=2, batch=batch, eval_every=10 ** 6, feedforward=feedforward, seed=0)
    dl.train_implicit(task, iterations=1, **kw)
    t0 = time.perf_counter()
    dl.train_implicit(task, iterations=steps, **kw)
    return (time.perf_counter() - t0) / steps


#: item → (what is timed: [(cell key, copies, sizes)], the paper's steps per run, what the budget assumes)
ADD = dict(d=2, D=128, batch=128)
HAR = dict(T=128, d=9, D=80, batch=128, outputs=2, loss="ce")
MNIST = dict(T=784, d=1, D=128, batch=128, outputs=10, loss="ce")
ITEMS = {
    "irnn-fig3-add": ([(k, n, dict(ADD, T=200)) for k, n in (("irnn-K1", 2), ("irnn-K5", 1), ("irnn-K10", 1))],
                      1000, "1000 iterations at T = 200 (§4.2); the iRNN's K = 1, 5, 10 and the K = 1 control"),
    "irnn-fig4-copy": ([(k, 1, dict(d=10, D=128, batch=128, outputs=9, loss="ce-seq", T=T))
                        for T in (220, 520) for k in ("irnn-K5", "fastrnn", "antisym-g0.01-e0.1", "rnn", "lstm")],
                       2000, "delays 200 and 500; 2000 iterations assumed (the paper states its adding budget only)"),
    "irnn-fig5-add-length": ([(k, 1, dict(ADD, T=T)) for T in (100, 200, 400, 750)
                              for k in ("irnn-K5", "rnn", "lstm", "fastrnn-eta0.01", "antisym-g0.01-e0.1")],
                             2000, "2000 iterations at T = 100, 200, 400, 750 (§4.3.1, footnote 4); five cells"),
    "irnn-ablation-baselines": ([(k, n, dict(ADD, T=200)) for k, n in (("fastrnn-eta0.01", 2), ("fastrnn-eta0.001", 1),
                                                                       ("antisym-g0.01-e0.1", 1),
                                                                       ("antisym-g0.01-e0.001", 1))],
                                1000, "1000 iterations at T = 200 (§4.2); the four cells and the null control"),
    "irnn-har2": ([(k, 1, HAR) for k in ("irnn-K1", "irnn-K3", "irnn-K5", "irnn-sigmoid-K1", "irnn-sigmoid-K3",
                                         "irnn-sigmoid-K5", "rnn")] + [("irnn-K1", 1, HAR)],
                  1700, "HAR-2, 30 epochs (1700 iterations: the paper trains to convergence without a count); the "
                        "runs irnn-fig6/7/8 and irnn-table11 share"),
    "irnn-table1-pixel-digits": ([(k, n, MNIST) for k, n in (("fastrnn", 2), ("rnn", 1), ("lstm", 2),
                                                             ("antisym-g0.01-e0.01", 2), ("irnn-K1", 4), ("irnn-K2", 1),
                                                             ("irnn-K3", 1))],
                                 8600, "MNIST and permuted MNIST, 20 epochs (8600 iterations; the paper: to convergence)"),
    "irnn-table2-noisy-digits": ([(k, 1, dict(MNIST, T=1000, d=28)) for k in ("fastrnn", "lstm", "antisym-g0.01-e0.01",
                                                                            "irnn-K1")],
                                 8600, "Noisy-MNIST (T = 1000, d = 28), 20 epochs"),
    "maso-codes": ([("relu-rnn", 1, dict(MNIST, batch=64, optimiser="rmsprop"))], 156000,
                   "MNIST, one ReLU RNN per seed, 200 epochs of 50 000 images at batch 64 (the batch assumed); the "
                   "networks maso-fig2/3/5/6 share"),
    "maso-table1-h0": ([(k, n, dict(MNIST, batch=64, optimiser="rmsprop")) for k, n in (("relu-rnn", 4), ("relu-rnn-2", 4),
                                                                                        ("gru", 4), ("lstm", 2))],
                       156000, "MNIST and permuted MNIST, 200 epochs at batch 64: 1 and 2 layers × zero and random "
                               "h₀, the GRU both ways, the LSTM"),
    "maso-table4-grid": ([("relu-rnn", 40, dict(MNIST, batch=64, optimiser="rmsprop"))], 156000,
                         "MNIST, 200 epochs at batch 64, the paper's grid: 5 σ_ε × 4 rates × 2 optimisers"),
    "maso-fig4-random-h0": ([("relu-rnn", 7, dict(ADD, T=100, D=128, batch=50, optimiser="rmsprop"))], 100000,
                            "adding T = 100, 100 epochs of 1000 iterations, 3 σ_ε × 2 tasks and the control"),
}


def measure() -> dict:
    """Time every item of ``ITEMS`` (and the implicit items) once; returns name → record."""
    out = {}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for name, (cells, steps, note) in ITEMS.items():
        per = [(k, n, step_seconds(k, **sizes)) for k, n, sizes in cells]
        total = sum(n * s for _, n, s in per) * steps * SEEDS
        out[name] = {"seconds": total, "per_step": {f"{k}@T={sz['T']}": round(s, 4) for (k, _, s), (_, _, sz)
                                                    in zip(per, cells)}, "steps": steps, "note": note}
    imp = {h: implicit_step_seconds(h, 16000) for h in (5,)}
    ff = implicit_step_seconds(5, 16000, feedforward=True)
    out["implicit-fig6-oscillator"] = {"seconds": (2 * imp[5] + 2 * ff) * 80000 * 12, "steps": 80000,
                                       "per_step": {"implicit h=5": round(imp[5], 4), "feed-forward h=5": round(ff, 4)},
                                       "note": "4·10⁶ samples, 400 epochs of 200 steps (batch 16 000 assumed), 12 runs; "
                                               "implicit exact and semi-gradient, two feed-forward nets"}
    out["implicit-fig7-size"] = {"seconds": out["implicit-fig6-oscillator"]["seconds"] * 3 / 12 * 5 / 2 * 2,
                                 "steps": 80000, "per_step": out["implicit-fig6-oscillator"]["per_step"],
                                 "note": "as implicit-fig6 at three implicit sizes and their matched feed-forward "
                                         "nets, 5 seeds (the paper's sizes are not stated; scaled from h = 5)"}
    for r in out.values():
        r["load"] = round(load, 1)
    return out


def describe(rec: dict) -> str:
    """One line of a record: the estimate and what it rests on."""
    s = rec["seconds"]
    when = f"{s / 3600:.1f} h" if s < 2 * 86400 else f"{s / 86400:.0f} days"
    return (f"≈ {when} on this machine's two shared cores (load {rec['load']:g} when timed; "
            + ", ".join(f"{k} {v:.3g} s/step" for k, v in list(rec["per_step"].items())[:4])
            + (", …" if len(rec["per_step"]) > 4 else "") + f"; {rec['note']})")


def cost_of(name: str, fallback: str = "not timed yet (python -m dynlab.figures._estimate)") -> str:
    """The recorded estimate of an item (``paper_costs.json``), as a sentence."""
    key = {"irnn-fig6-convergence": "irnn-har2", "irnn-fig7-eigenvalues": "irnn-har2", "irnn-fig8-gradnorm": "irnn-har2",
           "irnn-table11-activation": "irnn-har2", "maso-fig2-codes": "maso-codes", "maso-fig3-templates": "maso-codes",
           "maso-fig5-neighbours": "maso-codes", "maso-fig6-tsne": "maso-codes"}.get(name, name)
    try:
        with open(PATH, encoding="utf-8") as f:
            rec = json.load(f).get(key)
    except (OSError, ValueError):
        rec = None
    return describe(rec) if rec else fallback


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=PATH)
    args = p.parse_args(argv)
    res = measure()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1, ensure_ascii=False)
    for name, rec in res.items():
        print(f"{name}: {describe(rec)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

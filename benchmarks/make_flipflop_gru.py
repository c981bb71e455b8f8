"""Make ``benchmarks/data/flipflop_gru64.npz``: the trained 3-bit flip-flop GRU of the
``fixed-points`` workload.  ``python -m benchmarks.make_flipflop_gru [--iterations N]``.

A GRU (D = 64, 3 inputs, PyTorch's initialisation, ``make_model("gru", 64, 3, seed=0)``) and a
linear read-out are trained on ``make_task("flipflop", 100, seed=0)`` (p = 0.05 pulses, MSE at
every step) with dynlab's exact BPTT: ``dl.train_model`` with Adam, lr 1e-2, batch 64.  The file
holds PyTorch's parameter layout under dynlab's names (``W_ih``, ``W_hh``, ``b_ih``, ``b_hh``), the
read-out (``W_out``, ``b_out``) and how it was made (``iterations``, ``lr``, ``batch``, ``seed``,
``steps``, ``val_loss``, ``train_seconds``, ``dynlab_version``).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import dynlab as dl

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "flipflop_gru64.npz")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.make_flipflop_gru", description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=1500)
    p.add_argument("--out", default=OUT)
    args = p.parse_args(argv)
    D, T, lr, batch, seed = 64, 100, 1e-2, 64, 0
    task = dl.make_task("flipflop", T, seed=seed, n_train=4000, n_val=128, n_test=64)
    m0 = dl.make_model("gru", D, 3, seed=seed)
    t0 = time.perf_counter()
    res = dl.train_model(m0, task, iterations=args.iterations, lr=lr, batch=batch, seed=seed,
                         record_every=max(1, args.iterations // 10), progress=False)
    secs = time.perf_counter() - t0
    val = float(res.history["val_loss"].values[-1])
    m = res.model
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    np.savez(args.out, W_ih=m.W_ih, W_hh=m.W_hh, b_ih=m.b_ih, b_hh=m.b_hh, W_out=res.readout["W_out"],
             b_out=res.readout["b_out"], iterations=args.iterations, lr=lr, batch=batch, seed=seed, steps=T,
             val_loss=val, train_seconds=secs, dynlab_version=dl.__version__)
    print(f"wrote {args.out}: validation MSE {val:.3g} after {args.iterations} iterations ({secs:.0f} s)")
    print("val_loss history:", np.round(res.history["val_loss"].values, 5))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

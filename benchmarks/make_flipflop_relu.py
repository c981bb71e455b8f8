"""Make ``benchmarks/data/flipflop_relu{16,32}.npz``: the trained ReLU RNNs of the
``complete-fixed-points`` workloads.  ``python -m benchmarks.make_flipflop_relu [--iterations N]``.

An Elman RNN with ReLU (h_t = relu(U h_(t-1) + W x_t + b); D = 16 and 32, 3 inputs,
``make_model("rnn", D, 3, seed=0, activation="relu", weight_scale=0.5)``) and a linear read-out are
trained on ``make_task("flipflop", 100, seed=0)`` (p = 0.05 pulses, MSE at every step) with dynlab's
exact BPTT: ``dl.train_model`` with Adam, lr 3e-3, batch 64, gradient clipping at 1.  The file holds
U, W, b, the read-out (W_out, b_out) and how it was made (iterations, lr, batch, seed, steps,
val_loss, train_seconds, dynlab_version).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import dynlab as dl

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.make_flipflop_relu", description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=1500)
    args = p.parse_args(argv)
    T, lr, batch, seed = 100, 3e-3, 64, 0
    for D in (16, 32):
        task = dl.make_task("flipflop", T, seed=seed, n_train=2000, n_val=64, n_test=64)
        m0 = dl.make_model("rnn", D, 3, seed=seed, activation="relu", weight_scale=0.5)
        t0 = time.perf_counter()
        res = dl.train_model(m0, task, iterations=args.iterations, lr=lr, batch=batch, seed=seed, clip=1.0,
                             record_every=max(1, args.iterations // 10), progress=False)
        secs = time.perf_counter() - t0
        val = float(res.history["val_loss"].values[-1])
        m = res.model
        out = os.path.join(HERE, f"flipflop_relu{D}.npz")
        os.makedirs(HERE, exist_ok=True)
        np.savez(out, U=m.U, W=m.W, b=m.b, W_out=res.readout["W_out"], b_out=res.readout["b_out"],
                 iterations=args.iterations, lr=lr, batch=batch, seed=seed, steps=T, val_loss=val,
                 train_seconds=secs, dynlab_version=dl.__version__)
        print(f"wrote {out}: validation MSE {val:.3g} after {args.iterations} iterations ({secs:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

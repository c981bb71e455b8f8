"""The numbers tests/test_isa.py compares between this CPU's code and an older x86 level's.

``results()`` computes, with whatever code Numba generates in this process: the fused kernels'
tanh and sigmoid on the grids of tests/test_activations.py and tests/test_gated_kernels.py
(the grids too: NumPy's logspace is its own SIMD code per x86 level, and differs by an ulp),
``dl.simulate`` of an iRNN, a GRU and an LSTM through both numba paths (the jitted loops and the
vectorised BLAS kernel), and the exact training gradients of each.  test_isa.py calls it in its
own process (native code) and runs this file as a script, ``python isa_child.py OUT.npz``, in a
process whose Numba targets the older level; the script saves the same dict to OUT.npz.
"""
from __future__ import annotations

import sys

import numpy as np


def activation_grids():
    """The grids of the native ulp tests (tests/test_activations.py: tanh; tests/test_gated_kernels.py:
    sigmoid), which take them from here."""
    rng = np.random.default_rng(0)
    tanh_x = np.concatenate([np.linspace(-25.0, 25.0, 200_001), rng.standard_normal(100_000) * 4.0,
                             np.logspace(-300, 1.5, 20_000), -np.logspace(-300, 1.5, 20_000),
                             np.nextafter(0.625, [0.0, 1.0]), [0.625, -0.625, 19.999999, 20.0, 20.000001]])
    rng = np.random.default_rng(0)
    sig_x = np.concatenate([np.linspace(-708.0, 708.0, 400_001), rng.standard_normal(100_000) * 6.0,
                            np.logspace(-300, 2.8, 5_000), -np.logspace(-300, 2.8, 5_000)])
    return tanh_x, sig_x


def results() -> dict:
    import dynlab
    import dynlab.config
    from dynlab.backends.numba import loops as numba_cpu
    from dynlab.train import backprop as bp

    out = {}
    tanh_x, sig_x = activation_grids()
    out["tanh_x"], out["sigmoid_x"] = tanh_x, sig_x   # NumPy's SIMD logspace differs by level, by an ulp
    z = tanh_x.copy()[None]
    numba_cpu.tanh_inplace(z)
    out["tanh"] = z[0]
    z = sig_x.copy()[None]
    numba_cpu.sigmoid_exact_inplace(z)
    out["sigmoid"] = z[0]

    rng = np.random.default_rng(7)
    B, T, D, d = 16, 30, 24, 3
    x = rng.standard_normal((B, T, d))
    target = rng.standard_normal((B, 2))
    models = {"irnn": dynlab.make_model("irnn", D, d, K=3, eta=0.4, seed=1),
              "gru": dynlab.make_model("gru", D, d, seed=2),
              "lstm": dynlab.make_model("lstm", D, d, seed=3)}
    keep = dynlab.config.VECTORISE_MIN_WORK
    for name, m in models.items():
        for path, threshold in (("loops", 10 ** 18), ("batched", 0)):
            dynlab.config.VECTORISE_MIN_WORK = threshold
            try:
                out[f"{name}-{path}"] = np.asarray(dynlab.simulate(m, x, backend="numba")["h"].values)
            finally:
                dynlab.config.VECTORISE_MIN_WORK = keep
        ro = bp.init_readout(D, 2, seed=0)
        L, grads, _ = bp.loss_and_grads(m, ro, x, target, loss="mse")
        out[f"{name}-loss"] = np.array(L)
        for key, g in grads.items():
            out[f"{name}-grad-{key}"] = np.asarray(g)
    return out


if __name__ == "__main__":
    np.savez(sys.argv[1], **results())

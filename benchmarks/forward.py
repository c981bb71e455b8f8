"""Workloads ``forward-small`` and ``forward-large`` (docs/design.md, *Benchmarks*): the iRNN forward pass.

forward-small  B=1, D=2, d=1, K=5, T=100 000, tanh, float64 — long horizon, tiny cell: per-call
               overhead dominates, so the jitted scalar loops should win by a wide margin.
forward-large  B=256, D=128, d=8, K=5, T=1000, tanh, float64 and float32 — BLAS-bound.  The
               ``floor`` row times only what cannot be avoided: per inner step one
               (B×D)·(D×D) product and one vectorised tanh over B·D entries (no residual
               update, no input drive), K·T times.  Two floor rows: with np.tanh, and (float64)
               with dynlab's jitted branch-free tanh, which is vectorised at every x86 level
               where NumPy's float64 tanh is vectorised only with AVX-512.
"""
from __future__ import annotations

import numpy as np

import dynlab as dl
from dynlab.simulation import run_states

from .harness import Impl, Workload
from .peers import jax_irnn_forward, jax_or_none, torch_irnn_forward, torch_or_none


def _model_and_input(B, D, d, K, T, seed=0):
    m = dl.make_model("irnn", hidden=D, inputs=d, K=K, eta=0.5, seed=seed)
    x = dl.tasks.random_walk(steps=T, inputs=d, variance=1.0 if D > 2 else 10.0, batch=B, seed=seed)
    h0 = np.zeros((B, D))
    return m, x, h0


def _states(m, x, h0, backend, dtype):
    H, bad, _ = run_states(m, x, h0, backend, dtype=dtype)
    if bad.min() < x.shape[1]:
        raise RuntimeError(f"{backend}: diverged")
    return H


def _peers(m, x, h0, dtype):
    out = []
    eta, alpha, K = float(m.eta), float(m.alpha), m.K
    if jax_or_none() is not None:
        import jax
        out.append(Impl(f"jax {jax.__version__} (jit + lax.scan)",
                        jax_irnn_forward(m.U, m.W, m.b, x, h0, eta, alpha, K, dtype)))
    if torch_or_none() is not None:
        import torch
        out.append(Impl(f"pytorch {torch.__version__.split('+')[0]} (eager, no_grad)",
                        torch_irnn_forward(m.U, m.W, m.b, x, h0, eta, alpha, K, dtype)))
    return out


def build_small(quick: bool):
    B, D, d, K, T = 1, 2, 1, 5, (10_000 if quick else 100_000)
    m, x, h0 = _model_and_input(B, D, d, K, T)
    impls = [
        Impl("numpy (reference)", lambda: _states(m, x, h0, "numpy", np.float64)),
        Impl("numba (dynlab default)", lambda: _states(m, x, h0, "numba", np.float64)),
        Impl("dl.simulate, numba (with Dataset)", lambda: dl.simulate(m, x)["h"].values),
    ]
    impls += _peers(m, x, h0, np.float64)
    return impls, {"sizes": f"B={B}, D={D}, d={d}, K={K}, T={T}, tanh, float64"}


def _floor(B, D, K, T, dtype, tanh=None):
    """The floor: K·T products and tanh passes; ``tanh(z)`` in place, np.tanh by default."""
    rng = np.random.default_rng(0)
    s = rng.standard_normal((B, D)).astype(dtype)
    UT = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(dtype)
    z = np.empty((B, D), dtype=dtype)

    def call():
        for _ in range(K * T):
            np.matmul(s, UT, out=z)
            if tanh is None:
                np.tanh(z, out=z)
            else:
                tanh(z)
        return z

    return call


def build_large(quick: bool, dtype=np.float64):
    B, D, d, K, T = 256, 128, 8, 5, (200 if quick else 1000)
    m, x, h0 = _model_and_input(B, D, d, K, T)
    impls = [
        Impl("numpy (reference)", lambda: _states(m, x, h0, "numpy", dtype)),
        Impl("numba (dynlab default: vectorised)", lambda: _states(m, x, h0, "numba", dtype)),
    ]
    impls += _peers(m, x, h0, dtype)
    impls.append(Impl("floor: K·T × (matmul + tanh)", _floor(B, D, K, T, dtype), check=False,
                      note="BLAS + np.tanh only (vectorised where NumPy dispatches to AVX-512)"))
    name = np.dtype(dtype).name
    dyn, floor = "numba (dynlab default: vectorised)", "floor: K·T × (matmul + tanh)"
    ratios = [("dynlab / floor (goal ≤ 1.5)", dyn, floor)]
    if dtype == np.float64:
        # NumPy 2.4's float64 tanh is vectorised only where it dispatches to AVX-512 (54.7 µs per
        # 256 × 128 block on the AMD EPYC; 204 µs with those targets off): on an AVX2 CPU the
        # row above is BLAS + a scalar tanh.  This row's tanh is vectorised at every x86 level.
        from dynlab.backends.numba.loops import tanh_inplace

        floor2 = "floor: K·T × (matmul + jitted tanh)"
        impls.append(Impl(floor2, _floor(B, D, K, T, dtype, tanh_inplace), check=False,
                          note="BLAS + dynlab's branch-free tanh, vectorised at any x86 level"))
        ratios.append(("dynlab / floor with the jitted tanh", dyn, floor2))
    ratios += [("dynlab / jax (goal ≤ 1)" if i.name.startswith("jax") else "dynlab / pytorch", dyn, i.name)
               for i in impls if i.name.startswith(("jax", "pytorch"))]
    return impls, {"sizes": f"B={B}, D={D}, d={d}, K={K}, T={T}, tanh, {name}", "ratios": ratios}


WORKLOADS = [
    Workload("forward-small", "iRNN forward, B=1, D=2, K=5, T=10⁵", build_small, baseline="numpy (reference)",
             rtol=1e-12, repeat=3),
    Workload("forward-large", "iRNN forward, B=256, D=128, d=8, K=5, T=1000, float64", build_large,
             baseline="numpy (reference)", rtol=1e-12, repeat=5),
    Workload("forward-large-f32", "iRNN forward, B=256, D=128, d=8, K=5, T=1000, float32",
             lambda quick: build_large(quick, np.float32), baseline="numpy (reference)", rtol=1e-4, repeat=5),
]

"""Workloads ``gated-forward-gru`` and ``gated-forward-lstm`` (together: ``gated-forward``):
simulate PyTorch's GRU / LSTM with dynlab, against PyTorch's own modules and JAX.

B = 128 sequences, D = 128 hidden units, d = 8 inputs, T = 200 steps, tanh, float64, zero
initial state, PyTorch's initialisation (U(−1/√D, 1/√D)), Gaussian inputs.  Rows:

* ``numpy (reference)``: ``dynlab.backends.reference.simulate`` — the equations step by step in NumPy;
* ``dynlab numba (default: vectorised)``: ``run_states`` on the numba backend — the input
  drive W_ih x + b of a chunk of steps in one GEMM, then per step one GEMM h·W_hhᵀ over the
  batch and one fused numba pass for the gates;
* ``dl.simulate (with Dataset)``: the public call, validation and the xarray Dataset included;
* ``pytorch … nn.GRU/nn.LSTM (eager, no_grad)``: PyTorch's own module with the same weights
  (its CPU kernel also computes the input projection of every step in one product first), on
  its default threads and on one thread;
* ``jax … (jit + lax.scan)``: PyTorch's equations in JAX, the input projection before the scan;
* ``floor: T × GEMM`` (not compared): only the T products (B×D)·(D×G·D) the recurrence cannot
  avoid.

Every row returns the hidden outputs h_1..h_T (B, T, D) (PyTorch's LSTM returns no per-step
cell state; dynlab computes and stores [h; c], 2D per step, and hands back the h half) and is
compared with the reference.  The info lines give PyTorch's and JAX's medians over dynlab's
(> 1: dynlab is faster) and the machine load.
"""
from __future__ import annotations

import os

import numpy as np

import dynlab as dl
from dynlab.simulation import run_states

from .harness import Impl, Workload
from .peers import jax_gated_forward, jax_or_none, torch_gated_forward, torch_or_none

DYNLAB = "dynlab numba (default: vectorised)"


def _setup(cell: str, quick: bool):
    B, D, d, T = (32, 64, 8, 50) if quick else (128, 128, 8, 200)
    m = dl.make_model(cell, D, d, seed=0)
    x = np.random.default_rng(0).standard_normal((B, T, d))
    h0 = np.zeros((B, m.state_size))
    return m, x, h0


def _states(m, x, h0, backend):
    H, bad, path = run_states(m, x, h0, backend)
    if bad.min() < x.shape[1]:
        raise RuntimeError(f"{backend}: diverged")
    return H[:, :, m.output_slice]


def _floor(m, B, T):
    rng = np.random.default_rng(0)
    h = np.tanh(rng.standard_normal((B, m.hidden)))
    WT = np.ascontiguousarray(m.W_hh.T)
    gh = np.empty((B, WT.shape[1]))

    def call():
        for _ in range(T):
            np.matmul(h, WT, out=gh)
        return gh

    return call


def _one_torch_thread(torch, call):
    """``call`` with PyTorch on one intra-op thread (faster than two on a busy 2-core machine:
    no per-step wait for the second thread), its thread count restored afterwards."""
    def run():
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return call()
        finally:
            torch.set_num_threads(n)

    return run


def build(cell: str, quick: bool):
    m, x, h0 = _setup(cell, quick)
    B, T, d = x.shape
    impls = [
        Impl("numpy (reference)", lambda: _states(m, x, h0, "numpy")),
        Impl(DYNLAB, lambda: _states(m, x, h0, "numba")),
        Impl("dl.simulate (with Dataset)", lambda: dl.simulate(m, x, h0)["h"].values[:, :, m.output_slice]),
    ]
    info = {"sizes": f"{cell.upper()}, B={B}, D={m.hidden}, d={d}, T={T}, tanh, float64",
            "load average before the run (1, 5, 15 min)": ", ".join(f"{v:.2f}" for v in os.getloadavg())}
    ratios = []
    if torch_or_none() is not None:
        import torch
        name = f"pytorch {torch.__version__.split('+')[0]} nn.{cell.upper()} (eager, no_grad, {torch.get_num_threads()} threads)"
        call = torch_gated_forward(m, x, h0)
        impls.append(Impl(name, call))
        ratios.append(("PyTorch / dynlab (> 1: dynlab faster)", name, DYNLAB))
        one = f"pytorch {torch.__version__.split('+')[0]} nn.{cell.upper()} (eager, no_grad, 1 thread)"
        impls.append(Impl(one, _one_torch_thread(torch, call)))
        ratios.append(("PyTorch on 1 thread / dynlab (> 1: dynlab faster)", one, DYNLAB))
    if jax_or_none() is not None:
        import jax
        name = f"jax {jax.__version__} (jit + lax.scan)"
        impls.append(Impl(name, jax_gated_forward(m, x, h0)))
        ratios.append(("JAX / dynlab (> 1: dynlab faster)", name, DYNLAB))
    impls.append(Impl(f"floor: T × GEMM (B×D)·(D×{len(m.GATES)}D)", _floor(m, B, T), check=False,
                      note="BLAS only, no gates"))
    info["ratios"] = ratios
    return impls, info


WORKLOADS = [
    Workload("gated-forward-gru", "GRU forward (PyTorch's equations), B=128, D=128, d=8, T=200, float64",
             lambda quick: build("gru", quick), baseline="numpy (reference)", rtol=1e-12, repeat=7),
    Workload("gated-forward-lstm", "LSTM forward (PyTorch's equations), B=128, D=128, d=8, T=200, float64",
             lambda quick: build("lstm", quick), baseline="numpy (reference)", rtol=1e-12, repeat=7),
]

#: Names that stand for several workloads on the command line.
GROUPS = {"gated-forward": ["gated-forward-gru", "gated-forward-lstm"]}

"""Workload ``train-torch``: one training step of dynlab's iRNN through ``dl.to_torch`` and autograd,
beside dynlab's own exact-gradient step and the peers.

iRNN K = 5, D = 128, T = 784 (pixel-MNIST's length), batch 128, d = 2 (adding-problem inputs), tanh,
dense U, g_0 = 0, sign +1, scalar η, MSE at the end through a linear read-out — the ``train-step``
model at pixel-MNIST's length, so its peers are the same code.  Every row returns the loss and the
gradients of U, W, b, η, α, W_out, b_out and h_0, compared with the reference:

* ``dynlab BPTT`` (reference, baseline): ``dynlab.train.backprop.loss_and_grads`` (numba, float64);
* ``dl.to_torch + autograd, float64`` / ``float32``: the step of ``train_model(..., engine="torch")``
  (``TorchEngine.loss_and_grads``: parameters written into the ``dynlab.torch.IRNN`` module, the
  forward pass, ``loss.backward()``, the gradients read back) as the engine runs it on the CPU
  (``config.TORCH_CPU_THREADS`` = 1 torch thread), and, in float64, ``…, torch's own threads`` with
  ``TORCH_CPU_THREADS = None`` (torch's default, one per core: on a shared two-core machine
  OpenMP's threads can lose badly to one when another process holds a core);
* ``… torch.compile per step``: the same with the module's time step (``dynlab.torch._ops.irnn_step``,
  K inner steps) compiled by ``torch.compile`` (inductor; compiled at the first call, before timing);
* ``torch autograd, 1 thread`` and ``jax jit(value_and_grad)``: the peers of ``train-step``
  (``benchmarks/train.py``: the same model written directly in eager PyTorch ops, here on one torch
  thread as the engine runs, and in ``lax.scan`` under ``jax.jit``).

float32 rows are checked at 1e-3 relative (float32 rounding over 784 × 5 inner steps), float64 at
1e-9.  The GPU rows of the same step, one pixel-MNIST epoch and the paper-scale estimates are
``benchmarks/gpu_torch.py`` (needs a CUDA device).
"""
from __future__ import annotations

import contextlib

import numpy as np

import dynlab as dl
from dynlab.train import backprop as bp

from .harness import Impl, Workload
from .peers import jax_or_none, torch_or_none
from .train import _jax, _torch

REF = "dynlab BPTT"
F64, F32 = "dl.to_torch + autograd, float64", "dl.to_torch + autograd, float32"


def _setup(quick: bool):
    D, K, T, B = (32, 5, 100, 32) if quick else (128, 5, 784, 128)
    m = dl.make_model("irnn", D, 2, K=K, eta=0.5, seed=0)
    x, y = dl.tasks.adding_problem(T, B, seed=0)
    return m, x, y, bp.init_readout(D, 1, seed=0)


NAMES = ("U", "W", "b", "eta", "alpha", "W_out", "b_out", "h0")


def _dynlab(m, x, y, readout):
    def call():
        L, g, _ = bp.loss_and_grads(m, readout, x, y, loss="mse")
        return [np.asarray(L)] + [np.asarray(g[k], dtype=np.float64) for k in NAMES]

    return call


@contextlib.contextmanager
def _threads(own: bool):
    """The engine on torch's own thread count (``config.TORCH_CPU_THREADS = None``) when ``own``."""
    from dynlab import config

    saved = config.TORCH_CPU_THREADS
    if own:
        config.TORCH_CPU_THREADS = None
    try:
        yield
    finally:
        config.TORCH_CPU_THREADS = saved


@contextlib.contextmanager
def _compiled_steps(torch, compiled):
    """``dynlab.torch._ops.irnn_step`` replaced by ``compiled`` for the call (the module looks it up
    at every step)."""
    from dynlab.torch import _ops

    saved = _ops.irnn_step
    _ops.irnn_step = compiled
    try:
        yield
    finally:
        _ops.irnn_step = saved


def _engine(m, x, y, readout, dtype, own_threads=False, compile_step=False):
    torch = torch_or_none()
    from dynlab.torch import _ops
    from dynlab.train.torch_engine import TorchEngine

    eng = TorchEngine(m, device="cpu", dtype=dtype)
    compiled = torch.compile(_ops.irnn_step, dynamic=False) if compile_step else None

    def call():
        with _threads(own_threads), (_compiled_steps(torch, compiled) if compiled else contextlib.nullcontext()):
            L, g, _ = eng.loss_and_grads(m, readout, x, y, loss="mse")
        return [np.asarray(L)] + [np.asarray(g[k], dtype=np.float64) for k in NAMES]

    return call


def build(quick: bool):
    m, x, y, readout = _setup(quick)
    B, T, _ = x.shape
    impls = [Impl(REF, _dynlab(m, x, y, readout), note="numba, float64 (the default engine of train_model)")]
    torch = torch_or_none()
    ratios = []
    rtol = {}
    if torch is not None:
        n = torch.get_num_threads()
        for dtype, name in (("float64", F64), ("float32", F32)):
            own = f"{name}, torch's own {n} threads"
            comp = f"{name}, torch.compile per step"
            impls += [Impl(name, _engine(m, x, y, readout, dtype), note="train_model(engine='torch') on the CPU: 1 thread"),
                      Impl(comp, _engine(m, x, y, readout, dtype, compile_step=True),
                           note="inductor, the K inner steps of one time step; compiled at the first call")]
            ratios += [(f"dynlab BPTT's speed-up over the torch engine, {dtype}", name, REF),
                       (f"torch.compile per step / eager, {dtype} (< 1: compile helps)", comp, name)]
            if dtype == "float64":      # the thread count, once (config.TORCH_CPU_THREADS)
                impls.append(Impl(own, _engine(m, x, y, readout, dtype, own_threads=True),
                                  note="TORCH_CPU_THREADS = None"))
                ratios.append((f"torch's own {n} threads / 1 thread, {dtype}", own, name))
            if dtype == "float32":
                rtol = {k: 1e-3 for k in (name, comp)}
        ratios.append(("float32 / float64", F32, F64))
        peer = _torch(m, x, y, readout)

        def peer_one():
            saved = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return peer()
            finally:
                torch.set_num_threads(saved)

        impls.append(Impl("torch autograd, 1 thread", peer_one, note="the train-step peer (eager ops written "
                                                                      "directly, float64) on one torch thread"))
        ratios.append(("the torch engine (float64) / the hand-written torch peer, both on 1 thread", F64,
                       "torch autograd, 1 thread"))
    if jax_or_none() is not None:
        impls.append(Impl("jax jit(value_and_grad)", _jax(m, x, y, readout), note="lax.scan, compiled once"))
        ratios.append(("dynlab BPTT's speed-up over jax jit", "jax jit(value_and_grad)", REF))
    info = {"sizes": f"iRNN D={m.hidden}, K={m.K}, T={T}, batch {B}, d=2, tanh, MSE at the end",
            "PyTorch": torch.__version__ if torch is not None else "not installed (torch rows absent)",
            "JAX": jax_or_none().__version__ if jax_or_none() is not None else "not installed (peer row absent)",
            "rtol": rtol, "ratios": ratios}
    return impls, info


WORKLOADS = [Workload("train-torch", "one training step of the iRNN through dl.to_torch and autograd "
                                     "(the torch engine of train_model), beside dynlab's own", build,
                      baseline=REF, rtol=1e-9, repeat=3)]

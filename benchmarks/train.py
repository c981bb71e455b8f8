"""Workload ``train-step``: one training step (forward + backward, every gradient) of an iRNN.

iRNN D=128, K=5, T=200, batch 128, d=2 (adding-problem inputs), tanh, dense U, g_0 = 0,
sign +1, scalar η, MSE at the end through a linear read-out.  Rows:

* ``dynlab BPTT (numpy)`` (reference): ``dynlab.train.backprop.loss_and_grads`` — the forward
  pass with its tape and the reverse-mode pass, returning the loss and ∂L/∂{U, W, b, η, α,
  W_out, b_out, h_0};
* ``dynlab BPTT, forced 1 BLAS thread``: the same call inside threadpoolctl's limit of every
  loaded BLAS to one thread (outside dynlab's own limiting), and ``dynlab BPTT, BLAS's own
  threads``: the same call with ``config.TRAIN_BLAS_THREADS = None``; the info lines give the
  default's median over the forced single-thread one (goal ≤ 1.1: the default configuration is
  the fast one) and what BLAS's own thread count costs or gains;
* ``dynlab forward only (tape)``: the taped forward pass alone (what the backward pass costs
  on top of it), not compared;
* ``dl.simulate, numba`` (floor, not compared): the forward states alone through the
  simulation kernels, no tape;
* ``torch autograd`` (only where PyTorch is installed): the same model written as eager
  PyTorch ops, ``loss.backward()``; its gradients are compared with dynlab's.
"""
from __future__ import annotations

import numpy as np

import dynlab as dl
from dynlab import config
from dynlab.train import backprop as bp

from .harness import Impl, Workload
from .peers import torch_or_none


def _setup(quick: bool):
    D, K, T, B = (32, 5, 50, 32) if quick else (128, 5, 200, 128)
    m = dl.make_model("irnn", D, 2, K=K, eta=0.5, seed=0)
    x, y = dl.tasks.adding_problem(T, B, seed=0)
    readout = bp.init_readout(D, 1, seed=0)
    return m, x, y, readout


def _dynlab(m, x, y, readout):
    names = list(m.params()) + ["W_out", "b_out", "h0"]

    def call():
        L, g, _ = bp.loss_and_grads(m, readout, x, y, loss="mse")
        return [np.asarray(L)] + [np.asarray(g[k], dtype=np.float64) for k in names]

    return call


def _forced_single_thread(call):
    """``call`` with every loaded BLAS on one thread, set through threadpoolctl directly."""
    import scipy.linalg.cython_blas  # noqa: F401  (scipy's BLAS loaded, so the controller sees it)
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()

    def run():
        with controller.limit(limits=1, user_api="blas"):
            return call()

    return run


def _blas_own_threads(call):
    """``call`` with dynlab's training limit switched off (``config.TRAIN_BLAS_THREADS = None``)."""
    def run():
        saved = config.TRAIN_BLAS_THREADS
        config.TRAIN_BLAS_THREADS = None
        try:
            return call()
        finally:
            config.TRAIN_BLAS_THREADS = saved

    return run


def _torch(m, x, y, readout):
    torch = torch_or_none()
    t = lambda a: torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)  # noqa: E731
    U, W, b, eta, alpha = t(m.U), t(m.W), t(m.b), t(m.eta), t(m.alpha)
    Wo, bo = t(readout["W_out"]), t(readout["b_out"])
    xt = torch.as_tensor(x)
    yt = torch.as_tensor(y)
    B, T, _ = x.shape
    K = m.K

    def call():
        for p in (U, W, b, eta, alpha, Wo, bo):
            p.grad = None
        h0 = torch.zeros((B, m.hidden), dtype=torch.float64, requires_grad=True)
        h = h0
        c = xt @ W.T + b
        for step in range(T):
            g = torch.zeros_like(h)
            for _ in range(K):
                s = g + h
                g = g + eta * (torch.tanh(s @ U.T + c[:, step]) - alpha * s)
            h = g
        L = torch.mean((h @ Wo.T + bo - yt) ** 2)
        L.backward()
        return [L.detach().numpy()] + [p.grad.numpy() for p in (U, W, b, eta, alpha, Wo, bo, h0)]

    return call


def build(quick: bool):
    m, x, y, readout = _setup(quick)
    B, T, _ = x.shape
    step = _dynlab(m, x, y, readout)
    impls = [Impl("dynlab BPTT (numpy)", step, note=f"default: TRAIN_BLAS_THREADS = {config.TRAIN_BLAS_THREADS}"),
             Impl("dynlab BPTT, forced 1 BLAS thread", _forced_single_thread(step), note="threadpoolctl, every BLAS"),
             Impl("dynlab BPTT, BLAS's own threads", _blas_own_threads(step), note="TRAIN_BLAS_THREADS = None")]
    impls.append(Impl("dynlab forward only (tape)", lambda: bp.forward(m, x).H, check=False,
                      note="the taped forward pass alone"))
    impls.append(Impl("dl.simulate, numba", lambda: dl.simulate(m, x)["h"].values, check=False,
                      note="floor: forward states, no tape"))
    if torch_or_none() is not None:
        impls.append(Impl("torch autograd", _torch(m, x, y, readout), note="eager ops, loss.backward()"))
    info = {"sizes": f"iRNN D={m.hidden}, K={m.K}, T={T}, batch {B}, d=2, tanh, MSE at the end",
            "PyTorch": "installed" if torch_or_none() is not None else "not installed (peer row absent)",
            "ratios": [("default / forced single BLAS thread (goal ≤ 1.1)", "dynlab BPTT (numpy)",
                        "dynlab BPTT, forced 1 BLAS thread"),
                       ("BLAS's own threads / default", "dynlab BPTT, BLAS's own threads", "dynlab BPTT (numpy)")]}
    return impls, info


WORKLOADS = [Workload("train-step", "one training step (forward + backward, all gradients) of an iRNN",
                      build, baseline="dynlab BPTT (numpy)", rtol=1e-9, repeat=5)]

"""Workload ``train-step``: one training step (forward + backward, every gradient) of an iRNN.

iRNN D=128, K=5, T=200, batch 128, d=2 (adding-problem inputs), tanh, dense U, g_0 = 0,
sign +1, scalar η, MSE at the end through a linear read-out.  Rows:

* ``dynlab BPTT`` (reference): ``dynlab.train.backprop.loss_and_grads`` — the forward
  pass with its tape and the reverse-mode pass, returning the loss and ∂L/∂{U, W, b, η, α,
  W_out, b_out, h_0};
* ``dynlab BPTT, forced 1 BLAS thread``: the same call inside threadpoolctl's limit of every
  loaded BLAS to one thread (outside dynlab's own limiting), and ``dynlab BPTT, BLAS's own
  threads``: the same call with ``config.TRAIN_BLAS_THREADS = None``, and ``dynlab BPTT, one
  block``: with ``config.TRAIN_THREADS = 1`` (the batch not split between threads); the info lines give the
  default's median over the forced single-thread one (goal ≤ 1.1: the default configuration is
  the fast one) and what BLAS's own thread count costs or gains;
* ``dynlab BPTT, tape memory reused``: the same call with a ``bp.Workspace`` kept between
  calls, as ``train_model`` runs every step (no fresh tape memory to fault in);
* ``dynlab forward only (tape)``: the taped forward pass alone (what the backward pass costs
  on top of it), not compared;
* ``dl.simulate, numba`` (floor, not compared): the forward states alone through the
  simulation kernels, no tape;
* ``torch autograd`` (only where PyTorch is installed): the same model written as eager
  PyTorch ops, ``loss.backward()``; its gradients are compared with dynlab's;
* ``jax jit(value_and_grad)`` (only where JAX is installed): the same model in ``lax.scan``,
  ``jax.jit(jax.value_and_grad(loss))``, compiled once before timing; gradients compared.

Workloads ``train-step-gru`` and ``train-step-lstm``: the same step (B = 128, D = 128, T = 200,
d = 2 adding-problem inputs, MSE at the end through a linear read-out of h_T; PyTorch's
initialisation, seed 0) of ``dynlab.make_model("gru" | "lstm", …)``; gradients of W_ih, W_hh,
b_ih, b_hh, W_out, b_out and the initial state, compared across the rows:

* ``dynlab BPTT`` (reference): ``loss_and_grads``, and with a workspace (as in ``train_model``);
* ``dynlab forward only (tape)`` (not compared): the taped forward pass alone;
* ``dl.simulate, numba`` (floor, not compared): the forward states alone;
* ``torch autograd (nn.GRU / nn.LSTM)``: PyTorch's own module in float64, eager on the CPU
  (``torch.get_num_threads()`` threads), ``loss.backward()``;
* ``jax jit(value_and_grad)``: the cell written in ``lax.scan``, jitted.

Each is a separate workload (the harness compares every row with its workload's reference);
the info lines give dynlab's speed-up over each peer (goal ≥ 1: at least as fast) and the step's
time over the forward floor's (goal ≤ 2.5).
"""
from __future__ import annotations

import numpy as np

import dynlab as dl
from dynlab import config
from dynlab.train import backprop as bp

from .harness import Impl, Workload
from .peers import jax_or_none, torch_or_none


#: The row of the step as ``train_model`` runs it: the tape memory reused from the step before.
REUSED = "dynlab BPTT, tape memory reused"


def _setup(quick: bool):
    D, K, T, B = (32, 5, 50, 32) if quick else (128, 5, 200, 128)
    m = dl.make_model("irnn", D, 2, K=K, eta=0.5, seed=0)
    x, y = dl.tasks.adding_problem(T, B, seed=0)
    readout = bp.init_readout(D, 1, seed=0)
    return m, x, y, readout


def _dynlab(m, x, y, readout, workspace=None):
    names = list(m.params()) + ["W_out", "b_out", "h0"]

    def call():
        L, g, _ = bp.loss_and_grads(m, readout, x, y, loss="mse", workspace=workspace)
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


def _one_block(call):
    """``call`` with the batch in one block (``config.TRAIN_THREADS = 1``): no split between threads."""
    def run():
        saved = config.TRAIN_THREADS
        config.TRAIN_THREADS = 1
        try:
            return call()
        finally:
            config.TRAIN_THREADS = saved

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


def _jax(m, x, y, readout):
    """The iRNN step as ``jax.jit(jax.value_and_grad(loss))`` over ``lax.scan`` (tanh, g_0 = 0, sign +1)."""
    jax = jax_or_none()
    import jax.numpy as jnp
    from jax import lax

    B, T, _ = x.shape
    D, K = m.hidden, m.K
    xs = jnp.asarray(np.swapaxes(x, 0, 1))
    yt = jnp.asarray(y)

    def loss(p):
        U, W, b, eta, alpha, Wo, bo, h0 = p
        c = xs @ W.T + b

        def step(h, ct):
            g = jnp.zeros_like(h)
            for _ in range(K):
                s = g + h
                g = g + eta * (jnp.tanh(s @ U.T + ct) - alpha * s)
            return g, None

        h, _ = lax.scan(step, h0, c)
        return jnp.mean((h @ Wo.T + bo - yt) ** 2)

    run = jax.jit(jax.value_and_grad(loss))
    p = tuple(jnp.asarray(np.asarray(v, dtype=np.float64)) for v in
              (m.U, m.W, m.b, m.eta, m.alpha, readout["W_out"], readout["b_out"], np.zeros((B, D))))

    def call():
        L, g = run(p)
        return [np.asarray(L)] + [np.asarray(v) for v in g]

    call()  # compile before timing
    return call


def build(quick: bool):
    m, x, y, readout = _setup(quick)
    B, T, _ = x.shape
    step = _dynlab(m, x, y, readout)
    impls = [Impl("dynlab BPTT", step, note=f"default: TRAIN_THREADS = {config.TRAIN_THREADS}, TRAIN_BLAS_THREADS = {config.TRAIN_BLAS_THREADS}"),
             Impl("dynlab BPTT, forced 1 BLAS thread", _forced_single_thread(step), note="threadpoolctl, every BLAS"),
             Impl("dynlab BPTT, BLAS's own threads", _blas_own_threads(step), note="TRAIN_BLAS_THREADS = None"),
             Impl("dynlab BPTT, one block", _one_block(step), note="TRAIN_THREADS = 1: the batch not split"),
             Impl(REUSED, _dynlab(m, x, y, readout, bp.Workspace()), note="workspace=: as every step of train_model")]
    impls.append(Impl("dynlab forward only (tape)", lambda: bp.forward(m, x).H, check=False,
                      note="the taped forward pass alone"))
    impls.append(Impl("dl.simulate, numba", lambda: dl.simulate(m, x)["h"].values, check=False,
                      note="floor: forward states, no tape"))
    if torch_or_none() is not None:
        impls.append(Impl("torch autograd", _torch(m, x, y, readout), note="eager ops, loss.backward()"))
    if jax_or_none() is not None:
        impls.append(Impl("jax jit(value_and_grad)", _jax(m, x, y, readout), note="lax.scan, compiled once"))
    info = {"sizes": f"iRNN D={m.hidden}, K={m.K}, T={T}, batch {B}, d=2, tanh, MSE at the end",
            "PyTorch": "installed" if torch_or_none() is not None else "not installed (peer row absent)",
            "JAX": "installed" if jax_or_none() is not None else "not installed (peer row absent)",
            "ratios": [("default / forced single BLAS thread (goal ≤ 1.1)", "dynlab BPTT",
                        "dynlab BPTT, forced 1 BLAS thread"),
                       ("BLAS's own threads / default", "dynlab BPTT, BLAS's own threads", "dynlab BPTT"),
                       ("default / one block", "dynlab BPTT", "dynlab BPTT, one block"),
                       ("train step / forward floor (goal ≤ 2.5)", "dynlab BPTT", "dl.simulate, numba"),
                       ("train step in train_model / forward floor (goal ≤ 2.5)", REUSED, "dl.simulate, numba"),
                       ("speed-up over torch autograd (goal ≥ 1)", "torch autograd", "dynlab BPTT"),
                       ("speed-up over jax jit (goal ≥ 1)", "jax jit(value_and_grad)", "dynlab BPTT")]}
    return impls, info


# ============================================================================ GRU and LSTM
def _gated_setup(kind: str, quick: bool):
    D, T, B = (32, 50, 32) if quick else (128, 200, 128)
    m = dl.make_model(kind, D, 2, seed=0)
    x, y = dl.tasks.adding_problem(T, B, seed=0)
    readout = bp.init_readout(D, 1, seed=0)
    return m, x, y, readout


def _gated_dynlab(m, x, y, readout, workspace=None):
    names = ("W_ih", "W_hh", "b_ih", "b_hh", "W_out", "b_out", "h0")

    def call():
        L, g, _ = bp.loss_and_grads(m, readout, x, y, loss="mse", workspace=workspace)
        return [np.asarray(L)] + [np.asarray(g[k]) for k in names]

    return call


def _gated_torch(m, x, y, readout):
    """PyTorch's own nn.GRU / nn.LSTM (float64, batch_first) with dynlab's weights; the initial
    state a leaf, so its gradient is compared too (for the LSTM: [h_0; c_0])."""
    torch = torch_or_none()
    lstm = m.name == "lstm"
    B, T, d = x.shape
    D = m.hidden
    net = (torch.nn.LSTM if lstm else torch.nn.GRU)(d, D, batch_first=True).double()
    with torch.no_grad():
        for ours, theirs in (("W_ih", "weight_ih_l0"), ("W_hh", "weight_hh_l0"), ("b_ih", "bias_ih_l0"),
                             ("b_hh", "bias_hh_l0")):
            getattr(net, theirs).copy_(torch.tensor(np.array(getattr(m, ours))))
    Wo = torch.tensor(readout["W_out"], requires_grad=True)
    bo = torch.tensor(readout["b_out"], requires_grad=True)
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)

    def call():
        net.zero_grad()
        Wo.grad = bo.grad = None
        h0 = torch.zeros((1, B, D), dtype=torch.float64, requires_grad=True)
        c0 = torch.zeros((1, B, D), dtype=torch.float64, requires_grad=True) if lstm else None
        out, _ = net(xt, (h0, c0) if lstm else h0)
        L = torch.mean((out[:, -1] @ Wo.T + bo - yt) ** 2)
        L.backward()
        s0 = torch.cat([h0.grad[0], c0.grad[0]], dim=1) if lstm else h0.grad[0]
        return [L.detach().numpy()] + [p.grad.numpy() for p in (net.weight_ih_l0, net.weight_hh_l0, net.bias_ih_l0,
                                                                 net.bias_hh_l0, Wo, bo)] + [s0.numpy()]

    return call


def _gated_jax(m, x, y, readout):
    """The same cell (PyTorch's equations) in ``lax.scan``, ``jit(value_and_grad)``."""
    jax = jax_or_none()
    import jax.numpy as jnp
    from jax import lax

    lstm = m.name == "lstm"
    B, T, _ = x.shape
    D = m.hidden
    xs = jnp.asarray(np.swapaxes(x, 0, 1))
    yt = jnp.asarray(y)

    def gru_step(p, h, gi):
        gh = h @ p[1].T + p[3]
        r = jax.nn.sigmoid(gi[:, :D] + gh[:, :D])
        z = jax.nn.sigmoid(gi[:, D:2 * D] + gh[:, D:2 * D])
        n = jnp.tanh(gi[:, 2 * D:] + r * gh[:, 2 * D:])
        return (1.0 - z) * n + z * h

    def lstm_step(p, s, gi):
        h, c = s[:, :D], s[:, D:]
        a = gi + h @ p[1].T + p[3]
        i, f = jax.nn.sigmoid(a[:, :D]), jax.nn.sigmoid(a[:, D:2 * D])
        g, o = jnp.tanh(a[:, 2 * D:3 * D]), jax.nn.sigmoid(a[:, 3 * D:])
        c = f * c + i * g
        return jnp.concatenate([o * jnp.tanh(c), c], axis=1)

    cell = lstm_step if lstm else gru_step

    def loss(p):
        W_ih, W_hh, b_ih, b_hh, Wo, bo, s0 = p
        gis = xs @ W_ih.T + b_ih

        def step(s, gi):
            return cell(p, s, gi), None

        s, _ = lax.scan(step, s0, gis)
        return jnp.mean((s[:, :D] @ Wo.T + bo - yt) ** 2)

    run = jax.jit(jax.value_and_grad(loss))
    p = tuple(jnp.asarray(np.asarray(v, dtype=np.float64)) for v in
              (m.W_ih, m.W_hh, m.b_ih, m.b_hh, readout["W_out"], readout["b_out"], np.zeros((B, m.state_size))))

    def call():
        L, g = run(p)
        return [np.asarray(L)] + [np.asarray(v) for v in g]

    call()  # compile before timing
    return call


def _gated_build(kind: str):
    def build(quick: bool):
        m, x, y, readout = _gated_setup(kind, quick)
        B, T, _ = x.shape
        impls = [Impl("dynlab BPTT", _gated_dynlab(m, x, y, readout),
                      note=f"default: TRAIN_THREADS = {config.TRAIN_THREADS}, TRAIN_BLAS_THREADS = {config.TRAIN_BLAS_THREADS}"),
                 Impl(REUSED, _gated_dynlab(m, x, y, readout, bp.Workspace()),
                      note="workspace=: as every step of train_model"),
                 Impl("dynlab forward only (tape)", lambda: bp.forward(m, x).H, check=False,
                      note="the taped forward pass alone"),
                 Impl("dl.simulate, numba", lambda: dl.simulate(m, x)["h"].values, check=False,
                      note="floor: forward states, no tape")]
        ratios = [("train step / forward floor (goal ≤ 2.5)", "dynlab BPTT", "dl.simulate, numba"),
                  ("train step in train_model / forward floor (goal ≤ 2.5)", REUSED, "dl.simulate, numba")]
        torch = torch_or_none()
        if torch is not None:
            name = f"torch autograd (nn.{kind.upper()})"
            impls.append(Impl(name, _gated_torch(m, x, y, readout),
                              note=f"float64 eager, {torch.get_num_threads()} threads, loss.backward()"))
            ratios.append(("speed-up over torch autograd (goal ≥ 1)", name, "dynlab BPTT"))
        if jax_or_none() is not None:
            impls.append(Impl("jax jit(value_and_grad)", _gated_jax(m, x, y, readout), note="lax.scan, compiled once"))
            ratios.append(("speed-up over jax jit (goal ≥ 1)", "jax jit(value_and_grad)", "dynlab BPTT"))
        info = {"sizes": f"{kind.upper()} D={m.hidden}, T={T}, batch {B}, d=2, tanh, MSE at the end",
                "PyTorch": torch.__version__ if torch is not None else "not installed (peer row absent)",
                "JAX": jax_or_none().__version__ if jax_or_none() is not None else "not installed (peer row absent)",
                "ratios": ratios}
        return impls, info

    return build


WORKLOADS = [Workload("train-step", "one training step (forward + backward, all gradients) of an iRNN",
                      build, baseline="dynlab BPTT", rtol=1e-9, repeat=5),
             Workload("train-step-gru", "one training step (forward + backward, all gradients) of a GRU",
                      _gated_build("gru"), baseline="dynlab BPTT", rtol=1e-9, repeat=5),
             Workload("train-step-lstm", "one training step (forward + backward, all gradients) of an LSTM",
                      _gated_build("lstm"), baseline="dynlab BPTT", rtol=1e-9, repeat=5)]

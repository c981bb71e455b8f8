"""Workload ``train-step``: one training step (forward + backward, every gradient) of an iRNN.

iRNN D=128, K=5, T=200, batch 128, d=2 (adding-problem inputs), tanh, dense U, g_0 = 0,
sign +1, scalar η, MSE at the end through a linear read-out.  Rows:

* ``dynlab BPTT`` (reference): ``dynlab.train.backprop.loss_and_grads`` — the forward
  pass with its tape and the reverse-mode pass, returning the loss and ∂L/∂{U, W, b, η, α,
  W_out, b_out, h_0};
* ``dynlab BPTT, forced 1 BLAS thread``: the same call inside threadpoolctl's limit of every
  loaded BLAS to one thread (outside dynlab's own limiting), and ``dynlab BPTT, BLAS's own
  threads``: the same call with ``config.NUMBA_BLAS_THREADS = None``, and ``dynlab BPTT, one
  block``: with ``config.TRAIN_THREADS = 1`` (the batch not split between threads); the info lines give the
  default's median over the forced single-thread one (goal ≤ 1.1: the default configuration is
  the fast one) and what BLAS's own thread count costs or gains;
* ``dynlab BPTT, tape memory reused``: the same call with a ``bp.Workspace`` kept between
  calls, as ``train_model`` runs every step (no fresh tape memory to fault in);
* ``dynlab forward only (tape)``: the taped forward pass alone (what the backward pass costs
  on top of it), not compared; ``dynlab forward only (tape memory reused)``: the step's own
  forward pass, run as ``loss_and_grads`` runs it inside ``train_model`` (the same blocks and
  threads, the tape written into a kept ``Workspace``), not compared;
* ``dl.simulate, numba`` (floor, not compared): the forward states alone through the
  simulation kernels, no tape;
* ``the forward's products alone``, ``the backward's products alone`` and ``the step's
  products and tape traffic alone`` (not compared): only the BLAS products of the forward pass,
  of the backward pass, and of both with the tape written and read back in between (as many
  doubles as the real tape holds), in the step's shapes, blocks and threads (``_skeleton``),
  every other operand in cache and no element-wise work.  Three info lines, each over the
  floor: ``lower bound, products alone`` (the two product rows) and ``lower bound, products and
  tape traffic`` (the third row) — an exact step on this BLAS does at least this work (the
  state cotangent needs z̄ U at every inner step, and the weight gradient Σ z̄ᵀ s has as many
  multiply-adds as the forward's products; a step that keeps no tape recomputes the forward's
  products instead); and ``the floor's element-wise share`` (floor − the forward's products).
  The goal of 2.5 leaves 2.5 − the second bound for every element-wise pass of the forward and
  the backward pass together: where that is less than the floor's share, the step would have to
  do them faster than ``dl.simulate`` does the forward's alone (the passes can overlap the tape
  traffic, so this is a measure of the headroom, not a proof).  A fourth info line, ``lower
  bound, the step's own parts``: (the step's own forward, memory reused + the backward's
  products) / floor.  The step in ``train_model`` is that forward pass followed by a backward
  pass that does at least those products, so it takes at least this long even if every
  element-wise pass of the backward and every read of the tape were free: the goal of 2.5
  leaves (2.5 − this bound) × floor for all of them;
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
* the three product rows and their three info lines, as for the iRNN (forward: per step the augmented
  rows [h | x | 1] times their (D+d+1, G·D) weights; backward: per step ḡ_t W_hh, per chunk of
  ``WEIGHT_CHUNK_STEPS`` steps the weight gradient's product);
* ``torch autograd (nn.GRU / nn.LSTM)``: PyTorch's own module in float64, eager on the CPU
  (``torch.get_num_threads()`` threads), ``loss.backward()``;
* ``jax jit(value_and_grad)``: the cell written in ``lax.scan``, jitted.

Each is a separate workload (the harness compares every row with its workload's reference);
the info lines give dynlab's speed-up over each peer (goal ≥ 1: at least as fast) and the step's
time over the forward floor's (goal ≤ 2.5).
"""
from __future__ import annotations

import numpy as np
from numba import njit

import dynlab as dl
from dynlab import config
from dynlab.backends.numba.threads import in_threads, small_gemm
from dynlab.backends.numba._arrays import gemm_rows
from dynlab.backends.numba.loops import dot_rows
from dynlab.train import backprop as bp

from .harness import Impl, Workload
from .peers import jax_or_none, torch_or_none


#: The row of the step as ``train_model`` runs it: the tape memory reused from the step before.
REUSED = "dynlab BPTT, tape memory reused"
#: The rows timing only the step's BLAS products (and its tape's memory traffic), and the floor.
FLOOR = "dl.simulate, numba"
PRODUCTS = "the backward's products alone"
FWD_PRODUCTS = "the forward's products alone"
SKELETON = "the step's products and tape traffic alone"
BOUND = "lower bound, products alone: (the forward's + the backward's products) / floor"
BOUND_TAPE = "lower bound, products and tape traffic: the step's products and tape traffic / floor"
SHARE = "the floor's element-wise share: (floor − the forward's products) / floor"
FWD_REUSED = "dynlab forward only (tape memory reused)"
BOUND_OWN = "lower bound, the step's own parts: (its taped forward + the backward's products) / floor"


@njit(nogil=True, cache=True)
def _skeleton(steps, chunk, fwd, bwd, X, Wf, zf, tape, row, acc, Z, W, S, out, part, rows_f, rows_b):
    """The BLAS products of a training step and its tape's memory traffic, and nothing else.

    ``fwd``: per step the forward product X Wf → zf and, when ``tape`` has a row per step
    (tape (steps, B, r), else (1, 1, 1)), the step's tape rows written (tape[t] ← row).
    ``bwd``: per step backwards, the tape's rows read (acc += tape[t]) when taped, the cotangent
    product Z[k] W → out (B, D), and after every ``chunk`` steps (and the last) one
    weight-gradient product S[:n]ᵀ Z[:n] over the chunk's n·B rows → part.  Z (chunk, B, G),
    W (G, D), S (chunk, B, a), part (a, G): the shapes of ``dynlab.backends.numba.train.irnn_backward`` (steps = K·T
    inner steps, chunk = K, G = a = D) and of ``dynlab.backends.numba.train.gru_backward_all`` /
    ``lstm_backward_all`` (steps = T, chunk = ``WEIGHT_CHUNK_STEPS``, G = 3D or 4D, a = D + d + 1).
    Every operand but the tape stays in cache: the work of the real passes, minus their
    element-wise passes.  The forward and cotangent products are made in calls of ``rows_f`` /
    ``rows_b`` rows, as the real passes make them (``kernels.gemm_rows``)."""
    B = Z.shape[1]
    taped = tape.shape[0] == steps
    if fwd:
        for t in range(steps):
            dot_rows(X, Wf, zf, rows_f)
            if taped:
                for b in range(B):
                    for j in range(row.shape[1]):
                        tape[t, b, j] = row[b, j]
    if bwd:
        k = 0
        for t in range(steps - 1, -1, -1):
            if taped:
                for b in range(B):
                    for j in range(row.shape[1]):
                        acc[b, j] += tape[t, b, j]
            dot_rows(Z[k], W, out, rows_b)
            k += 1
            if k == chunk or t == 0:
                np.dot(S[:k].reshape(k * B, S.shape[2]).T, Z[:k].reshape(k * B, Z.shape[2]), part)
                k = 0


def _tape_doubles(m, x, steps) -> int:
    """Doubles per sequence and per (inner) step that the step's taped forward pass keeps (its
    tape's arrays, measured on a one-sequence forward pass; the inputs not counted)."""
    tape = bp.forward(m, x[:1]).inner               # the backend's own tape
    layers = getattr(tape, "layers", [tape])       # a GRU/LSTM: a MapTape of one layer's tape
    n = sum(v.size for lt in layers for k, v in vars(lt).items() if isinstance(v, np.ndarray) and k not in ("x", "eta"))
    if n == 0:
        raise RuntimeError(f"no tape arrays found in {type(tape).__name__}")
    return round(n / steps)


def _skeleton_rows(m, x, steps, chunk, Wf, W, a):
    """The three rows ``FWD_PRODUCTS``, ``PRODUCTS`` and ``SKELETON``: ``_skeleton`` on each of
    ``loss_and_grads``'s blocks of the batch, one thread (and one BLAS thread) each, as the step
    runs them.  Wf (a, G): the taped forward's product (augmented rows for the GRU/LSTM); W (G, D):
    the backward's.  Operands random (no subnormals)."""
    B = x.shape[0]
    edges = bp._train_blocks(m, B)
    rng = np.random.default_rng(0)
    Wf, W = (np.ascontiguousarray(v, dtype=np.float64) for v in (Wf, W))
    G, D = W.shape
    r = _tape_doubles(m, x, steps)
    none = np.empty((1, 1, 1))
    blocks = []
    for lo, hi in zip(edges, edges[1:]):
        b = hi - lo
        blocks.append(dict(X=rng.standard_normal((b, Wf.shape[0])), zf=np.empty((b, Wf.shape[1])),
                           tape=np.zeros((steps, b, r)), row=rng.standard_normal((b, r)), acc=np.zeros((b, r)),
                           Z=rng.standard_normal((chunk, b, G)), S=rng.standard_normal((chunk, b, a)),
                           out=np.empty((b, D)), part=np.empty((a, G)),
                           rows_f=gemm_rows(b, *Wf.shape, small_gemm()), rows_b=gemm_rows(b, *W.shape, small_gemm())))

    def rows(fwd, bwd, taped):
        def call():
            def block(i):
                k = blocks[i]
                _skeleton(steps, chunk, fwd, bwd, k["X"], Wf, k["zf"], k["tape"] if taped else none, k["row"],
                          k["acc"], k["Z"], W, k["S"], k["out"], k["part"], k["rows_f"], k["rows_b"])
                return k["part"]

            return in_threads(block, len(blocks))

        return call

    n = f"{len(blocks)} block(s)"
    return [Impl(FWD_PRODUCTS, rows(True, False, False), check=False, note=f"{steps} products; {n}"),
            Impl(PRODUCTS, rows(False, True, False), check=False,
                 note=f"{steps} cotangent products, a weight-gradient product per {chunk} steps; {n}"),
            Impl(SKELETON, rows(True, True, True), check=False,
                 note=f"both, with {r} tape doubles per sequence and step written and read back; {n}")]


BOUND_RATIOS = [(BOUND, (FWD_PRODUCTS, PRODUCTS), FLOOR), (BOUND_TAPE, SKELETON, FLOOR),
                (BOUND_OWN, (FWD_REUSED, PRODUCTS), FLOOR), (SHARE, (FLOOR, "-" + FWD_PRODUCTS), FLOOR)]


def _forward_reused(m, x):
    """The row ``FWD_REUSED``: the taped forward pass alone, exactly as ``loss_and_grads`` runs it
    inside a step of ``train_model`` — on ``_train_blocks``'s blocks, one thread each, BLAS on
    one thread, each block's tape written into its arena of one ``Workspace`` kept between calls.
    Returns the blocks' tapes."""
    edges = bp._train_blocks(m, x.shape[0])
    ws = bp.Workspace()
    ws.arena(len(edges) - 2)
    h0 = np.zeros((x.shape[0], m.state_size))

    be = dl.get_backend("numba")

    def fwd(i, lo, hi):
        with be.tape_memory(ws.arena(i)):
            return bp.forward(m, x[lo:hi], h0[lo:hi], backend=be)

    def call():
        ws.start()
        return bp._each_block(fwd, edges)

    return Impl(FWD_REUSED, call, check=False, note="the step's forward pass, workspace=: its tape memory reused")


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
    """``call`` with dynlab's training limit switched off (``config.NUMBA_BLAS_THREADS = None``)."""
    def run():
        saved = config.NUMBA_BLAS_THREADS
        config.NUMBA_BLAS_THREADS = None
        try:
            return call()
        finally:
            config.NUMBA_BLAS_THREADS = saved

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
    impls = [Impl("dynlab BPTT", step, note=f"default: TRAIN_THREADS = {config.TRAIN_THREADS}, NUMBA_BLAS_THREADS = {config.NUMBA_BLAS_THREADS}"),
             Impl("dynlab BPTT, forced 1 BLAS thread", _forced_single_thread(step), note="threadpoolctl, every BLAS"),
             Impl("dynlab BPTT, BLAS's own threads", _blas_own_threads(step), note="NUMBA_BLAS_THREADS = None"),
             Impl("dynlab BPTT, one block", _one_block(step), note="TRAIN_THREADS = 1: the batch not split"),
             Impl(REUSED, _dynlab(m, x, y, readout, bp.Workspace()), note="workspace=: as every step of train_model")]
    impls.append(Impl("dynlab forward only (tape)", lambda: bp.forward(m, x).H, check=False,
                      note="the taped forward pass alone"))
    impls.append(_forward_reused(m, x))
    impls.append(Impl(FLOOR, lambda: dl.simulate(m, x)["h"].values, check=False,
                      note="floor: forward states, no tape"))
    impls += _skeleton_rows(m, x, T * m.K, m.K, m.U.T, m.U, m.hidden)
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
                       ("train step / forward floor (goal ≤ 2.5)", "dynlab BPTT", FLOOR),
                       ("train step in train_model / forward floor (goal ≤ 2.5)", REUSED, FLOOR),
                       *BOUND_RATIOS,
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
                      note=f"default: TRAIN_THREADS = {config.TRAIN_THREADS}, NUMBA_BLAS_THREADS = {config.NUMBA_BLAS_THREADS}"),
                 Impl(REUSED, _gated_dynlab(m, x, y, readout, bp.Workspace()),
                      note="workspace=: as every step of train_model"),
                 Impl("dynlab forward only (tape)", lambda: bp.forward(m, x).H, check=False,
                      note="the taped forward pass alone"),
                 _forward_reused(m, x),
                 Impl(FLOOR, lambda: dl.simulate(m, x)["h"].values, check=False,
                      note="floor: forward states, no tape")]
        from dynlab.backends.numba.bptt import WEIGHT_CHUNK_STEPS   # the gated backward's weight-gradient chunk

        c = max(1, min(WEIGHT_CHUNK_STEPS, T))
        a = m.hidden + x.shape[2] + 1
        impls += _skeleton_rows(m, x, T, c, np.vstack([m.W_hh.T, np.zeros((a - m.hidden, m.W_hh.shape[0]))]), m.W_hh, a)
        ratios = [("train step / forward floor (goal ≤ 2.5)", "dynlab BPTT", FLOOR),
                  ("train step in train_model / forward floor (goal ≤ 2.5)", REUSED, FLOOR),
                  *BOUND_RATIOS]
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

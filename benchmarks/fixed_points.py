"""Workload ``fixed-points`` (docs/design.md, *Benchmarks*): all the fixed points of the trained
3-bit flip-flop GRU (D = 64), from 1024 starts on its own trajectories.

The network: ``benchmarks/data/flipflop_gru64.npz``, a GRU (D = 64, 3 inputs, PyTorch's
initialisation, seed 0) trained on ``make_task("flipflop", 100, seed=0)`` with dynlab's exact
BPTT (``dl.train_model``) by ``python -m benchmarks.make_flipflop_gru`` (the file records the
iterations, learning rate and the losses reached).  The starts: 1024 states drawn (seed 0) from
its trajectories on 64 test sequences of the task (T = 100), the same for every row; the input
is x = 0 (the memory phase).  Rows:

* ``dl.fixed_points`` (reference): the public call — damped Newton from every start, then
  Levenberg–Marquardt for the rows it leaves, a second pass from the midpoints of the distinct
  minima (where the saddles lie), Newton polish, deduplication, Newton–Kantorovich certificates,
  eigenvalues and the unstable eigenvectors, the Dataset;
* ``dynlab search (array layer)``: the same first pass and polish on the 1024 starts only
  (``_search`` + ``newton_batched``), no second pass, no linearisation, no Dataset;
* ``JAX Adam on q`` (the peer, when JAX is importable): FixedPointFinder's method (Golub &
  Sussillo 2018) — minimise q(h) = ½‖F(h)‖², F(h) = step(h, 0) − h, by Adam from every start at
  once — written in JAX (``jit``, ``lax.scan`` over chunks of 500 iterations, batched over the
  starts, float64), with a per-start adaptive learning rate (×1.1 after a step that lowers q,
  ×0.5 after one that raises it, in the spirit of FixedPointFinder's adaptive rate; initial rate
  ``ADAM_LR``, β = (0.9, 0.999), ε = 1e-8), stopped when every q ≤ 1e-20 or after
  FixedPointFinder's default ``max_iters`` = 5000 iterations.

The rows return different things (the distinct points vs every start's end point), so they are
not compared by the harness; the info lines compare them with one rule: of the end points with
q ≤ Q (Q = 1e-20, and FixedPointFinder's default tolerance 1e-12), the distinct ones (greedy,
distance ≤ 1e-3·(1 + ‖p‖)), their largest residual ‖F‖∞, and how many are stable / saddles.
"""
from __future__ import annotations

import os
import time

import numpy as np

import dynlab as dl

from .harness import Impl, Workload

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = os.path.join(HERE, "data", "flipflop_gru64.npz")
N_STARTS, TRAJECTORIES, STEPS = 1024, 64, 100
ADAM_LR, ADAM_ITERS, CHUNK = 1e-2, 5000, 500
Q_TARGET = 1e-20
DEDUP = 1e-3


def load_gru(path=WEIGHTS):
    """The trained flip-flop GRU and its read-out (W_out, b_out) from the benchmark's .npz."""
    from dynlab.models.gru_lstm import GRU

    z = np.load(path)
    return GRU(z["W_ih"], z["W_hh"], z["b_ih"], z["b_hh"]), {"W_out": z["W_out"], "b_out": z["b_out"]}


def starts_on_trajectories(m, n, *, seed=0):
    """n states drawn (seeded) from the GRU's trajectories on the flip-flop's test split."""
    task = dl.make_task("flipflop", STEPS, seed=1, n_train=4, n_val=4, n_test=TRAJECTORIES)
    x, _ = task.batch("test")
    H = dl.simulate(m, x, backend="numpy")["h"].values.reshape(-1, m.state_size)
    return H[np.random.default_rng(seed).integers(0, H.shape[0], n)]


def distinct(P, q=None, q_max=np.inf):
    """The distinct rows of P among those with q ≤ q_max (greedy; distance ≤ DEDUP·(1 + ‖p‖))."""
    if q is not None:
        P = P[q <= q_max]
    out = []
    for p in P:
        if all(np.linalg.norm(p - u) > DEDUP * (1.0 + np.linalg.norm(u)) for u in out):
            out.append(p)
    return np.array(out).reshape(-1, P.shape[1])


def describe(m, P):
    """(count, max residual ‖F‖∞, stable, one-unstable-mode saddles) of fixed points P."""
    if P.shape[0] == 0:
        return 0, float("nan"), 0, 0
    X = np.zeros((P.shape[0], m.inputs))
    F = m.step(P, X) - P
    mu = np.abs(np.linalg.eigvals(m.step_jacobian(P, X)))
    unstable = (mu > 1 + 1e-9).sum(axis=1)
    return P.shape[0], float(np.abs(F).max()), int((unstable == 0).sum()), int((unstable == 1).sum())


def jax_adam(m, S0, *, lr=ADAM_LR, iters=ADAM_ITERS, q_target=Q_TARGET):
    """The peer: Adam on q(h) = ½‖step(h, 0) − h‖² from every row of S0 (module docstring).
    Returns a callable ``run(seconds=None)`` → (end points (N, D), q (N,), iterations run,
    seconds to q ≤ q_target for every start or None); with ``seconds`` it runs chunks until
    that much time has passed instead of stopping at ``iters``."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_enable_x64", True)
    D = m.hidden
    Whh, bhh = jnp.asarray(m.W_hh), jnp.asarray(m.b_hh)
    gi = jnp.asarray(m.drive(np.zeros((1, m.inputs)))[0])

    def F(h):
        gh = h @ Whh.T + bhh
        r = jax.nn.sigmoid(gi[:D] + gh[..., :D])
        z = jax.nn.sigmoid(gi[D:2 * D] + gh[..., D:2 * D])
        n = jnp.tanh(gi[2 * D:] + r * gh[..., 2 * D:])
        return (1.0 - z) * n + z * h - h

    def q_of(h):
        f = F(h)
        return 0.5 * jnp.sum(f * f, axis=-1)

    grad = jax.grad(lambda h: jnp.sum(q_of(h)))
    b1, b2, eps = 0.9, 0.999, 1e-8

    @jax.jit
    def chunk(h, mo, v, rate, q, t0):
        def body(carry, i):
            h, mo, v, rate, q = carry
            g = grad(h)
            t = t0 + i + 1
            mo = b1 * mo + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            h = h - rate[:, None] * (mo / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps)
            q_new = q_of(h)
            rate = jnp.where(q_new < q, rate * 1.1, rate * 0.5)
            return (h, mo, v, rate, q_new), None

        (h, mo, v, rate, q), _ = lax.scan(body, (h, mo, v, rate, q), jnp.arange(CHUNK))
        return h, mo, v, rate, q

    h0 = jnp.asarray(S0)
    chunk(h0, jnp.zeros_like(h0), jnp.zeros_like(h0), jnp.full(S0.shape[0], lr), q_of(h0), 0)[4].block_until_ready()

    def run(seconds=None):
        t_start = time.perf_counter()
        h, mo, v = h0, jnp.zeros_like(h0), jnp.zeros_like(h0)
        rate, q = jnp.full(S0.shape[0], lr), q_of(h0)
        done, reached = 0, None
        while (done < iters) if seconds is None else (time.perf_counter() - t_start < seconds):
            h, mo, v, rate, q = chunk(h, mo, v, rate, q, done)
            done += CHUNK
            if float(jnp.max(q)) <= q_target:
                reached = time.perf_counter() - t_start
                break
        return np.asarray(h), np.asarray(q), done, reached

    return run


def build(quick: bool):
    from dynlab.analysis.equilibria import fixed_point_map, newton_batched
    from dynlab.analysis.fixed_points import _search

    m, _ = load_gru()
    n = 256 if quick else N_STARTS
    iters = 1000 if quick else ADAM_ITERS
    S0 = starts_on_trajectories(m, n)
    x0 = np.zeros(m.inputs)
    system = fixed_point_map(m)
    c = system.c_rows(x0[None], n)

    def dl_call():
        fp = dl.fixed_points(m, x0, n_starts=0, starts=S0, slow_tol=1e-10)
        return fp["h_eq"].values[fp["kind"].values == 1]

    def array_layer():
        Y, q, _ = _search(system, c, S0, 1e-12, 200)
        ok = q <= 1e-10
        Yp, res, _, conv = newton_batched(system, c[ok], Y[ok], tol=1e-12)
        return Yp[conv]

    impls = [Impl("dl.fixed_points (public call, + second pass, linearisation, Dataset)", dl_call),
             Impl("dynlab search (array layer: Newton → LM, polish; 1024 starts, no second pass)", array_layer,
                  check=False, note="returns every converged start")]
    info = {"sizes": f"trained flip-flop GRU D={m.hidden}, {n} starts on its trajectories "
                     f"({TRAJECTORIES} test sequences × T={STEPS}), x = 0, float64"}
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        P = dl_call()
        times.append(time.perf_counter() - t0)
    t_dl = float(np.median(times))
    k, res, st, sad = describe(m, distinct(P))
    Q = 0.5 * np.sum((m.step(P, np.zeros((len(P), m.inputs))) - P) ** 2, axis=1)
    info["dl.fixed_points: distinct fixed points (rule above)"] = (
        f"{k} (stable {st}, one-unstable-mode saddles {sad}), max residual ‖F‖∞ {res:.1e}, max q {Q.max():.1e}")
    A = array_layer()
    k, res, st, sad = describe(m, distinct(A))
    info["array layer: distinct fixed points"] = f"{k} (stable {st}, saddles {sad}), max residual {res:.1e}"
    jax = None
    try:
        import jax  # noqa: F401
    except Exception:
        info["JAX Adam peer"] = "left out: JAX is not importable"
    if jax is not None:
        run = jax_adam(m, S0, iters=iters)
        impls.append(Impl(f"JAX Adam on q (jit, batched; ≤ {iters} iterations or all q ≤ 1e-20)",
                          lambda: run()[0], check=False, note="FixedPointFinder's method"))
        t0 = time.perf_counter()
        h, q, done, reached = run()
        t_adam = time.perf_counter() - t0
        info["Adam: iterations, time to every q ≤ 1e-20"] = (
            f"{done} iterations in {t_adam:.3g} s; " + (f"all q ≤ 1e-20 after {reached:.3g} s" if reached
                                                         else "q ≤ 1e-20 not reached by every start"))
        info["Adam: q reached (max, median, min)"] = f"{q.max():.1e}, {np.median(q):.1e}, {q.min():.1e}"
        info["Adam: starts with q ≤ 1e-20 / ≤ 1e-12"] = f"{int((q <= 1e-20).sum())} / {int((q <= 1e-12).sum())} of {n}"
        for Qmax in (1e-20, 1e-12):
            k, res, st, sad = describe(m, distinct(h, q, Qmax))
            info[f"Adam: distinct fixed points with q ≤ {Qmax:g}"] = (
                f"{k} (stable {st}, saddles {sad})" + (f", max residual ‖F‖∞ {res:.1e}" if k else ""))
        k, res, st, sad = describe(m, distinct(h))
        info["Adam: distinct end points whatever their q"] = f"{k}, max residual ‖F‖∞ {res:.1e}"
        # the target read directly: Adam given 20× dynlab's time (its median over 3 calls here)
        h, q, done, reached = run(seconds=20.0 * t_dl)
        k, res, st, sad = describe(m, distinct(h, q, max(Q.max(), Q_TARGET)))
        info["Adam given 20× dl.fixed_points' time"] = (
            f"{20 * t_dl:.3g} s = {done} iterations: max q {q.max():.1e}, median q {np.median(q):.1e}; "
            f"starts at dynlab's residual (q ≤ {max(Q.max(), Q_TARGET):.0e}): {int((q <= max(Q.max(), Q_TARGET)).sum())}, "
            f"distinct fixed points there: {k}")
        info["ratios"] = [("speed-up of dl.fixed_points over the Adam peer (medians)", impls[-1].name,
                           impls[0].name)]
    return impls, info


WORKLOADS = [Workload("fixed-points", "trained flip-flop GRU D=64, 1024 starts: all fixed points", build,
                      baseline="dl.fixed_points (public call, + second pass, linearisation, Dataset)",
                      rtol=1e-10, repeat=3)]

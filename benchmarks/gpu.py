"""``python -m benchmarks.run --gpu``: the GPU table of issue 36 (docs/design.md, *Benchmarks*, ``gpu``).

One row per workload, every column measured in this one run on this machine: dynlab's ``cupy``
backend (fused kernels), dynlab's ``numba`` backend on all cores and pinned to two, and the
peers on the same GPU where installed — JAX (``jit(vmap(scan))`` for the sweep, ``jit(scan)`` for
the forwards) and torch (``nn.GRU``/``nn.LSTM``, cuDNN).  Every result is checked against the
NumPy reference (or, where the reference would take minutes, against dynlab's numba backend,
itself tested against it) before it is timed; the column ``agrees`` is the largest relative
difference.  A last line: the largest sweep that fits the GPU's free memory
(``GPUBackend.region_from_memory``), run as one call, in settings per second.

Without a usable GPU (no device, no CuPy, or only Numba's simulator) it refuses in one line.
"""
from __future__ import annotations

import contextlib
import statistics
import time

import numpy as np

def gpu_problem() -> str | None:
    """None when dynlab's GPU backend runs on a real device here, else why not (one line)."""
    from dynlab.backends.gpu.device import runtime

    rt = runtime()
    if rt.problem is not None:
        return rt.problem
    if rt.simulator:
        return "only Numba's CUDA simulator is active (NUMBA_ENABLE_CUDASIM=1): nothing to time"
    return None


# ============================================================================ workload inputs
def sweep_grid(quick: bool = False) -> dict:
    """The issue's sweep grid: K 1..10 × 25 η × 40 weight scales (10⁴ settings; quick: 4 scales)."""
    return {"K": list(range(1, 11)), "eta": np.linspace(0.04, 1.0, 25).tolist(),
            "weight_scale": np.linspace(0.05, 2.0, 4 if quick else 40).tolist()}


def sweep_models(grid: dict, hidden: int = 32, steps: int = 200):
    """The iRNN models and inputs of every setting of ``grid`` (seed 0, random walk, d = 1)."""
    import dynlab as dl

    x = dl.tasks.random_walk(steps, 1, seed=0)
    models = [dl.make_model("irnn", hidden, 1, seed=0, K=K, eta=eta, weight_scale=ws)
              for K in grid["K"] for eta in grid["eta"] for ws in grid["weight_scale"]]
    return models, [x] * len(models)


def irnn_inputs(B: int, D: int, d: int, K: int, T: int, seed: int = 0):
    """(model, x (B, T, d), h0 (B, D)) of the forward workloads: tanh iRNN, weight scale 1."""
    import dynlab as dl

    m = dl.make_model("irnn", D, d, seed=seed, K=K, eta=0.5)
    rng = np.random.default_rng(seed)
    return m, rng.standard_normal((B, T, d)), np.zeros((B, D))


def gated_inputs(kind: str, B: int, D: int, d: int, T: int, seed: int = 0):
    """(model, x, h0) of the GRU/LSTM forwards (PyTorch's initialisation, tanh)."""
    import dynlab as dl

    m = dl.make_model(kind, D, d, seed=seed)
    rng = np.random.default_rng(seed)
    return m, rng.standard_normal((B, T, d)), np.zeros((B, m.state_size))


def agreement(result, reference) -> float:
    """The largest relative difference max|a − r| / max(1, |r|) over the finite entries; inf when
    the NaN/inf positions differ."""
    a = np.asarray(result, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    if a.shape != r.shape or not np.array_equal(np.isfinite(a), np.isfinite(r)):
        return float("inf")
    ok = np.isfinite(r)
    if not ok.any():
        return 0.0
    return float(np.max(np.abs(a[ok] - r[ok]) / np.maximum(1.0, np.abs(r[ok]))))


# ============================================================================ timing
def median_time(fn, repeat: int = 3) -> float:
    """Median wall-clock seconds of ``repeat`` calls after one warm-up call (compilation)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@contextlib.contextmanager
def cores(n: int | None):
    """Numba's threads and BLAS's held to ``n`` (None: as they are)."""
    if n is None:
        yield
        return
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        with threadpool_limits(n):
            yield
    finally:
        numba.set_num_threads(old)


# ============================================================================ the table
def format_table(rows: list[dict], header: str = "") -> str:
    """Markdown: workload | dynlab cupy | numba all cores | numba 2 cores | peer | agrees.

    A row is a dict with ``workload``, ``unit`` ("s" or "settings/s"), ``cupy``, ``numba``,
    ``numba2`` (numbers or None: not run), ``peer`` (text or None) and ``agrees`` (the largest
    relative difference to the reference, or None)."""
    def cell(v, unit):
        if v is None:
            return "—"
        return f"{v:,.0f}" if unit == "settings/s" else f"{v:.4g} s"

    lines = ([header, ""] if header else []) + [
        "| workload | dynlab cupy | dynlab numba (all cores) | dynlab numba (2 cores) | peer on the same GPU | "
        "max rel. diff vs reference |",
        "|---|---:|---:|---:|---|---:|"]
    for r in rows:
        agree = "—" if r.get("agrees") is None else f"{r['agrees']:.1e}"
        lines.append(f"| `{r['workload']}` | {cell(r.get('cupy'), r['unit'])} | {cell(r.get('numba'), r['unit'])} | "
                     f"{cell(r.get('numba2'), r['unit'])} | {r.get('peer') or '—'} | {agree} |")
    return "\n".join(lines)


def _jax_sweep(forms, xs, dtype):
    """JAX ``jit(vmap(scan))`` over settings of the same forward-tangent algorithm (the K mask in
    η), returning ln‖∂h_T/∂h_1‖₂; None without JAX."""
    from .peers import jax_or_none

    jax = jax_or_none()
    if jax is None:
        return None
    import jax.numpy as jnp
    from jax import lax

    from dynlab.backends.base import stack_tangent

    tb = stack_tangent(forms, xs)
    R, C, E, alpha = (jnp.asarray(a, dtype=dtype) for a in (tb.R[tb.group], tb.drive(), tb.eta, tb.alpha))

    def one(U, c, eta, a):
        D = U.shape[0]

        def state(h, ct):
            g = jnp.zeros_like(h)
            for k in range(eta.shape[0]):
                s = g + h
                g = g + eta[k] * (jnp.tanh(U @ s + ct) - a * s)
            return g

        def step(carry, ct):        # h_m and M_m = ∂h_m/∂h_1 (Frobenius-normalised, log scale lg)
            h, M, lg = carry
            g, G = jnp.zeros_like(h), jnp.zeros_like(M)
            for k in range(eta.shape[0]):
                s, St = g + h, G + M
                z = U @ s + ct
                G = G + eta[k] * ((1 - jnp.tanh(z) ** 2)[:, None] * (U @ St) - a * St)
                g = g + eta[k] * (jnp.tanh(z) - a * s)
            f = jnp.sqrt(jnp.sum(G * G))
            return (g, G / f, lg + jnp.log(f)), None

        h1 = state(jnp.zeros(D, dtype), c[0])
        (_, M, lg), _ = lax.scan(step, (h1, jnp.eye(D, dtype=dtype), jnp.zeros((), dtype)), c[1:])
        return lg + jnp.log(jnp.linalg.norm(M, 2))

    run = jax.jit(jax.vmap(one))

    def call():
        return np.asarray(run(R, C, E, alpha).block_until_ready())

    return call


def main(quick: bool = False, repeat: int = 3, log=print) -> int:
    """Run the table (module docstring); 2 with one line on stderr where there is no GPU."""
    import sys

    problem = gpu_problem()
    if problem is not None:
        print(f"benchmarks --gpu: no GPU to benchmark here: {problem}", file=sys.stderr)
        return 2
    import dynlab as dl
    from dynlab.backends import get_backend
    from dynlab.backends.gpu import GPUBackend
    from dynlab.backends import to_numpy
    from dynlab.backends.gpu.device import free_bytes, runtime, synchronize

    from . import peers

    gpu = get_backend("cupy")
    numba_be = get_backend("numba")
    rows = []
    B = 32 if quick else None

    # ---- sweep: the default call of dl.sweep, float64; the float32 tangents; JAX vmap(scan)
    grid = sweep_grid(quick)
    fixed = {"model": "irnn", "hidden": 32, "steps": 200, "input": "random-walk"}
    n = int(np.prod([len(v) for v in grid.values()]))

    def sweep_on(backend):
        return dl.sweep("gradient_norms", grid, fixed=fixed, backend=backend)["log_jac_norm_1"].values.ravel()

    ref = sweep_on("numba")
    got = sweep_on("cupy")
    t_gpu = median_time(lambda: sweep_on("cupy"), repeat)
    t_cpu = median_time(lambda: sweep_on("numba"), 1)
    with cores(2):
        t_cpu2 = median_time(lambda: sweep_on("numba"), 1)
    models, xs = sweep_models(grid)
    forms = [m.form() for m in models]
    peer = None
    for dt in (np.float64, np.float32):
        jx = _jax_sweep(forms, xs, dt)
        if jx is not None:
            agrees = agreement(jx(), ref)
            peer = (peer + "; " if peer else "") + f"JAX {np.dtype(dt).name}: {n / median_time(jx, repeat):,.0f} " \
                                                 f"settings/s (agrees {agrees:.1e})"
    rows.append({"workload": "sweep", "unit": "settings/s", "cupy": n / t_gpu, "numba": n / t_cpu, "numba2": n / t_cpu2,
                 "peer": peer, "agrees": agreement(got, ref)})
    from dynlab.backends.base import stack_tangent

    tb32 = stack_tangent(forms, xs).astype(np.float32)
    xp = runtime().xp

    def f32():
        logs, M, _, _ = gpu._tangent_dev(tb32)
        out = logs + xp.log(gpu.top_singular(M))
        synchronize()
        return to_numpy(out)

    rows.append({"workload": "sweep-f32", "unit": "settings/s", "cupy": n / median_time(f32, repeat),
                 "agrees": agreement(f32(), ref)})

    # ---- forwards
    def forward_row(name, m, x, h0, dtype, jax_peer=None, torch_peer=None):
        ref = numba_be.simulate(m.form(), x, h0, dtype=np.float64)[0]

        def on(be):
            def call():
                return be.simulate(m.form(), x, h0, dtype=dtype)[0]
            return call

        row = {"workload": name, "unit": "s", "agrees": agreement(on(gpu)(), ref), "cupy": median_time(on(gpu), repeat),
               "numba": median_time(on(numba_be), 1)}
        with cores(2):
            row["numba2"] = median_time(on(numba_be), 1)
        texts = []
        for label, peer in (("JAX jit(scan)", jax_peer), ("torch", torch_peer)):
            if peer is not None:
                texts.append(f"{label}: {median_time(peer, repeat):.4g} s (agrees {agreement(peer(), ref):.1e})")
        row["peer"] = "; ".join(texts) or None
        rows.append(row)

    for name, Bn, dt in (("forward-large", 256, np.float64), ("forward-large-f32", 256, np.float32),
                         ("forward-B4096-f32", 4096, np.float32)):
        T = 100 if quick else 1000
        m, x, h0 = irnn_inputs(B or Bn, 128, 8, 5, T)
        f = m.form()
        jx = None
        if peers.jax_or_none() is not None and not f.g0prev and f.sign == 1.0:   # the peer's g_0 = 0, σ = +1
            jx = peers.jax_irnn_forward(f.U, f.W, f.b, x, h0, 0.5, f.alpha, 5, dtype=dt)
        forward_row(name, m, x, h0, dt, jax_peer=jx)
    for kind in ("gru", "lstm"):
        m, x, h0 = gated_inputs(kind, B or 1024, 256, 8, 50 if quick else 500)
        tp = peers.torch_gated_forward(m, x, h0) if peers.torch_or_none() is not None else None
        forward_row(f"{kind}-forward", m, x, h0, np.float64, torch_peer=tp)

    # ---- gradient norms, Lyapunov (the public analyses)
    m, x, _ = irnn_inputs(1, 128, 1, 5, 100 if quick else 1000)
    for name, fn, key in (("gradient_norms", dl.gradient_norms, "log_jac_norm"), ("lyapunov", dl.lyapunov, "lyapunov")):
        def call(backend, fn=fn, key=key):
            return fn(m, x[0], backend=backend)[key].values
        row = {"workload": name, "unit": "s", "agrees": agreement(call("cupy"), call("numba")),
               "cupy": median_time(lambda: call("cupy"), repeat), "numba": median_time(lambda: call("numba"), 1)}
        with cores(2):
            row["numba2"] = median_time(lambda: call("numba"), 1)
        rows.append(row)

    # ---- the largest sweep that fits, as one call
    big = GPUBackend.region_from_memory(free_bytes(), 32, 200, 10)
    reps = -(-big // n)
    forms_big, xs_big = (forms * reps)[:big], (xs * reps)[:big]
    t0 = time.perf_counter()
    gpu.sweep_gradients(forms_big, xs_big)
    dt_big = time.perf_counter() - t0
    print(format_table(rows, f"GPU: {gpu.device}; {_versions()}"))
    print(f"\nlargest sweep that fits ({big:,} settings, D=32, T=200, one call of sweep_gradients): "
          f"{big / dt_big:,.0f} settings/s")
    return 0


def _versions() -> str:
    out = []
    for mod in ("cupy", "numba", "numba_cuda", "jax", "torch"):
        try:
            out.append(f"{mod} {__import__(mod).__version__}")
        except Exception:
            continue
    return ", ".join(out)


__all__ = ["gpu_problem", "sweep_grid", "sweep_models", "irnn_inputs", "gated_inputs", "agreement",
           "median_time", "cores", "format_table", "main"]

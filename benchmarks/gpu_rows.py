"""The rows of ``python -m benchmarks.run --gpu`` (``benchmarks/gpu.py`` has the machinery): each
``row_*(ctx)`` builds its workload, checks every implementation against the reference and times it
at both scopes (public call, device-resident), and returns a ``gpu.Row``.

Peers on the same GPU: JAX ``jit(vmap(scan))`` (sweep) and ``jit(scan)`` (forwards), torch eager on
``cuda`` (the iRNN forward) and ``nn.GRU``/``nn.LSTM`` (cuDNN), each written here with a host and a
device-resident entry.  An LSTM is compared on h (torch returns no per-step c).
"""
from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np

from .gpu_common import Row, agreement, cores, gated_inputs, irnn_inputs, sweep_grid, sweep_models

#: float32 rows' agreement bounds (against the float64 reference), with why.
F32_STATES = 1e-3       # contracting iRNN/GRU/LSTM: per-step rounding ≈ (K·D + 10)·u ≈ 4e-5 (u = 6e-8) does not grow
F32_LOGNORM = 1e-2      # ln‖∂h_T/∂h_1‖ adds the rounding of T·K steps: ≤ T·K·D·u ≈ 4e-3 at T = 200, K = 10, D = 32


@dataclasses.dataclass
class Context:
    """What every row needs: the sizes, the backends, the peers (None where absent or not on the GPU,
    with why), the timed repeats, and results rows share (``memo``)."""

    sizes: object
    repeat: int
    tiny: bool
    gpu: object
    reference: str
    jax: object = None
    jax_why: str = ""
    torch: object = None
    torch_device: str = "cpu"
    torch_why: str = ""
    memo: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def make(cls, sizes, *, repeat: int, peers: str, tiny: bool):
        from dynlab.backends import get_backend

        ctx = cls(sizes, repeat, tiny, get_backend("cupy"), "numpy" if tiny else "numba")
        if peers == "none" or (tiny and peers == "auto"):       # --tiny: peers (on the CPU) only with --peers on
            ctx.jax_why = ctx.torch_why = "peers off"
            return ctx
        was_imported = "jax" in sys.modules
        try:
            import jax

            jax.config.update("jax_enable_x64", True)
            backend = jax.default_backend()
            if backend != "gpu" and not tiny:
                ctx.jax_why = f"JAX runs on {backend!r}, not the GPU: not timed"
            elif was_imported:
                ctx.jax_why = "JAX was imported before XLA_PYTHON_CLIENT_PREALLOCATE=false was set: not timed"
            else:
                ctx.jax = jax
        except Exception as exc:
            ctx.jax_why = f"JAX: {type(exc).__name__}: {exc}"
        try:
            import torch

            if torch.cuda.is_available():
                ctx.torch, ctx.torch_device = torch, "cuda"
            elif tiny:
                ctx.torch = torch
            else:
                ctx.torch_why = "torch.cuda.is_available() is False: not timed"
        except Exception as exc:
            ctx.torch_why = f"torch: {type(exc).__name__}: {exc}"
        return ctx

    def peer_state(self) -> str:
        import os

        j = (f"JAX on {self.jax.devices()[0]} (XLA_PYTHON_CLIENT_PREALLOCATE="
             f"{os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE')})") if self.jax else f"JAX: {self.jax_why}"
        t = f"torch on {self.torch_device}" if self.torch else f"torch: {self.torch_why}"
        return f"{j}; {t}"

    def release_memory(self):
        """Between rows: CuPy's pool and torch's cache give their unused blocks back, so that one
        framework's cached memory does not crowd the next row's (JAX allocates on demand)."""
        from dynlab.backends.gpu.device import runtime

        rt = runtime()
        if not rt.simulator and hasattr(rt.xp, "get_default_memory_pool"):
            rt.xp.get_default_memory_pool().free_all_blocks()
        if self.torch is not None and self.torch_device == "cuda":
            self.torch.cuda.empty_cache()

    def sync(self):
        from dynlab.backends.gpu.device import synchronize

        synchronize()

    def torch_sync(self):
        if self.torch is not None and self.torch_device == "cuda":
            self.torch.cuda.synchronize()


def _timed(run, repeat: int) -> float:
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(ctx, row: Row, key: str, run, ref=None, fetch=np.asarray, rate: int | None = None, repeat=None,
            peer: bool = False):
    """Run ``run`` once (compilation; its result → ``fetch`` → checked against ``ref``), then time it:
    median seconds (or ``rate``/seconds) into ``row.times[key]``.  A peer that raises becomes a note;
    dynlab raising fails the row."""
    try:
        out = run()
        if ref is not None:
            row.agrees[key] = agreement(fetch(out), ref)
        t = _timed(run, ctx.repeat if repeat is None else repeat)
    except Exception as exc:
        if not peer:
            raise
        row.notes.append(f"{key}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return None
    row.times[key] = rate / t if rate else t
    return t


def cpu_columns(ctx, row: Row, run, ref=None, fetch=np.asarray, rate=None, run2=None, rate2=None):
    """dynlab's numba backend on all cores and on two (``run2``/``rate2``: a smaller instance for the
    two-core column, for rates); none under ``--tiny``."""
    if ctx.tiny:
        return
    with cores(None):
        measure(ctx, row, "numba", run, ref, fetch, rate, repeat=1)
    with cores(2):
        measure(ctx, row, "numba2", run2 or run, None if run2 else ref, fetch, rate2 or rate, repeat=1)


# ============================================================================ the sweep
def _sweep_arrays(forms, xs, dtype):
    """The JAX peer's inputs from the models themselves: U (S, D, D), the drives C (S, T, D), η padded
    with zeros past each setting's K (those inner steps leave g and its tangent unchanged), α."""
    K = max(f.K for f in forms)
    U = np.stack([f.U for f in forms]).astype(dtype)
    C = np.stack([np.asarray(x, dtype=np.float64).reshape(x.shape[0], -1) @ f.W.T + f.b for f, x in zip(forms, xs)])
    E = np.zeros((len(forms), K))
    for s, f in enumerate(forms):
        E[s, :f.K] = f.eta[0]
    return U, C.astype(dtype), E.astype(dtype), np.array([f.alpha for f in forms], dtype=dtype)


def jax_sweep(ctx, forms, xs, dtype):
    """JAX ``jit(vmap(scan))`` of the same forward-tangent algorithm (tanh, g₀ = 0, σ = +1): ln‖∂h_T/∂h_1‖₂
    per setting.  Returns (host call, device call, fetch)."""
    jax = ctx.jax
    import jax.numpy as jnp
    from jax import lax

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

        h1 = state(jnp.zeros(D, U.dtype), c[0])
        (_, M, lg), _ = lax.scan(step, (h1, jnp.eye(D, dtype=U.dtype), jnp.zeros((), U.dtype)), c[1:])
        return lg + jnp.log(jnp.linalg.norm(M, 2))

    fn = jax.jit(jax.vmap(one))
    host = _sweep_arrays(forms, xs, dtype)
    dev = [jax.device_put(a) for a in host]
    return (lambda: np.asarray(fn(*host)), lambda: fn(*dev).block_until_ready(), np.asarray)


def _device_batch(forms, xs, dtype):
    """The forms' ``TangentBatch`` with every array on the device (floats in ``dtype``)."""
    from dynlab.backends.base import stack_tangent
    from dynlab.backends.gpu.device import to_device

    tb = stack_tangent(forms, xs)
    out = {}
    for f in dataclasses.fields(tb):
        v = getattr(tb, f.name)
        if isinstance(v, np.ndarray):
            out[f.name] = to_device(v, dtype if v.dtype.kind == "f" else v.dtype)
    return dataclasses.replace(tb, **out)


def _device_sweep(ctx, tb):
    """ln‖∂h_T/∂h_1‖₂ of a device batch by the backend's public operations (``forward_tangent``,
    ``top_singular``), the results left on the device."""
    from dynlab.backends.gpu.device import runtime

    xp = runtime().xp

    def run():
        with ctx.gpu.results_on_device():
            logs, M, _, _ = ctx.gpu.forward_tangent(tb)
            out = logs + xp.log(ctx.gpu.top_singular(M))
        ctx.sync()
        return out
    return run


def row_sweep(ctx) -> Row:
    import dynlab as dl
    from dynlab.backends.gpu.device import to_host

    S = ctx.sizes
    grid = sweep_grid(scales=S.sweep_scales, ks=S.sweep_ks, etas=S.sweep_etas)
    fixed = {"model": "irnn", "hidden": S.sweep_hidden, "steps": S.sweep_steps, "input": "random-walk"}
    n = int(np.prod([len(v) for v in grid.values()]))

    def public(backend, g=grid):
        return dl.sweep("gradient_norms", g, fixed=fixed, backend=backend)["log_jac_norm_1"].values.ravel()

    ref = public(ctx.reference)
    row = Row("sweep", size=f"{n:,} settings (K 1–{S.sweep_ks} × {S.sweep_etas} η × {S.sweep_scales} weight scales), "
                            f"iRNN D={S.sweep_hidden}, "
                            f"T={S.sweep_steps}", unit="settings/s")
    measure(ctx, row, "dynlab-host", lambda: public(ctx.gpu), ref, rate=n)
    models, xs = sweep_models(grid, S.sweep_hidden, S.sweep_steps)
    forms = [m.form() for m in models]
    measure(ctx, row, "dynlab-device", _device_sweep(ctx, _device_batch(forms, xs, np.float64)), ref, to_host, rate=n)
    ctx.memo["sweep"] = (forms, xs, ref, n, row.times.get("dynlab-device"))
    if ctx.jax is not None:
        host, dev, fetch = jax_sweep(ctx, forms, xs, np.float64)
        measure(ctx, row, "jax-host", host, ref, rate=n, peer=True)
        measure(ctx, row, "jax-device", dev, ref, fetch, rate=n, peer=True)
    else:
        row.notes.append(ctx.jax_why)
    small = sweep_grid(scales=max(1, S.sweep_scales // 10), ks=S.sweep_ks, etas=S.sweep_etas)
    n2 = int(np.prod([len(v) for v in small.values()]))
    cpu_columns(ctx, row, lambda: public("numba"), ref, rate=n, run2=lambda: public("numba", small), rate2=n2)
    if not ctx.tiny:
        row.notes.append(f"numba (2 cores) on {n2:,} of the settings (a rate)")
    _goals(row, [("dynlab-host", 100_000, "≥ 100,000 settings/s (dl.sweep as a user calls it)"),
                 ("dynlab-device", 200_000, "kernel-only ≥ 200,000 settings/s")])
    if row.times.get("jax-device"):
        row.notes.append(f"dl.sweep / JAX device-resident: {row.times['dynlab-host'] / row.times['jax-device']:.2f}× "
                         f"(goal ≥ 5×)")
    return row


def row_sweep_f32(ctx) -> Row:
    from dynlab.backends.gpu.device import to_host

    if "sweep" not in ctx.memo:
        raise RuntimeError("the float64 sweep row did not run")
    forms, xs, ref, n, t64 = ctx.memo["sweep"]
    row = Row("sweep-f32", size=f"{n:,} settings, as `sweep`", unit="settings/s", precision="float32",
              threshold=F32_LOGNORM)
    row.notes.append(f"float32 bound {F32_LOGNORM:g}: rounding of T·K·D operations at u = 6e-8, against float64")
    measure(ctx, row, "dynlab-device", _device_sweep(ctx, _device_batch(forms, xs, np.float32)), ref, to_host, rate=n)
    if ctx.jax is not None:
        host, dev, fetch = jax_sweep(ctx, forms, xs, np.float32)
        measure(ctx, row, "jax-host", host, ref, rate=n, peer=True)
        measure(ctx, row, "jax-device", dev, ref, fetch, rate=n, peer=True)
    if t64 and row.times.get("dynlab-device"):
        row.notes.append(f"float32 / float64 device-resident: {row.times['dynlab-device'] / t64:.2f}× (goal ≥ 1.5×)")
    return row


def row_sweep_largest(ctx) -> Row:
    import dynlab as dl
    from dynlab.backends.gpu import GPUBackend
    from dynlab.backends.gpu.device import free_bytes

    S = ctx.sizes
    fits = GPUBackend.region_from_memory(free_bytes(), S.sweep_hidden, S.sweep_steps, 10)
    scales = max(1, min(fits, S.sweep_largest) // (S.sweep_ks * S.sweep_etas))
    grid = sweep_grid(scales=scales, ks=S.sweep_ks, etas=S.sweep_etas)
    n = int(np.prod([len(v) for v in grid.values()]))
    fixed = {"model": "irnn", "hidden": S.sweep_hidden, "steps": S.sweep_steps, "input": "random-walk"}
    row = Row("sweep-largest", size=f"{n:,} settings in one call (one region holds {fits:,}), D={S.sweep_hidden}, "
                                    f"T={S.sweep_steps}", unit="settings/s")
    part = dict(grid, weight_scale=grid["weight_scale"][:2])
    first = len(part["weight_scale"])
    ref = dl.sweep("gradient_norms", part, fixed=fixed, backend=ctx.reference)["log_jac_norm_1"].values.ravel()

    def run():
        return dl.sweep("gradient_norms", grid, fixed=fixed, backend=ctx.gpu)["log_jac_norm_1"].values
    measure(ctx, row, "dynlab-host", run, ref, fetch=lambda v: np.asarray(v)[:, :, :first].ravel(), rate=n,
            repeat=1)
    row.notes.append(f"checked against the reference on the first {first} weight scales")
    return row


# ============================================================================ forwards
def _jax_scopes(ctx, run, s0, x, dtype):
    """(host call, device-resident call, fetch) of a jitted JAX ``run(s0, xs)``: NumPy in and out, or
    device arrays in and the result left on the GPU."""
    host = [np.asarray(s0, dtype=dtype), np.asarray(np.swapaxes(x, 0, 1), dtype=dtype)]
    dev = [ctx.jax.device_put(a) for a in host]
    return lambda: np.asarray(run(*host)), lambda: run(*dev).block_until_ready(), np.asarray


def _jax_irnn(ctx, f, x, h0, dtype):
    from .peers import jax_irnn_scan

    run = jax_irnn_scan(f.U, f.W, f.b, float(f.eta[0, 0]), float(f.alpha), int(f.K), dtype)
    return _jax_scopes(ctx, run, h0, x, dtype)


def _torch_scopes(ctx, forward, x, h0, dtype):
    """(host call, device-resident call, fetch) of a torch ``forward(x, h0)`` on ``ctx.torch_device``:
    NumPy in and out, or tensors already there and the result left there (synchronised)."""
    torch = ctx.torch
    dev = ctx.torch_device
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    xd, hd = torch.as_tensor(x, dtype=tdt, device=dev), torch.as_tensor(h0, dtype=tdt, device=dev)

    def device():
        out = forward(xd, hd)
        ctx.torch_sync()
        return out

    def host():
        return forward(torch.as_tensor(x, dtype=tdt).to(dev), torch.as_tensor(h0, dtype=tdt).to(dev)).cpu().numpy()
    return host, device, lambda t: t.cpu().numpy()


def _torch_irnn(ctx, f, x, h0, dtype):
    from .peers import torch_irnn_eager

    forward = torch_irnn_eager(f.U, f.W, f.b, float(f.eta[0, 0]), float(f.alpha), int(f.K), dtype, ctx.torch_device)
    return _torch_scopes(ctx, forward, x, h0, dtype)


def _forward_row(ctx, name, m, x, h0, dtype, size, jax_peer=None, torch_peer=None, take=None, bound=F32_STATES,
                 cpu=True):
    """A forward row: dynlab public/device-resident, the peers, numba; ``take`` the part compared (h)."""
    import dynlab as dl
    from dynlab.backends import get_backend
    from dynlab.backends.gpu.device import to_device, to_host

    dt = np.dtype(dtype)
    take = take or (lambda H: H)
    f = m.form()
    ref = take(get_backend(ctx.reference).simulate(f, x, h0)[0])
    row = Row(name, size=size, precision=dt.name, threshold=1e-10 if dt == np.float64 else bound)
    if dt == np.float32:
        row.notes.append(f"float32 bound {bound:g}: per-step rounding of contracting updates, against float64")
    measure(ctx, row, "dynlab-host", lambda: dl.simulate(m, x, h0, backend=ctx.gpu, dtype=dt)["h"].values, ref,
            fetch=lambda H: take(np.asarray(H)))
    xd, hd = to_device(x), to_device(h0)

    def device():
        with ctx.gpu.results_on_device():
            H = ctx.gpu.simulate(f, xd, hd, dtype=dt)[0]
        ctx.sync()
        return H
    measure(ctx, row, "dynlab-device", device, ref, fetch=lambda H: take(to_host(H)))
    for label, peer, why in (("jax", jax_peer, ctx.jax_why), ("torch", torch_peer, ctx.torch_why)):
        if peer is None:
            row.notes.append(why or f"no {label} peer for this workload")
            continue
        host, dev, fetch = peer
        measure(ctx, row, f"{label}-host", host, ref, peer=True)
        measure(ctx, row, f"{label}-device", dev, ref, fetch, peer=True)
    if cpu and dt == np.float64:
        cpu_columns(ctx, row, lambda: dl.simulate(m, x, h0, backend="numba")["h"].values, ref,
                    fetch=lambda H: take(np.asarray(H)))
    return row


def _forward(ctx, name, B, dtype, goal=None):
    S = ctx.sizes
    m, x, h0 = irnn_inputs(B, S.fwd_hidden, 8, 5, S.fwd_steps)
    f = m.form()
    jp = _jax_irnn(ctx, f, x, h0, dtype) if ctx.jax is not None else None
    tp = _torch_irnn(ctx, f, x, h0, dtype) if ctx.torch is not None else None
    row = _forward_row(ctx, name, m, x, h0, dtype, f"iRNN B={B}, D={S.fwd_hidden}, d=8, K=5, T={S.fwd_steps}",
                       jp, tp, cpu=B <= 1024)
    if goal:
        _goals(row, [("dynlab-device", goal, f"≤ {goal * 1e3:g} ms device-resident")], smaller=True)
    return row


def row_forward_large(ctx):
    return _forward(ctx, "forward-large", ctx.sizes.fwd_batch, np.float64, goal=0.020)


def row_forward_large_f32(ctx):
    return _forward(ctx, "forward-large-f32", ctx.sizes.fwd_batch, np.float32)


def row_forward_b4096_f32(ctx):
    return _forward(ctx, "forward-B4096-f32", ctx.sizes.fwd_big_batch, np.float32, goal=0.040)


def _torch_gated(ctx, m, x, h0, dtype):
    """PyTorch's ``nn.GRU``/``nn.LSTM`` with the model's weights on ``ctx.torch_device`` (cuDNN on a
    GPU): the hidden outputs h_1..h_T."""
    torch = ctx.torch
    dev = ctx.torch_device
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    D = m.hidden
    net = (torch.nn.LSTM if m.name == "lstm" else torch.nn.GRU)(m.inputs, D, num_layers=1, batch_first=True,
                                                                 dtype=tdt).to(dev)
    with torch.no_grad():
        for name, value in (("weight_ih_l0", m.W_ih), ("weight_hh_l0", m.W_hh), ("bias_ih_l0", m.b_ih),
                            ("bias_hh_l0", m.b_hh)):
            getattr(net, name).copy_(torch.as_tensor(np.array(value), dtype=tdt))

    def forward(xt, h):
        state = (h[None, :, :D].contiguous(), h[None, :, D:].contiguous()) if m.name == "lstm" else h[None].contiguous()
        with torch.no_grad():
            return net(xt, state)[0]
    return _torch_scopes(ctx, forward, x, h0, dtype)


def _jax_gated(ctx, m, x, h0, dtype):
    from .peers import jax_gated_scan

    return _jax_scopes(ctx, jax_gated_scan(m, dtype), h0, x, dtype)


def _gated(ctx, kind, dtype):
    S = ctx.sizes
    m, x, h0 = gated_inputs(kind, S.gated_batch, S.gated_hidden, 8, S.gated_steps)
    D = m.hidden
    take = (lambda H: np.asarray(H)[..., :D]) if kind == "lstm" else None     # compared on h
    jp = _jax_gated(ctx, m, x, h0, dtype) if ctx.jax is not None else None
    tp = _torch_gated(ctx, m, x, h0, dtype) if ctx.torch is not None else None
    row = _forward_row(ctx, f"{kind}-forward{'-f32' if dtype == np.float32 else ''}", m, x, h0, dtype,
                       f"{kind.upper()} B={S.gated_batch}, D={D}, d=8, T={S.gated_steps}", jp, tp, take=take)
    if row.times.get("torch-device") and row.times.get("dynlab-device"):
        row.notes.append(f"torch / dynlab device-resident: {row.times['torch-device'] / row.times['dynlab-device']:.2f}× "
                         f"(goal ≥ 1)")
    return row


def row_gru(ctx):
    return _gated(ctx, "gru", np.float64)


def row_gru_f32(ctx):
    return _gated(ctx, "gru", np.float32)


def row_lstm(ctx):
    return _gated(ctx, "lstm", np.float64)


def row_lstm_f32(ctx):
    return _gated(ctx, "lstm", np.float32)


# ============================================================================ gradient flow
def _flow(ctx, name, key):
    import copy

    import dynlab as dl
    from dynlab.backends import get_backend

    S = ctx.sizes
    m, x, _ = irnn_inputs(1, S.flow_hidden, 1, 5, S.flow_steps)
    fn = dl.gradient_norms if name == "gradient_norms" else dl.lyapunov
    ref = fn(m, x[0], backend=ctx.reference)[key].values
    row = Row(name, size=f"iRNN D={S.flow_hidden}, K=5, T={S.flow_steps}, B=1" + (", k=D" if key == "lyapunov" else ""))
    measure(ctx, row, "dynlab-host", lambda: fn(m, x[0], backend=ctx.gpu)[key].values, ref)
    f = m.form()
    H = get_backend(ctx.reference).simulate(f, x, np.zeros((1, f.state_size)))[0]
    if name == "gradient_norms":
        measure(ctx, row, "dynlab-device", lambda: ctx.gpu.gradient_flow(f, x, np.zeros((1, f.state_size)), H)[0],
                ref, fetch=lambda out: out["log_jac_norm"][0])
        row.notes.append("device-resident column: the backend's gradient_flow on a given trajectory (no "
                         "simulation, no Dataset)")
    other = copy.copy(ctx.gpu)     # the other path at B = 1, to settle the threshold between the two
    attr = "PRODUCTS_KERNEL_MIN_BATCH" if name == "gradient_norms" else "QR_FUSED_MIN_BATCH"
    fused = (getattr(ctx.gpu, attr) or ctx.gpu.limits.multiprocessors) > 1       # B = 1 takes the other path now
    setattr(other, attr, 1 if fused else 1 << 30)
    label = {("gradient_norms", True): "the fused products kernel", ("gradient_norms", False): "the blocked scan",
             ("lyapunov", True): "the fused qr_steps", ("lyapunov", False): "the stepwise QR"}[name, fused]
    alt = Row(name)
    t = measure(ctx, alt, "alt", lambda: fn(m, x[0], backend=other)[key].values, ref, repeat=1)
    row.notes.append(f"with {label} instead: {t:.4g} s (agrees {alt.agrees['alt']:.1e})")
    row.agrees["dynlab-host (other path)"] = alt.agrees["alt"]
    cpu_columns(ctx, row, lambda: fn(m, x[0], backend="numba")[key].values, ref)
    if row.times.get("numba"):
        row.notes.append(f"numba (all cores) / dynlab public: {row.times['numba'] / row.times['dynlab-host']:.2f}× "
                         f"(goal ≥ 5×)")
    return row


def row_gradient_norms(ctx):
    return _flow(ctx, "gradient_norms", "log_jac_norm")


def row_lyapunov(ctx):
    return _flow(ctx, "lyapunov", "lyapunov")


def _goals(row: Row, goals, smaller: bool = False):
    for key, goal, text in goals:
        v = row.times.get(key)
        if v is not None:
            met = v <= goal if smaller else v >= goal
            row.notes.append(f"goal {text}: {'met' if met else 'NOT met'}")


#: The rows in the order run: (name, function(ctx) → Row).
ROWS = (("sweep", row_sweep), ("sweep-f32", row_sweep_f32), ("sweep-largest", row_sweep_largest),
        ("forward-large", row_forward_large), ("forward-large-f32", row_forward_large_f32),
        ("forward-B4096-f32", row_forward_b4096_f32), ("gru-forward", row_gru), ("gru-forward-f32", row_gru_f32),
        ("lstm-forward", row_lstm), ("lstm-forward-f32", row_lstm_f32), ("gradient_norms", row_gradient_norms),
        ("lyapunov", row_lyapunov))

__all__ = ["Context", "ROWS", "measure", "cpu_columns", "jax_sweep", "F32_STATES", "F32_LOGNORM"]

"""Optional peer implementations (JAX, PyTorch) of the benchmark workloads.

Never required: ``jax_or_none()`` / ``torch_or_none()`` return None when the package is not
importable, and the workloads then leave the peer out.  Each peer is written the way a user of
that framework would write it (JAX: ``jit`` + ``lax.scan``; PyTorch: an eager loop of batched
ops under ``no_grad``, with the thread count of the machine), for the same update as
``dynlab.backends.reference.simulate.irnn`` with g_0 = 0 and sign +1.
"""
from __future__ import annotations

import numpy as np


def jax_or_none():
    try:
        import jax
    except Exception:  # ImportError, or a broken install
        return None
    jax.config.update("jax_enable_x64", True)
    return jax


def torch_or_none():
    try:
        import torch
    except Exception:
        return None
    return torch


def jax_irnn_scan(U, W, b, eta, alpha, K, dtype=np.float64):
    """The jitted JAX iRNN forward (tanh, g_0 = 0, sign +1) as ``run(h0 (B, D), xs (T, B, d)) → H (B, T, D)``,
    the weights baked in (on JAX's default device)."""
    jax = jax_or_none()
    import jax.numpy as jnp
    from jax import lax

    UT = jnp.asarray(U.T, dtype=dtype)
    WT = jnp.asarray(W.T, dtype=dtype)
    bj = jnp.asarray(b, dtype=dtype)

    @jax.jit
    def run(h0, xs):
        def step(h, xt):
            c = xt @ WT + bj
            g = jnp.zeros_like(h)
            for _ in range(K):
                s = g + h
                g = g + eta * (jnp.tanh(s @ UT + c) - alpha * s)
            return g, g

        _, H = lax.scan(step, h0, xs)
        return jnp.swapaxes(H, 0, 1)

    return run


def jax_irnn_forward(U, W, b, x, h0, eta, alpha, K, dtype=np.float64):
    """A jitted JAX iRNN forward (tanh, g_0 = 0, sign +1); returns a no-argument callable → (B, T, D)."""
    import jax.numpy as jnp

    run = jax_irnn_scan(U, W, b, eta, alpha, K, dtype)
    xs = jnp.asarray(np.swapaxes(x, 0, 1), dtype=dtype)  # (T, B, d): scan runs over the leading axis
    h0j = jnp.asarray(h0, dtype=dtype)

    def call():
        return np.asarray(run(h0j, xs).block_until_ready())

    return call


def torch_irnn_eager(U, W, b, eta, alpha, K, dtype=np.float64, device="cpu"):
    """The eager PyTorch iRNN forward under ``no_grad`` as ``forward(x (B, T, d), h0 (B, D)) → H`` on
    tensors of ``device``."""
    torch = torch_or_none()
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    UT, WT, bt = (torch.as_tensor(np.ascontiguousarray(a), dtype=tdt, device=device) for a in (U.T, W.T, b))

    def forward(xt, h):
        with torch.no_grad():
            B, T, _ = xt.shape
            H = torch.empty((B, T, UT.shape[0]), dtype=tdt, device=device)
            for t in range(T):
                c = torch.addmm(bt, xt[:, t], WT)
                g = torch.zeros_like(h)
                for _ in range(K):
                    s = g + h
                    g = g + eta * (torch.tanh(torch.addmm(c, s, UT)) - alpha * s)
                H[:, t] = g
                h = g
        return H

    return forward


def torch_irnn_forward(U, W, b, x, h0, eta, alpha, K, dtype=np.float64):
    """An eager PyTorch iRNN forward under ``no_grad``; returns a no-argument callable → (B, T, D)."""
    torch = torch_or_none()
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    forward = torch_irnn_eager(U, W, b, eta, alpha, K, dtype)
    xt = torch.as_tensor(x, dtype=tdt)
    h0t = torch.as_tensor(h0, dtype=tdt)
    return lambda: forward(xt, h0t).numpy()


def torch_gated_forward(model, x, h0, dtype=np.float64):
    """PyTorch's own ``nn.GRU``/``nn.LSTM`` (one layer, ``batch_first``) with the weights of the
    dynlab ``gru``/``lstm`` ``model``, eager under ``no_grad``; returns a no-argument callable →
    the hidden outputs h_1..h_T (B, T, D) (an LSTM returns no per-step cell state)."""
    torch = torch_or_none()
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    D, d = model.hidden, model.inputs
    cls = torch.nn.LSTM if model.name == "lstm" else torch.nn.GRU
    net = cls(d, D, num_layers=1, batch_first=True, dtype=tdt)
    with torch.no_grad():
        for name, value in (("weight_ih_l0", model.W_ih), ("weight_hh_l0", model.W_hh),
                            ("bias_ih_l0", model.b_ih), ("bias_hh_l0", model.b_hh)):
            getattr(net, name).copy_(torch.as_tensor(np.array(value), dtype=tdt))  # a writable copy
    xt = torch.as_tensor(x, dtype=tdt)
    if model.name == "lstm":
        state = (torch.as_tensor(h0[None, :, :D], dtype=tdt).contiguous(),
                 torch.as_tensor(h0[None, :, D:], dtype=tdt).contiguous())
    else:
        state = torch.as_tensor(h0[None], dtype=tdt).contiguous()

    def call():
        with torch.no_grad():
            out, _ = net(xt, state)
        return out.numpy()

    return call


def jax_gated_scan(model, dtype=np.float64):
    """The jitted JAX GRU/LSTM with PyTorch's equations (``lax.scan`` over time; the input projection
    of every step done before the scan in one product, as PyTorch does) as
    ``run(s0 (B, n), xs (T, B, d)) → the hidden outputs h_1..h_T (B, T, D)``, the weights baked in."""
    jax = jax_or_none()
    import jax.numpy as jnp
    from jax import lax

    D = model.hidden
    W_ihT = jnp.asarray(model.W_ih.T, dtype=dtype)
    W_hhT = jnp.asarray(model.W_hh.T, dtype=dtype)
    b_ih = jnp.asarray(model.b_ih, dtype=dtype)
    b_hh = jnp.asarray(model.b_hh, dtype=dtype)
    lstm = model.name == "lstm"

    @jax.jit
    def run(s0, xs):
        gis = xs @ W_ihT + b_ih                              # (T, B, G·D)

        def gru_step(h, gi):
            gh = h @ W_hhT + b_hh
            r = jax.nn.sigmoid(gi[:, :D] + gh[:, :D])
            z = jax.nn.sigmoid(gi[:, D:2 * D] + gh[:, D:2 * D])
            n = jnp.tanh(gi[:, 2 * D:] + r * gh[:, 2 * D:])
            h = (1.0 - z) * n + z * h
            return h, h

        def lstm_step(hc, gi):
            h, c = hc
            a = gi + h @ W_hhT + b_hh
            i = jax.nn.sigmoid(a[:, :D])
            f = jax.nn.sigmoid(a[:, D:2 * D])
            g = jnp.tanh(a[:, 2 * D:3 * D])
            o = jax.nn.sigmoid(a[:, 3 * D:])
            c = f * c + i * g
            h = o * jnp.tanh(c)
            return (h, c), h

        if lstm:
            _, H = lax.scan(lstm_step, (s0[:, :D], s0[:, D:]), gis)
        else:
            _, H = lax.scan(gru_step, s0, gis)
        return jnp.swapaxes(H, 0, 1)

    return run


def jax_gated_forward(model, x, h0, dtype=np.float64):
    """A jitted JAX GRU/LSTM with PyTorch's equations (``jax_gated_scan``); returns a no-argument
    callable → the hidden outputs h_1..h_T (B, T, D)."""
    import jax.numpy as jnp

    run = jax_gated_scan(model, dtype)
    xs = jnp.asarray(np.swapaxes(x, 0, 1), dtype=dtype)   # (T, B, d)
    s0 = jnp.asarray(h0, dtype=dtype)

    def call():
        return np.asarray(run(s0, xs).block_until_ready())

    return call

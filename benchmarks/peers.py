"""Optional peer implementations (JAX, PyTorch) of the benchmark workloads.

Never required: ``jax_or_none()`` / ``torch_or_none()`` return None when the package is not
importable, and the workloads then leave the peer out.  Each peer is written the way a user of
that framework would write it (JAX: ``jit`` + ``lax.scan``; PyTorch: an eager loop of batched
ops under ``no_grad``, with the thread count of the machine), for the same update as
``dynlab.kernels.numpy_ref.irnn`` with g_0 = 0 and sign +1.
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


def jax_irnn_forward(U, W, b, x, h0, eta, alpha, K, dtype=np.float64):
    """A jitted JAX iRNN forward (tanh, g_0 = 0, sign +1); returns a no-argument callable → (B, T, D)."""
    jax = jax_or_none()
    import jax.numpy as jnp
    from jax import lax

    UT = jnp.asarray(U.T, dtype=dtype)
    WT = jnp.asarray(W.T, dtype=dtype)
    bj = jnp.asarray(b, dtype=dtype)
    xs = jnp.asarray(np.swapaxes(x, 0, 1), dtype=dtype)  # (T, B, d): scan runs over the leading axis
    h0j = jnp.asarray(h0, dtype=dtype)

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

    def call():
        return np.asarray(run(h0j, xs).block_until_ready())

    return call


def torch_irnn_forward(U, W, b, x, h0, eta, alpha, K, dtype=np.float64):
    """An eager PyTorch iRNN forward under ``no_grad``; returns a no-argument callable → (B, T, D)."""
    torch = torch_or_none()
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    UT = torch.as_tensor(np.ascontiguousarray(U.T), dtype=tdt)
    WT = torch.as_tensor(np.ascontiguousarray(W.T), dtype=tdt)
    bt = torch.as_tensor(b, dtype=tdt)
    xt = torch.as_tensor(x, dtype=tdt)
    h0t = torch.as_tensor(h0, dtype=tdt)
    B, T, _ = x.shape

    def call():
        with torch.no_grad():
            H = torch.empty((B, T, UT.shape[0]), dtype=tdt)
            h = h0t
            for t in range(T):
                c = torch.addmm(bt, xt[:, t], WT)
                g = torch.zeros_like(h)
                for _ in range(K):
                    s = g + h
                    g = g + eta * (torch.tanh(torch.addmm(c, s, UT)) - alpha * s)
                H[:, t] = g
                h = g
        return H.numpy()

    return call

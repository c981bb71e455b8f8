"""The update rules of dynlab's cells as PyTorch operations: one time step each, on tensors.

These are the torch twins of ``dynlab.backends.reference.simulate`` (the NumPy reference every
dynlab backend is tested against): the same arithmetic in the same order, so that a module's
states equal ``dl.simulate`` to rounding (≈ 1e-16 relative per step in float64), and autograd
through them gives dynlab's exact BPTT gradients.

The activations take the *right* derivative at their kinks (φ'(0) = 1 for relu and leaky-relu,
+1 for abs), dynlab's convention (``dynlab.activations``): PyTorch's own ``relu`` has derivative 0
at 0, which differs wherever a pre-activation is exactly zero (an identity-initialised ReLU RNN
with b = 0 reading a zero pixel from h_0 = 0).  ``torch.where`` sends the gradient to the branch it
took, so ``where(z >= 0, z, 0)`` has derivative 1 at z = 0.

Every function here is plain tensor code with Python scalars for the settings (no dynlab objects),
so ``torch.compile`` can trace a step.
"""
from __future__ import annotations

import torch


def phi(act: str, z, leak: float = 0.01):
    """φ(z) elementwise for dynlab's activation ``act`` (module docstring for the kinks)."""
    if act == "tanh":
        return torch.tanh(z)
    if act == "relu":
        return torch.where(z >= 0, z, 0.0)
    if act == "sigmoid":
        return torch.sigmoid(z)
    if act == "identity":
        return z
    if act == "leaky-relu":
        return torch.where(z >= 0, z, leak * z)
    if act == "abs":
        return torch.where(z >= 0, z, -z)
    raise ValueError(f"activation: unknown activation {act!r}")


def cell_step(h, c_t, RT, a, gain, act: str, leak: float):
    """h' = a h + γ φ(R h + c_t) (RNN: a = 0, γ = 1; FastRNN σ(β), σ(α); AntisymmetricRNN 1, ε; RIN
    0, 1 with R = U + I); ``RT`` is Rᵀ, c_t = W x_t + b (B, D).  ``a`` and ``gain`` are Python
    floats (a constant of the cell) or 0-d tensors (learned)."""
    f = phi(act, torch.addmm(c_t, h, RT), leak)
    if isinstance(a, float) and a == 0.0 and isinstance(gain, float) and gain == 1.0:
        return f
    return a * h + gain * f


def irnn_step(h, c_t, UT, eta_k, alpha, K: int, g0prev: bool, sign: float, act: str, leak: float):
    """One step of the iRNN (eq. 5): K Euler steps from g_0 ∈ {0, h},
    s_k = g_{k−1} + σ h,  g_k = g_{k−1} + η_k (φ(U s_k + c_t) − α s_k),  h' = g_K.
    ``eta_k``: the K step sizes of this time step (0-d tensors)."""
    g = h if g0prev else torch.zeros_like(h)
    sh = h if sign == 1.0 else -h
    for k in range(K):
        s = g + sh
        g = g + eta_k[k] * (phi(act, torch.addmm(c_t, s, UT), leak) - alpha * s)
    return g


def ctrnn_step(g, c_t, UT, tau, alpha, dt: float, substeps: int, method: str, act: str, leak: float):
    """One sampling interval of τ ġ = −α g + φ(U g + c_t) (c_t held): ``substeps`` fixed steps of
    Euler or classical RK4, as ``dynlab.backends.reference.simulate.ctrnn``."""
    step = dt / substeps

    def f(y):
        return (-alpha * y + phi(act, torch.addmm(c_t, y, UT), leak)) / tau

    for _ in range(substeps):
        if method == "euler":
            g = g + step * f(g)
        else:
            k1 = f(g)
            k2 = f(g + 0.5 * step * k1)
            k3 = f(g + 0.5 * step * k2)
            k4 = f(g + step * k3)
            g = g + (step / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return g


def gru_step(h, gi_t, W_hhT, b_hh, act: str, leak: float):
    """PyTorch's GRU step (gates r, z, n) from gi_t = W_ih x_t + b_ih, with φ = ``act``."""
    D = h.shape[-1]
    gh = torch.addmm(b_hh, h, W_hhT)
    r = torch.sigmoid(gi_t[:, :D] + gh[:, :D])
    z = torch.sigmoid(gi_t[:, D:2 * D] + gh[:, D:2 * D])
    n = phi(act, gi_t[:, 2 * D:] + r * gh[:, 2 * D:], leak)
    return (1 - z) * n + z * h


def lstm_step(h, c, gi_t, W_hhT, b_hh, act: str, leak: float):
    """PyTorch's LSTM step (gates i, f, g, o) from gi_t = W_ih x_t + b_ih, with φ = ``act``:
    returns (h', c')."""
    D = h.shape[-1]
    a = gi_t + torch.addmm(b_hh, h, W_hhT)
    i, f = torch.sigmoid(a[:, :D]), torch.sigmoid(a[:, D:2 * D])
    g, o = phi(act, a[:, 2 * D:3 * D], leak), torch.sigmoid(a[:, 3 * D:])
    c = f * c + i * g
    return o * phi(act, c, leak), c

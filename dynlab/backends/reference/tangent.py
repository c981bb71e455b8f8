"""The reference forward tangents of a sweep's settings and the reference MASO reverse pass.

Forward tangents (``forward_tangent``): for S settings of one kind and shape, the state and its
tangent M_m = ∂h_m/∂h_1 = J_m M_{m−1} (m = 2..T) go through the same update, M kept
Frobenius-normalised (M_m = e^{ℓ_m} M̃_m, so ln‖∂h_T/∂h_1‖₂ = ℓ_T + ln σ₁(M̃_T) at any horizon).
iRNN, with s = g + σ h_{m−1}:

    g ← g + η_k (φ(U s + c_m) − α s),     G ← G + η_k (φ'(z) ⊙ (U S) − α S),   S = G + σ A,

from g_0 = 0 or h_{m−1} and G_0 = 0 or A (A the incoming tangent); one-line cells:
h ← a h + γ φ(R h + c),  A ← a A + γ φ'(z) ⊙ (R A).  At the last step the tangent carries the
block [M_{T−1} | I], so the same pass also gives J_T = ∂h_T/∂h_{T−1}.  A non-finite state
stops a setting and records the 1-based step (``diverged``, 0: none).

MASO reverse pass (``reverse_cotangents``): λ_{t−1} = a λ_t + (γ λ_t ⊙ s_t) R from t = T down,
with the input cotangents (γ λ_t ⊙ s_t) W and the offsets Σ_t (γ λ_t ⊙ s_t)·b.
"""
from __future__ import annotations

import numpy as np

from ...activations import dphi, phi
from . import cells


def forward_tangent(gated, R, W, b, X, group, eta, alpha, sign, g0prev, act_name, leak):
    """The forward tangents of all S settings at once (module docstring): batched matmuls over
    the settings and element-wise passes, one activation (``act_name``, ``leak``) for the batch,
    the K mask in ``eta`` (zeros past each setting's K leave g and G unchanged).  R, W, b, X are
    per group of settings and ``group`` (S,) says whose each setting is (``base.TangentBatch``):
    the drives c_t = W x_t + b are computed once per group.  Returns (logs, M̃_T, J_T, diverged)."""
    S = group.shape[0]
    T = X.shape[1]
    D = R.shape[1]
    dt = R.dtype
    Cg = np.matmul(X, np.swapaxes(W, 1, 2)) + b[:, None, :]   # (G, T, D): one drive per group
    R = R[group]
    h = np.zeros((S, D), dtype=dt)
    eye = np.broadcast_to(np.eye(D, dtype=dt), (S, D, D))
    M = eye.copy()
    logs = np.zeros(S, dtype=dt)
    diverged = np.zeros(S, dtype=np.int64)
    J = np.zeros((S, D, D), dtype=dt)
    sg = sign[:, None]
    sgm = sign[:, None, None]
    al = alpha[:, None]
    alm = alpha[:, None, None]
    prev = g0prev[:, None]
    prevm = g0prev[:, None, None]
    for t in range(T):
        tangent = t > 0
        A = np.concatenate([M, eye], axis=2) if (t == T - 1 and tangent) else M
        c = Cg[group, t]
        if gated:
            z = np.matmul(R, h[:, :, None])[:, :, 0] + c
            g = cells.cell_update(al, eta[:, :1], h, z, act_name, leak)
            if tangent:
                G = cells.cell_out(alm, 1.0, A, cells.cell_slope(eta[:, :1], z, act_name, leak)[:, :, None] * np.matmul(R, A))
        else:
            g = np.where(prev, h, 0.0)
            G = np.where(prevm, A, 0.0) if tangent else None
            for k in range(eta.shape[1]):
                e = eta[:, k:k + 1]
                s = g + sg * h
                z = np.matmul(R, s[:, :, None])[:, :, 0] + c
                if tangent:
                    St = G + sgm * A
                    G = cells.irnn_out(G, St, dphi(act_name, z, leak)[:, :, None] * np.matmul(R, St), e[:, :, None], alm)
                g = cells.irnn_out(g, s, phi(act_name, z, leak), e, al)
        bad = ~np.isfinite(g).all(axis=1)
        diverged = np.where((diverged == 0) & bad, t + 1, diverged)
        h = g
        if tangent:
            Mn = G[:, :, :D]
            f = np.sqrt((Mn * Mn).sum(axis=(1, 2)))
            ok = (f > 0) & np.isfinite(f)
            with np.errstate(divide="ignore", invalid="ignore"):
                logs = logs + np.where(ok, np.log(np.where(ok, f, 1.0)), np.where(f == 0, -np.inf, np.nan))
            M = Mn / np.where(ok, f, 1.0)[:, None, None]
            if t == T - 1:
                J = G[:, :, D:]
    logs = np.where(diverged > 0, np.nan, logs)
    return logs, M, J, diverged


def reverse_cotangents(form, S, lam, incoming):
    """One one-line layer backwards (module docstring): S (B, T, D) slopes; lam (B·C, D) λ_T in,
    λ_0 out; incoming (B, C, T, D) or None.  Returns (input cotangents (B, C, T, d), offsets (B·C,))."""
    B, T, D = S.shape
    C = lam.shape[0] // B
    out = np.empty((B, C, T, form.inputs))
    offset = np.zeros(B * C)
    L = lam.reshape(B, C, D)
    for t in range(T - 1, -1, -1):
        if incoming is not None:
            L += incoming[:, :, t]
        cs = form.gain * L * S[:, None, t]                      # (B, C, D)
        out[:, :, t] = cs @ form.W
        offset += (cs @ form.b).reshape(B * C)
        L[...] = form.a * L + cs @ form.R
    return out, offset

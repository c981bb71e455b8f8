"""The reference simulation: plain transcriptions of each form's update, batched over B.

Every function returns ``(H, bad)``: H (B, T, n) the states s_1..s_T and ``bad`` (B,) the
0-based step at which each sequence first had a non-finite entry (T when it never did); with
``stop`` a sequence is not advanced past that step (its later rows stay NaN).
"""
from __future__ import annotations

import numpy as np

from ...activations import phi
from . import cells


def _finite_rows(h):
    return np.isfinite(h).all(axis=1)


def _record(H, bad, t, h, stop, alive):
    ok = _finite_rows(h)
    newly = alive & ~ok
    bad[newly] = t
    if stop:
        alive &= ok
        if alive.any():
            H[alive, t] = h[alive]
    else:
        H[:, t] = h
        alive &= ok
    return alive


# ------------------------------------------------------------------ one step of each rule
# The update rules, once for the reference: the simulation below, the taped forward pass of
# ``bptt`` and the closed-form Jacobians of ``jacobians`` all step through these, the latter two
# keeping what they return besides the state (the pre-activations, the inner states, the gates)
# instead of forming it again.  The per-element arithmetic is ``cells``'s.

def cell_step(R, a, gain, h, c_t, act, leak):
    """h' = a h + γ φ(z), z = R h + c_t (c_t = W x_t + b): (h', z, φ(z))."""
    z = h @ R.T + c_t
    p = phi(act, z, leak)
    return cells.cell_out(a, gain, h, p), z, p


def irnn_step(U, h, c_t, eta, alpha, K, g0prev, sign, act, leak, S=None, Z=None, P=None):
    """One iRNN step (eq. 5), K Euler steps from g_0 ∈ {0, h}: s_k = g_{k−1} + σ h,
    g_k = g_{k−1} + η_k (φ(U s_k + c_t) − α s_k), h' = g_K.  ``eta``: the K step sizes (K,), or
    one row of them per point (B, K).  S, Z, P (K, B, D), when given, receive every s_k, the
    pre-activation U s_k + c_t and φ of it."""
    eta = np.asarray(eta, dtype=np.float64)
    per_row = eta.ndim == 2
    g = h.copy() if g0prev else np.zeros_like(h)
    for k in range(K):
        s = g + sign * h
        z = s @ U.T + c_t
        p = phi(act, z, leak)
        if S is not None:
            S[k] = s
        if Z is not None:
            Z[k] = z
        if P is not None:
            P[k] = p
        g = cells.irnn_out(g, s, p, eta[:, k:k + 1] if per_row else float(eta[k]), alpha)
    return g


def gru_step(W_hh, b_hh, gi_t, h, act, leak):
    """PyTorch's GRU step from gi_t = W_ih x_t + b_ih: (h', ``cells.GRUGates``) with the gates'
    r, z, the candidate's q = W_hn h + b_hn, a_n and n."""
    D = h.shape[1]
    gh = h @ W_hh.T + b_hh
    return cells.gru_unit(gi_t[:, :D] + gh[:, :D], gi_t[:, D:2 * D] + gh[:, D:2 * D], gi_t[:, 2 * D:], gh[:, 2 * D:],
                          h, act, leak)


def lstm_step(a_t, c, act, leak):
    """PyTorch's LSTM step from the gates' pre-activations a_t = W_ih x + b_ih + W_hh h + b_hh
    (order i, f, g, o): (h', c', ``cells.LSTMGates``)."""
    D = c.shape[1]
    return cells.lstm_unit(a_t[:, :D], a_t[:, D:2 * D], a_t[:, 2 * D:3 * D], a_t[:, 3 * D:], c, act, leak)


def gated(R, c, h0, a, gain, act, leak, stop=True):
    """h_t = a h_{t-1} + gain φ(R h_{t-1} + c_t), c_t = W x_t + b precomputed, c (B, T, D)."""
    B, T, D = c.shape
    H = np.full((B, T, D), np.nan, dtype=c.dtype)  # the requested precision (float32 or float64)
    bad = np.full(B, T, dtype=np.int64)
    alive = np.ones(B, dtype=bool)
    h = h0.copy()
    with np.errstate(all="ignore"):
        for t in range(T):
            h, _, _ = cell_step(R, a, gain, h, c[:, t], act, leak)
            alive = _record(H, bad, t, h, stop, alive)
            if stop and not alive.any():
                break
    return H, bad


def irnn(U, c, h0, eta, alpha, K, g0prev, sign, act, leak, stop=True):
    """iRNN eq. 5: K Euler steps from g_0 ∈ {0, h_{m-1}}; eta is a (rows, K) table."""
    B, T, D = c.shape
    H = np.full((B, T, D), np.nan, dtype=c.dtype)  # the requested precision (float32 or float64)
    bad = np.full(B, T, dtype=np.int64)
    alive = np.ones(B, dtype=bool)
    h = h0.copy()
    with np.errstate(all="ignore"):
        for t in range(T):
            h = irnn_step(U, h, c[:, t], eta[t] if eta.shape[0] > 1 else eta[0], alpha, K, g0prev, sign, act, leak)
            alive = _record(H, bad, t, h, stop, alive)
            if stop and not alive.any():
                break
    return H, bad


def ctrnn(U, c, h0, tau, alpha, dt, substeps, method, act, leak, stop=True):
    """Fixed-step Euler or RK4 on τ ġ = −α g + φ(U g + c_m), c_m held over each interval."""
    B, T, D = c.shape
    H = np.full((B, T, D), np.nan, dtype=c.dtype)  # the requested precision (float32 or float64)
    bad = np.full(B, T, dtype=np.int64)
    alive = np.ones(B, dtype=bool)
    g = h0.copy()
    step = dt / substeps

    def f(y, ct):
        return cells.ctrnn_rate(y, y @ U.T + ct, tau, alpha, act, leak)

    with np.errstate(all="ignore"):
        for t in range(T):
            ct = c[:, t]
            for _ in range(substeps):
                if method == "euler":
                    g = g + step * f(g, ct)
                else:
                    k1 = f(g, ct)
                    k2 = f(g + 0.5 * step * k1, ct)
                    k3 = f(g + 0.5 * step * k2, ct)
                    k4 = f(g + step * k3, ct)
                    g = g + (step / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            alive = _record(H, bad, t, g, stop, alive)
            if stop and not alive.any():
                break
    return H, bad


def ctrnn_scipy(U, c, h0, tau, alpha, dt, method, rtol, atol, act, leak, stop=True):
    """Reference CTRNN integration with scipy's ``solve_ivp``, interval by interval."""
    from scipy.integrate import solve_ivp

    B, T, D = c.shape
    H = np.full((B, T, D), np.nan)
    bad = np.full(B, T, dtype=np.int64)
    alive = np.ones(B, dtype=bool)
    g = h0.copy()

    def rhs(_t, y, ct):
        Y = y.reshape(B, D)
        return cells.ctrnn_rate(Y, Y @ U.T + ct, tau, alpha, act, leak).ravel()

    def jac(_t, y, ct):  # block-diagonal Jacobian, only for implicit methods
        from ...activations import dphi
        Y = y.reshape(B, D)
        dp = dphi(act, Y @ U.T + ct, leak)
        J = np.zeros((B * D, B * D))
        for i in range(B):
            J[i * D:(i + 1) * D, i * D:(i + 1) * D] = cells.ctrnn_out(np.eye(D), dp[i][:, None] * U, tau, alpha)
        return J

    use_jac = method in ("Radau", "BDF", "LSODA")
    with np.errstate(all="ignore"):
        for t in range(T):
            sol = solve_ivp(rhs, (0.0, dt), g.ravel(), method=method, rtol=rtol, atol=atol,
                            args=(c[:, t],), **({"jac": jac} if use_jac else {}))
            g = sol.y[:, -1].reshape(B, D) if sol.success else np.full((B, D), np.nan)
            alive = _record(H, bad, t, g, stop, alive)
            if stop and not alive.any():
                break
    return H, bad


def gru(W_ih, W_hh, b_ih, b_hh, x, h0, act, leak, stop=True):
    """PyTorch's GRU (gates r, z, n stacked in W_ih (3D, d), W_hh (3D, D), b_ih, b_hh):

        r = σ(W_ir x + b_ir + W_hr h + b_hr),  z = σ(W_iz x + b_iz + W_hz h + b_hz),
        n = φ(W_in x + b_in + r ⊙ (W_hn h + b_hn)),  h' = (1 − z) ⊙ n + z ⊙ h,

    step by step, batched over B; x (B, T, d) and every array in the precision wanted."""
    B, T, _ = x.shape
    D = W_hh.shape[1]
    H = np.full((B, T, D), np.nan, dtype=x.dtype)
    bad = np.full(B, T, dtype=np.int64)
    alive = np.ones(B, dtype=bool)
    h = h0.copy()
    with np.errstate(all="ignore"):
        for t in range(T):
            h, _ = gru_step(W_hh, b_hh, x[:, t] @ W_ih.T + b_ih, h, act, leak)
            alive = _record(H, bad, t, h, stop, alive)
            if stop and not alive.any():
                break
    return H, bad


def lstm(W_ih, W_hh, b_ih, b_hh, x, s0, act, leak, stop=True):
    """PyTorch's LSTM (gates i, f, g, o stacked in W_ih (4D, d), W_hh (4D, D), b_ih, b_hh) on
    the state s = [h; c]:

        i = σ(W_ii x + b_ii + W_hi h + b_hi),  f = σ(…),  g = φ(…),  o = σ(…),
        c' = f ⊙ c + i ⊙ g,  h' = o ⊙ φ(c'),

    step by step, batched over B; s0 (B, 2D); returns H (B, T, 2D) with rows [h_t; c_t]."""
    B, T, _ = x.shape
    D = W_hh.shape[1]
    H = np.full((B, T, 2 * D), np.nan, dtype=x.dtype)
    bad = np.full(B, T, dtype=np.int64)
    alive = np.ones(B, dtype=bool)
    h, c = s0[:, :D].copy(), s0[:, D:].copy()
    with np.errstate(all="ignore"):
        for t in range(T):
            h, c, _ = lstm_step(x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh, c, act, leak)
            alive = _record(H, bad, t, np.concatenate([h, c], axis=1), stop, alive)
            if stop and not alive.any():
                break
    return H, bad


def simulate_form(form, x, h0, *, stop: bool = True, dtype=np.float64):
    """States of a (one-layer) ``form`` over x (B, T, d) from h0 (B, n), in ``dtype``:
    (H, bad, path), by its kind's loop (``SIMULATE``)."""
    return SIMULATE[form.kind](form, x, h0, stop, np.dtype(dtype))


def _gated_form(fn):
    """GRU (``fn`` = ``gru``) / LSTM (``lstm``) over the batch."""
    def run(form, x, h0, stop, dtype):
        W_ih, W_hh, b_ih, b_hh = (a.astype(dtype) for a in (form.W_ih, form.W_hh, form.b_ih, form.b_hh))
        return (*fn(W_ih, W_hh, b_ih, b_hh, x.astype(dtype), h0.astype(dtype), form.act, form.leak, stop), "numpy")
    return run


def _drive(form, x, h0, dtype):
    """(c = x Wᵀ + b, h0) in ``dtype``: what the one-line kinds' loops take."""
    return (x @ form.W.T + form.b).astype(dtype), h0.astype(dtype)


def _irnn_form(form, x, h0, stop, dtype):
    c, h0c = _drive(form, x, h0, dtype)
    H, bad = irnn(form.U.astype(dtype), c, h0c, form.eta, form.alpha, form.K, form.g0prev, form.sign,
                  form.act, form.leak, stop)
    return H, bad, "numpy"


def _ctrnn_form(form, x, h0, stop, dtype):
    """Fixed steps by the loop; a scipy method by ``solve_ivp`` (``scipy_ctrnn``)."""
    if not form.fixed_step:
        return (*scipy_ctrnn(form, x, h0, stop, dtype), "scipy")
    c, h0c = _drive(form, x, h0, dtype)
    H, bad = ctrnn(form.U.astype(dtype), c, h0c, form.tau, form.alpha, form.dt, form.substeps, form.method,
                   form.act, form.leak, stop)
    return H, bad, "numpy"


def _cell_form(form, x, h0, stop, dtype):
    c, h0c = _drive(form, x, h0, dtype)
    H, bad = gated(form.R.astype(dtype), c, h0c, form.a, form.gain, form.act, form.leak, stop)
    return H, bad, "numpy"


def scipy_ctrnn(form, x, h0, stop, dtype):
    """A CTRNN with a scipy method (``ctrnn_scipy``), whichever backend asks: (H, bad)."""
    c = x @ form.W.T + form.b
    H, bad = ctrnn_scipy(form.U, c, h0, form.tau, form.alpha, form.dt, form.method, form.rtol, form.atol,
                         form.act, form.leak, stop)
    return H.astype(dtype, copy=False), bad


#: The loop of each one-layer kind: (form, x, h0, stop, dtype) → (H, bad, path).
SIMULATE = {"cell": _cell_form, "irnn": _irnn_form, "ctrnn": _ctrnn_form, "gru": _gated_form(gru),
            "lstm": _gated_form(lstm)}

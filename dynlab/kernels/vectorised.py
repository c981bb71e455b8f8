"""Batch-vectorised kernels written once against an array namespace ``xp`` (NumPy or CuPy).

Each inner step is one matrix product over the whole batch (BLAS / cuBLAS) and a few
in-place ufunc passes, with every buffer allocated once.  The input drive W x_t + b is
formed per step (never a (B, T, D) temporary).  Finiteness is checked every
``check_every`` steps through a single reduction (a sum is non-finite iff an entry is, or
it overflowed, which the exact check then rules out); on a GPU a larger interval avoids a
device synchronisation per step.
"""
from __future__ import annotations

import numpy as np

from ..activations import ACTIVATIONS


def phi_inplace(z, act: int, leak: float, xp, tmp=None):
    """Overwrite z with φ(z) for the activation id ``act``."""
    name = ACTIVATIONS[act]
    if name == "tanh":
        xp.tanh(z, out=z)
    elif name == "relu":
        xp.maximum(z, 0.0, out=z)
    elif name == "sigmoid":  # σ(z) = (1 + tanh(z/2)) / 2: stable for every z
        z *= 0.5
        xp.tanh(z, out=z)
        z += 1.0
        z *= 0.5
    elif name == "leaky-relu":
        tmp = xp.multiply(z, leak, out=tmp)
        xp.maximum(z, tmp, out=z)
    elif name == "abs":
        xp.abs(z, out=z)
    # identity: nothing to do


def _finite(h, xp) -> bool:
    if bool(xp.isfinite(h.sum())):
        return True
    return bool(xp.isfinite(h).all())


def _first_bad(H, upto, xp, T):
    """Per-sequence first step < upto with a non-finite entry (T if none)."""
    ok = xp.isfinite(H[:, :upto]).all(axis=2)
    bad = np.full(H.shape[0], T, dtype=np.int64)
    okh = ok.get() if hasattr(ok, "get") else np.asarray(ok)
    for i in range(okh.shape[0]):
        idx = np.flatnonzero(~okh[i])
        if idx.size:
            bad[i] = idx[0]
    return bad


def _drive(x, WT, b, t, out, xp):
    xp.matmul(x[:, t], WT, out=out)
    out += b
    return out


def _run(step, x, h0, H, stop, check_every, xp):
    """Drive ``step(t, h_prev, out)`` over t, with the finiteness protocol; returns bad."""
    B, T, _ = x.shape[0], x.shape[1], None
    h = h0
    last = 0
    for t in range(T):
        step(t, h, H[:, t])
        h = H[:, t]
        if (t + 1) % check_every == 0 or t == T - 1:
            if not _finite(H[:, last:t + 1], xp):
                if stop:
                    return _first_bad(H, t + 1, xp, T)
            last = t + 1
    return _first_bad(H, T, xp, T) if not stop else np.full(B, T, dtype=np.int64)


def gated(R, W, b, x, h0, a, gain, act, leak, stop=True, check_every=1, xp=np, H=None):
    """h_t = a h_{t-1} + gain φ(R h_{t-1} + W x_t + b), whole batch per step."""
    B, T = x.shape[0], x.shape[1]
    D = R.shape[0]
    RT = xp.ascontiguousarray(R.T)
    WT = xp.ascontiguousarray(W.T)
    H = xp.empty((B, T, D), dtype=x.dtype) if H is None else H
    z = xp.empty((B, D), dtype=x.dtype)
    ct = xp.empty((B, D), dtype=x.dtype)
    tmp = xp.empty((B, D), dtype=x.dtype)

    def step(t, h, out):
        _drive(x, WT, b, t, ct, xp)
        xp.matmul(h, RT, out=z)
        xp.add(z, ct, out=z)
        phi_inplace(z, act, leak, xp, tmp)
        if a == 0.0:
            xp.multiply(z, gain, out=out)
        else:
            xp.multiply(h, a, out=out)
            xp.multiply(z, gain, out=z)
            out += z

    bad = _run(step, x, h0, H, stop, check_every, xp)
    return H, bad


def irnn(U, W, b, x, h0, eta, alpha, K, g0prev, sign, act, leak, stop=True, check_every=1,
         xp=np, H=None):
    """iRNN eq. 5 in the equivalent s-form: with s_k = g_k ± h_{m-1},

        s_k = (1 − η_k α) s_{k−1} + η_k φ(U s_{k−1} + W x_m + b),   h_m = s_K ∓ h_{m-1},

    which needs one matrix product and four in-place passes per inner step.
    ``eta`` is a host (rows, K) table.
    """
    B, T = x.shape[0], x.shape[1]
    D = U.shape[0]
    UT = xp.ascontiguousarray(U.T)
    WT = xp.ascontiguousarray(W.T)
    H = xp.empty((B, T, D), dtype=x.dtype) if H is None else H
    s = xp.empty((B, D), dtype=x.dtype)
    z = xp.empty((B, D), dtype=x.dtype)
    ct = xp.empty((B, D), dtype=x.dtype)
    tmp = xp.empty((B, D), dtype=x.dtype)
    eta = np.asarray(eta, dtype=np.float64)
    start = (1.0 + sign) if g0prev else float(sign)

    def step(t, h, out):
        _drive(x, WT, b, t, ct, xp)
        e = eta[t] if eta.shape[0] > 1 else eta[0]
        xp.multiply(h, start, out=s)
        for k in range(K):
            xp.matmul(s, UT, out=z)
            xp.add(z, ct, out=z)
            phi_inplace(z, act, leak, xp, tmp)
            xp.multiply(s, 1.0 - e[k] * alpha, out=s)
            xp.multiply(z, e[k], out=z)
            xp.add(s, z, out=s)
        if sign == 1:
            xp.subtract(s, h, out=out)
        else:
            xp.add(s, h, out=out)

    bad = _run(step, x, h0, H, stop, check_every, xp)
    return H, bad


def ctrnn(U, W, b, x, h0, tau, alpha, dt, substeps, rk4, act, leak, stop=True, check_every=1,
          xp=np, H=None):
    """Fixed-step Euler or RK4 for τ ġ = −α g + φ(U g + W x_m + b), whole batch per step."""
    B, T = x.shape[0], x.shape[1]
    D = U.shape[0]
    UT = xp.ascontiguousarray(U.T)
    WT = xp.ascontiguousarray(W.T)
    H = xp.empty((B, T, D), dtype=x.dtype) if H is None else H
    ct = xp.empty((B, D), dtype=x.dtype)
    g = xp.empty((B, D), dtype=x.dtype)
    y = xp.empty((B, D), dtype=x.dtype)
    ks = [xp.empty((B, D), dtype=x.dtype) for _ in range(4)]
    tmp = xp.empty((B, D), dtype=x.dtype)
    hstep = dt / substeps

    def f(v, out):
        xp.matmul(v, UT, out=out)
        out += ct
        phi_inplace(out, act, leak, xp, tmp)
        xp.multiply(v, alpha, out=tmp)
        out -= tmp
        out /= tau

    def step(t, h, out):
        _drive(x, WT, b, t, ct, xp)
        g[...] = h
        for _ in range(substeps):
            k1, k2, k3, k4 = ks
            f(g, k1)
            if not rk4:
                k1 *= hstep
                xp.add(g, k1, out=g)
                continue
            xp.multiply(k1, 0.5 * hstep, out=y); xp.add(y, g, out=y); f(y, k2)
            xp.multiply(k2, 0.5 * hstep, out=y); xp.add(y, g, out=y); f(y, k3)
            xp.multiply(k3, hstep, out=y); xp.add(y, g, out=y); f(y, k4)
            k2 += k3
            k2 *= 2.0
            k1 += k2
            k1 += k4
            k1 *= hstep / 6.0
            xp.add(g, k1, out=g)
        out[...] = g

    bad = _run(step, x, h0, H, stop, check_every, xp)
    return H, bad

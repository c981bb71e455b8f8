"""Activations φ, their derivatives φ', and the affine-piece index of max-affine ones.

Each activation has a small integer id so that jitted kernels can dispatch on it without
Python objects.  ``leaky-relu`` uses the slope ``leak`` (default 0.01) for negative
arguments.  At the kinks of relu, leaky-relu and abs the derivative is taken from the right
(φ'(0) = 1 for relu and leaky-relu, +1 for abs), which is the convention of the MASO paper's
partition codes (a unit exactly at 0 belongs to the upper piece).

======== ==  ======================  =========================
name     id  φ(z)                    φ'(z)
======== ==  ======================  =========================
tanh     0   tanh z                  1 − tanh² z
relu     1   max(z, 0)               [z ≥ 0]
sigmoid  2   1/(1 + e^{−z})          σ(z)(1 − σ(z))
identity 3   z                       1
leaky-relu 4 max(z, leak·z)          1 if z ≥ 0 else leak
abs      5   |z|                     sign(z) (+1 at 0)
======== ==  ======================  =========================

These NumPy functions (any array namespace ``xp``) are the reference's φ and φ': the NumPy
backend (``dynlab.backends.reference``) and every layer that evaluates an activation outside a
kernel use them; the compiled targets' φ and φ' are ``dynlab.backends.cells``'s, written
independently.  ``sigmoid`` is the one NumPy logistic function (the gates of the GRU and LSTM,
FastRNN's σ(α), σ(β), the sigmoid activation).  ``out=`` evaluates into a given array (which
may be ``z`` itself) without temporaries where the activation allows.
"""
from __future__ import annotations

import numpy as np

from .errors import ParameterError

ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity", "leaky-relu", "abs")
ACTIVATION_IDS = {name: i for i, name in enumerate(ACTIVATIONS)}
#: Activations that are max-affine splines (convex, piecewise affine): MASO analysis applies.
MAX_AFFINE = ("relu", "leaky-relu", "abs", "identity")
DEFAULT_LEAK = 0.01
#: name → (sup|φ|, sup|φ'|, sup|φ''|): the bound on φ, φ's Lipschitz constant (leaky-relu: for a
#: leak ≤ 1) and φ''s (None where φ' jumps: the piecewise-affine ones), for the analyses' bounds
#: (contraction rates, Newton–Kantorovich certificates).
BOUNDS = {"tanh": (1.0, 1.0, 4.0 / (3.0 * np.sqrt(3.0))), "sigmoid": (1.0, 0.25, 1.0 / (6.0 * np.sqrt(3.0))),
          "identity": (np.inf, 1.0, 0.0), "relu": (np.inf, 1.0, None), "leaky-relu": (np.inf, 1.0, None),
          "abs": (np.inf, 1.0, None)}


def check_activation(name: str, param: str = "activation") -> str:
    """Return the canonical activation name or raise ``ParameterError`` naming ``param``."""
    if not isinstance(name, str):
        raise ParameterError(param, f"must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("_", "-")
    if key == "leakyrelu":
        key = "leaky-relu"
    if key not in ACTIVATION_IDS:
        raise ParameterError(param, f"unknown activation {name!r}; choose from {', '.join(ACTIVATIONS)}")
    return key


def sigmoid(z, xp=np, *, out=None, exact_tails: bool = True):
    """σ(z) = 1/(1 + e^{−z}) elementwise: the NumPy logistic function (the only one).

    With ``exact_tails`` (the default) the two-sided form with e = e^{−|z|} ≤ 1: 1/(1 + e) for
    z ≥ 0, e/(1 + e) below — never the exponential of a large positive number, accurate
    relatively everywhere (also deep in the negative tail).  ``exact_tails=False``: the identity
    σ(z) = (1 + tanh(z/2))/2, one vectorised tanh and no temporaries (about 7× faster than the
    exponential), accurate to ≈ eps absolutely but not relatively below z ≈ −20 — for solvers
    whose tolerance is absolute (the implicit networks' equilibria).  ``out`` (may be ``z``):
    where to write.

    >>> float(sigmoid(0.0))
    0.5
    """
    if not exact_tails:
        out = xp.multiply(z, 0.5, out=out)
        xp.tanh(out, out=out)
        out *= 0.5
        out += 0.5
        return out
    e = xp.exp(-xp.abs(z))
    v = xp.where(z >= 0, 1.0, e) / (1.0 + e)
    if out is None:
        return v
    out[...] = v
    return out


def phi(name: str, z, leak: float = DEFAULT_LEAK, xp=np, *, out=None):
    """φ(z) elementwise, written against the array namespace ``xp``; into ``out`` when given
    (which may be ``z`` itself)."""
    if name == "tanh":
        return xp.tanh(z, out=out)
    if name == "relu":
        return xp.maximum(z, 0.0, out=out)
    if name == "sigmoid":
        return sigmoid(z, xp, out=out)
    if name == "identity":
        return xp.multiply(z, 1.0, out=out)
    if name == "leaky-relu":
        return _into(xp.where(z >= 0, z, leak * z), out)
    if name == "abs":
        return xp.abs(z, out=out)
    raise ParameterError("activation", f"unknown activation {name!r}")


def dphi(name: str, z, leak: float = DEFAULT_LEAK, xp=np, *, out=None):
    """φ'(z) elementwise (right derivative at kinks); into ``out`` when given."""
    if name == "tanh":
        t = xp.tanh(z)
        return xp.subtract(1.0, t * t, out=out)
    if name == "sigmoid":
        return dphi_at(name, z, sigmoid(z, xp), leak, xp, out=out)
    if name == "relu":
        return _into((z >= 0).astype(z.dtype), out)
    if name == "identity":
        return _into(xp.ones_like(z), out)
    if name == "leaky-relu":
        return _into(xp.where(z >= 0, 1.0, leak).astype(z.dtype), out)
    if name == "abs":
        return _into(xp.where(z >= 0, 1.0, -1.0).astype(z.dtype), out)
    raise ParameterError("activation", f"unknown activation {name!r}")


def dphi_at(name: str, z, a, leak: float = DEFAULT_LEAK, xp=np, *, out=None):
    """φ'(z) given a = φ(z) already computed: 1 − a² (tanh) and a(1 − a) (sigmoid) need no
    second transcendental; the others from z.  ``out`` may be ``z`` (not ``a``)."""
    if name == "tanh":
        out = xp.multiply(a, a, out=out)
        return xp.subtract(1.0, out, out=out)
    if name == "sigmoid":
        out = xp.subtract(1.0, a, out=out)
        out *= a
        return out
    return dphi(name, z, leak, xp, out=out)


def d2phi(name: str, z, leak: float = DEFAULT_LEAK, xp=np):
    """φ''(z) elementwise: tanh −2 t(1 − t²), sigmoid σ(1 − σ)(1 − 2σ); 0 on the pieces of the
    piecewise-affine activations (and for identity)."""
    if name == "tanh":
        t = xp.tanh(z)
        return -2.0 * t * (1.0 - t * t)
    if name == "sigmoid":
        s = sigmoid(z, xp)
        return s * (1.0 - s) * (1.0 - 2.0 * s)
    if name in ACTIVATION_IDS:
        return xp.zeros_like(z)
    raise ParameterError("activation", f"unknown activation {name!r}")


def _into(v, out):
    if out is None:
        return v
    out[...] = v
    return out


def piece(name: str, z, xp=np):
    """Index of the affine piece each entry of z lies on (max-affine activations only).

    relu / leaky-relu: 0 for z < 0, 1 for z ≥ 0;  abs: 0 for z < 0, 1 for z ≥ 0;
    identity: always 0 (a single piece).
    """
    if name not in MAX_AFFINE:
        raise ParameterError("activation", f"{name!r} is not a max-affine spline; partition codes "
                             f"need one of {', '.join(MAX_AFFINE)}")
    if name == "identity":
        return xp.zeros(z.shape, dtype=np.int8)
    return (z >= 0).astype(np.int8)

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
"""
from __future__ import annotations

import numpy as np

from .errors import ParameterError

ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity", "leaky-relu", "abs")
ACTIVATION_IDS = {name: i for i, name in enumerate(ACTIVATIONS)}
#: Activations that are max-affine splines (convex, piecewise affine): MASO analysis applies.
MAX_AFFINE = ("relu", "leaky-relu", "abs", "identity")
DEFAULT_LEAK = 0.01


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


def phi(name: str, z, leak: float = DEFAULT_LEAK, xp=np):
    """φ(z) elementwise, written against the array namespace ``xp``."""
    if name == "tanh":
        return xp.tanh(z)
    if name == "relu":
        return xp.maximum(z, 0.0)
    if name == "sigmoid":
        return _sigmoid(z, xp)
    if name == "identity":
        return z * 1.0
    if name == "leaky-relu":
        return xp.where(z >= 0, z, leak * z)
    if name == "abs":
        return xp.abs(z)
    raise ParameterError("activation", f"unknown activation {name!r}")


def dphi(name: str, z, leak: float = DEFAULT_LEAK, xp=np):
    """φ'(z) elementwise (right derivative at kinks)."""
    if name == "tanh":
        t = xp.tanh(z)
        return 1.0 - t * t
    if name == "relu":
        return (z >= 0).astype(z.dtype)
    if name == "sigmoid":
        s = _sigmoid(z, xp)
        return s * (1.0 - s)
    if name == "identity":
        return xp.ones_like(z)
    if name == "leaky-relu":
        return xp.where(z >= 0, 1.0, leak).astype(z.dtype)
    if name == "abs":
        return xp.where(z >= 0, 1.0, -1.0).astype(z.dtype)
    raise ParameterError("activation", f"unknown activation {name!r}")


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


def _sigmoid(z, xp):
    # Two-sided form: never evaluates exp of a large positive number.
    e = xp.exp(-xp.abs(z))
    return xp.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))

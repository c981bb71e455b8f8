"""The box of states a trajectory can reach, per kind of kernel form (``form.reachable_box``;
``dynlab.analysis.reachable`` states the table and the rules, and tests them).

Each box is closed, holds h_0 = 0, is mapped into itself by the dynamics at the constant inputs in
[x_lo, x_hi], and holds every true fixed point there; a form returns (lo, hi, out_lo, out_hi,
words): the bounds of the state the fixed-point search solves for, of the output the next layer of
a stack reads, and the rule in words.
"""
from __future__ import annotations

import numpy as np

from ..activations import sigmoid

#: The closed hull of {0} ∪ the range of each activation (the state h_0 = 0 is always inside).
HULL = {"tanh": (-1.0, 1.0), "sigmoid": (0.0, 1.0), "relu": (0.0, np.inf), "abs": (0.0, np.inf),
        "identity": (-np.inf, np.inf), "leaky-relu": (-np.inf, np.inf)}


def hull(activation: str) -> tuple[float, float]:
    return HULL.get(str(activation), (-np.inf, np.inf))


def gru_box(f, x_lo, x_hi):
    """(lo, hi, output lo, output hi, words) of a GRU's form: h' = (1 − z) n + z h is a convex
    combination of h and n = φ(·), so hull(0, range φ) whatever the input."""
    pl, ph = hull(f.act)
    D = f.hidden
    return np.full(D, pl), np.full(D, ph), np.full(D, pl), np.full(D, ph), "h in hull(0, range φ)"


def lstm_box(f, x_lo, x_hi):
    """(lo, hi, output lo, output hi, words) of an LSTM's form whose input lies in [x_lo, x_hi]
    (per input entry): the forget gate's largest pre-activation over the input box and
    |h| ≤ max(|pl|, |ph|) bound c."""
    pl, ph = hull(f.act)
    D = f.hidden
    Hb = max(abs(pl), abs(ph))
    W_f = f.W_ih[D:2 * D]
    U_f = f.W_hh[D:2 * D]
    b_f = f.b_ih[D:2 * D] + f.b_hh[D:2 * D]
    mid, rad = 0.5 * (x_lo + x_hi), 0.5 * (x_hi - x_lo)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        pre = b_f + W_f @ mid + np.abs(W_f) @ rad + np.abs(U_f).sum(axis=1) * Hb
        f_max = sigmoid(np.asarray(pre, dtype=np.float64))
        c_lo = np.where(f_max < 1.0, min(0.0, pl) / (1.0 - f_max), -np.inf) if pl < 0 else np.zeros(D)
        c_hi = np.where(f_max < 1.0, max(0.0, ph) / (1.0 - f_max), np.inf)
    if not np.isfinite(Hb):
        c_lo, c_hi = np.full(D, -np.inf), np.full(D, np.inf)
    return (np.concatenate([np.full(D, pl), c_lo]), np.concatenate([np.full(D, ph), c_hi]),
            np.full(D, pl), np.full(D, ph), "h in hull(0, range φ); c in hull(0, range φ)/(1 − f⁺)")


def cell_box(f):
    """(lo, hi, words) of a one-line cell h' = a h + γ φ(·) with 0 ≤ a < 1, γ ≥ 0: from h_0 = 0
    every state, and every fixed point h = γ φ(·)/(1 − a), lies in hull(0, range φ)·γ/(1 − a) (the
    RNN and RIN: a = 0, γ = 1; FastRNN: σ(β), σ(α)).  a ≥ 1 (AntisymmetricRNN: a = 1, where any h
    with φ(·) = 0 is fixed) or a sign below 0: ℝ."""
    n = f.hidden
    if not (0.0 <= f.a < 1.0 and f.gain >= 0):
        return np.full(n, -np.inf), np.full(n, np.inf), "ℝ (h' = a h + γ φ(·) with a ≥ 1 is not bounded by its update)"
    pl, ph = hull(f.act)
    scale = f.gain / (1.0 - f.a)
    lo = scale * pl if (pl < 0 and scale > 0) else 0.0
    hi = scale * ph if (ph > 0 and scale > 0) else 0.0
    if f.a == 0.0 and f.gain == 1.0:
        return np.full(n, pl), np.full(n, ph), "h = φ(·) ∈ hull(0, range φ)"
    return np.full(n, lo), np.full(n, hi), "h ∈ hull(0, range φ)·γ/(1 − a)"


def alpha_box(f):
    """(lo, hi, words) of the iRNN's step equilibrium and the CTRNN's flow: the roots of
    α s = φ(U s + W x + b) lie in hull(0, range φ)/α; unbounded when α = 0."""
    n = f.state_size
    if not f.alpha > 0:
        return np.full(n, -np.inf), np.full(n, np.inf), "unbounded (α = 0)"
    pl, ph = hull(f.act)
    return np.full(n, pl / f.alpha), np.full(n, ph / f.alpha), "s = φ(·)/α ∈ hull(0, range φ)/α"


def unbounded(f, words: str):
    """The whole space (n,): a form whose dynamics bound no box."""
    n = f.state_size
    return np.full(n, -np.inf), np.full(n, np.inf), words

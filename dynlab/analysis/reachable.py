"""The states a trajectory can reach: a box per state entry, from the model's own equations.

A fixed-point search minimises q(y) = ½‖F(y)‖² from many starts, and far from where the network
lives it finds "points" no trajectory ever visits: a GRU whose update gate has saturated to 1 in
floating point has step(h) = h for *every* h, so at |h| ≈ 50 each state looks like a fixed point
(and a flat q makes slow points there).  ``fixed_points`` leaves out what lies outside the box
``state_box(model, x)`` returns (``keep_unreachable=True`` keeps it, flagged ``reachable = 0``).

The box [lo, hi] (per entry of the solve's variable y) is closed, holds h_0 = 0, is mapped into
itself by the dynamics at the constant input x, and holds every true fixed point at x — so nothing
a trajectory from inside it reaches, and no equilibrium, is ever left out:

============  ==================================================================================
model         box (R = hull({0} ∪ range φ): tanh [−1, 1], sigmoid [0, 1], relu/abs [0, ∞), else ℝ)
============  ==================================================================================
rnn, rin      R: every step ends in φ(·)
fastrnn       a h + c φ(·) with a = σ(β), c = σ(α): R scaled by c/(1 − a)
gru           R: h' = (1 − z) n + z h is a convex combination of h and n = φ(·)
lstm          h in R (h = o φ(c), 0 < o < 1); c in R·i/(1 − f⁺): c' = f c + i g, with f⁺ the largest
              forget gate over the box of h at this x (per unit; i ≤ 1), so a saturating f (f⁺ = 1
              in floating point) leaves c unbounded
stack         each layer's box, its input (x, then the layer below's h) bounded by the box below
irnn, ctrnn   R/α: the roots of α s = φ(U s + W x + b) (and the CTRNN flow's invariant box); ℝ if α = 0
antisymmetric ℝ (h' = h + ε φ(·) is not bounded by its update)
============  ==================================================================================

A point is inside when lo − ε ≤ y ≤ hi + ε with ε = ``SLACK``·(1 + |bound|): roots on the
boundary (tanh rounded to ±1) count as inside.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..activations import sigmoid

#: The closed hull of {0} ∪ the range of each activation (the state h_0 = 0 is always inside).
HULL = {"tanh": (-1.0, 1.0), "sigmoid": (0.0, 1.0), "relu": (0.0, np.inf), "abs": (0.0, np.inf),
        "identity": (-np.inf, np.inf), "leaky-relu": (-np.inf, np.inf)}
#: Relative slack of the boundary test.
SLACK = 1e-9


@dataclasses.dataclass(frozen=True)
class StateBox:
    """lo, hi : (n,) bounds of the solve's variable (±inf where unbounded); rule : how they were found."""

    lo: np.ndarray
    hi: np.ndarray
    rule: str

    def contains(self, Y) -> np.ndarray:
        """(N,) bool: which rows of Y (N, n) lie in the box (with the slack above)."""
        Y = np.asarray(Y, dtype=np.float64).reshape(-1, self.lo.size)
        with np.errstate(invalid="ignore"):
            lo = self.lo - SLACK * (1.0 + np.abs(self.lo))
            hi = self.hi + SLACK * (1.0 + np.abs(self.hi))
            ok = (Y >= np.where(np.isfinite(lo), lo, -np.inf)) & (Y <= np.where(np.isfinite(hi), hi, np.inf))
        return np.all(ok, axis=1) & np.all(np.isfinite(Y), axis=1)

    def clip(self, Y) -> np.ndarray:
        """Y with every row moved into the box."""
        return np.clip(Y, self.lo, self.hi)


def _hull(activation: str) -> tuple[float, float]:
    return HULL.get(str(activation), (-np.inf, np.inf))


def _gated_box(f, x_lo, x_hi):
    """(lo, hi, output lo, output hi, words) of one gated cell's form (gru, lstm) whose input lies
    in [x_lo, x_hi] (per input entry)."""
    pl, ph = _hull(f.act)
    D = f.hidden
    if f.kind == "gru":
        return np.full(D, pl), np.full(D, ph), np.full(D, pl), np.full(D, ph), "h in hull(0, range φ)"
    # lstm: the forget gate's largest pre-activation over the input box and |h| ≤ max(|pl|, |ph|)
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


def _cell_box(f):
    """(lo, hi, words) of a one-line cell h' = a h + γ φ(·) with 0 ≤ a < 1, γ ≥ 0: from h_0 = 0
    every state, and every fixed point h = γ φ(·)/(1 − a), lies in hull(0, range φ)·γ/(1 − a) (the
    RNN and RIN: a = 0, γ = 1; FastRNN: σ(β), σ(α)).  a ≥ 1 (AntisymmetricRNN: a = 1, where any h
    with φ(·) = 0 is fixed) or a sign below 0: ℝ."""
    n = f.hidden
    if not (0.0 <= f.a < 1.0 and f.gain >= 0):
        return np.full(n, -np.inf), np.full(n, np.inf), "ℝ (h' = a h + γ φ(·) with a ≥ 1 is not bounded by its update)"
    pl, ph = _hull(f.act)
    scale = f.gain / (1.0 - f.a)
    lo = scale * pl if (pl < 0 and scale > 0) else 0.0
    hi = scale * ph if (ph > 0 and scale > 0) else 0.0
    if f.a == 0.0 and f.gain == 1.0:
        return np.full(n, pl), np.full(n, ph), "h = φ(·) ∈ hull(0, range φ)"
    return np.full(n, lo), np.full(n, hi), "h ∈ hull(0, range φ)·γ/(1 − a)"


def state_box(model, x) -> StateBox:
    """The box of states a trajectory can reach at the constant input ``x`` (the table above), in
    the variable the fixed-point search solves for, from the model's kernel form."""
    f = model.form()
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    n = f.state_size
    if f.kind == "cell":
        return StateBox(*_cell_box(f))
    if f.kind in ("irnn", "ctrnn"):
        pl, ph = _hull(f.act)
        if not f.alpha > 0:
            return StateBox(np.full(n, -np.inf), np.full(n, np.inf), "unbounded (α = 0)")
        return StateBox(np.full(n, pl / f.alpha), np.full(n, ph / f.alpha), "s = φ(·)/α ∈ hull(0, range φ)/α")
    if f.kind in ("gru", "lstm"):
        lo, hi, _, _, words = _gated_box(f, x, x)
        return StateBox(lo, hi, words)
    if f.kind == "stack":
        los, his, rules = [], [], []
        x_lo = x_hi = x
        for layer in f.layers:
            if layer.kind in ("gru", "lstm"):
                lo, hi, out_lo, out_hi, words = _gated_box(layer, x_lo, x_hi)
            elif layer.kind == "cell":
                lo, hi, words = _cell_box(layer)
                out_lo, out_hi = lo, hi
            else:
                lo, hi, words = np.full(layer.state_size, -np.inf), np.full(layer.state_size, np.inf), "unbounded"
                out_lo, out_hi = lo, hi
            los.append(lo)
            his.append(hi)
            rules.append(f"{layer.kind}: {words}")
            x_lo, x_hi = out_lo, out_hi
        return StateBox(np.concatenate(los), np.concatenate(his), "; ".join(rules))
    return StateBox(np.full(n, -np.inf), np.full(n, np.inf), f"unbounded ({f.kind})")


def task_states(model, task) -> np.ndarray:
    """(B, T, n) states the model visits from h_0 = 0 on ``task``'s test inputs (a ``Task``)."""
    from ..errors import ParameterError
    from ..simulation import simulate

    x = task.batch("test")[0]
    if x.shape[-1] != model.inputs:
        raise ParameterError("trajectories", f"the task {task.name!r} has {x.shape[-1]} input(s), the model "
                                             f"{model.inputs}")
    return simulate(model, x)["h"].values

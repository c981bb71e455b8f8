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


def state_box(model, x) -> StateBox:
    """The box of states a trajectory can reach at the constant input ``x`` (the table above), in
    the variable the fixed-point search solves for: the model's kernel form's own
    (``form.reachable_box``, ``dynlab.models.boxes``)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    lo, hi, _, _, rule = model.form().reachable_box(x, x)
    return StateBox(lo, hi, rule)


def task_states(model, task) -> np.ndarray:
    """(B, T, n) states the model visits from h_0 = 0 on ``task``'s test inputs (a ``Task``)."""
    from ..errors import ParameterError
    from ..simulation import simulate

    x = task.batch("test")[0]
    if x.shape[-1] != model.inputs:
        raise ParameterError("trajectories", f"the task {task.name!r} has {x.shape[-1]} input(s), the model "
                                             f"{model.inputs}")
    return simulate(model, x)["h"].values

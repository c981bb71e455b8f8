"""The NumPy reference backend: the update rules and their derivatives written as plainly as
possible, batched over sequences or points with NumPy and LAPACK — the definition every other
backend is tested against.  Each cell's per-element arithmetic is written once here, in
``cells`` (φ and φ' from ``dynlab.activations``), and a second time, independently, in
``dynlab.backends.cells`` for the compiled backends; each rule's step (``simulate``) returns
what its Jacobian and backward pass read (pre-activations, inner states, gates).

=================  =========================================================================
operation          how
=================  =========================================================================
simulate           a Python loop over time steps (``simulate.py``); a CTRNN with a scipy
                   method steps ``scipy.integrate.solve_ivp`` interval by interval
jacobians          the closed forms batched over the N points (``jacobians.py``); a CTRNN with
                   a scipy method integrates the variational equation with ``solve_ivp``
backward_norms     P_t = P_{t+1} J_{t+1} one matmul per step, σ₁ by LAPACK's SVD (``norms.py``)
tangent_qr         LAPACK's QR of J_t Q_{t−1} at every step (``norms.py``)
forward_tangent    batched matmuls over a sweep's settings (``tangent.py``)
reverse_cotangents the MASO reverse pass, one matmul per step (``tangent.py``)
implicit_solve     batched Picard, RK4 flow, Newton (``implicit.py``)
train_forward,     a Python loop over steps (and inner steps), everything it needs kept; the
train_backward     vector–Jacobian products back through it (``bptt.py``)
=================  =========================================================================
"""
from __future__ import annotations

import numpy as np

from ..base import Backend


class ReferenceBackend(Backend):
    """The NumPy reference (module docstring)."""

    name = "numpy"
    description = "the NumPy reference: plain loops, LAPACK; every other backend is tested against it"

    def simulate(self, form, x, h0, *, stop: bool = True, dtype=np.float64):
        return self.kernel("simulate", form)(self, form, x, h0, stop, dtype)

    def jacobians(self, form, x, hprev, *, eta=None, inputs: bool = False):
        J, Jx, _ = self.kernel("jacobians", form)(self, form, x, hprev, eta, inputs)
        return J, Jx, "scipy" if getattr(form, "fixed_step", True) is False else "numpy"

    def backward_norms(self, batch: int, size: int, *, dL_dhT=None, step_norms: bool = True):
        from .norms import BackwardProducts

        return BackwardProducts(batch, size, dL_dhT=dL_dhT, step_norms=step_norms)

    def tangent_qr(self, batch: int, size: int, Q):
        from .norms import QRSteps

        return QRSteps(Q)

    def forward_tangent(self, batch):
        """Batched over the settings of each activation (one ``tangent.forward_tangent`` call per
        distinct (activation, leak)); a state that overflows is reported in ``diverged``."""
        from ...activations import ACTIVATIONS
        from .tangent import forward_tangent

        keys = np.stack([batch.act.astype(np.float64), np.asarray(batch.leak, dtype=np.float64)], axis=1)
        out = None
        for key in np.unique(keys, axis=0):
            at = np.flatnonzero((keys == key).all(axis=1))
            with np.errstate(over="ignore", invalid="ignore"):
                part = forward_tangent(batch.gated, batch.R, batch.W, batch.b, batch.X, batch.group[at], batch.eta[at],
                                       batch.alpha[at], batch.sign[at], batch.g0prev[at], ACTIVATIONS[int(key[0])],
                                       float(key[1]))
            if out is None:
                out = [np.empty((batch.size,) + p.shape[1:], dtype=p.dtype) for p in part]
            for o, p in zip(out, part):
                o[at] = p
        return tuple(out)

    def reverse_cotangents(self, form, S, lam, incoming):
        from .tangent import reverse_cotangents

        return reverse_cotangents(form, S, lam, incoming)

    def train_forward(self, form, x, h0):
        from .bptt import forward

        return forward(form, x, h0)

    def train_backward(self, form, tape, ext):
        from .bptt import backward

        return backward(tape, ext)

    def implicit_solve(self, A, C, act: str, leak: float, *, method: str = "auto", tol: float, max_iter=None, Z0=None,
                       steps: int = 30, dt: float = 1.0):
        """Every method of ``dynlab.analysis.implicit`` in NumPy/SciPy (``implicit.solve_method``);
        ``auto``: batched Picard → RK4 flow → Newton."""
        from .implicit import solve_method

        return solve_method(A, C, act, leak, method=method, tol=tol, max_iter=max_iter, Z0=Z0, steps=steps, dt=dt)



def _simulate(be, form, x, h0, stop, dtype):
    """A one-layer form by its kind's loop (``simulate.SIMULATE``)."""
    from .simulate import SIMULATE

    return SIMULATE[form.kind](form, x, h0, stop, np.dtype(dtype))


def _simulate_stack(be, form, x, h0, stop, dtype):
    return be.simulate_layers(form, x, h0, stop=stop, dtype=dtype)


def _jacobians(be, form, x, s, eta, want_x):
    """The closed forms (``jacobians.LAYER``)."""
    from .jacobians import LAYER

    return LAYER[form.kind](form, x, s, eta, want_x)


#: operation → {kind: kernel} (``Backend.kernel``): the kinds' own functions are the tables of
#: ``simulate`` and ``jacobians`` (``SIMULATE``, ``LAYER``), read through these (imported on
#: first use).  Every other operation takes every form.
ReferenceBackend.KERNELS = {
    "simulate": {"cell": _simulate, "irnn": _simulate, "ctrnn": _simulate, "gru": _simulate, "lstm": _simulate,
                 "stack": _simulate_stack},
    "jacobians": {"cell": _jacobians, "irnn": _jacobians, "ctrnn": _jacobians, "gru": _jacobians, "lstm": _jacobians,
                  "stack": _jacobians},
}

__all__ = ["ReferenceBackend"]

"""Stability spectra along trajectories and at equilibria (iRNN paper, Fig. 7).

At every point analysed two spectra are reported:

* the flow Jacobian ∂F/∂y of the equilibrium equation F(y) = γ φ(R y + c) − β y
  (the form's fixed-point map, ``dynlab.models.fixed_point``): for the iRNN ∇φ(U s + W x + b)·U − αI at
  s = h_m + sign·h_{m-1} (the point that sits on the equilibrium manifold as K grows), for the
  CTRNN (∇φ·U − αI)/τ, for the discrete cells ∂step/∂h − I, for gru, lstm and stack ∂step/∂s − I
  on the whole state s (an LSTM's [h; c]).  Stable (for a flow) when every
  real part is negative;
* the discrete step Jacobian ∂h_m/∂h_{m-1} (``dynlab.jacobians``: the iRNN's product over its
  K inner steps, the CTRNN's sampled map, the cells' closed forms), against the unit circle.

Complex eigenvalues are stored as real and imaginary parts (``eig_real``/``eig_imag``,
``step_eig_real``/``step_eig_imag``, dimension ``eig``), which NetCDF round-trips exactly;
``dynlab.analysis.equilibria.eigenvalues_from(ds, "eig")`` puts them back together.
"""
from __future__ import annotations

from ..backends import get_backend

import numpy as np

from .._resources import check_spectrum
from .._progress import progress
from ..errors import ParameterError
from .equilibria import (STABILITY_ATTRS, _part_coords, eig_variables, flow_eigenvalues,
                         fixed_point_map, run_solver, stability_label)

AT = ("trajectory", "equilibrium")


def spectrum(model, x, h0=None, *, at: str = "trajectory", step: bool = True, backend=None,
             tol: float = 1e-12, stability_tol: float = 1e-9, command=None):
    """Eigenvalues of ∇φ·U − αI (and of the step Jacobian) at every point of input sequences.

    Parameters
    ----------
    model : dynlab model
    x : (T, d) or (B, T, d) input sequence(s); every (sequence, step) is one point
    h0 : (D,) or (B, D) initial states (zeros by default)
    at : "trajectory" — the simulated states: y = s_m = h_m + sign·h_{m-1} for the iRNN,
        y = h_{m-1} otherwise; "equilibrium" — the equilibrium of each step's input x_m
        (Newton from the trajectory's point; each solve's residual is stored)
    step : also the step Jacobian ∂h_m/∂h_{m-1} at (x_m, h_{m-1}) (at (x_m, h_eq) for a
        non-iRNN model at its equilibrium) and its spectral radius
    backend : for the simulation and the step Jacobians

    Returns
    -------
    xarray.Dataset (``attrs["result"] = "spectrum"``), every point at its ([batch,] time) place
    (time m = 1..T, the point of step m): ``eig_real``/``eig_imag`` ([batch,] time, eig) sorted by
    decreasing real part, ``max_real``, ``stability`` (1/0/−1: the flow's real parts for irnn and
    ctrnn, the step Jacobian's radius for the discrete cells), ``state`` ([batch,] time, unit)
    the point y; with ``step`` also ``step_eig_real``/``step_eig_imag`` and ``step_radius``; at
    equilibria ``residual`` and ``converged``; the input ``x``, ``h0`` and the model's parameters.

    Example
    -------
    >>> sp = spectrum(m, dl.tasks.random_walk(steps=1000, inputs=1, variance=10.0, seed=0))
    >>> (sp.max_real < 0).all()
    """
    backend = get_backend(backend)      # resolved once: the object goes down to every kernel
    with backend:
        import xarray as xr

        from .._dataset import base_attrs, finish, model_attrs, model_variables
        from ..simulation import check_h0, check_input, run_states
        from .jacobians import jacobian_at

        if at not in AT:
            raise ParameterError("at", f"must be one of {', '.join(AT)}, got {at!r}")
        system = fixed_point_map(model, backend)  # a step map's Jacobians on the same backend as the step Jacobians
        xa, batched = check_input(x, model.inputs)
        B, T, d = xa.shape
        check_spectrum(model, B, T, step=step)  # before running: refuses what cannot fit or finish
        h0a = check_h0(h0, B, model.state_size)
        H, bad, _ = run_states(model, xa, h0a, backend)
        if bad.min() < T:
            from ..errors import DivergenceError

            n = int(bad.min())  # the steps before the first divergence are kept: their spectra
            partial = None if n < 1 else spectrum(model, xa[:, :n] if batched else xa[0, :n], h0, at=at, step=step,
                                                   backend=backend, tol=tol, stability_tol=stability_tol, command=command)
            raise DivergenceError(step=n + 1, batch=int(np.argmin(bad)), model=model.name, partial=partial)
        D = model.state_size
        hprev = np.concatenate([h0a[:, None], H[:, :-1]], axis=1).reshape(B * T, D)
        xs = xa.reshape(B * T, d)
        c = system.c(xs)
        y = system.at_step(H.reshape(B * T, D), hprev)
        lead = ("batch",) if batched else ()
        sel = slice(None) if batched else 0
        dims = lead + ("time",)

        def per_point(a):
            """(B·T, …) point values → ([batch,] time, …)."""
            a = np.asarray(a)
            return a.reshape((B, T) + a.shape[1:])[sel]

        data = {}
        if at == "equilibrium":
            y, res, _, conv = run_solver(system, c, y, "newton", tol=tol)
            data["residual"] = xr.Variable(dims, per_point(res), {"long_name": "max-abs residual ‖F‖∞ of the equilibrium",
                                                                  "units": "1"})
            data["converged"] = xr.Variable(dims, per_point(conv.astype(np.int8)), {"long_name": f"residual ≤ {tol:g}",
                                                                                    "units": "1"})
        eigs = flow_eigenvalues(system, y, c)
        data.update(eig_variables(per_point(eigs), dims, what=system.eig_label))
        data["max_real"] = xr.Variable(dims, per_point(eigs.real.max(axis=1)),
                                       {"long_name": "largest real part of the eigenvalues", "units": "1"})
        if step:
            where = y if (at == "equilibrium" and not system.shifted) else hprev
            seig = np.empty((B * T, D), dtype=np.complex128)
            for lo in range(0, B * T, 256):
                hi = min(B * T, lo + 256)
                t = np.arange(lo, hi) % T  # read only where η varies over time (an iRNN's per-time table)
                J = jacobian_at(model, xs[lo:hi], where[lo:hi], backend=backend, t=t)
                seig[lo:hi] = np.sort(np.linalg.eigvals(J), axis=-1)[:, ::-1]
                progress("step-Jacobian eigenvalues (points)", hi, B * T)
            data.update(eig_variables(per_point(seig), dims, name="step_eig",
                                      what="eigenvalue of the step Jacobian ∂h_m/∂h_(m-1)"))
            data["step_radius"] = xr.Variable(dims, per_point(np.abs(seig).max(axis=1)),
                                              {"long_name": "spectral radius of ∂h_m/∂h_(m-1)", "units": "1"})
        if system.discrete:
            stab = stability_label(eigs + 1.0, discrete=True, tol=stability_tol)
        else:
            stab = stability_label(eigs, discrete=False, tol=stability_tol)
        data.update({
            "stability": xr.Variable(dims, per_point(stab), dict(STABILITY_ATTRS)),
            "state": xr.Variable(dims + ("unit",), per_point(y), {"long_name": f"point analysed ({system.variable})",
                                                                   "units": "1"}),
            "x": xr.Variable(lead + ("time", "unit_in"), xa[sel], {"long_name": "input x_t", "units": "1"}),
            "h0": xr.Variable(lead + ("unit",), h0a[sel], {"long_name": "initial state h_0", "units": "1"}),
            **model_variables(model),
        })
        attrs = {**model_attrs(model), **base_attrs(backend.name, command), "at": at, "system": system.name,
                 "n_points": int(B * T), "n_stable": int((stab == 1).sum()), "tol": tol}
        return finish(xr.Dataset(data, attrs=attrs).assign_coords(_part_coords(model)), "spectrum")

"""How fast the iRNN's inner recursion reaches its equilibrium (iRNN paper, Fig. 6; Prop. 2).

For a step m with input x and previous state h = h_{m-1}, the recursion

    g_k = g_{k-1} + η(φ(U(g_{k-1} + σh) + W x + b) − α(g_{k-1} + σh)),     σ = sign,

tends to h_eq with s* = h_eq + σh solving α s* = φ(U s* + W x + b).  ``convergence`` reports

* ``error`` e_k = ‖g_k − h_eq‖₂ for k = 0..K_max, h_eq from ``scipy.optimize.root`` (the
  independent reference);
* ``rate``: the fitted linear rate exp(slope) of a least-squares line through ln e_k over the
  k ≥ 1 with e_k above ``floor`` (where rounding has not yet taken over); NaN where fewer than
  three such e_k exist (``rate_points`` < 3: the recursion reached rounding within two steps, as
  with U = 0 and αη = 1, or K_max < 3): no line to fit, stated in the variable's ``note``;
* ``local_rate``: the spectral radius of I + η(∇φ(U s* + W x + b)·U − αI), the asymptotic
  rate of the linearised recursion;
* ``bound_rate`` ρ = |1 − αη| + η·Lip(φ)·‖U‖₂, which for αη ≤ 1 and a 1-Lipschitz φ is the
  paper's ρ = 1 − αη + η‖U‖₂.  Since s_k − s* = (1 − αη)(s_{k-1} − s*) + η(φ(U s_{k-1} + c) −
  φ(U s* + c)), every step contracts the error by at least ρ, so **e_k ≤ ρ^k e_0** for every k
  (the corrected Prop. 2).  The printed form e_K ≤ ρ^K e_1 is false: at K = 1 it says e_1 ≤ ρ e_1,
  which fails whenever ρ < 1 and e_1 > 0 (docs/background/errata.md).
"""
from __future__ import annotations

from ..backends import get_backend

import numpy as np

from ..errors import ParameterError
from .equilibria import PHI_LIPSCHITZ, _check_tol, fixed_point_map, _inputs, _states, flow_eigenvalues, run_solver


def convergence(model, x, h_prev=None, *, K_max: int = 50, eta=None, floor: float = 1e-12,
                command=None):
    """Error of the iRNN inner recursion against the scipy root, its rates and the bound ρ.

    Parameters
    ----------
    model : IRNN
    x : (d,) or (N, d) inputs;  h_prev : (D,) or (N, D) previous states (zeros by default)
    K_max : last inner iteration k
    eta : step size η (default: the model's η, which must then be one number)
    floor : errors at or below it are left out of the fitted rate (rounding level)

    Returns
    -------
    xarray.Dataset with ``error`` ([batch,] k) e_k, ``bound`` ([batch,] k) ρ^k e_0, ``rate``,
    ``local_rate`` ([batch]), ``bound_rate`` ρ (scalar), ``bound_holds`` ([batch]) whether
    e_k ≤ ρ^k e_0 + slack for all k (slack = 1e-14·(1 + ‖s*‖₂), the reference root's accuracy),
    ``printed_bound_holds`` ([batch,] k) whether e_k ≤ ρ^k e_1 (the printed Prop. 2; k ≥ 1),
    ``rate_points`` (how many e_k the fit used), ``h_eq``, ``reference_residual``,
    ``reference_converged`` (where 0 the errors and the bound check are void: the CLI exits 1), the input
    and the model's parameters (``eta`` the step size used).

    Example
    -------
    >>> cv = convergence(make_model("irnn", 16, 1, eta=0.5, seed=0), [0.3], K_max=40)
    >>> bool(cv.bound_holds)
    """
    with get_backend(None):
        import xarray as xr

        from .._dataset import base_attrs, finish, model_attrs, model_variables

        if not (getattr(model, "SEQUENCE", False) and model.form().kind == "irnn"):
            raise ParameterError("model", f"convergence of the inner recursion needs an irnn model, "
                                          f"got {getattr(model, 'name', type(model).__name__)}")
        if isinstance(K_max, bool) or int(K_max) != K_max or int(K_max) < 1:
            raise ParameterError("K_max", f"must be an integer ≥ 1, got {K_max!r}")
        K_max = int(K_max)
        floor = _check_tol(floor)
        if eta is None:
            e = np.asarray(model.eta, dtype=np.float64)
            if e.size != 1 and not np.all(e == e.ravel()[0]):
                raise ParameterError("eta", "the model's η varies with k or time; give one step size eta")
            eta = float(e.ravel()[0])
        else:
            try:
                eta = float(eta)
            except (TypeError, ValueError):
                raise ParameterError("eta", f"must be a number, got {eta!r}") from None
            if not (np.isfinite(eta) and eta > 0):
                raise ParameterError("eta", f"must be finite and > 0, got {eta}")
        model = model.replace(eta=eta)
        system = fixed_point_map(model)
        xa, single = _inputs(model, x)
        N, D = xa.shape[0], model.hidden
        hp = _states(model, h_prev, N, "h_prev")
        sgn = model.sign
        c = system.c(xa)
        # the reference: scipy's root, started from one Picard step
        s_ref, ref_res, _, ref_ok = run_solver(system, c, phi_start(system, c), "scipy", tol=1e-13)
        h_eq = s_ref - sgn * hp
        g = hp.copy() if model.g0 == "previous" else np.zeros((N, D))
        err = np.empty((N, K_max + 1))
        err[:, 0] = np.linalg.norm(g - h_eq, axis=1)
        for k in range(1, K_max + 1):
            s = g + sgn * hp
            g = g + eta * system.F(s, c)
            err[:, k] = np.linalg.norm(g - h_eq, axis=1)
        rho = abs(1.0 - model.alpha * eta) + eta * PHI_LIPSCHITZ[model.activation] * float(np.linalg.norm(model.U, 2))
        k = np.arange(K_max + 1)
        with np.errstate(over="ignore", under="ignore"):
            bound = err[:, :1] * rho ** k[None]
            printed = err[:, 1:2] * rho ** k[None]
        slack = 1e-14 * (1.0 + np.linalg.norm(s_ref, axis=1))
        holds = np.all(err <= bound + slack[:, None], axis=1)
        printed_holds = err <= printed + slack[:, None]
        printed_holds[:, 0] = True  # the printed form starts at K = 1
        rate = np.full(N, np.nan)
        npts = np.zeros(N, dtype=np.int64)
        for n in range(N):
            use = (k >= 1) & (err[n] > floor) & np.isfinite(err[n])
            npts[n] = int(use.sum())
            if npts[n] >= 3:
                slope = np.polyfit(k[use], np.log(err[n, use]), 1)[0]
                rate[n] = float(np.exp(slope))
        lam = flow_eigenvalues(system, s_ref, c)
        local = np.abs(1.0 + eta * lam).max(axis=1)
        lead = () if single else ("batch",)
        sel = 0 if single else slice(None)
        kv = ("k",)
        data = {
            "error": xr.Variable(lead + kv, err[sel], {"long_name": "error ‖g_k − h_eq‖₂", "units": "1"}),
            "bound": xr.Variable(lead + kv, bound[sel], {"long_name": "contraction bound ρ^k ‖g_0 − h_eq‖₂", "units": "1"}),
            "rate": xr.Variable(lead, rate[sel], {"long_name": "fitted linear rate of e_k", "units": "1",
                                                  "note": f"NaN where fewer than 3 errors e_k (k ≥ 1) lie above "
                                                          f"{floor:g} (rate_points < 3): no line to fit"}),
            "rate_points": xr.Variable(lead, npts[sel], {"long_name": f"errors above {floor:g} used by the fit",
                                                         "units": "1"}),
            "local_rate": xr.Variable(lead, local[sel], {"long_name": "spectral radius of I + η(∇φU − αI) at h_eq",
                                                         "units": "1"}),
            "bound_rate": xr.Variable((), rho, {"long_name": "ρ = |1 − αη| + η Lip(φ) ‖U‖₂", "units": "1"}),
            "bound_holds": xr.Variable(lead, holds[sel].astype(np.int8), {"long_name": "e_k ≤ ρ^k e_0 for every k",
                                                                          "units": "1"}),
            "printed_bound_holds": xr.Variable(lead + kv, printed_holds[sel].astype(np.int8),
                                               {"long_name": "e_k ≤ ρ^k e_1 (Prop. 2 as printed)", "units": "1"}),
            "h_eq": xr.Variable(lead + ("unit",), h_eq[sel], {"long_name": "equilibrium h_eq (scipy root)", "units": "1"}),
            "reference_residual": xr.Variable(lead, ref_res[sel], {"long_name": "max-abs residual of the scipy root",
                                                                   "units": "1"}),
            "reference_converged": xr.Variable(lead, np.asarray(ref_ok, dtype=np.int8).reshape(N)[sel],
                                               {"long_name": "scipy's root converged (1); where 0, e_k is measured "
                                                             "against a point that is not the equilibrium", "units": "1"}),
            "x": xr.Variable(lead + ("unit_in",), xa[sel], {"long_name": "input x", "units": "1"}),
            "h_prev": xr.Variable(lead + ("unit",), hp[sel], {"long_name": "previous state h_{m-1}", "units": "1"}),
            **model_variables(model),
        }
        attrs = {**model_attrs(model), **base_attrs(system.backend.name, command), "K_max": K_max, "floor": floor,
                 "lipschitz_phi": PHI_LIPSCHITZ[model.activation], "norm_U": float(np.linalg.norm(model.U, 2)),
                 "reference": "scipy.optimize.root (hybr)", "reference_converged": int(ref_ok.all())}
        coords = {"k": ("k", k, {"long_name": "inner iteration k", "units": "1"})}
        return finish(xr.Dataset(data, coords=coords, attrs=attrs), "convergence")


def phi_start(system, c):
    """One Picard step from 0, φ(c)/β: a start inside the basin of a contracting system."""
    from ..activations import phi

    return phi(system.activation, c, system.leak) * (system.gamma / max(system.beta, 1e-12))

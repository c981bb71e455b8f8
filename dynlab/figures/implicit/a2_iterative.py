"""implicit App. A.2: the derivative through n fixed-point iterations converges to the implicit derivative.

One-layer implicit networks of sigmoid units, Y = f(W Y + Q x + T), ``NETWORKS`` of them (seeds
0 … 4 of ``make_model("implicit", hidden=12, inputs=3, weight_scale=3)``: W ~ N(0, 3²/12), one input
x ~ N(0, 1) each).  For each:

- the equilibrium Y* (dynlab's solver to 1e-14) and the implicit derivative J* = ∂Y*/∂W
  (paper eq. 4 and A.2's result, ``dl.implicit_jacobian``: (I − D W)⁻¹ D δ_Y, D = diag f'(W Y* + Q x + T);
  for one unit this is eq. 2 with f'(x̃) in the numerator, the corrected form of implicit-fig1);
- the iterative network of eq. 11, Y(0) = 0, Y(t) = f(W Y(t−1) + Q x + T), and the exact derivative
  of its n-th iterate, J(n) = ∂Y(n)/∂W, by forward-mode differentiation of the unrolled iteration
  (eq. 12: J(t) = D_{t−1}(W J(t−1) + δ_{Y(t−1)})) for n = 1 … ``N_MAX``;
- the relative error e(n) = max|J(n) − J*| / max|J*|, and the contraction factor ρ = spectral radius
  of D W at Y* (the closed form: the linearised map of the iteration at the equilibrium).

Correctness of the two derivatives is checked independently first: J(n) against central differences
of Y(n) in every W_jm (ε = 1e-6) at n = 10 and 40, J* against central differences of the equilibrium
(Newton with the analytic Jacobian, batched over the perturbed networks, from Y* to a residual of 1e-14);
both to 1e-6 relative.

The claim (A.2: iterative updates "an infinite number of times" give the implicit derivative, given
(f' ⊙ W)^k → 0) is checked as: on every network ρ < 1, e(N_MAX) ≤ 1e-8, and the convergence goes at
the contraction rate.  The rate: the error obeys E(t) = D W E(t−1) + (a forcing that decays like the
state error, ∝ ρ^t), so e(n) ∝ n ρ^n asymptotically; the measured rate is exp of the least-squares
slope of log(e(n)/n) over the n where 1e-12 < e(n) < 1e-3 (past the transient, above round-off),
and it must agree with ρ to 5 % relative.
Negative control: the same networks with W − 10·I and T + 5 (strong self-inhibition, the equilibrium
moved to f' ≈ 1/4, so D W has an eigenvalue near −2.5: the iteration from 0 does not contract but
oscillates); the same check must fail there.
"""
from __future__ import annotations

import numpy as np

from ...activations import sigmoid
from .._recipe import Recipe, Scale, setting, setting_attr
from .._stats import effect, fact, record_fields

HIDDEN, INPUTS, SCALE = 12, 3, 3.0
NETWORKS = 5
N_MAX = 150
EPS = 1e-6
FD_AT = (10, 40)
TOL_FD = 1e-6      # relative agreement of a derivative with its central difference
TOL_FINAL = 1e-8   # e(N_MAX) must be at most this
TOL_RATE = 0.05    # |measured rate / ρ − 1| at most this
WINDOW = (1e-12, 1e-3)  # the e(n) range the rate is fitted on
SELF_INHIBITION, SHIFT = 10.0, 5.0  # the control: W − 10 I, T + 5


def iterate(W, c, n):
    """Y(n) of eq. 11 from Y(0) = 0, and its exact derivative ∂Y(t)/∂W (U, U, U) for t = 1 … n (forward mode).

    Returns (Y (n+1, U), J (n+1, U, U, U)) with index 0 the start (0, 0)."""
    U = c.size
    Y = np.zeros((n + 1, U))
    J = np.zeros((n + 1, U, U, U))
    eye = np.eye(U)
    for t in range(1, n + 1):
        s = sigmoid(W @ Y[t - 1] + c, exact_tails=False)
        d = s * (1.0 - s)
        # J(t)[i, j, m] = d_i (Σ_k W_ik J(t−1)[k, j, m] + δ_ij Y_m(t−1))
        J[t] = d[:, None, None] * (np.einsum("ik,kjm->ijm", W, J[t - 1]) + eye[:, :, None] * Y[t - 1][None, None, :])
        Y[t] = s
    return Y, J


def _perturbed(W):
    """W + ε E_jm and W − ε E_jm for every (j, m), stacked: (2, U·U, U, U)."""
    U = W.shape[0]
    E = np.zeros((U * U, U, U))
    E[np.arange(U * U), np.repeat(np.arange(U), U), np.tile(np.arange(U), U)] = EPS
    return np.stack([W + E, W - E])


def _fd_iterate(W, c, n):
    """Central differences of Y(n) (eq. 11 from 0) in every W_jm, (U, U, U); all perturbations batched."""
    U = c.size
    Ws = _perturbed(W)
    Y = np.zeros(Ws.shape[:2] + (U,))
    for _ in range(n):
        Y = sigmoid(np.einsum("pqik,pqk->pqi", Ws, Y) + c, exact_tails=False)
    return ((Y[0] - Y[1]) / (2 * EPS)).reshape(U, U, U).transpose(2, 0, 1)


def _fd_equilibrium(W, c, y):
    """Central differences of the equilibrium in every W_jm, (U, U, U): Newton (analytic Jacobian I − D W,
    batched over the perturbed networks) from Y*, to a residual of 1e-14; NaN where it is not reached."""
    U = c.size
    Ws = _perturbed(W)
    Y = np.broadcast_to(y, Ws.shape[:2] + (U,)).copy()
    eye = np.eye(U)
    for _ in range(20):
        s = sigmoid(np.einsum("pqik,pqk->pqi", Ws, Y) + c, exact_tails=False)
        G = Y - s
        if np.abs(G).max() <= 1e-14:
            break
        J = eye - (s * (1 - s))[..., None] * Ws
        Y = Y - np.linalg.solve(J, G[..., None])[..., 0]
    s = sigmoid(np.einsum("pqik,pqk->pqi", Ws, Y) + c, exact_tails=False)
    if np.abs(Y - s).max() > 1e-13:
        return np.full((U, U, U), np.nan)
    return ((Y[0] - Y[1]) / (2 * EPS)).reshape(U, U, U).transpose(2, 0, 1)


def _networks(control):
    import dynlab as dl

    nets = []
    for s in range(NETWORKS):
        m = dl.make_model("implicit", hidden=HIDDEN, inputs=INPUTS, seed=s, weight_scale=SCALE)
        if control:
            m = m.replace(W=m.W - SELF_INHIBITION * np.eye(HIDDEN), T=m.T + SHIFT)
        x = np.random.default_rng(100 + s).standard_normal(INPUTS)
        nets.append((m, x))
    return nets


def _one(m, x):
    import dynlab as dl
    from dynlab.analysis.implicit import solve

    c = m.Q @ x + m.T
    Z, res, _, conv, _ = solve(m, x[None], tol=1e-14)
    y = Z[0]
    Jstar = dl.implicit_jacobian(m, x, Z)["W"]
    s = sigmoid(m.W @ y + c, exact_tails=False)
    rho = float(np.max(np.abs(np.linalg.eigvals((s * (1 - s))[:, None] * m.W))))
    Y, J = iterate(m.W, c, N_MAX)
    scale = np.abs(Jstar).max()
    err = np.abs(J[1:] - Jstar).reshape(N_MAX, -1).max(axis=1) / scale
    state = np.abs(Y[1:] - y).max(axis=1)
    fd_iter = max(float(np.abs(_fd_iterate(m.W, c, n) - J[n]).max() / np.abs(J[n]).max()) for n in FD_AT)
    fd_star = _fd_equilibrium(m.W, c, y)
    fd_imp = float(np.abs(fd_star - Jstar).max() / scale)
    return err, state, rho, fd_iter, fd_imp, float(res[0]), bool(conv[0])


def compute(scale):
    Scale.of(scale)         # checked; the same sizes at every scale (seconds)
    import xarray as xr

    from dynlab._dataset import base_attrs
    from dynlab.backends import resolve_backend

    out = {}
    for tag, control in (("", False), ("_control", True)):
        rows = [_one(m, x) for m, x in _networks(control)]
        err, state, rho, fd_it, fd_imp, res, conv = (np.array(v) for v in zip(*rows))
        out.update({
            f"deriv_error{tag}": (("network", "n"), err, {"long_name": "max|∂Y(n)/∂W − ∂Y*/∂W| / max|∂Y*/∂W|", "units": "1"}),
            f"state_error{tag}": (("network", "n"), state, {"long_name": "max|Y(n) − Y*|", "units": "1"}),
            f"rho{tag}": ("network", rho, {"long_name": "spectral radius of D W at Y* (contraction factor)", "units": "1"}),
            f"fd_error_iterative{tag}": ("network", fd_it, {"long_name": f"unrolled derivative vs central difference at n = {FD_AT}, relative"}),
            f"fd_error_implicit{tag}": ("network", fd_imp, {"long_name": "implicit derivative vs central difference of Y*, relative"}),
            f"equilibrium_residual{tag}": ("network", res, {"long_name": "‖Y* − f(W Y* + Q x + T)‖∞"}),
        })
    return xr.Dataset(
        out, coords={"network": np.arange(NETWORKS), "n": np.arange(1, N_MAX + 1)},
        attrs={"model": "implicit", "activation": "sigmoid", "hidden": HIDDEN, "inputs": INPUTS,
               "weight_scale": SCALE, "eps": EPS, "tol_fd": TOL_FD, "tol_final": TOL_FINAL, "tol_rate": TOL_RATE,
               "window_low": WINDOW[0], "window_high": WINDOW[1],
               "setting": setting_attr(data="random inputs", D=HIDDEN, steps="—"),
               "scaling": (f"paper: derivation only (no numbers); here {NETWORKS} one-layer sigmoid nets, {HIDDEN} units, "
                           f"{INPUTS} inputs, W ~ N(0, {SCALE:g}²/{HIDDEN}), n = 1…{N_MAX} iterations from Y(0) = 0; "
                           f"control: W − {SELF_INHIBITION:g} I, T + {SHIFT:g}"),
               **base_attrs(resolve_backend(None), "dynlab figures implicit-a2-iterative")},
    )


def _rate(e, n):
    """exp of the least-squares slope of log(e(n)/n) over the n with e(n) inside WINDOW (NaN if < 5 points)."""
    sel = (e > WINDOW[0]) & (e < WINDOW[1])
    if sel.sum() < 5:
        return float("nan")
    return float(np.exp(np.polyfit(n[sel], np.log(e[sel] / n[sel]), 1)[0]))


def _judge(ds, tag):
    n = ds.n.values
    err = ds[f"deriv_error{tag}"].values
    rho = ds[f"rho{tag}"].values
    rates = np.array([_rate(e, n) for e in err])
    rel = np.abs(rates / rho - 1.0)
    final = err[:, -1]
    fd_ok = bool(np.all(ds[f"fd_error_iterative{tag}"].values <= TOL_FD) and np.all(ds[f"fd_error_implicit{tag}"].values <= TOL_FD))
    ok = bool(np.all(rho < 1) and np.all(final <= TOL_FINAL) and np.all(np.isfinite(rel)) and np.all(rel <= TOL_RATE))
    return ok, fd_ok, {"final_rel_error": [float(v) for v in final], "rho": [float(v) for v in rho],
                       "measured_rate": [float(v) for v in rates],
                       "rate_rel_diff": [float(v) for v in rel],
                       "fd_error_iterative_max": float(ds[f"fd_error_iterative{tag}"].max()),
                       "fd_error_implicit_max": float(ds[f"fd_error_implicit{tag}"].max())}


def draw(ds):
    from dynlab.plot.style import COLORS, CYCLE, new_figure

    fig, (a, b, c) = new_figure(3, height=3.0)
    n = ds.n.values
    for k in ds.network.values:
        col = CYCLE[int(k) % len(CYCLE)]
        e = ds.deriv_error.sel(network=k).values
        a.semilogy(n, np.maximum(e, 1e-17), color=col, lw=1.0, label="‖∂Y(n)/∂W − ∂Y*/∂W‖" if k == 0 else None)
        a.semilogy(n, np.maximum(ds.state_error.sel(network=k).values, 1e-17), color=col, lw=0.7, ls=":",
                   label="‖Y(n) − Y*‖" if k == 0 else None)
        rho = float(ds.rho.sel(network=k))
        ref = n * rho ** n
        i0 = 20
        a.semilogy(n, ref * e[i0] / ref[i0], color=col, lw=0.6, ls="--", alpha=0.6,
                   label="∝ n ρⁿ (closed-form ρ)" if k == 0 else None)
        c.semilogy(n, np.maximum(ds.deriv_error_control.sel(network=k).values, 1e-17), color=col, lw=1.0)
    a.axhline(float(ds.attrs["tol_final"]), color="0.4", lw=0.6, ls="-.")
    a.set_ylim(1e-17, 10)
    a.set_xlabel("iterations n")
    a.set_ylabel("relative error (one colour per network)")
    a.set_title("(a) contracting nets: error vs n", fontsize=8)
    a.legend(frameon=False, fontsize=7)
    ok, _, m = _judge(ds, "")
    okc, _, mc = _judge(ds, "_control")
    b.scatter(m["rho"], m["measured_rate"], color=COLORS["blue"], s=14, zorder=3, label="contracting nets")
    rc = np.array(mc["measured_rate"], dtype=float)
    b.scatter(mc["rho"], np.where(np.isfinite(rc), rc, np.nan), color=COLORS["vermillion"], s=14, zorder=3,
              label="control (no rate: NaN)" if not np.all(np.isfinite(rc)) else "control")
    lim = [0, max(1.05, max(m["rho"]) * 1.1)]
    b.plot(lim, lim, color="0.5", lw=0.6)
    b.fill_between(lim, np.array(lim) * (1 - TOL_RATE), np.array(lim) * (1 + TOL_RATE), color="0.85", lw=0)
    b.set_xlim(lim)
    b.set_ylim(lim)
    b.set_xlabel("contraction factor ρ = spectral radius of D W at Y*")
    b.set_ylabel("measured rate (slope of log(e(n)/n))")
    b.set_title(f"(b) rate vs ρ (band: ±{TOL_RATE:.0%}); control ρ = "
                + ", ".join(f"{v:.2g}" for v in mc["rho"]), fontsize=7)
    b.legend(frameon=False, fontsize=7)
    c.set_xlabel("iterations n")
    c.set_ylabel("relative derivative error")
    c.set_title(f"(c) control: W − {SELF_INHIBITION:g} I, T + {SHIFT:g} (no contraction)", fontsize=8)
    return fig


def check(ds):
    ok, fd_ok, m = _judge(ds, "")
    okc, fd_okc, mc = _judge(ds, "_control")
    passed = ok and fd_ok
    nets = len(m["rho"])
    out = {"passed": bool(passed),
           **record_fields(effect=effect("largest relative error after the last iteration", max(m["final_rel_error"]),
                                         0.0, n=nets),
                           gate_items=[{"name": "both derivatives agree with central differences (≤ 1e-6)",
                                        "met": bool(fd_ok), "value": max(m["fd_error_iterative_max"],
                                                                        m["fd_error_implicit_max"])}],
                           seeds=nets,
                           parts=[fact("J(n) → J* at the contraction rate on every network", bool(ok),
                                       max(m["final_rel_error"]), n=nets)]),
           "max_final_rel_error": max(m["final_rel_error"]), "max_rate_rel_diff": max(m["rate_rel_diff"]),
           "max_rho": max(m["rho"]), "fd_error_iterative_max": m["fd_error_iterative_max"],
           "fd_error_implicit_max": m["fd_error_implicit_max"], "iterations": int(ds.n.values[-1]),
           "tol_final": TOL_FINAL, "tol_rate": TOL_RATE, "tol_fd": TOL_FD,
           "rho": m["rho"], "measured_rate": m["measured_rate"], "final_rel_error": m["final_rel_error"],
           "control": {"setting": f"the same networks with W − {SELF_INHIBITION:g}·I and T + {SHIFT:g} "
                                  "(D W has an eigenvalue below −1: the iteration oscillates)",
                       "measured": {"min_final_rel_error": min(mc["final_rel_error"]), "min_rho": min(mc["rho"]),
                                    "rho": mc["rho"], "final_rel_error": mc["final_rel_error"],
                                    "measured_rate": mc["measured_rate"],
                                    "fd_error_iterative_max": mc["fd_error_iterative_max"],
                                    "fd_error_implicit_max": mc["fd_error_implicit_max"]},
                       "passed": bool(okc and fd_okc)}}
    if not passed:
        out["finding"] = (("" if fd_ok else f"a derivative disagrees with its central difference (unrolled "
                           f"{m['fd_error_iterative_max']:.1e}, implicit {m['fd_error_implicit_max']:.1e} > {TOL_FD:g}); ")
                          + f"after {int(ds.n.values[-1])} iterations the relative error is "
                          + ", ".join(f"{v:.1e}" for v in m["final_rel_error"])
                          + f" (tolerance {TOL_FINAL:g}); ρ = " + ", ".join(f"{v:.3f}" for v in m["rho"])
                          + "; measured rates " + ", ".join(f"{v:.3f}" for v in m["measured_rate"]))
    return out


RECIPE = Recipe("implicit-a2-iterative", "implicit App. A.2",
                "the exact derivative through n fixed-point iterations converges to the implicit derivative "
                "(to 1e-8 relative) at the contraction rate ρ (spectral radius of D W, within 5 %) when ρ < 1",
                compute, draw, check,
                quote="“We show additionally in appendix A.2, that iterative recurrent networks which are updated an "
                      "infinite number of times lead, under certain conditions, to the same derivative.” (§3, App. A.2)",
                gate="both derivatives are right before they are compared: the unrolled J(n) and the implicit J* each "
                     "agree with central differences to 1e-6 relative",
                paper=setting(),
                title="{scaling}", title_size=7, one_blas_thread=True)

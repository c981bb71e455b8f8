"""Equilibria, stability spectra and convergence pictures (iRNN paper Figs. 6, 7; bifurcation
diagrams).  As everywhere: ``*_dataset(spec)`` computes the Dataset through the public API,
``plot_*(ds)`` draws from that Dataset alone, ``*_summary(ds)`` is the printed text.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .style import COLORS, new_figure, styled

STAB_COLORS = {1: COLORS["blue"], 0: COLORS["orange"], -1: COLORS["vermillion"]}
STAB_NAMES = {1: "stable", 0: "marginal", -1: "unstable"}


def _model_and_input(run):
    from ..spec import build_input, build_model

    if run.batch is not None:
        raise ParameterError("batch", "this command analyses one sequence; leave batch unset")
    model = build_model(run)
    return model, build_input(run, model.inputs)


def _previous_states(model, x, backend):
    from ..simulation import simulate

    h = simulate(model, x, backend=backend)["h"].values
    return np.vstack([np.zeros((1, model.hidden)), h[:-1]])


# ------------------------------------------------------------------------- equilibria
def equilibria_dataset(spec):
    """The Dataset of ``dynlab equilibria`` for an ``EquilibriaSpec``.

    Default: ``dynlab.equilibrium`` at every input x_m of the sequence with h_prev = h_{m-1}
    of the simulated trajectory (for the iRNN the step equilibrium; for the others the fixed
    point at the constant input x_m, Newton started from h_{m-1}); attr ``mode`` "sequence".
    ``n_starts``: ``dynlab.fixed_points`` at x_1 (mode "fixed_points").  ``continue_over``:
    ``dynlab.continuation`` from x_1 over the named input/parameter (mode "continuation").
    """
    from ..analysis.continuation import continuation
    from ..analysis.equilibria import equilibrium, fixed_points

    run = spec.run
    model, x = _model_and_input(run)
    if model.name == "implicit":
        return _implicit_equilibria(spec, model, x)
    if spec.continue_over is not None:
        if spec.param_range is None:
            raise ParameterError("param_range", "continuation needs a range LO,HI")
        lo, hi = spec.param_range
        ds = continuation(model, spec.continue_over, lo, hi, x=x[0], tol=spec.tol, command=run.command)
        mode = "continuation"
    elif spec.n_starts is not None:
        ds = fixed_points(model, x[0], n_starts=spec.n_starts, seed=run.seed, tol=spec.tol, command=run.command)
        mode = "fixed_points"
    else:
        hp = _previous_states(model, x, run.backend)
        ds = equilibrium(model, x, hp, method=spec.method, tol=spec.tol, command=run.command)
        ds = ds.rename({"batch": "time"})
        ds = ds.assign_coords(time=("time", np.arange(1, x.shape[0] + 1), {"long_name": "time step m", "units": "step"}))
        mode = "sequence"
    ds.attrs.update({"mode": mode, "input": run.input, "input_seed": run.seed, "steps": int(x.shape[0])})
    return ds


#: ``dynlab equilibria --method`` → ``implicit_equilibrium`` method ("euler": the plain
#: fixed-point iteration Y ← f(WY + QX + T), the implicit net's analogue of the Euler recursion).
IMPLICIT_METHODS = {"newton": "newton", "euler": "fixed-point", "rk4": "rk4", "scipy": "scipy"}


def _implicit_equilibria(spec, model, x):
    """Implicit nets: ``dynlab.implicit_equilibrium`` at every input x_m of the sequence (the rows
    of x are N independent inputs; mode "implicit")."""
    from ..analysis.implicit import implicit_equilibrium

    for name in ("n_starts", "continue_over"):
        if getattr(spec, name) is not None:
            raise ParameterError(name, "is not available for the implicit networks")
    ds = implicit_equilibrium(model, x, method=IMPLICIT_METHODS[spec.method], tol=spec.tol,
                              command=spec.run.command)
    ds = ds.rename({"batch": "time"})
    ds = ds.assign_coords(time=("time", np.arange(1, x.shape[0] + 1), {"long_name": "input m", "units": "1"}))
    ds.attrs.update({"mode": "implicit", "method": spec.method, "tol": spec.tol, "input": spec.run.input,
                     "input_seed": spec.run.seed, "steps": int(x.shape[0])})
    return ds


def _bifurcation(ds, ax, unit=0):
    lam = ds["param"].values
    y = ds["h_eq"].values[:, unit]
    stab = ds["stability"].values
    # draw the branch piecewise, each piece in its stability colour
    start = 0
    seen = set()
    for i in range(1, len(lam) + 1):
        if i == len(lam) or stab[i] != stab[start]:
            j = min(i + 1, len(lam))
            code = int(stab[start])
            ax.plot(lam[start:j], y[start:j], color=STAB_COLORS[code], lw=1.6,
                    ls="-" if code == 1 else "--", label=None if code in seen else STAB_NAMES[code])
            seen.add(code)
            start = i
    if ds.sizes.get("fold", 0):
        ax.plot(ds["fold_param"].values, ds["fold_h"].values[:, unit], "X", color=COLORS["black"], ms=7,
                label="fold")
    ax.set_xlim(ds.attrs["lo"], ds.attrs["hi"])
    ax.set_xlabel(f"{ds.attrs['over']}")
    ax.set_ylabel(f"equilibrium, unit {unit + 1}")
    ax.set_title(f"continuation over {ds.attrs['over']} ({ds.sizes.get('fold', 0)} folds)")
    ax.legend(frameon=False)


@styled
def plot_equilibria(ds):
    """Draw a ``dynlab equilibria`` Dataset (the picture depends on its ``mode``)."""
    mode = ds.attrs.get("mode", "sequence")
    if mode == "implicit":
        fig, (a0, a1) = new_figure(2, height=3.0)
        m = ds["time"].values
        a0.semilogy(m, np.maximum(ds["residual"].values, 1e-18), ".", color=COLORS["blue"], ms=3)
        a0.axhline(float(ds.attrs["tol"]), color=COLORS["black"], ls=":", lw=0.8, label="tol")
        a0.set_xlabel("input m")
        a0.set_ylabel("residual ‖Z − f(AZ + c)‖∞")
        a0.legend(frameon=False)
        Y = ds["Y"].values
        for j in range(min(Y.shape[1], 6)):
            a1.plot(m, Y[:, j], lw=0.8, label=f"Y[{j}]")
        a1.set_xlabel("input m")
        a1.set_ylabel("equilibrium output Y")
        a1.legend(frameon=False, ncols=2)
        return fig
    if mode == "continuation":
        D = ds.sizes["unit"]
        fig, axes = new_figure(min(D, 2), height=3.0)
        for u, ax in enumerate(axes):
            _bifurcation(ds, ax, u)
        return fig
    if mode == "fixed_points":
        fig, axes = new_figure(2, height=3.0)
        h = ds["h_eq"].values
        stab = ds["stability"].values
        ax = axes[0]
        for code in (1, 0, -1):
            sel = stab == code
            if sel.any():
                yv = h[sel, 1] if h.shape[1] > 1 else np.zeros(sel.sum())
                ax.scatter(h[sel, 0], yv, s=30, color=STAB_COLORS[code], label=STAB_NAMES[code],
                           marker="o" if code == 1 else "^", edgecolors="k", linewidths=0.4)
        slow = ds["kind"].values == 0
        if slow.any():
            ax.scatter(h[slow, 0], h[slow, 1] if h.shape[1] > 1 else np.zeros(slow.sum()), s=60,
                       facecolors="none", edgecolors=COLORS["purple"], label="slow point")
        ax.set_xlabel("unit 1")
        ax.set_ylabel("unit 2" if h.shape[1] > 1 else "")
        ax.set_title(f"{ds.attrs['n_roots']} equilibria, {ds.attrs['n_slow']} slow points")
        ax.legend(frameon=False)
        _complex_plane(ds, axes[1], "eig", color_by=stab)
        axes[1].set_title("eigenvalues at each equilibrium")
        return fig
    fig, axes = new_figure(2, height=3.0)
    t = ds["time"].values
    ax = axes[0]
    ax.plot(t, ds["max_real"].values, color=COLORS["blue"])
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xlabel("time step m")
    ax.set_ylabel("max Re λ")
    ax.set_title("largest real part at the equilibrium")
    ax = axes[1]
    r = np.maximum(ds["residual"].values, 1e-18)
    ax.semilogy(t, r, ".", ms=3, color=COLORS["green"])
    ax.axhline(ds.attrs["tol"], color=COLORS["vermillion"], lw=0.8, ls="--", label=f"tol {ds.attrs['tol']:g}")
    bad = ds["converged"].values == 0
    if bad.any():
        ax.semilogy(t[bad], r[bad], "x", color=COLORS["vermillion"], label="not converged")
    ax.set_xlabel("time step m")
    ax.set_ylabel("residual ‖F‖∞")
    ax.set_title(f"{ds.attrs['method']}: residual and convergence")
    ax.legend(frameon=False)
    return fig


def equilibria_summary(ds) -> str:
    mode = ds.attrs.get("mode", "sequence")
    name = ds.attrs.get("model")
    if mode == "continuation":
        lines = [f"continuation of the {name} equilibria over {ds.attrs['over']} ∈ [{ds.attrs['lo']:g}, "
                 f"{ds.attrs['hi']:g}]: {ds.sizes['arc']} branch points, max residual "
                 f"{float(ds['residual'].max()):.3g}; stopped: {ds.attrs['stop_reason']}"]
        for i in range(ds.sizes.get("fold", 0)):
            ref = "refined" if int(ds["fold_refined"][i]) else "interpolated"
            lines.append(f"fold at {ds.attrs['over']} = {float(ds['fold_param'][i]):.10g}, "
                         f"h = {np.array2string(ds['fold_h'].values[i], precision=6)} ({ref})")
        n_unst = int((ds["stability"].values == -1).sum())
        lines.append(f"{n_unst} of {ds.sizes['arc']} branch points unstable")
        return "\n".join(lines)
    if mode == "fixed_points":
        lines = [f"multi-start search ({ds.attrs['n_starts']} starts) for equilibria of {name}: "
                 f"{ds.attrs['n_roots']} roots, {ds.attrs['n_slow']} slow points"]
        for i in range(ds.sizes["point"]):
            kind = "root" if int(ds["kind"][i]) == 1 else "slow point"
            cert = "certified" if int(ds["certified"][i]) else "not certified"
            lines.append(f"  {kind}: h = {np.array2string(ds['h_eq'].values[i], precision=6)}, residual "
                         f"{float(ds['residual'][i]):.2g}, {STAB_NAMES[int(ds['stability'][i])]}, "
                         f"max Re λ {float(ds['max_real'][i]):.4g}, {cert}")
        return "\n".join(lines)
    n, ok = ds.sizes["time"], int(ds["converged"].sum())
    if mode == "implicit":
        return (f"equilibria of the implicit net at {n} inputs ({ds.attrs['method']}, tol {ds.attrs['tol']:g}): "
                f"{ok}/{n} converged, max residual {float(ds['residual'].max()):.3g}, iterations ≤ "
                f"{int(ds['iterations'].max())}")
    stab = ds["stability"].values
    lines = [f"equilibria of {name} at {n} inputs ({ds.attrs['method']}, tol {ds.attrs['tol']:g}): {ok}/{n} converged, "
             f"max residual {float(ds['residual'].max()):.3g}, iterations ≤ {int(ds['iterations'].max())}",
             f"stability: {int((stab == 1).sum())} stable, {int((stab == 0).sum())} marginal, "
             f"{int((stab == -1).sum())} unstable; max Re λ = {float(ds['max_real'].max()):.4g}"]
    return "\n".join(lines)


def not_converged(ds) -> str | None:
    """One line saying where a solve failed (None when everything converged)."""
    if ds.attrs.get("mode") not in ("sequence", "implicit"):
        return None
    bad = np.flatnonzero(ds["converged"].values == 0)
    if not bad.size:
        return None
    m = int(ds["time"].values[bad[0]])
    return (f"the equilibrium solve did not converge at {bad.size} of {ds.sizes['time']} inputs (first at step "
            f"m={m}, residual {float(ds['residual'].values[bad[0]]):.3g} > tol {ds.attrs['tol']:g})")


# ------------------------------------------------------------------------- spectrum
def spectrum_dataset(spec):
    """``dynlab.spectrum`` of the spec's model along its input sequence(s) (batch allowed)."""
    from ..analysis.spectra import spectrum
    from ..spec import build_input, build_model

    run = spec.run
    model = build_model(run)
    x = build_input(run, model.inputs)
    ds = spectrum(model, x, at=spec.at, backend=run.backend, command=run.command)
    ds.attrs.update({"input": run.input, "input_seed": run.seed})
    return ds


def _complex_plane(ds, ax, name, color_by=None, unit_circle=False):
    from ..analysis.equilibria import eigenvalues_from

    ev = eigenvalues_from(ds, name)
    if color_by is None:
        ax.scatter(ev.real.ravel(), ev.imag.ravel(), s=3, color=COLORS["blue"], alpha=0.4, edgecolors="none")
    else:
        for code in (1, 0, -1):
            sel = color_by == code
            if sel.any():
                ax.scatter(ev[sel].real.ravel(), ev[sel].imag.ravel(), s=14, color=STAB_COLORS[code],
                           edgecolors="none", label=STAB_NAMES[code])
    if unit_circle:
        th = np.linspace(0, 2 * np.pi, 400)
        ax.plot(np.cos(th), np.sin(th), color=COLORS["vermillion"], lw=0.8, label="unit circle")
        ax.set_aspect("equal", adjustable="datalim")
        ax.legend(frameon=False, loc="upper left")
    else:
        ax.axvline(0, color="0.4", lw=0.8, ls=":")
    ax.set_xlabel("Re")
    ax.set_ylabel("Im")


@styled
def plot_spectrum(ds):
    """Histogram of the real parts of the eigenvalues of ∇φU − αI over every point, the
    complex plane (iRNN Fig. 7 style) and, when stored, the step Jacobian's eigenvalues against
    the unit circle."""
    from ..analysis.equilibria import eigenvalues_from

    step = "step_eig_real" in ds
    fig, axes = new_figure(3 if step else 2, height=2.9)
    ev = eigenvalues_from(ds, "eig")
    ax = axes[0]
    ax.hist(ev.real.ravel(), bins=60, color=COLORS["blue"], alpha=0.85, log=True)
    ax.axvline(0, color=COLORS["vermillion"], lw=0.8)
    ax.set_xlabel("Re λ")
    ax.set_ylabel("count (log scale)")
    ax.set_title(f"{ds['eig_real'].attrs['long_name'].replace('real part of the ', '')}\n"
                 f"{ds.sizes['point']} points ({ds.attrs.get('at', '')})")
    _complex_plane(ds, axes[1], "eig")
    axes[1].set_title("complex plane")
    if step:
        _complex_plane(ds, axes[2], "step_eig", unit_circle=True)
        axes[2].set_title("step Jacobian ∂h_m/∂h_(m-1)")
    return fig


def spectrum_summary(ds) -> str:
    from ..analysis.equilibria import eigenvalues_from

    ev = eigenvalues_from(ds, "eig")
    n = ds.sizes["point"]
    lines = [f"spectra of {ds.attrs.get('model')} at {n} points ({ds.attrs.get('at')}): max Re λ = {ev.real.max():.4g}, "
             f"{100 * (ev.real < 0).mean():.1f}% of eigenvalues with negative real part, "
             f"{int(ds.attrs['n_stable'])}/{n} points stable"]
    if "step_radius" in ds:
        r = ds["step_radius"].values
        lines.append(f"step Jacobian spectral radius: median {np.median(r):.4g}, max {r.max():.4g}")
    if "converged" in ds:
        lines.append(f"equilibria: {int(ds['converged'].sum())}/{n} converged, max residual "
                     f"{float(ds['residual'].max()):.3g}")
    return "\n".join(lines)


# ------------------------------------------------------------------------- convergence
def converge_dataset(spec):
    """``dynlab.convergence`` at every step of the spec's sequence: x_m with h_prev = h_{m-1}
    of the simulated trajectory (one problem per step, along ``batch``)."""
    from ..analysis.convergence import convergence

    run = spec.run
    model, x = _model_and_input(run)
    if model.name != "irnn":
        raise ParameterError("model", f"converge studies the iRNN's inner recursion; got {model.name!r}")
    hp = _previous_states(model, x, run.backend)
    ds = convergence(model, x, hp, K_max=spec.K_max, command=run.command)
    ds.attrs.update({"input": run.input, "input_seed": run.seed})
    return ds


@styled
def plot_convergence(ds, ax=None):
    """log e_k = ‖g_k − h_eq‖ against k (one thin line per problem), the bound ρ^k e_0 and the
    fitted linear rate (iRNN Fig. 6 style)."""
    if ax is None:
        fig, (ax,) = new_figure(1, height=3.0)
    else:
        fig = ax.figure
    err = np.atleast_2d(ds["error"].values)
    bound = np.atleast_2d(ds["bound"].values)
    k = ds["k"].values
    floor = ds.attrs.get("floor", 1e-12)
    for i, e in enumerate(err):
        ax.semilogy(k, np.maximum(e, 1e-17), color=COLORS["blue"], lw=0.6, alpha=0.6,
                    label=r"$\|g_k - h_{eq}\|$" if i == 0 else None)
    # the bound of the worst case and the fitted rate of the median one
    i = int(np.argmax(err[:, 0]))
    rho = float(ds["bound_rate"])
    ax.semilogy(k, np.maximum(bound[i], 1e-17), color=COLORS["vermillion"], ls="--", lw=1.2,
                label=rf"bound $\rho^k e_0$, $\rho$={rho:.3g}")
    rates = np.atleast_1d(ds["rate"].values)
    j = int(np.nanargmin(np.abs(rates - np.nanmedian(rates)))) if np.isfinite(rates).any() else None
    if j is not None:
        e = err[j]
        k1 = 1
        fit = e[k1] * rates[j] ** (k - k1)
        use = fit > floor
        ax.semilogy(k[use], fit[use], color=COLORS["black"], ls=":", lw=1.2,
                    label=f"fitted rate {rates[j]:.3g} (local {float(np.atleast_1d(ds['local_rate'].values)[j]):.3g})")
    ax.axhline(floor, color="0.6", lw=0.5)
    ax.set_ylim(max(1e-17, floor / 100), None)
    ax.set_xlabel("inner iteration k")
    ax.set_ylabel(r"$\|g_k - h_{eq}\|_2$")
    ax.set_title(f"iRNN inner recursion (η={float(np.ravel(ds['eta'].values)[0]):g}, α={float(ds['alpha']):g}), "
                 f"{err.shape[0]} inputs")
    ax.legend(frameon=False, fontsize=6.5, loc="lower left")
    return fig


def converge_summary(ds) -> str:
    rates = np.atleast_1d(ds["rate"].values)
    local = np.atleast_1d(ds["local_rate"].values)
    holds = np.atleast_1d(ds["bound_holds"].values)
    printed = np.atleast_2d(ds["printed_bound_holds"].values)
    n = rates.size
    return "\n".join([
        f"inner recursion of the iRNN over k = 0..{ds.attrs['K_max']} at {n} inputs, against scipy's root "
        f"(max residual {float(ds['reference_residual'].max()):.2g})",
        f"fitted rate: median {np.nanmedian(rates):.4g}, max {np.nanmax(rates):.4g}; local rate "
        f"(spectral radius of I + η(∇φU − αI)): median {np.median(local):.4g}, max {local.max():.4g}",
        f"bound ρ = |1 − αη| + η‖U‖₂ = {float(ds['bound_rate']):.4g}: e_k ≤ ρ^k e_0 holds for every k at "
        f"{int(holds.sum())}/{n} inputs; the printed form e_K ≤ ρ^K e_1 fails at K = 1 for "
        f"{int((printed[:, 1] == 0).sum())}/{n}",
    ])

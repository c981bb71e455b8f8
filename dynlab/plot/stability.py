"""Equilibria, stability spectra and convergence pictures (iRNN paper Figs. 6, 7; bifurcation
diagrams), drawn from the results of ``dynlab.equilibrium``, ``irnn_equilibrium``,
``fixed_points``, ``continuation``, ``implicit_equilibrium``, ``spectrum`` and ``convergence``
(and of the commands built on them) alone.
"""
from __future__ import annotations

import numpy as np

from .._dataset import eigenvalues_from
from ..errors import ParameterError
from .labels import entries, entry_title
from .style import COLORS, panel_axes, styled

STAB_COLORS = {1: COLORS["blue"], 0: COLORS["orange"], -1: COLORS["vermillion"]}
STAB_NAMES = {1: "stable", 0: "marginal", -1: "unstable"}


def equilibria_kind(ds) -> str:
    """Which equilibrium result ``ds`` is: its ``result`` attr, else read from its variables
    (files written before results named themselves; their ``mode`` attr when present)."""
    result = ds.attrs.get("result")
    if result in ("equilibrium", "irnn_equilibrium", "fixed_points", "continuation", "implicit_equilibrium"):
        return result
    mode = ds.attrs.get("mode")
    legacy = {"sequence": "equilibrium", "fixed_points": "fixed_points", "continuation": "continuation",
              "implicit": "implicit_equilibrium"}
    if mode in legacy:
        return legacy[mode]
    if "param" in ds and "arc" in ds.dims:
        return "continuation"
    if "kind" in ds and "point" in ds.dims:
        return "fixed_points"
    if "Y" in ds:
        return "implicit_equilibrium"
    if "h_eq" in ds:
        return "equilibrium" if "eig_real" in ds else "irnn_equilibrium"
    raise ParameterError("ds", "this result holds no equilibria (no h_eq)")


def _points_axis(ds, var: str):
    """(positions, label) of the points a per-point variable runs over (time steps or inputs)."""
    da = ds[var]
    if "time" in da.dims:
        return ds["time"].values, ds["time"].attrs.get("long_name", "time step m")
    if "batch" in da.dims:
        return ds["batch"].values, "input (batch index)"
    return np.zeros(1), "input"


def _implicit(ds, axes):
    m, label = _points_axis(ds, "residual")
    a0 = axes[0]
    a0.semilogy(m, np.maximum(np.atleast_1d(ds["residual"].values), 1e-18), ".", color=COLORS["blue"], ms=3)
    if "tol" in ds.attrs:
        a0.axhline(float(ds.attrs["tol"]), color=COLORS["black"], ls=":", lw=0.8, label="tol")
        a0.legend(frameon=False)
    a0.set_xlabel(label)
    a0.set_ylabel("residual ‖Z − f(AZ + c)‖∞")
    a0.set_title("implicit net: equilibrium residuals")
    if axes[1] is not None:
        Y = np.atleast_2d(ds["Y"].values)
        for j in range(min(Y.shape[1], 6)):
            axes[1].plot(m, Y[:, j], ".-" if Y.shape[0] < 30 else "-", lw=0.8, ms=3, label=f"Y[{j}]")
        axes[1].set_xlabel(label)
        axes[1].set_ylabel("equilibrium output Y")
        axes[1].legend(frameon=False, ncols=2)


def _fixed_points(ds, axes):
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
    n, slow_n = int(ds.attrs["n_roots"]), int(ds.attrs["n_slow"])
    ax.set_title(f"{n} equilibri{'um' if n == 1 else 'a'}, {slow_n} slow point{'' if slow_n == 1 else 's'} of "
                 f"{entry_title(ds, entries(ds)[0])}")
    if stab.size or slow.any():
        ax.legend(frameon=False)
    if axes[1] is not None:
        _complex_plane(ds, axes[1], "eig", color_by=stab)
        axes[1].set_title("eigenvalues at each equilibrium")


def _single(ds, axes, kind):
    """One equilibrium: its eigenvalues in the complex plane (when stored) and its state."""
    ax = axes[0]
    title = entry_title(ds, entries(ds)[0])
    if "eig_real" in ds:
        code = int(ds["stability"].values) if "stability" in ds else None
        _complex_plane(ds, ax, "eig", color_by=None if code is None else np.atleast_1d(code))
        ax.set_title(f"eigenvalues at the equilibrium, {title}")
        if code is not None:
            ax.legend(frameon=False)
    else:
        ax.set_title(f"step equilibrium, {title}")
    target = axes[1] if "eig_real" in ds else ax
    if target is None:
        return
    h = np.ravel(ds["h_eq"].values)
    target.bar(np.arange(1, h.size + 1), h, color=COLORS["blue"])
    target.axhline(0, color="0.6", lw=0.6)
    target.set_xlabel("unit")
    target.set_ylabel("equilibrium h_eq")
    ok = "converged" if int(ds["converged"].values) else "NOT converged"
    target.set_title(f"residual {float(ds['residual'].values):.2g} ({ok})")
    from matplotlib.ticker import MaxNLocator

    target.xaxis.set_major_locator(MaxNLocator(integer=True))


def _sequence(ds, axes, kind):
    if ds["residual"].ndim == 0:
        return _single(ds, axes, kind)
    t, label = _points_axis(ds, "residual")
    ax = axes[0]
    if kind == "equilibrium":
        ax.plot(t, np.atleast_1d(ds["max_real"].values), ".-" if t.size < 30 else "-", color=COLORS["blue"], ms=3)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_ylabel("max Re λ")
        ax.set_title(f"largest real part at the equilibrium, {entry_title(ds, entries(ds)[0])}")
    else:  # irnn_equilibrium stores no eigenvalues: draw the equilibria themselves
        h = np.atleast_2d(ds["h_eq"].values)
        for j in range(min(h.shape[1], 6)):
            ax.plot(t, h[:, j], ".-" if t.size < 30 else "-", lw=0.8, ms=3, label=f"unit {j + 1}")
        ax.set_ylabel("equilibrium h_eq")
        ax.set_title(f"step equilibria, {entry_title(ds, entries(ds)[0])}")
        ax.legend(frameon=False, ncols=2)
    ax.set_xlabel(label)
    if axes[1] is not None:
        ax = axes[1]
        r = np.maximum(np.atleast_1d(ds["residual"].values), 1e-18)
        ax.semilogy(t, r, ".", ms=3, color=COLORS["green"])
        tol = ds.attrs.get("tol")
        if tol is not None:
            ax.axhline(float(tol), color=COLORS["vermillion"], lw=0.8, ls="--", label=f"tol {float(tol):g}")
        bad = np.atleast_1d(ds["converged"].values) == 0
        if bad.any():
            ax.semilogy(t[bad], r[bad], "x", color=COLORS["vermillion"], label="not converged")
        ax.set_xlabel(label)
        ax.set_ylabel("residual ‖F‖∞")
        ax.set_title(f"{ds.attrs.get('solve_method', ds.attrs.get('method', 'solve'))}: residual and convergence")
        if tol is not None or bad.any():
            ax.legend(frameon=False)
    from matplotlib.ticker import MaxNLocator

    for a in axes:
        if a is not None:
            a.xaxis.set_major_locator(MaxNLocator(integer=True))


@styled
def plot_equilibria(ds, ax=None):
    """Draw an equilibrium result; the picture follows the result:

    * ``equilibrium`` — max Re λ and the residual at every input (time step or batch index);
    * ``irnn_equilibrium`` — the step equilibria and their residuals;
    * ``fixed_points`` — the equilibria coloured by stability, and their eigenvalues;
    * ``continuation`` — the bifurcation diagram (one panel per unit, at most two) with its special
      points (``dynlab.plot.bifurcation.plot_bifurcation``);
    * ``implicit_equilibrium`` — residuals and equilibrium outputs Y.

    ``ax``: an Axes (the first panel only) or a sequence of the picture's panels.
    Returns a matplotlib Figure.
    """
    kind = equilibria_kind(ds)
    if kind == "continuation":
        from .bifurcation import plot_bifurcation

        return plot_bifurcation(ds, ax=ax)
    fig, axes = panel_axes(ax, 2, height=3.0)
    if kind == "implicit_equilibrium":
        _implicit(ds, axes)
    elif kind == "fixed_points":
        _fixed_points(ds, axes)
    else:
        _sequence(ds, axes, kind)
    return fig


def _complex_plane(ds, ax, name, color_by=None, unit_circle=False):
    """Eigenvalues in the complex plane, with the stability boundary: Re λ = 0 for a flow, the
    circle |λ + 1| = 1 for a map's ∂step/∂h − I (``attrs["system"] == "map"``), the unit
    circle for a step Jacobian (``unit_circle``)."""
    ev = eigenvalues_from(ds, name)
    if ev.ndim == 1:
        ev = ev[None]
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
    elif ds.attrs.get("system") in ("map", "step"):
        th = np.linspace(0, 2 * np.pi, 400)
        ax.plot(np.cos(th) - 1.0, np.sin(th), color="0.4", lw=0.8, ls=":", label="|λ + 1| = 1 (map stable inside)")
        ax.set_aspect("equal", adjustable="datalim")
        ax.legend(frameon=False, loc="upper left")
    else:
        ax.axvline(0, color="0.4", lw=0.8, ls=":")
    ax.set_xlabel("Re")
    ax.set_ylabel("Im")


@styled
def plot_spectrum(ds, ax=None):
    """Histogram of the real parts of the eigenvalues of ∇φ·U − αI over every point, the
    complex plane (iRNN Fig. 7 style) and, when stored, the step Jacobian's eigenvalues against
    the unit circle.

    Parameters
    ----------
    ds : any result with ``eig_real``/``eig_imag`` (``dynlab.spectrum``, ``equilibrium``,
        ``fixed_points``, ``continuation``)
    ax : an Axes (the histogram only) or a sequence of the picture's panels, optional

    Returns a matplotlib Figure.
    """
    if "eig_real" not in ds:
        raise ParameterError("ds", "a spectrum picture draws eig_real/eig_imag; this result has none")
    step = "step_eig_real" in ds
    fig, axes = panel_axes(ax, 3 if step else 2, height=2.9)
    ev = eigenvalues_from(ds, "eig")
    n = int(np.prod(ev.shape[:-1])) if ev.ndim > 1 else 1
    a0 = axes[0]
    a0.hist(ev.real.ravel(), bins=60, color=COLORS["blue"], alpha=0.85, log=True)
    a0.axvline(0, color=COLORS["vermillion"], lw=0.8)
    a0.set_xlabel("Re λ")
    a0.set_ylabel("count (log scale)")
    what = ds["eig_real"].attrs.get("long_name", "eigenvalues").replace("real part of the ", "")
    where = ds.attrs.get("at", ds.attrs.get("result", ""))
    a0.set_title(f"{what}\n{n} points ({where})")
    if axes[1] is not None:
        _complex_plane(ds, axes[1], "eig")
        axes[1].set_title("complex plane")
    if step and axes[2] is not None:
        _complex_plane(ds, axes[2], "step_eig", unit_circle=True)
        axes[2].set_title("step Jacobian ∂h_m/∂h_(m-1)")
    return fig


@styled
def plot_convergence(ds, ax=None):
    """log e_k = ‖g_k − h_eq‖ against k (one thin line per problem), the bound ρ^k e_0 and the
    fitted linear rate (iRNN Fig. 6 style), from ``dynlab.convergence``'s result."""
    if "error" not in ds or "k" not in ds.dims:
        raise ParameterError("ds", "a convergence picture draws error over k; this result has none")
    fig, (ax,) = panel_axes(ax, 1, height=3.0)
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
    ax.text(k[-1], floor * 1.5, "error floor", ha="right", va="bottom", fontsize=6, color="0.45")
    ax.set_ylim(max(1e-17, floor / 100), None)
    ax.set_xlabel("inner iteration k")
    ax.set_ylabel(r"$\|g_k - h_{eq}\|_2$")
    ax.set_title(f"iRNN inner recursion (η={float(np.ravel(ds['eta'].values)[0]):g}, α={float(ds['alpha']):g}), "
                 f"{err.shape[0]} inputs")
    ax.legend(frameon=False, fontsize=6.5, loc="lower left")
    return fig

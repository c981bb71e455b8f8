"""Lyapunov spectra: ``dynlab.lyapunov``'s finite-time exponents and their running estimates."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .labels import entry_title, entries
from .style import CYCLE, COLORS, panel_axes, styled


@styled
def plot_lyapunov(ds, ax=None):
    """Two panels: the exponents λ_1 ≥ λ_2 ≥ … against i, and the running estimates
    (1/t) Σ ln|r_ii| over time (they settle as t grows).

    Parameters
    ----------
    ds : the result of ``dynlab.lyapunov`` (``lyapunov`` (exponent), ``lyapunov_running``
        ([batch,] time, exponent))
    ax : an Axes (the spectrum panel only) or a sequence of two, optional

    Returns
    -------
    matplotlib Figure.
    """
    if "lyapunov" not in ds:
        raise ParameterError("ds", "a Lyapunov picture draws lyapunov; this result has none")
    running = "lyapunov_running" in ds
    fig, axes = panel_axes(ax, 2 if running else 1, height=3.0)
    lam = ds["lyapunov"]
    a0 = axes[0]
    idx = ds["exponent"].values
    if "batch" in lam.dims:
        for b in range(lam.sizes["batch"]):
            a0.plot(idx, lam.isel(batch=b).values, "o-", ms=3, lw=0.8, color=CYCLE[b % len(CYCLE)],
                    label=f"sequence {b + 1}" if b < 6 else None)
        a0.legend(frameon=False)
    else:
        a0.plot(idx, lam.values, "o-", ms=4, color=COLORS["blue"])
    a0.axhline(0.0, color="0.6", lw=0.6)
    from matplotlib.ticker import MaxNLocator

    a0.xaxis.set_major_locator(MaxNLocator(integer=True))
    a0.set_xlabel("exponent index i")
    a0.set_ylabel(r"$\lambda_i$ (1/step)")
    title = entry_title(ds, entries(ds)[0])
    a0.set_title(f"finite-time Lyapunov spectrum, {title}")
    if running and axes[1] is not None:
        a1 = axes[1]
        run = ds["lyapunov_running"]
        if "batch" in run.dims:
            run = run.isel(batch=0)
        t = ds["time"].values
        vals = run.transpose("time", "exponent").values
        for i in range(vals.shape[1]):
            a1.plot(t, vals[:, i], lw=0.8, color=CYCLE[i % len(CYCLE)],
                    label=rf"$\lambda_{{{int(idx[i])}}}$" if i < 7 else None)
        a1.axhline(0.0, color="0.6", lw=0.6)
        finite = vals[np.isfinite(vals)]
        if finite.size:  # the first steps swing widely; scale to the last half
            tail = vals[vals.shape[0] // 2:]
            tail = tail[np.isfinite(tail)]
            lo, hi = float(tail.min()), float(tail.max())
            pad = 0.5 * max(hi - lo, 1e-3)
            a1.set_ylim(lo - pad, hi + pad)
        a1.set_xlabel("time step t")
        a1.set_ylabel(r"running estimate of $\lambda_i$")
        a1.set_title("convergence of the estimates" + (", sequence 1" if "batch" in ds["lyapunov_running"].dims
                                                        else ""))
        a1.legend(frameon=False, ncols=2)
    return fig

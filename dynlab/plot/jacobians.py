"""Per-step Jacobians J_t = ∂h_t/∂h_{t-1} (``dynlab.jacobians``): their size over time and one of them."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .labels import entries, entry_title
from .style import COLORS, panel_axes, styled


@styled
def plot_jacobians(ds, ax=None, *, batch: int = 0):
    """Two panels: ‖J_t‖₂ and the spectral radius ρ(J_t) against t (log scale; 1 marked), and
    the last step's J_T as an image (diverging colours centred on 0).

    Parameters
    ----------
    ds : the result of ``dynlab.jacobians`` (``jac`` ([batch,] time, unit, unit_from))
    ax : an Axes (the norm panel only) or a sequence of two, optional
    batch : which sequence of a batched result to draw

    Returns
    -------
    matplotlib Figure.
    """
    if "jac" not in ds:
        raise ParameterError("ds", "a Jacobian picture draws jac; this result has none")
    J = ds["jac"]
    if "batch" in J.dims:
        J = J.isel(batch=batch)
    J = J.transpose("time", "unit", "unit_from").values
    fig, axes = panel_axes(ax, 2, height=3.0)
    t = ds["time"].values
    norm = np.linalg.norm(J, ord=2, axis=(1, 2))
    radius = np.abs(np.linalg.eigvals(J)).max(axis=1)
    a0 = axes[0]
    a0.plot(t, norm, color=COLORS["blue"], lw=0.9, label=r"$\|J_t\|_2$")
    a0.plot(t, radius, color=COLORS["vermillion"], lw=0.9, ls="--", label=r"spectral radius $\rho(J_t)$")
    a0.axhline(1.0, color="0.6", lw=0.6)
    both = np.concatenate([norm, radius])
    both = both[np.isfinite(both) & (both > 0)]
    if both.size and both.max() / both.min() > 10:  # log scale only where the sizes span decades
        a0.set_yscale("log")
    a0.set_xlabel("time step t")
    a0.set_ylabel("size of $J_t = \\partial h_t/\\partial h_{t-1}$")
    title = entry_title(ds, entries(ds)[0])
    a0.set_title(f"step Jacobians, {title}" + (f", sequence {batch + 1}" if "batch" in ds["jac"].dims else ""))
    a0.legend(frameon=False)
    if axes[1] is not None:
        a1 = axes[1]
        last = J[-1]
        lim = float(np.abs(last).max()) or 1.0
        im = a1.imshow(last, cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        from matplotlib.ticker import MaxNLocator

        a1.xaxis.set_major_locator(MaxNLocator(integer=True))
        a1.yaxis.set_major_locator(MaxNLocator(integer=True))
        a1.set_xlabel("unit j (of h_(T-1))")
        a1.set_ylabel("unit i (of h_T)")
        a1.set_title(f"$J_T$ at t = {int(t[-1])}")
        fig.colorbar(im, ax=a1, shrink=0.8)
    return fig

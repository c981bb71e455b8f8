"""States over time: h_t of each unit, for one sequence of a ``dynlab.simulate`` Dataset."""
from __future__ import annotations

import numpy as np

from .style import CYCLE, PRETTY, new_figure, styled

#: Units drawn at most; beyond this the picture is unreadable.
MAX_UNITS = 16


@styled
def plot_states(ds, ax=None, *, batch: int = 0):
    """Draw h_t against t for each hidden unit of one sequence.

    Parameters
    ----------
    ds : xarray.Dataset from ``dynlab.simulate`` (``h`` with dims ([batch,] time, unit))
    ax : matplotlib Axes, optional (a new one-panel figure by default)
    batch : int
        Which sequence to draw when ``h`` is batched (the first by default).

    Returns
    -------
    matplotlib Figure.
    """
    h = ds["h"]
    if "batch" in h.dims:
        h = h.isel(batch=batch)
    if ax is None:
        fig, (ax,) = new_figure(1, height=2.4)
    else:
        fig = ax.figure
    time = ds["t"].values if "t" in ds.coords else ds["time"].values
    D = h.sizes["unit"]
    shown = min(D, MAX_UNITS)
    for i in range(shown):
        ax.plot(time, h.isel(unit=i).values, color=CYCLE[i % len(CYCLE)], lw=0.8,
                label=f"unit {i + 1}" if shown <= len(CYCLE) else None)
    ax.set_xlabel("continuous time t" if "t" in ds.coords else "time step t")
    ax.set_ylabel("hidden state $h_t$")
    title = PRETTY.get(ds.attrs.get("model"), ds.attrs.get("model", ""))
    if ds.attrs.get("model") == "irnn":
        title += f" (K={ds.attrs.get('K')})"
    if "batch" in ds["h"].dims:
        title += f", sequence {batch + 1} of {ds.sizes['batch']}"
    if shown < D:
        title += f", first {shown} of {D} units"
    ax.set_title(title)
    if shown <= len(CYCLE):
        ax.legend(frameon=False, ncols=min(shown, 4), loc="best")
    return fig


def simulate_summary(ds) -> str:
    """One paragraph describing a ``dynlab.simulate`` Dataset: shapes, final state norm, backend."""
    h = ds["h"].values
    final = np.linalg.norm(h[..., -1, :], axis=-1)
    shape = " × ".join(f"{ds.sizes[d]} {d}" for d in ds["h"].dims)
    if np.ndim(final) == 0:
        norm = f"‖h_T‖₂ = {float(final):.6g}"
    else:
        norm = f"‖h_T‖₂ over the batch: min {final.min():.6g}, median {np.median(final):.6g}, max {final.max():.6g}"
    settings = ", ".join(f"{k}={ds.attrs[k]}" for k in ("activation", "K", "g0") if k in ds.attrs)
    return (f"Simulated {ds.attrs.get('model')} ({settings}) with D={ds.sizes['unit']} hidden units and "
            f"d={ds.sizes['unit_in']} input(s): h has shape ({shape}); final state {norm}; "
            f"backend {ds.attrs.get('backend')} (kernel {ds.attrs.get('kernel', '?')}).")

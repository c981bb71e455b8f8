"""States over time: h_t of each unit, for one sequence of a ``dynlab.simulate`` Dataset."""
from __future__ import annotations

from .labels import entries, entry_title
from .style import CYCLE, panel_axes, styled

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
    if "h" not in ds:
        from ..errors import ParameterError
        raise ParameterError("ds", "a states picture draws h; this result has none")
    h = ds["h"]
    if "model" in h.dims:  # a multi-entry result: the first entry
        h = h.isel(model=0)
    if "batch" in h.dims:
        h = h.isel(batch=batch)
    fig, (ax,) = panel_axes(ax, 1, height=2.4)
    time = ds["t"].values if "t" in ds.coords else ds["time"].values
    D = h.sizes["unit"]
    shown = min(D, MAX_UNITS)
    for i in range(shown):
        ax.plot(time, h.isel(unit=i).values, color=CYCLE[i % len(CYCLE)], lw=0.8,
                label=f"unit {i + 1}" if shown <= len(CYCLE) else None)
    ax.set_xlabel("continuous time t" if "t" in ds.coords else "time step t")
    ax.set_ylabel("hidden state $h_t$")
    title = entry_title(ds, entries(ds)[0])
    if "batch" in ds["h"].dims:
        title += f", sequence {batch + 1} of {ds.sizes['batch']}"
    if shown < D:
        title += f", first {shown} of {D} units"
    ax.set_title(title)
    if shown <= len(CYCLE):
        ax.legend(frameon=False, ncols=min(shown, 4), loc="best")
    return fig

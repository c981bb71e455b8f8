"""Sweep results (``dynlab.sweep``): one panel per variable over the swept settings."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .style import COLORS, CYCLE, panel_axes, styled

#: Bookkeeping variables of a sweep that are not results.
BOOKKEEPING = ("done", "computed_at", "diverged_at")
#: Variables drawn at most (the first ones of the result).
MAX_PANELS = 3
#: Heat maps of at most this many cells print each cell's value.
ANNOTATE_MAX_CELLS = 36


def _ticks(ax, axis: str, values) -> np.ndarray:
    """Positions for a swept coordinate: its values when numeric, else 0..n-1 with labels."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.integer):
        from matplotlib.ticker import MaxNLocator

        getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True))
    if np.issubdtype(values.dtype, np.number):
        return values.astype(np.float64)
    pos = np.arange(values.size, dtype=np.float64)
    getattr(ax, f"set_{axis}ticks")(pos)
    getattr(ax, f"set_{axis}ticklabels")([str(v) for v in values])
    return pos


@styled
def plot_sweep(ds, ax=None, *, variables=None):
    """One panel per result variable (the first three unless ``variables`` names them).

    One swept setting: the variable against it (points not done are left out); two: a heat map
    over both, one cell per grid point (values printed in small grids; "—" not done or NaN); more: a heat map over the first two at the first value of the others (said in the
    title).  A variable with extra dimensions (e.g. ``exponent``) is drawn at its first index.

    Parameters
    ----------
    ds : the result of ``dynlab.sweep`` (or its store/NetCDF file read back)
    ax : an Axes (the first panel only) or a sequence of the panels, optional
    variables : names of the variables to draw, optional

    Returns a matplotlib Figure.
    """
    if "done" not in ds:
        raise ParameterError("ds", "a sweep picture draws a sweep result (with its done mask)")
    dims = [d for d in ds["done"].dims]
    if variables is None:
        variables = [v for v in ds.data_vars if v not in BOOKKEEPING][:MAX_PANELS]
    else:
        variables = list(variables)
        for v in variables:
            if v not in ds:
                raise ParameterError("variables", f"{v!r} is not a variable of this sweep")
    if not variables:
        raise ParameterError("ds", "this sweep holds no result variables")
    fig, axes = panel_axes(ax, len(variables), height=3.0)
    done = ds["done"].values.astype(bool)
    fixed = {d: ds[d].values[0] for d in dims[2:]}
    for a, name in zip(axes, variables):
        if a is None:
            continue
        da = ds[name]
        extra = [d for d in da.dims if d not in dims]
        da = da.isel({d: 0 for d in extra}).isel({d: 0 for d in dims[2:]})
        ok = done[(slice(None),) * min(2, len(dims)) + (0,) * max(0, len(dims) - 2)]
        vals = np.where(ok, da.transpose(*dims[:2]).values.astype(np.float64), np.nan)
        label = da.attrs.get("long_name", name)
        if len(dims) == 1:
            x = _ticks(a, "x", ds[dims[0]].values)
            a.plot(x, vals, "o-", ms=3, color=COLORS["blue"])
            a.set_xlabel(dims[0])
            a.set_ylabel(label)
        else:  # one cell per grid point, labelled by its setting (grids are often log-spaced)
            mesh = a.imshow(vals, origin="lower", aspect="auto", cmap="viridis", interpolation="nearest")
            _label_cells(a, "x", ds[dims[1]].values)
            _label_cells(a, "y", ds[dims[0]].values)
            fig.colorbar(mesh, ax=a, shrink=0.85, label=name)
            if vals.size <= ANNOTATE_MAX_CELLS:
                finite = vals[np.isfinite(vals)]
                mid = (finite.min() + finite.max()) / 2 if finite.size else 0.0
                for (i, j), v in np.ndenumerate(vals):
                    a.text(j, i, "—" if not np.isfinite(v) else f"{v:.3g}", ha="center", va="center", fontsize=6,
                           color="white" if np.isfinite(v) and v < mid else "black")
            a.set_xlabel(dims[1])
            a.set_ylabel(dims[0])
        title = name + (f" ({', '.join(f'{d}={v}' for d, v in fixed.items())})" if fixed else "")
        if extra:
            title += f", {', '.join(f'{d} first' for d in extra)}"
        a.set_title(title)
    fig.suptitle(f"sweep of {ds.attrs.get('analysis', '')}: {int(done.sum())}/{done.size} points done",
                 fontsize=8, color=CYCLE[-1])
    return fig


def _label_cells(ax, axis: str, values) -> None:
    """Ticks at the cells 0..n−1 of a heat-map axis, labelled by the swept values (at most 8)."""
    values = np.asarray(values)
    pos = np.arange(values.size)
    if values.size > 8:
        pos = np.unique(np.linspace(0, values.size - 1, 8).round().astype(int))
    getattr(ax, f"set_{axis}ticks")(pos)
    getattr(ax, f"set_{axis}ticklabels")([f"{v:.3g}" if isinstance(v, (float, np.floating)) else str(v)
                                          for v in values[pos]])

"""Sweep results (``dynlab.sweep``): one panel per variable of the analysis over the swept settings.

Only the analysis' own variables are drawn (attr ``sweep_variables``, in the target's order; a
store written before it existed: every data variable but the bookkeeping), so a sweep read back
from NetCDF or from Zarr draws the same panels.  A ``seed`` axis is averaged over: each value
drawn is the mean over the seeds computed at that point, with the spread (sample standard
deviation) shown as error bars, or in the cells of a heat map.
"""
from __future__ import annotations

import textwrap

import numpy as np

from ..errors import ParameterError
from .style import COLORS, CYCLE, panel_axes, styled

#: Variables of a sweep that are bookkeeping, never drawn: the done mask, when each point was
#: computed, its checksum, and where a point diverged (its summaries are then NaN).
BOOKKEEPING = ("done", "computed_at", "checksum", "diverged_at")
#: Variables drawn at most (the first ones of the analysis, unless ``variables`` names them).
MAX_PANELS = 6
#: Heat maps of at most this many cells print each cell's value (and spread).
ANNOTATE_MAX_CELLS = 36


def sweep_variables(ds) -> list:
    """The analysis' variables of a sweep result, in the target's order."""
    named = [v for v in str(ds.attrs.get("sweep_variables", "")).split(",") if v]
    if named:
        return [v for v in named if v in ds.data_vars and v not in BOOKKEEPING]
    return sorted(v for v in ds.data_vars if v not in BOOKKEEPING)


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


def seed_statistics(ds, name: str, dims: list):
    """(mean, spread, count) of variable ``name`` over the points done, as arrays over ``dims`` (the
    sweep dimensions but ``seed``, first two kept whole, the rest at their first value; extra
    dimensions of the variable at their first index).  Without a seed axis the spread is NaN and
    the count 1 where done."""
    da = ds[name]
    extra = [d for d in da.dims if d not in ds["done"].dims]
    da = da.isel({d: 0 for d in extra})
    done = ds["done"]
    rest = {d: 0 for d in dims[2:]}
    vals = da.where(done.astype(bool)).isel(rest).astype(np.float64)
    keep = dims[:2]
    if "seed" in done.dims:
        vals = vals.transpose(*keep, "seed").values
        finite = np.isfinite(vals)
        count = finite.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(count > 0, np.nansum(np.where(finite, vals, 0.0), axis=-1) / np.maximum(count, 1), np.nan)
            dev = np.where(finite, vals - mean[..., None], 0.0)
            spread = np.where(count > 1, np.sqrt((dev ** 2).sum(axis=-1) / np.maximum(count - 1, 1)), np.nan)
        return mean, spread, count
    vals = vals.transpose(*keep).values
    return vals, np.full(vals.shape, np.nan), np.isfinite(vals).astype(int)


@styled
def plot_sweep(ds, ax=None, *, variables=None):
    """One panel per variable of the analysis (at most ``MAX_PANELS``, or those ``variables`` names).

    One swept setting: the variable against it; two: a heat map over both, one cell per grid
    point (values printed in small grids; "—" not done or NaN); more: a heat map over the first two
    at the first value of the others (said in the title).  With a ``seed`` axis every value is the
    mean over the seeds done at that point and its spread (sample standard deviation) is drawn:
    error bars, or "mean ± s.d." in the cells.  A variable with extra dimensions (e.g.
    ``exponent``) is drawn at its first index.

    Parameters
    ----------
    ds : the result of ``dynlab.sweep`` (or its store/NetCDF file read back)
    ax : an Axes (the first panel only) or a sequence of the panels, optional
    variables : names of the variables to draw, optional

    Returns a matplotlib Figure.
    """
    if "done" not in ds:
        raise ParameterError("ds", "a sweep picture draws a sweep result (with its done mask)")
    if variables is None:
        variables = sweep_variables(ds)[:MAX_PANELS]
    else:
        variables = list(variables)
        for v in variables:
            if v not in ds.data_vars or v in BOOKKEEPING:
                raise ParameterError("variables", f"{v!r} is not a result variable of this sweep; choose from "
                                                  f"{', '.join(sweep_variables(ds))}")
    if not variables:
        raise ParameterError("ds", "this sweep holds no result variables")
    dims = [d for d in ds["done"].dims if d != "seed"]
    seeds = ds.sizes.get("seed", 0)
    fig, axes = panel_axes(ax, len(variables), height=3.0)
    done = ds["done"].values.astype(bool)
    fixed = {d: ds[d].values[0] for d in dims[2:]}
    for a, name in zip(axes, variables):
        if a is None:
            continue
        mean, spread, count = seed_statistics(ds, name, dims)
        label = ds[name].attrs.get("long_name", name)
        if len(dims) == 0:
            a.errorbar([0.0], np.ravel(mean), yerr=None if not seeds else np.ravel(spread), fmt="o",
                       color=COLORS["blue"], capsize=3)
            a.set_xticks([])
            a.set_ylabel(name)
        elif len(dims) == 1:
            x = _ticks(a, "x", ds[dims[0]].values)
            a.errorbar(x, mean, yerr=spread if seeds else None, fmt="o-", ms=3, capsize=2, lw=1.0,
                       color=COLORS["blue"], ecolor=COLORS["sky"])
            a.set_xlabel(dims[0])
            a.set_ylabel(name)
        else:  # one cell per grid point, labelled by its setting (grids are often log-spaced)
            mesh = a.imshow(mean, origin="lower", aspect="auto", cmap="viridis", interpolation="nearest")
            _label_cells(a, "x", ds[dims[1]].values)
            _label_cells(a, "y", ds[dims[0]].values)
            fig.colorbar(mesh, ax=a, shrink=0.85, label=name + (" (mean over seeds)" if seeds else ""))
            if mean.size <= ANNOTATE_MAX_CELLS:
                finite = mean[np.isfinite(mean)]
                mid = (finite.min() + finite.max()) / 2 if finite.size else 0.0
                for (i, j), v in np.ndenumerate(mean):
                    text = "—" if not np.isfinite(v) else f"{v:.3g}"
                    if np.isfinite(v) and seeds and np.isfinite(spread[i, j]):
                        text += f"\n±{spread[i, j]:.2g}"
                    a.text(j, i, text, ha="center", va="center", fontsize=5.5,
                           color="white" if np.isfinite(v) and v < mid else "black")
            a.set_xlabel(dims[1])
            a.set_ylabel(dims[0])
        extra = [d for d in ds[name].dims if d not in ds["done"].dims]
        title = label + (f" ({', '.join(f'{d}={v}' for d, v in fixed.items())})" if fixed else "")
        if extra:
            title += f", {', '.join(f'{d} first' for d in extra)}"
        a.set_title(textwrap.fill(title, 48), fontsize=7)
    how = f"; mean ± s.d. over {seeds} seeds" if seeds else ""
    fig.suptitle(f"sweep of {ds.attrs.get('analysis', '')}: {int(done.sum())}/{done.size} points done{how}",
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

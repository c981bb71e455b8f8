"""Sweep results (``dynlab.sweep``): one panel per variable over the swept settings."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .style import COLORS, CYCLE, panel_axes, styled

#: Bookkeeping variables of a sweep that are not results.
BOOKKEEPING = ("done", "computed_at", "diverged_at")
#: Variables drawn at most (the first ones of the result).
MAX_PANELS = 3


def _ticks(ax, axis: str, values) -> np.ndarray:
    """Positions for a swept coordinate: its values when numeric, else 0..n-1 with labels."""
    values = np.asarray(values)
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
    over both; more: a heat map over the first two at the first value of the others (said in the
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
        else:
            x = _ticks(a, "x", ds[dims[1]].values)
            y = _ticks(a, "y", ds[dims[0]].values)
            mesh = a.pcolormesh(_edges(x), _edges(y), vals, cmap="viridis", shading="flat")
            fig.colorbar(mesh, ax=a, shrink=0.85, label=name)
            a.set_xlabel(dims[1])
            a.set_ylabel(dims[0])
        title = name + (f" ({', '.join(f'{d}={v}' for d, v in fixed.items())})" if fixed else "")
        if extra:
            title += f", {', '.join(f'{d} first' for d in extra)}"
        a.set_title(title)
    fig.suptitle(f"sweep of {ds.attrs.get('analysis', '')}: {int(done.sum())}/{done.size} points done",
                 fontsize=8, color=CYCLE[-1])
    return fig


def _edges(c: np.ndarray) -> np.ndarray:
    """Cell edges around centres c (midpoints; half a step beyond the ends)."""
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[1:] + c[:-1]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])

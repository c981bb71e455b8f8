"""Phase portraits (iRNN paper, Fig. 2): the trajectory h_m in state space; for an iRNN
entry of a ``dynlab phase`` result also the equilibrium curve {s : α s = φ(U s + W x + b)}
with the points s_m = h_m + h_{m-1}; for a 2-D cell at a constant input its vector field.

``plot_phase`` draws any result that holds states ``h``: the ``dynlab phase`` Dataset (one
panel per entry along ``model``), ``dynlab.simulate``, ``gradient_norms``, ``lyapunov``,
``partition``, …  States with D > 2 are drawn in the plane of the top two principal
components of the trajectory (those stored in the Dataset when there are, else those of the
drawn trajectory).
"""
from __future__ import annotations

import numpy as np

from .._palette import PHASE
from ..errors import ParameterError
from .labels import entries, entry_attr, entry_data, entry_title
from .style import COLORS, new_figure, styled

#: Legend entries in this order (a substring of each label).
_LEGEND_ORDER = ("trajectory", "equilibria", "s_m", "start", "field", "nullcline", "equilibrium")


def _draw_field(ds, ax) -> None:
    g1, g2 = ds["field_x1"].values, ds["field_x2"].values
    F1, F2 = ds["field_F1"].values, ds["field_F2"].values
    ax.streamplot(g1, g2, F1, F2, color="0.72", density=0.9, linewidth=0.5, arrowsize=0.6, zorder=0)
    ax.contour(g1, g2, F1, levels=[0.0], colors=[COLORS["sky"]], linewidths=1.2, zorder=1)
    ax.contour(g1, g2, F2, levels=[0.0], colors=[COLORS["purple"]], linewidths=1.2, zorder=1)
    ax.plot([], [], color="0.72", lw=0.8, label="vector field")
    ax.plot([], [], color=COLORS["sky"], lw=1.2, label="h₁-nullcline")
    ax.plot([], [], color=COLORS["purple"], lw=1.2, label="h₂-nullcline")
    stab = ds["fp_stability"].values
    h = ds["fp_h"].values
    for code, face, label in ((1, COLORS["blue"], "stable equilibrium"), (0, COLORS["orange"], "marginal equilibrium"),
                              (-1, "white", "unstable equilibrium")):
        sel = stab == code
        if sel.any():
            ax.scatter(h[sel, 0], h[sel, 1], s=36, facecolors=face, edgecolors=COLORS["black"], linewidths=1.0,
                       zorder=5, label=label)
    ax.set_xlim(g1[0], g1[-1])
    ax.set_ylim(g2[0], g2[-1])


def _states(ds, name: str, batch: int):
    """(h0, h) of one entry and sequence: (D,), (T, D)."""
    h = entry_data(ds, name, "h")
    if "batch" in h.dims:
        h = h.isel(batch=batch)
    h0 = ds["h0"] if "h0" in ds else None
    if h0 is not None and "batch" in h0.dims:
        h0 = h0.isel(batch=batch)
    h = np.asarray(h.transpose(..., "time", "unit").values, dtype=np.float64)
    h0 = np.zeros(h.shape[1]) if h0 is None else np.asarray(h0.values, dtype=np.float64)
    return h0, h


def _plane(ds, name: str, traj: np.ndarray):
    """(function mapping (…, D) points into the drawing plane, axis labels)."""
    D = traj.shape[1]
    if D <= 2:
        return (lambda a: np.asarray(a)[..., :2]), ("h₁", "h₂" if D == 2 else "")
    if "pc_components" in ds:
        mean = entry_data(ds, name, "pc_mean").values
        comps = entry_data(ds, name, "pc_components").values
        frac = entry_data(ds, name, "pc_explained").values
    else:  # the plane of the drawn trajectory's top two principal components
        pts = traj[np.all(np.isfinite(traj), axis=1)]
        mean = pts.mean(axis=0)
        _, sv, vt = np.linalg.svd(pts - mean, full_matrices=False)
        comps = vt[:2]
        frac = sv[:2] ** 2 / max(float(np.sum(sv ** 2)), np.finfo(float).tiny)
    labels = (f"PC1 ({100 * frac[0]:.0f}% var)", f"PC2 ({100 * frac[1]:.0f}% var)")
    return (lambda a: (np.asarray(a, dtype=np.float64) - mean) @ comps.T), labels


#: The iRNN's curve and s_m get a zoomed inset when they span less than this fraction of the trajectory.
ZOOM_BELOW = 0.25


def _zoom_on_the_curve(ax, curve, s, traj, wide):
    """An inset on the equilibrium curve and the s_m dots when they are a speck beside the trajectory
    h_m (the iRNN's h_m = s_m − h_(m-1) wanders while s_m stays on the curve): the claim, visible."""
    pts = np.vstack([curve, s])
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    tr = traj[np.all(np.isfinite(traj), axis=1)]
    if pts.size == 0 or tr.size == 0:
        return
    span = float(np.max(np.ptp(pts, axis=0)))
    if not span < ZOOM_BELOW * float(np.max(np.ptp(tr, axis=0))):
        return
    lo, hi = tr.min(axis=0)[:2], tr.max(axis=0)[:2]
    unit = (tr[:, :2] - lo) / np.where(hi > lo, hi - lo, 1.0)   # the trajectory in axes-like [0, 1]²
    size = 0.38
    corners = [(x0, y0) for y0 in (0.09, 0.56) for x0 in (0.60, 0.13)]   # room for the inset's tick labels
    crowd = [int(np.sum((unit[:, 0] >= x0 - 0.05) & (unit[:, 0] <= x0 + size + 0.05) & (unit[:, 1] >= y0 - 0.05)
                        & (unit[:, 1] <= y0 + size + 0.05))) for x0, y0 in corners]
    x0, y0 = corners[int(np.argmin(crowd))]   # the emptiest corner
    inset = ax.inset_axes([x0, y0, size, size])
    inset.plot(curve[:, 0], curve[:, 1], color=COLORS[PHASE["curve"]], lw=3.0 if wide else 0.7, alpha=0.45,
               solid_capstyle="round")
    inset.scatter(s[:, 0], s[:, 1], s=2, color=COLORS[PHASE["s"]], edgecolors="none")
    inset.set_title("zoom: s_m on the curve", fontsize=6, pad=2)
    inset.tick_params(labelsize=5, length=2, pad=1)
    inset.set_aspect("equal", adjustable="datalim")


def _panel(ds, name: str, ax, batch: int):
    """Draw one entry into ``ax``; returns the time-coloured trajectory (for the colour bar)."""
    from matplotlib.ticker import MaxNLocator

    h0, h = _states(ds, name, batch)
    plane, (xlabel, ylabel) = _plane(ds, name, np.vstack([h0[None], h]))
    traj = plane(np.vstack([h0[None], h]))
    if traj.shape[1] == 1:  # D = 1: h_m against h_{m-1} would be a return map; draw h against m
        traj = np.column_stack([np.arange(traj.shape[0]), traj[:, 0]])
        xlabel, ylabel = "time step m", "h"
    t = np.arange(traj.shape[0])
    from matplotlib.collections import LineCollection

    seg = np.stack([traj[:-1], traj[1:]], axis=1)
    lc = LineCollection(seg, cmap="viridis", linewidths=0.6, alpha=0.9, zorder=1)
    lc.set_array(t[1:].astype(float))
    ax.add_collection(lc)
    ax.plot([], [], color="#21918c", lw=0.8, label=r"trajectory $h_m$ (colour: time)")
    if ds.attrs.get("irnn_entry") == name:
        curve = plane(ds["s_eq"].values)
        s = plane(ds["s"].values)
        # d = 1: a smooth curve over the input's range, drawn wide so the s_m dots sit on it;
        # d > 1: the equilibria along the (jumpy) input path, drawn thin.
        wide = ds.sizes["unit_in"] == 1
        ax.plot(curve[:, 0], curve[:, 1], color=COLORS[PHASE["curve"]], lw=4.0 if wide else 0.7,
                alpha=0.45, solid_capstyle="round", zorder=2,
                label=r"equilibria $\alpha s = \phi(Us + Wx + b)$")
        sign = "+" if int(entry_attr(ds, name, "sign", 1)) > 0 else "-"
        ax.scatter(s[:, 0], s[:, 1], s=3, color=COLORS[PHASE["s"]], edgecolors="none", zorder=3,
                   label=rf"$s_m = h_m {sign} h_{{m-1}}$")
        _zoom_on_the_curve(ax, curve, s, traj, wide)
    if "field_F1" in ds and name == entries(ds)[0]:
        _draw_field(ds, ax)
    ax.plot(traj[0, 0], traj[0, 1], "o", color=COLORS[PHASE["start"]], ms=5, zorder=4, label=r"start $h_0$")
    title = entry_title(ds, name)
    if "diverged_at" in ds:
        at = int(np.ravel(entry_data(ds, name, "diverged_at").values)[0 if "batch" not in ds["diverged_at"].dims
                                                                          else batch])
        if at:
            title += f"\ndiverged at m={at}"
    if "batch" in ds["h"].dims:
        title += f", sequence {batch + 1} of {ds.sizes['batch']}"
    if h.shape[1] > 2:
        title += "\nprojected on top-2 PCs"
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if "field_F1" not in ds:
        ax.autoscale_view()
        ax.margins(0.05)
    if h.shape[1] == 2 and "field_F1" not in ds:
        ax.set_aspect("equal", adjustable="datalim")
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.yaxis.set_major_locator(MaxNLocator(5))
    return lc


@styled
def plot_phase(ds, ax=None, *, batch: int = 0):
    """Draw a phase portrait, one panel per entry (``model``) of the result.

    Parameters
    ----------
    ds : any result Dataset with states ``h`` (``dynlab phase``'s, ``dynlab.simulate``'s, …;
        read back from its NetCDF file too)
    ax : matplotlib Axes or a sequence of them (one per entry), optional
        By default a new figure of 3.4-inch panels side by side.
    batch : which sequence of a batched result to draw

    Returns
    -------
    matplotlib Figure (pass it to ``dynlab.plot.save_figure``).
    """
    if "h" not in ds:
        raise ParameterError("ds", "a phase portrait draws the states h; this result has none")
    names = entries(ds)
    if ax is None:
        fig, axes = new_figure(len(names), height=3.3)
    else:
        axes = [ax] if hasattr(ax, "figure") and not isinstance(ax, (list, tuple)) else list(ax)
        if len(axes) != len(names):
            raise ParameterError("ax", f"needs one Axes per model ({len(names)}), got {len(axes)}")
        fig = axes[0].figure
    lines = [_panel(ds, name, a, batch) for a, name in zip(axes, names)]
    handles = {}
    for a in axes:
        for hnd, lab in zip(*a.get_legend_handles_labels()):
            handles.setdefault(lab, hnd)
    labels = sorted(handles, key=lambda lab: [k in lab for k in _LEGEND_ORDER].index(True))
    legend = fig.legend([handles[k] for k in labels], labels, loc="outside lower center",
                        ncols=min(len(labels), max(2, 2 * len(axes))), frameon=False, handlelength=1.8,
                        columnspacing=1.2)
    for handle in legend.legend_handles:
        if hasattr(handle, "set_sizes"):  # the tiny s_m dots, made visible in the legend
            handle.set_sizes([12])
    if ax is None:
        cb = fig.colorbar(lines[-1], ax=axes, shrink=0.8, pad=0.02, aspect=30)
        cb.set_label("time step m")
    return fig

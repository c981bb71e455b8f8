"""The FixedPointFinder picture (Sussillo & Barak 2013): fixed points in the top principal
components of the network's trajectories — trajectories, stable points, saddles and their
unstable directions — and the step Jacobian's eigenvalues at every point against the unit circle.

Drawn from a ``fixed_points`` Dataset made with ``trajectories=`` (it holds ``h_pc``,
``unstable_pc``, ``trajectory_pc``, ``pc_explained``); without them ``plot_equilibria``'s picture
is drawn.  Nothing is computed here but the drawing.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .labels import entries, entry_title
from .style import COLORS, panel_axes, styled

#: How many trajectories are drawn at most (thin lines), and how long the unstable directions are
#: drawn, as a fraction of the trajectories' spread in the principal components.
MAX_TRAJECTORIES = 64
ARROW_FRACTION = 0.12


def _count(n: int, word: str) -> str:
    """"1 trajectory", "8 trajectories", "2 slow points": the number with the word it counts."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else f"{n} {word}s"


def _index_name(k: int) -> str:
    return {0: "stable", 1: "saddle, 1 unstable mode"}.get(k, f"{k} unstable modes")


@styled
def plot_fixed_points(ds, ax=None, *, max_trajectories: int = MAX_TRAJECTORIES):
    """Fixed points in the top principal components (3-D when there are three) with the network's
    trajectories, stable points (filled), saddles (crosses, coloured by their number of unstable
    modes) and each saddle's unstable eigenvector drawn as a segment through it; second panel: the
    eigenvalues of the step Jacobian at every root against the unit circle.

    Parameters
    ----------
    ds : a ``dynlab.fixed_points`` result; with ``h_pc`` (``fixed_points(..., trajectories=…)``)
        the FixedPointFinder picture, otherwise ``plot_equilibria``'s
    ax : an Axes (the principal-component panel only; a 3-D one for three components) or a
        sequence of the two panels, optional
    max_trajectories : at most this many trajectories are drawn

    Returns a matplotlib Figure.
    """
    if ds.attrs.get("result") != "fixed_points" and "kind" not in ds:
        raise ParameterError("ds", "a fixed-point picture draws a fixed_points result")
    if "h_pc" not in ds:
        from .stability import plot_equilibria

        return plot_equilibria(ds, ax=ax)
    k = ds.sizes["pc"]
    three = k >= 3
    if ax is None:
        fig, axes = panel_axes(None, 2, height=3.8, width=9.0)
        fig.get_layout_engine().set(wspace=0.08)
        if three:
            pos = axes[0].get_subplotspec()
            axes[0].remove()
            axes[0] = fig.add_subplot(pos, projection="3d")
    else:
        fig, axes = panel_axes(ax, 2, height=3.6)
        three = three and getattr(axes[0], "name", "") == "3d"
    _pc_panel(ds, axes[0], three, int(max_trajectories))
    if axes[1] is not None:
        _eig_panel(ds, axes[1])
    return fig


def _coords(a, three):
    return (a[..., 0], a[..., 1], a[..., 2]) if three else (a[..., 0], a[..., 1] if a.shape[-1] > 1 else 0 * a[..., 0])


def _pc_panel(ds, ax, three, max_traj):
    traj = ds["trajectory_pc"].values
    for tr in traj[:max_traj]:
        ax.plot(*_coords(tr, three), color="0.72", lw=0.35, alpha=0.8, zorder=1)
    P = ds["h_pc"].values
    roots = ds["kind"].values == 1
    nu = ds["n_unstable"].values
    U = ds["unstable_pc"].values
    spread = float(np.max(np.ptp(traj.reshape(-1, traj.shape[-1]), axis=0))) if traj.size else 1.0
    length = ARROW_FRACTION * max(spread, 1e-12)
    palette = {1: COLORS["vermillion"], 2: COLORS["orange"], 3: COLORS["purple"]}
    for p in np.flatnonzero(roots & (nu > 0)):
        for mode in range(int(nu[p])):
            v = U[p, mode]
            if not np.all(np.isfinite(v)):
                continue
            n = np.linalg.norm(v)
            if n == 0:
                continue
            seg = np.stack([P[p] - length * v / n, P[p] + length * v / n])
            ax.plot(*_coords(seg, three), color=palette.get(int(nu[p]), COLORS["purple"]), lw=1.0, zorder=3)
    stable = roots & (nu == 0)
    if stable.any():
        kw = dict(s=28, color=COLORS["black"], label=f"stable ({int(stable.sum())})", zorder=4)
        if three:
            kw["depthshade"] = False
        ax.scatter(*_coords(P[stable], three), **kw)
    for count in sorted(set(int(c) for c in nu[roots & (nu > 0)])):
        sel = roots & (nu == count)
        kw = dict(s=30, marker="x", color=palette.get(count, COLORS["purple"]), linewidths=1.1, zorder=5,
                  label=f"{_index_name(count)} ({int(sel.sum())})")
        if three:
            kw["depthshade"] = False
        ax.scatter(*_coords(P[sel], three), **kw)
    slow = ds["kind"].values == 0
    if slow.any():
        kw = dict(s=36, facecolors="none", edgecolors=COLORS["sky"], label=_count(int(slow.sum()), "slow point"))
        if three:
            kw["depthshade"] = False
        ax.scatter(*_coords(P[slow], three), **kw)
    far = ds["reachable"].values == 0 if "reachable" in ds else np.zeros(P.shape[0], bool)
    if far.any():  # kept with keep_unreachable: marked, so they are not read as answers
        kw = dict(s=60, marker="s", facecolors="none", edgecolors="0.5", linewidths=0.8,
                  label=_count(int(far.sum()), "point") + " outside the reachable states")
        if three:
            kw["depthshade"] = False
        ax.scatter(*_coords(P[far], three), **kw)
    ex = ds["pc_explained"].values
    ax.set_xlabel(f"PC 1 ({100 * ex[0]:.0f}%)")
    if ex.size > 1:
        ax.set_ylabel(f"PC 2 ({100 * ex[1]:.0f}%)")
    if three:
        ax.set_zlabel(f"PC 3 ({100 * ex[2]:.0f}%)", labelpad=4)
        ax.view_init(elev=22, azim=-55)
    name = entry_title(ds, entries(ds)[0])
    n_traj = ds.sizes["trajectory"]
    drawn = min(n_traj, max_traj)
    shown = _count(n_traj, "trajectory") if drawn == n_traj else f"{drawn} of {n_traj} trajectories"
    ax.set_title(f"fixed points of the {name} (x = {np.array2string(ds['x'].values, precision=2)}), "
                 f"{shown}", fontsize=7)
    ax.legend(frameon=False, fontsize=6, loc="upper left")


def _eig_panel(ds, ax):
    from .._dataset import eigenvalues_from

    name = "step_eig" if "step_eig_real" in ds else "eig"
    ev = eigenvalues_from(ds, name)
    roots = ds["kind"].values == 1
    nu = ds["n_unstable"].values
    for p in np.flatnonzero(roots):
        col = COLORS["black"] if nu[p] == 0 else COLORS["vermillion"]
        ax.scatter(ev[p].real, ev[p].imag, s=6, color=col, alpha=0.6, edgecolors="none")
    n_stable, n_unstable = int((roots & (nu == 0)).sum()), int((roots & (nu > 0)).sum())
    if n_stable:
        ax.scatter([], [], s=6, color=COLORS["black"], label=f"at {_count(n_stable, 'stable point')}")
    if n_unstable:
        ax.scatter([], [], s=6, color=COLORS["vermillion"], label=f"at {_count(n_unstable, 'unstable point')}")
    th = np.linspace(0, 2 * np.pi, 400)
    if name == "step_eig":
        ax.plot(np.cos(th), np.sin(th), color="0.4", lw=0.8, ls=":", label="unit circle")
        ax.set_title("step-Jacobian eigenvalues μ at every root")
    else:
        ax.axvline(0, color="0.4", lw=0.8, ls=":")
        ax.set_title("eigenvalues at every root")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("Re")
    ax.set_ylabel("Im")
    ax.legend(frameon=False, fontsize=6, loc="lower left")

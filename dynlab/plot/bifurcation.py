"""Bifurcation diagrams, drawn from the results of ``dynlab.continuation`` (branches coloured by
stability, special points marked and labelled) and ``dynlab.bifurcation_curve`` (a fold or Hopf
curve in two parameters)."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .style import COLORS, panel_axes, styled

STAB_COLORS = {1: COLORS["blue"], 0: COLORS["orange"], -1: COLORS["vermillion"]}
STAB_NAMES = {1: "stable", 0: "marginal", -1: "unstable"}
#: special-point code → (marker, colour, label)
MARKS = {1: ("X", COLORS["black"], "LP"), 2: ("D", COLORS["purple"], "H"), 3: ("D", COLORS["purple"], "NS"),
         4: ("s", COLORS["orange"], "PD"), 5: ("P", COLORS["green"], "BP")}
CRIT = {-1: "super", 1: "sub", 0: ""}


def special_label(code: int, crit: int) -> str:
    """"H (sub)", "PD (super)", "LP", "BP"."""
    lab = MARKS[int(code)][2]
    word = CRIT.get(int(crit), "")
    return f"{lab} ({word})" if word else lab


def _values(ds, var, unit, project):
    v = ds[var].values
    if project is not None:
        return v @ np.asarray(project, dtype=np.float64)
    return v[:, unit]


def bifurcation_axes(ds, ax, unit=0, project=None, ylabel=None, labels=True, legend=True):
    """Draw the diagram of one continuation result into ``ax``: each branch piecewise in its
    stability's colour (stable solid, unstable dashed), the special points marked and labelled.
    ``project`` (D,) draws h·project instead of unit ``unit``."""
    lam = ds["param"].values
    y = _values(ds, "h_eq", unit, project)
    stab = ds["stability"].values
    branch = ds["branch"].values if "branch" in ds else np.zeros(lam.size, dtype=int)
    seen = set()
    for b in np.unique(branch):
        idx = np.flatnonzero(branch == b)
        start = 0
        for i in range(1, idx.size + 1):
            if i == idx.size or stab[idx[i]] != stab[idx[start]]:
                j = min(i + 1, idx.size)
                code = int(stab[idx[start]])
                ax.plot(lam[idx[start:j]], y[idx[start:j]], color=STAB_COLORS[code], lw=1.5,
                        ls="-" if code == 1 else "--", label=None if code in seen else STAB_NAMES[code])
                seen.add(code)
                start = i
    if "special_type" in ds and ds.sizes.get("special", 0):
        sy = _values(ds, "special_h", unit, project)
        types = ds["special_type"].values
        crit = ds["special_criticality"].values
        shown = set()
        for k in range(types.size):
            mk, col, lab = MARKS[int(types[k])]
            ax.plot(ds["special_param"].values[k], sy[k], mk, color=col, ms=7, mec="white", mew=0.6, zorder=5,
                    label=None if lab in shown else {"LP": "fold (LP)", "H": "Hopf (H)", "NS": "Neimark–Sacker (NS)",
                                                     "PD": "flip (PD)", "BP": "branch point (BP)"}[lab])
            shown.add(lab)
            if labels:
                ax.annotate(special_label(types[k], crit[k]), (ds["special_param"].values[k], sy[k]),
                            textcoords="offset points", xytext=(4, 5), fontsize=6.5, color=col)
    elif ds.sizes.get("fold", 0):  # files written before the special points
        ax.plot(ds["fold_param"].values, _values(ds, "fold_h", unit, project), "X", color=COLORS["black"], ms=7,
                label="fold")
    ax.set_xlim(ds.attrs["lo"], ds.attrs["hi"])
    ax.set_xlabel(f"{ds.attrs['over']}")
    ax.set_ylabel(ylabel or f"equilibrium, unit {unit + 1}")
    if legend:
        ax.legend(frameon=False, fontsize=6.5)


def _title(ds) -> str:
    parts = []
    for key, word in (("n_folds", "fold"), ("n_hopf", "Hopf"), ("n_neimark_sacker", "NS"), ("n_flips", "flip"),
                      ("n_branch_points", "branch point")):
        n = int(ds.attrs.get(key, 0))
        if n:
            parts.append(f"{n} {word}{'' if n == 1 or word in ('NS', 'Hopf') else 's'}")
    return f"continuation over {ds.attrs['over']}" + (f" ({', '.join(parts)})" if parts else " (no special point)")


@styled
def plot_bifurcation(ds, ax=None, unit=None, project=None, ylabel=None):
    """The bifurcation diagram of a ``dynlab.continuation`` result (one panel per unit, at most two;
    or one panel of h·``project``), or the two-parameter curve of ``dynlab.bifurcation_curve``.

    Returns a matplotlib Figure.
    """
    if ds.attrs.get("result") == "bifurcation_curve":
        return _curve(ds, ax)
    if "param" not in ds or "arc" not in ds.dims:
        raise ParameterError("ds", "a bifurcation diagram draws a continuation result (param along arc)")
    units = [unit] if unit is not None or project is not None else list(range(min(ds.sizes["unit"], 2)))
    fig, axes = panel_axes(ax, len(units), height=3.0)
    for u, a in zip(units, axes):
        if a is not None:
            bifurcation_axes(ds, a, 0 if u is None else u, project, ylabel)
            a.set_title(_title(ds))
    return fig


def _curve(ds, ax):
    fig, (a,) = panel_axes(ax, 1, height=3.0)
    kind = ds.attrs.get("curve", "")
    for b in np.unique(ds["half"].values):
        sel = ds["half"].values == b
        a.plot(ds["param"].values[sel], ds["param2"].values[sel], color=COLORS["blue"], lw=1.5,
               label=f"{kind} curve" if b == 0 else None)
    a.plot([ds.attrs["start_param"]], [ds.attrs["start_param2"]], "o", color=COLORS["vermillion"], ms=5,
           label="start (from the one-parameter branch)")
    a.set_xlabel(ds.attrs["over"])
    a.set_ylabel(ds.attrs["over2"])
    a.set_title(f"{kind} curve in ({ds.attrs['over']}, {ds.attrs['over2']})")
    a.legend(frameon=False, fontsize=6.5)
    return fig

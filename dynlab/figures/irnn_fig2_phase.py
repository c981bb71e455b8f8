"""iRNN paper Fig. 2: phase portraits of 2-D tanh cells (RNN, FastRNN, iRNN with K = 5, η = α = 1),
U, W, b at random (one seed for the three cells), on two inputs of T steps:

- *walk*: the paper's random walk with variance 10.  It drives most steps into saturation (some
  unit's pre-activation |a| > 2, tanh′ < 0.071), where every tanh cell sits at ±1 and is trivially
  at the fixed point of its own step, so the walk cannot decide the claim; its numbers are reported;
- *noise*: i.i.d. N(0, 1) inputs — W x has unit scale for W ~ N(0, 1/d) — where the cells are mostly
  unsaturated and the input jumps at every step, so a cell stays on its equilibrium curve only if
  its update actually solves for the equilibrium.

The claim checked on the noise input: the iRNN's s_m = h_m + h_{m-1} is on its equilibrium curve
α s = φ(U s + W x_m + b) — max-abs residual ≤ 1e-3 at ≥ 90 % of the unsaturated steps (saturation
judged at the pre-activation U s_m + W x_m + b).  Negative control, the same check on the other two
cells (the paper: they "exhibit complex trajectories"): each one's distance from the fixed point of
its own step at the current input, ‖h_m − step(h_m; x_m)‖∞, on its own unsaturated steps
(pre-activation of that step).  The fractions of saturated steps are reported for both inputs.
The portraits colour each trajectory by time over the cell's equilibrium curve (for the RNN and
FastRNN the fixed points of their step, ``dynlab.equilibrium``), at equal aspect.
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe

NAME = "irnn-fig2-phase"
TOL, FRAC, SAT = 1e-3, 0.90, 2.0
INPUTS = (("walk", "random-walk", 10.0), ("noise", "noise", 1.0))
ORDER = ("rnn", "fastrnn", "irnn")
LABEL = {"rnn": "RNN", "fastrnn": "FastRNN", "irnn": "iRNN (K = 5)"}


def compute(quick: bool):
    import dataclasses

    import dynlab as dl
    from ..io import model_from_dataset
    from ..commands import phase_dataset
    from ..spec import RunSpec

    T = 300 if quick else 1000
    base = RunSpec(model="irnn", K=5, steps=T, compare=("rnn", "fastrnn"), seed=0, command=f"dynlab figures make {NAME}")
    parts = {key: phase_dataset(dataclasses.replace(base, input=kind, variance=var)) for key, kind, var in INPUTS}
    ds = parts["walk"]
    other = parts["noise"]
    for name in ORDER:   # the same cells (same seed) on both inputs
        a, b = model_from_dataset(ds, entry=name), model_from_dataset(other, entry=name)
        assert all(np.array_equal(np.asarray(v), np.asarray(b.params()[k])) for k, v in a.params().items())
    ds = ds.rename({"x_grid": "x_grid_walk"})
    for v in ("h", "x", "s", "eq_residual"):
        ds[f"noise_{v}"] = other[v]
    ds["noise_s_eq"] = other["s_eq"].rename({"x_grid": "x_grid_noise"})
    ds["noise_x_eq"] = other["x_eq"].rename({"x_grid": "x_grid_noise"})
    # the RNN's and FastRNN's own equilibrium curves (fixed points of their step) on each input's grid
    for key, grid in (("walk", ds["x_eq"].values), ("noise", ds["noise_x_eq"].values)):
        for name in ("rnn", "fastrnn"):
            m = model_from_dataset(ds, entry=name)
            eq = dl.equilibrium(m, grid, method="newton")
            ds[f"{key}_{name}_curve"] = ((f"x_grid_{key}", "unit"), eq["h_eq"].values,
                                         {"long_name": f"fixed points of the {name} step", "units": "1"})
            ds[f"{key}_{name}_curve_ok"] = ((f"x_grid_{key}",), eq["converged"].values.astype(np.int8))
    ds.attrs["scaling"] = ("as in the paper (T=1000, variance-10 walk), plus i.i.d. N(0, 1) inputs where the cells "
                           "are not saturated" if not quick else "quick: T=300 instead of 1000; plus i.i.d. "
                           "N(0, 1) inputs where the cells are not saturated")
    return ds


def _cell_residuals(ds, name, key):
    """(residual, saturated) per step of one cell on one input: for the iRNN ‖α s_m − φ(U s_m + W x_m + b)‖∞
    at a = U s_m + W x_m + b; otherwise ‖h_m − step(h_m; x_m)‖∞ at the step's pre-activation."""
    from ..io import model_from_dataset
    from ..simulation import simulate

    pre = "" if key == "walk" else "noise_"
    m = model_from_dataset(ds, entry=name)
    x = ds[pre + "x"].values
    if name == "irnn":
        s = ds[pre + "s"].values
        res = ds[pre + "eq_residual"].values
        a = s @ m.U.T + x @ m.W.T + m.b
    else:
        h = ds[pre + "h"].sel(model=name).values
        nxt = simulate(m, x[:, None, :], h0=h)["h"].values[:, 0, :]
        res = np.max(np.abs(nxt - h), axis=1)
        hp = np.vstack([np.zeros((1, h.shape[1])), h[:-1]])
        a = hp @ m.U.T + x @ m.W.T + m.b
    return res, np.max(np.abs(a), axis=1) > SAT


def _judge(res, sat):
    free = ~sat
    r = res[free]
    frac = float(np.mean(r <= TOL)) if r.size else float("nan")
    return {"frac_saturated": float(np.mean(sat)), "unsaturated_steps": int(r.size),
            "median_residual_unsaturated": float(np.median(r)) if r.size else float("nan"),
            "frac_on_curve_unsaturated": frac, "passed": bool(r.size > 0 and frac >= FRAC)}


def check(ds):
    out = {}
    judged = {}
    for key in ("noise", "walk"):  # the deciding numbers (the iRNN on unsaturated inputs) first
        for name in sorted(ORDER, key=lambda n: n != "irnn"):
            j = _judge(*_cell_residuals(ds, name, key))
            judged[(key, name)] = j
            for k, v in j.items():
                if k != "passed":
                    out[f"{key}_{name}_{k}"] = v
    irnn = judged[("noise", "irnn")]
    out["passed"] = irnn["passed"]
    ctrl = {n: judged[("noise", n)] for n in ("rnn", "fastrnn")}
    out["control"] = {"setting": "the same check on the RNN and FastRNN (own fixed-point curve), noise input",
                      "measured": {f"{n}_{k}": v for n, j in ctrl.items() for k, v in j.items() if k != "passed"},
                      "passed": bool(any(j["passed"] for j in ctrl.values()))}
    if not out["passed"]:
        out["finding"] = (f"the iRNN's s_m is within {TOL:g} of its curve at {irnn['frac_on_curve_unsaturated']:.1%} of "
                          f"its {irnn['unsaturated_steps']} unsaturated steps (median residual "
                          f"{irnn['median_residual_unsaturated']:.3g}), below the {FRAC:.0%} the check asks")
    return out


def draw(ds):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..plot.style import COLORS, styled

    @styled
    def _draw():
        fig = Figure(figsize=(11.0, 8.0))        # on the Agg canvas, not pyplot (nothing retained)
        FigureCanvasAgg(fig)
        axes = fig.subplots(2, 3)
        fig.subplots_adjust(hspace=0.42, wspace=0.38, left=0.06, right=0.86, top=0.88, bottom=0.07)
        T = ds.sizes["time"]
        for row, key in enumerate(("walk", "noise")):
            pre = "" if key == "walk" else "noise_"
            res = {n: _judge(*_cell_residuals(ds, n, key)) for n in ORDER}
            for col, name in enumerate(ORDER):
                ax = axes[row, col]
                if name == "irnn":
                    pts = ds[pre + "s"].values
                    curve = ds["s_eq" if key == "walk" else "noise_s_eq"].values
                    xl, yl = r"$s_1 = h_{1,m} + h_{1,m-1}$", r"$s_2 = h_{2,m} + h_{2,m-1}$"
                    clab = r"equilibrium curve $\alpha s = \tanh(U s + W x + b)$"
                else:
                    pts = ds[pre + "h"].sel(model=name).values
                    curve = ds[f"{key}_{name}_curve"].values
                    curve = np.where(ds[f"{key}_{name}_curve_ok"].values[:, None] == 1, curve, np.nan)
                    xl, yl = r"$h_{1,m}$", r"$h_{2,m}$"
                    clab = "fixed points of its step h = step(h; x)"
                ax.plot(curve[:, 0], curve[:, 1], color=COLORS["sky"], lw=5, alpha=0.55, label=clab, zorder=1)
                ax.plot(pts[:, 0], pts[:, 1], color="0.6", lw=0.3, zorder=2)
                sc = ax.scatter(pts[:, 0], pts[:, 1], c=np.arange(1, T + 1), cmap="viridis", s=5, zorder=3)
                ax.scatter(pts[:1, 0], pts[:1, 1], facecolor="none", edgecolor="k", s=40, zorder=4, label="m = 1")
                ax.set_aspect("equal", adjustable="datalim")
                ax.set_xlabel(xl)
                ax.set_ylabel(yl)
                j = res[name]
                ax.set_title(f"{LABEL[name]}, {key}: {j['frac_saturated']:.0%} of steps saturated\n"
                             f"within {TOL:g} of its curve: {j['frac_on_curve_unsaturated']:.0%} of the rest",
                             fontsize=7)
                ax.legend(frameon=False, fontsize=5.5, loc="upper right")
            fig.colorbar(sc, ax=axes[row, :].tolist(), shrink=0.8, label="time step m")
        fig.suptitle("iRNN Fig. 2 — top: the paper's variance-10 random walk; bottom: i.i.d. N(0, 1) inputs "
                     f"(cells unsaturated); T = {T}\n" + ds.attrs.get("scaling", "")
                     + f"; saturated: some |pre-activation| > {SAT:g}", fontsize=7)
        return fig

    return _draw()


RECIPE = Recipe(NAME, "iRNN Fig. 2", "iRNN's s_m = h_m + h_{m-1} stays on its equilibrium curve where the cells are "
                "not saturated; the RNN and FastRNN stay off their own fixed-point curves", compute, draw, check)

"""Training pictures: loss and gradient diagnostics over iterations, from a history Dataset.

``plot_training(ds)`` draws the history of ``dynlab.train.loop.train_model`` (``dynlab train
--out``): the training and validation loss against the task's memoryless baseline, the
Jacobian norms ‖∂h_T/∂h_1‖, ‖∂h_T/∂h_{T-1}‖, ‖𝒜_h‖ = ‖∂h_T/∂h_0‖, and the ratio with the
loss-gradient norms ‖∂L/∂h_1‖, ‖∂L/∂W_r‖.  ``train_summary(ds)`` is the printed summary.
"""
from __future__ import annotations

import numpy as np

from .style import COLORS, PRETTY, new_figure, styled


def _positive(v):
    v = np.asarray(v, dtype=np.float64)
    return np.where(v > 0, v, np.nan)


@styled
def plot_training(ds):
    """Three panels over ``iteration``: losses (log), Jacobian norms (log), ratio and ∂L norms (log)."""
    fig, (a0, a1, a2) = new_figure(3, height=2.8)
    it = ds["iteration"].values
    a0.plot(it, _positive(ds["loss"]), color=COLORS["sky"], lw=0.8, label="training")
    a0.plot(it, _positive(ds["val_loss"]), color=COLORS["blue"], label="validation")
    a0.axhline(float(ds.attrs["baseline"]), color=COLORS["black"], ls="--", lw=0.8,
               label=f"baseline {float(ds.attrs['baseline']):.3g}")
    a0.set_yscale("log")
    a0.set_xlabel("iteration")
    a0.set_ylabel(f"loss ({ds.attrs['loss_kind']})")
    a0.legend(frameon=False)
    for name, color, label in (("jac_norm", COLORS["blue"], r"$\|\partial h_T/\partial h_1\|$"),
                               ("step_norm", COLORS["vermillion"], r"$\|\partial h_T/\partial h_{T-1}\|$"),
                               ("A_h_norm", COLORS["green"], r"$\|\mathcal{A}_h\| = \|\partial h_T/\partial h_0\|$")):
        a1.plot(it, _positive(ds[name]), color=color, label=label)
    a1.set_yscale("log")
    a1.set_xlabel("iteration")
    a1.set_ylabel("Jacobian 2-norm")
    a1.legend(frameon=False)
    for name, color, label in (("ratio", COLORS["black"], r"ratio $\|\partial h_T/\partial h_1\| / \|\partial h_T/\partial h_{T-1}\|$"),
                               ("dL_dh1_norm", COLORS["orange"], r"$\|\partial L/\partial h_1\|$"),
                               ("dL_dWr_norm", COLORS["purple"], r"$\|\partial L/\partial W_r\|_F$")):
        a2.plot(it, _positive(ds[name]), color=color, label=label)
    a2.set_yscale("log")
    a2.set_xlabel("iteration")
    a2.legend(frameon=False)
    model = PRETTY.get(ds.attrs.get("model", ""), ds.attrs.get("model", ""))
    fig.suptitle(f"{model} on {ds.attrs.get('task', '')} (T = {ds.attrs.get('task_steps', '')})")
    return fig


def train_summary(ds) -> str:
    """A few lines: model, task, iterations, final losses against the baseline, diagnostics."""
    last = {k: float(ds[k].values[-1]) for k in ("loss", "val_loss", "jac_norm", "ratio", "A_h_norm",
                                                 "dL_dh1_norm")}
    n = int(ds["iteration"].values[-1])
    lines = [f"{ds.attrs.get('model')} on {ds.attrs.get('task')} (T={ds.attrs.get('task_steps')}): {n} iterations"
             + (f" in {ds.attrs['seconds']:.1f} s" if "seconds" in ds.attrs else ""),
             f"  loss {last['loss']:.4g}   val_loss {last['val_loss']:.4g}   baseline {float(ds.attrs['baseline']):.4g}"
             f" ({ds.attrs.get('baseline_name', '')})"]
    if "val_accuracy" in ds:
        lines[-1] += f"   val_accuracy {float(ds['val_accuracy'].values[-1]):.3f}"
    lines.append(f"  ‖∂h_T/∂h_1‖ {last['jac_norm']:.3g}   ratio {last['ratio']:.3g}   ‖𝒜_h‖ {last['A_h_norm']:.3g}"
                 f"   ‖∂L/∂h_1‖ {last['dL_dh1_norm']:.3g}")
    return "\n".join(lines)


@styled
def plot_implicit_training(ds):
    """Two panels for an implicit-network run (``dynlab.train.implicit.train_implicit``): the
    training and validation MSE over iterations (log), and the test outputs against the targets."""
    fig, (a0, a1) = new_figure(2, height=2.8)
    a0.plot(ds["iteration"].values, _positive(ds["loss"]), color=COLORS["sky"], lw=0.8, label="training")
    a0.plot(ds["eval_iteration"].values, _positive(ds["val_loss"]), color=COLORS["blue"], label="validation")
    a0.set_yscale("log")
    a0.set_xlabel("iteration")
    a0.set_ylabel("MSE")
    a0.set_title(f"implicit net on {ds.attrs.get('task', 'task')} ({ds.attrs.get('gradient', 'exact')} gradient)")
    a0.legend(frameon=False)
    y, t = ds["Y_test"].values, ds["target_test"].values
    keep = ~np.isnan(t)
    a1.scatter(t[keep], y[keep], s=12, color=COLORS["vermillion"])
    lo, hi = float(np.nanmin(t)), float(np.nanmax(t))
    a1.plot([lo, hi], [lo, hi], color=COLORS["black"], lw=0.6, ls=":")
    a1.set_xlabel("target (test set)")
    a1.set_ylabel("network output")
    a1.set_title(f"test MSE {float(ds['test_loss']):.3g}")
    return fig


def implicit_train_summary(ds) -> str:
    """The printed summary of an implicit-network run; for XOR the table of inputs, targets, outputs."""
    n = int(ds["iteration"].values[-1]) + 1
    lines = [f"implicit net ({ds.attrs.get('gradient', 'exact')} gradient) on {ds.attrs.get('task')}: {n} iterations; "
             f"final training MSE {float(ds['loss'].values[-1]):.4g}, test MSE {float(ds['test_loss']):.4g}"]
    if ds.attrs.get("task") == "xor" and "X_test" in ds:
        X, t, y = ds["X_test"].values, ds["target_test"].values, ds["Y_test"].values
        lines.append("  x1  x2   target Y1   output Y1" + ("   target Y2   output Y2" if y.shape[1] > 1 else ""))
        for i in range(X.shape[0]):
            row = f"  {X[i, 0]:.0f}   {X[i, 1]:.0f}   {t[i, 0]:9.3f}   {y[i, 0]:9.4f}"
            if y.shape[1] > 1:
                tt = "free" if np.isnan(t[i, 1]) else f"{t[i, 1]:.3f}"
                row += f"   {tt:>9}   {y[i, 1]:9.4f}"
            lines.append(row)
    return "\n".join(lines)

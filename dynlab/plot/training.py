"""Training pictures: loss and gradient diagnostics over iterations, from a history Dataset.

``plot_training`` draws the history of ``dynlab.train_model`` (its ``TrainResult`` or the
``history`` Dataset; ``dynlab train --out``): the training and validation loss against the task's
memoryless baseline, the Jacobian norms ‖∂h_T/∂h_1‖, ‖∂h_T/∂h_{T-1}‖, ‖𝒜_h‖ = ‖∂h_T/∂h_0‖, and
the ratio with the loss-gradient norms ‖∂L/∂h_1‖, ‖∂L/∂W_r‖.  ``plot_implicit_training`` draws
an implicit network's run (``dynlab.train_implicit``).
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .labels import PRETTY
from .style import COLORS, panel_axes, styled


def history_of(result):
    """The history Dataset of a training result: a ``TrainResult`` (``.history``), the
    ``(model, history)`` pair of ``train_implicit``, or the Dataset itself."""
    if hasattr(result, "history"):
        return result.history
    if isinstance(result, tuple) and len(result) == 2 and hasattr(result[1], "data_vars"):
        return result[1]
    return result


def _positive(v):
    v = np.asarray(v, dtype=np.float64)
    return np.where(v > 0, v, np.nan)


@styled
def plot_training(ds, ax=None):
    """Three panels over ``iteration``: losses (log), Jacobian norms (log), ratio and ∂L norms (log).

    ``ds``: a ``TrainResult`` or its ``history``; ``ax``: an Axes (the losses only) or three."""
    ds = history_of(ds)
    if "loss" not in ds or "iteration" not in ds.dims:
        raise ParameterError("ds", "a training picture draws loss over iteration; this result has none")
    fig, (a0, a1, a2) = panel_axes(ax, 3, height=2.8)
    it = ds["iteration"].values
    a0.plot(it, _positive(ds["loss"]), color=COLORS["sky"], lw=0.8, label="training")
    a0.plot(it, _positive(ds["val_loss"]), color=COLORS["blue"], label="validation")
    a0.axhline(float(ds.attrs["baseline"]), color=COLORS["black"], ls="--", lw=0.8,
               label=f"baseline {float(ds.attrs['baseline']):.3g}")
    a0.set_yscale("log")
    a0.set_xlabel("iteration")
    a0.set_ylabel(f"loss ({ds.attrs['loss_kind']})")
    a0.legend(frameon=False)
    if a1 is None:
        return fig
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
    from matplotlib.ticker import MaxNLocator

    for a in (a0, a1, a2):
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    model = PRETTY.get(ds.attrs.get("model", ""), ds.attrs.get("model", ""))
    fig.suptitle(f"{model} on {ds.attrs.get('task', '')} (T = {ds.attrs.get('task_steps', '')})")
    return fig


@styled
def plot_implicit_training(ds, ax=None):
    """Two panels for an implicit-network run (``dynlab.train_implicit``'s (model, history) or
    the history): the training and validation MSE over iterations (log), and the test outputs
    against the targets.  ``ax``: an Axes (the losses only) or two."""
    ds = history_of(ds)
    fig, (a0, a1) = panel_axes(ax, 2, height=2.8)
    a0.plot(ds["iteration"].values, _positive(ds["loss"]), color=COLORS["sky"], lw=0.8, label="training")
    a0.plot(ds["eval_iteration"].values, _positive(ds["val_loss"]), color=COLORS["blue"], label="validation")
    a0.set_yscale("log")
    a0.set_xlabel("iteration")
    a0.set_ylabel("MSE")
    a0.set_title(f"implicit net on {ds.attrs.get('task', 'task')} ({ds.attrs.get('gradient', 'exact')} gradient)")
    a0.legend(frameon=False)
    if a1 is None:
        return fig
    y, t = ds["Y_test"].values, ds["target_test"].values
    keep = ~np.isnan(t)
    a1.scatter(t[keep], y[keep], s=12, color=COLORS["vermillion"])
    lo, hi = float(np.nanmin(t)), float(np.nanmax(t))
    a1.plot([lo, hi], [lo, hi], color=COLORS["black"], lw=0.6, ls=":")
    a1.set_xlabel("target (test set)")
    a1.set_ylabel("network output")
    a1.set_title(f"test MSE {float(ds['test_loss']):.3g}")
    return fig

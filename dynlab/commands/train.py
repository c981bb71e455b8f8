"""``dynlab train``: spec → training run (``dynlab.train.spec.train_spec``), and the text the
command prints for its history Dataset."""
from __future__ import annotations

import numpy as np


def train_spec(spec):
    """Run the training a ``TrainSpec`` describes (``dynlab.train.spec.train_spec``)."""
    from ..train.spec import train_spec as run

    return run(spec)


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




def train_result_summary(result) -> str:
    """The text ``dynlab train`` prints for the result of ``train_spec``: ``train_summary`` of its
    history, or ``implicit_train_summary`` for an implicit network."""
    from ..train.spec import ImplicitTrainResult

    summary = implicit_train_summary if isinstance(result, ImplicitTrainResult) else train_summary
    return summary(result.history)

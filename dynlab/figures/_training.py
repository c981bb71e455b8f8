"""Shared by the training figures: train several models on one task, stack their histories.

``histories(task, entries, …)`` trains each entry (name, registry model, settings) with
``dynlab.train_model`` on the same task and seed and returns one Dataset with the history
variables along (``model``, ``iteration``); the per-model parameters are left out (their
shapes differ), the settings of each entry are kept as a JSON attr so the run can be redone.

``n_params(model, freeze, outputs)`` counts the trained parameters of a comparison;
``standardise(task)`` standardises a task's inputs by its training split (the papers' MNIST
preprocessing).
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np

from ._recipe import train_model


def n_params(model, freeze=None, outputs: int = 0) -> int:
    """Trained parameters of a dynlab model: its parameters less the ``freeze``-held ones (an
    iRNN's α is always held fixed, so never counted), plus a linear read-out of ``outputs``
    classes on the last layer's state (D·outputs + outputs; 0: the cell alone)."""
    frozen = set(freeze or ()) | ({"alpha"} if model.name == "irnn" else set())
    cell = sum(int(np.size(v)) for k, v in model.params().items() if k not in frozen)
    return int(cell + (model.hidden * outputs + outputs if outputs else 0))


def standardise(task, labels=None, **settings):
    """``task`` with every input standardised by the training split's mean and standard deviation
    (one scalar each, as the papers' MNIST "mean 0.1307, std 0.3081"); ``labels`` maps each split's
    labels (e.g. to a binary split), ``settings`` are added to the task's settings."""
    xtr = task.data["train"][0]
    mu, sd = float(xtr.mean()), float(xtr.std())
    data = {k: ((x - mu) / sd, y if labels is None else labels(y)) for k, (x, y) in task.data.items()}
    return dataclasses.replace(task, data=data, settings=dict(task.settings, standardised=[mu, sd], **settings))

HISTORY_KEEP = ("loss", "val_loss", "val_accuracy", "jac_norm", "step_norm", "ratio", "A_h_norm", "dL_dh1_norm",
                "dL_dWr_norm")


def histories(task, entries, *, iterations, lr, batch, record_every, seed=0, sigma_eps=0.0, hidden=32,
              command=None):
    """Train every entry on ``task``; returns the stacked history Dataset.

    entries : list of (entry name, registry name, model settings, extra train_model kwargs)
    """
    import xarray as xr

    import dynlab as dl

    parts, ran = [], set()
    for entry, name, settings, extra in entries:
        m = dl.make_model(name, hidden, task.inputs, seed=seed, **settings)
        kw = dict(iterations=iterations, lr=lr, batch=batch, record_every=record_every, seed=seed,
                  sigma_eps=sigma_eps, command=command, progress=False)
        kw.update(extra)
        res = train_model(m, task, **kw)
        ran.add(res.history.attrs["backend"])            # the backend the training ran on
        h = res.history[[k for k in HISTORY_KEEP if k in res.history]]
        parts.append(h.expand_dims(model=[entry]))
    ds = xr.concat(parts, dim="model", combine_attrs="drop")
    for k in ds.data_vars:
        ds[k].attrs = parts[0][k].attrs
    ds.attrs.update({"task": task.name, "loss_kind": task.loss, "baseline": float(task.baseline),
                     "baseline_name": task.baseline_name, "task_steps": int(task.steps), "hidden": hidden,
                     "iterations": iterations, "lr": lr, "batch": batch, "seed": seed, "sigma_eps": sigma_eps,
                     "entries": json.dumps([[e, n, {k: _plain(v) for k, v in s.items()},
                                             {k: _plain(v) for k, v in x.items()}] for e, n, s, x in entries]),
                     "dynlab_version": dl.__version__, "backend": ",".join(sorted(ran)),
                     "command": command or "python"})
    return ds


def adding_histories(name, entries, quick, quick_sizes, full_sizes, *, n_train, n_val):
    """``compute`` of the adding-task training figures (iRNN paper Figs. 3 and 8): every entry
    trained on the adding task at (T, D, iterations, record_every) = quick_sizes or
    full_sizes, lr 1e-2, batch 64, the scaling against the paper's recorded in the attrs."""
    import dynlab as dl

    T, D, its, every = quick_sizes if quick else full_sizes
    task = dl.make_task("adding", T, seed=0, n_train=n_train, n_val=n_val, n_test=10)
    ds = histories(task, entries, iterations=its, lr=1e-2, batch=64, record_every=every, hidden=D,
                   command=f"dynlab figures make {name}")
    ds.attrs.update({"figure": name, "scaling": f"adding T={T}, D={D}, {its} iterations, batch 64"
                     + (" (quick)" if quick else "") + "; paper: T up to 750, D=128"})
    return ds


def _plain(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, tuple):
        return list(v)
    return v


def panel_grid(nrows: int, ncols: int, *, width: float = 3.2, height: float = 2.6):
    """(fig, axes) of an nrows × ncols grid of panels (each ``width`` × ``height`` inches) on the Agg
    canvas with the gallery's style: a readable block instead of a strip of many panels side by side.
    ``axes`` is a flat list, row by row."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..plot.style import RC

    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
        FigureCanvasAgg(fig)
        axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(nrows * ncols)]
    return fig, axes

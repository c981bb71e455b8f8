"""The iRNN paper's training figures (Figs. 3, 4, 8): the model settings they share, named once, and
training over seeds.

Every setting has one explicit name used as its legend label in every figure, so the same label
never means two settings (``label(key)``).  ``seed_runs`` trains every (setting, seed) pair with
``dynlab.train_model`` on one task and returns one Dataset over (``run``, ``seed``, ``iteration``)
with the history variables, plus per-(run, seed) numbers an ``after`` callback measures on the
trained network (so a check can work from the Dataset alone).
"""
from __future__ import annotations

import json

from ._training import n_params  # noqa: F401  (re-exported: the training figures' parameter counts)

#: eq. 5 as printed with g_0 = 0 and the sign of the paper's Remark (−h_{m−1}): the inner Euler
#: iteration drives s = g − h_{m−1} toward the equilibrium s* = φ(U s* + W x + b) (α = 1), so
#: h_m → h_{m−1} + s*(x_m) and ∂h_m/∂h_{m−1} → +I as K grows (Theorem 1 with the Remark's sign);
#: at finite K, ∂h_m/∂h_{m−1} = I − ∏_k ((1 − η)I + η φ′U).  ReLU (the paper's activation), dense
#: U ~ N(0, 0.25²/D), η₀ = 0.3 learned (as ln η).
EQ5 = {"g0": "zero", "sign": -1, "activation": "relu", "eta": 0.3, "weight_scale": 0.25}
#: The same cell with g_0 = h_{m−1}: then s_0 = 0, the inner iteration never sees h_{m−1} and
#: h_m = h_{m−1} + s_K(x_m), so ∂h_m/∂h_{m−1} = I exactly for every K (the ablation of the
#: equilibrium iteration's effect on the Jacobian).
G0PREV = dict(EQ5, g0="previous")


def entry(kind: str, K: int | None = None):
    """(key, registry name, model settings, train_model extras) of a named setting."""
    if kind == "eq5":
        return (f"irnn-eq5-K{K}", "irnn", dict(EQ5, K=K), {})
    if kind == "g0prev":
        return (f"irnn-g0prev-K{K}", "irnn", dict(G0PREV, K=K), {})
    if kind == "rnn":
        return ("rnn-tanh", "rnn", {}, {})
    raise ValueError(kind)


#: key prefix → (legend label, short label) with ``{K}`` for the inner steps; ``rnn-tanh`` has no K
_LABELS = {
    "irnn-eq5-K": ("iRNN K={K} (eq. 5: g₀=0, −h, ReLU, η₀=0.3 learned)", "K={K}"),
    "irnn-g0prev-K": ("iRNN K={K} (g₀=h, −h: ∂h_m/∂h_m−1 = I; ReLU, η₀=0.3 learned)", "K={K} (g₀=h)"),
    "rnn-tanh": ("RNN (tanh, U ~ N(0, 1/D))", "RNN"),
}


def _labels(key: str) -> tuple[str, str]:
    key = str(key)
    for prefix, pair in _LABELS.items():
        if key.startswith(prefix):
            K = key[len(prefix):]
            return tuple(p.format(K=K) for p in pair)
    return key, key


def label(key: str) -> str:
    """The one legend label of a setting key (the same in Figs. 3, 4 and 8)."""
    return _labels(key)[0]


def short_label(key: str) -> str:
    """A short form for crowded panels: ``K=5``, ``K=5 (g₀=h)``, ``RNN``."""
    return _labels(key)[1]


HISTORY_KEEP = ("val_loss", "val_accuracy", "jac_norm", "step_norm", "ratio", "dL_dh1_norm")


def seed_runs(task, entries, seeds, *, iterations, lr, batch, record_every, hidden, after=None, command=None):
    """Train every entry for every seed on ``task``; one Dataset over (run, seed, iteration).

    The model's initial weights, the read-out, the batches all follow the seed; the task data are
    the same for every run.  ``after(result) -> {name: float}`` measures extra numbers on each
    trained network, stored as (run, seed) variables.  Attrs: ``labels`` (key → legend label,
    JSON), ``params`` (key → parameter count, JSON) and the training settings.
    """
    import xarray as xr

    import dynlab as dl

    runs, params = [], {}
    for key, name, settings, extra in entries:
        per_seed = []
        for s in seeds:
            m = dl.make_model(name, hidden, task.inputs, seed=int(s), **settings)
            params[key] = n_params(m, outputs=task.outputs)  # with the read-out
            kw = dict(iterations=iterations, lr=lr, batch=batch, record_every=record_every, seed=int(s),
                      command=command, progress=False)
            kw.update(extra)
            res = dl.train_model(m, task, **kw)
            h = res.history[[k for k in HISTORY_KEEP if k in res.history]]
            h = h.drop_vars([c for c in h.coords if c != "iteration"])
            if after is not None:
                for k, v in after(res).items():
                    h[k] = float(v)
            per_seed.append(h.expand_dims(seed=[int(s)]))
        runs.append(xr.concat(per_seed, dim="seed", combine_attrs="drop").expand_dims(run=[key]))
    ds = xr.concat(runs, dim="run", combine_attrs="drop")
    ds.attrs.update({"task": task.name, "loss_kind": task.loss, "baseline": float(task.baseline),
                     "baseline_name": task.baseline_name, "task_steps": int(task.steps), "hidden": int(hidden),
                     "iterations": int(iterations), "lr": float(lr), "batch": int(batch),
                     "labels": json.dumps({e[0]: label(e[0]) for e in entries}, ensure_ascii=False),
                     "params": json.dumps(params),
                     "entries": json.dumps([[e[0], e[1], {k: v for k, v in e[2].items()}] for e in entries]),
                     "dynlab_version": dl.__version__, "backend": "numpy", "command": command or "python"})
    return ds


def labels_of(ds) -> dict:
    return json.loads(ds.attrs["labels"])


def params_of(ds) -> dict:
    return json.loads(ds.attrs["params"])


def tail_mean(da, frac: float = 0.25):
    """Mean over the last ``frac`` of the records (at least one) along ``iteration``."""
    n = da.sizes["iteration"]
    k = max(1, int(round(n * frac)))
    return da.isel(iteration=slice(n - k, n)).mean("iteration")

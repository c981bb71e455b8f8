"""The iRNN paper's training figures and tables: the cells they train, named once, and training over
seeds.

**The paper's iRNN** (every iRNN item of the gallery).  The paper says (§3.2, "Implementation",
"Hyper Parameters", §4): every experiment uses eq. 9,

    φ(P[U(h_m + h_{m−1}) + W x_m + b]) − (h_m + h_{m−1}) = 0,   P = U = I + V H (low rank),

solved by K Euler steps (SiRNN: K = 1), "ReLU as the non-linearity and Adam as the optimizer",
"both the learning rate and η's were initialized to 10⁻²", η_m^k learned "as a function of time m
and the recursion-step k", α = 1.  In dynlab: ``make_model("irnn", D, d, P="U", rank=r,
g0="previous", sign=1, activation="relu", eta=np.full((T, K), 1e-2))`` (``PAPER``, ``build``).
(A first full run of the gallery took one η per k, shared over time — the paper's parameter
counts do not change with K, which a (T, K) table would make them do —; the iRNN then reached
31 ± 2 % on the noisy-digits stand-in, against 50–62 % with the paper's per-(m, k) table in a
two-seed pilot: the table of the paper's words is what the gallery runs.  Parameter counts are
reported with the table; comparisons of model size count the weights, which grow with D.)
Where the paper leaves a choice open, one choice is made for every item:

- g₀ = h_{m−1}: the paper's Fig. 1 unfolds the recursion from it (Algorithm 1 allows 0 too); with
  g₀ = 0 and η = 10⁻² a step is h_m ≈ 10⁻² φ(·) − 10⁻² h_{m−1}, which carries nothing forward;
- the + sign of eq. 9 as printed (∂h_m/∂h_{m−1} → −I at equilibrium);
- rank r = max(1, D/8): not stated; the parameter counts of Tables 1–3 imply r ≈ 4–20 at D = 80–128;
- V ~ N(0, 0.5²/D), H ~ N(0, 1/r), W ~ N(0, 1/d), b ~ N(0, 0.1²) (dynlab's documented draws: the
  paper's "Gaussian ... IID mean zero, small variance components");
- gradient clipping at global norm 1 for every cell (the paper names none; in a pilot at T = 200,
  without it 3 of 6 ReLU iRNN runs of K = 1, 5, 10 diverged within 1000 iterations).

Every cell of a comparison gets the same optimiser (Adam, lr 10⁻²), clipping, batch and iteration
count.  Baselines: the tanh RNN (U ~ N(0, 1/D)), dynlab's LSTM (PyTorch's initialisation), FastRNN
with its step σ(α) started at η and σ(β) at 1 − η (both learned), AntisymmetricRNN at fixed γ, ε.

Every setting has one key and one legend label (``label(key)``), the same in every figure.
``seed_runs`` trains every (setting, seed) pair on one task and returns one Dataset over (``run``,
``seed``, ``iteration``) with the history variables, plus per-(run, seed) numbers an ``after``
callback measures on the trained network (so a check can work from the Dataset alone).
"""
from __future__ import annotations

import json

import numpy as np

from .._recipe import train_model
from .._training import n_params  # noqa: F401  (re-exported: the training figures' parameter counts)

#: the paper's iRNN (module docstring); K, the rank and the η table are set per model by ``build``
PAPER = {"P": "U", "g0": "previous", "sign": 1, "activation": "relu"}
#: η₀ and the Adam learning rate (the paper: "both ... initialized to 10⁻²"), and the clipping norm
ETA0 = LR = 1e-2
CLIP = 1.0


def rank_for(hidden: int) -> int:
    """The low rank r of P = U = I + V H at D hidden units: max(1, D/8) (module docstring)."""
    return max(1, int(hidden) // 8)


def _logit(p: float) -> float:
    return float(np.log(p / (1.0 - p)))


def setting(key: str):
    """(registry name, settings, freeze, legend label, short label) of a setting key.

    ``irnn-K{K}``: the paper's iRNN (eq. 9, ReLU); ``irnn-sigmoid-K{K}``: the same with sigmoid;
    ``rnn``; ``lstm``; ``gru``; ``fastrnn`` (EdgeML's start); ``fastrnn-eta{η}``; ``antisym-g{γ}-e{ε}``
    (γ, ε held fixed)."""
    key = str(key)
    for prefix, act, name in (("irnn-sigmoid-K", "sigmoid", "sigmoid"), ("irnn-K", "relu", "ReLU")):
        if key.startswith(prefix):
            K = int(key[len(prefix):])
            tag = "" if act == "relu" else f", {name}"
            return ("irnn", dict(PAPER, K=K, activation=act), None, f"iRNN K={K} (eq. 9{tag})", f"iRNN K={K}{tag}")
    if key == "rnn":
        return "rnn", {}, None, "RNN (tanh)", "RNN"
    if key == "lstm":
        return "lstm", {}, None, "LSTM", "LSTM"
    if key == "gru":
        return "gru", {}, None, "GRU", "GRU"
    if key == "fastrnn":
        return "fastrnn", {}, None, "FastRNN (EdgeML start α₀=−3, β₀=3)", "FastRNN"
    if key.startswith("fastrnn-eta"):
        eta = float(key[len("fastrnn-eta"):])
        return ("fastrnn", {"alpha": _logit(eta), "beta": _logit(1.0 - eta)}, None,
                f"FastRNN η={eta:g} (σ(α)₀=η, σ(β)₀=1−η)", f"FastRNN η={eta:g}")
    if key.startswith("antisym-g"):
        g, e = key[len("antisym-g"):].split("-e")
        return ("antisymmetric", {"gamma": float(g), "eps": float(e)}, ("gamma", "eps"),
                f"Antisymmetric γ={float(g):g}, ε={float(e):g}", f"Antisym γ={float(g):g} ε={float(e):g}")
    raise ValueError(f"unknown setting {key!r}")


def label(key: str) -> str:
    """The one legend label of a setting key (the same in every figure)."""
    return setting(key)[3]


def short_label(key: str) -> str:
    """A short form for crowded panels: ``iRNN K=5``, ``RNN``, ``FastRNN η=0.01``."""
    return setting(key)[4]


def build(key: str, hidden: int, inputs: int, steps: int, seed: int):
    """(model, freeze) of a setting key for a task of ``steps`` steps: the paper's iRNN gets rank
    ``rank_for(hidden)`` and its η table (steps, K), every η_m^k = ETA0."""
    import dynlab as dl

    name, settings, freeze, _, _ = setting(key)
    if name == "irnn":
        settings = dict(settings, rank=rank_for(hidden), eta=np.full((int(steps), settings["K"]), ETA0))
    return dl.make_model(name, hidden, inputs, seed=int(seed), **settings), freeze


def train(key: str, task, *, hidden: int, iterations: int, seed: int, batch: int = 64, record_every=None,
          diag_batch: int = 8, command=None):
    """``dl.train_model`` of one setting and seed with the gallery's optimiser (Adam, lr 10⁻², clip 1)."""

    m, freeze = build(key, hidden, task.inputs, task.steps, seed)
    return train_model(m, task, iterations=iterations, lr=LR, batch=batch, clip=CLIP,
                       record_every=record_every or iterations, seed=int(seed), diag_batch=diag_batch,
                       freeze=freeze, progress=False, command=command)


HISTORY_KEEP = ("val_loss", "val_accuracy", "jac_norm", "step_norm", "ratio", "dL_dh1_norm")


def seed_runs(task, keys, seeds, *, iterations, batch, record_every, hidden, after=None, command=None,
              diag_batch=8):
    """Train every setting key for every seed on ``task``; one Dataset over (run, seed, iteration).

    The model's initial weights, the read-out, the batches all follow the seed; the task data are
    the same for every run.  ``after(result) -> {name: float}`` measures extra numbers on each
    trained network, stored as (run, seed) variables.  Attrs: ``labels`` (key → legend label,
    JSON), ``params`` (key → parameter count incl. the read-out, JSON) and the training settings.
    """
    import xarray as xr

    import dynlab as dl

    runs, params, ran = [], {}, set()
    for key in keys:
        per_seed = []
        for s in seeds:
            res = train(key, task, hidden=hidden, iterations=iterations, seed=s, batch=batch,
                        record_every=record_every, diag_batch=diag_batch, command=command)
            params[key] = n_params(res.model, outputs=task.outputs)
            ran.add(res.history.attrs["backend"])        # the backend the training ran on
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
                     "iterations": int(iterations), "lr": LR, "clip": CLIP, "batch": int(batch),
                     "labels": json.dumps({k: label(k) for k in keys}, ensure_ascii=False),
                     "short": json.dumps({k: short_label(k) for k in keys}, ensure_ascii=False),
                     "params": json.dumps(params),
                     "dynlab_version": dl.__version__, "backend": ",".join(sorted(ran)),
                     "command": command or "python"})
    return ds


def labels_of(ds) -> dict:
    return json.loads(ds.attrs["labels"])


def short_of(ds) -> dict:
    return json.loads(ds.attrs["short"])


def params_of(ds) -> dict:
    return json.loads(ds.attrs["params"])


def tail_mean(da, frac: float = 0.25):
    """Mean over the last ``frac`` of the records (at least one) along ``iteration``."""
    n = da.sizes["iteration"]
    k = max(1, int(round(n * frac)))
    return da.isel(iteration=slice(n - k, n)).mean("iteration")


def setting_text(hidden: int, iterations: int, batch: int, seeds: int | None, quick: bool) -> str:
    """The training setting every iRNN recipe prints in its scaling."""
    return (f"D={hidden} (iRNN: eq. 9, P = U = I + VH of rank {rank_for(hidden)}, ReLU, g₀=h_(m−1), η₀=10⁻² "
            f"per (m, k)), Adam lr 10⁻², clip {CLIP:g}, batch {batch}, {iterations} iterations"
            + (f", {seeds} seeds" if seeds is not None else "") + (" (quick)" if quick else ""))

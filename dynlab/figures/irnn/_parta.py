"""Shared by irnn-fig3-add, irnn-fig5-add-length and irnn-ablation-baselines: one (T, setting, seed)
training run on the adding task, cached in process so that the recipes run in one ``dynlab figures``
call share the runs they have in common (all three train at the paper's ablation length T = 200).

Sizes (printed in each recipe's ``scaling`` and ``setting``), by scale (``_recipe.Scale``):

- *stand-in*: D = 32 hidden units (the paper: 128), batch 64 (128), Adam lr 10⁻², clip 1
  (``irnn._training``); 1000 iterations at T ≤ 200 — the paper's ablation runs 1000 iterations at
  T = 200 — and 400 at T = 400 and 750 (the paper: 2000), what the gallery's two-hour budget on two
  cores leaves for 5 seeds of 5 cells there; 4000 training sequences;
- *paper*: the paper's D = 128, batch 128, lr 10⁻², and its budget — 1000 iterations for the
  ablation at T = 200 (§4.2), 2000 for Figs. 4/5 ("we only use 2k iterations") —, 20000 training
  sequences (the paper draws them online: 128 × 2000 = 256 000 draws);
- *quick*: every T divided by 10, D = 8, batch 32, 40 iterations.

The adding task (``make_task("adding", T)``): 256 validation sequences; predicting 1 gives the
baseline MSE 1/6.  A cell has *learned something* (its competence, the gate of every arm that
decides) when its final validation MSE is below 1/6 − 1/60 (a tenth of the baseline, the minimum
effect declared from the task) beyond 2 SE: ``competent``.
"""
from __future__ import annotations

import functools
import json

from ._training import CLIP, LR, label, n_params, rank_for, short_label, train

ADD_D = {"quick": 8, "stand-in": 32, "paper": 128}
ADD_BATCH = {"quick": 32, "stand-in": 64, "paper": 128}
ADD_TRAIN = {"quick": 4000, "stand-in": 4000, "paper": 20000}
#: the minimum effect of the adding task (a tenth of the 1/6 baseline) and the competence level it sets
MIN_EFFECT = 1.0 / 60.0
COMPETENT = 1.0 / 6.0 - MIN_EFFECT
#: the paper's setting of the adding items (§4.2, §4.3.1, "Hyper Parameters")
PAPER_D, PAPER_BATCH, PAPER_LR = 128, 128, 1e-2
#: records per run (the last at the final iteration); the Jacobian diagnostics on 4 validation sequences
ADD_RECORDS = 20
DIAG_BATCH = 4
ADD_HISTORY = ("val_loss", "ratio", "step_norm", "jac_norm", "dL_dh1_norm")


def _name(scale) -> str:
    from .._recipe import Scale

    return Scale.of(scale).name


def add_T(T: int, scale) -> int:
    """The sequence length run for the paper's T (quick: T / 10)."""
    return max(5, T // 10) if _name(scale) == "quick" else T


def add_its(T: int, scale, paper_its: int = 1000) -> int:
    """Training iterations at the paper's length T (module docstring); ``paper_its``: the paper's
    budget for the item (1000 for the ablation at T = 200, 2000 for Figs. 4/5)."""
    name = _name(scale)
    if name == "paper":
        return int(paper_its)
    return 40 if name == "quick" else (1000 if T <= 200 else 400)


@functools.lru_cache(maxsize=None)
def adding_task(T: int, n_train: int = 4000):
    import dynlab as dl

    return dl.make_task("adding", T, seed=0, n_train=n_train, n_val=256, n_test=10)


def competent(name: str, values):
    """The arm gate of the adding items: final validation MSE below 1/6 − 1/60 beyond 2 SE."""
    from .._stats import level_test

    return level_test(name, values, COMPETENT, direction="below", scope="arm")


def setting_json(Ts, scale, paper_its: int = 1000) -> str:
    """Our setting (``_recipe.setting_attr``) of an adding item at ``scale``."""
    from .._recipe import setting_attr

    name = _name(scale)
    return setting_attr(data="adding task", T=[add_T(int(T), name) for T in Ts], D=ADD_D[name], batch=ADD_BATCH[name],
                        steps=sorted({add_its(int(T), name, paper_its) for T in Ts}), lr=LR)


def paper_setting(Ts, paper_its: int = 1000) -> dict:
    """The paper's setting of an adding item (D = 128, batch 128, lr 10⁻², its iterations)."""
    from .._recipe import setting

    return setting(data="adding task", T=list(Ts), D=PAPER_D, batch=PAPER_BATCH, steps=paper_its, lr=PAPER_LR)


@functools.lru_cache(maxsize=None)
def adding_run(T: int, key: str, seed: int, scale: str, paper_its: int = 1000):
    """One training run on the adding task of length ``add_T(T, quick)``: (history Dataset with
    ``ADD_HISTORY`` over ``iteration`` and ``diverged`` (0/1), parameter count incl. the read-out).

    A run whose state becomes non-finite (``DivergenceError``) keeps its records up to there and is
    scored, from there on, as the predict-1 baseline (validation MSE 1/6 at the last iteration;
    the gradient diagnostics NaN), flagged ``diverged`` = 1 — what a practitioner would keep of it."""
    from ...errors import DivergenceError
    from ._training import build

    task = adding_task(add_T(T, scale), ADD_TRAIN[scale])
    its = add_its(T, scale, paper_its)
    every = max(1, its // ADD_RECORDS)
    try:
        res = train(key, task, hidden=ADD_D[scale], iterations=its, seed=seed, batch=ADD_BATCH[scale],
                    record_every=every, diag_batch=DIAG_BATCH, command="dynlab figures make irnn-fig5-add-length")
        h, model, diverged = res.history, res.model, 0
    except DivergenceError as err:
        import numpy as np
        import xarray as xr

        part = err.partial
        last = xr.Dataset({k: (("iteration",), [1.0 / 6.0 if k == "val_loss" else np.nan])
                           for k in ADD_HISTORY}, coords={"iteration": [its]})
        h = last if part is None or part.sizes.get("iteration", 0) == 0 else xr.concat(
            [part[[k for k in ADD_HISTORY if k in part]].drop_vars([c for c in part.coords if c != "iteration"]),
             last], dim="iteration")
        model, diverged = build(key, ADD_D[scale], task.inputs, task.steps, seed)[0], 1
    h = h[[k for k in ADD_HISTORY if k in h]]
    h = h.drop_vars([c for c in h.coords if c != "iteration"])
    h["diverged"] = float(diverged)
    return h, n_params(model, outputs=task.outputs)


def adding_grid(Ts, keys, seeds, scale, seeds_of=None, paper_its: int = 1000):
    """Every (T, key, seed) run stacked: a Dataset over (T, run, seed, iteration) with the history
    variables, plus ``params`` (run) and attrs ``labels`` / ``short`` (JSON).  ``seeds_of(T, key)``
    gives the seeds of a (T, key) run where it differs from ``seeds`` (missing seeds, and keys not run at a
    T, are NaN)."""
    import xarray as xr

    scale = _name(scale)
    outer, params = [], {}
    for T in Ts:
        runs = []
        for key in keys:
            per = []
            for s in (seeds if seeds_of is None else seeds_of(T, key)):
                # the paper's budget only matters at paper scale: the stand-in runs stay shared between recipes
                h, p = adding_run(int(T), key, int(s), scale, int(paper_its) if scale == "paper" else 1000)
                params[key] = p
                per.append(h.expand_dims(seed=[int(s)]))
            if not per:          # not run at this T: NaN there
                continue
            runs.append(xr.concat(per, dim="seed", combine_attrs="drop").expand_dims(run=[key]))
        outer.append(xr.concat(runs, dim="run", combine_attrs="drop", join="outer").expand_dims(T=[int(T)]))
    ds = xr.concat(outer, dim="T", combine_attrs="drop", join="outer")
    ds["params"] = xr.DataArray([params[k] for k in keys], dims=("run",), coords={"run": list(keys)},
                                attrs={"long_name": "trainable parameters (incl. read-out)", "units": "1"})
    ds["T_run"] = xr.DataArray([add_T(int(T), scale) for T in Ts], dims=("T",),
                               attrs={"long_name": "sequence length trained (quick: paper T / 10)", "units": "steps"})
    ds["iterations_run"] = xr.DataArray([add_its(int(T), scale, paper_its) for T in Ts], dims=("T",),
                                        attrs={"long_name": "training iterations", "units": "1"})
    D = ADD_D[scale]
    ds.attrs.update({"labels": json.dumps({k: label(k) for k in keys}, ensure_ascii=False),
                     "short": json.dumps({k: short_label(k) for k in keys}, ensure_ascii=False),
                     "baseline": 1.0 / 6.0, "baseline_name": "MSE of predicting 1, Var = 1/6",
                     "competent": COMPETENT, "min_effect": MIN_EFFECT,
                     "hidden": D, "rank": rank_for(D), "batch": ADD_BATCH[scale], "lr": LR, "clip": CLIP,
                     "setting": setting_json(Ts, scale, paper_its)})
    return ds


def final(da):
    """The value at each run's last record (the end of training: runs of other lengths share the
    ``iteration`` axis with NaN where they have no record)."""
    import numpy as np
    import xarray as xr

    v = np.moveaxis(da.values, da.get_axis_num("iteration"), -1)
    ok = np.isfinite(v)
    last = np.where(ok.any(axis=-1), v.shape[-1] - 1 - np.argmax(ok[..., ::-1], axis=-1), 0)
    out = np.take_along_axis(v, last[..., None], axis=-1)[..., 0]
    return xr.DataArray(np.where(ok.any(axis=-1), out, np.nan), dims=[d for d in da.dims if d != "iteration"],
                        coords={k: c for k, c in da.coords.items() if "iteration" not in c.dims})


def scaling(Ts, seeds: int, scale, paper_its: int = 1000) -> str:
    """The adding recipes' scale-down."""
    name = _name(scale)
    D, B = ADD_D[name], ADD_BATCH[name]
    Tq = ", ".join(f"{add_T(T, name)} ({add_its(T, name, paper_its)} it.)" for T in Ts)
    return (f"adding T = {Tq}; D={D} (iRNN: eq. 9, P = U = I + VH of rank {rank_for(D)}, ReLU, g₀=h_(m−1), η₀=10⁻² "
            f"per (m, k)), Adam lr 10⁻², clip {CLIP:g}, batch {B}, {ADD_TRAIN[name]} training sequences, {seeds} seeds"
            + (" (quick: T/10)" if name == "quick" else "") + ("; the paper's sizes" if name == "paper" else
                                                                "; paper: D=128, batch 128, 1000 iterations at T=200, "
                                                                "2000 at T=100…750"))

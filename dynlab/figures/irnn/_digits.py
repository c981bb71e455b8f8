"""Shared by irnn-fig6-convergence, irnn-fig7-eigenvalues, irnn-fig8-gradnorm and
irnn-table11-activation: networks trained on the HAR-2 stand-in, cached in process so that recipes
run in one ``dynlab figures`` call share the runs they have in common.

HAR-2 (UCI smartphone activity, six activities merged into two classes, 128 steps × 9 features,
zero mean / unit variance) cannot be downloaded here; its stand-in (``binary_digits``) is
scikit-learn's 8×8 digits read pixel by pixel (T = 64, one input), the ten digits merged into two
classes the same way — {0, 1, 2, 3, 4} against {5, 6, 7, 8, 9} — every pixel standardised by the
training split's mean and standard deviation (the paper's normalisation), the split of
``make_task("digits-pixels", seed=0)`` (1497 / 150 / 150 training / validation / test sequences).

``har2_run(key, seed, scale)`` trains one setting of ``irnn._training`` (the paper's iRNN of any K
and activation, the tanh RNN) with the gallery's optimiser (Adam, lr 10⁻², clip 1), D = 32, batch
64, 600 iterations (quick: D = 8, 60), recording the history (validation loss and accuracy, the
Jacobian norms on 8 validation sequences) 30 times per run.  ``params_vars`` / ``model_from``
keep a trained iRNN's parameters in a figure's Dataset and rebuild the model from it.

At paper scale (``--scale paper --data DIR``) the task is the real HAR-2 (``make_task("har2",
data=…)``: 7352 training sequences less 735 for validation, 2947 test, T = 128, 9 channels), with the
paper's D = 80 (Table 5), batch 128 and lr 10⁻²; the paper trains "to convergence" without a
count, so we run 30 epochs (1700 iterations) — a number of ours, which the paper does not state.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .._estimate import cost_of
from ._training import setting_text, train
from .._training import standardise

D = {"quick": 8, "stand-in": 32, "paper": 80, True: 8, False: 32}
ITERATIONS = {"quick": 60, "stand-in": 600, "paper": 1700, True: 60, False: 600}
BATCHES = {"quick": 64, "stand-in": 64, "paper": 128}
BATCH = 64
RECORDS = {"quick": 6, "stand-in": 30, "paper": 34}
#: the cost of the HAR-2 items at paper scale (``_estimate``; they need the UCI HAR data, not on this machine)
PAPER_COST = "needs the UCI HAR data (--data DIR); " + cost_of("irnn-har2")
#: the paper's HAR-2 setting (§4.3.4, Tables 5, 6, "Hyper Parameters"; the training length is not stated)
PAPER_SETTING = {"data": "HAR-2", "T": 128, "D": 80, "batch": 128, "lr": 1e-2}


def _name(scale) -> str:
    from .._recipe import Scale

    return Scale.of(scale).name


def setting(scale) -> str:
    name = _name(scale)
    if name == "paper":
        return ("HAR-2 (UCI HAR, T=128, 9 channels, 6 activities merged into 2); "
                + setting_text(D[name], ITERATIONS[name], BATCHES[name], None, False))
    return ("8×8 digits read pixel by pixel (T=64), 0–4 vs 5–9, standardised, for HAR-2 (T=128, 9 features, "
            "binary); " + setting_text(D[name], ITERATIONS[name], BATCHES[name], None, name == "quick"))


def setting_json(scale) -> str:
    """Our setting (``_recipe.setting_attr``) of a HAR-2 item at ``scale``."""
    from .._recipe import setting_attr

    name = _name(scale)
    return setting_attr(data="HAR-2" if name == "paper" else "8×8 digits 0–4 vs 5–9", T=128 if name == "paper" else 64,
                        D=D[name], batch=BATCHES[name], steps=ITERATIONS[name], lr=1e-2)


def paper_setting() -> dict:
    from .._recipe import setting

    return setting(**PAPER_SETTING)


#: the real HAR-2 task per data folder (read once per process)
_HAR2 = {}


def task(scale=None):
    """The task of ``scale``: the stand-in (``binary_digits``), or the real HAR-2 at paper scale."""
    from .._recipe import Scale

    sc = Scale.of(scale if scale is not None else False)
    if not sc.paper:
        return binary_digits()
    from .._realdata import har2_task

    if sc.data not in _HAR2:
        _HAR2[sc.data] = har2_task(sc, "the HAR-2 items")
    return _HAR2[sc.data]


@functools.lru_cache(maxsize=None)
def binary_digits():
    """The HAR-2 stand-in: pixel digits, {0..4} vs {5..9}, standardised."""
    import dataclasses

    import dynlab as dl

    t = standardise(dl.make_task("digits-pixels", seed=0), labels=lambda y: (y >= 5).astype(np.int64),
                    classes="0-4 vs 5-9")
    return dataclasses.replace(t, name="digits-pixels-binary", outputs=2, baseline=math.log(2.0),
                               baseline_name="chance cross-entropy ln 2")


def majority(split: str = "test", scale=None) -> float:
    """The best constant guess on a split of the task (the larger class frequency)."""
    y = np.asarray(task(scale).data[split][1])
    return float(np.bincount(y).max() / len(y))


def har2_run(key: str, seed: int, scale):
    """The TrainResult of one setting and seed on the HAR-2 stand-in, or on HAR-2 at paper scale
    (module docstring)."""
    from .._recipe import Scale

    sc = Scale.of(scale)
    return _har2_run(key, int(seed), sc.name, sc.data)


@functools.lru_cache(maxsize=None)
def _har2_run(key: str, seed: int, name: str, data):
    from .._recipe import Scale

    its = ITERATIONS[name]
    return train(key, task(Scale(name, data)), hidden=D[name], iterations=its, seed=seed, batch=BATCHES[name],
                 record_every=max(1, its // RECORDS[name]), diag_batch=8,
                 command="dynlab figures make irnn-fig8-gradnorm")


def validation_inputs(scale=None, n: int | None = None):
    """The validation split's inputs (the first ``n``)."""
    t = task(scale)
    idx = np.arange(t.size("val") if n is None else min(int(n), t.size("val")))
    return t.batch("val", idx)[0]


def params_vars(models, seeds):
    """Dataset variables holding every seed's trained eq. 9 parameters V, H, W, b and η (the (T, K) table)."""
    import xarray as xr

    def var(name, dims, long_name):
        return xr.DataArray(np.stack([np.asarray(m.params()[name]) for m in models]), dims=("seed",) + dims,
                            coords={"seed": seeds}, attrs={"long_name": long_name, "units": "1"})

    return {"V": var("V", ("unit", "rank"), "trained V (P = U = I + V H)"),
            "H": var("H", ("rank", "unit_from"), "trained H"),
            "W": var("W", ("unit", "unit_in"), "trained W (eq. 9, before P)"),
            "b": var("b", ("unit",), "trained b (eq. 9, before P)"),
            "eta": var("eta", ("eta_time", "inner_step"), "trained η_m^k")}


def model_from(ds, seed, like):
    """The trained iRNN of ``seed`` rebuilt from a Dataset written with ``params_vars``; ``like``
    gives the settings (K, g₀, sign, activation, P)."""
    from ...models import IRNN

    p = ds.sel(seed=seed)
    return IRNN(None, p["W"].values, p["b"].values, V=p["V"].values, H=p["H"].values, eta=p["eta"].values,
                alpha=1.0, K=like.K, g0=like.g0, sign=like.sign, activation=like.activation, P=like.P)

"""Shared by irnn-fig6-convergence, irnn-fig7-eigenvalues, irnn-fig8-gradnorm and
irnn-table11-activation: networks trained on the HAR-2 stand-in, cached in process so that recipes
run in one ``dynlab figures`` call share the runs they have in common.

HAR-2 (UCI smartphone activity, six activities merged into two classes, 128 steps × 9 features,
zero mean / unit variance) cannot be downloaded here; its stand-in (``binary_digits``) is
scikit-learn's 8×8 digits read pixel by pixel (T = 64, one input), the ten digits merged into two
classes the same way — {0, 1, 2, 3, 4} against {5, 6, 7, 8, 9} — every pixel standardised by the
training split's mean and standard deviation (the paper's normalisation), the split of
``make_task("digits-pixels", seed=0)`` (1497 / 150 / 150 training / validation / test sequences).

``har2_run(key, seed, quick)`` trains one setting of ``_irnn_training`` (the paper's iRNN of any K
and activation, the tanh RNN) with the gallery's optimiser (Adam, lr 10⁻², clip 1), D = 32, batch
64, 600 iterations (quick: D = 8, 60), recording the history (validation loss and accuracy, the
Jacobian norms on 8 validation sequences) 30 times per run.  ``params_vars`` / ``model_from``
keep a trained iRNN's parameters in a figure's Dataset and rebuild the model from it.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ._irnn_training import setting_text, train
from ._training import standardise

D = {True: 8, False: 32}
ITERATIONS = {True: 60, False: 600}
BATCH = 64
RECORDS = {True: 6, False: 30}


def setting(quick: bool) -> str:
    return ("8×8 digits read pixel by pixel (T=64), 0–4 vs 5–9, standardised, for HAR-2 (T=128, 9 features, "
            "binary); " + setting_text(D[bool(quick)], ITERATIONS[bool(quick)], BATCH, None, quick))


@functools.lru_cache(maxsize=None)
def binary_digits():
    """The HAR-2 stand-in: pixel digits, {0..4} vs {5..9}, standardised."""
    import dataclasses

    import dynlab as dl

    t = standardise(dl.make_task("digits-pixels", seed=0), labels=lambda y: (y >= 5).astype(np.int64),
                    classes="0-4 vs 5-9")
    return dataclasses.replace(t, name="digits-pixels-binary", outputs=2, baseline=math.log(2.0),
                               baseline_name="chance cross-entropy ln 2")


def majority(split: str = "test") -> float:
    """The best constant guess on a split of the stand-in (the larger class frequency)."""
    y = binary_digits().data[split][1]
    return float(np.bincount(y).max() / len(y))


@functools.lru_cache(maxsize=None)
def har2_run(key: str, seed: int, quick: bool):
    """The TrainResult of one setting and seed on the HAR-2 stand-in (module docstring)."""
    its = ITERATIONS[bool(quick)]
    return train(key, binary_digits(), hidden=D[bool(quick)], iterations=its, seed=seed, batch=BATCH,
                 record_every=max(1, its // RECORDS[bool(quick)]), diag_batch=8,
                 command="dynlab figures make irnn-fig8-gradnorm")


def validation_inputs():
    t = binary_digits()
    return t.batch("val", np.arange(t.size("val")))[0]


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
    from ..models import IRNN

    p = ds.sel(seed=seed)
    return IRNN(None, p["W"].values, p["b"].values, V=p["V"].values, H=p["H"].values, eta=p["eta"].values,
                alpha=1.0, K=like.K, g0=like.g0, sign=like.sign, activation=like.activation, P=like.P)

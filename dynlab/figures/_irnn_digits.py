"""Shared by irnn-fig6-convergence and irnn-fig7-eigenvalues: iRNNs trained by dynlab on the
MNIST / HAR-2 stand-in (scikit-learn's 8×8 digits read pixel by pixel, T = 64).

``trained(seed, quick)`` trains one tanh iRNN (K = 5, η₀ = 0.5 learnable, α = 1 fixed, dense U at
the default weight scale 0.5) with Adam and returns (model, validation accuracy, validation inputs);
the result is cached in-process, so the two figures run in one ``dynlab figures`` call share the
training of the seeds they both use.  ``params_vars`` / ``model_from`` keep the trained
parameters in a figure's Dataset and rebuild the model from it.
"""
from __future__ import annotations

import functools

import numpy as np

D = 32
K = 5
ETA0 = 0.5
LR, BATCH = 1e-2, 64
ITERATIONS = {True: 100, False: 300}


def setting(quick: bool) -> str:
    return (f"tanh iRNN D={D}, K={K}, η₀={ETA0} (learned), α=1, trained by dynlab on 8×8 digits read pixel by "
            f"pixel (T=64, the MNIST/HAR-2 stand-in) for {ITERATIONS[bool(quick)]} Adam iterations "
            f"(lr {LR}, batch {BATCH})")


@functools.lru_cache(maxsize=None)
def task():
    import dynlab as dl

    return dl.make_task("digits-pixels", seed=0)


@functools.lru_cache(maxsize=None)
def trained(seed: int, quick: bool):
    """(trained model, validation accuracy, validation inputs (N, 64, 1)) of one seed."""
    import dynlab as dl
    from ..train.loop import evaluate

    t = task()
    m = dl.make_model("irnn", D, t.inputs, K=K, eta=ETA0, seed=seed)
    r = dl.train_model(m, t, iterations=ITERATIONS[bool(quick)], lr=LR, batch=BATCH,
                       record_every=ITERATIONS[bool(quick)], seed=seed, progress=False)
    acc = float(evaluate(r.model, r.readout, t, "val")["accuracy"])
    xv, _ = t.batch("val", np.arange(t.size("val")))
    return r.model, acc, xv


def params_vars(models, seeds):
    """Dataset variables holding every seed's trained U, W, b and η (dims seed, unit, unit2, unit_in)."""
    import xarray as xr

    return {"U": xr.DataArray(np.stack([m.U for m in models]), dims=("seed", "unit", "unit2"),
                              coords={"seed": seeds}, attrs={"long_name": "trained U", "units": "1"}),
            "W": xr.DataArray(np.stack([m.W for m in models]), dims=("seed", "unit", "unit_in"),
                              coords={"seed": seeds}, attrs={"long_name": "trained W", "units": "1"}),
            "b": xr.DataArray(np.stack([m.b for m in models]), dims=("seed", "unit"), coords={"seed": seeds},
                              attrs={"long_name": "trained b", "units": "1"}),
            "eta": xr.DataArray(np.array([float(np.asarray(m.eta).ravel()[0]) for m in models]), dims=("seed",),
                                coords={"seed": seeds}, attrs={"long_name": "trained η", "units": "1"})}


def model_from(ds, seed):
    """The trained iRNN of ``seed`` rebuilt from a Dataset written with ``params_vars``."""
    from ..models import IRNN

    p = ds.sel(seed=seed)
    return IRNN(U=p["U"].values, W=p["W"].values, b=p["b"].values, eta=float(p["eta"]), alpha=1.0, K=K,
                g0="zero", activation="tanh")

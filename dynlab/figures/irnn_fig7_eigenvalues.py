"""iRNN paper Fig. 7: eigenvalues of ∇φ·U − I over every point of a dataset of inputs.

The spectra are taken at s_m = h_m + h_{m-1} along the trajectories of a batch of
random-walk sequences (``dynlab.spectrum``); the claim is that every real part is negative,
i.e. each point of the equilibrium manifold the iRNN tracks is stable.
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe

NAME = "irnn-fig7-eigenvalues"


def compute(quick: bool):
    import dynlab as dl

    D, B, T = (32, 4, 100) if quick else (128, 8, 250)
    m = dl.make_model("irnn", hidden=D, inputs=1, K=5, eta=0.5, seed=0)
    x = dl.tasks.random_walk(steps=T, inputs=1, variance=10.0, batch=B, seed=0)
    ds = dl.spectrum(m, x)
    ds.attrs["scaling"] = (f"random iRNN (weight scale 0.5, η = 0.5, K = 5, α = 1), D = {D}, {B} random-walk "
                           f"sequences × {T} steps = {B * T} points; the paper shows a trained model")
    return ds


def check(ds):
    re = ds["eig_real"].values
    return {"passed": bool(np.all(re < 0)) and bool(np.all(ds["stability"].values == 1)),
            "max_real_part": float(re.max()), "min_real_part": float(re.min()),
            "points": int(ds["max_real"].size), "eigenvalues": int(re.size),
            "max_step_radius": float(ds["step_radius"].max())}


def draw(ds):
    from ..plot.stability import plot_spectrum

    fig = plot_spectrum(ds)
    fig.suptitle(ds.attrs.get("scaling", ""), fontsize=6.5)
    return fig


RECIPE = Recipe(name=NAME, source="iRNN Fig. 7",
                claim="every eigenvalue of ∇φU − I over the dataset has a negative real part",
                compute=compute, draw=draw, check=check)

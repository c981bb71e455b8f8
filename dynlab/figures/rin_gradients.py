"""Recurrent Identity Networks note: gradient norms ‖∂h_T/∂h_t‖₂ over T − t for the RIN, the
identity-initialised ReLU RNN (IRNN of Le et al.) and a vanilla tanh RNN, on the same input.

RIN h_t = relu(W x_t + (U + I) h_{t-1} + b) with U drawn near zero (weight scale 0.01, so
U + I ≈ I, the note's identity surrogate); IRNN U = I, b = 0, relu; RNN tanh with weight
scale 1.  Input: Gaussian noise (d = 4, variance 1).  D = 32; T = 200 (quick: 100).
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe

NAME = "rin-gradients"
#: (entry name, registry name, settings) of the three cells compared.
CELLS = (("rin", "rin", {"weight_scale": 0.01}),
         ("irnn-le", "rnn", {"activation": "relu", "identity_init": True}),
         ("rnn-tanh", "rnn", {}))


def compute(quick: bool):
    import xarray as xr

    import dynlab as dl

    T, D, d = (100 if quick else 200), 32, 4
    x = dl.tasks.noise(steps=T, inputs=d, variance=1.0, seed=0)
    parts = []
    for entry, name, settings in CELLS:
        m = dl.make_model(name, hidden=D, inputs=d, seed=0, **settings)
        g = dl.gradient_norms(m, x, command=f"dynlab figures make {NAME}")
        parts.append(g[["jac_norm", "log_jac_norm", "step_norm", "ratio"]].expand_dims(model=[entry]))
    ds = xr.concat(parts, dim="model")
    ds["x"] = xr.DataArray(x, dims=("time", "unit_in"), attrs={"long_name": "input x_t", "units": "1"})
    ds.attrs.update({"figure": NAME, "hidden": D, "inputs": d, "steps": T, "seed": 0, "input": "noise",
                     "variance": 1.0, "dynlab_version": dl.__version__, "command": f"dynlab figures make {NAME}",
                     "scaling": f"D={D}, T={T}" + (" (quick)" if quick else "")})
    return ds


def check(ds):
    rin = ds["log_jac_norm"].sel(model="rin").values / np.log(10)
    tanh = ds["log_jac_norm"].sel(model="rnn-tanh").values / np.log(10)
    out = {"rin_log10_min": float(rin.min()), "rin_log10_max": float(rin.max()),
           "irnn_le_log10_min": float(ds["log_jac_norm"].sel(model="irnn-le").min() / np.log(10)),
           "rnn_tanh_log10_at_t1": float(tanh[0])}
    out["passed"] = bool(out["rin_log10_min"] >= -1 and out["rin_log10_max"] <= 1 and out["rnn_tanh_log10_at_t1"] < -6)
    return out


def draw(ds):
    from ..plot.style import CYCLE, new_figure, styled

    @styled
    def _draw():
        fig, (ax,) = new_figure(1, height=2.8)
        T = ds.sizes["time"]
        lag = T - ds["time"].values
        labels = {"rin": "RIN (U + I, U≈0)", "irnn-le": "IRNN (ReLU, U = I)", "rnn-tanh": "RNN (tanh)"}
        for i, name in enumerate(ds["model"].values):
            y = ds["log_jac_norm"].sel(model=name).values / np.log(10)
            ax.plot(lag, y, color=CYCLE[i], label=f"{labels.get(str(name), str(name))}, "
                                                  f"ratio {float(ds['ratio'].sel(model=name)):.3g}")
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set_xlabel("T − t (steps back from the end)")
        ax.set_ylabel(r"$\log_{10}\|\partial h_T/\partial h_t\|_2$")
        ax.set_title(f"RIN gradient flow ({ds.attrs.get('scaling', '')})")
        ax.legend(frameon=False, loc="lower left")
        return fig

    return _draw()


RECIPE = Recipe(NAME, "RIN note", "RIN keeps ‖∂h_T/∂h_t‖ near 1 (within a decade) while a tanh RNN's vanishes",
                compute, draw, check)

"""MASO paper Figs. 4 and 10: training with a random initial state h_0 = ε ~ N(0, σ_ε² I) —
‖𝒜_h‖ = ‖∂h_T/∂h_0‖₂, ‖∂L/∂W_r‖ and the validation loss over training for several σ_ε.

A ReLU RNN (D = 16 quick / 32 full, weight scale 0.9) on the ternary adding task, T = 10
(README: equally likely classes, chance cross-entropy ln 3), Adam at lr 3e-3, the same data
and batches for every σ_ε (ε is drawn afresh every iteration); one run (quick) or three seeds
(full), norms averaged geometrically over the runs.  (At T = 20 a single seed gave
‖𝒜_h‖ ≈ 1.8, 0.26, 0.76 for σ_ε = 0, 0.5, 2: the ordering of the two larger σ_ε is not robust
for one run, hence the seeds.)  The random h_0 adds, to second order,
σ_ε²/(2N) Σ Tr(Mᵀ(diag p − ppᵀ)M), M = W_out 𝒜_h, to the expected loss, so a larger σ_ε
trains a smaller ‖𝒜_h‖.  (The closed-form regulariser against Monte Carlo, the other half of
this figure in DESIGN §6, belongs to the MASO partition analysis and is not drawn here.)
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe
from ._training import histories

NAME = "maso-fig4-random-h0"
SIGMAS = (0.0, 0.5, 2.0)


def compute(quick: bool):
    import xarray as xr

    import dynlab as dl

    T, D, its, every, seeds = (10, 16, 200, 10, (0,)) if quick else (10, 32, 400, 20, (0, 1, 2))
    task = dl.make_task("adding-ternary", T, seed=0, n_train=4000, n_val=300, n_test=10)
    entries = [("rnn", "rnn", {"activation": "relu", "weight_scale": 0.9}, {})]
    by_sigma = []
    for s in SIGMAS:
        runs = [histories(task, entries, iterations=its, lr=3e-3, batch=64, record_every=every, hidden=D, seed=k,
                          sigma_eps=s, command=f"dynlab figures make {NAME}").isel(model=0, drop=True)
                for k in seeds]
        by_sigma.append(xr.concat(runs, dim=xr.DataArray(np.asarray(seeds), dims="run",
                                                         attrs={"long_name": "seed of the run", "units": "1"}),
                                  combine_attrs="override"))
    ds = xr.concat(by_sigma, dim=xr.DataArray(np.asarray(SIGMAS), dims="sigma_eps",
                                              attrs={"long_name": "σ_ε of the random h_0", "units": "1"}),
                   combine_attrs="override")
    for k in ("sigma_eps", "seed"):
        ds.attrs.pop(k, None)
    ds.attrs.update({"figure": NAME, "seeds": ",".join(map(str, seeds)),
                     "scaling": f"ternary adding T={T}, ReLU RNN D={D}, {its} iterations, batch 64, "
                                f"{len(seeds)} seed(s)" + (" (quick)" if quick else "")})
    return ds


def _late_mean(ds):
    """‖𝒜_h‖ averaged over the second half of training and over the runs (geometric over runs)."""
    half = ds.sizes["iteration"] // 2
    late = ds["A_h_norm"].isel(iteration=slice(half, None)).mean("iteration")
    return np.exp(np.log(late).mean("run"))


def check(ds):
    late = _late_mean(ds)
    out = {f"mean_A_h_sigma_{s:g}": float(late.sel(sigma_eps=s)) for s in ds["sigma_eps"].values}
    v = [out[f"mean_A_h_sigma_{s:g}"] for s in ds["sigma_eps"].values]
    out["passed"] = bool(all(a > b for a, b in zip(v, v[1:])))
    return out


def draw(ds):
    from ..plot.style import CYCLE, new_figure, styled

    @styled
    def _draw():
        fig, axes = new_figure(3, height=2.7)
        it = ds["iteration"].values
        for i, s in enumerate(ds["sigma_eps"].values):
            kw = dict(color=CYCLE[i], label=f"σ_ε = {s:g}")
            sel = ds.sel(sigma_eps=s)   # geometric mean over the runs for the norms, mean for the loss
            axes[0].plot(it, np.exp(np.log(sel["A_h_norm"]).mean("run")), **kw)
            axes[1].plot(it, np.exp(np.log(sel["dL_dWr_norm"]).mean("run")), **kw)
            axes[2].plot(it, sel["val_loss"].mean("run"), **kw)
        axes[0].set_yscale("log")
        axes[1].set_yscale("log")
        axes[2].axhline(float(ds.attrs["baseline"]), color="k", ls=":", lw=0.8, label="chance ln 3")
        for ax, ylabel in zip(axes, (r"$\|\mathcal{A}_h\|_2 = \|\partial h_T/\partial h_0\|_2$",
                                     r"$\|\partial L/\partial W_r\|_F$", "validation cross-entropy")):
            ax.set_xlabel("training iteration")
            ax.set_ylabel(ylabel)
        axes[2].legend(frameon=False)
        fig.suptitle(f"random initial state — {ds.attrs.get('scaling', '')}", fontsize=7.5)
        return fig

    return _draw()


RECIPE = Recipe(NAME, "MASO Figs. 4, 10", "a larger σ_ε of the random initial state gives a smaller ‖𝒜_h‖ "
                                         "during training (mean over the second half)", compute, draw, check)

"""iRNN paper Fig. 8: ‖∂h_T/∂h_1‖₂ (log scale) over training, vanilla RNN against iRNN.

All three models are trained on the adding task (same data, seed, batch and optimiser) with
exact BPTT gradients; every few iterations ``dynlab.train_model`` records ‖∂h_T/∂h_1‖₂ on
validation sequences.  Models: a tanh RNN (weight scale 1); the iRNN of eq. 5 (K = 5, η₀ = 0.5,
g_0 = 0, tanh, dense U), whose inner iteration approaches the equilibrium where
∂h_m/∂h_{m-1} → −I; and the iRNN set up as in §3.2 (U = I + VH of rank 4, ReLU, g_0 = h_{m-1}
with the − sign, η₀ = 0.1), for which ∂h_m/∂h_{m-1} = I exactly.
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe
from ._training import adding_histories

NAME = "irnn-fig8-gradnorm"
ENTRIES = (
    ("rnn", "rnn", {}, {}),
    ("irnn-eq5-K5", "irnn", {"K": 5, "eta": 0.5, "g0": "zero", "activation": "tanh"}, {}),
    ("irnn-lowrank-K5", "irnn", {"K": 5, "rank": 4, "g0": "previous", "sign": -1, "activation": "relu", "eta": 0.1,
                                 "weight_scale": 0.05}, {}),
)
LABELS = {"rnn": "RNN (tanh)", "irnn-eq5-K5": "iRNN K=5 (eq. 5, g₀=0)",
          "irnn-lowrank-K5": "iRNN K=5 (§3.2: I+VH, ReLU, g₀=h)"}


def compute(quick: bool):
    return adding_histories(NAME, ENTRIES, quick, (40, 16, 60, 5), (100, 32, 300, 10), n_train=2000, n_val=200)


def check(ds):
    lg = np.log10(ds["jac_norm"])
    out = {}
    for m in ("irnn-eq5-K5", "irnn-lowrank-K5"):
        v = lg.sel(model=m).values
        out[f"{m}_log10_min"], out[f"{m}_log10_max"] = float(v.min()), float(v.max())
    out["rnn_log10_max"] = float(lg.sel(model="rnn").values.max())
    out["passed"] = bool(all(abs(out[f"{m}_log10_{e}"]) <= 1 for m in ("irnn-eq5-K5", "irnn-lowrank-K5")
                             for e in ("min", "max")) and out["rnn_log10_max"] < -3)
    return out


def draw(ds):
    from ..plot.style import CYCLE, new_figure, styled

    @styled
    def _draw():
        fig, (ax,) = new_figure(1, height=2.8)
        it = ds["iteration"].values
        for i, m in enumerate(ds["model"].values):
            ax.plot(it, ds["jac_norm"].sel(model=m).values, color=CYCLE[i], label=LABELS.get(str(m), str(m)))
        ax.set_yscale("log")
        ax.axhline(1.0, color="0.6", lw=0.6)
        ax.set_xlabel("training iteration")
        ax.set_ylabel(r"$\|\partial h_T/\partial h_1\|_2$")
        scaling = ds.attrs.get("scaling", "").replace("; ", "\n")
        ax.set_title(f"adding task: gradient norm over training\n{scaling}", fontsize=6.5)
        lo = float(np.nanmin(ds["jac_norm"].values))
        ax.set_ylim(top=1e6, bottom=max(lo / 10, 1e-300))   # room above the lines for the legend
        ax.legend(frameon=False, loc="upper right", fontsize=6)
        return fig

    return _draw()


RECIPE = Recipe(NAME, "iRNN Fig. 8", "over training, the iRNN's ‖∂h_T/∂h_1‖ stays within a decade of 1 while "
                                    "the RNN's vanishes (below 1e-3)", compute, draw, check)

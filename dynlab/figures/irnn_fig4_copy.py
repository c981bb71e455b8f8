"""iRNN paper Fig. 4: the copy-memory task — cross-entropy over iterations against the
memoryless baseline 10 ln 8/(T + 20).

Models trained with exact BPTT gradients (same data, seed, batch, Adam at lr 1e-2): the iRNN
set up as in §3.2 (U = I + VH of rank 4, ReLU, g_0 = h_{m-1} with the − sign, learnable η₀ =
0.1, K = 5), the iRNN of eq. 5 (g_0 = h_{m-1}, tanh, dense U, η₀ = 0.5, K = 5) and a tanh RNN.
"""
from __future__ import annotations

from ._recipe import Recipe
from ._training import histories

NAME = "irnn-fig4-copy"
ENTRIES = (
    ("irnn-lowrank-K5", "irnn", {"K": 5, "rank": 4, "g0": "previous", "sign": -1, "activation": "relu", "eta": 0.1,
                                 "weight_scale": 0.05}, {}),
    ("irnn-K5", "irnn", {"K": 5, "eta": 0.5, "g0": "previous", "activation": "tanh"}, {}),
    ("rnn", "rnn", {}, {}),
)
LABELS = {"irnn-lowrank-K5": "iRNN K=5 (§3.2: I+VH, ReLU)", "irnn-K5": "iRNN K=5 (eq. 5, tanh)", "rnn": "RNN (tanh)"}


def compute(quick: bool):
    import dynlab as dl

    T, D, its, every = (10, 32, 150, 10) if quick else (30, 64, 500, 20)
    task = dl.make_task("copy", T, seed=0, n_train=4000, n_val=300, n_test=10)
    ds = histories(task, ENTRIES, iterations=its, lr=1e-2, batch=64, record_every=every, hidden=D,
                   command=f"dynlab figures make {NAME}")
    ds.attrs.update({"figure": NAME, "delay": T, "scaling": f"copy delay T={T} (length T+20), D={D}, {its} iterations,"
                     f" batch 64" + (" (quick)" if quick else "") + "; paper: T up to 1000, D=128"})
    return ds


def check(ds):
    final = ds.isel(iteration=-1)
    out = {f"val_loss_{m}": float(final["val_loss"].sel(model=m)) for m in ds["model"].values}
    out["baseline"] = float(ds.attrs["baseline"])
    out["best_irnn_below_baseline_by"] = out["baseline"] - min(out["val_loss_irnn-lowrank-K5"], out["val_loss_irnn-K5"])
    out["passed"] = bool(out["best_irnn_below_baseline_by"] > 0)
    return out


def draw(ds):
    from ..plot.style import CYCLE, new_figure, styled

    @styled
    def _draw():
        fig, (ax, ax2) = new_figure(2, height=2.8)
        it = ds["iteration"].values
        for i, m in enumerate(ds["model"].values):
            ax.plot(it, ds["val_loss"].sel(model=m), color=CYCLE[i], label=LABELS.get(str(m), str(m)))
            ax2.plot(it, ds["val_accuracy"].sel(model=m), color=CYCLE[i])
        ax.axhline(float(ds.attrs["baseline"]), color="k", ls=":", lw=0.8,
                   label=f"memoryless 10 ln 8/(T+20) = {float(ds.attrs['baseline']):.3f}")
        ax.set_xlabel("training iteration")
        ax.set_ylabel("validation cross-entropy per step")
        ax.legend(frameon=False, fontsize=6)
        ax2.set_xlabel("training iteration")
        ax2.set_ylabel("validation accuracy per step")
        fig.suptitle(f"copy task — {ds.attrs.get('scaling', '')}", fontsize=7.5)
        return fig

    return _draw()


RECIPE = Recipe(NAME, "iRNN Fig. 4", "the iRNN's copy-task cross-entropy goes below the memoryless baseline "
                                    "10 ln 8/(T+20)", compute, draw, check)

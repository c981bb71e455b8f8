"""iRNN paper Fig. 8: ‖∂h_T/∂h_1‖₂ over training, vanilla RNN against iRNN, on a stand-in for HAR-2.

The paper trains on HAR-2 (9 sensor channels, 128 steps, 2 classes); here both networks are trained
on scikit-learn's 8×8 digits read pixel by pixel (T = 64, one input, the 10 classes kept: the
claim is about the gradient through time, which the number of classes does not enter), with
exact BPTT (Adam, lr 1e-2, batch 64) for each seed on the same data split.  Models: the tanh RNN
(U ~ N(0, 1/D)) and the iRNN of eq. 5 with g₀ = 0 and the Remark's −h (ReLU, dense
U ~ N(0, 0.25²/D), η₀ = 0.3 learned, K = 5) — the same setting, under the same name, as in the
adding-task figure.  Every few iterations ``dynlab.train_model`` records ‖∂h_T/∂h_1‖₂ (geometric
mean over 8 validation sequences from h₀ = 0).

Per seed: the largest distance of log₁₀‖∂h_T/∂h_1‖ from 0 over all records of the run.  The claim
("the iRNN's back-propagated gradient stays close to 1 over training") holds when that distance is
below one decade beyond 2 standard errors over seeds.  Negative control: the same check on the
RNN, whose gradient the paper reports vanishing.  Panels: each model on its own log axis, so
neither squashes the other, and the validation accuracy.
"""
from __future__ import annotations

import numpy as np

from ._irnn_training import entry, labels_of, params_of, seed_runs
from ._recipe import Recipe
from ._stats import beyond_2se, seeds_for

NAME = "irnn-fig8-gradnorm"
IRNN_KEY, RNN_KEY = "irnn-eq5-K5", "rnn-tanh"
ENTRIES = (entry("eq5", 5), entry("rnn"))
QUICK = (16, 60, 10)        # D, iterations, record_every
FULL = (32, 300, 10)
DECADES = 1.0


def compute(quick: bool):
    import dynlab as dl

    D, its, every = QUICK if quick else FULL
    seeds = seeds_for(quick)
    task = dl.make_task("digits-pixels", seed=0)
    ds = seed_runs(task, ENTRIES, seeds, iterations=its, lr=1e-2, batch=64, record_every=every, hidden=D,
                   command=f"dynlab figures make {NAME}")
    ds.attrs.update({"figure": NAME, "scaling": (
        f"scikit-learn digits pixel by pixel (T=64, 10 classes, {task.size('train')} training images) for HAR-2 "
        f"(T=128, 2 classes, 7352); D={D}, {its} iterations, batch 64, {len(seeds)} seeds"
        + (" (quick)" if quick else "") + "; paper: D=80")})
    return ds


def _worst(ds, key):
    """Per seed: max over records of |log10 ‖∂h_T/∂h_1‖|, and the min / max of log10 itself."""
    lg = np.log10(ds["jac_norm"].sel(run=key))
    return (np.abs(lg).max("iteration").values.astype(float), lg.min("iteration").values.astype(float),
            lg.max("iteration").values.astype(float))


def _settles(ds, key):
    """Per seed: the fraction of records within a decade of 1, and the first recorded iteration
    from which every later record is within it (NaN when the last one is not)."""
    lg = np.abs(np.log10(ds["jac_norm"].sel(run=key).values)) <= DECADES     # (seed, iteration)
    it = ds["iteration"].values
    frac = lg.mean(axis=1)
    first = []
    for row in lg:
        out = np.flatnonzero(~row)
        first.append(float(it[0]) if out.size == 0 else (float(it[out[-1] + 1]) if out[-1] + 1 < it.size
                                                          else float("nan")))
    return frac.astype(float), np.asarray(first)


def check(ds):
    w, lo, hi = _worst(ds, IRNN_KEY)
    frac, first = _settles(ds, IRNN_KEY)
    fracr, firstr = _settles(ds, RNN_KEY)
    wr, lor, hir = _worst(ds, RNN_KEY)
    t = beyond_2se(DECADES - w)                   # positive: within a decade at every record
    tc = beyond_2se(DECADES - wr)
    acc = ds["val_accuracy"].isel(iteration=-1)
    per_seed = [{"seed": int(s), "irnn_max_abs_log10": float(w[i]), "irnn_log10_min": float(lo[i]),
                 "irnn_log10_max": float(hi[i]), "rnn_max_abs_log10": float(wr[i]), "rnn_log10_min": float(lor[i]),
                 "irnn_frac_within": float(frac[i]), "irnn_within_from_it": float(first[i]),
                 "rnn_frac_within": float(fracr[i]),
                 "irnn_val_acc": float(acc.sel(run=IRNN_KEY)[i]), "rnn_val_acc": float(acc.sel(run=RNN_KEY)[i])}
                for i, s in enumerate(ds["seed"].values)]
    out = {"passed": bool(t["passed"]),
           "iRNN max |log10 ‖∂h_T/∂h_1‖| (mean ± SE)": f"{t['mean'] * -1 + DECADES:.3g} ± {t['se']:.2g}",
           "iRNN log10 range over all seeds": [float(lo.min()), float(hi.max())],
           "RNN log10 range over all seeds": [float(lor.min()), float(hir.max())],
           "records within a decade: iRNN, RNN": [float(frac.mean()), float(fracr.mean())],
           "iRNN within a decade from iteration (per seed)": [float(f) for f in first],
           "final val accuracy iRNN": float(acc.sel(run=IRNN_KEY).mean()),
           "final val accuracy RNN": float(acc.sel(run=RNN_KEY).mean()),
           "parameters": ", ".join(f"{labels_of(ds)[k].split(' (')[0]}: {v}" for k, v in params_of(ds).items()),
           "per_seed": per_seed,
           "control": {"setting": "the tanh RNN trained the same way",
                       "measured": {"RNN max |log10 ‖∂h_T/∂h_1‖| (mean ± SE)": f"{DECADES - tc['mean']:.3g} ± "
                                                                               f"{tc['se']:.2g}"},
                       "passed": bool(tc["passed"])}}
    if not t["passed"]:
        out["finding"] = (f"the iRNN's ‖∂h_T/∂h_1‖ leaves the decade around 1: per seed the largest |log10| over "
                          f"training is {DECADES - t['mean']:.3g} ± {t['se']:.2g} (log10 from {lo.min():.3g} to "
                          f"{hi.max():.3g}), because it starts far below 1 (mean log10 at the first "
                          f"record, iteration {int(ds['iteration'][0])}: "
                          f"{float(np.log10(ds['jac_norm'].sel(run=IRNN_KEY).isel(iteration=0)).mean()):.3g}); it is within the decade on {frac.mean():.0%} of the records "
                          f"and stays there from iterations {', '.join(f'{f:.0f}' for f in first)} on (per seed). "
                          f"The RNN's log10 spans {lor.min():.3g} to {hir.max():.3g}, within the decade on "
                          f"{fracr.mean():.0%} of the records")
    return out


def draw(ds):
    from ..plot.style import CYCLE, new_figure, styled

    @styled
    def _draw():
        fig, axes = new_figure(3, height=3.0)
        it = ds["iteration"].values
        labels = labels_of(ds)
        colors = {IRNN_KEY: CYCLE[0], RNN_KEY: CYCLE[1]}
        for ax, key in zip(axes[:2], (IRNN_KEY, RNN_KEY)):
            sub = ds.sel(run=key)
            for s in sub["seed"].values:
                ax.plot(it, sub["jac_norm"].sel(seed=s), color=colors[key], lw=0.8, alpha=0.8)
            ax.axhspan(10 ** -DECADES, 10 ** DECADES, color="0.92", zorder=0, label="within a decade of 1")
            ax.axhline(1.0, color="k", lw=0.6, ls=":")
            ax.set_yscale("log")
            ax.set_xlabel("training iteration")
            ax.set_ylabel(r"$\|\partial h_T/\partial h_1\|_2$ (one line per seed)")
            ax.set_title(labels[key], fontsize=7)
            ax.legend(frameon=False, fontsize=6.5, loc="lower right")
        lo, hi = axes[0].get_ylim()
        axes[0].set_ylim(min(lo, 10 ** (-DECADES - 0.5)), max(hi, 10 ** (DECADES + 0.5)))
        for key in (IRNN_KEY, RNN_KEY):
            sub = ds.sel(run=key)
            for s in sub["seed"].values:
                axes[2].plot(it, sub["val_accuracy"].sel(seed=s), color=colors[key], lw=0.6, alpha=0.6)
            axes[2].plot(it, sub["val_accuracy"].mean("seed"), color=colors[key], lw=1.5,
                         label=labels[key].split(" (")[0] + " (mean)")
        axes[2].axhline(0.1, color="k", lw=0.6, ls=":")
        axes[2].set_ylim(0, 1)
        axes[2].set_xlabel("training iteration")
        axes[2].set_ylabel("validation accuracy")
        axes[2].set_title("accuracy (chance 0.1)")
        axes[2].legend(frameon=False, fontsize=6.5, loc="upper left")
        fig.suptitle(f"gradient norm over training — {ds.attrs.get('scaling', '')}", fontsize=7)
        return fig

    return _draw()


RECIPE = Recipe(NAME, "iRNN Fig. 8",
                "over training, the iRNN's ‖∂h_T/∂h_1‖ stays within a decade of 1 (largest |log10| over the run "
                "below 1 beyond 2 SE over seeds), where the RNN's vanishes", compute, draw, check, trains=True)

"""iRNN paper Table 11 (App. A.7.9): the iRNN on HAR-2 with sigmoid and ReLU activations, K = 1, 3, 5.

Data-set substitution (``irnn._digits``): scikit-learn's 8×8 digits read pixel by pixel (T = 64),
0–4 against 5–9, standardised, stand in for HAR-2 (not downloadable; two classes, 128 steps × 9
features).  "Majority class" below is the best constant guess *on the test split*, stored with the
data.

Setting (scaled; printed on the figure).  For each activation φ ∈ {ReLU, sigmoid} and K ∈
{1, 3, 5}: the paper's iRNN (eq. 9, g₀ = h_{m−1}, η₀ = 10⁻²; ``irnn._training``) with that φ,
D = 32, Adam lr 10⁻², clip 1, batch 64, 600 iterations (``irnn._digits.har2_run``, the runs
irnn-fig7/fig8 share); the paper's HAR-2 model has D = 80 and about 4k parameters and trains to
convergence.  Per (φ, K, seed): the test accuracy at the end of training and the training
wall-clock seconds (on a shared machine: comparable between rows, not to the paper's GPU hours).

The claim (Table 11: ReLU 95.32 → 95.52 → 96.30 %, sigmoid 92.16 → 93.35 → 95.30 % for K = 1, 3,
5; "the results for this variant also follow similar pattern as we saw in ReLU variant"):
accuracy rises from K = 1 to K = 5 for both activations, paired over seeds beyond 2 SE and by at
least the minimum effect declared from the task itself — the resolution of an accuracy on the test
split, 0.5/√n_test (``_stats.accuracy_resolution``: 4.1 points on the stand-in's 150 test sequences;
the paper's 0.98 and 3.14 points on HAR-2's 2947 are reported beside, not used).  The table puts our
accuracies beside the paper's.

Competence gate (declared), on every arm that decides: both cells of each rise (K = 1 and K = 5 of
that activation) learn the task — test accuracy above the majority class beyond 2 SE; a rise
between cells that did not learn is *inconclusive at this scale*.  Negative control, where the
effect vanishes by construction: the same rise test between ReLU K = 1 and ReLU K = 1 on fresh
seeds (s + 100).
"""
from __future__ import annotations
import numpy as np

from . import _digits as hd
from ._training import n_params
from .._recipe import Recipe, Scale
from .._stats import accuracy_resolution, comparison, effect, gate, gated, level_test, mean_se, seeds_for

NAME = "irnn-table11-activation"
ACTS = ("relu", "sigmoid")
KS = (1, 3, 5)
NULL_OFFSET = 100
#: Table 11, accuracy (%) on HAR-2, by activation and K = 1, 3, 5; #Params 4k for every row
PAPER = {"relu": (95.32, 95.52, 96.30), "sigmoid": (92.16, 93.35, 95.30)}
PAPER_TRAIN_HR = {"relu": (0.061, 0.081, 0.018), "sigmoid": (0.065, 0.078, 0.020)}
ACT_NAME = {"relu": "ReLU", "sigmoid": "sigmoid"}


def _key(act, K):
    return f"irnn-K{K}" if act == "relu" else f"irnn-{act}-K{K}"


def _train(act, K, seed, sc):
    from ...train.loop import evaluate

    r = hd.har2_run(_key(act, K), int(seed), sc)
    acc = float(evaluate(r.model, r.readout, hd.task(sc), "test")["accuracy"])
    return acc, float(r.history.attrs.get("seconds", np.nan)), n_params(r.model, outputs=2)


def compute(scale):
    import xarray as xr

    sc = Scale.of(scale)
    seeds = seeds_for(sc.quick)
    acc = np.zeros((len(ACTS), len(KS), len(seeds)))
    secs = np.zeros_like(acc)
    params = np.zeros((len(ACTS), len(KS)), dtype=int)
    for a, act in enumerate(ACTS):
        for k, K in enumerate(KS):
            for i, s in enumerate(seeds):
                acc[a, k, i], secs[a, k, i], params[a, k] = _train(act, K, s, sc)
    null = np.array([_train("relu", 1, s + NULL_OFFSET, sc)[0] for s in seeds])
    c = {"activation": list(ACTS), "K": list(KS), "seed": seeds}
    ds = xr.Dataset({
        "accuracy": (("activation", "K", "seed"), acc, {"long_name": "test accuracy", "units": "1"}),
        "train_seconds": (("activation", "K", "seed"), secs, {"long_name": "training wall-clock (shared machine)",
                                                               "units": "s"}),
        "params": (("activation", "K"), params, {"long_name": "trainable parameters (incl. read-out)", "units": "1"}),
        "paper_accuracy": (("activation", "K"), np.array([PAPER[a] for a in ACTS]),
                           {"long_name": "Table 11 accuracy on HAR-2", "units": "%"}),
        "paper_train_hours": (("activation", "K"), np.array([PAPER_TRAIN_HR[a] for a in ACTS]),
                              {"long_name": "Table 11 training time on HAR-2 (GPU)", "units": "h"}),
        "null_accuracy": (("seed",), null, {"long_name": "test accuracy, ReLU K=1 on fresh seeds (s + 100)",
                                            "units": "1"}),
    }, coords=c)
    ds.attrs.update({
        "majority_accuracy": hd.majority("test", sc), "n_test": int(hd.task(sc).size("test")),
        "hidden": hd.D[sc.name], "iterations": hd.ITERATIONS[sc.name], "setting": hd.setting_json(sc),
        "dataset": "HAR-2" if sc.paper else "binary digits",
        "scaling": hd.setting(sc) + f", {len(seeds)} seeds"
                   + ("" if sc.paper else "; paper: HAR-2, D=80, ~4k parameters, to convergence")})
    return ds


def _acc(ds, act, K):
    return ds["accuracy"].sel(activation=act, K=K).values.astype(float)


def _rise(acc_of, act, n_test, name=None):
    paper = PAPER[act][-1] - PAPER[act][0]
    return comparison(name or f"{ACT_NAME[act]}: K=5 − K=1 accuracy", 100 * (acc_of(act, max(KS)) - acc_of(act, min(KS))),
                      interest=100 * accuracy_resolution(n_test), paper=paper, units="points")


def _table(ds):
    rows = []
    for act in ACTS:
        for K in KS:
            m, se, _ = mean_se(_acc(ds, act, K))
            ts, _, _ = mean_se(ds["train_seconds"].sel(activation=act, K=K).values)
            rows.append([ACT_NAME[act], int(K), f"{100 * m:.1f} ± {100 * se:.1f}",
                         float(ds["paper_accuracy"].sel(activation=act, K=K)),
                         int(ds["params"].sel(activation=act, K=K)), "4k", round(float(ts), 1),
                         float(ds["paper_train_hours"].sel(activation=act, K=K))])
    return {"title": "iRNN Table 11: accuracy by activation and K",
            "columns": ["activation", "K", "test accuracy % (binary digits, mean ± SE)", "paper (HAR-2) accuracy %",
                        "parameters", "paper parameters", "train s per run (shared CPU)", "paper train time (h, GPU)"],
            "rows": rows,
            "note": (("ours: HAR-2 (the real data); " if ds.attrs.get("dataset") == "HAR-2" else
                      "ours: scikit-learn 8×8 digits read pixel by pixel (T = 64), classes 0–4 vs 5–9, standing in "
                      "for HAR-2 (not on this machine); ") + f"D = {int(ds.attrs['hidden'])}, {int(ds.attrs['iterations'])} "
                     f"iterations, {ds.sizes['seed']} seeds; majority-class accuracy "
                     f"{100 * float(ds.attrs['majority_accuracy']):.1f} % on {int(ds.attrs['n_test'])} test sequences")}


def check(ds):
    majority = float(ds.attrs["majority_accuracy"])
    keys = [(a, K) for a in ACTS for K in KS]
    n_test = int(ds.attrs["n_test"])
    arm = {(a, K): level_test(f"{ACT_NAME[a]} K={K} test accuracy", _acc(ds, a, K), majority, scope="arm")
           for a, K in keys}
    parts = [gated(_rise(lambda a, K: _acc(ds, a, K), a, n_test), [arm[(a, min(KS))], arm[(a, max(KS))]])
             for a in ACTS]
    passed = all(p["passed"] for p in parts)
    g = gate(list(arm.values()))
    out = {"passed": passed, "gate": g, "parts": parts, "seeds": int(ds.sizes["seed"])}
    for p in parts:
        out[p["name"] + " (points)"] = f"{p['mean']:.3g} ± {p['se']:.2g}"
    for a, K in keys:
        m, se, _ = mean_se(_acc(ds, a, K))
        out[f"accuracy {ACT_NAME[a]} K={K}"] = f"{m:.4f} ± {se:.2g}"
    out["majority-class accuracy"] = majority
    out["effect"] = effect("ReLU: K=5 − K=1 accuracy", parts[0], units="points")
    out["per_seed"] = [{"seed": int(s), **{f"acc_{a}_K{K}": float(_acc(ds, a, K)[i]) for a, K in keys},
                        "acc_relu_K1_fresh_seed": float(ds["null_accuracy"].values[i])}
                       for i, s in enumerate(ds["seed"].values)]
    null = ds["null_accuracy"].values.astype(float)
    cpart = comparison("ReLU: K=1 (fresh seeds) − K=1 accuracy", 100 * (null - _acc(ds, "relu", 1)),
                       interest=100 * accuracy_resolution(n_test), units="points")
    out["control"] = {"setting": "the same rise test between ReLU K = 1 and ReLU K = 1 on fresh seeds (s + 100): "
                                 "no K changes",
                      "measured": {cpart["name"]: f"{cpart['mean']:.3g} ± {cpart['se']:.2g}"},
                      "passed": cpart["passed"]}
    if not passed:
        out["finding"] = ("test accuracy (mean ± SE) " + ", ".join(f"{ACT_NAME[a]} K={K}: {out[f'accuracy {ACT_NAME[a]} K={K}']}"
                                                                for a, K in keys)
                          + f" (majority {majority:.3f}); " + "; ".join(
                              f"{p['name']} {p['mean']:.3g} ± {p['se']:.2g} points ({p['verdict']})" for p in parts))
    out["table"] = _table(ds)
    return out


def draw(ds):
    from ...plot.style import CYCLE, new_figure

    fig, axes = new_figure(2, height=3.0)
    x = np.arange(len(KS))
    maj = float(ds.attrs["majority_accuracy"])
    for j, act in enumerate(ACTS):
        col = CYCLE[j]
        for i, K in enumerate(KS):
            a = 100 * _acc(ds, act, K)
            axes[0].scatter(np.full(a.size, i + (j - 0.5) * 0.2), a, s=10, color=col, alpha=0.5, lw=0)
        ms = [mean_se(100 * _acc(ds, act, K)) for K in KS]
        axes[0].errorbar(x + (j - 0.5) * 0.2, [m for m, _, _ in ms], yerr=[2 * se for _, se, _ in ms], color=col,
                         marker="o", ms=4, lw=1.2, capsize=2, label=f"{ACT_NAME[act]} (ours, binary digits)")
        axes[1].plot(x, PAPER[act], color=col, marker="s", ms=4, lw=1.2, ls="--", label=f"{ACT_NAME[act]} (paper, HAR-2)")
    c = 100 * ds["null_accuracy"].values
    axes[0].scatter(np.full(c.size, 0.0), c, s=14, marker="x", color="0.4",
                    label="ReLU K=1, fresh seeds (control)")
    axes[0].axhline(100 * maj, color="k", lw=0.7, ls=":")
    axes[0].annotate("majority class", (x[-1] + 0.3, 100 * maj), ha="right", va="bottom", fontsize=7)
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels([f"K={K}" for K in KS])
        ax.set_xlim(-0.5, len(KS) - 0.5)
        ax.legend(frameon=False, fontsize=7, loc="upper left")
    axes[0].set_ylabel("test accuracy % (dots: seeds, ± 2 SE)")
    axes[1].set_ylabel("accuracy % (Table 11)")
    axes[0].set_title("ours: 8×8 digits, 0–4 vs 5–9")
    axes[1].set_title("paper: HAR-2")
    return fig


RECIPE = Recipe(NAME, "iRNN Table 11",
                "the iRNN's test accuracy on the HAR-2 stand-in rises from K = 1 to K = 5 with ReLU and with sigmoid "
                "(paired over seeds, 2 SE, by ≥ the test split's resolution 0.5/√n)",
                compute, draw, check, trains=True, table=True,
                quote="“We also performed some experiments for sigmoid activation on HAR-2 dataset. The results for "
                      "this variant also follow similar pattern as we saw in ReLU variant.” (App. A.7.9, Table 11: "
                      "accuracy rises with K for both)",
                gate="both cells of each rise learn: every (φ, K) test accuracy above the majority class of the test "
                     "split beyond 2 SE",
                paper=hd.paper_setting(), scales=("quick", "stand-in", "paper"), reads="UCI HAR data (HAR-2)", paper_cost=hd.PAPER_COST,
                title="iRNN Table 11, ReLU vs sigmoid\n{scaling}",
                title_wrap=105, title_size=7.5, one_blas_thread=True)

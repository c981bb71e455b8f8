"""Recurrent Identity Networks note: an L2 penalty on U (not on V = U + I) keeps a ReLU RIN near
the identity during training and makes it train.

The note's hypothesis, tested on the adding task: a ReLU RIN h_t = relu(W x_t + V h_{t-1} + b),
V = U + I, is trained three ways on the same seeds — an L2 penalty λ‖U‖²_F (the note's reading of
the RIN), the same penalty on V, λ‖V‖²_F = λ‖U − (−I)‖²_F (ordinary weight decay of the
recurrent matrix), and no penalty — with λ, the task size and the optimiser fixed in advance
(``compute``).  For every run the recipe records the distance of the trained recurrence from the
identity, ‖V − I‖_F, the validation MSE and ‖∂h_T/∂h_1‖₂ at the end of training (reported as its log10, mean ± SE).

The check (paired across seeds, beyond 2 SE): (1) with the penalty on U the trained V is closer
to I than with the penalty on V and than with no penalty; (2) the penalty on U gives a lower
validation MSE than the penalty on V, and a validation MSE below the baseline of predicting the
mean (1/6).  The comparison with no penalty on the MSE is reported (it decides whether the
penalty is what makes the ReLU RIN train, as the note suggests).  Negative control: the same
check with the penalty moved off the recurrence — a fourth arm trained with λ‖W‖²_F on the input
weights takes the place of the penalty on U (V is then unpenalised, so it must not come out closer
to I than with no penalty, nor train better than with the penalty on V).
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe
from ._stats import beyond_2se, mean_se, paired, seeds_for

NAME = "rin-gradients"
#: the L2 weight λ, fixed before any run: λ‖V‖²_F at V = I is λD = 0.032 at D = 32, a fifth of the
#: task's baseline loss 1/6, so the penalty matters without dominating the data term
LAM = 1e-3
#: (arm, penalty) — the centre −1 makes λ‖U + I‖²_F = λ‖V‖²_F
ARMS = (("penalty-U", {"U": LAM}), ("penalty-V", {"U": (LAM, -1.0)}), ("none", None), ("penalty-W", {"W": LAM}))
SIZES = {True: dict(T=30, D=32, iterations=150, n_train=2000), False: dict(T=50, D=32, iterations=600, n_train=5000)}
LR, BATCH, CLIP = 1e-3, 64, 1.0


def compute(quick: bool):
    import xarray as xr

    import dynlab as dl

    sz = SIZES[bool(quick)]
    T, D, its = sz["T"], sz["D"], sz["iterations"]
    seeds = seeds_for(quick)
    task = dl.make_task("adding", T, seed=0, n_train=sz["n_train"], n_val=500, n_test=10)
    every = its // 10
    names = [a for a, _ in ARMS]
    shape = (len(names), len(seeds))
    dist, mse, jac = np.empty(shape), np.empty(shape), np.empty(shape)
    curves = np.empty(shape + (10,))
    for i, (arm, pen) in enumerate(ARMS):
        for j, s in enumerate(seeds):
            m = dl.make_model("rin", D, task.inputs, seed=s)
            r = dl.train_model(m, task, iterations=its, lr=LR, batch=BATCH, clip=CLIP, record_every=every, seed=s,
                               penalty=pen, progress=False)
            V = r.model.recurrent
            dist[i, j] = np.linalg.norm(V - np.eye(D))
            mse[i, j] = float(r.history["val_loss"].values[-1])
            jac[i, j] = float(r.history["jac_norm"].values[-1])
            curves[i, j] = r.history["val_loss"].values[:10]
    it = (np.arange(10) + 1) * every
    ds = xr.Dataset(
        {"dist_identity": (("arm", "seed"), dist, {"long_name": "‖V − I‖_F after training", "units": "1"}),
         "val_mse": (("arm", "seed"), mse, {"long_name": "validation MSE after training", "units": "1"}),
         "jac_norm": (("arm", "seed"), jac, {"long_name": "‖∂h_T/∂h_1‖₂ after training", "units": "1"}),
         "val_curve": (("arm", "seed", "iteration"), curves, {"long_name": "validation MSE", "units": "1"})},
        coords={"arm": names, "seed": seeds, "iteration": it})
    ds.attrs.update({"figure": NAME, "task": "adding", "T": T, "hidden": D, "iterations": its, "lr": LR,
                     "batch": BATCH, "clip": CLIP, "lam": LAM, "baseline": float(task.baseline),
                     "activation": "relu", "dynlab_version": dl.__version__,
                     "command": f"dynlab figures make {NAME}" + (" --quick" if quick else ""),
                     "scaling": (f"ReLU RIN D={D} on adding T={T}, {its} Adam iterations (lr {LR}, batch {BATCH}, "
                                 f"clip {CLIP}), λ={LAM}, {len(seeds)} seeds" + (" (quick)" if quick else "")
                                 + "; the note states the hypothesis without an experiment")})
    return ds


def _decide(a_dist, b_dist, c_dist, a_mse, b_mse, baseline):
    """The check on arrays of per-seed values: a = penalty on U, b = penalty on V, c = none."""
    d_ab = paired(a_dist, b_dist, larger="b")
    d_ac = paired(a_dist, c_dist, larger="b")
    m_ab = paired(a_mse, b_mse, larger="b")
    below = beyond_2se(np.asarray(a_mse) - baseline, direction="negative")
    return {"dist_U_vs_V": d_ab, "dist_U_vs_none": d_ac, "mse_U_vs_V": m_ab, "mse_U_below_baseline": below,
            "passed": bool(d_ab["passed"] and d_ac["passed"] and m_ab["passed"] and below["passed"])}


def check(ds):
    dist = {a: ds["dist_identity"].sel(arm=a).values for a in ds["arm"].values}
    mse = {a: ds["val_mse"].sel(arm=a).values for a in ds["arm"].values}
    base = float(ds.attrs["baseline"])
    r = _decide(dist["penalty-U"], dist["penalty-V"], dist["none"], mse["penalty-U"], mse["penalty-V"], base)
    mse_none = paired(mse["penalty-U"], mse["none"], larger="b")
    out = {"passed": r["passed"]}
    for arm in [a for a in ds["arm"].values if a != "penalty-W"]:
        m, se, _ = mean_se(dist[arm])
        out[f"dist_identity_{arm}"] = [round(m, 4), round(se, 4)]
        m, se, _ = mean_se(mse[arm])
        out[f"val_mse_{arm}"] = [round(m, 5), round(se, 5)]
        m, se, _ = mean_se(np.log10(ds["jac_norm"].sel(arm=arm).values))
        out[f"log10_jac_norm_{arm}"] = [round(m, 3), round(se, 3)]
    for k in ("dist_U_vs_V", "dist_U_vs_none", "mse_U_vs_V"):
        out[f"{k}_diff"] = [round(r[k]["diff_mean"], 5), round(r[k]["diff_se"], 5)]
        out[f"{k}_passed"] = r[k]["passed"]
    out["mse_U_below_baseline_passed"] = r["mse_U_below_baseline"]["passed"]
    out["mse_U_vs_none_diff"] = [round(mse_none["diff_mean"], 5), round(mse_none["diff_se"], 5)]
    out["mse_U_lower_than_none_2se"] = mse_none["passed"]
    out["baseline"] = base
    out["per_seed"] = [{"seed": int(s), **{f"{k}_{a}": float(ds[v].sel(arm=a, seed=s))
                                           for a in ds["arm"].values
                                           for k, v in (("dist", "dist_identity"), ("mse", "val_mse"))}}
                       for s in ds["seed"].values]
    # control: the same penalty moved off the recurrence (onto the input weights W), in place of the
    # penalty on U — V is then unpenalised, so the effect on V and on training must be absent
    c = _decide(dist["penalty-W"], dist["penalty-V"], dist["none"], mse["penalty-W"], mse["penalty-V"], base)
    out["control"] = {"setting": "the penalty on the input weights W (λ‖W‖²_F) in place of the penalty on U",
                      "measured": {"dist_identity_penalty-W": [round(v, 4) for v in mean_se(dist["penalty-W"])[:2]],
                                   "val_mse_penalty-W": [round(v, 5) for v in mean_se(mse["penalty-W"])[:2]],
                                   **{f"{k}_passed": c[k]["passed"] for k in ("dist_U_vs_V", "dist_U_vs_none",
                                                                              "mse_U_vs_V", "mse_U_below_baseline")}},
                      "passed": c["passed"]}
    if not out["passed"]:
        failed = [k for k in ("dist_U_vs_V", "dist_U_vs_none", "mse_U_vs_V") if not r[k]["passed"]]
        if not r["mse_U_below_baseline"]["passed"]:
            failed.append("mse_U_below_baseline")
        out["finding"] = (
            "not beyond 2 SE: " + ", ".join(failed) + "; ‖V − I‖_F (mean ± SE) with the penalty on U "
            f"{out['dist_identity_penalty-U'][0]:.3g} ± {out['dist_identity_penalty-U'][1]:.2g}, on V "
            f"{out['dist_identity_penalty-V'][0]:.3g} ± {out['dist_identity_penalty-V'][1]:.2g}, none "
            f"{out['dist_identity_none'][0]:.3g} ± {out['dist_identity_none'][1]:.2g}; validation MSE "
            f"{out['val_mse_penalty-U'][0]:.4g}, {out['val_mse_penalty-V'][0]:.4g}, {out['val_mse_none'][0]:.4g} "
            f"(baseline {base:.4g})")
    return out


def draw(ds):
    from ..plot.style import CYCLE, new_figure, styled

    @styled
    def _draw():
        fig, axes = new_figure(3, height=3.0)
        arms = [str(a) for a in ds["arm"].values]
        labels = {"penalty-U": "λ‖U‖² (on U)", "penalty-V": "λ‖V‖² (on V = U + I)", "none": "no penalty",
                  "penalty-W": "control: λ‖W‖²"}
        x = np.arange(len(arms))
        for ax, var, ylab in ((axes[0], "dist_identity", "‖V − I‖_F after training"),
                              (axes[1], "val_mse", "validation MSE after training")):
            for i, a in enumerate(arms):
                v = ds[var].sel(arm=a).values
                m, se, _ = mean_se(v)
                ax.bar(i, m, yerr=2 * se, color=CYCLE[i], alpha=0.6, capsize=3)
                ax.scatter(np.full(v.size, i), v, s=9, color="k", zorder=3)
            ax.set_xticks(x, [labels.get(a, a) for a in arms], rotation=20, fontsize=6)
            ax.set_ylabel(ylab)
            ax.set_ylim(bottom=0)
        axes[1].axhline(float(ds.attrs["baseline"]), color="0.4", ls="--", lw=0.8, label="baseline 1/6 (predict 1)")
        axes[1].legend(frameon=False, fontsize=6.5)
        axes[0].set_title("distance from the identity (bars: mean ± 2 SE)", fontsize=7.5)
        axes[1].set_title("task error (dots: seeds)", fontsize=7.5)
        ax = axes[2]
        it = ds["iteration"].values
        for i, a in enumerate(arms):
            if a == "penalty-W":          # the control is in the bars; the curves show the three arms
                continue
            for j, _ in enumerate(ds["seed"].values):
                ax.plot(it, ds["val_curve"].sel(arm=a).values[j], color=CYCLE[i], lw=0.8, alpha=0.8,
                        label=labels.get(a, a) if j == 0 else None)
        ax.axhline(float(ds.attrs["baseline"]), color="0.4", ls="--", lw=0.8)
        ax.set_xlabel("training iteration")
        ax.set_ylabel("validation MSE")
        ax.set_yscale("log")
        ax.legend(frameon=False, fontsize=6.5)
        ax.set_title("validation MSE during training", fontsize=7.5)
        fig.suptitle("RIN note (ReLU RIN, adding task): " + ds.attrs.get("scaling", ""), fontsize=6.5)
        return fig

    return _draw()


RECIPE = Recipe(NAME, "RIN note",
                "an L2 penalty on U (not on V = U + I) keeps a trained ReLU RIN's V near I and makes it train "
                "(paired over seeds against the penalty on V and no penalty)",
                compute, draw, check, trains=True)

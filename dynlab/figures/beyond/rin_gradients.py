"""Recurrent Identity Networks note: an L2 penalty on U (not on V = U + I) keeps a ReLU RIN near
the identity during training.

The note's hypothesis, tested on the adding task: a ReLU RIN h_t = relu(W x_t + V h_{t-1} + b),
V = U + I, is trained three ways on the same seeds — an L2 penalty λ‖U‖²_F (the note's reading of
the RIN), the same penalty on V, λ‖V‖²_F = λ‖U − (−I)‖²_F (ordinary weight decay of the
recurrent matrix), and no penalty — with λ, the task size and the optimiser fixed in advance
(``compute``), 10 seeds (training is cheap here).  For every run the recipe records the validation
MSE, ‖∂h_T/∂h_1‖₂ at the end of training and the distance ‖V − I‖_F.

The note's sentence is the claim: a penalty on U "would encourage the network to stay close to the
identity".  Checked as the note says it: after training, ‖V − I‖_F (the distance of the recurrence
from the identity) is smaller with the penalty on U than with the same penalty on V, paired over
seeds beyond 2 SE and by at least the minimum effect declared from the task itself — a tenth of the
distance the unpenalised RIN travels from I on the same task (the "none" arm's mean ‖V − I‖_F).
Not a tautology: the penalty on U pulls V towards I and the penalty on V towards 0, and the data
term pulls both wherever the task needs.  (An earlier version tested, instead, the gradient through
time and the MSE, which the note does not claim; both are reported beside: |log10 ‖∂h_T/∂h_1‖| and
the validation MSE, penalty on V − on U.)

Competence gate (declared), on both arms: the penalised RINs learn — validation MSE below
1/6 − 1/60 (the predict-1 baseline less the adding task's minimum effect) beyond 2 SE.  Negative
control, where the effect vanishes by construction: the same check with the unpenalised RIN on fresh
seeds (s + 100) in the place of the penalty on U, and the unpenalised RIN in the place of the
penalty on V.
"""
from __future__ import annotations

import numpy as np

from .._recipe import Recipe, Scale, setting, setting_attr, train_model
from .._stats import comparison, effect, gated, level_test, mean_se, record_fields, seeds_for

NAME = "rin-gradients"
#: the L2 weight λ, fixed before any run: λ‖V‖²_F at V = I is λD = 0.032 at D = 32, a fifth of the
#: task's baseline loss 1/6, so the penalty matters without dominating the data term
LAM = 1e-3
#: (arm, penalty) — the centre −1 makes λ‖U + I‖²_F = λ‖V‖²_F
ARMS = (("penalty-U", {"U": LAM}), ("penalty-V", {"U": (LAM, -1.0)}), ("none", None), ("none-fresh", None))
#: the control's arm runs on seed + this offset; seeds of the claim; effects that matter (declared)
FRESH, FULL_SEEDS = 100, 10
INTEREST_LOG10, INTEREST_MSE = 0.1, 1.0 / 60.0
#: the note's claim's minimum effect: this fraction of the unpenalised RIN's ‖V − I‖_F (declared)
MIN_FRACTION = 0.1
SIZES = {True: dict(T=30, D=16, iterations=100, n_train=2000), False: dict(T=50, D=32, iterations=600, n_train=5000)}
LR, BATCH, CLIP = 1e-3, 64, 1.0


def compute(scale):
    quick = Scale.of(scale).quick
    import xarray as xr

    import dynlab as dl

    sz = SIZES[bool(quick)]
    T, D, its = sz["T"], sz["D"], sz["iterations"]
    seeds = seeds_for(quick, FULL_SEEDS)
    task = dl.make_task("adding", T, seed=0, n_train=sz["n_train"], n_val=500, n_test=10)
    every = its // 10
    names = [a for a, _ in ARMS]
    shape = (len(names), len(seeds))
    dist, mse, jac = np.empty(shape), np.empty(shape), np.empty(shape)
    curves = np.empty(shape + (10,))
    for i, (arm, pen) in enumerate(ARMS):
        for j, s0 in enumerate(seeds):
            s = s0 + (FRESH if arm == "none-fresh" else 0)
            m = dl.make_model("rin", D, task.inputs, seed=s)
            r = train_model(m, task, iterations=its, lr=LR, batch=BATCH, clip=CLIP, record_every=every, seed=s,
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
    ds.attrs.update({"task": "adding", "T": T, "hidden": D, "iterations": its, "lr": LR,
                     "batch": BATCH, "clip": CLIP, "lam": LAM, "baseline": float(task.baseline),
                     "activation": "relu", "dynlab_version": dl.__version__,
                     "command": f"dynlab figures make {NAME}" + (" --quick" if quick else ""),
                     "setting": setting_attr(data="adding task", T=T, D=D, batch=BATCH, steps=its, lr=LR),
                     "scaling": (f"ReLU RIN D={D} on adding T={T}, {its} Adam iterations (lr {LR}, batch {BATCH}, "
                                 f"clip {CLIP}), λ={LAM}, {len(seeds)} seeds" + (" (quick)" if quick else "")
                                 + "; the note states the hypothesis without an experiment")})
    return ds


def _parts(jac_a, jac_b, mse_a, mse_b, a="penalty on U", b="penalty on V"):
    la, lb = np.abs(np.log10(jac_a)), np.abs(np.log10(jac_b))
    return [comparison(f"|log10 ‖∂h_T/∂h_1‖|: {b} − {a}", lb - la, interest=INTEREST_LOG10, units="decades"),
            comparison(f"validation MSE: {b} − {a}", np.asarray(mse_b) - np.asarray(mse_a), interest=INTEREST_MSE)]


def _closer(dist_a, dist_b, interest, a="penalty on U", b="penalty on V"):
    """‖V − I‖_F: b − a, paired over seeds (the note's claim)."""
    return comparison(f"‖V − I‖_F: {b} − {a}", np.asarray(dist_b) - np.asarray(dist_a), interest=interest)


def check(ds):
    v = {k: {a: ds[k].sel(arm=a).values for a in ds["arm"].values} for k in ("dist_identity", "val_mse", "jac_norm")}
    base = float(ds.attrs["baseline"])
    interest = MIN_FRACTION * float(np.mean(v["dist_identity"]["none"]))
    arms = [level_test(f"{a}: validation MSE", v["val_mse"][a], base - INTEREST_MSE, direction="below", scope="arm")
            for a in ("penalty-U", "penalty-V")]
    part = gated(_closer(v["dist_identity"]["penalty-U"], v["dist_identity"]["penalty-V"], interest), arms)
    reported = _parts(v["jac_norm"]["penalty-U"], v["jac_norm"]["penalty-V"], v["val_mse"]["penalty-U"],
                      v["val_mse"]["penalty-V"])
    passed = bool(part["passed"])
    out = {"passed": passed,
           **record_fields(effect=effect("‖V − I‖_F, penalty on V − on U", part), gate_items=arms,
                           seeds=int(ds.sizes["seed"]), parts=[part]),
           "minimum effect: a tenth of the unpenalised ‖V − I‖_F": interest}
    for p in reported:
        out[p["name"] + " (reported)"] = [round(p["mean"], 5), round(p["se"], 5)]
    for arm in ("penalty-U", "penalty-V", "none"):
        for k, name in (("dist_identity", "‖V − I‖_F"), ("val_mse", "validation MSE")):
            m, se, _ = mean_se(v[k][arm])
            out[f"{name} {arm}"] = [round(m, 5), round(se, 5)]
        m, se, _ = mean_se(np.log10(v["jac_norm"][arm]))
        out[f"log10 ‖∂h_T/∂h_1‖ {arm}"] = [round(m, 3), round(se, 3)]
    none = _parts(v["jac_norm"]["penalty-U"], v["jac_norm"]["none"], v["val_mse"]["penalty-U"], v["val_mse"]["none"],
                  b="no penalty")
    for p in none:
        out[p["name"] + " (reported)"] = [round(p["mean"], 5), round(p["se"], 5)]
    out["baseline"] = base
    out["per_seed"] = [{"seed": int(s), **{f"{k}_{a}": float(ds[vv].sel(arm=a, seed=s))
                                           for a in ds["arm"].values
                                           for k, vv in (("mse", "val_mse"), ("jac", "jac_norm"))}}
                       for s in ds["seed"].values]
    cpart = _closer(v["dist_identity"]["none-fresh"], v["dist_identity"]["none"], interest,
                    a="no penalty (fresh seeds)", b="no penalty")
    out["control"] = {"setting": "no penalty on fresh seeds (s + 100) in the place of the penalty on U, no penalty "
                                 "in the place of the penalty on V: nothing differs but the seeds",
                      "measured": {cpart["name"]: [round(cpart["mean"], 5), round(cpart["se"], 5)]},
                      "passed": bool(cpart["passed"])}
    if not passed:
        out["finding"] = ("paired over seeds: " + "; ".join(f"{p['name']} {p['mean']:.3g} ± {p['se']:.2g} "
                                                            f"({p['verdict']})" for p in [part] + reported)
                          + f"; ‖V − I‖_F with the penalty on U, on V, none: {out['‖V − I‖_F penalty-U'][0]:.3g}, "
                          f"{out['‖V − I‖_F penalty-V'][0]:.3g}, {out['‖V − I‖_F none'][0]:.3g}; validation MSE "
                          f"{out['validation MSE penalty-U'][0]:.4g}, {out['validation MSE penalty-V'][0]:.4g}, "
                          f"{out['validation MSE none'][0]:.4g} (baseline {base:.4g})")
    return out


def draw(ds):
    from ...plot.style import CYCLE

    from .._training import panel_grid

    fig, axes = panel_grid(1, 4, width=3.4, height=3.0)
    arms = [str(a) for a in ds["arm"].values]
    labels = {"penalty-U": "λ‖U‖² (on U)", "penalty-V": "λ‖V‖² (on V = U + I)", "none": "no penalty",
              "none-fresh": "control: none,\nfresh seeds"}
    x = np.arange(len(arms))
    dist = axes.pop(0)
    for i, a in enumerate(arms):
        v = ds["dist_identity"].sel(arm=a).values
        m, se, _ = mean_se(v)
        dist.bar(i, m, yerr=2 * se, color=CYCLE[i], alpha=0.6, capsize=3)
        dist.scatter(np.full(v.size, i), v, s=9, color="k", zorder=3)
    dist.set_xticks(x, [labels.get(a, a) for a in arms], rotation=20, fontsize=6)
    dist.set_ylabel("‖V − I‖_F after training")
    dist.set_ylim(bottom=0)
    dist.set_title("judged: distance from the identity", fontsize=7.5)
    for ax, var, ylab in ((axes[0], "jac_norm", "|log10 ‖∂h_T/∂h_1‖| after training"),
                          (axes[1], "val_mse", "validation MSE after training")):
        for i, a in enumerate(arms):
            v = ds[var].sel(arm=a).values
            v = np.abs(np.log10(v)) if var == "jac_norm" else v
            m, se, _ = mean_se(v)
            ax.bar(i, m, yerr=2 * se, color=CYCLE[i], alpha=0.6, capsize=3)
            ax.scatter(np.full(v.size, i), v, s=9, color="k", zorder=3)
        ax.set_xticks(x, [labels.get(a, a) for a in arms], rotation=20, fontsize=6)
        ax.set_ylabel(ylab)
        ax.set_ylim(bottom=0)
    axes[1].axhline(float(ds.attrs["baseline"]), color="0.4", ls="--", lw=0.8, label="baseline 1/6 (predict 1)")
    axes[1].legend(frameon=False, fontsize=6.5)
    axes[0].set_title("reported: gradient through time (0 = identity)", fontsize=7.5)
    axes[1].set_title("reported: task error (dots: seeds; bars ± 2 SE)", fontsize=7.5)
    ax = axes[2]
    it = ds["iteration"].values
    for i, a in enumerate(arms):
        if a == "none-fresh":         # the control is in the bars; the curves show the three arms
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
    return fig


RECIPE = Recipe(NAME, "RIN note",
                "an L2 penalty on U (not on V = U + I) keeps a trained ReLU RIN closer to the identity: ‖V − I‖_F "
                "smaller than under the same penalty on V (paired over seeds, 2 SE, ≥ a tenth of the unpenalised "
                "distance); the gradient through time and the MSE reported",
                compute, draw, check, trains=True,
                quote="“If a regularization encouraging small weights is applied to elements of U, rather than "
                      "elements of V, then this indeed would encourage the network to stay close to the identity!” "
                      "(the note; the RIN's benefit: ReLU recurrences train “without things blowing up”)",
                gate="both penalised RINs learn: validation MSE below 1/6 − 1/60 (the predict-1 baseline less the "
                     "minimum effect) beyond 2 SE, with the penalty on U and on V",
                paper=setting(),
                title="RIN note (ReLU RIN, adding task): {scaling}", title_size=6.5)

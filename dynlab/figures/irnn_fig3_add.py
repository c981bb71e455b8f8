"""iRNN paper Figs. 3 and 9b: the adding task for K = 1, 5, 10 — validation MSE over training,
the ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_{T−1}‖ over training, ‖∂h_T/∂h_{T−1}‖, and each seed's final MSE
against its distance of the ratio from 1.

The iRNN is eq. 5 as printed with g₀ = 0 and the sign of the paper's Remark (−h_{m−1}), ReLU,
α = 1, dense U ~ N(0, 0.25²/D), η₀ = 0.3 learned (one η for all m, k).  Its K inner Euler steps
move s = g − h_{m−1} toward the equilibrium s* = φ(U s* + W x_m + b), which does not depend on
h_{m−1}; so ∂h_m/∂h_{m−1} = I − ∏_k((1 − η)I + η φ′U) → I as K grows (Theorem 1 with the Remark's
sign), and the ratio is pushed toward 1 by K, not by construction.  Every (K, seed) run is trained
with exact BPTT (Adam, lr 1e-2, batch 64) on the same adding data; the seed sets the initial
weights, the read-out and the batches.  K does not change the parameter count.

Per seed: |ln ratio| averaged over the records of the run ("over training", Fig. 3b; below 1e-9
it is rounding and read as 0) and the validation MSE averaged over the last quarter of the
records.  The claim holds when, at each step K = 1 → 5 → 10, |ln ratio| falls *and* the validation MSE falls, each paired over seeds beyond
2 standard errors.  Negative control: the same check on the same cell with g₀ = h_{m−1} (K = 1
and 10), where s₀ = 0, the inner iteration never sees h_{m−1}, and ∂h_m/∂h_{m−1} = I exactly
for every K — K cannot move the ratio there.
"""
from __future__ import annotations

import numpy as np

from ._irnn_training import entry, labels_of, params_of, seed_runs, short_label, tail_mean
from ._recipe import Recipe
from ._stats import paired, seeds_for

NAME = "irnn-fig3-add"
KS = (1, 5, 10)
CONTROL_KS = (1, 10)
ENTRIES = tuple(entry("eq5", K) for K in KS) + tuple(entry("g0prev", K) for K in CONTROL_KS)
QUICK = (20, 16, 100, 5)       # T, D, iterations, record_every
FULL = (50, 32, 300, 10)


def compute(quick: bool):
    import dynlab as dl

    T, D, its, every = QUICK if quick else FULL
    seeds = seeds_for(quick)
    task = dl.make_task("adding", T, seed=0, n_train=4000, n_val=300, n_test=10)
    ds = seed_runs(task, ENTRIES, seeds, iterations=its, lr=1e-2, batch=64, record_every=every, hidden=D,
                   command=f"dynlab figures make {NAME}")
    ds.attrs.update({"figure": NAME, "scaling": (
        f"adding T={T}, D={D}, {its} iterations, batch 64, Adam lr 1e-2, {len(seeds)} seeds"
        + (" (quick)" if quick else "") + "; paper: T=200, D=128, 1000 iterations, batch 128, η₀=1e-2")})
    return ds


#: |ln ratio| below this is rounding (two norms of the same product of ~T Jacobians): read as 0
RATIO_FLOOR = 1e-9


def _per_seed(ds, key):
    absr = np.abs(np.log(ds["ratio"].sel(run=key))).mean("iteration").values.astype(float)
    absr = np.where(absr < RATIO_FLOOR, 0.0, absr)
    mse = tail_mean(ds["val_loss"].sel(run=key))
    return absr, mse.values.astype(float)


def _ordering(ds, keys):
    """Paired tests at each step of ``keys``: |ln ratio| falls and validation MSE falls."""
    steps, ok = {}, True
    for a, b in zip(keys[:-1], keys[1:]):
        ra, la = _per_seed(ds, a)
        rb, lb = _per_seed(ds, b)
        tr, tl = paired(ra, rb, larger="a"), paired(la, lb, larger="a")
        name = f"{short_label(a)}→{short_label(b)}"
        steps[f"{name}: Δ|ln ratio|"] = f"{tr['diff_mean']:.3g} ± {tr['diff_se']:.2g}"
        steps[f"{name}: ΔMSE"] = f"{tl['diff_mean']:.3g} ± {tl['diff_se']:.2g}"
        ok = ok and tr["passed"] and tl["passed"]
    return steps, bool(ok)


def check(ds):
    main = [f"irnn-eq5-K{K}" for K in KS]
    ctrl = [f"irnn-g0prev-K{K}" for K in CONTROL_KS]
    out, passed = _ordering(ds, main)
    seeds = [int(s) for s in ds["seed"].values]
    per_seed = []
    for i, s in enumerate(seeds):
        row = {"seed": s}
        for key in main + ctrl:
            r, m = _per_seed(ds, key)
            tag = short_label(key).replace(" ", "").replace("(g₀=h)", "_g0h")
            row[f"abs_ln_ratio_{tag}"], row[f"val_mse_{tag}"] = float(r[i]), float(m[i])
        per_seed.append(row)
    allr = np.concatenate([_per_seed(ds, k)[0] for k in main])
    allm = np.concatenate([_per_seed(ds, k)[1] for k in main])
    out["spearman(|ln ratio|, MSE) over K×seeds"] = float(_spearman(allr, allm))
    for key in main + ctrl:
        r, m = _per_seed(ds, key)
        out[f"mean |ln ratio| {short_label(key)}"] = float(r.mean())
        out[f"mean val MSE {short_label(key)}"] = float(m.mean())
    out["baseline MSE"] = float(ds.attrs["baseline"])
    out["parameters"] = ", ".join(f"{short_label(k)}: {v}" for k, v in params_of(ds).items())
    cm, cpass = _ordering(ds, ctrl)
    control = {"setting": "same cell with g₀ = h_(m−1) (∂h_m/∂h_(m−1) = I for every K), K = 1 vs 10",
               "measured": cm, "passed": cpass}
    result = {"passed": passed, **out, "per_seed": per_seed, "control": control}
    if not passed:
        result["finding"] = (
            "mean |ln ratio| for K = 1, 5, 10: " + ", ".join(f"{out[f'mean |ln ratio| K={K}']:.3g}" for K in KS)
            + "; mean final validation MSE: " + ", ".join(f"{out[f'mean val MSE K={K}']:.3g}" for K in KS)
            + f" (baseline {out['baseline MSE']:.3g}); paired steps: "
            + "; ".join(f"{k} = {v}" for k, v in out.items() if "→" in k)
            + " — not every step falls beyond 2 SE")
    return result


def _spearman(a, b):
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def draw(ds):
    from ..plot.style import CYCLE, new_figure, styled

    @styled
    def _draw():
        fig, axes = new_figure(4, height=3.0)
        it = ds["iteration"].values
        labels = labels_of(ds)
        colors = {f"irnn-eq5-K{K}": CYCLE[i] for i, K in enumerate(KS)}
        colors.update({f"irnn-g0prev-K{K}": c for K, c in zip(CONTROL_KS, ("0.45", "0.7"))})
        for key in ds["run"].values:
            key = str(key)
            ctrl = key.startswith("irnn-g0prev")
            kw = dict(color=colors[key], ls="--" if ctrl else "-")
            sub = ds.sel(run=key)
            for s in sub["seed"].values:
                axes[0].plot(it, sub["val_loss"].sel(seed=s), lw=0.4, alpha=0.35, **kw)
                axes[1].plot(it, sub["ratio"].sel(seed=s), lw=0.4, alpha=0.35, **kw)
                axes[2].plot(it, sub["step_norm"].sel(seed=s), lw=0.4, alpha=0.35, **kw)
            axes[0].plot(it, sub["val_loss"].mean("seed"), lw=1.4, label=labels[key], **kw)
            axes[1].plot(it, np.exp(np.log(sub["ratio"]).mean("seed")), lw=1.4, **kw)
            axes[2].plot(it, np.exp(np.log(sub["step_norm"]).mean("seed")), lw=1.4, **kw)
            r, m = _per_seed(ds, key)
            axes[3].scatter(r, m, s=14, color=colors[key], marker="s" if ctrl else "o",
                            edgecolor="k" if ctrl else "none", lw=0.4, clip_on=False, zorder=3)
        base = float(ds.attrs["baseline"])
        axes[0].axhline(base, color="k", lw=0.7, ls=":")
        axes[0].annotate(f"predict 1: MSE {base:.3f}", (it[-1], base), ha="right", va="bottom", fontsize=6.5)
        axes[3].axhline(base, color="k", lw=0.7, ls=":")
        axes[0].set_ylabel("validation MSE (thin: seeds, thick: mean)")
        axes[1].set_ylabel(r"$\|\partial h_T/\partial h_1\| / \|\partial h_T/\partial h_{T-1}\|$ (geo. mean)")
        axes[2].set_ylabel(r"$\|\partial h_T/\partial h_{T-1}\|$ (Fig. 9b)")
        for ax in axes[:3]:
            ax.set_xlabel("training iteration")
        for ax in axes[:3]:
            ax.set_yscale("log")
        axes[1].axhline(1.0, color="k", lw=0.6, ls=":")
        axes[2].axhline(1.0, color="k", lw=0.6, ls=":")
        axes[3].set_xscale("symlog", linthresh=1e-2)
        axes[3].set_xlim(left=0)
        axes[3].set_yscale("log")
        axes[3].set_xlabel("|ln ratio| averaged over training (per seed)")
        axes[3].set_ylabel("final validation MSE (per seed)")
        axes[0].set_title("(a) learning the task")
        axes[1].set_title("(b) ratio → 1 means identity gradient")
        axes[2].set_title("one step's Jacobian norm")
        axes[3].set_title("does the ratio go with learning?")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, frameon=False, fontsize=7,
                   bbox_to_anchor=(0.5, -0.02))
        fig.get_layout_engine().set(rect=(0, 0.12, 1, 0.88))
        fig.suptitle(f"iRNN, adding task — {ds.attrs.get('scaling', '')}", fontsize=7.5)
        return fig

    return _draw()


RECIPE = Recipe(NAME, "iRNN Figs. 3, 9b",
                "as K grows (1 → 5 → 10) the iRNN's ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T-1)‖ approaches 1 and the "
                "adding-task MSE falls with it (each step paired over seeds beyond 2 SE)",
                compute, draw, check, trains=True)

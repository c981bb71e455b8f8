"""MASO Table 4 (App. F.2, §6 "Choosing the standard deviation"): σ_ε × learning rate × {RMSprop,
SGD}, final held-out accuracy per cell, on a reduced grid.

Setting (scaled for two CPU cores; printed on the figure).  scikit-learn's 8×8 digits read pixel
by pixel (T = 64, d = 1; standardised; split 50 / 10 / 40 %) stand in for pixel MNIST (T = 784).
One-layer ReLU RNN, D = 32 (paper 128), from U = I, b = 0; batch 64, no gradient clipping (the
paper's σ_ε = 0 failures are explosions), 300 iterations; held-out accuracy from h_0 = 0
(``dynlab.figures.maso._tables``; a diverged run scores the majority class, like the paper's 0.098 /
0.114 cells).  The grid: σ_ε ∈ {0, 0.01, 0.1, 1, 5} (the paper's App. C grid without 0.001);
three learning rates per optimiser, RMSprop {1e-3, 3e-3, 1e-2} and SGD {1e-4, 3e-4, 1e-3} (the
paper's {1e-5, 1e-4, 1.5e-4, 2e-4} and {1e-7, 1e-6, 1.25e-6, 1.5e-6} are for its 784-step MNIST,
its D = 128 and its loss normalisation; ours were set by a one-seed pilot at σ_ε ∈ {0, 0.1, 1} so
that, as in the paper, the lowest rate trains slowly and the highest is where σ_ε = 0 training
degrades — the pilot's runs are not part of the record).

The claim, §6's two findings, decided on the cells with 5 seeds (the others run 2 seeds, reported
only): (a) "using a random initial hidden state permits the use of higher learning rates that
would lead to an exploding gradient when training without" — at each optimiser's highest rate,
accuracy at σ_ε = 0.01 (the paper's best small σ_ε in both highest-rate columns) minus at σ_ε = 0,
paired over seeds, beyond 2 standard errors, for both optimisers; (b) "RMSprop is less sensitive to
the choice of σ_ε than SGD" (the caption: "SGD works for smaller σ_ε") — at each optimiser's middle
rate, the drop from σ_ε = 0.01 to σ_ε = 5 for SGD minus that for RMSprop, paired over seeds, beyond
2 standard errors.  Negative control: the same two tests with every σ_ε > 0 run of the deciding
cells replaced by a σ_ε = 0 run — in (a) σ_ε = 0.01 by σ_ε = 0 on other seeds (seed + 100: other
initial weights, read-out and batches); in (b) σ_ε = 0.01 by σ_ε = 0 on the same seeds and σ_ε = 5
by σ_ε = 0 on seed + 100 — no random state anywhere; it passes if (a) and (b) both pass, and must
fail.

The minimum effect of every comparison is declared from the task: the resolution of an accuracy on
the held-out split, 0.5/√n (0.019 on 719; the paper's MNIST differences are reported beside).
Competence gate (declared), on every arm that decides: in (a), the failure the claim is about must
be there — at σ_ε = 0, the highest rate's accuracy below the middle rate's beyond 2 SE — and the arm
the claim says trains, σ_ε = 0.01 at the highest rate, must learn (held-out accuracy above the
majority class beyond 2 SE); in (b), the σ_ε = 0.01 cells of both optimisers at the middle rate must
learn.  A part whose arm did not is *inconclusive at this scale*: if σ_ε = 0.01 collapses at the
highest rate as σ_ε = 0 does, the failure is not the h_0-driven explosion the paper describes.

On the earlier record's identical control differences (0.0305980528511822 for both optimisers, and
RMSprop's claim difference exactly twice that): rerun at the commit that wrote them (70d7fce) and
now, the code gives 0.0206 for RMSprop and 0.0306 for SGD — no code path shares numbers between the
optimisers (σ_ε reaches both: the trained weights differ by 0.29 between σ_ε = 0 and 0.01 for SGD).
What makes such coincidences likely is what the cells contain at the highest rates: collapsed
networks (dead ReLU units, a read-out left with its bias) that predict one to four classes, so each
accuracy is a sum of a few of the held-out class counts (72, 73, 85, …, of 719) and equal sums are
common (RMSprop seed 0 and seed 101 both score 287/719 with different predictions; SGD at σ_ε = 0
and 0.01 predict the same two classes on seed 1).  The record now counts the collapsed runs
(``classes_predicted`` ≤ 2, or diverged) and gates the deciding arms on learning.
"""
from __future__ import annotations

import numpy as np

from .._estimate import cost_of
from . import _training as mt
from .._recipe import Recipe, setting

NAME = "maso-table4-grid"
OPTIMISERS = ("rmsprop", "sgd")
LRS = {"rmsprop": (1e-3, 3e-3, 1e-2), "sgd": (1e-4, 3e-4, 1e-3)}
SIGMAS = (0.0, 0.01, 0.1, 1.0, 5.0)
#: the paper's effects (Table 4, MNIST): (a) σ_ε 0.01 − 0 at each optimiser's highest rate, (b) SGD's
#: drop from σ_ε 0.01 to 5 minus RMSprop's
PAPER_A = {"rmsprop": 0.976 - 0.114, "sgd": 0.918 - 0.098}
PAPER_B = 0.800 - (-0.001)
#: the σ_ε the claims compare (small vs none for (a), small vs large for (b))
SMALL, LARGE = 0.01, 5.0
CONTROL_OFFSET = 100
BATCH = 64
#: Table 4 (MNIST): optimiser → σ_ε → accuracies over the paper's four learning rates
PAPER = {"rmsprop": {0.0: (0.960, 0.973, 0.114, 0.114), 0.001: (0.963, 0.974, 0.978, 0.970),
                     0.01: (0.962, 0.980, 0.978, 0.976), 0.1: (0.955, 0.976, 0.981, 0.976),
                     1.0: (0.956, 0.977, 0.980, 0.976), 5.0: (0.952, 0.981, 0.973, 0.981)},
         "sgd": {0.0: (0.837, 0.879, 0.870, 0.098), 0.001: (0.835, 0.895, 0.913, 0.875),
                 0.01: (0.834, 0.898, 0.922, 0.918), 0.1: (0.803, 0.833, 0.913, 0.908),
                 1.0: (0.520, 0.640, 0.901, 0.098), 5.0: (0.471, 0.098, 0.098, 0.098)}}
PAPER_LRS = {"rmsprop": ("1e-5", "1e-4", "1.5e-4", "2e-4"), "sgd": ("1e-7", "1e-6", "1.25e-6", "1.5e-6")}
#: our learning-rate index → the paper's column it stands for (lowest, middle, highest)
PAPER_COLUMN = (0, 1, 3)


def settings(quick: bool) -> dict:
    """Sizes: hidden D, iterations, σ_ε grid, learning-rate indices, seeds of deciding / other cells."""
    from .._stats import seeds_for

    if quick:
        return {"hidden": 8, "iterations": 20, "sigmas": (0.0, SMALL, LARGE), "lr_index": (1, 2),
                "seeds": seeds_for(True), "other_seeds": 1}
    return {"hidden": 32, "iterations": 300, "sigmas": SIGMAS, "lr_index": (0, 1, 2), "seeds": seeds_for(False),
            "other_seeds": 2}


def deciding(opt_i: int, lr_i: int, sigma: float) -> bool:
    """Is cell (optimiser, learning-rate index, σ_ε) one the claims are decided on?"""
    return (lr_i == 2 and sigma in (0.0, SMALL)) or (lr_i == 1 and sigma in (0.0, SMALL, LARGE))


def compute(quick: bool):
    """The Dataset (module docstring)."""
    import xarray as xr

    from dynlab._dataset import base_attrs
    from dynlab.backends import resolve_backend

    from ._tables import train_score

    st = settings(quick)
    D, its, sigmas, lri, seeds = st["hidden"], st["iterations"], st["sigmas"], st["lr_index"], st["seeds"]
    task = mt.standardised_digits()
    cmd = f"dynlab figures make {NAME}"
    shape = (len(OPTIMISERS), len(lri), len(sigmas), len(seeds))
    acc = np.full(shape, np.nan)
    div = np.zeros(shape, dtype=bool)
    ncls = np.full(shape, np.nan)
    ctrl = np.full((len(OPTIMISERS), len(lri), len(seeds)), np.nan)   # σ_ε = 0 on seeds + CONTROL_OFFSET
    params = 0
    for a, opt in enumerate(OPTIMISERS):
        for b, li in enumerate(lri):
            lr = LRS[opt][li]
            for c, sg in enumerate(sigmas):
                n = len(seeds) if deciding(a, li, sg) else st["other_seeds"]
                for k, s in enumerate(seeds[:n]):
                    r = train_score(task, layers=1, hidden=D, seed=s, sigma_eps=sg, optimiser=opt, lr=lr,
                                    iterations=its, batch=BATCH, command=cmd)
                    acc[a, b, c, k], div[a, b, c, k], params = r["accuracy"], r["diverged"], r["params"]
                    ncls[a, b, c, k] = r["classes_predicted"]
            if li in (1, 2):
                for k, s in enumerate(seeds):
                    r = train_score(task, layers=1, hidden=D, seed=s + CONTROL_OFFSET, sigma_eps=0.0, optimiser=opt,
                                    lr=lr, iterations=its, batch=BATCH, command=cmd)
                    ctrl[a, b, k] = r["accuracy"]
    lr_values = np.array([[LRS[o][i] for i in lri] for o in OPTIMISERS])
    paper = np.array([[[PAPER[o][sg][PAPER_COLUMN[i]] for sg in sigmas] for i in lri] for o in OPTIMISERS])
    dims = ("optimiser", "lr_index", "sigma_eps", "seed")
    data = {
        "accuracy": xr.Variable(dims, acc, {"long_name": "held-out accuracy (from h_0 = 0; NaN: seed not run)",
                                            "units": "1"}),
        "diverged": xr.Variable(dims, div, {"long_name": "training diverged (scored as the majority class)"}),
        "classes_predicted": xr.Variable(dims, ncls, {"long_name": "classes the trained network predicts on the "
                                                                    "held-out split (≤ 2: collapsed)", "units": "1"}),
        "control_accuracy": xr.Variable(("optimiser", "lr_index", "seed"), ctrl, {
            "long_name": "σ_ε = 0 on seed + 100 (the control's stand-in for σ_ε > 0)", "units": "1"}),
        "learning_rate": xr.Variable(("optimiser", "lr_index"), lr_values, {"long_name": "learning rate"}),
        "paper_accuracy": xr.Variable(("optimiser", "lr_index", "sigma_eps"), paper, {
            "long_name": "Table 4 accuracy (MNIST) in the paper's column our rate stands for", "units": "1"}),
        "paper_lr": xr.Variable(("optimiser", "lr_index"), [[PAPER_LRS[o][PAPER_COLUMN[i]] for i in lri]
                                                            for o in OPTIMISERS], {"long_name": "the paper's rate"}),
    }
    coords = {"optimiser": ("optimiser", list(OPTIMISERS)), "lr_index": ("lr_index", np.asarray(lri)),
              "sigma_eps": ("sigma_eps", np.asarray(sigmas), {"long_name": "σ_ε of the random h_0"}),
              "seed": ("seed", np.asarray(seeds), {"long_name": "training seed"})}
    attrs = base_attrs(resolve_backend(None), cmd)
    dname = mt.dataset_name(task)
    data_txt = ("8x8 digits read pixel by pixel (T=64) for MNIST (T=784)" if dname == "digits" else
                "synthetic pattern sequences (no scikit-learn; T=32) for MNIST")
    y = task.data["test"][1]
    attrs.update(dataset=dname, hidden=D, iterations=its, params=int(params), n_test=int(len(y)),
                 majority_accuracy=float(np.bincount(y).max() / len(y)),
                 setting=mt.setting_json(quick, dname, hidden=D, iterations=its, lr="RMSprop 1e-3…1e-2, SGD 1e-4…1e-3",
                                         batch=BATCH),
                 scaling=f"{data_txt}; 50/10/40% split, standardised; ReLU RNN D={D} (paper 128) from U=I, batch "
                         f"{BATCH}, no clipping, {its} iterations (paper 200 epochs); σ_ε {list(sigmas)}, "
                         f"RMSprop lr {[LRS['rmsprop'][i] for i in lri]}, SGD lr {[LRS['sgd'][i] for i in lri]} "
                         f"(paper's rates differ, see text); {len(seeds)} seeds in the deciding cells, "
                         f"{st['other_seeds']} elsewhere" + (" (quick)" if quick else ""))
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _cell(ds, opt, li, sg):
    v = ds["accuracy"].sel(optimiser=opt, lr_index=li, sigma_eps=sg).values
    return v[np.isfinite(v)]


def _control_values(ds) -> list:
    """The per-seed differences of the control's three tests (module docstring), for the same decision as
    the claim's (beyond 2 SE and at least the minimum effect)."""
    hi, mid = int(ds["lr_index"].values[-1]), int(ds["lr_index"].values[-2])
    ctrl = lambda o, li: ds["control_accuracy"].sel(optimiser=o, lr_index=li).values  # noqa: E731
    out = [ctrl(o, hi) - _cell(ds, o, hi, 0.0) for o in OPTIMISERS]
    drop = {o: _cell(ds, o, mid, 0.0) - ctrl(o, mid) for o in OPTIMISERS}
    return out + [drop["sgd"] - drop["rmsprop"]]


def _tests(ds, control: bool = False) -> dict:
    """(a) per optimiser and (b).  ``control``: no random state — in (a) σ_ε = 0.01 is replaced by
    σ_ε = 0 on seed + 100; in (b) σ_ε = 0.01 by σ_ε = 0 on the same seeds and σ_ε = 5 by σ_ε = 0 on
    seed + 100."""
    from .._stats import paired

    hi, mid = int(ds["lr_index"].values[-1]), int(ds["lr_index"].values[-2])
    ctrl = lambda o, li: ds["control_accuracy"].sel(optimiser=o, lr_index=li).values  # noqa: E731
    out = {}
    for o in OPTIMISERS:
        a = ctrl(o, hi) if control else _cell(ds, o, hi, SMALL)
        out[f"a_{o}"] = paired(a, _cell(ds, o, hi, 0.0), larger="a")
    drop = {o: (_cell(ds, o, mid, 0.0) - ctrl(o, mid)) if control else
            (_cell(ds, o, mid, SMALL) - _cell(ds, o, mid, LARGE)) for o in OPTIMISERS}
    out["b"] = paired(drop["sgd"], drop["rmsprop"], larger="a")
    out["drop"] = {o: float(np.mean(v)) for o, v in drop.items()}
    return out


def check(ds) -> dict:
    from .._stats import mean_se

    t = _tests(ds)
    hi, mid = int(ds["lr_index"].values[-1]), int(ds["lr_index"].values[-2])
    lr = lambda o, li: float(ds["learning_rate"].sel(optimiser=o, lr_index=li))  # noqa: E731
    out = {"rmsprop_high_lr_small_minus_zero": t["a_rmsprop"]["diff_mean"],
           "sgd_high_lr_small_minus_zero": t["a_sgd"]["diff_mean"],
           "sgd_minus_rmsprop_drop_small_to_large": t["b"]["diff_mean"],
           "rmsprop_high_lr_small_minus_zero_se": t["a_rmsprop"]["diff_se"],
           "sgd_high_lr_small_minus_zero_se": t["a_sgd"]["diff_se"],
           "sgd_minus_rmsprop_drop_se": t["b"]["diff_se"],
           "rmsprop_drop_small_to_large": t["drop"]["rmsprop"], "sgd_drop_small_to_large": t["drop"]["sgd"],
           "higher_lr_claim": bool(t["a_rmsprop"]["passed"] and t["a_sgd"]["passed"]),
           "sensitivity_claim": bool(t["b"]["passed"]),
           "diverged_runs": int(ds["diverged"].values.sum()), "params": int(ds.attrs.get("params", 0))}
    from .._stats import accuracy_resolution, comparison, effect, gated, level_test, record_fields

    res = accuracy_resolution(int(ds.attrs.get("n_test", 719)))
    maj = float(ds.attrs.get("majority_accuracy", 0.1182))
    learns = {(o, li): level_test(f"{o} lr {lr(o, li):g}, σ_ε = 0.01: held-out accuracy", _cell(ds, o, li, SMALL), maj,
                                  scope="arm") for o in OPTIMISERS for li in (hi, mid)}
    fails = {}
    for o in OPTIMISERS:     # the σ_ε = 0 failure at the highest rate that claim (a) is about must be recreated
        fails[o] = level_test(f"{o}: σ_ε = 0 accuracy, middle − highest lr (the failure (a) is about)",
                              _cell(ds, o, mid, 0.0) - _cell(ds, o, hi, 0.0), 0.0, scope="arm")
    parts = [gated(comparison(f"(a) {o}, highest lr: σ_ε 0.01 − 0", _cell(ds, o, hi, SMALL) - _cell(ds, o, hi, 0.0),
                              interest=res, paper=PAPER_A[o]), [fails[o], learns[(o, hi)]]) for o in OPTIMISERS]
    drop = {o: _cell(ds, o, mid, SMALL) - _cell(ds, o, mid, LARGE) for o in OPTIMISERS}
    parts.append(gated(comparison("(b) middle lr: SGD's drop − RMSprop's (σ_ε 0.01 → 5)", drop["sgd"] - drop["rmsprop"],
                                  interest=res, paper=PAPER_B), [learns[(o, mid)] for o in OPTIMISERS]))
    out["passed"] = bool(all(p["passed"] for p in parts))
    out["higher_lr_claim"] = bool(parts[0]["passed"] and parts[1]["passed"])
    out["sensitivity_claim"] = bool(parts[2]["passed"])
    if "classes_predicted" in ds:
        cp = ds["classes_predicted"]
        for o in OPTIMISERS:
            for li, sg in ((hi, 0.0), (hi, SMALL), (mid, SMALL), (mid, LARGE)):
                v = cp.sel(optimiser=o, lr_index=li, sigma_eps=sg).values
                v = v[np.isfinite(v)]
                out[f"collapsed runs (≤ 2 classes predicted) {o} lr {lr(o, li):g} σ_ε {sg:g}"] = f"{int(np.sum(v <= 2))} of {v.size}"
    out.update(record_fields(effect=effect(parts[0]["name"], parts[0]),
                             gate_items=list(fails.values()) + list(learns.values()),
                             seeds=int(ds.sizes["seed"]), parts=parts))
    per_seed = []
    for k, s in enumerate(ds["seed"].values):
        row = {"seed": int(s)}
        for o in OPTIMISERS:
            for li, sg in ((hi, 0.0), (hi, SMALL), (mid, 0.0), (mid, SMALL), (mid, LARGE)):
                row[f"{o}_lr{lr(o, li):g}_sigma{sg:g}"] = float(ds["accuracy"].sel(optimiser=o, lr_index=li,
                                                                                  sigma_eps=sg).values[k])
        per_seed.append(row)
    out["per_seed"] = per_seed

    c = _tests(ds, control=True)
    out["control"] = {
        "setting": f"no random state anywhere: in (a) σ_ε = 0.01 replaced by σ_ε = 0 on seed + {CONTROL_OFFSET}; in "
                   f"(b) σ_ε = 0.01 by σ_ε = 0 on the same seeds and σ_ε = 5 by σ_ε = 0 on seed + {CONTROL_OFFSET}; "
                   "passes if (a) for both optimisers and (b) pass",
        "measured": {"rmsprop_high_lr_difference": c["a_rmsprop"]["diff_mean"],
                     "rmsprop_high_lr_difference_se": c["a_rmsprop"]["diff_se"],
                     "sgd_high_lr_difference": c["a_sgd"]["diff_mean"],
                     "sgd_high_lr_difference_se": c["a_sgd"]["diff_se"],
                     "sgd_minus_rmsprop_drop": c["b"]["diff_mean"], "sgd_minus_rmsprop_drop_se": c["b"]["diff_se"]},
        "passed": bool(all(comparison("", v, interest=res)["passed"] for v in _control_values(ds)))}
    if not out["passed"]:
        acc = lambda o, li, sg: mean_se(_cell(ds, o, li, sg))[0]  # noqa: E731
        out["finding"] = (
            "(a) at the highest rate, accuracy at σ_ε = 0.01 minus at σ_ε = 0: "
            + "; ".join(f"{o} (lr {lr(o, hi):g}) {t['a_' + o]['diff_mean']:+.3f} ± {t['a_' + o]['diff_se']:.3f} "
                        f"({acc(o, hi, 0.0):.3f} → {acc(o, hi, SMALL):.3f})" for o in OPTIMISERS)
            + f" [paper: RMSprop 0.114 → 0.976, SGD 0.098 → 0.918]; (b) at the middle rate the drop from σ_ε = 0.01 "
            f"to 5 is {t['drop']['rmsprop']:+.3f} for RMSprop and {t['drop']['sgd']:+.3f} for SGD, SGD minus RMSprop "
            f"{t['b']['diff_mean']:+.3f} ± {t['b']['diff_se']:.3f} [paper: RMSprop −0.001, SGD +0.800] (mean ± SE "
            "over seeds, paired)")
    out["table"] = _table(ds)
    return out


def _table(ds) -> dict:
    from .._stats import mean_se

    cols = ["σ_ε"]
    lri = [int(i) for i in ds["lr_index"].values]
    for o in OPTIMISERS:
        for li in lri:
            name = "RMSprop" if o == "rmsprop" else "SGD"
            cols += [f"{name} {float(ds['learning_rate'].sel(optimiser=o, lr_index=li)):g}",
                     f"paper {name} {str(ds['paper_lr'].sel(optimiser=o, lr_index=li).values)}"]
    rows = []
    for sg in ds["sigma_eps"].values:
        row = [f"{float(sg):g}"]
        for o in OPTIMISERS:
            for li in lri:
                v = _cell(ds, o, li, sg)
                m, se, n = mean_se(v)
                mark = "*" if deciding(0, li, float(sg)) else ""
                row += [f"{m:.3f}{mark}" + (f" ± {se:.3f}" if n > 1 else ""),
                        float(ds["paper_accuracy"].sel(optimiser=o, lr_index=li, sigma_eps=sg))]
        rows.append(row)
    return {"title": "MASO Table 4 — held-out accuracy per σ_ε × optimiser × learning rate (mean ± SE over seeds; "
                     "* = a deciding cell, 5 seeds)",
            "columns": cols, "rows": rows,
            "note": "scikit-learn's 8×8 digits read pixel by pixel (T = 64) stand in for MNIST (T = 784); D = "
                    f"{int(ds.attrs['hidden'])} (paper 128), {int(ds.attrs['iterations'])} iterations; our learning "
                    "rates stand for the paper's lowest, second and highest column (theirs are for 784 steps and "
                    "another loss scale), so the paper's column is beside ours, not the same rate; the paper's "
                    "σ_ε = 0.001 row and its 1.25e-6 / 1.5e-4 columns are left out"}


def draw(ds):
    from ...plot.partition import rows_figure
    from ...plot.style import PANEL_WIDTH
    from .._stats import mean_se

    fig, rows = rows_figure((2, 2), 2.5, width=PANEL_WIDTH * 2.4)
    sig = ds["sigma_eps"].values
    lri = [int(i) for i in ds["lr_index"].values]
    for a, o in enumerate(OPTIMISERS):
        name = "RMSprop" if o == "rmsprop" else "SGD"
        for r, (which, title) in enumerate((("ours", "ours"), ("paper", "paper (MNIST)"))):
            ax = rows[r][a]
            if which == "ours":
                M = np.array([[mean_se(_cell(ds, o, li, s))[0] for li in lri] for s in sig])
                xl = [f"{float(ds['learning_rate'].sel(optimiser=o, lr_index=li)):g}" for li in lri]
            else:
                M = ds["paper_accuracy"].sel(optimiser=o).values.T
                xl = [str(ds["paper_lr"].sel(optimiser=o, lr_index=li).values) for li in lri]
            im = ax.imshow(M, vmin=0, vmax=1, cmap="viridis", aspect="auto")
            for i in range(M.shape[0]):
                for j in range(M.shape[1]):
                    star = "*" if (which == "ours" and deciding(a, lri[j], float(sig[i]))) else ""
                    ax.text(j, i, f"{M[i, j]:.2f}{star}", ha="center", va="center", fontsize=7,
                            color="w" if M[i, j] < 0.6 else "k")
            ax.set_xticks(range(len(lri)), xl)
            ax.set_yticks(range(len(sig)), [f"{s:g}" for s in sig])
            ax.set_xlabel(f"{name} learning rate")
            ax.set_ylabel("σ_ε")
            ax.set_title(f"{name}, {title}")
    fig.colorbar(im, ax=rows[1][1], label="held-out accuracy", shrink=0.8)
    return fig


RECIPE = Recipe(
    name=NAME,
    source="MASO Table 4, §6",
    claim="(a) at each optimiser's highest learning rate σ_ε = 0.01 trains better than σ_ε = 0; (b) RMSprop loses less "
          "accuracy than SGD from σ_ε = 0.01 to σ_ε = 5 (paired over seeds, 2 SE, by ≥ the held-out resolution 0.5/√n)",
    compute=compute,
    draw=draw,
    check=check,
    trains=True,
    table=True,
    quote="“First, for both optimizers, using a random initial hidden state permits the use of higher learning rates "
          "that would lead to an exploding gradient when training without a random initial hidden state. Second, "
          "RMSprop is less sensitive to the choice of σ_ε than SGD” (§6, Table 4)",
    gate="on every arm that decides: in (a) the σ_ε = 0 failure is recreated (at each optimiser's highest rate a zero "
         "h₀ ends below the middle rate's accuracy, beyond 2 SE) and σ_ε = 0.01 at that rate learns (held-out accuracy "
         "above the majority class beyond 2 SE); in (b) both optimisers' σ_ε = 0.01 cells at the middle rate learn",
    paper=setting(data="MNIST", T=784, D=128, steps="200 epochs", lr="RMSprop 1e-5…2e-4, SGD 1e-7…1.5e-6"),
    paper_cost="needs MNIST (--data DIR), not wired for the MASO items; " + cost_of("maso-table4-grid"),
    title="MASO Table 4 — σ_ε × learning rate × optimiser (top: ours, mean over seeds, * = deciding "
          "cell, 5 seeds; bottom: the paper's columns ours stand for)\n{scaling}",
    title_wrap=150,
    title_size=7.5,
    one_blas_thread=True,
)

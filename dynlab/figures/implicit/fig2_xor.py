"""implicit Figs. 2–5: XOR with a one-layer implicit network of two sigmoid neurons.

As the paper: two neurons Y1, Y2 with lateral weights W (initially 0), Q, T ~ U[−0.5, 0.5], MSE
loss, full-batch Adam with lr 0.01.  Two trainings per seed:

- Figs. 2–3, the exact implicit gradient, with only Y1 in the loss (target XOR); Y2 is free and
  learns whatever helps Y1 through the lateral weights (the paper's Y2 became a NOR gate);
- Figs. 4–5, the semi-gradient (the equilibrium inside f treated as a constant), which cannot
  train a neuron through another one, so Y2 gets its own target: x2 AND NOT x1 (Fig. 5's Y_gt2:
  0, 1, 0, 0 on the inputs (0,0), (0,1), (1,0), (1,1)).

The claim, per method: Y1 reproduces XOR — on each seed the largest error max |Y1 − XOR| over the
four inputs is measured, and the claim holds when its mean over seeds plus two standard errors is
below 0.1 (the paper's tables show errors of at most 0.03; 0.5 would merely be the right side of
one half).  Negative control: a feed-forward sigmoid unit σ(q·x + t), trained the same way on each
seed, under the same check — a monotone unit cannot represent XOR, so its largest error stays ≥ 0.5.
Y2's learned gate is reported per seed, not judged.
"""
from __future__ import annotations

import numpy as np

from .._recipe import Recipe, Scale, setting, setting_attr
from .._stats import comparison, effect, level_test, mean_se, record_fields, seeds_for

XOR = np.array([0.0, 1.0, 1.0, 0.0])
ANDNOT = np.array([0.0, 1.0, 0.0, 0.0])  # x2 AND NOT x1, the paper's Fig. 5 target of Y2
ITERATIONS = 3000
THRESHOLD = 0.1
#: the margin below the threshold that matters (declared) and the constant predictor's MSE on XOR
MARGIN, CONSTANT_MSE = 0.02, 0.25
METHODS = ("exact", "semi", "feed-forward")


def compute(scale):
    quick = Scale.of(scale).quick
    import xarray as xr

    import dynlab as dl
    from dynlab._dataset import base_attrs
    from dynlab.backends import resolve_backend

    seeds = seeds_for(quick)
    loss, Y = np.empty((3, len(seeds), ITERATIONS)), np.full((3, len(seeds), 4, 2), np.nan)
    for j, seed in enumerate(seeds):
        for i, (kw, hidden) in enumerate(((dict(gradient="exact", second="free"), 2),
                                          (dict(gradient="semi", second="andnot"), 2),
                                          (dict(feedforward=True), 1))):
            _, ds = dl.train_implicit("xor", hidden=hidden, iterations=ITERATIONS, lr=0.01, seed=seed, **kw)
            loss[i, j] = ds.loss.values
            Y[i, j, :, :ds.Y_test.shape[1]] = ds.Y_test.values
    return xr.Dataset(
        {"loss": (("net", "seed", "iteration"), loss,
                  {"long_name": "training MSE (over the targeted neurons)", "units": "1"}),
         "Y": (("net", "seed", "point", "neuron"), Y,
               {"long_name": "equilibrium outputs (Y1, Y2); the feed-forward unit has only Y1", "units": "1"}),
         "target": ("point", XOR, {"long_name": "XOR target of Y1", "units": "1"}),
         "target_y2_semi": ("point", ANDNOT, {"long_name": "semi-gradient target of Y2: x2 AND NOT x1", "units": "1"})},
        coords={"net": list(METHODS), "seed": seeds, "iteration": np.arange(ITERATIONS),
                "x1": ("point", [0, 0, 1, 1]), "x2": ("point", [0, 1, 0, 1]), "neuron": ["Y1", "Y2"]},
        attrs={"model": "implicit", "activation": "sigmoid", "lr": 0.01, "optimiser": "adam", "threshold": THRESHOLD,
               "setting": setting_attr(data="XOR", D=2, batch=4, steps=ITERATIONS, lr=0.01),
               "scaling": (f"as the paper (2 sigmoid neurons, W = 0 and Q, T ~ U[−0.5, 0.5] at the start, Adam lr 0.01, "
                           f"full batch); {ITERATIONS} steps (the paper's count is not given), {len(seeds)} seeds per "
                           f"method" + (" (quick)" if quick else "")),
               **base_attrs(resolve_backend(None), "dynlab figures implicit-fig2-xor")},
    )


def _max_err(ds, method):
    return np.abs(ds.Y.sel(net=method).values[:, :, 0] - ds.target.values).max(axis=1)


def _gate(y2):
    """Y2 rounded on the four inputs, as the name of the 2-input gate it computes (or the 0/1 pattern)."""
    names = {(0, 0, 0, 1): "AND", (0, 1, 1, 1): "OR", (1, 0, 0, 0): "NOR", (1, 1, 1, 0): "NAND",
             (0, 1, 0, 0): "x2 AND NOT x1", (0, 0, 1, 0): "x1 AND NOT x2", (0, 1, 1, 0): "XOR",
             (1, 0, 0, 1): "XNOR", (1, 1, 0, 1): "x1 → x2", (1, 0, 1, 1): "x2 → x1", (0, 0, 1, 1): "x1",
             (0, 1, 0, 1): "x2", (1, 1, 0, 0): "NOT x1", (1, 0, 1, 0): "NOT x2"}
    bits = tuple(int(v > 0.5) for v in y2)
    return names.get(bits, "".join(map(str, bits)))


def _judge(errs, thr):
    m, se, n = mean_se(errs)
    return {"mean_max_error": m, "se": se, "n": n, "solved_seeds": int(np.sum(errs < thr)),
            "passed": bool(np.isfinite(m) and m + 2 * se < thr)}


def draw(ds):
    from dynlab.plot.style import COLORS, new_figure

    fig, (a, b, c) = new_figure(3, height=2.9)
    col = {"exact": COLORS["blue"], "semi": COLORS["vermillion"], "feed-forward": COLORS["black"]}
    lab = {"exact": "implicit, exact gradient (Y2 free)", "semi": "implicit, semi-gradient (Y2 → x2∧¬x1)",
           "feed-forward": "feed-forward unit σ(q·x+t) (control)"}
    it = ds.iteration.values
    for m in METHODS:
        for j in range(ds.sizes["seed"]):
            a.semilogy(it, ds.loss.sel(net=m).values[j], color=col[m], lw=0.8, alpha=0.8,
                       label=lab[m] if j == 0 else None)
    a.set_xlabel("iteration")
    a.set_ylabel("training MSE")
    a.set_title("(a) loss, every seed")
    a.legend(frameon=False, fontsize=6, loc="lower left")
    x = np.arange(4)
    ticks = [f"({p},{q})" for p, q in zip(ds.x1.values, ds.x2.values)]
    for k, m in enumerate(METHODS):
        y1 = ds.Y.sel(net=m).values[:, :, 0]
        for j in range(y1.shape[0]):
            b.plot(x + (k - 1) * 0.22, y1[j], "o", ms=3, color=col[m], alpha=0.8,
                   label=m if j == 0 else None)
    b.plot(x, ds.target.values, "k_", ms=22, mew=1.2, label="XOR target")
    b.set_xticks(x, ticks)
    b.set_xlabel("input (x1, x2)")
    b.set_ylabel("Y1 at equilibrium")
    b.set_ylim(-0.05, 1.3)
    b.set_title(f"(b) Y1, every seed (check: max error < {float(ds.attrs['threshold']):g})")
    b.legend(frameon=False, fontsize=6, ncol=2, loc="upper center")
    for k, m in enumerate(("exact", "semi")):
        y2 = ds.Y.sel(net=m).values[:, :, 1]
        for j in range(y2.shape[0]):
            c.plot(x + (k - 0.5) * 0.3, y2[j], "o", ms=3, color=col[m], alpha=0.8,
                   label=("exact: Y2 free" if m == "exact" else "semi: Y2 trained") if j == 0 else None)
    c.plot(x + 0.15, ds.target_y2_semi.values, "_", color=col["semi"], ms=14, mew=1.2, label="target x2∧¬x1 (semi)")
    c.set_xticks(x, ticks)
    c.set_xlabel("input (x1, x2)")
    c.set_ylabel("Y2 at equilibrium")
    c.set_ylim(-0.05, 1.3)
    c.set_title("(c) Y2, every seed")
    c.legend(frameon=False, fontsize=6, ncol=2, loc="upper center")
    return fig


def check(ds):
    thr = float(ds.attrs["threshold"])
    seeds = [int(s) for s in ds.seed.values]
    err = {m: _max_err(ds, m) for m in METHODS}
    res = {m: _judge(err[m], thr) for m in METHODS}
    final = ds.loss.isel(iteration=-1)
    per_seed = [{"seed": s,
                 "max_error_exact": float(err["exact"][j]), "max_error_semi": float(err["semi"][j]),
                 "max_error_feedforward": float(err["feed-forward"][j]),
                 "final_mse_exact": float(final.sel(net="exact").values[j]),
                 "final_mse_semi": float(final.sel(net="semi").values[j]),
                 "final_mse_feedforward": float(final.sel(net="feed-forward").values[j]),
                 "y2_gate_exact": _gate(ds.Y.sel(net="exact").values[j, :, 1]),
                 "y2_gate_semi": _gate(ds.Y.sel(net="semi").values[j, :, 1])} for j, s in enumerate(seeds)]
    passed = res["exact"]["passed"] and res["semi"]["passed"]
    parts = [comparison(f"{m}: {thr:g} − max |Y1 − XOR|", thr - err[m], interest=MARGIN) for m in ("exact", "semi")]
    fin = {m: final.sel(net=m).values.astype(float) for m in ("exact", "semi")}
    out = {"passed": passed, "threshold": thr,
           **record_fields(effect=effect("max |Y1 − XOR|, exact gradient", res["exact"]["mean_max_error"],
                                         res["exact"]["se"], n=len(seeds)),
                           gate_items=[level_test(f"{m}: final training MSE", fin[m], CONSTANT_MSE, direction="below")
                                       for m in fin], seeds=len(seeds), parts=parts),
           **{f"{k}_{m}": v for m in ("exact", "semi") for k, v in res[m].items() if k not in ("passed", "n")},
           "exact_holds": res["exact"]["passed"], "semi_holds": res["semi"]["passed"],
           "per_seed": per_seed,
           "control": {"setting": "a feed-forward sigmoid unit σ(q·x + t), trained on the same seeds, same check",
                       "measured": {k: v for k, v in res["feed-forward"].items() if k != "passed"},
                       "passed": res["feed-forward"]["passed"]}}
    if not passed:
        out["finding"] = "; ".join(
            f"{m}: max |Y1 − XOR| = {res[m]['mean_max_error']:.3f} ± {res[m]['se']:.3f} (mean ± SE over "
            f"{res[m]['n']} seeds, {res[m]['solved_seeds']} below {thr:g}), not below {thr:g} beyond 2 SE"
            for m in ("exact", "semi") if not res[m]["passed"])
    return out


RECIPE = Recipe("implicit-fig2-xor", "implicit Figs. 2–5",
                "a one-layer implicit net of two sigmoid neurons learns XOR in Y1 (max error < 0.1 beyond 2 SE over "
                "seeds), with the exact gradient (Y2 free) and with the semi-gradient (Y2 → x2 AND NOT x1)",
                compute, draw, check, trains=True,
                quote="“a one-layer implicit recurrent network is able to solve the XOR-Problem […] with a very low "
                      "error” and “even with the semi-gradient method neuron Y_1 learns an output, which is very close "
                      "to the ground truth of the XOR-Problem” (§2.3, Figs. 2–5)",
                gate="both implicit nets train: final training MSE below 0.25, the constant predictor's (output ½), "
                     "beyond 2 SE",
                paper=setting(data="XOR", D=2, batch=4, lr=0.01),
                title="{scaling}", title_size=6)

"""implicit Figs. 6–7: regression of (ω₀, δ) of a damped oscillator from a window of its trajectory.

Two-layer networks of the same units (hidden layer of n, output layer of 2 sigmoid units):
feed-forward (the implicit net with W, W2, R frozen at 0), implicit with the exact gradient, and
implicit with the semi-gradient; full-batch Adam, lr 0.01, several seeds.  Train MSE over
iterations and validation MSE every 10 iterations, mean ± standard deviation over seeds.
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe

KINDS = ("feed-forward", "implicit", "implicit semi-gradient")


def compute(quick: bool):
    import xarray as xr

    import dynlab as dl
    from dynlab._dataset import base_attrs

    samples, hidden, iterations, seeds = (400, 4, 800, [0, 1, 2, 3]) if quick else (1000, 5, 1200, [0, 1, 2, 3])
    task = dl.tasks.damped_oscillator(samples, window=20, seed=0)
    loss, val = [], []
    for kind in KINDS:
        kw = {"feedforward": True} if kind == "feed-forward" else ({"gradient": "semi"} if "semi" in kind else {})
        lk, vk = [], []
        for seed in seeds:
            _, ds = dl.train_implicit(task, hidden=hidden, hidden2=2, iterations=iterations, lr=0.01, seed=seed, **kw)
            lk.append(ds.loss.values)
            vk.append(ds.val_loss.values)
        loss.append(lk)
        val.append(vk)
    ev = ds.eval_iteration.values
    return xr.Dataset(
        {"loss": (("network", "seed", "iteration"), np.array(loss), {"long_name": "training MSE", "units": "1"}),
         "val_loss": (("network", "seed", "eval_iteration"), np.array(val), {"long_name": "validation MSE", "units": "1"})},
        coords={"network": list(KINDS), "seed": seeds, "iteration": np.arange(iterations), "eval_iteration": ev},
        attrs={"model": "implicit", "activation": "sigmoid", "hidden": hidden, "hidden2": 2, "lr": 0.01,
               "task": "oscillator", "samples": samples, "window": 20,
               "scaling": (f"paper: 4·10⁶ samples, 5 hidden, 400 epochs, 12 runs; here {samples} samples "
                           f"(60/20/20 split), {hidden} hidden, {iterations} full-batch steps, {len(seeds)} seeds;\n"
                           "targets (ω₀−1, δ/2), windows of 20 normalised by their max"),
               **base_attrs("numpy", "dynlab figures implicit-fig6-oscillator")},
    )


def draw(ds):
    from dynlab.plot.style import COLORS, new_figure, styled

    @styled
    def _draw():
        fig, (a, b) = new_figure(2, height=2.9)
        col = dict(zip(KINDS, (COLORS["black"], COLORS["blue"], COLORS["vermillion"])))
        for kind in KINDS:
            for ax, var, x in ((a, "loss", ds.iteration.values), (b, "val_loss", ds.eval_iteration.values)):
                v = ds[var].sel(network=kind).values
                m, s = v.mean(axis=0), v.std(axis=0)
                ax.plot(x, m, color=col[kind], label=kind)
                ax.fill_between(x, m - s, m + s, color=col[kind], alpha=0.2, lw=0)
        for ax, title in ((a, "(a) training MSE"), (b, "(b) validation MSE")):
            ax.set_yscale("log")
            ax.set_xlabel("iteration")
            ax.set_ylabel("MSE (scaled targets)")
            ax.set_title(title)
        b.legend(frameon=False)
        fig.suptitle(ds.attrs["scaling"], fontsize=5.5)
        return fig

    return _draw()


def check(ds):
    final = ds.val_loss.isel(eval_iteration=-1).mean("seed")
    ff, imp, semi = (float(final.sel(network=k)) for k in KINDS)
    return {"passed": bool(imp < ff), "val_mse_feedforward": ff, "val_mse_implicit": imp,
            "val_mse_implicit_semi": semi}


RECIPE = Recipe("implicit-fig6-oscillator", "implicit Figs. 6–7",
                "a two-layer implicit network beats the feed-forward network of the same units on validation MSE",
                compute, draw, check)

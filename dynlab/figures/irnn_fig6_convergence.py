"""iRNN paper Fig. 6: the inner recursion g_k converges linearly to the equilibrium.

e_k = ‖g_k − h_eq‖₂ against k (h_eq: scipy's root) at every step of a random-walk sequence,
with h_prev the simulated state; the fitted linear rate against the local rate and the
contraction bound ρ = 1 − αη + η‖U‖₂; the corrected Prop. 2, e_k ≤ ρ^k e_0, for every k.
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe

NAME = "irnn-fig6-convergence"


def compute(quick: bool):
    import dynlab as dl

    D, T, K_max = (16, 20, 50) if quick else (64, 100, 80)
    # weight scale 0.4: ‖U‖₂ ≈ 2·0.4 < α = 1, so ρ < 1 and the bound says something
    m = dl.make_model("irnn", hidden=D, inputs=1, K=5, eta=0.5, weight_scale=0.4, seed=0)
    x = dl.tasks.random_walk(steps=T, inputs=1, variance=10.0, seed=0)
    h = dl.simulate(m, x)["h"].values
    hp = np.vstack([np.zeros((1, D)), h[:-1]])
    ds = dl.convergence(m, x, hp, K_max=K_max)
    ds.attrs["scaling"] = (f"random iRNN (weight scale 0.4, η = 0.5, K = 5), D = {D}, the {T} steps of one "
                           f"random-walk sequence (variance 10); the paper shows a trained model")
    return ds


def _linearity(ds):
    """R² of the least-squares line through ln e_k over the k the fitted rate used."""
    err = np.atleast_2d(ds["error"].values)
    k = ds["k"].values
    floor = ds.attrs["floor"]
    r2 = []
    for e in err:
        use = (k >= 1) & (e > floor)
        if use.sum() < 3:
            continue
        y = np.log(e[use])
        fit = np.polyval(np.polyfit(k[use], y, 1), k[use])
        r2.append(1 - np.sum((y - fit) ** 2) / np.sum((y - y.mean()) ** 2))
    return np.array(r2)


def check(ds):
    rates = np.atleast_1d(ds["rate"].values)
    rho = float(ds["bound_rate"])
    r2 = _linearity(ds)
    holds = bool(np.all(ds["bound_holds"].values == 1))
    passed = (holds and rho < 1 and bool(np.all(rates <= rho)) and r2.size == rates.size and float(r2.min()) >= 0.99
              and float(ds["reference_residual"].max()) <= 1e-12)
    return {"passed": passed, "bound_rate": rho, "max_fitted_rate": float(rates.max()),
            "median_fitted_rate": float(np.median(rates)), "min_r2_linear_fit": float(r2.min()) if r2.size else 0.0,
            "bound_holds_all_k": holds, "printed_bound_fails_at_K1": int((np.atleast_2d(ds["printed_bound_holds"].values)[:, 1] == 0).sum()),
            "inputs": int(rates.size)}


def draw(ds):
    from ..plot.stability import plot_convergence
    from ..plot.style import COLORS, new_figure, styled

    @styled
    def _draw():
        fig, axes = new_figure(2, height=3.2)
        plot_convergence(ds, ax=axes[0])
        ax = axes[1]
        rates = np.atleast_1d(ds["rate"].values)
        local = np.atleast_1d(ds["local_rate"].values)
        ax.scatter(local, rates, s=10, color=COLORS["blue"], label="per input")
        lo, hi = min(local.min(), rates.min()) * 0.95, float(ds["bound_rate"]) * 1.02
        ax.plot([lo, hi], [lo, hi], color="0.5", lw=0.6, label="fitted = local")
        ax.axhline(float(ds["bound_rate"]), color=COLORS["vermillion"], ls="--", lw=1.0,
                   label=rf"$\rho$ = 1 − αη + η‖U‖₂ = {float(ds['bound_rate']):.3g}")
        ax.set_xlabel("local rate: spectral radius of I + η(∇φU − αI)")
        ax.set_ylabel("fitted linear rate of e_k")
        ax.set_title("rates: fitted ≈ local ≤ ρ")
        ax.legend(frameon=False, loc="upper left")
        fig.suptitle(ds.attrs.get("scaling", ""), fontsize=6.5)
        return fig

    return _draw()


RECIPE = Recipe(name=NAME, source="iRNN Fig. 6",
                claim="‖g_k − h_eq‖ decays at a linear rate; e_k ≤ ρ^k e_0 for every k (corrected Prop. 2)",
                compute=compute, draw=draw, check=check)

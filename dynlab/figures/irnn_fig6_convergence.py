"""iRNN paper Fig. 6: the inner recursion g_k (Eq. 11, g_0 = 0) converges linearly to the equilibrium.

e_k = ‖g_k − h_eq‖₂ against k at every point (x_m, h_{m-1}) of a sequence, for the paper's iRNN
(eq. 9: the recursion g_k = g_{k−1} + η(φ(P[U(g_{k−1} + h_{m−1}) + W x_m + b]) − (g_{k−1} + h_{m−1}))
with P = U = I + V H, ReLU; ``_irnn_training``), in two settings:

- *paper setting* (App. A.7.5: "the learnable parameters are initialized suitably and then fixed"):
  the gallery's initialisation (D = 32, rank 4), not trained, η = 0.5 fixed (the paper does not
  state it; its training start 10⁻² needs thousands of steps to show the rate), driven by a random
  walk (variance 10, the paper's Fig. 2 input);
- *trained*: the iRNN (K = 5) of every seed trained on the HAR-2 stand-in (``_irnn_digits``) with
  its learned η (mean over k), at the points of its own validation trajectories;
- beside them, under its own label, *dynlab's eq. 5 variant*: a tanh iRNN with a dense U ~ N(0,
  0.5²/D) (‖U‖₂ ≈ 1 = α, so Prop. 1's unique root exists), η = 0.5, on the same random-walk
  points — the case where a root is known to exist, used by the gate.  (Eq. 9 with ReLU need not
  have a root: where units are active the equilibrium equation is (P U − I) s = −c on them, and
  P U − I = 2 V H + (V H)² has rank ≤ 2r < D.)

The reference h_eq is the root the recursion itself reaches when run to convergence (checked by its
residual), or scipy's root (the paper's FSOLVE, ``dynlab.convergence``) where the recursion
reaches none; the record says at how many points scipy's root is the recursion's limit.  The check,
at every point: the reference is a root (max-abs residual ≤ 1e-10), and the least-squares line
through ln e_k (the k ≥ 1 with e_k > 1e-10) fits with R² ≥ 0.99 at a rate < 1.  The claim holds
when this is so at every point of both settings.  Reported with it: the fitted rate against the
local rate — the spectral radius of the iteration map's Jacobian I + η(∇φ P U − I) at h_eq — and for
the paper setting the contraction bound ρ = |1 − αη| + η‖P U‖₂ (the corrected Prop. 2).

Competence gate (declared): the solvers are competent where a root exists — a reference root to
1e-10 at ≥ 90 % of the points of dynlab's eq. 5 variant — and the trained networks learned
(validation accuracy above the majority class beyond 2 SE over seeds).  Negative control: the same check on the eq. 5
variant's network with a step η = 2.5 too large for the inner iteration.
"""
from __future__ import annotations

import textwrap

import numpy as np

from . import _irnn_digits as hd
from ._irnn_training import build
from ._recipe import Recipe
from ._stats import effect, gate, level_test

NAME = "irnn-fig6-convergence"
ETA_PAPER, ETA_CONTROL = 0.5, 2.5
R2_MIN, RATE_TOL, REF_TOL, REF_ITER, FLOOR = 0.99, 0.02, 1e-10, 5000, 1e-10


def _points(model, x):
    """(x_m, h_{m-1}) at every step of the model's trajectories on x (B, T, d)."""
    import dynlab as dl

    h = dl.simulate(model, x)["h"].values                      # (B, T, D)
    hp = np.concatenate([np.zeros_like(h[:, :1]), h[:, :-1]], axis=1)
    return x.reshape(-1, x.shape[-1]), hp.reshape(-1, h.shape[-1])


def _phi(model, z):
    from ..activations import phi

    return phi(model.activation, z, model.leak)


def _inner_errors(model, x, hp, h_eq, K_max, eta):
    """e_k = ‖g_k − h_eq‖₂, k = 0..K_max, of the recursion with g_0 = 0 (the step's U, W, b — for
    eq. 9 the products P U, P W, P b —, α and activation)."""
    assert model.sign == 1
    c = x @ model.W.T + model.b
    g = np.zeros_like(hp)
    err = np.empty((hp.shape[0], K_max + 1))
    with np.errstate(over="ignore", invalid="ignore"):
        err[:, 0] = np.linalg.norm(g - h_eq, axis=1)
        for k in range(1, K_max + 1):
            s = g + hp
            g = g + eta * (_phi(model, s @ model.U.T + c) - model.alpha * s)
            err[:, k] = np.linalg.norm(g - h_eq, axis=1)
    return err


def _limit(model, x, hp, eta):
    """Run the recursion until the step is ≤ 1e-15 or REF_ITER steps; returns (h_eq, max-abs residual
    of α s = φ(U s + W x + b) at s = h_eq + h_prev: inf where the run left the finite numbers)."""
    c = x @ model.W.T + model.b
    g = np.zeros_like(hp)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(REF_ITER):
            s = g + hp
            step = eta * (_phi(model, s @ model.U.T + c) - model.alpha * s)
            g = g + step
            if not np.all(np.abs(g) < 1e6) or np.max(np.abs(step)) <= 1e-15:
                break
        s = g + hp
        res = np.max(np.abs(_phi(model, s @ model.U.T + c) - model.alpha * s), axis=1)
    away = ~np.all(np.abs(g) < 1e6, axis=1)          # ran away
    res = np.where(np.isfinite(res) & ~away, res, np.inf)
    return np.where(away[:, None], np.nan, g), res


def _fit(err):
    """Per point: the rate exp(slope) and R² of the least-squares line through ln e_k over the k ≥ 1
    with e_k above FLOOR (nan when fewer than 3 such k)."""
    k = np.arange(err.shape[1])
    rate, r2 = np.full(err.shape[0], np.nan), np.full(err.shape[0], np.nan)
    for n, e in enumerate(err):
        use = (k >= 1) & (e > FLOOR) & np.isfinite(e)
        if use.sum() < 3:
            continue
        y = np.log(e[use])
        coef = np.polyfit(k[use], y, 1)
        ss = np.sum((y - y.mean()) ** 2)
        rate[n] = float(np.exp(coef[0]))
        r2[n] = float(1 - np.sum((y - np.polyval(coef, k[use])) ** 2) / ss) if ss > 0 else 1.0
    return rate, r2


def _run(model, x, hp, K_max, eta):
    """Per point: the reference root — the recursion's own limit where it reaches a root, else scipy's
    root (``dynlab.convergence``, the paper's FSOLVE) where that is one —, e_k, the fit, the local
    rate at the reference, and whether scipy's root is the recursion's limit."""
    import dynlab as dl

    m = model.replace(eta=eta)
    h_lim, res_lim = _limit(m, x, hp, eta)
    with np.errstate(over="ignore", invalid="ignore"):   # the control's recursion runs away from the root
        cv = dl.convergence(m, x, hp, K_max=K_max)
    h_sp, res_sp = cv["h_eq"].values, cv["reference_residual"].values
    own = res_lim <= REF_TOL
    use_sp = ~own & (res_sp <= REF_TOL)
    h_eq = np.where(use_sp[:, None], h_sp, h_lim)
    resid = np.where(use_sp, res_sp, res_lim)
    source = np.where(own, 1, np.where(use_sp, 2, 0)).astype(np.int8)
    err = _inner_errors(m, x, hp, h_eq, K_max, eta)
    rate, r2 = _fit(err)
    local = np.full(x.shape[0], np.nan)
    from ..activations import dphi

    for n in np.flatnonzero(source > 0):
        s = h_eq[n] + hp[n]
        J = dphi(m.activation, m.U @ s + m.W @ x[n] + m.b, m.leak)[:, None] * m.U - m.alpha * np.eye(m.hidden)
        local[n] = np.abs(1.0 + eta * np.linalg.eigvals(J)).max()
    with np.errstate(invalid="ignore"):
        same = own & (res_sp <= REF_TOL) & (np.linalg.norm(h_sp - h_lim, axis=1) <= 1e-8)
    return {"error": err, "rate": rate, "r2": r2, "local_rate": local, "reference_residual": resid,
            "reference_source": source, "scipy_is_root": (res_sp <= REF_TOL).astype(np.int8),
            "scipy_same_root": same.astype(np.int8),
            "bound": cv["bound"].values, "bound_holds": cv["bound_holds"].values, "bound_rate": float(cv["bound_rate"]),
            "norm_U": float(cv.attrs["norm_U"])}


def compute(quick: bool):
    import xarray as xr

    import dynlab as dl

    T, n_seq, K_max = (30, 1, 60) if quick else (100, 2, 200)
    D = hd.D[bool(quick)]
    paper = build("irnn-K5", D, 1, T, 0)[0].replace(eta=ETA_PAPER)
    variant = dl.make_model("irnn", D, 1, K=5, eta=ETA_PAPER, seed=0)          # eq. 5, tanh, dense U
    xw = dl.tasks.random_walk(steps=T, inputs=1, variance=10.0, seed=0)[None]
    xp, hp = _points(paper, xw)
    from ..train.loop import evaluate
    from ._stats import seeds_for

    xv = hd.validation_inputs()
    seeds = seeds_for(quick)
    per_seed, models, accs, etas = [], [], [], []
    for sd in seeds:      # every seed's trained iRNN, at the points of its own validation trajectories
        res = hd.har2_run("irnn-K5", int(sd), bool(quick))
        accs.append(float(evaluate(res.model, res.readout, hd.binary_digits(), "val")["accuracy"]))
        etas.append(float(np.mean(res.model.eta)))
        trained = res.model.replace(eta=etas[-1])
        xt, ht = _points(trained, xv[:n_seq])
        per_seed.append(_run(trained, xt, ht, K_max, etas[-1]))
        models.append(res.model)
    xq, hq = _points(variant, xw)
    runs = {"paper": _run(paper, xp, hp, K_max, ETA_PAPER), "trained": _merge(per_seed),
            "variant": _run(variant, xq, hq, K_max, ETA_PAPER), "control": _run(variant, xq, hq, K_max, ETA_CONTROL)}
    point_seed = np.concatenate([np.full(r["error"].shape[0], sd) for sd, r in zip(seeds, per_seed)])
    data = {}
    for key, r in runs.items():
        dim = f"point_{key}"
        data[f"{key}_error"] = ((dim, "k"), r["error"], {"long_name": "e_k = ‖g_k − h_eq‖₂", "units": "1"})
        for v, name in (("rate", "fitted linear rate"), ("r2", "R² of the line through ln e_k"),
                        ("local_rate", "spectral radius of I + η(∇φU − αI) at h_eq"),
                        ("reference_residual", "max-abs residual of the reference root"),
                        ("reference_source", "reference: 1 the recursion's limit, 2 scipy's root, 0 none"),
                        ("scipy_is_root", "scipy's root (dynlab.convergence) is a root"),
                        ("scipy_same_root", "scipy's root is the recursion's limit"),
                        ("bound_holds", "e_k ≤ ρ^k e_0 (scipy reference) for every k")):
            data[f"{key}_{v}"] = ((dim,), r[v], {"long_name": name, "units": "1"})
        data[f"{key}_bound_rate"] = ((), r["bound_rate"], {"long_name": "ρ = |1 − αη| + η‖U‖₂", "units": "1"})
    data["paper_bound"] = (("point_paper", "k"), runs["paper"]["bound"], {"long_name": "ρ^k e_0", "units": "1"})
    ds = xr.Dataset(data, coords={"k": np.arange(K_max + 1)})
    ds = ds.assign(**hd.params_vars(models, seeds))
    ds["trained_point_seed"] = (("point_trained",), point_seed, {"long_name": "the trained network's seed"})
    ds["trained_val_accuracy"] = (("seed",), np.array(accs), {"long_name": "validation accuracy", "units": "1"})
    ds["trained_eta"] = (("seed",), np.array(etas), {"long_name": "trained η (mean over k)", "units": "1"})
    ds.attrs.update({"figure": NAME, "floor": FLOOR, "K_max": K_max,
                     "majority_accuracy": hd.majority("val"),
                     "paper_eta": ETA_PAPER, "trained_eta_mean": float(np.mean(etas)), "control_eta": ETA_CONTROL,
                     "norm_U_paper": runs["paper"]["norm_U"], "norm_U_trained": runs["trained"]["norm_U"],
                     "dynlab_version": dl.__version__,
                     "command": f"dynlab figures make {NAME}" + (" --quick" if quick else ""),
                     "scaling": (f"paper setting: untrained eq. 9 iRNN (ReLU) D={D}, η={ETA_PAPER}, {T} random-walk "
                                 f"points; trained: {hd.setting(quick)}, {len(seeds)} seeds, the {n_seq}×64 points of "
                                 f"{n_seq} validation sequence(s) each; K up to {K_max}; paper: trained sizes not stated"
                                 + (" (quick)" if quick else ""))})
    return ds


def _merge(runs):
    """One ``_run`` result from several (the trained networks of every seed), points concatenated."""
    out = {}
    for k, v in runs[0].items():
        out[k] = (np.concatenate([r[k] for r in runs], axis=0) if isinstance(v, np.ndarray) and v.ndim >= 1
                  else max(float(r[k]) for r in runs))
    return out


def _setting(ds, key):
    """The per-point check of one setting: the reference is a root, ln e_k is a line (R²), rate < 1;
    and, reported, how far the fitted rate is from the local rate and whether scipy found this root."""
    rate, r2 = _fit(ds[f"{key}_error"].values)       # from the errors themselves (stored beside, for the picture)
    local = ds[f"{key}_local_rate"].values
    ref_ok = ds[f"{key}_reference_residual"].values <= REF_TOL
    ok = ref_ok & (r2 >= R2_MIN) & (rate < 1)
    dev = np.where(ref_ok, np.abs(rate - local), np.nan)
    fin = np.isfinite(dev)
    return {"points": int(rate.size), "frac_linear": float(np.mean(ok)),
            "reference_not_a_root": int(np.sum(~ref_ok)),
            "min_r2": float(np.nanmin(r2)) if np.isfinite(r2).any() else float("nan"),
            "median_fitted_rate": float(np.nanmedian(rate)) if np.isfinite(rate).any() else float("nan"),
            "median_local_rate": float(np.median(local)), "max_local_rate": float(np.max(local)),
            "frac_fitted_within_0.02_of_local": float(np.mean(fin & (np.nan_to_num(dev, nan=1.0) <= RATE_TOL))),
            "max_abs_fitted_minus_local": float(np.nanmax(dev)) if fin.any() else float("nan"),
            "frac_scipy_root_is_this_root": float(np.mean(ds[f"{key}_scipy_same_root"].values)),
            "frac_recursion_reaches_a_root": float(np.mean(ds[f"{key}_reference_source"].values == 1)),
            "passed": bool(np.all(ok))}


def check(ds):
    paper, trained, variant, control = (_setting(ds, k) for k in ("paper", "trained", "variant", "control"))
    passed = bool(paper.pop("passed") and trained.pop("passed"))
    src = float(np.mean(ds["variant_reference_source"].values > 0))
    g = gate([{"name": "eq. 5 variant: fraction of points with a reference root", "met": bool(src >= 0.9),
               "value": src}]
             + [level_test("trained networks' validation accuracy", ds["trained_val_accuracy"].values,
                           float(ds.attrs["majority_accuracy"]))])
    out = {"passed": passed, "gate": g, "seeds": int(ds.sizes["seed"])}
    out.update({f"paper_{k}": v for k, v in paper.items()})
    out.update({f"trained_{k}": v for k, v in trained.items()})
    out.update({f"variant_{k}": v for k, v in variant.items() if k != "passed"})
    out["variant_holds"] = bool(variant["passed"])
    out["paper_bound_rate"] = float(ds["paper_bound_rate"])
    out["paper_bound_holds_all_k"] = bool(np.all(ds["paper_bound_holds"].values == 1))
    out["trained_eta (per seed, mean over k)"] = [float(v) for v in ds["trained_eta"].values]
    out["trained_norm_PU"] = float(ds.attrs["norm_U_trained"])
    frac = min(paper["frac_linear"], trained["frac_linear"])
    out["effect"] = effect("fraction of points converging linearly (the lower setting)", frac, 0.0,
                           n=paper["points"] + trained["points"])
    out["control"] = {"setting": f"dynlab's eq. 5 variant with the inner step η = {ETA_CONTROL} (too large)",
                      "measured": {k: v for k, v in control.items() if k != "passed"},
                      "passed": control["passed"]}
    if not passed:
        out["finding"] = (f"linear convergence (R² ≥ {R2_MIN}, rate < 1, to a root) at {paper['frac_linear']:.0%} "
                          f"of the paper-setting points (largest local rate {paper['max_local_rate']:.3g}) and "
                          f"{trained['frac_linear']:.0%} of the trained model's points (min R² {trained['min_r2']:.3g}, "
                          f"largest local rate {trained['max_local_rate']:.3g}, no root reached at "
                          f"{trained['reference_not_a_root']} of {trained['points']}; scipy's root is the root the "
                          f"recursion reaches at {trained['frac_scipy_root_is_this_root']:.0%} of them)")
    return out


def draw(ds):
    from ..plot.style import COLORS, styled

    @styled
    def _draw():
        from ._training import panel_grid

        fig, axes = panel_grid(2, 2, width=3.6, height=2.8)
        floor = ds.attrs["floor"]
        k = ds["k"].values
        for ax, key, title in ((axes[0], "paper", f"eq. 9, ReLU, untrained (η = {ds.attrs['paper_eta']:.2g})"),
                               (axes[1], "trained", f"eq. 9, ReLU, trained ({ds.sizes['seed']} seeds, "
                                                    f"mean η = {ds.attrs['trained_eta_mean']:.3g})"),
                               (axes[2], "variant", f"dynlab's eq. 5 variant, tanh (η = {ds.attrs['paper_eta']:.2g})")):
            err = ds[f"{key}_error"].values
            for e in err:  # noqa: B007
                ax.plot(k, np.maximum(e, floor * 1e-2), color=COLORS["blue"], lw=0.5, alpha=0.35)
            ok = int(np.sum(ds[f"{key}_reference_source"].values > 0))
            ax.text(0.98, 0.98, f"reference root at {ok} of {err.shape[0]} points", transform=ax.transAxes,
                    ha="right", va="top", fontsize=6)
            if key == "paper":
                b = ds["paper_bound"].values
                ax.plot(k, b.max(axis=0), color=COLORS["vermillion"], ls="--", lw=1.0,
                        label=rf"bound $\rho^k e_0$, ρ = {float(ds['paper_bound_rate']):.3g} (largest $e_0$)")
            ax.axhline(floor, color="0.4", ls=":", lw=0.8, label=f"{floor:g}: errors below are left out of the fit")
            ax.set_yscale("log")
            ax.set_xlabel("inner iteration k")
            ax.set_ylabel(r"$e_k = \|g_k - h_{eq}\|_2$")
            ax.set_title(title + f", {err.shape[0]} points", fontsize=7.5)
            ax.legend(frameon=False, fontsize=6, loc="lower left")
        ax = axes[3]
        for key, col, lab in (("paper", COLORS["blue"], "eq. 9 untrained"), ("trained", COLORS["green"], "eq. 9 trained"),
                              ("variant", COLORS["orange"], "eq. 5 variant")):
            ax.scatter(ds[f"{key}_local_rate"].values, ds[f"{key}_rate"].values, s=8, color=col, label=lab, alpha=0.7)
        ax.plot([0, 1.05], [0, 1.05], color="0.5", lw=0.6, label="fitted = local")
        ax.axhline(1, color="k", lw=0.6, ls=":")
        ax.set_xlim(0, 1.05)
        ax.set_ylim(0, 1.05)
        ax.set_aspect("equal")
        cl, cr = ds["control_local_rate"].values, ds["control_rate"].values
        ax.text(0.98, 0.04, f"control η = {ds.attrs['control_eta']:g}: local rate ≥ "
                f"{np.nanmin(cl) if np.isfinite(cl).any() else float('nan'):.3g}, fitted rate ≥ "
                f"{np.nanmin(cr) if np.isfinite(cr).any() else float('nan'):.3g}\n(off the axes: e_k grows)",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=6, color=COLORS["vermillion"])
        ax.set_xlabel("local rate: spectral radius of I + η(∇φU − αI) at h_eq")
        ax.set_ylabel("fitted linear rate of e_k")
        ax.set_title("fitted vs local rate per point", fontsize=7.5)
        ax.legend(frameon=False, fontsize=6, loc="upper left", bbox_to_anchor=(0.0, 0.9))
        fig.suptitle("iRNN Fig. 6 — inner recursion (Eq. 11, g_0 = 0) against the root it reaches\n"
                     + textwrap.fill(ds.attrs.get("scaling", ""), 140), fontsize=6)
        return fig

    return _draw()


RECIPE = Recipe(name=NAME, source="iRNN Fig. 6",
                claim="the inner recursion g_k → h_eq converges linearly (ln e_k on a line, R² ≥ 0.99, rate < 1) at "
                      "every point, with parameters initialised and fixed (the paper's setting) and on a trained iRNN",
                compute=compute, draw=draw, check=check,
                quote="“Empirically we verify the local convergence to a fixed point with linear rate … The learnable "
                      "parameters are initialized suitably and then fixed. … the approximate solutions tend to "
                      "converge with linear rate.” (App. A.7.5, Fig. 6)",
                gate="the solvers are competent where a root exists (a reference root to 1e-10 at ≥ 90 % of the "
                     "points of dynlab's eq. 5 variant), and the trained networks learned (validation accuracy above "
                     "the majority class beyond 2 SE)")

"""iRNN paper Fig. 6: the inner recursion g_k (Eq. 11, g_0 = 0) converges linearly to the equilibrium.

App. A.7.5 states its experiment: "comparing the Euclidean distance between the approximate
solutions, h_t^(k), using Eq. 11 with g_0 = 0 and the fixed points, h_t, computed using FSOLVE from
SCIPY.  The learnable parameters are initialized suitably and then fixed."  Eq. 11 is the U form,

    g_i = g_{i−1} + η (φ(U(g_{i−1} + h_{t−1}) + W x_t + b) − α(g_{i−1} + h_{t−1})),   g_0 = 0,

with a dense U — not eq. 9's P[…] with P = U = I + V H.  The judged setting is that experiment:
dynlab's ``make_model("irnn", D, 1, activation="relu", g0="zero")`` (Eq. 11, ReLU — "we used ReLU as
the non-linearity … for all the experiments" —, α = 1, U ~ N(0, 0.5²/D), W ~ N(0, 1), b ~ N(0, 0.1²)),
"initialized suitably": ‖U‖₂ < α, Prop. 1's condition for the equilibrium to exist (declared, and
measured in the gate), η = 0.5 fixed (the paper does not state it; its training start 10⁻² needs
thousands of steps to show the rate), at every point (x_m, h_{m−1}) of a random walk (variance 10,
the paper's Fig. 2 input).  The reference h_eq is scipy's root of α s = φ(U s + W x + b)
(``dynlab.convergence``, the paper's FSOLVE), accepted where its max-abs residual is ≤ 1e-10.

The check, at every point: the least-squares line through ln e_k, e_k = ‖g_k − h_eq‖₂ (the k ≥ 1 with
e_k > 1e-10), fits with R² ≥ 0.99 at a rate < 1.  "The approximate solutions *tend to* converge
with linear rate" is the typical case: the claim holds when this is so at ≥ ``TYPICAL`` = 90 % of
the points (declared).  Reported, not judged, under their own labels: the same recursion with tanh,
and eq. 9 (P = U = I + V H, the form of the paper's training experiments) untrained (η = 0.5) and
trained on the HAR-2 stand-in (``irnn._digits``) — with ReLU, eq. 9 need not have a root: where
units are active its equation is (P U − I) s = −c on them, and P U − I = V(2I + H V)H has rank ≤ r
< D.  Reported with each: the fitted rate against the local rate — the spectral radius of the
iteration map's Jacobian I + η(∇φ U − I) at h_eq — and, for the judged setting, the contraction
bound ρ = |1 − αη| + η‖U‖₂ (the corrected Prop. 2).

Competence gate (declared): the setting is the paper's "suitably initialized" one (‖U‖₂ < α) and the
reference is competent — scipy's root to 1e-10 at ≥ 90 % of the points.  Negative control: the same
check on the same network with the inner step η = 2.5, too large for the recursion.
"""
from __future__ import annotations
import numpy as np

from . import _digits as hd
from ._training import build
from .._recipe import Recipe, setting
from .._stats import effect, gate

NAME = "irnn-fig6-convergence"
ETA_PAPER, ETA_CONTROL = 0.5, 2.5
R2_MIN, RATE_TOL, REF_TOL, REF_ITER, FLOOR = 0.99, 0.02, 1e-10, 5000, 1e-10
#: "tend to converge": the typical case, this fraction of the points (declared)
TYPICAL = 0.9
#: the judged setting first; then the reported ones and the control
SETTINGS = ("paper", "tanh", "eq9", "trained", "control")
LABELS = {"paper": "Eq. 11, ReLU (judged)", "tanh": "Eq. 11, tanh", "eq9": "eq. 9, ReLU, untrained",
          "trained": "eq. 9, ReLU, trained", "control": f"Eq. 11, ReLU, η = {ETA_CONTROL:g} (control)"}


def _points(model, x):
    """(x_m, h_{m-1}) at every step of the model's trajectories on x (B, T, d)."""
    import dynlab as dl

    h = dl.simulate(model, x)["h"].values                      # (B, T, D)
    hp = np.concatenate([np.zeros_like(h[:, :1]), h[:, :-1]], axis=1)
    return x.reshape(-1, x.shape[-1]), hp.reshape(-1, h.shape[-1])


def _inner_errors(system, c, hp, h_eq, K_max, eta):
    """e_k = ‖g_k − h_eq‖₂, k = 0..K_max, of the recursion g_k = g_{k−1} + η F(g_{k−1} + h_prev) with
    g_0 = 0 (``system``: the fixed-point map of the model's form, ``dynlab.models.fixed_point``,
    F(s) = φ(U s + c) − α s with the step's U, W, b — for eq. 9 the products P U, P W, P b;
    ``c`` = W x + b)."""
    g = np.zeros_like(hp)
    err = np.empty((hp.shape[0], K_max + 1))
    with np.errstate(over="ignore", invalid="ignore"):
        err[:, 0] = np.linalg.norm(g - h_eq, axis=1)
        for k in range(1, K_max + 1):
            g = g + eta * system.F(g + hp, c)
            err[:, k] = np.linalg.norm(g - h_eq, axis=1)
    return err


def _limit(system, c, hp, eta):
    """Run the recursion until the step is ≤ 1e-15 or REF_ITER steps; returns (h_eq, max-abs residual
    of α s = φ(U s + W x + b) at s = h_eq + h_prev: inf where the run left the finite numbers)."""
    g = np.zeros_like(hp)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(REF_ITER):
            step = eta * system.F(g + hp, c)
            g = g + step
            if not np.all(np.abs(g) < 1e6) or np.max(np.abs(step)) <= 1e-15:
                break
        res = np.max(np.abs(system.F(g + hp, c)), axis=1)
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


def _run(model, x, hp, K_max, eta, fsolve_first=False):
    """Per point: the reference root — the recursion's own limit where it reaches a root, else scipy's
    root (``dynlab.convergence``, the paper's FSOLVE) where that is one; ``fsolve_first``: scipy's root
    wherever it is one (the paper's reference) —, e_k, the fit, the local rate at the reference, and
    whether scipy's root is the recursion's limit."""
    import dynlab as dl

    from ...analysis.equilibria import fixed_point_map, flow_eigenvalues

    m = model.replace(eta=eta)
    assert m.sign == 1
    system = fixed_point_map(m)
    c = system.c(x)
    h_lim, res_lim = _limit(system, c, hp, eta)
    with np.errstate(over="ignore", invalid="ignore"):   # the control's recursion runs away from the root
        cv = dl.convergence(m, x, hp, K_max=K_max)
    h_sp, res_sp = cv["h_eq"].values, cv["reference_residual"].values
    own = (res_lim <= REF_TOL) & ~(fsolve_first & (res_sp <= REF_TOL))
    use_sp = ~own & (res_sp <= REF_TOL)
    h_eq = np.where(use_sp[:, None], h_sp, h_lim)
    resid = np.where(use_sp, res_sp, res_lim)
    source = np.where(own, 1, np.where(use_sp, 2, 0)).astype(np.int8)
    err = _inner_errors(system, c, hp, h_eq, K_max, eta)
    rate, r2 = _fit(err)
    local = np.full(x.shape[0], np.nan)
    at = np.flatnonzero(source > 0)         # the spectral radius of the step I + η(∇φU − αI) at the reference
    local[at] = np.abs(1.0 + eta * flow_eigenvalues(system, h_eq[at] + hp[at], c[at])).max(axis=1)
    with np.errstate(invalid="ignore"):
        same = own & (res_sp <= REF_TOL) & (np.linalg.norm(h_sp - h_lim, axis=1) <= 1e-8)
    return {"error": err, "rate": rate, "r2": r2, "local_rate": local, "reference_residual": resid,
            "reference_source": source, "scipy_is_root": (res_sp <= REF_TOL).astype(np.int8),
            "scipy_same_root": same.astype(np.int8),
            "bound": cv["bound"].values, "bound_holds": cv["bound_holds"].values, "bound_rate": float(cv["bound_rate"]),
            "norm_U": float(cv.attrs["norm_U"])}


def compute(scale):
    import xarray as xr

    import dynlab as dl

    from .._recipe import Scale, setting_attr

    sc = Scale.of(scale)
    quick = sc.quick
    T, n_seq, K_max = (30, 1, 60) if quick else (100, 2, 200)
    D = hd.D[sc.name]
    judged = dl.make_model("irnn", D, 1, K=5, eta=ETA_PAPER, seed=0, activation="relu", g0="zero")   # Eq. 11
    tanh = dl.make_model("irnn", D, 1, K=5, eta=ETA_PAPER, seed=0, g0="zero")                         # the same, tanh
    eq9 = build("irnn-K5", D, 1, T, 0)[0].replace(eta=ETA_PAPER)
    xw = dl.tasks.random_walk(steps=T, inputs=1, variance=10.0, seed=0)[None]
    from ...train.loop import evaluate
    from .._stats import seeds_for

    xv = hd.validation_inputs(sc, n_seq)
    seeds = seeds_for(quick)
    per_seed, models, accs, etas = [], [], [], []
    for sd in seeds:      # every seed's trained iRNN, at the points of its own validation trajectories
        res = hd.har2_run("irnn-K5", int(sd), sc)
        accs.append(float(evaluate(res.model, res.readout, hd.task(sc), "val")["accuracy"]))
        etas.append(float(np.mean(res.model.eta)))
        trained = res.model.replace(eta=etas[-1])
        xt, ht = _points(trained, xv[:n_seq])
        per_seed.append(_run(trained, xt, ht, K_max, etas[-1]))
        models.append(res.model)
    runs = {}
    for key, m, eta in (("paper", judged, ETA_PAPER), ("tanh", tanh, ETA_PAPER), ("eq9", eq9, ETA_PAPER),
                        ("control", judged, ETA_CONTROL)):
        xq, hq = _points(m.replace(eta=eta) if key != "control" else m, xw)
        runs[key] = _run(m, xq, hq, K_max, eta, fsolve_first=key in ("paper", "control"))
    runs["trained"] = _merge(per_seed)
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
    data["paper_norm_U"] = ((), float(np.linalg.norm(judged.U, 2)), {"long_name": "‖U‖₂ of the judged setting",
                                                                      "units": "1"})
    ds = xr.Dataset(data, coords={"k": np.arange(K_max + 1)})
    ds = ds.assign(**hd.params_vars(models, seeds))
    ds["trained_point_seed"] = (("point_trained",), point_seed, {"long_name": "the trained network's seed"})
    ds["trained_val_accuracy"] = (("seed",), np.array(accs), {"long_name": "validation accuracy", "units": "1"})
    ds["trained_eta"] = (("seed",), np.array(etas), {"long_name": "trained η (mean over k)", "units": "1"})
    ds.attrs.update({"floor": FLOOR, "K_max": K_max,
                     "majority_accuracy": hd.majority("val"),
                     "paper_eta": ETA_PAPER, "trained_eta_mean": float(np.mean(etas)), "control_eta": ETA_CONTROL,
                     "norm_U_paper": runs["paper"]["norm_U"], "norm_U_trained": runs["trained"]["norm_U"],
                     "typical": TYPICAL,
                     "setting": setting_attr(data="random walk, variance 10", T=T, D=D, steps="—", lr="—"),
                     "scaling": (f"judged: Eq. 11 (U form, g₀ = 0), ReLU, D={D}, ‖U‖₂ < α, η={ETA_PAPER}, {T} "
                                 f"random-walk points, K up to {K_max}; reported: the same with tanh, eq. 9 untrained, "
                                 f"and eq. 9 trained ({hd.setting(sc)}, {len(seeds)} seeds, the {n_seq}×{xv.shape[1]} "
                                 f"points of {n_seq} validation sequence(s) each); the paper states no sizes"
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
    res = {k: _setting(ds, k) for k in SETTINGS}
    paper, control = res["paper"], res["control"]
    typical = float(ds.attrs.get("typical", TYPICAL))
    passed = bool(paper["frac_linear"] >= typical)
    src = float(np.mean(ds["paper_reference_source"].values > 0))
    norm_u = float(ds["paper_norm_U"]) if "paper_norm_U" in ds else float(ds.attrs["norm_U_paper"])
    g = gate([{"name": "Eq. 11 setting initialised suitably: ‖U‖₂ < α = 1", "met": bool(norm_u < 1.0),
               "value": round(norm_u, 4)},
              {"name": "Eq. 11 setting: fraction of points with scipy's root (FSOLVE) to 1e-10", "met": bool(src >= 0.9),
               "value": src}])
    from .._stats import fact

    part = fact(f"Eq. 11 (ReLU): linear convergence at ≥ {typical:.0%} of the points", passed, paper["frac_linear"],
                n=paper["points"])
    out = {"passed": passed, "gate": g, "parts": [part], "seeds": 1}
    for key in SETTINGS[:-1]:
        out.update({f"{key}_{k}": v for k, v in res[key].items() if k != "passed"})
    out["paper_bound_rate"] = float(ds["paper_bound_rate"])
    out["paper_bound_holds_all_k"] = bool(np.all(ds["paper_bound_holds"].values == 1))
    out["trained_eta (per seed, mean over k)"] = [float(v) for v in ds["trained_eta"].values]
    out["trained_norm_PU"] = float(ds.attrs["norm_U_trained"])
    out["trained networks' validation accuracy (reported)"] = float(np.mean(ds["trained_val_accuracy"].values))
    out["effect"] = effect("fraction of the Eq. 11 points converging linearly", paper["frac_linear"], 0.0,
                           n=paper["points"])
    out["control"] = {"setting": f"the same Eq. 11 network with the inner step η = {ETA_CONTROL} (too large)",
                      "measured": {k: v for k, v in control.items() if k != "passed"},
                      "passed": bool(control["frac_linear"] >= typical)}
    reported = "; ".join(f"{LABELS[k]}: {res[k]['frac_linear']:.0%} of {res[k]['points']}" for k in SETTINGS[1:-1])
    out["reported (not judged): fraction converging linearly"] = reported
    if not passed:
        out["finding"] = (f"Eq. 11 (ReLU, g₀ = 0) converges linearly to scipy's root (R² ≥ {R2_MIN}, rate < 1) at "
                          f"{paper['frac_linear']:.0%} of {paper['points']} points, below the {typical:.0%} of the "
                          f"typical case (min R² {paper['min_r2']:.3g}, largest local rate {paper['max_local_rate']:.3g})"
                          f"; reported: {reported}")
    return out


def draw(ds):
    from ...plot.style import COLORS

    from .._training import panel_grid

    fig, axes = panel_grid(2, 2, width=3.6, height=2.8)
    floor = ds.attrs["floor"]
    k = ds["k"].values
    for ax, key, title in ((axes[0], "paper", f"judged: Eq. 11, ReLU, g₀ = 0, η = {ds.attrs['paper_eta']:.2g}"),
                           (axes[1], "trained", f"reported: eq. 9 trained ({ds.sizes['seed']} seeds, "
                                                f"η ≈ {ds.attrs['trained_eta_mean']:.2g})"),
                           (axes[2], "eq9", f"reported: eq. 9 untrained, η = {ds.attrs['paper_eta']:.2g}")):
        err = ds[f"{key}_error"].values
        src = ds[f"{key}_reference_source"].values > 0
        for e in err[src]:  # noqa: B007
            ax.plot(k, np.maximum(e, floor * 1e-2), color=COLORS["blue"], lw=0.5, alpha=0.35)
        ok = int(np.sum(src))
        ax.text(0.98, 0.98, f"a root (to 1e-10) at {ok} of {err.shape[0]} points"
                + ("" if ok else ":\nnothing to converge to (eq. 9 with ReLU\nneed not have a root)"),
                transform=ax.transAxes, ha="right", va="top", fontsize=6)
        if key == "paper":
            b = ds["paper_bound"].values
            ax.plot(k, b.max(axis=0), color=COLORS["vermillion"], ls="--", lw=1.0,
                    label=rf"bound $\rho^k e_0$, ρ = {float(ds['paper_bound_rate']):.3g} (largest $e_0$)")
        ax.axhline(floor, color="0.4", ls=":", lw=0.8, label=f"{floor:g}: errors below are left out of the fit")
        ax.set_yscale("log")
        ax.set_xlabel("inner iteration k")
        ax.set_ylabel(r"$e_k = \|g_k - h_{eq}\|_2$")
        ax.set_title(title, fontsize=7.5)
        ax.legend(frameon=False, fontsize=6, loc="lower left")
    ax = axes[3]
    for key, col, lab in (("paper", COLORS["blue"], "Eq. 11, ReLU (judged)"), ("tanh", COLORS["orange"], "Eq. 11, tanh"),
                          ("eq9", COLORS["vermillion"], "eq. 9 untrained"), ("trained", COLORS["green"], "eq. 9 trained")):
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
    return fig


RECIPE = Recipe(name=NAME, source="iRNN Fig. 6",
                claim="Eq. 11 with g₀ = 0 (the U form, ReLU, parameters initialised with ‖U‖₂ < α and fixed) tends to "
                      "converge linearly to FSOLVE's root: ln e_k on a line (R² ≥ 0.99, rate < 1) at ≥ 90 % of the "
                      "points; eq. 9 (untrained, trained) and tanh reported beside",
                compute=compute, draw=draw, check=check,
                quote="“Empirically we verify the local convergence to a fixed point with linear rate … The learnable "
                      "parameters are initialized suitably and then fixed. … the approximate solutions tend to "
                      "converge with linear rate.” (App. A.7.5, Fig. 6)",
                gate="the judged network is initialised suitably (‖U‖₂ < α, Prop. 1's condition for the root) and "
                     "the reference is competent: scipy's root to 1e-10 at ≥ 90 % of its points",
                paper=setting(),
                scales=("quick", "stand-in"),
                title="iRNN Fig. 6 — inner recursion (Eq. 11, g_0 = 0) against the root it reaches\n{scaling}",
                title_wrap=140, title_size=6)

"""A mutation test for the recipes whose check had none: the same check on the recipe's own (quick)
Dataset changed so that the paper's effect is there, and changed so that it is not — the check must
pass on the first and fail on the second.  Each mutation edits only what the effect is (the states,
the errors, the eigenvalues, the test errors, the fixed points), never the check's thresholds.

Recipes: irnn-fig2-phase, irnn-fig6-convergence, irnn-fig7-eigenvalues, implicit-fig1-derivative,
implicit-fig2-xor, implicit-fig6-oscillator, implicit-fig7-size, implicit-a2-iterative,
implicit-s34-stepsize, flipflop-fixed-points, flipflop-bifurcation.  The claims restated for issue 42 (fig6:
Eq. 11, the typical point; fig7: the structural zeros; implicit-fig7: the curve; s34: the judged family) are
mutated the same way; the other restated claims are mutated on built Datasets in the tests beside their recipes.
"""
import numpy as np

import dynlab as dl
from dynlab.figures import get
from dynlab.figures._recipe import record_of

from conftest import quick_figure_dataset as quick   # the recipe's quick Dataset, computed once per session


def verdict(name, ds):
    return record_of(get(name), get(name).check(ds))["verdict"]


# ------------------------------------------------------------------ iRNN Fig. 2
def test_fig2_passes_on_equilibrium_states_and_fails_off_them():
    """The judged cell is the figure's U-form iRNN (its caption: "Parameters U, W, b"): its s_m on the
    noise input are on the curve (the quick record holds); moved by N(0, 0.05²) they are not — the check
    recomputes the residual; eq. 9's cell (reported) does not decide."""
    ds = quick("irnn-fig2-phase")
    assert get("irnn-fig2-phase").check(ds)["passed"]
    off = ds.copy(deep=True)
    s = ds["noise_eq5_s"].values
    off["noise_eq5_s"] = (ds["noise_eq5_s"].dims, s + 0.05 * np.random.default_rng(0).standard_normal(s.shape))
    assert not get("irnn-fig2-phase").check(off)["passed"]
    eq9_on = ds.copy(deep=True)
    from dynlab.io import model_from_dataset

    m = model_from_dataset(ds, entry="irnn").replace(K=400)
    h = dl.simulate(m, ds["noise_x"].values)["h"].values
    eq9_on["noise_s"] = (ds["noise_s"].dims, h + np.vstack([np.zeros((1, 2)), h[:-1]]))
    assert get("irnn-fig2-phase").check(eq9_on)["passed"] == get("irnn-fig2-phase").check(ds)["passed"]


# ------------------------------------------------------------------ iRNN Fig. 6
def _fig6_with(ds, key, transform):
    out = ds.copy(deep=True)
    out[f"{key}_error"] = (out[f"{key}_error"].dims, transform(ds[f"{key}_error"].values))
    return out


def test_fig6_judges_eq11_typically_and_fails_on_sublinear_convergence():
    """The restated claim (App. A.7.5: Eq. 11 with g₀ = 0 against FSOLVE's roots, "tend to converge with
    linear rate"): the quick record's Eq. 11 errors converge linearly at ≥ 90 % of the points whatever
    eq. 9 does (it is reported, not judged); bent sublinear at every point, e_k = e_0/(1 + k)², they fail;
    bent at a few points (< 10 %) they still hold — the typical case, not every point."""
    ds = quick("irnn-fig6-convergence")
    rec = get("irnn-fig6-convergence").check(ds)
    assert rec["passed"] and rec["paper_frac_linear"] >= 0.9
    k = np.arange(ds.sizes["k"])
    sub = _fig6_with(ds, "paper", lambda e: e[:, :1] / (1.0 + k[None, :]) ** 2)
    assert not get("irnn-fig6-convergence").check(sub)["passed"]
    n = ds.sizes["point_paper"]

    def few(e):
        e = e.copy()
        e[: max(1, n // 20)] = e[: max(1, n // 20), :1] / (1.0 + k[None, :]) ** 2
        return e
    assert get("irnn-fig6-convergence").check(_fig6_with(ds, "paper", few))["passed"]


# ------------------------------------------------------------------ iRNN Fig. 7
def test_fig7_passes_on_negative_spectra_and_fails_on_one_positive_point():
    ds = quick("irnn-fig7-eigenvalues")
    neg = ds.copy()
    neg["max_real_other"] = (ds["max_real_other"].dims,
                             -0.3 - 0.01 * np.random.default_rng(0).random(ds["max_real_other"].shape))
    neg["val_accuracy"] = (ds["val_accuracy"].dims, np.full(ds.sizes["seed"], 0.9) + 0.01 * np.arange(ds.sizes["seed"]))
    assert verdict("irnn-fig7-eigenvalues", neg) == "holds"
    one = neg.copy(deep=True)
    one["max_real_other"].values[0, 0] = 0.01
    assert not get("irnn-fig7-eigenvalues").check(one)["passed"]


# ------------------------------------------------------------------ implicit Fig. 1
def test_implicit_fig1_passes_on_the_corrected_form_and_fails_on_the_printed_one():
    ds = quick("implicit-fig1-derivative")
    assert get("implicit-fig1-derivative").check(ds)["passed"]
    swapped = ds.copy()
    swapped["dydw_eq2"] = ds["dydw_printed"]
    assert not get("implicit-fig1-derivative").check(swapped)["passed"]


# ------------------------------------------------------------------ implicit Figs. 2–5
def test_implicit_xor_passes_on_xor_outputs_and_fails_on_the_monotone_units():
    ds = quick("implicit-fig2-xor")
    on = ds.copy(deep=True)
    for net in ("exact", "semi"):
        on["Y"].loc[dict(net=net)] = on["Y"].sel(net=net).values * 0 + np.stack(
            [ds["target"].values, ds["target"].values], axis=-1)[None] * 0.98 + 0.01
    assert get("implicit-fig2-xor").check(on)["passed"]
    off = ds.copy(deep=True)
    for net in ("exact", "semi"):
        off["Y"].loc[dict(net=net)] = ds["Y"].sel(net="feed-forward").values
    assert not get("implicit-fig2-xor").check(off)["passed"]


# ------------------------------------------------------------------ implicit Figs. 6, 7
def test_implicit_fig6_passes_when_the_implicit_net_is_best_and_fails_when_it_ties():
    ds = quick("implicit-fig6-oscillator")
    ff = ds["test_mse"].sel(net="feed-forward").values
    rng = np.random.default_rng(0)
    best = ds.copy(deep=True)
    best["test_mse"].loc[dict(net="implicit")] = 0.5 * ff * (1 + 0.01 * rng.standard_normal(ff.size))
    best["test_mse"].loc[dict(net="implicit semi-gradient")] = 0.75 * ff
    best["test_mse_ablated"] = ("seed", ff * 1.0)
    assert get("implicit-fig6-oscillator").check(best)["passed"]
    tie = best.copy(deep=True)
    tie["test_mse"].loc[dict(net="implicit")] = ff * (1 + 0.01 * rng.standard_normal(ff.size))
    assert not get("implicit-fig6-oscillator").check(tie)["passed"]


def test_implicit_fig7_judges_the_curve_not_every_size():
    """The restated claim (Fig. 7 (b): "much better" over the number of parameters): half the matched
    feed-forward error at every size holds; level with it fails; much better at the larger sizes and
    level at the smallest — which the earlier "at every size" check failed — holds on the curve."""
    ds = quick("implicit-fig7-size")
    rng = np.random.default_rng(0)
    matched = np.stack([ds["test_mse_feedforward"].sel(hidden_feedforward=int(h)).values
                        for h in ds["matched_feedforward_hidden"].values])
    below = ds.copy(deep=True)
    below["test_mse_implicit"] = (ds["test_mse_implicit"].dims, 0.5 * matched * (1 + 0.01 * rng.random(matched.shape)))
    assert get("implicit-fig7-size").check(below)["passed"]
    level = ds.copy(deep=True)
    level["test_mse_implicit"] = (ds["test_mse_implicit"].dims, matched * (1 + 0.01 * rng.standard_normal(matched.shape)))
    assert not get("implicit-fig7-size").check(level)["passed"]
    mixed = below.copy(deep=True)
    mixed["test_mse_implicit"].values[0] = matched[0] * (1 + 0.01 * rng.standard_normal(matched.shape[1]))
    assert get("implicit-fig7-size").check(mixed)["passed"]


# ------------------------------------------------------------------ implicit App. A.2, §3.4
def test_implicit_a2_passes_on_contracting_networks_and_fails_on_the_oscillating_ones():
    ds = quick("implicit-a2-iterative")
    assert get("implicit-a2-iterative").check(ds)["passed"]
    swapped = ds.copy()
    for v in [str(n) for n in ds.data_vars if str(n).endswith("_control")]:
        swapped[v[:-len("_control")]] = ds[v]
    assert not get("implicit-a2-iterative").check(swapped)["passed"]


def test_implicit_s34_is_decided_on_the_family_that_leaves_the_unit_circle():
    """The restated claim: the antisymmetric family decides; the contracting i.i.d. and symmetric
    families are reported (their h = 1 converging — as it must for a contraction — does not fail the
    claim); h = 1 reaching the tolerance on the large antisymmetric net fails it."""
    ds = quick("implicit-s34-stepsize")
    conv_others = ds.copy(deep=True)
    conv_others["other_h1_converged"] = (ds["other_h1_converged"].dims,
                                         np.full(ds["other_h1_converged"].shape, ds.sizes["point"]))
    assert get("implicit-s34-stepsize").check(conv_others)["passed"]
    conv = ds.copy(deep=True)
    conv["residual_h1"].loc[dict(net="large")] = ds["residual_rk4"].sel(net="large").values[:, -1:] * np.ones(
        ds["residual_h1"].sel(net="large").shape)       # h = 1 reaches the tolerance on the large net
    assert not get("implicit-s34-stepsize").check(conv)["passed"]


# ------------------------------------------------------------------ flip-flop
def test_flipflop_passes_on_the_trained_gru_and_fails_on_the_untrained_one():
    ds = quick("flipflop-fixed-points")
    assert get("flipflop-fixed-points").check(ds)["passed"]
    ctrl = [str(n) for n in ds.variables if str(n).startswith("control_found_")]
    swapped = ds.drop_vars([str(n) for n in ds.variables if str(n).startswith("found_")] + ["found"])
    for v in ctrl:          # the untrained GRU's fixed points in the trained one's place
        swapped[v[len("control_"):]] = (("found",), ds[v].values)
    assert not get("flipflop-fixed-points").check(swapped)["passed"]


# ------------------------------------------------------------------ flip-flop bifurcations
def test_flipflop_bifurcation_passes_as_computed_and_fails_with_the_folds_swapped():
    """With the effect: the quick Dataset as computed (every memory's fold against its bit 0 comes
    first); without: the two directions of every seed's branches swapped (x0 → −x0 of the special
    points), so each memory's first fold is the one held *with* its bit 0 — the check must fail."""
    ds = quick("flipflop-bifurcation")
    assert get("flipflop-bifurcation").check(ds)["passed"]
    off = ds.copy()
    off["special_direction"] = (ds["special_direction"].dims, -ds["special_direction"].values)
    off["special_x"] = (ds["special_x"].dims, -ds["special_x"].values)
    assert not get("flipflop-bifurcation").check(off)["passed"]

"""Recipe-specific checks of irnn-fig2-phase, irnn-fig6-convergence, irnn-fig7-eigenvalues and
rin-gradients that the gallery contract (tests/test_figures.py) does not make: the recipes' own
computations against independent ones, and that their inputs and controls are what the
docstrings say."""
import numpy as np
import pytest

import dynlab as dl
from dynlab.figures.irnn import fig2_phase as fig2
from dynlab.figures.irnn import fig6_convergence as fig6
from dynlab.figures.irnn import fig7_eigenvalues as fig7
from dynlab.figures.beyond import rin_gradients as rin


@pytest.fixture(scope="module")
def phase():
    return fig2.compute(True)


def test_fig2_the_walk_saturates_and_the_noise_does_not(phase):
    """The docstring's reason for the second input: the variance-10 walk saturates most steps of
    every cell, the N(0, 1) input few (the eq. 9 iRNN's larger pre-activations P[U s + W x + b]
    saturate more of them: measured 27 % in quick mode, so most steps stay to be judged)."""
    for name in fig2.ORDER + (fig2.EQ5,):
        _, sat_walk = fig2._cell_residuals(phase, name, "walk")
        _, sat_noise = fig2._cell_residuals(phase, name, "noise")
        assert sat_walk.mean() > 0.5, name
        assert sat_noise.mean() < (0.5 if name == "irnn" else 0.1), name


def test_fig2_residuals_against_a_direct_computation(phase):
    """The paper's iRNN residual is s − tanh(P[U s + W x + b]) at s = h_m + h_{m-1}, typed from eq. 9 with
    the parameters P = U = I + V H, W, b; the RNN's is h − step(h; x)."""
    from dynlab.io import model_from_dataset

    m = model_from_dataset(phase, entry="irnn")
    p = m.params()
    P = np.eye(2) + p["V"] @ p["H"]
    h = phase["noise_h"].sel(model="irnn").values
    x = phase["noise_x"].values
    s = h + np.vstack([np.zeros((1, 2)), h[:-1]])
    direct = np.max(np.abs(s - np.tanh((s @ P.T + x @ p["W"].T + p["b"]) @ P.T)), axis=1)
    res, _ = fig2._cell_residuals(phase, "irnn", "noise")
    np.testing.assert_allclose(res, direct, rtol=1e-10, atol=1e-15)
    r = model_from_dataset(phase, entry="rnn")
    hr = phase["noise_h"].sel(model="rnn").values
    direct = np.max(np.abs(hr - np.tanh(hr @ r.U.T + x @ r.W.T + r.b)), axis=1)
    res, _ = fig2._cell_residuals(phase, "rnn", "noise")
    np.testing.assert_allclose(res, direct, rtol=1e-10, atol=1e-15)


def test_fig6_inner_errors_match_dynlab_convergence():
    """The recipe's own Eq. 11 loop (g_0 = 0, the F of the model's fixed-point map) gives
    dynlab.convergence's e_k where both use scipy's root."""

    m = dl.make_model("irnn", 8, 1, K=5, eta=0.5, seed=3)
    x = dl.tasks.random_walk(steps=12, inputs=1, variance=10.0, seed=1)[None]
    xp, hp = fig6._points(m, x)
    cv = dl.convergence(m, xp, hp, K_max=30)
    system = m.replace(eta=0.5).form().fixed_point_map()
    mine = fig6._inner_errors(system, system.c(xp), hp, cv["h_eq"].values, 30, 0.5)
    np.testing.assert_allclose(mine, cv["error"].values, rtol=1e-9, atol=1e-13)


def test_fig6_fit_recovers_a_known_rate():
    k = np.arange(41)
    err = 3.0 * 0.7 ** k
    rate, r2 = fig6._fit(err[None])
    assert rate[0] == pytest.approx(0.7, rel=1e-12) and r2[0] == pytest.approx(1.0, abs=1e-12)
    # a plateau then a drop is not a line
    bent = np.concatenate([np.full(20, 1.0), 0.5 ** np.arange(1, 21)])
    assert fig6._fit(bent[None])[1][0] < 0.9


def test_fig7_spectrum_against_direct_eigenvalues():
    """dynlab.spectrum's eigenvalues of ∇φU − I at s_m, recomputed with numpy at a few points."""
    m = dl.make_model("irnn", 6, 1, K=5, eta=0.5, seed=2)
    x = dl.tasks.random_walk(steps=10, inputs=1, variance=1.0, seed=0, batch=2)
    re, im, mx, _ = fig7._spectrum_summary(m, x)
    h = dl.simulate(m, x)["h"].values
    for b, t in ((0, 0), (1, 4), (0, 9)):
        s = h[b, t] + (h[b, t - 1] if t > 0 else 0.0)
        J = (1 - np.tanh(m.U @ s + m.W @ x[b, t] + m.b) ** 2)[:, None] * m.U - np.eye(6)
        ev = np.linalg.eigvals(J)
        np.testing.assert_allclose(np.sort(re[b, t]), np.sort(ev.real), atol=1e-12)
        assert mx[b * 10 + t] == pytest.approx(ev.real.max(), abs=1e-12)


def test_fig7_control_network_is_unstable_somewhere():
    """The control's U (weight scale 2) has spectral radius > α = 1, so where tanh′ ≈ 1 the flow
    Jacobian ∇φU − I has eigenvalues with positive real part."""
    c = dl.make_model("irnn", 32, 1, K=5, eta=0.5, weight_scale=fig7.CONTROL_SCALE, seed=0)
    assert np.abs(np.linalg.eigvals(c.U)).max() > 1.2


def test_rin_decision_on_constructed_values():
    """_parts on made-up per-seed numbers: clear effects pass, a reversed one fails."""
    a = np.array([0.1, 0.12, 0.11, 0.09, 0.1])
    jac_near, jac_far = 10 ** (0.1 * a), 10 ** (1 + a)        # |log10| ≈ 0.01 vs ≈ 1.1
    ok = rin._parts(jac_near, jac_far, a * 0.1, a + 0.2)
    assert all(p["passed"] for p in ok)
    assert not all(p["passed"] for p in rin._parts(jac_far, jac_near, a * 0.1, a + 0.2))
    assert not all(p["passed"] for p in rin._parts(jac_near, jac_far, a + 0.5, a + 0.2))   # U-penalty trains worse


def test_fig7_structural_zeros_and_the_other_eigenvalues_in_closed_form():
    """For eq. 9 with ReLU, A = ∇φ P U − I, P U − I = V(2I + H V)H: at every point A has ≥ n_a − r zero
    eigenvalues, −1 on each inactive unit, and on the active ones the eigenvalues of (2I + HV) H_a V_a
    (r × r).  ``structure`` counts the zeros and sets n_a − r of them aside; its largest remaining real
    part is checked against that closed form (independent of any eigensolver on the D × D matrix)."""
    from dynlab.figures.irnn._training import build

    m = build("irnn-K5", 16, 1, 12, 3)[0].replace(eta=np.full((12, 5), 0.3))
    x = dl.tasks.random_walk(steps=12, inputs=1, variance=1.0, seed=1, batch=2)
    sp = dl.spectrum(m, x, step=False)
    n_act, z, zeros, other = fig7.structure(m, sp, x)
    V, H = m.params()["V"], m.params()["H"]
    r = V.shape[1]
    y = sp["state"].values
    for b in range(2):
        for t in range(12):
            a = m.U @ y[b, t] + m.W @ x[b, t] + m.b
            act = a > 0
            k = b * 12 + t
            assert n_act[k] == act.sum() and z[k] == max(act.sum() - r, 0) and zeros[k] >= z[k]
            small = np.linalg.eigvals((2 * np.eye(r) + H @ V) @ H[:, act] @ V[act]) if act.any() else np.array([])
            expect = np.concatenate([small.real, -np.ones((~act).sum())])
            expect = np.concatenate([expect, np.zeros(max(act.sum() - r, 0))]) if act.sum() < r else expect
            assert other[k] == pytest.approx(expect.max(), abs=1e-9)


def test_fig7_check_judges_the_non_structural_eigenvalues():
    """Mutation test: with the structural zeros there and every other eigenvalue negative the claim
    holds, though a sign count over all eigenvalues (the earlier check) calls every point unstable; one
    positive non-structural eigenvalue makes it fail; a zero count short of the structure fails the gate."""
    import xarray as xr

    from dynlab.figures._recipe import record_of

    rng = np.random.default_rng(0)
    S, P = 5, 40
    ds = xr.Dataset({"max_real": (("seed", "point"), np.full((S, P), 1e-17)),
                     "max_real_other": (("seed", "point"), -0.2 - 0.1 * rng.random((S, P))),
                     "structural_zeros": (("seed", "point"), np.full((S, P), 10)),
                     "zeros_found": (("seed", "point"), np.full((S, P), 10)),
                     "n_active": (("seed", "point"), np.full((S, P), 14)),
                     "val_accuracy": ("seed", 0.9 + 0.01 * rng.random(S)),
                     "control_max_real_other": ("point", np.full(P, 0.5)),
                     "control_zeros_found": ("point", np.full(P, 3)), "control_structural_zeros": ("point", np.full(P, 3))},
                    coords={"seed": np.arange(S)},
                    attrs={"majority_accuracy": 0.55, "points_per_seed": P, "control_weight_scale": 2.0, "rank": 4})
    out = fig7.check(ds)
    assert out["passed"] and not out["control"]["passed"] and record_of(fig7.RECIPE, out)["verdict"] == "holds"
    assert out["fraction of points with some Re λ ≥ 0 counting the zeros (the old sign count)"] == 1.0
    bad = ds.copy(deep=True)
    bad["max_real_other"].values[2, 7] = 0.05
    assert record_of(fig7.RECIPE, fig7.check(bad))["verdict"] != "holds"
    short = ds.copy(deep=True)
    short["zeros_found"].values[0, 0] = 9
    assert record_of(fig7.RECIPE, fig7.check(short))["verdict"] == "inconclusive"


def test_rin_check_tests_what_the_note_says():
    """Mutation test: ‖V − I‖_F smaller with the penalty on U than on V by more than a tenth of the
    unpenalised distance holds; equal distances do not; an arm that never learned is inconclusive."""
    import xarray as xr

    from dynlab.figures._recipe import record_of

    arms = [a for a, _ in rin.ARMS]
    rng = np.random.default_rng(0)

    def ds(dist_u, dist_v, mse_u=0.05):
        dist = {"penalty-U": dist_u, "penalty-V": dist_v, "none": 1.5, "none-fresh": 1.5}
        mse = {"penalty-U": mse_u, "penalty-V": 0.05, "none": 0.05, "none-fresh": 0.05}
        n = 10
        return xr.Dataset({"dist_identity": (("arm", "seed"), [dist[a] + 0.01 * rng.standard_normal(n) for a in arms]),
                           "val_mse": (("arm", "seed"), [mse[a] + 0.002 * rng.standard_normal(n) for a in arms]),
                           "jac_norm": (("arm", "seed"), np.ones((len(arms), n)) * 0.9)},
                          coords={"arm": arms, "seed": np.arange(n)}, attrs={"baseline": 1 / 6})

    good = rin.check(ds(1.3, 1.55))
    assert good["passed"] and not good["control"]["passed"] and record_of(rin.RECIPE, good)["verdict"] == "holds"
    assert record_of(rin.RECIPE, rin.check(ds(1.5, 1.52)))["verdict"] == "does not hold"
    assert record_of(rin.RECIPE, rin.check(ds(1.3, 1.55, mse_u=0.17)))["verdict"] == "inconclusive"

"""Recipe-specific checks of irnn-fig2-phase, irnn-fig6-convergence, irnn-fig7-eigenvalues and
rin-gradients that the gallery contract (tests/test_figures.py) does not make: the recipes' own
computations against independent ones, and that their inputs and controls are what the
docstrings say."""
import numpy as np
import pytest

import dynlab as dl
from dynlab.figures import irnn_fig2_phase as fig2
from dynlab.figures import irnn_fig6_convergence as fig6
from dynlab.figures import irnn_fig7_eigenvalues as fig7
from dynlab.figures import rin_gradients as rin


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
    """The recipe's own Eq. 11 loop gives dynlab.convergence's e_k where both use scipy's root."""
    m = dl.make_model("irnn", 8, 1, K=5, eta=0.5, seed=3)
    x = dl.tasks.random_walk(steps=12, inputs=1, variance=10.0, seed=1)[None]
    xp, hp = fig6._points(m, x)
    cv = dl.convergence(m, xp, hp, K_max=30)
    mine = fig6._inner_errors(m, xp, hp, cv["h_eq"].values, 30, 0.5)
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
    re, im, mx = fig7._spectrum_summary(m, x)
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

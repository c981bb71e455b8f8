"""The implicit-network recipes' premises (implicit-fig2-xor, implicit-fig6-oscillator): the targets are
the paper's, the controls lack the effect for the stated reason, and parameter counts are what the
records say."""
import numpy as np

import dynlab as dl
from dynlab.figures.implicit.fig2_xor import ANDNOT, XOR, _gate
from dynlab.figures.implicit.fig6_oscillator import _matched_hidden, _n_params
from dynlab.tasks.static import xor
from dynlab.train.implicit import evaluate


def test_xor_targets_are_the_papers_fig5_table():
    # Fig. 5: inputs (0,0), (0,1), (1,0), (1,1); Y_gt1 = 0, 1, 1, 0 and Y_gt2 = 0, 1, 0, 0 (x2 AND NOT x1)
    t = xor("andnot")
    np.testing.assert_array_equal(t.X_train, [[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(t.Y_train[:, 0], XOR)
    np.testing.assert_array_equal(t.Y_train[:, 1], ANDNOT)
    assert _gate(ANDNOT) == "x2 AND NOT x1" and _gate([0.98, 0.01, 0.01, 0.0]) == "NOR"  # Fig. 3's Y2


def test_a_monotone_sigmoid_unit_misses_xor_by_at_least_one_half():
    # the control's premise: σ(q·x + t) is monotone in x1 and x2, so max |σ − XOR| ≥ 1/2 for every q, t
    # (q1, q2 ≥ 0: σ(1,1) ≥ σ(0,1), one of them is ≥ 1/2 off; the other sign patterns alike)
    rng = np.random.default_rng(0)
    P = rng.normal(0, 1, (200_000, 3)) * rng.choice([0.1, 1.0, 10.0, 100.0], (200_000, 3))
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], float)
    Y = 1 / (1 + np.exp(-(P[:, :2] @ X.T + P[:, 2:])))
    assert np.abs(Y - XOR).max(axis=1).min() >= 0.5 - 1e-12


def test_oscillator_parameter_counts_and_the_matched_width():
    # implicit, 5 hidden, 2 outputs, 20 inputs: W 25 + Q 100 + T 5 + W2 4 + Q2 10 + R 10 + T2 2 = 156;
    # feed-forward: 20h + h + 2h + 2 = 23h + 2 → 117 at h = 5, 163 at h = 7 (the closest to 156)
    m = dl.make_model("implicit", hidden=5, inputs=20, hidden2=2, seed=0)
    assert _n_params(m, False) == 156
    assert _n_params(m, True) == 117
    assert _matched_hidden(156, 20, 2) == 7
    assert _n_params(dl.make_model("implicit", hidden=7, inputs=20, hidden2=2, seed=0), True) == 163


def test_the_ablated_implicit_net_is_the_two_layer_feedforward_pass():
    # the control of implicit-fig6: with W, W2, R = 0 the equilibrium is σ(Q2 σ(Q x + T) + T2)
    m = dl.make_model("implicit", hidden=5, inputs=20, hidden2=2, seed=3, weight_scale=1.0)
    cut = m.replace(**{k: np.zeros_like(getattr(m, k)) for k in ("W", "W2", "R")})
    rng = np.random.default_rng(1)
    X = rng.normal(0, 1, (50, 20))
    target = rng.uniform(0, 1, (50, 2))
    loss, Y, _ = evaluate(cut, X, target)
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    explicit = sig(sig(X @ cut.Q.T + cut.T) @ cut.Q2.T + cut.T2)
    np.testing.assert_allclose(Y, explicit, atol=1e-11)
    assert abs(loss - np.mean((explicit - target) ** 2)) < 1e-12
    # and with its recurrent weights the same net computes something else
    _, Y_full, _ = evaluate(m, X, target)
    assert np.abs(Y_full - explicit).max() > 1e-3

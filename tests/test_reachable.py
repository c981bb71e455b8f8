"""Fixed points mean what they say: the box of states a trajectory can reach, and the search's answers.

``dynlab.analysis.reachable.state_box(model, x)`` must (1) hold h_0 = 0, (2) be mapped into itself
by the dynamics at the constant input x — checked by stepping many states drawn in it, and near its
faces, with ``dl.simulate`` (one step, batched) — and (3) hold every true root.  A box shrunk to
half is *not* invariant (the negative control: the invariance check can fail).  Then the
search: on a random GRU at zero input, the case a user found (D = 8, weight scale 3: 199 of 200
points at |h|∞ 35–104), every point reported lies in |h| ≤ 1 and the rest are counted, or kept
and flagged when asked."""
from __future__ import annotations

import numpy as np
import pytest

import battery
import dynlab as dl
from dynlab.analysis.reachable import state_box

#: The battery's cases (tests/battery.py) with weights large enough (scale 2–3; the RIN's own 0.1)
#: that the states reach the faces of their boxes: the Elman cell under a bounded and a one-sided
#: activation, the RIN, the FastRNN, the gated cells and a stack of LSTMs.
CASES = {
    "rnn tanh": lambda: battery.build("rnn", 5, 2, weight_scale=2.0),
    "rnn sigmoid": lambda: battery.build("rnn", 5, 2, activation="sigmoid", weight_scale=2.0),
    "rin relu": lambda: battery.build("rin", 5, 2),
    "fastrnn": lambda: battery.build("fastrnn", 5, 2, activation="tanh", weight_scale=2.0, beta=1.0, alpha=0.5),
    "gru": lambda: battery.build("gru", 5, 2, weight_scale=3.0),
    "lstm": lambda: battery.build("lstm", 5, 2, weight_scale=2.0),
    "stack lstm": lambda: battery.build("stack-lstm", 4, 2, weight_scale=2.0),
}
X = np.array([0.7, -1.3])


def _inside_draws(box, n, rng):
    """n states in the box: uniform where it is finite (a third of them on its faces), N(0, 9) where not."""
    lo, hi = box.lo, box.hi
    finite = np.isfinite(lo) & np.isfinite(hi)
    u = rng.random((n, lo.size))
    face = rng.random((n, lo.size)) < 1 / 3
    u = np.where(face, np.round(u), u)
    y = np.where(finite, lo + u * np.where(finite, hi - lo, 0.0), 0.0)
    free = 3.0 * rng.standard_normal((n, lo.size))
    y = np.where(np.isfinite(lo) & ~np.isfinite(hi), lo + np.abs(free), y)
    y = np.where(~np.isfinite(lo) & np.isfinite(hi), hi - np.abs(free), y)
    return np.where(~np.isfinite(lo) & ~np.isfinite(hi), free, y)


def _one_step(model, Y, x):
    xs = np.broadcast_to(x, (Y.shape[0], 1, x.size)).copy()
    return dl.simulate(model, xs, h0=Y, backend="numpy", progress=False)["h"].values[:, 0, :]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_box_holds_zero_and_the_dynamics_keep_it(name):
    model = CASES[name]()
    box = state_box(model, X)
    assert box.contains(np.zeros((1, model.state_size)))[0]
    rng = np.random.default_rng(0)
    Y = _inside_draws(box, 4000, rng)
    assert box.contains(Y).all()
    assert box.contains(_one_step(model, Y, X)).all(), name


@pytest.mark.parametrize("name", ["rnn tanh", "gru", "lstm"])
def test_a_box_half_the_size_is_not_kept_by_the_dynamics(name):
    """The control: the same check on a box too small fails, so the check above can fail."""
    model = CASES[name]()
    box = state_box(model, X)
    small = type(box)(np.where(np.isfinite(box.lo), box.lo / 2, box.lo), np.where(np.isfinite(box.hi), box.hi / 2,
                                                                                     box.hi), "half")
    Y = _inside_draws(small, 4000, np.random.default_rng(0))
    assert not small.contains(_one_step(model, Y, X)).all()


def test_the_lstm_cell_state_bound_follows_the_forget_gate():
    """|c| ≤ 1/(1 − f⁺) per unit with f⁺ = σ(largest forget pre-activation over |h| ≤ 1): a larger
    forget bias widens it, and f⁺ = 1 in floating point leaves c unbounded."""
    m = dl.make_model("lstm", 3, 1, seed=2)
    D = 3
    b = m.b_ih.copy()
    b[D:2 * D] += 4.0
    wide = m.replace(b_ih=b)
    c_hi, c_wide = state_box(m, [0.0]).hi[D:], state_box(wide, [0.0]).hi[D:]
    assert np.all(c_wide > c_hi) and np.all(np.isfinite(c_wide))
    pre = (m.b_ih + m.b_hh)[D:2 * D] + np.abs(m.W_hh[D:2 * D]).sum(axis=1)
    np.testing.assert_allclose(c_hi, 1.0 / (1.0 - 1.0 / (1.0 + np.exp(-pre))), rtol=1e-12)
    b[D:2 * D] = 100.0
    assert np.all(np.isinf(state_box(m.replace(b_ih=b), [0.0]).hi[D:]))


@pytest.mark.parametrize("name, kw", [("irnn", dict(K=3, alpha=0.5)), ("ctrnn", dict(weight_scale=3.0))])
def test_the_roots_of_the_step_equation_lie_in_the_box(name, kw):
    """iRNN and CTRNN: s = φ(·)/α, so every root the search finds (kept whatever the box says)
    lies in hull(0, range φ)/α — a theorem the box restates."""
    m = dl.make_model(name, 4, 1, seed=3, **kw)
    fp = dl.fixed_points(m, [0.4], n_starts=32, keep_unreachable=True, progress=False)
    roots = fp["h_eq"].values[fp["kind"].values == 1]
    assert roots.size and state_box(m, [0.4]).contains(roots).all()


def test_a_random_gru_at_zero_input_reports_only_reachable_points():
    m = dl.make_model("gru", 8, 1, weight_scale=3.0, seed=0)
    fp = dl.fixed_points(m, np.zeros(1), n_starts=200, progress=False)
    assert fp.sizes["point"] >= 1 and (np.abs(fp["h_eq"].values) <= 1.0).all()
    assert fp["reachable"].values.all() and fp.attrs["n_unreachable"] > 0
    assert fp.attrs["n_stable"] <= fp.attrs["n_roots"] == int((fp["kind"] == 1).sum())
    kept = dl.fixed_points(m, np.zeros(1), n_starts=200, keep_unreachable=True, progress=False)
    far = kept["reachable"].values == 0
    assert int(far.sum()) == kept.attrs["n_unreachable"] == fp.attrs["n_unreachable"]
    assert (np.abs(kept["h_eq"].values[far]).max(axis=1) > 1.0).all()
    near = kept["h_eq"].values[~far]
    np.testing.assert_allclose(np.sort(near, axis=0), np.sort(fp["h_eq"].values, axis=0), atol=1e-10)


def test_the_search_from_a_task_runs_the_model_on_its_test_inputs():
    m = dl.make_model("gru", 6, 3, seed=0)
    task = dl.make_task("flipflop", 30, n_train=10, n_val=10, n_test=12)
    fp = dl.fixed_points(m, np.zeros(3), trajectories=task, n_starts=64, progress=False)
    assert fp.sizes["trajectory"] == 12 and fp.sizes["time"] == 30
    H = dl.simulate(m, task.batch("test")[0], progress=False)["h"].values
    same = dl.fixed_points(m, np.zeros(3), trajectories=H, n_starts=64, progress=False)
    np.testing.assert_array_equal(fp["h_eq"].values, same["h_eq"].values)
    with pytest.raises(dl.ParameterError, match="trajectories"):
        dl.fixed_points(dl.make_model("gru", 6, 2, seed=0), np.zeros(2), trajectories=task)


def test_the_picture_counts_what_it_shows(tmp_path):
    m = dl.make_model("gru", 6, 3, seed=0)
    task = dl.make_task("flipflop", 30, n_train=10, n_val=10, n_test=1)
    one = dl.fixed_points(m, np.zeros(3), trajectories=task, n_starts=32, progress=False)
    fig = dl.plot.draw(one)
    pcs = next(a for a in fig.axes if a.get_title().startswith("fixed points of"))
    eig = next(a for a in fig.axes if "eigenvalues" in a.get_title())
    assert pcs.get_title().endswith(", 1 trajectory")
    labels = [t.get_text() for t in eig.get_legend().get_texts()]
    unstable = int(((one["kind"] == 1) & (one["n_unstable"] > 0)).sum())
    assert any("unstable" in t for t in labels) == (unstable > 0)

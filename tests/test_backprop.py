"""Exact BPTT gradients (dynlab.train.backprop) against central finite differences.

Every parameter of every discrete model (including η in all its shapes, α, FastRNN's gates,
the antisymmetric ε/γ/M, the low-rank V/H, the read-out and h_0), for every loss, at random
parameters.  Tolerance: max |g − g_fd| ≤ 1e-6 · max |g_fd| per parameter array.  Central
differences with step δ = 1e-6 have truncation error O(δ² L''') ≈ 1e-12 and rounding error
≈ 1e-16·|L|/δ ≈ 1e-10, far below the tolerance, so a wrong term in the backward pass (of
relative size ≥ 1e-6) cannot hide.  The piecewise-linear activations are tested at random
points, where no pre-activation lies within δ of a kink (checked: the test would fail otherwise).
"""
import numpy as np
import pytest

import dynlab
from dynlab.errors import ParameterError
from dynlab.train import backprop as bp

from conftest import check_short_cotangents, gradients_per_weight_chunk

D, d, T, B = 3, 2, 6, 2


def _irnn(**kw):
    kw.setdefault("eta", 0.6)
    kw.setdefault("K", 5)
    kw.setdefault("weight_scale", 0.8)
    return dynlab.make_model("irnn", D, d, seed=3, alpha=0.8, **kw)


CASES = {
    "rnn-tanh": lambda: dynlab.make_model("rnn", D, d, seed=1, weight_scale=1.2),
    "rnn-relu": lambda: dynlab.make_model("rnn", D, d, seed=1, weight_scale=0.9, activation="relu"),
    "fastrnn": lambda: dynlab.make_model("fastrnn", D, d, seed=2, alpha=-1.0, beta=1.5),
    "antisymmetric": lambda: dynlab.make_model("antisymmetric", D, d, seed=4, eps=0.3, gamma=0.2),
    "rin-relu": lambda: dynlab.make_model("rin", D, d, seed=5, weight_scale=0.5),
    "rin-tanh": lambda: dynlab.make_model("rin", D, d, seed=5, activation="tanh"),
    "irnn-K1": lambda: _irnn(K=1),
    "irnn-zero-plus": lambda: _irnn(g0="zero", sign=1),
    "irnn-zero-minus": lambda: _irnn(g0="zero", sign=-1),
    "irnn-prev-plus": lambda: _irnn(g0="previous", sign=1),
    "irnn-prev-minus": lambda: _irnn(g0="previous", sign=-1),
    "irnn-etaK": lambda: _irnn(eta=np.linspace(0.3, 0.9, 5), g0="previous"),
    "irnn-etaTK": lambda: _irnn(eta=np.random.default_rng(7).uniform(0.2, 0.9, (T, 5))),
    "irnn-lowrank-relu": lambda: _irnn(rank=2, g0="previous", activation="relu", eta=np.full(5, 0.3)),
    "irnn-lowrank-tanh": lambda: _irnn(rank=2, g0="zero", sign=-1),
    # the paper's eq. 9 (P = U on the whole argument of φ), low-rank and dense U = P
    # (weights kept small: the step's matrices are products P U, P W)
    "irnn-eq9-lowrank-relu": lambda: _irnn(rank=2, P="U", g0="previous", activation="relu",
                                           eta=np.full(5, 0.3), weight_scale=0.3),
    "irnn-eq9-dense-tanh": lambda: _irnn(P="U", g0="zero", eta=np.random.default_rng(8).uniform(0.2, 0.9, (T, 5)),
                                         weight_scale=0.6),
    # every other activation's φ' (the tape's in-place derivative forms)
    "rnn-sigmoid": lambda: dynlab.make_model("rnn", D, d, seed=6, activation="sigmoid", weight_scale=4.0),
    "fastrnn-leaky": lambda: dynlab.make_model("fastrnn", D, d, seed=7, activation="leaky-relu", alpha=0.5),
    "antisymmetric-identity": lambda: dynlab.make_model("antisymmetric", D, d, seed=8, activation="identity",
                                                        eps=0.4, gamma=0.1),
    "irnn-abs": lambda: _irnn(K=3, eta=0.4, activation="abs", g0="previous"),
    "irnn-sigmoid": lambda: _irnn(K=2, activation="sigmoid"),
}


def _data(loss, C=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, d))
    h0 = 0.5 * rng.standard_normal((B, D))
    target = {"mse": rng.standard_normal((B, C)), "mse-seq": rng.standard_normal((B, T, C)),
              "ce": rng.integers(0, C, B), "ce-seq": rng.integers(0, C, (B, T))}[loss]
    readout = {"W_out": rng.standard_normal((C, D)), "b_out": rng.standard_normal(C)}
    return x, h0, target, readout


def _loss(model, readout, x, target, loss, h0):
    return bp.loss_and_grads(model, readout, x, target, loss=loss, h0=h0)[0]


def _fd(f, value, delta=1e-6):
    """Central differences of the scalar f(θ) over every entry of θ (a float or an array)."""
    arr = np.array(value, dtype=np.float64)
    out = np.empty_like(arr)
    for idx in np.ndindex(arr.shape):
        p, m = arr.copy(), arr.copy()
        p[idx] += delta
        m[idx] -= delta
        out[idx] = (f(p) - f(m)) / (2 * delta)
    return out


@pytest.mark.parametrize("loss", bp.LOSSES)
@pytest.mark.parametrize("case", list(CASES))
def test_every_gradient_matches_central_differences(case, loss):
    model = CASES[case]()
    x, h0, target, readout = _data(loss)
    L, grads, info = bp.loss_and_grads(model, readout, x, target, loss=loss, h0=h0)
    assert set(grads) == set(model.params()) | {"W_out", "b_out", "h0"}
    checks = {}
    for name in model.params():
        def f(v, name=name):
            return _loss(bp.with_params(model, {name: v}), readout, x, target, loss, h0)
        checks[name] = _fd(f, model.params()[name])
    for name in bp.READOUT:
        def f(v, name=name):
            return _loss(model, dict(readout, **{name: v}), x, target, loss, h0)
        checks[name] = _fd(f, readout[name])
    checks["h0"] = _fd(lambda v: _loss(model, readout, x, target, loss, v), h0)
    for name, fd in checks.items():
        g = np.asarray(grads[name])
        assert g.shape == np.shape(fd), name
        scale = max(float(np.max(np.abs(fd))), 1e-300)
        err = float(np.max(np.abs(g - fd))) / scale
        assert err <= 1e-6, f"{case}/{loss}: ∂L/∂{name} off by {err:.2e} (relative)"
        assert scale > 1e-8, f"{case}/{loss}: ∂L/∂{name} vanishes; the check would be empty"


@pytest.mark.parametrize("case", ["rnn-tanh", "antisymmetric", "irnn-prev-minus", "irnn-etaTK"])
def test_forward_states_equal_simulate_and_dh1_chains_to_dh0(case):
    """The tape's states are dynlab.simulate's; ∂L/∂h_0 = ∂L/∂h_1 · J_1 with J_1 from jacobian_at."""
    model = CASES[case]()
    x, h0, target, readout = _data("ce-seq")
    L, grads, info = bp.loss_and_grads(model, readout, x, target, loss="ce-seq", h0=h0)
    ref = dynlab.simulate(model, x, h0, backend="numpy").h.values
    np.testing.assert_allclose(info["tape"].states, ref, rtol=0, atol=1e-13)
    t0 = np.zeros(B, dtype=np.int64)
    J1 = dynlab.jacobian_at(model, x[:, 0], h0, backend="numpy", t=t0)
    np.testing.assert_allclose(np.einsum("bi,bij->bj", info["dL_dh1"], J1), grads["h0"], rtol=1e-12, atol=1e-15)


def test_cross_entropy_value_and_accuracy_by_hand():
    Y = np.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    lab = np.array([0, 2])
    L, dY, extra = bp.loss_value("ce", Y, lab)
    p = np.exp(Y) / np.exp(Y).sum(1, keepdims=True)
    assert L == pytest.approx(-(np.log(p[0, 0]) + np.log(p[1, 2])) / 2, rel=1e-14)
    assert extra["accuracy"] == 0.5
    np.testing.assert_allclose(dY, (p - np.eye(3)[lab]) / 2, rtol=1e-14)


def test_bad_inputs_name_the_parameter():
    model = CASES["rnn-tanh"]()
    x, h0, target, readout = _data("ce")
    with pytest.raises(ParameterError, match="loss"):
        bp.loss_and_grads(model, readout, x, target, loss="hinge")
    with pytest.raises(ParameterError, match="target"):
        bp.loss_and_grads(model, readout, x, target + 5, loss="ce")
    with pytest.raises(ParameterError, match="model"):
        bp.loss_and_grads(dynlab.make_model("ctrnn", D, d, seed=0), readout, x, target, loss="ce")


def test_dL_dWr_is_the_gradient_of_the_recurrent_matrix():
    """∂L/∂W_r equals ∂L/∂U for a dense U; for the RIN (R = U + I) too; for U = I + VH it gives
    V̄ = W̄_r Hᵀ and H̄ = Vᵀ W̄_r; for the antisymmetric cell M̄ = W̄_r − W̄_rᵀ (exact identities)."""
    x, h0, target, readout = _data("mse")
    for case in ("rnn-tanh", "rin-relu", "irnn-zero-plus"):
        m = CASES[case]()
        _, g, info = bp.loss_and_grads(m, readout, x, target, loss="mse", h0=h0)
        np.testing.assert_array_equal(info["dL_dWr"], g["U"])
    m = CASES["irnn-lowrank-tanh"]()
    _, g, info = bp.loss_and_grads(m, readout, x, target, loss="mse", h0=h0)
    np.testing.assert_allclose(g["V"], info["dL_dWr"] @ m.H.T, rtol=1e-14)
    np.testing.assert_allclose(g["H"], m.V.T @ info["dL_dWr"], rtol=1e-14)
    m = CASES["antisymmetric"]()
    _, g, info = bp.loss_and_grads(m, readout, x, target, loss="mse", h0=h0)
    np.testing.assert_allclose(g["M"], info["dL_dWr"] - info["dL_dWr"].T, rtol=1e-14)


@pytest.mark.parametrize("rank", [None, 1, 3])
def test_eq9_chain_rule_matches_central_differences(rank):
    """``IRNN.pullback`` for P = U: the map θ → (U' = P U, W' = P W, b' = P b) with P = U (= I + V H
    for a rank), contracted with random cotangents (Ū', W̄', b̄'), differentiated by central
    differences in every parameter θ ∈ {U or V, H, W, b}: f(θ) = ⟨Ū', U'⟩ + ⟨W̄', W'⟩ + ⟨b̄', b'⟩ is
    a polynomial of degree 2, so central differences are exact up to rounding (≈ 1e-10 relative
    at δ = 1e-6): tolerance 1e-8 relative."""
    m = dynlab.make_model("irnn", 5, 3, rank=rank, P="U", seed=2, weight_scale=0.9)
    rng = np.random.default_rng(5)
    Ub, Wb, bb = rng.standard_normal((5, 5)), rng.standard_normal((5, 3)), rng.standard_normal(5)
    form_grads = {"U": Ub, "W": Wb, "b": bb, "eta": np.ones((1, m.K)), "alpha": 0.0}
    g = {k: v for k, v in m.pullback(form_grads).items() if k not in ("eta", "alpha")}
    assert set(g) == set(m.params()) - {"eta", "alpha"}
    for name in g:
        def f(v, name=name):
            e = m.replace(**{name: v})
            return float(np.sum(Ub * e.U) + np.sum(Wb * e.W) + np.sum(bb * e.b))
        fd = _fd(f, m.params()[name])
        assert np.max(np.abs(g[name] - fd)) <= 1e-8 * np.max(np.abs(fd)), name
    # P = I leaves W̄, b̄ as they are (eq. 5)
    m5 = dynlab.make_model("irnn", 5, 3, rank=rank, seed=2)
    g5 = m5.pullback(form_grads)
    assert g5["W"] is Wb and g5["b"] is bb


@pytest.mark.parametrize("case", ["rnn-tanh", "fastrnn", "irnn-prev-minus", "irnn-etaTK", "irnn-lowrank-relu"])
def test_cotangents_of_the_last_steps_alone_equal_the_zero_padded_array(case):
    """``backward``'s short form (conftest.check_short_cotangents)."""
    model = CASES[case]()
    x, h0, _, _ = _data("mse")
    check_short_cotangents(bp.forward(model, x, h0), T, B, D)


@pytest.mark.parametrize("case", ["irnn-prev-minus", "irnn-etaTK", "irnn-lowrank-relu"])
def test_irnn_input_weight_chunks_give_the_same_gradients(case, monkeypatch):
    """The iRNN's backward pass sums W̄ = Σ_t c̄_tᵀ x_t a chunk of steps at a time
    (``bp.WEIGHT_CHUNK_STEPS``; b̄ at every step).  T = 6 here; chunks of 1, 4 (a partial chunk
    comes last) and more than T give the same gradients up to the order of the sums (1e-13
    relative; a step dropped or counted twice at a chunk's edge is an O(1) error).  The finite-
    difference test above covers the one-chunk case (chunk = T)."""
    model = CASES[case]()
    x, h0, target, readout = _data("mse-seq")
    runs = gradients_per_weight_chunk(monkeypatch, model, readout, x, target, h0)
    for other in runs[1:]:
        for k, ref in runs[0].items():
            ref = np.asarray(ref)
            err = float(np.max(np.abs(np.asarray(other[k]) - ref))) / max(float(np.max(np.abs(ref))), 1e-300)
            assert err <= 1e-13, f"{case}: {k} off by {err:.1e}"

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

import battery
import dynlab
from dynlab.errors import ParameterError
from dynlab.train import backprop as bp

from conftest import check_short_cotangents, gradients_per_weight_chunk

D, d, T, B = 3, 2, 6, 2


#: The battery's one-line cells and iRNN cases (tests/battery.py: every η shape, g_0, sign, low rank,
#: eq. 9, and the activations spread over them: tanh, relu, sigmoid, leaky-relu, identity), and the
#: activations whose φ' the tape takes in place that no case of a form runs at: identity on the
#: cells' form, abs and sigmoid on the iRNN's.  Two cases have a gradient that vanishes exactly, which
#: would leave the check below empty: the identity-initialised ReLU RNN (U = s·I, b = 0: a unit
#: cut off at 0 forgets h_0, and here every unit is by T = 6, so ∂L/∂h_0 of a loss at the end is
#: 0), and the iRNN with K = 1, g_0 = previous,
#: σ = −1 (s_0 = 0: U never meets the state, ∂L/∂U ≡ 0); tests/test_battery.py runs them.
CASES = {**battery.builders(battery.names("cell", "irnn", exclude=("rnn-identity-init", "irnn-K1-previous-minus")),
                            D, d, T),
         "antisymmetric-identity": lambda: battery.build("antisymmetric", D, d, T, activation="identity"),
         "irnn-abs": lambda: battery.build("irnn-K5-previous-plus", D, d, T, activation="abs"),
         "irnn-sigmoid": lambda: battery.build("irnn-K1-zero-plus", D, d, T, activation="sigmoid")}


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


@pytest.mark.parametrize("case", ["rnn", "antisymmetric", "irnn-K5-previous-minus", "irnn-K5-etaTK"])
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
    model = CASES["rnn"]()
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
    for case in ("rnn", "rin", "irnn-K5-zero-plus"):
        m = CASES[case]()
        _, g, info = bp.loss_and_grads(m, readout, x, target, loss="mse", h0=h0)
        np.testing.assert_array_equal(info["dL_dWr"], g["U"])
    m = CASES["irnn-K5-lowrank1"]()
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


@pytest.mark.parametrize("case", ["rnn", "fastrnn", "irnn-K5-previous-minus", "irnn-K5-etaTK", "irnn-K5-lowrank1"])
def test_cotangents_of_the_last_steps_alone_equal_the_zero_padded_array(case):
    """``backward``'s short form (conftest.check_short_cotangents)."""
    model = CASES[case]()
    x, h0, _, _ = _data("mse")
    check_short_cotangents(bp.forward(model, x, h0), T, B, D)


@pytest.mark.parametrize("case", ["irnn-K5-previous-minus", "irnn-K5-etaTK", "irnn-K5-lowrank1"])
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

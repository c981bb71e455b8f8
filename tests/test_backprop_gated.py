"""Exact BPTT gradients of the GRU, the LSTM and stacks (dynlab.train.backprop) against
independent references: central finite differences, closed forms, explicit Jacobian products,
and PyTorch's autograd (a committed fixture always; a live run when torch is importable).

Finite differences: every parameter of every layer, the read-out and h_0, for every loss, at
random parameters (PyTorch's initialisation).  Tolerance max |g − g_fd| ≤ 1e-6 · max |g_fd|
per array.  With δ = 1e-5 the truncation error is O(δ² L''') ≈ 1e-10 and the rounding error
≈ 1e-16·|L|/δ ≈ 1e-11 absolute, ≤ 1e-8 relative for the smallest gradient arrays here (a
layer-1 weight of a stack, max |g| ≈ 1e-3): far below the tolerance, so a wrong term of relative
size ≥ 1e-6 cannot hide.

PyTorch: ``tests/fixtures/torch_bptt.npz`` (made by ``tests/fixtures/make_torch_bptt.py``) holds
``torch.nn.GRU``/``LSTM``/``RNN`` modules (1 and 2 layers, float64, ``batch_first``), a linear
read-out, each loss, and autograd's gradients; dynlab's forward outputs and loss must equal
PyTorch's to 1e-12 and every gradient to 1e-10 (max |g − g_torch| ≤ 1e-10 · max |g_torch|).
"""
import os

import numpy as np

from dynlab.backends.numba import bptt as nb_bptt
import pytest

import battery
import dynlab
from dynlab.errors import ParameterError
from dynlab.models import GRU, LSTM, RNN, Stack
from dynlab.train import backprop as bp

from conftest import check_short_cotangents, gradients_per_weight_chunk

D, d, T, B = 3, 2, 6, 2

#: The battery's gated cells and stacks (tests/battery.py: GRU, LSTM, stacks of each and of RNN
#: cells, a three-layer stack with an identity middle layer), and another activation in the GRU's
#: candidate and the LSTM's cell input (φ' taken from a_n, a_g and c'), with weights large enough
#: (scale 2) that the activation's own range is reached.
CASES = {**battery.builders(battery.names("gated", "stack-gated", "stack-cell"), D, d, T),
         "gru-relu": lambda: battery.build("gru", D, d, T, activation="relu", weight_scale=2.0),
         "lstm-sigmoid": lambda: battery.build("lstm", D, d, T, activation="sigmoid", weight_scale=2.0)}


def _data(model, loss, C=3, seed=0, B=B):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, d))
    h0 = 0.5 * rng.standard_normal((B, model.state_size))
    target = {"mse": rng.standard_normal((B, C)), "mse-seq": rng.standard_normal((B, T, C)),
              "ce": rng.integers(0, C, B), "ce-seq": rng.integers(0, C, (B, T))}[loss]
    readout = {"W_out": rng.standard_normal((C, model.hidden)), "b_out": rng.standard_normal(C)}
    return x, h0, target, readout


def _fd(f, value, delta=1e-5):
    """Central differences of the scalar f(θ) over every entry of θ."""
    arr = np.array(value, dtype=np.float64)
    out = np.empty_like(arr)
    for idx in np.ndindex(arr.shape):
        p, m = arr.copy(), arr.copy()
        p[idx] += delta
        m[idx] -= delta
        out[idx] = (f(p) - f(m)) / (2 * delta)
    return out


def _close(g, ref, tol, what):
    g = np.asarray(g)
    assert g.shape == np.shape(ref), what
    scale = float(np.max(np.abs(ref)))
    assert scale > 1e-8, f"{what}: the reference vanishes; the check would be empty"
    err = float(np.max(np.abs(g - ref))) / scale
    assert err <= tol, f"{what} off by {err:.2e} (relative)"
    return err


#: Every case with every loss, but the three-layer stack (the slowest) with one loss at the end and
#: one along the sequence.
FD_CASES = [(c, loss) for c in CASES for loss in bp.LOSSES
            if c != "stack-lstm-mixed" or loss in ("mse", "ce-seq")]


@pytest.mark.parametrize("case,loss", FD_CASES)
def test_every_gradient_matches_central_differences(case, loss):
    model = CASES[case]()
    x, h0, target, readout = _data(model, loss)
    L, grads, info = bp.loss_and_grads(model, readout, x, target, loss=loss, h0=h0)
    assert set(grads) == set(model.params()) | {"W_out", "b_out", "h0"}

    def f(m=model, r=readout, h=h0):
        return bp.loss_and_grads(m, r, x, target, loss=loss, h0=h)[0]

    for name, value in model.params().items():
        _close(grads[name], _fd(lambda v: f(m=bp.with_params(model, {name: v})), value), 1e-6, f"{case}/{loss}: {name}")
    for name in bp.READOUT:
        _close(grads[name], _fd(lambda v: f(r=dict(readout, **{name: v})), readout[name]), 1e-6, f"{case}/{loss}: {name}")
    _close(grads["h0"], _fd(lambda v: f(h=v), h0), 1e-6, f"{case}/{loss}: h0")


@pytest.mark.parametrize("case", list(CASES))
def test_tape_states_are_simulate_s_and_dh1_chains_to_dh0(case):
    """The tape's states (every layer, [h; c] for an LSTM) equal dynlab.simulate's, its outputs are
    the states' output slice, and ∂L/∂s_0 = (∂L/∂s_1) J_1 with J_1 the closed-form step Jacobian of
    the whole (stacked) state from dynlab.jacobian_at: ∂L/∂s_1 is the cotangent of the dynamical
    state, which for a stack does not count the path from a layer to the next within step 1."""
    model = CASES[case]()
    x, h0, target, readout = _data(model, "ce-seq")
    L, grads, info = bp.loss_and_grads(model, readout, x, target, loss="ce-seq", h0=h0)
    tape = info["tape"]
    ref = dynlab.simulate(model, x, h0, backend="numpy").h.values
    np.testing.assert_allclose(tape.states, ref, rtol=0, atol=1e-14)
    np.testing.assert_allclose(tape.outputs[1:], np.swapaxes(ref[:, :, model.output_slice], 0, 1), rtol=0, atol=1e-14)
    J1 = dynlab.jacobian_at(model, x[:, 0], h0, backend="numpy")
    np.testing.assert_allclose(np.einsum("bi,bij->bj", info["dL_dh1"], J1), grads["h0"], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("case", ["lstm", "stack-lstm", "stack-gru", "stack-rnn"])
def test_state_cotangents_pull_back_through_explicit_jacobian_products(case):
    """``backward`` with cotangents on every entry of the state s_t (an LSTM's c too, every layer of
    a stack) returns ∂/∂s_0 of Σ_t ⟨e_t, s_t⟩ = Σ_t e_tᵀ J_t ⋯ J_1, the products formed explicitly
    from jacobian_at along the trajectory (tolerance 1e-12 relative)."""
    model = CASES[case]()
    x, h0, _, _ = _data(model, "mse")
    n = model.state_size
    tape = bp.forward(model, x, h0)
    e = np.random.default_rng(3).standard_normal((T, B, n))
    _, dh0, dh1 = bp.backward(tape, e)
    S = tape.H                                    # (T+1, B, n)
    want0 = np.zeros((B, n))
    want1 = np.zeros((B, n))
    for b in range(B):
        P = np.eye(n)                             # ∂s_t/∂s_0
        Js = []
        for t in range(T):
            J = dynlab.jacobian_at(model, x[b, t][None], S[t, b][None], backend="numpy")[0]
            Js.append(J)
            P = J @ P
            want0[b] += e[t, b] @ P
        P = np.eye(n)                             # ∂s_t/∂s_1
        for t in range(1, T + 1):
            if t > 1:
                P = Js[t - 1] @ P
            want1[b] += e[t - 1, b] @ P
    np.testing.assert_allclose(dh0, want0, rtol=1e-12, atol=1e-14 * np.abs(want0).max())
    np.testing.assert_allclose(dh1, want1, rtol=1e-12, atol=1e-14 * np.abs(want1).max())


def test_gru_with_z_one_keeps_its_state_and_passes_the_cotangent_through():
    """Closed form: b_hz = 60 makes z = σ(…) = 1 in float64, so h_T = h_0 (to rounding: the tape
    forms n + z(h − n)) and ∂L/∂h_0 = ∂L/∂h_T = W_outᵀ ∂L/∂y; z(1 − z) = 0 and 1 − z = 0 make
    every weight gradient of the GRU exactly 0."""
    m = dynlab.make_model("gru", D, d, seed=0)
    b_hh = m.b_hh.copy()
    b_hh[D:2 * D] = 60.0
    m = m.replace(b_hh=b_hh)
    x, h0, target, readout = _data(m, "mse")
    L, g, info = bp.loss_and_grads(m, readout, x, target, loss="mse", h0=h0)
    np.testing.assert_allclose(info["tape"].outputs[-1], h0, rtol=0, atol=1e-15)
    y = h0 @ readout["W_out"].T + readout["b_out"]
    dY = 2 * (y - target) / target.size
    np.testing.assert_allclose(g["h0"], dY @ readout["W_out"], rtol=1e-13, atol=0)
    for k in ("W_ih", "W_hh", "b_ih", "b_hh"):
        assert np.all(g[k] == 0.0), k


def test_lstm_with_f_one_i_zero_keeps_c_and_the_cell_gradient_is_closed_form():
    """Closed form: b_f = 60, b_i = −800 give f = 1, i = 0 exactly in float64, so c_t = c_0 for
    every t and h_T = o_T ⊙ tanh(c_0); with W_hh = 0 (h_t feeds no later gate) the loss at the end
    reaches c_0 only through h_T: ∂L/∂c_0 = (W_outᵀ ∂L/∂y) ⊙ o_T ⊙ (1 − tanh²(c_0)), ∂L/∂h_0 = 0,
    and the i, f, g rows of W_ih get exactly zero gradient (i(1 − i) = f(1 − f) = i = 0)."""
    m = dynlab.make_model("lstm", D, d, seed=0)
    b = m.b_hh.copy()
    b[:D], b[D:2 * D] = -800.0, 60.0
    m = m.replace(b_hh=b, W_hh=np.zeros_like(m.W_hh))
    x, h0, target, readout = _data(m, "mse")
    L, g, info = bp.loss_and_grads(m, readout, x, target, loss="mse", h0=h0)
    tape = info["tape"]
    c0 = h0[:, D:]
    np.testing.assert_array_equal(tape.inner.layers[0].C[-1], c0)
    o_T = bp.forward(m, x, h0).inner.layers[0].A[-1, :, 2 * D:3 * D]   # the gates as [i | f | o | g] (before backward)
    np.testing.assert_allclose(tape.outputs[-1], o_T * np.tanh(c0), rtol=1e-15, atol=0)
    y = tape.outputs[-1] @ readout["W_out"].T + readout["b_out"]
    hbar = (2 * (y - target) / target.size) @ readout["W_out"]
    np.testing.assert_allclose(g["h0"][:, D:], hbar * o_T * (1 - np.tanh(c0) ** 2), rtol=1e-13, atol=0)
    assert np.all(g["h0"][:, :D] == 0.0)
    assert np.all(g["W_hh"][:3 * D] == 0.0) and np.all(g["W_ih"][:3 * D] == 0.0)
    assert np.all(np.abs(g["W_ih"][3 * D:]) > 0.0)


def test_dL_dWr_is_the_recurrent_weight_gradient():
    """GRU/LSTM: ∂L/∂W_hh itself; a stack: every layer's, stacked bottom first (exact)."""
    for case in ("gru", "lstm"):
        m = CASES[case]()
        x, h0, target, readout = _data(m, "mse")
        _, g, info = bp.loss_and_grads(m, readout, x, target, loss="mse", h0=h0)
        np.testing.assert_array_equal(info["dL_dWr"], g["W_hh"])
    for case, key in (("stack-lstm", "W_hh"), ("stack-rnn", "U")):
        m = CASES[case]()
        x, h0, target, readout = _data(m, "mse")
        _, g, info = bp.loss_and_grads(m, readout, x, target, loss="mse", h0=h0)
        np.testing.assert_array_equal(info["dL_dWr"], np.concatenate([g[f"layer1_{key}"], g[f"layer2_{key}"]]))


@pytest.mark.parametrize("case", list(CASES))
def test_weight_chunks_and_a_second_backward_give_the_same_gradients(case, monkeypatch):
    """The GRU/LSTM backward pass sums the parameter gradients (and a stack's input cotangents)
    a chunk of steps at a time (``bp.WEIGHT_CHUNK_STEPS``) and only reads the tape.  Chunks of 1,
    4 (T = 6: a partial chunk comes last) and more than T give the same gradients up to the
    order of the sums (1e-13 relative; a step dropped or counted twice at a chunk's edge is an
    O(1) error), and backward run twice on one tape gives the same result bitwise."""
    model = CASES[case]()
    x, h0, target, readout = _data(model, "mse-seq")
    runs = gradients_per_weight_chunk(monkeypatch, model, readout, x, target, h0)
    for other in runs[1:]:
        for k, ref in runs[0].items():
            _close(other[k], ref, 1e-13, f"{case}: {k}")
    monkeypatch.setattr(nb_bptt, "WEIGHT_CHUNK_STEPS", 4)
    tape = bp.forward(model, x, h0)
    ext = np.random.default_rng(1).standard_normal((T, B, model.hidden))
    first = bp.backward(tape, ext)
    second = bp.backward(tape, ext)
    for k in first[0]:
        np.testing.assert_array_equal(second[0][k], first[0][k])
    np.testing.assert_array_equal(second[1], first[1])
    np.testing.assert_array_equal(second[2], first[2])


def test_bad_cotangents_and_initial_states_name_the_parameter():
    m = CASES["lstm"]()
    x, h0, target, readout = _data(m, "mse")
    tape = bp.forward(m, x, h0)
    with pytest.raises(ParameterError, match="dL_dH"):
        bp.backward(tape, np.zeros((T, B, 5)))
    with pytest.raises(ParameterError, match="h0"):
        bp.forward(m, x, np.zeros((B, D)))       # an LSTM's h_0 is [h; c]: 2D entries


def test_with_params_changes_one_layer_of_a_stack_only():
    m = CASES["stack-gru"]()
    W = np.zeros_like(m.layers[1].W_hh)
    m2 = bp.with_params(m, {"layer2_W_hh": W, "W_out": np.ones(3)})
    assert isinstance(m2, Stack) and np.array_equal(m2.layers[1].W_hh, W)
    assert m2.layers[0] is m.layers[0]
    assert bp.param_names(m2) == tuple(m.params())


# --------------------------------------------------------------------------- PyTorch autograd
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def _maker():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_torch_bptt", os.path.join(FIXTURES, "make_torch_bptt.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MAKER = _maker()


def _dynlab_model(case, a):
    """The dynlab model of PyTorch's parameters (names weight_ih_l0, …), built by hand here."""
    kind, layers, nonlin = MAKER.CASES[case]
    built = []
    for ell in range(layers):
        W_ih, W_hh, b_ih, b_hh = (a[f"{k}_l{ell}"] for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
        if kind == "RNN":
            built.append(RNN(W_hh, W_ih, b_ih + b_hh, activation=nonlin))
        else:
            built.append((GRU if kind == "GRU" else LSTM)(W_ih, W_hh, b_ih, b_hh))
    return built[0] if layers == 1 else Stack(tuple(built))


def _state0(case, a):
    """PyTorch's (h0, c0) of shape (L, B, D) → dynlab's s_0 (B, state_size), layers bottom first."""
    kind, layers, _ = MAKER.CASES[case]
    parts = []
    for ell in range(layers):
        parts.append(a["h0"][ell])
        if kind == "LSTM":
            parts.append(a["c0"][ell])
    return np.concatenate(parts, axis=1)


def _compare_with_torch(case, loss, a, tol=1e-10):
    kind, layers, _ = MAKER.CASES[case]
    m = _dynlab_model(case, a)
    s0 = _state0(case, a)
    readout = {"W_out": a["W_out"], "b_out": a["b_out"]}
    L, g, info = bp.loss_and_grads(m, readout, a["x"], a["target"], loss=loss, h0=s0)
    worst = 0.0
    out = np.swapaxes(info["tape"].outputs[1:], 0, 1)
    np.testing.assert_allclose(out, a["out"], rtol=0, atol=1e-12 * np.abs(a["out"]).max())
    assert L == pytest.approx(float(a["loss"]), rel=1e-12, abs=1e-15)
    for ell in range(layers):
        pre = "" if layers == 1 else f"layer{ell + 1}_"
        if kind == "RNN":
            pairs = {"U": "weight_hh", "W": "weight_ih", "b": "bias_ih"}
            # b = b_ih + b_hh: both of PyTorch's biases get the same gradient
            np.testing.assert_allclose(a[f"grad/bias_ih_l{ell}"], a[f"grad/bias_hh_l{ell}"], rtol=1e-14, atol=1e-17)
        else:
            pairs = {k: k.replace("W_", "weight_").replace("b_", "bias_") for k in ("W_ih", "W_hh", "b_ih", "b_hh")}
        for ours, theirs in pairs.items():
            worst = max(worst, _close(g[pre + ours], a[f"grad/{theirs}_l{ell}"], tol, f"{case}/{loss}: {pre + ours}"))
    for k in ("W_out", "b_out"):
        worst = max(worst, _close(g[k], a["grad/" + k], tol, f"{case}/{loss}: {k}"))
    want_h0 = _state0(case, {"h0": a["grad/h0"], "c0": a.get("grad/c0")})
    worst = max(worst, _close(g["h0"], want_h0, tol, f"{case}/{loss}: h0 (and c0)"))
    return worst


def _fixture(case, loss):
    with np.load(os.path.join(FIXTURES, "torch_bptt.npz"), allow_pickle=False) as f:
        head = f"{case}/{loss}/"
        return {k[len(head):]: f[k] for k in f.files if k.startswith(head)}


@pytest.mark.parametrize("loss", MAKER.LOSSES)
@pytest.mark.parametrize("case", list(MAKER.CASES))
def test_gradients_equal_pytorch_autograd_from_the_committed_fixture(case, loss):
    a = _fixture(case, loss)
    assert a, f"no {case}/{loss} in the fixture"
    _compare_with_torch(case, loss, a)


@pytest.mark.torch
@pytest.mark.parametrize("case", list(MAKER.CASES))
def test_gradients_equal_live_pytorch_autograd(case):
    """Other sizes and seeds than the fixture (D = 12, T = 12, B = 4, three outputs), every loss;
    and the committed fixture is what its script makes with this torch (to 1e-12)."""
    pytest.importorskip("torch")
    for loss in MAKER.LOSSES:
        a = MAKER.reference(case, loss, seed=11, B=4, T=12, d=3, D=12, C=3)
        _compare_with_torch(case, loss, a)
        again = MAKER.reference(case, loss, seed=MAKER.SEED, **MAKER.SIZES)
        stored = _fixture(case, loss)
        assert set(again) == set(stored)
        for k, v in again.items():
            np.testing.assert_allclose(v, stored[k], rtol=1e-12, atol=1e-15, err_msg=f"{case}/{loss}/{k}")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("width", ["outputs", "states"])
def test_cotangents_of_the_last_steps_alone_equal_the_zero_padded_array(case, width):
    """``backward``'s short form (conftest.check_short_cotangents), on the outputs h and on the
    whole states."""
    model = CASES[case]()
    x, h0, _, _ = _data(model, "mse")
    n = model.hidden if width == "outputs" else model.state_size
    check_short_cotangents(bp.forward(model, x, h0), T, B, n)

"""GRU, LSTM and stacks of layers: closed forms, the model's own step Jacobians against finite
differences, the state's layout.  (Every analysis on the state — an LSTM's s = [h; c] — on every
backend is the common battery's, tests/test_battery.py.)

Tolerances: central differences with step 1e-6 have error O(h²·|f'''|) + O(ε/h) ≈ 1e-10, so
Jacobians are compared to 1e-8; identities that hold exactly (a gate held at 0 or 1 keeping a
state) to a few ulps (1e-12 relative).  The comparison with PyTorch's own
modules is in tests/test_torch_import.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import battery
import dynlab as dl
from dynlab.errors import ParameterError

#: The battery's gated cells and stacks (tests/battery.py) at D = 4 (a stack's layers 3), and a GRU
#: whose candidate is ReLU.
CASES = {**{n: (lambda n=n: battery.build(n, 4, 3)) for n in battery.names("gated")},
         **{n: (lambda n=n: battery.build(n, 3, 3)) for n in battery.names("stack-gated", "stack-cell")},
         "gru-relu": lambda: battery.build("gru", 4, 3, activation="relu")}


def _fd(f, v, h=1e-6):
    cols = []
    for j in range(v.shape[1]):
        e = np.zeros(v.shape[1])
        e[j] = h
        cols.append((f(v + e) - f(v - e)) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("case", list(CASES))
def test_step_jacobians_equal_central_differences(case):
    m = CASES[case]()
    rng = np.random.default_rng(0)
    S = rng.standard_normal((5, m.state_size))
    X = rng.standard_normal((5, m.inputs))
    J, Jx = m.step_jacobian(S, X, inputs=True)
    assert J.shape == (5, m.state_size, m.state_size) and Jx.shape == (5, m.state_size, m.inputs)
    np.testing.assert_allclose(J, _fd(lambda s: m.step(s, X), S), rtol=0, atol=1e-8)
    np.testing.assert_allclose(Jx, _fd(lambda x: m.step(S, x), X), rtol=0, atol=1e-8)


def test_gru_with_the_update_gate_shut_keeps_its_state():
    """z ≡ 1 (b_hz huge): h' = h exactly, and ∂h'/∂h = I, whatever the input."""
    m = dl.make_model("gru", 4, 2, seed=0)
    b_hh = m.b_hh.copy()
    b_hh[4:8] = 1e3
    held = m.replace(b_hh=b_hh)
    rng = np.random.default_rng(1)
    S, X = rng.standard_normal((6, 4)), 3 * rng.standard_normal((6, 2))
    np.testing.assert_array_equal(held.step(S, X), S)
    np.testing.assert_allclose(held.step_jacobian(S, X), np.broadcast_to(np.eye(4), (6, 4, 4)), rtol=0, atol=1e-300)
    # negative control: the free gate moves the state
    assert np.abs(m.step(S, X) - S).max() > 0.05


def test_lstm_with_forget_open_and_input_shut_keeps_its_cell():
    """f ≡ 1, i ≡ 0: c' = c exactly, ∂c'/∂c = I, ∂c'/∂h = 0; h' = o ⊙ tanh(c)."""
    m = dl.make_model("lstm", 3, 2, seed=0)
    b = m.b_hh.copy()
    b[0:3], b[3:6] = -1e3, 1e3   # i shut, f open
    held = m.replace(b_hh=b)
    rng = np.random.default_rng(2)
    S, X = rng.standard_normal((5, 6)), rng.standard_normal((5, 2))
    out = held.step(S, X)
    np.testing.assert_array_equal(out[:, 3:], S[:, 3:])
    J = held.step_jacobian(S, X)
    np.testing.assert_array_equal(J[:, 3:, 3:], np.broadcast_to(np.eye(3), (5, 3, 3)))
    np.testing.assert_array_equal(J[:, 3:, :3], 0.0)
    o = 1 / (1 + np.exp(-(X @ m.W_ih[9:].T + m.b_ih[9:] + S[:, :3] @ m.W_hh[9:].T + b[9:])))
    np.testing.assert_allclose(out[:, :3], o * np.tanh(S[:, 3:]), rtol=1e-14)
    assert np.abs(m.step(S, X)[:, 3:] - S[:, 3:]).max() > 0.05   # negative control


def test_lstm_state_is_labelled_h_then_c():
    m = dl.make_model("lstm", 3, 2, seed=0)
    ds = dl.simulate(m, np.zeros((5, 2)))
    assert list(ds["part"].values) == ["h"] * 3 + ["c"] * 3
    assert m.state_size == 6 and m.hidden == 3 and m.output_slice == slice(0, 3)
    stack = dl.make_model("stack", 3, 2, cell="lstm", layers=2, seed=0)
    assert stack.output_slice == slice(6, 9) and stack.state_labels()[6:9] == ("h2",) * 3


def test_stack_is_layer_by_layer():
    """A stack's state is each layer run on the layer below's output."""
    st = CASES["stack-lstm-mixed"]()
    x = np.random.default_rng(4).standard_normal((30, 3))
    s = dl.simulate(st, x)["h"].values
    inp = x
    o = st.offsets
    for ell, layer in enumerate(st.layers):
        own = dl.simulate(layer, inp)["h"].values
        np.testing.assert_allclose(s[:, o[ell]:o[ell + 1]], own, rtol=1e-14, atol=1e-15)
        inp = own[:, layer.output_slice]


@pytest.mark.parametrize("bad, param", [
    (dict(W_hh=np.zeros((10, 4))), "W_hh"),
    (dict(W_ih=np.zeros((11, 2))), "W_ih"),
    (dict(b_ih=np.zeros(11)), "b_ih"),
    (dict(activation="softplus"), "activation"),
])
def test_bad_gru_parameters_are_refused_naming_them(bad, param):
    m = dl.make_model("gru", 4, 2, seed=0)
    with pytest.raises(ParameterError) as e:
        m.replace(**bad)
    assert e.value.param == param


def test_stack_refuses_mismatched_layers():
    a = dl.make_model("gru", 4, 2, seed=0)
    with pytest.raises(ParameterError, match="layer 2 takes 2 inputs"):
        dl.Stack((a, dl.make_model("gru", 4, 2, seed=1)))
    with pytest.raises(ParameterError, match="one kind"):
        dl.Stack((a, dl.make_model("lstm", 4, 4, seed=1)))
    with pytest.raises(ParameterError) as e:
        dl.make_model("stack", 3, 2, cell="tcn")
    assert e.value.param == "cell"

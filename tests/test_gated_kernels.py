"""The GRU/LSTM kernels (the reference backend; the numba backend's loops, batched and Jacobian kernels) on every
path against tests/naive.py (Python floats, the equations typed in from PyTorch's documentation,
a stack stepped one time step at a time), against the model's own ``step`` and
``step_jacobian``, float32 against float64, divergence bookkeeping in closed form, and the
batch split of the vectorised kernel.

Tolerances.  float64: every path evaluates the same arithmetic as the references in another
order (BLAS sums, folded biases, the kernels' own exp/tanh/sigmoid within 3 ulp of libm), a few
ulps per step; the dynamics are contracting or mildly expanding over T = 30 steps (PyTorch's
initialisation U(−1/√D, 1/√D); max|s| < 1e3 is asserted), so the accumulated difference is
≲ T·10 ulp ≈ 1e-13 relative to the size of the state: 1e-12 relative + 1e-12·scale absolute
(as tests/test_simulation.py).  float32: ≈ 10 roundings of 6e-8 per unit and step, contracting:
1e-5.  Jacobians: one step, no accumulation: 1e-12 relative to max|J|.
"""
from __future__ import annotations

import numpy as np
import pytest

import battery
import dynlab
import isa_child
import naive
from conftest import ACTIVATIONS, KERNEL_PATHS, force_path
from dynlab import config
from dynlab.activations import ACTIVATION_IDS, phi
from dynlab.analysis.jacobians import jacobian_at, jacobian_path
from dynlab.errors import DivergenceError
from dynlab.backends.numba import loops as numba_cpu
from dynlab.backends.numba import batched as vectorised
from dynlab.simulation import run_states

RTOL = ATOL = 1e-12
D, DIN = 4, 3


#: The battery's GRU and LSTM (tests/battery.py) at every activation (each its own seed), and its
#: stacks: of GRUs, of LSTMs, three LSTM layers with an identity one between, of RNN cells.
def _cell(kind, act, seed=0, **kw):
    return battery.build(kind, D, DIN, activation=act, seed=seed, **kw)


CASES = {f"{k}-{a}": (lambda k=k, a=a: _cell(k, a, seed=ACTIVATIONS.index(a))) for k in battery.names("gated")
         for a in ACTIVATIONS}
CASES.update(battery.builders(battery.names("stack-gated", "stack-cell"), D, DIN))


def _x(B, T, d=DIN, seed=0):
    return 0.8 * np.random.default_rng(seed).standard_normal((B, T, d))


def _s0(m, B, seed=1):
    return 0.4 * np.random.default_rng(seed).standard_normal((B, m.state_size))


def _step_loop(m, x, s0):
    """s_t = model.step(s_{t-1}, x_t), the whole stack at once: (B, T, state_size)."""
    s, out = s0, []
    for t in range(x.shape[1]):
        s = m.step(s, x[:, t])
        out.append(s)
    return np.stack(out, axis=1)


@pytest.mark.parametrize("case", list(CASES))
def test_every_path_matches_naive_and_the_step_map(case, monkeypatch):
    """numpy_ref, the numba loops and the vectorised kernel (B = 3, T = 30, h0 given) against
    the naive reference and the model's ``step`` loop; ``kernel`` names the path that ran."""
    m = CASES[case]()
    B, T = 3, 30
    x, s0 = _x(B, T, seed=len(case)), _s0(m, B)
    ref = naive.simulate(m, x, s0)
    scale = max(1.0, float(np.abs(ref).max()))
    assert np.all(np.isfinite(ref)) and scale < 1e3
    assert np.abs(ref - ref[:, :1]).max() > 1e-3          # the state moves
    np.testing.assert_allclose(_step_loop(m, x, s0), ref, rtol=RTOL, atol=ATOL * scale)
    for path in KERNEL_PATHS:
        backend, kernel = force_path(monkeypatch, path)
        ds = dynlab.simulate(m, x, s0, backend=backend)
        assert ds.attrs["kernel"] == kernel, path
        assert ds.h.shape == (B, T, m.state_size)
        np.testing.assert_allclose(ds.h.values, ref, rtol=RTOL, atol=ATOL * scale, err_msg=f"{path} vs naive")


@pytest.mark.parametrize("case", ["gru-tanh", "lstm-tanh", "lstm-relu", "stack-lstm-mixed", "stack-rnn"])
def test_float32_on_every_path(case, monkeypatch):
    """float32 states within 1e-5 of float64 on every path, and really single precision."""
    m = CASES[case]()
    x, s0 = _x(3, 30, seed=7), _s0(m, 3, seed=8)
    for path in KERNEL_PATHS:
        backend, kernel = force_path(monkeypatch, path)
        h64 = dynlab.simulate(m, x, s0, backend=backend).h.values
        ds = dynlab.simulate(m, x, s0, backend=backend, dtype=np.float32)
        assert ds.attrs["kernel"] == kernel and ds.h.dtype == np.float32, path
        np.testing.assert_allclose(ds.h.values.astype(np.float64), h64, rtol=1e-5, atol=1e-5, err_msg=path)
        assert np.abs(ds.h.values - h64).max() > 1e-12, path


@pytest.mark.parametrize("case", ["gru-tanh", "lstm-sigmoid", "stack-lstm"])
def test_batched_equals_unbatched(case, monkeypatch):
    m = CASES[case]()
    x, s0 = _x(3, 25, seed=2), _s0(m, 3, seed=3)
    for path in KERNEL_PATHS:
        backend, _ = force_path(monkeypatch, path)
        batched = dynlab.simulate(m, x, s0, backend=backend).h.values
        for i in range(3):
            single = dynlab.simulate(m, x[i], s0[i], backend=backend)
            assert single.h.dims == ("time", "unit")
            np.testing.assert_allclose(single.h.values, batched[i], rtol=RTOL, atol=ATOL, err_msg=path)


def test_batched_kernels_equal_the_reference_for_every_activation():
    """The batched GRU/LSTM kernels called directly (the whole loop in one numba call) against the
    NumPy reference, for every activation, in float64 (1e-12) and float32 (1e-5: the products in
    single precision), into a fresh array and into a caller's non-contiguous block (the same
    numbers)."""
    for kind in ("gru", "lstm"):
        for act in ACTIVATIONS:
            m = _cell(kind, act, seed=1)
            x, s0 = _x(5, 20, seed=4), _s0(m, 5, seed=5)
            ref = dynlab.simulate(m, x, s0, backend="numpy").h.values
            fn = vectorised.gru if kind == "gru" else vectorised.lstm
            args = (m.W_ih, m.W_hh, m.b_ih, m.b_hh, x, s0, ACTIVATION_IDS[act], m.leak)
            H1, bad1 = fn(*args)
            scale = max(1.0, float(np.abs(ref).max()))
            np.testing.assert_allclose(H1, ref, rtol=RTOL, atol=ATOL * scale, err_msg=f"{kind}-{act}")
            np.testing.assert_array_equal(bad1, np.full(5, 20))
            block = np.zeros((5, 20, 2 * H1.shape[2]))[:, :, :H1.shape[2]]
            H2, _ = fn(*args, H=block)
            assert H2 is block and not block.flags.c_contiguous
            np.testing.assert_array_equal(block, H1)
            H32, _ = fn(*(a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args))
            assert H32.dtype == np.float32
            np.testing.assert_allclose(H32, ref, rtol=1e-5, atol=1e-5 * scale)


# ----------------------------------------------------------------------------- closed forms
def test_a_shut_update_gate_keeps_the_gru_state_on_every_path(monkeypatch):
    """b_hz = 1e3: z = 1 exactly (σ(>708) rounds to 1), so h' = 0·n + 1·h = h bit for bit."""
    m = _cell("gru", "tanh")
    b = m.b_hh.copy()
    b[D:2 * D] = 1e3
    held = m.replace(b_hh=b)
    x, s0 = 3 * _x(2, 40, seed=1), _s0(held, 2, seed=2)
    for path in KERNEL_PATHS:
        backend, _ = force_path(monkeypatch, path)
        h = dynlab.simulate(held, x, s0, backend=backend).h.values
        np.testing.assert_array_equal(h, np.broadcast_to(s0[:, None], h.shape), err_msg=path)
        assert np.abs(dynlab.simulate(m, x, s0, backend=backend).h.values - s0[:, None]).max() > 0.05


def test_open_forget_and_shut_input_keep_the_lstm_cell_on_every_path(monkeypatch):
    """f = 1, i = 0 exactly (b_hf = +1e3, b_hi = −1e3): c_t = c_0 bit for bit and
    h_t = o_t ⊙ tanh(c_0), o_t = σ(W_io x_t + b_io + W_ho h_{t−1} + b_ho)."""
    m = _cell("lstm", "tanh")
    b = m.b_hh.copy()
    b[:D], b[D:2 * D] = -1e3, 1e3
    held = m.replace(b_hh=b)
    x, s0 = _x(2, 30, seed=3), _s0(held, 2, seed=4)
    for path in KERNEL_PATHS:
        backend, _ = force_path(monkeypatch, path)
        s = dynlab.simulate(held, x, s0, backend=backend).h.values
        np.testing.assert_array_equal(s[:, :, D:], np.broadcast_to(s0[:, None, D:], (2, 30, D)), err_msg=path)
        hprev = np.concatenate([s0[:, None, :D], s[:, :-1, :D]], axis=1)
        o = naive_sigmoid(x @ held.W_ih[3 * D:].T + held.b_ih[3 * D:] + hprev @ held.W_hh[3 * D:].T + b[3 * D:])
        np.testing.assert_allclose(s[:, :, :D], o * np.tanh(s0[:, None, D:]), rtol=1e-14, atol=1e-15)


def naive_sigmoid(z):
    return np.vectorize(naive.sigmoid)(z)


# ----------------------------------------------------------------------------- divergence
DBL_MAX = np.finfo(np.float64).max


def _tripling(kind):
    """A cell whose state triples exactly each step: GRU with z = 0, r = 1, W_hn = 3I, φ = id
    (h' = 3h); LSTM with i = f = o = 1, W_hg = 2I, φ = id, started at h = c (c' = c + 2h = 3c,
    h' = c').  Every other weight and bias is 0, so each step is one exactly rounded 3·v."""
    G = 3 if kind == "gru" else 4
    W_ih, W_hh, b_ih, b_hh = np.zeros((G * D, 1)), np.zeros((G * D, D)), np.zeros(G * D), np.zeros(G * D)
    if kind == "gru":
        b_hh[:D], b_hh[D:2 * D] = 1e3, -1e3
        W_hh[2 * D:] = 3 * np.eye(D)
    else:
        b_hh[:2 * D], b_hh[3 * D:] = 1e3, 1e3
        W_hh[2 * D:3 * D] = 2 * np.eye(D)
    cls = dynlab.GRU if kind == "gru" else dynlab.LSTM
    return cls(W_ih, W_hh, b_ih, b_hh, activation="identity")


def _overflow_step(a):
    v = (np.log(DBL_MAX) - np.log(a)) / np.log(3.0)
    assert abs(v - round(v)) > 1e-6
    return int(np.floor(v)) + 1


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("path", list(KERNEL_PATHS))
def test_divergence_is_reported_at_the_exact_step(kind, path, monkeypatch):
    """s_t = 3^t s_0 overflows at the first t with 3^t·max|s_0| > DBL_MAX (647 and 646 for the
    two sequences): raise names that step and sequence with the finite prefix; flag reports
    every sequence's step."""
    backend, kernel = force_path(monkeypatch, path)
    m = _tripling(kind)
    h = np.array([[1.0, 0.5, -0.25, 0.1], [0.5, -3.0, 2.0, 1.0]])
    s0 = h if kind == "gru" else np.concatenate([h, h], axis=1)
    steps = [_overflow_step(np.abs(r).max()) for r in h]
    assert steps == [647, 646]
    x = np.zeros((2, 700, 1))
    with pytest.raises(DivergenceError) as info:
        dynlab.simulate(m, x, s0, backend=backend)
    err = info.value
    assert err.step == 646 and err.batch == 1
    part = err.partial
    assert part.attrs["kernel"] == kernel and part.sizes["time"] == 645
    t = np.arange(1, 646)[None, :, None]
    np.testing.assert_allclose(part.h.values, 3.0 ** t * s0[:, None, :], rtol=1e-12, atol=0)
    ds = dynlab.simulate(m, x, s0, backend=backend, on_divergence="flag")
    np.testing.assert_array_equal(ds.diverged_at.values, steps)


@pytest.mark.parametrize("path", list(KERNEL_PATHS))
def test_a_stack_fails_where_its_first_layer_does(path, monkeypatch):
    """A tripling top layer over a finite bottom layer, and a tripling bottom layer: the stack's
    state is non-finite from the failing layer's step on, whichever layer it is."""
    backend, _ = force_path(monkeypatch, path)
    top = _tripling("gru")
    calm = dynlab.GRU(np.zeros((3 * D, 1)), np.zeros((3 * D, D)), np.zeros(3 * D), np.zeros(3 * D))  # h' = h/2
    feed = dynlab.GRU(np.zeros((3 * D, D)), top.W_hh, top.b_ih, top.b_hh, activation="identity")
    h = np.array([[1.0, 0.5, -0.25, 0.1], [0.5, -3.0, 2.0, 1.0]])
    x = np.zeros((2, 700, 1))
    up = dynlab.Stack((calm, feed))            # layer 2 explodes on its own state
    ds = dynlab.simulate(up, x, np.concatenate([0 * h, h], axis=1), backend=backend, on_divergence="flag")
    np.testing.assert_array_equal(ds.diverged_at.values, [647, 646])
    fed = dynlab.Stack((top, dynlab.GRU(np.eye(3 * D, D), np.zeros((3 * D, D)), np.zeros(3 * D), np.zeros(3 * D),
                                        activation="identity")))
    ds = dynlab.simulate(fed, np.zeros((2, 700, 1)), np.concatenate([h, 0 * h], axis=1), backend=backend,
                         on_divergence="flag")
    np.testing.assert_array_equal(ds.diverged_at.values, [647, 646])


def test_the_batch_split_equals_one_block(monkeypatch):
    """The vectorised CPU kernel split into blocks of sequences, one thread each, gives the
    one-block result (to BLAS's row-block summation order) and per-sequence bookkeeping."""
    backend, _ = force_path(monkeypatch, "numba-vectorised")
    monkeypatch.setattr(config, "GATED_MIN_ROWS_PER_THREAD", 1)
    for kind in ("gru", "lstm"):
        m = _cell(kind, "tanh", seed=2)
        x, s0 = _x(7, 30, seed=9), _s0(m, 7, seed=1)
        monkeypatch.setattr(config, "GATED_SIMULATION_THREADS", 1)
        one, bad1, _ = run_states(m, x, s0, backend)
        monkeypatch.setattr(config, "GATED_SIMULATION_THREADS", 3)
        three, bad3, _ = run_states(m, x, s0, backend)
        np.testing.assert_allclose(three, one, rtol=1e-14, atol=1e-15)
        np.testing.assert_array_equal(bad1, bad3)
    m = _tripling("gru")
    h = np.ones((7, D)) * np.array([1, 1, 1, 1, 1, 3, 1])[:, None]   # sequence 5 (block 3) fails first
    monkeypatch.setattr(config, "GATED_SIMULATION_THREADS", 3)
    ds = dynlab.simulate(m, np.zeros((7, 700, 1)), h, backend=backend, on_divergence="flag")
    np.testing.assert_array_equal(ds.diverged_at.values, [647] * 5 + [646, 647])


# ----------------------------------------------------------------------------- Jacobians
JAC_PATHS = {"numpy": ("numpy", None), "numba-loops": ("numba", 1 << 30), "numba-vectorised": ("numba", 0)}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("path", list(JAC_PATHS))
def test_jacobians_equal_the_closed_form_step_jacobian(case, path, monkeypatch):
    """jacobian_at on every path against ``model.step_jacobian`` (J and Jx), 1e-12 relative;
    J alone equals J of the pair."""
    backend, threshold = JAC_PATHS[path]
    if threshold is not None:
        monkeypatch.setattr(config, "JACOBIAN_GATED_VECTORISE_MIN_HIDDEN", threshold)
    m = CASES[case]()
    rng = np.random.default_rng(len(case))
    X, S = rng.standard_normal((9, m.inputs)), rng.standard_normal((9, m.state_size))
    Jr, Jxr = m.step_jacobian(S, X, inputs=True)
    J, Jx = jacobian_at(m, X, S, backend=backend, inputs=True)
    expect = {"numpy": "numpy", "numba-loops": "loops", "numba-vectorised": "batched"}[path]
    if case == "stack-rnn" and backend == "numba":
        expect = "loops"   # its layers follow the one-line cells' own switch
    assert jacobian_path(m, 9, backend) == expect
    np.testing.assert_allclose(J, Jr, rtol=0, atol=RTOL * np.abs(Jr).max())
    np.testing.assert_allclose(Jx, Jxr, rtol=0, atol=RTOL * np.abs(Jxr).max())
    np.testing.assert_array_equal(jacobian_at(m, X, S, backend=backend), J)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_jacobian_kernels_equal_central_differences_of_the_naive_step(kind):
    """The jitted per-point kernel against central differences of naive.step_gru/step_lstm
    (independent of the model's code): step 1e-6, error ≈ 1e-10, compared to 1e-8."""
    m = _cell(kind, "tanh", seed=3)
    step = naive.step_gru if kind == "gru" else naive.step_lstm
    rng = np.random.default_rng(5)
    X, S = rng.standard_normal((3, DIN)), rng.standard_normal((3, m.state_size))
    J, Jx = jacobian_at(m, X, S, backend="numba", inputs=True)
    for p in range(3):
        for j in range(m.state_size):
            e = np.zeros(m.state_size)
            e[j] = 1e-6
            col = (np.array(step(m, X[p].tolist(), (S[p] + e).tolist()))
                   - np.array(step(m, X[p].tolist(), (S[p] - e).tolist()))) / 2e-6
            np.testing.assert_allclose(J[p, :, j], col, rtol=0, atol=1e-8)
        for j in range(DIN):
            e = np.zeros(DIN)
            e[j] = 1e-6
            col = (np.array(step(m, (X[p] + e).tolist(), S[p].tolist()))
                   - np.array(step(m, (X[p] - e).tolist(), S[p].tolist()))) / 2e-6
            np.testing.assert_allclose(Jx[p, :, j], col, rtol=0, atol=1e-8)


# ----------------------------------------------------------------------------- elementary functions
def test_pow2_is_exact_over_the_normal_range():
    n = np.arange(-1022, 1024, dtype=np.float64)
    got = np.array([numba_cpu.pow2_f64(v) for v in n[::1]])
    np.testing.assert_array_equal(got, np.ldexp(1.0, n.astype(int)))


def test_vectorised_sigmoid_is_within_three_ulp_everywhere():
    """``sigmoid_f64`` (the gates of the fused GRU/LSTM passes) against 1/(1 + e^{−x}) in extended
    precision (x86's 80-bit long double, 64-bit significand: its own error is 2^-11 ulp of a
    double): ≤ 3 ulp relative over [−708, 708] (measured 1.96; also deep in the lower tail, where
    (1 + tanh(z/2))/2 loses every digit), exactly 0 and 1 past it, NaN stays NaN.  Where long double
    is a double, the two-sided form of dynlab.activations is the reference, and its own error (NumPy's
    float64 exp: 2.3 ulp at NumPy 2.4, 2.7 at 1.26 against the extended truth) is added to the bound."""
    _, x = isa_child.activation_grids()
    z = x.copy()[None]
    numba_cpu.sigmoid_exact_inplace(z)
    if np.finfo(np.longdouble).nmant >= 63:
        xl = x.astype(np.longdouble)
        with np.errstate(over="ignore"):
            truth = 1 / (1 + np.exp(-xl))
        ref, bound = truth.astype(np.float64), 3.0
        ulps = np.abs(z[0].astype(np.longdouble) - truth) / np.spacing(np.abs(ref)).astype(np.longdouble)
    else:
        ref, bound = phi("sigmoid", x), 6.0
        ulps = np.abs(z[0] - ref) / np.spacing(np.abs(ref))
    assert float(ulps.max()) <= bound
    s = np.array([[np.nan, np.inf, -np.inf, 709.0, 1e3, -709.0, -1e3, 0.0, -0.0]])
    numba_cpu.sigmoid_exact_inplace(s)
    assert np.isnan(s[0, 0])
    np.testing.assert_array_equal(s[0, 1:], [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.5, 0.5])

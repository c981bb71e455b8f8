"""The model zoo: construction, validation errors naming the parameter, seeded initialisation,
and the structural facts each model's paper states (gates, spectra, identity recurrences,
the iRNN's closed form and its equilibrium manifold)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dynlab
import naive
from conftest import force_path
from dynlab.errors import ParameterError
from dynlab.models import CTRNN, IRNN, MODELS, RIN, RNN, AntisymmetricRNN, FastRNN

ALL = ("rnn", "fastrnn", "antisymmetric", "rin", "irnn", "ctrnn")


def _param_error(param, fn, *args, **kwargs):
    with pytest.raises(ParameterError) as info:
        fn(*args, **kwargs)
    assert info.value.param == param, f"expected a ParameterError naming {param!r}, got {info.value}"
    assert str(info.value).startswith(f"{param}: ")
    return info.value


# ----------------------------------------------------------------------------- construction
def test_registry_has_the_six_models():
    # plus the implicit network (a static equilibrium model; tests/test_implicit.py) and the
    # PyTorch family: gru, lstm and stacks of layers (tests/test_gated.py)
    assert set(MODELS) == set(ALL) | {"implicit", "gru", "lstm", "stack"}


@pytest.mark.parametrize("name", ALL)
def test_make_model_builds_each_model(name):
    m = dynlab.make_model(name, hidden=5, inputs=3, seed=0)
    assert m.name == name and m.hidden == 5 and m.inputs == 3
    assert m.W.shape == (5, 3) and m.b.shape == (5,) and m.U.shape == (5, 5)
    for v in m.params().values():
        arr = np.asarray(v)
        assert np.all(np.isfinite(arr))
        if arr.ndim:
            assert not arr.flags.writeable  # frozen parameters
    assert m.seed == 0


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_weights_different_seed_different(name):
    a = dynlab.make_model(name, 6, 2, seed=7)
    b = dynlab.make_model(name, 6, 2, seed=7)
    c = dynlab.make_model(name, 6, 2, seed=8)
    for k, v in a.params().items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(b.params()[k]))
    for k in ("W", "b"):
        assert not np.array_equal(a.params()[k], c.params()[k])
    rec = "M" if name == "antisymmetric" else "U"
    assert not np.array_equal(a.params()[rec], c.params()[rec])


@pytest.mark.parametrize("name", ["rnn", "fastrnn", "antisymmetric", "rin", "irnn", "ctrnn"])
@pytest.mark.parametrize("ws", [0.5, 2.0])
def test_weight_scale_sets_the_std_of_U(name, ws):
    """U ~ N(0, ws²/D): the sample std of the D² = 160 000 entries has relative standard
    error 1/√(2·D²) ≈ 0.18 %; accept 5 standard errors."""
    D = 400
    m = dynlab.make_model(name, D, 3, seed=1, weight_scale=ws)
    U = m.M if name == "antisymmetric" else m.params()["U"]
    n = U.size
    want = ws / math.sqrt(D)
    se = want / math.sqrt(2 * n)
    assert abs(U.std() - want) < 5 * se, (U.std(), want, se)
    assert abs(U.mean()) < 5 * want / math.sqrt(n)
    # and the input weights are N(0, 1/d), independent of weight_scale
    assert abs(m.W.std() - 1 / math.sqrt(3)) < 5 * (1 / math.sqrt(3)) / math.sqrt(2 * m.W.size)


def test_weight_scale_is_linear_at_fixed_seed():
    """Same seed → same normal draws, so U(2s) = 2·U(s) (a power-of-two scaling is exact)."""
    a = dynlab.make_model("rnn", 10, 2, seed=3, weight_scale=0.5)
    b = dynlab.make_model("rnn", 10, 2, seed=3, weight_scale=1.0)
    np.testing.assert_array_equal(b.U, 2.0 * a.U)
    np.testing.assert_array_equal(a.W, b.W)


def test_identity_init_is_le_et_al():
    m = dynlab.make_model("rnn", 4, 2, seed=0, identity_init=True, weight_scale=0.9)
    np.testing.assert_array_equal(m.U, 0.9 * np.eye(4))
    np.testing.assert_array_equal(m.b, np.zeros(4))
    assert m.activation == "relu" and m.init == "identity"


def test_default_scales_and_activations():
    assert dynlab.make_model("rin", 3, 1, seed=0).activation == "relu"
    assert dynlab.make_model("rin", 3, 1, seed=0).weight_scale == 0.1
    assert dynlab.make_model("irnn", 3, 1, seed=0).weight_scale == 0.5
    assert dynlab.make_model("rnn", 3, 1, seed=0).activation == "tanh"
    fr = dynlab.make_model("fastrnn", 3, 1, seed=0)
    assert (fr.alpha, fr.beta) == (-3.0, 3.0)


# ----------------------------------------------------------------------------- validation
def _arrays(D=3, d=2):
    rng = np.random.default_rng(0)
    return rng.standard_normal((D, D)), rng.standard_normal((D, d)), rng.standard_normal(D)


@pytest.mark.parametrize("cls", [RNN, FastRNN, RIN, CTRNN])
def test_wrong_shapes_name_the_parameter(cls):
    U, W, b = _arrays()
    _param_error("U", cls, np.zeros((3, 4)), W, b)
    _param_error("U", cls, np.zeros(3), W, b)
    _param_error("W", cls, U, np.zeros(3), b)
    _param_error("b", cls, U, W, np.zeros(4))
    _param_error("b", cls, U, W, np.zeros((3, 1)))
    bad = U.copy()
    bad[1, 2] = np.nan
    err = _param_error("U", cls, bad, W, b)
    assert "(1, 2)" in err.message
    bad[1, 2] = np.inf
    _param_error("U", cls, bad, W, b)
    _param_error("W", cls, U, np.full((3, 2), np.nan), b)
    _param_error("b", cls, U, W, np.array([0.0, np.nan, 0.0]))


def test_wrong_shapes_antisymmetric_and_irnn():
    U, W, b = _arrays()
    _param_error("M", AntisymmetricRNN, np.zeros((2, 2)), W, b)
    _param_error("U", IRNN, np.zeros((2, 2)), W, b)
    _param_error("U", IRNN, None, W, b)
    _param_error("V", IRNN, None, W, b, H=np.zeros((1, 3)))
    _param_error("H", IRNN, None, W, b, V=np.zeros((3, 1)), H=np.zeros((2, 3)))
    _param_error("U", IRNN, U, W, b, V=np.zeros((3, 1)), H=np.zeros((1, 3)))


def test_irnn_setting_errors():
    U, W, b = _arrays()
    _param_error("K", IRNN, U, W, b, K=0)
    _param_error("K", IRNN, U, W, b, K=-2)
    _param_error("K", IRNN, U, W, b, K=2.5)
    _param_error("K", dynlab.make_model, "irnn", 3, 1, K=0)
    for eta in (0.0, -1.0):
        _param_error("eta", IRNN, U, W, b, eta=eta)
        _param_error("eta", dynlab.make_model, "irnn", 3, 1, eta=eta)
    _param_error("eta", IRNN, U, W, b, K=3, eta=[0.5, 0.0, 0.5])            # (K,) with a zero
    _param_error("eta", IRNN, U, W, b, K=2, eta=[[0.5, 0.5], [0.5, -0.1]])  # (T, K) with a negative
    _param_error("eta", IRNN, U, W, b, K=3, eta=[0.5, 0.5])                 # last axis ≠ K
    _param_error("eta", IRNN, U, W, b, K=3, eta=np.ones((4, 2)))            # (T, K) with the wrong K
    _param_error("eta", IRNN, U, W, b, K=1, eta=np.ones((2, 2, 1)))
    _param_error("eta", IRNN, U, W, b, eta=np.nan)
    _param_error("alpha", IRNN, U, W, b, alpha=-0.5)
    for g0 in ("one", None, 0):
        _param_error("g0", IRNN, U, W, b, g0=g0)
    for sign in (0, 2, -2, 0.5, "x"):
        _param_error("sign", IRNN, U, W, b, sign=sign)
    assert IRNN(U, W, b, sign="-").sign == -1 and IRNN(U, W, b, sign=-1.0).sign == -1


def test_irnn_eta_table_rows_must_match_the_input():
    m = dynlab.make_model("irnn", 3, 1, K=2, eta=np.full((5, 2), 0.5), seed=0)
    dynlab.simulate(m, np.zeros((5, 1)))  # fine
    _param_error("eta", dynlab.simulate, m, np.zeros((6, 1)))


def test_ctrnn_setting_errors():
    U, W, b = _arrays()
    for tau in (0.0, -1.0):
        _param_error("tau", CTRNN, U, W, b, tau=tau)
    for dt in (0.0, -0.1):
        _param_error("dt", CTRNN, U, W, b, dt=dt)
    _param_error("alpha", CTRNN, U, W, b, alpha=-1.0)
    _param_error("substeps", CTRNN, U, W, b, substeps=0)
    _param_error("method", CTRNN, U, W, b, method="leapfrog")
    _param_error("method", dynlab.make_model, "ctrnn", 3, 2, method="midpoint")
    _param_error("rtol", CTRNN, U, W, b, rtol=0.0)
    assert CTRNN(U, W, b, method="scipy").method == "DOP853"
    assert CTRNN(U, W, b, method="Euler").method == "euler"


def test_other_setting_errors():
    U, W, b = _arrays()
    _param_error("model", dynlab.make_model, "tcn", 3, 2)
    _param_error("activation", dynlab.make_model, "rnn", 3, 2, activation="softplus")
    _param_error("activation", RNN, U, W, b, activation="gelu")
    _param_error("leak", RNN, U, W, b, activation="leaky-relu", leak=-0.1)
    _param_error("eps", AntisymmetricRNN, U, W, b, eps=0.0)
    _param_error("gamma", AntisymmetricRNN, U, W, b, gamma=-0.1)
    _param_error("alpha", FastRNN, U, W, b, alpha=np.nan)
    _param_error("hidden", dynlab.make_model, "rnn", 0, 2)
    _param_error("inputs", dynlab.make_model, "rnn", 3, 0)
    _param_error("weight_scale", dynlab.make_model, "rnn", 3, 2, weight_scale=-1.0)
    _param_error("seed", dynlab.make_model, "rnn", 3, 2, seed=-1)
    _param_error("K", dynlab.make_model, "rnn", 3, 2, K=5)  # not a setting of rnn
    _param_error("rank", dynlab.make_model, "irnn", 3, 2, rank=0)


def test_simulate_input_errors_name_x_and_the_step():
    m = dynlab.make_model("rnn", 3, 2, seed=0)
    x = np.zeros((10, 2))
    x[6, 1] = np.nan
    err = _param_error("x", dynlab.simulate, m, x)
    assert "t=7" in err.message and "feature 1" in err.message  # 1-based step
    xb = np.zeros((3, 10, 2))
    xb[2, 3, 0] = np.inf
    err = _param_error("x", dynlab.simulate, m, xb)
    assert "t=4" in err.message and "batch 2" in err.message
    err = _param_error("x", dynlab.simulate, m, np.zeros((10, 3)))
    assert "3" in err.message and "inputs=2" in err.message
    _param_error("x", dynlab.simulate, m, np.zeros((2, 3, 4, 2)))
    _param_error("x", dynlab.simulate, m, [["a", "b"]])


def test_models_are_frozen():
    m = dynlab.make_model("rnn", 3, 2, seed=0)
    with pytest.raises(Exception):
        m.U = np.eye(3)
    with pytest.raises(ValueError):
        m.U[0, 0] = 1.0
    r = m.replace(activation="relu")
    assert r.activation == "relu" and m.activation == "tanh"
    _param_error("activation", m.replace, activation="nope")


# ----------------------------------------------------------------------------- structure
def test_fastrnn_gates_at_init_sum_to_one():
    """σ(−3) + σ(3) = 1 exactly in real arithmetic; in floats to ≤ 1 ulp of 1 (1.1e-16)."""
    m = dynlab.make_model("fastrnn", 4, 2, seed=0)
    a, c, R = m.gated_form()
    assert abs(a + c - 1.0) <= 1e-15
    # each gate against the naive sigmoid
    assert a == pytest.approx(1 / (1 + math.exp(-3.0)), rel=1e-15)
    assert c == pytest.approx(1 / (1 + math.exp(3.0)), rel=1e-15)
    np.testing.assert_array_equal(R, m.U)


def test_antisymmetric_spectrum_has_real_part_minus_gamma():
    """M − Mᵀ is skew-symmetric, so its eigenvalues are imaginary and those of M − Mᵀ − γI
    have real part exactly −γ.  LAPACK's eigvals of a non-symmetric matrix are backward stable:
    error ≲ D·eps·‖A‖ ≈ 1e-13·‖M‖ for D = 30; accept 1e-12·‖M‖₂."""
    gamma = 0.3
    m = dynlab.make_model("antisymmetric", 30, 2, seed=5, weight_scale=1.5, gamma=gamma)
    ev = np.linalg.eigvals(m.U)
    tol = 1e-12 * np.linalg.norm(m.M, 2)
    assert np.max(np.abs(ev.real + gamma)) < tol
    assert np.max(np.abs(ev.imag)) > 0.1  # a genuinely rotating spectrum, not a trivial case
    # the effective matrix is the one typed entrywise from M
    np.testing.assert_array_equal(m.U, m.M - m.M.T - gamma * np.eye(30))


def test_rin_with_zero_weights_keeps_a_nonnegative_state_exactly():
    """With U = 0, W = 0, b = 0, relu: h_t = relu((0 + I) h_{t-1}) = h_{t-1} for h ≥ 0, exactly
    (multiplying by 1 and adding zeros is exact), and relu(h_0) = clipped h_0 at step 1."""
    D = 5
    m = RIN(np.zeros((D, D)), np.zeros((D, 2)), np.zeros(D), activation="relu")
    x = np.random.default_rng(0).standard_normal((100, 2))
    h0 = np.array([0.0, 0.3, 1.7, 1e-300, 5e3])
    for be in ("numpy", "numba"):
        h = dynlab.simulate(m, x, h0, backend=be).h.values
        np.testing.assert_array_equal(h, np.broadcast_to(h0, (100, D)))
        neg = np.array([-1.0, 0.3, -1e-300, 2.0, -0.0])
        h = dynlab.simulate(m, x, neg, backend=be).h.values
        np.testing.assert_array_equal(h, np.broadcast_to([0.0, 0.3, 0.0, 2.0, 0.0], (100, D)))


def test_lowrank_irnn_matrix_is_identity_plus_vh():
    """Rank 1: U_ij = δ_ij + V_i0·H_0j is one product and one addition per entry, so the
    entrywise naive sum agrees bitwise; for rank 3 (three terms, other summation order) to 1 ulp."""
    m = dynlab.make_model("irnn", 6, 2, rank=1, seed=0)
    assert m.lowrank == 1 and m.V.shape == (6, 1) and m.H.shape == (1, 6)
    np.testing.assert_array_equal(m.U, np.array(naive.irnn_matrix(m)))
    m3 = dynlab.make_model("irnn", 6, 2, rank=3, seed=0)
    np.testing.assert_allclose(m3.U, np.array(naive.irnn_matrix(m3)), rtol=0, atol=4e-16 * np.abs(m3.U).max())
    assert np.linalg.matrix_rank(m3.U - np.eye(6)) == 3
    assert dynlab.make_model("irnn", 6, 2, seed=0).lowrank == 0


# ----------------------------------------------------------------------------- iRNN closed form
def _irnn_linear_closed_form(m, x, h0):
    """φ = identity, scalar η: with s = g ± h_{m-1}, A = I + η(U − αI), c = W x + b, eq. 5 is
    s_k = A s_{k-1} + η c, so s_K = A^K s_0 + Σ_{j<K} A^j η c and h_m = g_K = s_K ∓ h_{m-1},
    where s_0 = g_0 ± h_{m-1} (g_0 = 0 or h_{m-1})."""
    D = m.hidden
    A = np.eye(D) + m.eta * (m.U - m.alpha * np.eye(D))
    AK = np.linalg.matrix_power(A, m.K)
    S = sum(np.linalg.matrix_power(A, j) for j in range(m.K)) * m.eta
    h = np.asarray(h0, dtype=np.float64)
    out = []
    for xm in x:
        c = m.W @ xm + m.b
        g0 = h if m.g0 == "previous" else np.zeros(D)
        s0 = g0 + m.sign * h
        h = AK @ s0 + S @ c - m.sign * h
        out.append(h)
    return np.array(out)


@pytest.mark.parametrize("g0", ["zero", "previous"])
@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("path", ["numpy", "numba-loops", "numba-vectorised"])
def test_linear_irnn_matches_closed_form(g0, sign, path, monkeypatch):
    """g0 = 0, + sign: h_m = (A^K − I) h_{m-1} + Σ_{j<K} A^j η c_m.  ‖A^K ∓ I‖ ≈ 1 here, so
    rounding differences (≈ 1e-16 per step, ≤ K·D terms) grow at most linearly over the 50 steps:
    ≲ 50·20·1e-16·max|h| ≈ 1e-13·max|h|; accept 1e-12·max(1, max|h|)."""
    backend, kernel = force_path(monkeypatch, path)
    m = dynlab.make_model("irnn", 4, 2, K=7, eta=0.4, alpha=1.0, g0=g0, sign=sign,
                          activation="identity", seed=2, weight_scale=0.5)
    x = np.random.default_rng(1).standard_normal((50, 2))
    h0 = np.array([0.5, -0.2, 0.1, 0.3])
    ref = _irnn_linear_closed_form(m, x, h0)
    ds = dynlab.simulate(m, x[None], h0[None], backend=backend)
    assert ds.attrs["kernel"] == kernel
    scale = max(1.0, np.abs(ref).max())
    assert scale < 1e3
    np.testing.assert_allclose(ds.h.values[0], ref, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("path", ["numpy", "numba-loops", "numba-vectorised"])
def test_irnn_states_lie_on_the_equilibrium_manifold(path, monkeypatch):
    """η = 1, α = 1, tanh, ‖U‖₂ = 0.5, K = 60: the inner map s ← tanh(U s + W x + b) is a
    contraction with factor ‖U‖₂ = 0.5 (tanh is 1-Lipschitz), so s_m = h_m + h_{m-1} is within
    0.5⁶⁰ ≈ 8.7e-19 × ‖s_0 − s*‖ of the equilibrium (‖s_0 − s*‖ ≤ ‖h_{m-1}‖ + √D ≲ 1e3) and the
    residual |α s − tanh(U s + W x + b)| ≤ (α + ‖U‖)·that ≈ 1e-15.  What remains is the
    rounding of s_m = h_m + h_{m-1} (≈ 1e-16·|h|); accept 1e-10."""
    backend, kernel = force_path(monkeypatch, path)
    rng = np.random.default_rng(4)
    D, d, T = 3, 1, 300
    U = rng.standard_normal((D, D))
    U *= 0.5 / np.linalg.norm(U, 2)
    m = IRNN(U, rng.standard_normal((D, d)), 0.1 * rng.standard_normal(D), eta=1.0, alpha=1.0, K=60,
             activation="tanh")
    x = dynlab.tasks.random_walk(T, d, variance=10.0, seed=0)
    ds = dynlab.simulate(m, x[None], backend=backend)
    assert ds.attrs["kernel"] == kernel
    h = ds.h.values[0]
    hprev = np.vstack([np.zeros(D), h[:-1]])
    s = h + hprev
    # residual written out with math.tanh and explicit sums (independent of the kernels)
    res = np.array([[s[t, i] - math.tanh(sum(U[i, j] * s[t, j] for j in range(D))
                                         + sum(m.W[i, j] * x[t, j] for j in range(d)) + m.b[i])
                     for i in range(D)] for t in range(T)])
    assert np.max(np.abs(res)) < 1e-10
    # the contrast: with K = 1 the state is nowhere near the manifold
    m1 = m.replace(K=1)
    h1 = dynlab.simulate(m1, x[None], backend=backend).h.values[0]
    s1 = h1 + np.vstack([np.zeros(D), h1[:-1]])
    assert np.max(np.abs(m1.equilibrium_residual(s1, x))) > 1e-3
    # and the library's own residual agrees with the naive one
    np.testing.assert_allclose(m.equilibrium_residual(s, x), res, rtol=0, atol=1e-14)

"""Equilibria of the iRNN step, α s = φ(U s + W x + b), s = h_eq ± h_prev: the three solvers
against each other, against an independently written residual, against the K → ∞ limit of
the iRNN recursion itself, and the continuation along a curve against per-point scipy roots."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dynlab
from conftest import force_path
from dynlab.analysis.equilibria import equilibrium_curve, irnn_equilibrium
from dynlab.errors import ParameterError
from dynlab.models import IRNN

import naive


def _model(D=5, d=2, norm=0.8, activation="tanh", seed=0, **kw):
    """‖U‖₂ = norm < α = 1 and φ 1-Lipschitz: the equilibrium is unique (iRNN Prop. 1) and the
    map s ↦ φ(U s + c) contracts with factor `norm`."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((D, D))
    U *= norm / np.linalg.norm(U, 2)
    return IRNN(U, rng.standard_normal((D, d)), 0.2 * rng.standard_normal(D), activation=activation, **kw)


def _naive_residual(m, s, x):
    """max_i |α s_i − φ(Σ_j U_ij s_j + Σ_j W_ij x_j + b_i)| with Python floats."""
    D, d = m.hidden, m.inputs
    return max(abs(m.alpha * s[i] - naive.phi(m.activation, sum(m.U[i, j] * s[j] for j in range(D))
                                              + sum(m.W[i, j] * x[j] for j in range(d)) + m.b[i], m.leak))
               for i in range(D))


# The three solves stop at ‖F‖∞ ≤ 1e-12.  Near the root F(s) ≈ J (s − s*) with
# J = αI − diag(φ') U, ‖J⁻¹‖ ≤ 1/(α − ‖U‖) = 5, so each is within 5e-12 of s*: any two agree
# to 1e-11; accept 1e-10.
AGREE = 1e-10


@pytest.mark.parametrize("activation", ["tanh", "sigmoid", "relu"])
@pytest.mark.parametrize("sign,g0", [(1, "zero"), (-1, "zero"), (1, "previous"), (-1, "previous")])
def test_methods_agree(activation, sign, g0):
    m = _model(activation=activation, sign=sign, g0=g0)
    rng = np.random.default_rng(1)
    x = 2.0 * rng.standard_normal((12, m.inputs))
    hp = rng.standard_normal((12, m.hidden))
    out = {meth: irnn_equilibrium(m, x, hp, method=meth, tol=1e-12) for meth in ("newton", "euler", "scipy")}
    for meth, ds in out.items():
        assert ds.converged.values.all(), meth
        assert np.all(ds.residual.values <= 1e-12), meth
        # residual recomputed independently, and h_eq = s − sign·h_prev
        for n in range(len(x)):
            assert _naive_residual(m, ds.s_eq.values[n], x[n]) <= 1e-12 + 1e-15
        np.testing.assert_allclose(ds.h_eq.values, ds.s_eq.values - sign * hp, rtol=0, atol=1e-15 * 10)
    for meth in ("newton", "euler"):
        np.testing.assert_allclose(out[meth].s_eq.values, out["scipy"].s_eq.values, rtol=0, atol=AGREE)
        np.testing.assert_allclose(out[meth].h_eq.values, out["scipy"].h_eq.values, rtol=0, atol=AGREE)
    # Newton converges quadratically: a handful of iterations, far fewer than the recursion
    if activation != "relu":
        assert out["newton"].iterations.values.max() <= 8
    assert out["euler"].iterations.values.min() > out["newton"].iterations.values.max()


def test_euler_iterations_respect_the_contraction_bound():
    """η = α = 1: s_k = φ(U s_{k-1} + c) contracts with ρ = ‖U‖₂ = 0.8, so after k steps
    ‖F(s_k)‖ ≤ (1 + ρ) ρ^k ‖s_0 − s*‖₂ and the solve needs at most
    k = ⌈log(tol / ((1+ρ)‖s_0 − s*‖)) / log ρ⌉ iterations."""
    m = _model()
    x = np.array([0.7, -1.2])
    ds = irnn_equilibrium(m, x, method="euler", tol=1e-12)
    e0 = np.linalg.norm(ds.s_eq.values)  # s_0 = 0 (h_prev = 0)
    kmax = math.ceil(math.log(1e-12 / (1.8 * e0)) / math.log(0.8))
    assert 0 < int(ds.iterations) <= kmax


@pytest.mark.parametrize("sign,g0", [(1, "zero"), (-1, "zero"), (1, "previous"), (-1, "previous")])
@pytest.mark.parametrize("path", ["numpy", "numba-loops", "numba-vectorised"])
def test_equilibrium_is_the_K_to_infinity_limit(sign, g0, path, monkeypatch):
    """One iRNN step with K = 200, η = 1, α = 1, ‖U‖₂ = 0.5: the inner recursion contracts by
    0.5 per step, so h_m is within 0.5²⁰⁰ ≈ 6e-61 · ‖s_0 − s*‖ of h_eq; what is left is rounding
    of s ∓ h_prev (≈ 1e-16·|h_prev|) — accept 1e-12."""
    backend, kernel = force_path(monkeypatch, path)
    m = _model(D=4, d=2, norm=0.5, sign=sign, g0=g0, K=200, eta=1.0, alpha=1.0, seed=3)
    rng = np.random.default_rng(7)
    B = 6
    x = 1.5 * rng.standard_normal((B, m.inputs))
    hp = rng.standard_normal((B, m.hidden))
    ds = dynlab.simulate(m, x[:, None, :], hp, backend=backend)
    assert ds.attrs["kernel"] == kernel
    eq = irnn_equilibrium(m, x, hp, method="scipy")
    np.testing.assert_allclose(ds.h.values[:, 0], eq.h_eq.values, rtol=0, atol=1e-12)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_equilibrium_curve_matches_pointwise_scipy(activation):
    """Continuation over a grid against independent scipy roots at every point (unique
    equilibrium, ‖U‖₂ = 0.8 < α): both within 5·tol of s*, accept 1e-10."""
    m = _model(D=2, d=1, norm=0.8, activation=activation, seed=5)
    xs = np.linspace(-6, 6, 81)
    S, res, conv = equilibrium_curve(m, xs)
    assert S.shape == (81, 2) and conv.all() and np.all(res <= 1e-12)
    ref = irnn_equilibrium(m, xs[:, None], method="scipy")
    np.testing.assert_allclose(S, ref.s_eq.values, rtol=0, atol=AGREE)
    for n in range(0, 81, 10):
        assert _naive_residual(m, S[n], xs[n:n + 1]) <= 1e-12 + 1e-15
    # (N, d) input works too, and equals the 1-D form for d = 1
    S2, _, _ = equilibrium_curve(m, xs[:, None])
    np.testing.assert_array_equal(S, S2)


def test_equilibrium_dataset_contract():
    m = _model(seed=2)
    ds = irnn_equilibrium(m, np.array([0.1, 0.2]), np.ones(m.hidden))
    assert ds.h_eq.dims == ("unit",) and ds.residual.dims == ()
    assert ds.attrs["model"] == "irnn" and ds.attrs["method"] == "newton"
    for k in ("dynlab_version", "backend", "command", "seed", "K", "g0", "sign", "activation"):
        assert k in ds.attrs, k
    for name in ("U", "W", "b", "eta", "alpha", "x", "h_prev"):
        assert name in ds.data_vars
    for name, var in ds.data_vars.items():
        assert var.attrs.get("long_name") and "units" in var.attrs, name
    batched = irnn_equilibrium(m, np.zeros((3, 2)))
    assert batched.h_eq.dims == ("batch", "unit")
    np.testing.assert_array_equal(batched.h_prev.values, np.zeros((3, m.hidden)))


def test_nonconvergence_is_reported_not_hidden():
    """A tiny iteration budget cannot reach 1e-12: converged is 0 and the residual says how far."""
    m = _model()
    ds = irnn_equilibrium(m, np.array([3.0, -2.0]), method="euler", max_iter=3)
    assert int(ds.converged) == 0 and float(ds.residual) > 1e-12 and int(ds.iterations) == 3


def test_errors_name_the_parameter():
    rnn = dynlab.make_model("rnn", 3, 2, seed=0)
    for fn, args in [(irnn_equilibrium, (rnn, np.zeros(2))), (equilibrium_curve, (rnn, np.zeros((4, 2))))]:
        with pytest.raises(ParameterError) as info:
            fn(*args)
        assert info.value.param == "model"
    m = _model()
    cases = [((m, np.zeros(2)), {"method": "bisection"}, "method"),
             ((m, np.zeros(3)), {}, "x"),
             ((m, np.array([np.nan, 0.0])), {}, "x"),
             ((m, np.zeros((2, 2, 2))), {}, "x"),
             ((m, np.zeros(2), np.full(m.hidden, np.inf)), {}, "h_prev"),
             ((m, np.zeros((3, 2)), np.zeros(m.hidden + 1)), {}, "h_prev"),
             ((m, np.zeros((3, 2)), np.zeros((2, m.hidden))), {}, "h_prev")]
    for args, kwargs, param in cases:
        with pytest.raises(ParameterError) as info:
            irnn_equilibrium(*args, **kwargs)
        assert info.value.param == param
    with pytest.raises(ParameterError) as info:
        equilibrium_curve(m, np.zeros((4, 3)))
    assert info.value.param == "xs"

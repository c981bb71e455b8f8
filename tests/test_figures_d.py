"""The premises of implicit-fig7-size, implicit-a2-iterative and implicit-s34-stepsize: parameter counts,
the unrolled derivative against an independent reverse-mode pass and the implicit derivative, the rate
estimator on a sequence of known rate, the one-step use of dynlab's solvers, the stability regions."""
import numpy as np
import pytest

import dynlab as dl
from dynlab.activations import sigmoid
from dynlab.backends.reference.implicit import residual, solve_fixed_point, solve_rk4
from dynlab.figures.implicit import a2_iterative as a2
from dynlab.figures.implicit import fig7_size as f7
from dynlab.figures.implicit import s34_stepsize as s34


# ---------------------------------------------------------------- implicit-fig7-size
@pytest.mark.parametrize("n", [1, 2, 4, 8, 13])
def test_fig7_parameter_counts_are_the_models(n):
    m = dl.make_model("implicit", hidden=n, inputs=20, hidden2=2, seed=0)
    params = m.params()
    assert f7.implicit_params(n) == sum(v.size for v in params.values() if v is not None)
    assert f7.feedforward_params(n) == sum(v.size for k, v in params.items() if v is not None and k not in f7.RECURRENT)


def test_fig7_matched_sizes_are_the_closest_counts():
    # implicit 2, 4, 8: 60, 122, 270 parameters; feed-forward 23h + 2: 71 (h 3), 117 (h 5), 278 (h 12)
    assert [f7.implicit_params(n) for n in (2, 4, 8)] == [60, 122, 270]
    assert [f7.matched_hidden(n) for n in (2, 4, 8)] == [3, 5, 12]
    for n in (2, 4, 8, 20):
        h = f7.matched_hidden(n)
        gap = abs(f7.feedforward_params(h) - f7.implicit_params(n))
        assert gap <= abs(f7.feedforward_params(h + 1) - f7.implicit_params(n))
        assert gap <= abs(f7.feedforward_params(h - 1) - f7.implicit_params(n))
    for quick in (True, False):
        ff = f7.feedforward_hidden(quick)
        assert set(f7.IMPLICIT_HIDDEN[quick]) <= set(ff)
        assert {f7.matched_hidden(n) for n in f7.IMPLICIT_HIDDEN[quick]} <= set(ff)


# ---------------------------------------------------------------- implicit-a2-iterative
def _net(seed=0, scale=3.0, n=6, m=2):
    model = dl.make_model("implicit", hidden=n, inputs=m, seed=seed, weight_scale=scale)
    x = np.random.default_rng(seed + 7).standard_normal(m)
    return model, x, model.Q @ x + model.T


def test_a2_unrolled_derivative_matches_an_independent_reverse_mode_pass():
    # reverse mode through the unrolled iteration: ∂(v·Y(n))/∂W = Σ_t (D_t λ_t) Y(t−1)ᵀ with
    # λ_n = v, λ_{t−1} = Wᵀ D_t λ_t — an algorithm independent of the forward recursion
    model, x, c = _net(seed=1)
    n = 17
    Y, J = a2.iterate(model.W, c, n)
    v = np.random.default_rng(3).standard_normal(c.size)
    lam = v.copy()
    grad = np.zeros_like(model.W)
    for t in range(n, 0, -1):
        s = sigmoid(model.W @ Y[t - 1] + c, exact_tails=False)
        g = s * (1 - s) * lam
        grad += np.outer(g, Y[t - 1])
        lam = model.W.T @ g
    np.testing.assert_allclose(np.einsum("i,ijm->jm", v, J[n]), grad, rtol=1e-12, atol=1e-14)


def test_a2_unrolled_derivative_matches_central_differences_and_tends_to_the_implicit_one():
    model, x, c = _net(seed=2)
    for n in (3, 25):
        J = a2.iterate(model.W, c, n)[1][n]
        fd = a2._fd_iterate(model.W, c, n)
        assert np.abs(fd - J).max() <= 1e-8 * np.abs(J).max()
    J = a2.iterate(model.W, c, 400)[1][-1]
    Jstar = dl.implicit_jacobian(model, x)["W"]
    np.testing.assert_allclose(J, Jstar, atol=1e-12 * np.abs(Jstar).max())


def test_a2_fd_equilibrium_reference_agrees_with_the_implicit_jacobian():
    model, x, c = _net(seed=4)
    y = dl.implicit_equilibrium(model, x, tol=1e-14).h_eq.values
    fd = a2._fd_equilibrium(model.W, c, y)
    Jstar = dl.implicit_jacobian(model, x)["W"]
    assert np.abs(fd - Jstar).max() <= 1e-7 * np.abs(Jstar).max()


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.9])
def test_a2_rate_estimator_recovers_a_known_rate(rho):
    n = np.arange(1, 400)
    e = 2.5 * n * rho ** n * (1 + 0.3 / n)  # n ρⁿ with an O(1/n) correction, as the error obeys
    assert abs(a2._rate(e, n) / rho - 1) < 0.01
    assert np.isnan(a2._rate(np.ones(50), np.arange(1, 51)))  # no decay: no rate


def test_a2_control_networks_do_not_contract():
    # the control's premise: W − 10 I, T + 5 gives spectral radius of D W above 1 at the equilibrium
    for model, x in a2._networks(control=True)[:2]:
        y = dl.implicit_equilibrium(model, x, tol=1e-14).h_eq.values
        s = sigmoid(model.W @ y + model.Q @ x + model.T, exact_tails=False)
        assert np.abs(np.linalg.eigvals((s * (1 - s))[:, None] * model.W)).max() > 1.5


# ---------------------------------------------------------------- implicit-s34-stepsize
def test_s34_one_step_of_the_solvers_is_what_the_recipe_says():
    model = s34.network(12)
    A, _ = model.stacked()
    C = model.drive(np.random.default_rng(0).standard_normal((3, s34.INPUTS)))
    Z = np.random.default_rng(1).uniform(0, 1, C.shape)
    f = lambda Y: 1 / (1 + np.exp(-(Y @ A.T + C)))  # noqa: E731
    # h = 1 Euler step = one Picard step
    np.testing.assert_allclose(solve_fixed_point(A, C, "sigmoid", Z0=Z, depth=0, max_iter=1, tol=0.0)[0], f(Z),
                               rtol=0, atol=1e-15)
    # one classical RK4 step of size 1 on dY/dt = f(Y) − Y
    F = lambda Y: f(Y) - Y  # noqa: E731
    k1 = F(Z)
    k2 = F(Z + k1 / 2)
    k3 = F(Z + k2 / 2)
    k4 = F(Z + k3)
    np.testing.assert_allclose(solve_rk4(A, C, "sigmoid", steps=1, dt=1.0, Z0=Z), Z + (k1 + 2 * k2 + 2 * k3 + k4) / 6,
                               atol=1e-15)
    assert residual(A, C, Z, "sigmoid").shape == Z.shape


def test_s34_rk4_amplification_is_one_rk4_step_on_the_linear_ode():
    z = np.array([-0.5, -1 + 2j, -1 + 2.7j, -2.9, 0.1j])
    y = np.ones_like(z)
    k1 = z * y
    k2 = z * (y + k1 / 2)
    k3 = z * (y + k2 / 2)
    k4 = z * (y + k3)
    np.testing.assert_allclose(s34.rk4_amplification(z), np.abs(y + (k1 + 2 * k2 + 2 * k3 + k4) / 6), rtol=1e-14)


def test_s34_network_premises():
    # antisymmetric W: λ(D W) purely imaginary for any positive diagonal D (the ODE is stable at every size);
    # the small net's linearised h = 1 map contracts, the large net's does not
    rng = np.random.default_rng(0)
    for units in (s34.SMALL, s34.LARGE):
        W = s34.network(units).W
        np.testing.assert_allclose(W, -W.T)
        d = rng.uniform(0.01, 0.25, units)
        assert np.abs(np.linalg.eigvals(d[:, None] * W).real).max() < 1e-10
    assert np.abs(np.linalg.eigvals(0.25 * s34.network(s34.SMALL).W)).max() < 1
    assert np.abs(np.linalg.eigvals(0.25 * s34.network(s34.LARGE).W)).max() > 1


@pytest.mark.parametrize("w", [-3.0, 0.5, 2.0])
def test_a2_one_unit_limit_is_the_corrected_eq2(w):
    # one neuron: the unrolled derivative's limit is eq. 2 with f'(x̃) in the numerator (dl.implicit_neuron)
    q, x, t = 1.0, 0.7, -0.3
    _, dydw = dl.implicit_neuron(w, q, x, t)
    J = a2.iterate(np.array([[w]]), np.array([q * x + t]), 300)[1][-1]
    assert abs(J[0, 0, 0] - dydw) <= 1e-12 * abs(dydw)

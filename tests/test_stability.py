"""Equilibria of every model, multi-start fixed points, stability spectra, convergence rates
and continuation — each number against something independent: scipy's root, brentq on a
scalar equation, closed forms (the sigmoid neuron's folds), central finite differences, the
simulation kernels (a fixed point of the map is left where it is by one step), the K → ∞
limit of the iRNN's own step Jacobian, and theorems that must hold numerically."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

import battery
import dynlab as dl
from dynlab.analysis.equilibria import eigenvalues_from, equilibrium
from dynlab.analysis.fixed_points import fixed_points
from dynlab.errors import ConvergenceError, ParameterError
from dynlab.models import CTRNN, IRNN

import naive


def _irnn(D=5, d=2, norm=0.8, activation="tanh", seed=0, **kw):
    """‖U‖₂ = norm < α = 1: a unique equilibrium, and the Picard map contracts with `norm`."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((D, D))
    U *= norm / np.linalg.norm(U, 2)
    return IRNN(U, rng.standard_normal((D, d)), 0.2 * rng.standard_normal(D), activation=activation, **kw)


def _neuron(w, b, activation="sigmoid"):
    """The single neuron ġ = −g + σ(w g + b) as a 1-unit CTRNN (input weight 0)."""
    return CTRNN([[w]], [[0.0]], [b], activation=activation)


# ------------------------------------------------------------------------------ solvers
# Newton to 1e-12 against scipy's root, and a root left in place by one step of the simulation
# kernels, for every model: the common battery (tests/test_battery.py, check_equilibrium).


def test_residual_against_the_naive_equation():
    """The iRNN residual recomputed with Python floats (tests/naive.py) is ≤ 1e-12 too."""
    m = _irnn(activation="sigmoid")
    x = np.array([1.0, -2.0])
    eq = equilibrium(m, x)
    s = eq.s_eq.values
    r = max(abs(m.alpha * s[i] - naive.phi("sigmoid", sum(m.U[i, j] * s[j] for j in range(5))
                                         + sum(m.W[i, j] * x[j] for j in range(2)) + m.b[i])) for i in range(5))
    assert r <= 1e-12 + 1e-16


def test_rk4_30_steps_from_zero_reaches_1e8():
    """Fixed-step RK4 (h = 1, 30 steps from 0) on ds/dt = φ(U s + c) − s with ‖U‖₂ = 0.3:
    the error shrinks per step by at most R(−(1 − 0.3)) ≈ 0.50 (RK4's stability function at the
    slowest linear rate), 0.50³⁰ ≈ 1e-9 of the initial residual (~1): ≈1e-8 reached, and
    the solve honestly reports converged = 0 against tol = 1e-14."""
    m = _irnn(norm=0.3)
    x = np.random.default_rng(3).standard_normal((5, 2))
    rk = equilibrium(m, x, method="rk4", step_size=1.0, max_iter=30, tol=1e-14)
    assert (rk.iterations.values == 30).all() and not rk.converged.values.any()
    assert rk.residual.values.max() <= 1e-8
    np.testing.assert_array_equal(rk.converged.values, rk.residual.values <= 1e-14)
    ref = equilibrium(m, x, method="scipy")
    np.testing.assert_allclose(rk.h_eq.values, ref.h_eq.values, rtol=0, atol=1e-7)


def test_euler_method_is_the_irnn_recursion():
    """The "euler" solve is the iRNN recursion: its iterate after k steps equals the state of
    one ``dl.simulate`` step of the same model with K = k (the simulation kernel)."""
    m = _irnn(eta=0.6)
    x, hp = np.array([0.3, -0.4]), np.array([0.1, 0.2, -0.3, 0.0, 0.5])
    for k in (1, 4, 9):
        eq = equilibrium(m, x, hp, method="euler", max_iter=k, tol=1e-300)
        sim = dl.simulate(m.replace(K=k), x[None], h0=hp, backend="numpy")["h"].values[0]
        assert int(eq.iterations) == k and int(eq.converged) == 0
        np.testing.assert_allclose(eq.h_eq.values, sim, rtol=0, atol=1e-14)


def test_non_convergence_is_reported():
    m = _irnn()
    eq = equilibrium(m, np.zeros((3, 2)), method="euler", max_iter=2)
    assert not eq.converged.values.any() and (eq.residual.values > 1e-12).all()
    assert eq.attrs["n_converged"] == 0
    with pytest.raises(ParameterError, match="method"):
        equilibrium(m, np.zeros(2), method="bisection")
    with pytest.raises(ParameterError, match="x"):
        equilibrium(m, np.zeros(3))
    with pytest.raises(ParameterError, match="tol"):
        equilibrium(m, np.zeros(2), tol=-1)


# --------------------------------------------------------------- implicit derivatives
@pytest.mark.parametrize("sign", [1, -1])
def test_implicit_function_jacobian_is_minus_sign_identity(sign):
    """∂h_m/∂h_{m-1} at the equilibrium, by the implicit function theorem, is −sign·I to
    1e-12 — and the iRNN's own step Jacobian (a product over K inner steps, a different code
    path) tends to it as K grows: with contraction ≤ 0.8 per step, K = 200 leaves 0.8²⁰⁰ ≈ 1e-19."""
    m = _irnn(sign=sign)
    x, hp = np.array([0.5, -1.0]), np.array([0.3, -0.2, 0.1, 0.4, -0.5])
    eq = equilibrium(m, x, hp, derivatives=True)
    np.testing.assert_allclose(eq.dh_dhprev.values, -sign * np.eye(5), rtol=0, atol=1e-12)
    J = dl.jacobian_at(m.replace(K=200), x[None], hp[None], backend="numpy")[0]
    np.testing.assert_allclose(J, -sign * np.eye(5), rtol=0, atol=1e-12)


def test_equilibrium_input_derivative_solves_the_linear_system_and_matches_fd():
    """(αI − ∇φU) ∂h_eq/∂x = ∇φ W to 1e-10, and ∂h_eq/∂x against central differences of the
    solved equilibria (step 1e-5: truncation ~1e-10·‖∂³h‖, rounding ~1e-12/1e-5 ≈ 1e-7 at worst;
    accept 1e-7)."""
    m = _irnn(activation="tanh", alpha=1.3)
    x = np.array([0.7, -0.2])
    eq = equilibrium(m, x, derivatives=True)
    s = eq.s_eq.values
    d = 1.0 - np.tanh(m.U @ s + m.W @ x + m.b) ** 2
    lhs = (m.alpha * np.eye(5) - d[:, None] * m.U) @ eq.dh_dx.values
    np.testing.assert_allclose(lhs, d[:, None] * m.W, rtol=0, atol=1e-10)
    fd = np.empty((5, 2))
    for j in range(2):
        e = np.zeros(2)
        e[j] = 1e-5
        fd[:, j] = (equilibrium(m, x + e).h_eq.values - equilibrium(m, x - e).h_eq.values) / 2e-5
    np.testing.assert_allclose(eq.dh_dx.values, fd, rtol=0, atol=1e-7)


# ------------------------------------------------------------------------------ spectra
def test_contracting_irnn_spectrum_is_in_the_left_half_plane_and_matches_fd():
    """‖U‖₂ < α and |φ'| ≤ 1: Re λ(∇φU − αI) ≤ ‖∇φU‖₂ − α ≤ ‖U‖₂ − α < 0 at every point (a
    theorem); the eigenvalues match those of a central-difference Jacobian of F (1e-6)."""
    m = _irnn(D=6, d=1, norm=0.9, K=5, eta=0.5)
    x = dl.tasks.random_walk(steps=100, inputs=1, variance=10.0, batch=2, seed=0)
    sp = dl.spectrum(m, x, backend="numpy")
    assert sp.max_real.shape == (2, 100)
    assert sp.max_real.values.max() <= 0.9 - 1.0 + 1e-12
    assert (sp.stability.values == 1).all()
    system = m.form().fixed_point_map()
    for bi, t in ((0, 0), (0, 57), (1, 99)):
        y = sp.state.values[bi, t]
        c = system.c(sp.x.values[bi, t:t + 1])
        Jfd = np.empty((6, 6))
        for j in range(6):
            e = np.zeros(6)
            e[j] = 1e-6
            Jfd[:, j] = (system.F((y + e)[None], c)[0] - system.F((y - e)[None], c)[0]) / 2e-6
        ev = np.sort_complex(np.linalg.eigvals(Jfd))
        got = np.sort_complex(eigenvalues_from(sp.isel(batch=bi, time=t)))
        np.testing.assert_allclose(got, ev, rtol=0, atol=1e-6)


def test_map_step_eigenvalues_are_flow_eigenvalues_plus_one():
    """For a discrete cell F(h) = step(h) − h, so the step Jacobian (``jacobian_at``'s closed
    form) has the flow Jacobian's eigenvalues shifted by +1 (to rounding, 1e-12)."""
    m = battery.build("fastrnn", 4, 2)
    x = dl.tasks.random_walk(steps=30, inputs=2, variance=1.0, seed=1)
    sp = dl.spectrum(m, x, backend="numpy")
    a = np.sort_complex(eigenvalues_from(sp, "eig") + 1.0)
    b = np.sort_complex(eigenvalues_from(sp, "step_eig"))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sp.step_radius.values, np.abs(b).max(axis=1), rtol=1e-15)


def test_complex_eigenvalues_round_trip_through_netcdf(tmp_path):
    m = _irnn(D=4, d=1, norm=0.9)
    sp = dl.spectrum(m, dl.tasks.sine(steps=20, inputs=1), at="equilibrium", backend="numpy")
    ev = eigenvalues_from(sp)
    assert np.abs(ev.imag).max() > 0.01  # the case has complex pairs
    path = dl.write_dataset(sp, tmp_path / "sp.nc")
    back = dl.read_dataset(path)
    np.testing.assert_array_equal(eigenvalues_from(back), ev)
    np.testing.assert_array_equal(eigenvalues_from(back, "step_eig"), eigenvalues_from(sp, "step_eig"))
    assert sp.residual.values.max() <= 1e-12


def test_stability_label_matches_the_simulated_dynamics():
    """A CTRNN equilibrium labelled stable attracts a nearby start; an unstable one repels it
    (the simulation runs the model's RK4 kernel, which knows nothing of eigenvalues)."""
    m = dl.make_model("ctrnn", 2, 1, seed=3, weight_scale=3.0, dt=0.5, substeps=5)
    fp = fixed_points(m, [0.0])
    assert set(fp.stability.values.tolist()) == {1, -1}
    for h, st in zip(fp.h_eq.values, fp.stability.values):
        h0 = h + np.array([1e-4, -1e-4])
        end = dl.simulate(m, np.zeros((200, 1)), h0=h0, backend="numpy")["h"].values[-1]
        dist = np.linalg.norm(end - h)
        assert (dist < 1e-8) if st == 1 else (dist > 1e-2)


# ------------------------------------------------------------------------- convergence
def test_convergence_bound_rates_and_erratum():
    """‖U‖₂ = 0.8 < α = 1, η = 0.5: ρ = 1 − αη + η‖U‖₂ = 0.9.  Every e_k ≤ ρ^k e_0 (the corrected
    Prop. 2, a theorem); the fitted rate ≤ ρ; the printed form e_K ≤ ρ^K e_1 fails at K = 1 (it
    reads e_1 ≤ ρ e_1 with ρ < 1).  e_k is recomputed by the simulation kernel with K = k; the
    fitted rate tends to the local rate (spectral radius of I + η(∇φU − αI)) — within 2% over
    60 iterations, where the transient has died out."""
    m = _irnn(norm=0.8, eta=0.5)
    rng = np.random.default_rng(2)
    x, hp = 2 * rng.standard_normal((4, 2)), rng.standard_normal((4, 5))
    cv = dl.convergence(m, x, hp, K_max=60)
    assert float(cv.bound_rate) == pytest.approx(0.9, abs=1e-12)
    assert cv.bound_holds.values.all()
    e = cv.error.values
    assert (e <= 0.9 ** np.arange(61) * e[:, :1] + 1e-14).all()
    assert (cv.rate.values <= 0.9).all()
    np.testing.assert_allclose(cv.rate.values, cv.local_rate.values, rtol=0.02)
    assert not cv.printed_bound_holds.values[:, 1].any()  # the erratum, exhibited at K = 1
    for k in (1, 7):
        g = dl.simulate(m.replace(K=k), x[:1, None], h0=hp[:1], backend="numpy")["h"].values[0, 0]
        assert abs(np.linalg.norm(g - cv.h_eq.values[0]) - e[0, k]) <= 1e-14
    assert cv.reference_residual.values.max() <= 1e-13


def test_convergence_needs_an_irnn_and_one_step_size():
    with pytest.raises(ParameterError, match="model"):
        dl.convergence(battery.build("rnn", 4, 2), np.zeros(2))
    with pytest.raises(ParameterError, match="K_max"):
        dl.convergence(_irnn(), np.zeros(2), K_max=0)
    with pytest.raises(ParameterError, match="eta"):
        dl.convergence(_irnn(K=2, eta=[0.5, 0.7]), np.zeros(2))


# ------------------------------------------------------- several equilibria; continuation
@pytest.mark.parametrize("w,b", [(8.0, -4.0), (10.0, -4.5), (6.0, -3.2)])
def test_multistart_finds_every_root_of_the_bistable_neuron(w, b):
    """ġ = −g + σ(w g + b) with w > 4 has three equilibria in the bistable range.  Each root
    of the scalar equation is bracketed and found by brentq (independent); the multi-start
    search finds each to 1e-10, certified (Kantorovich), stable-unstable-stable."""
    f = lambda g: -g + 1.0 / (1.0 + np.exp(-(w * g + b)))  # noqa: E731
    grid = np.linspace(-0.01, 1.01, 20000)  # 0.5 (a root for b = −w/2) is not a grid point
    v = f(grid)
    roots = [brentq(f, grid[i], grid[i + 1], xtol=1e-15) for i in np.flatnonzero(np.sign(v[:-1]) != np.sign(v[1:]))]
    assert len(roots) == 3
    fp = fixed_points(_neuron(w, b), [0.0])
    found = fp.h_eq.values[fp.kind.values == 1, 0]
    assert len(found) == 3
    np.testing.assert_allclose(np.sort(found), roots, rtol=0, atol=1e-10)
    assert fp.certified.values.all() and fp.residual.values.max() <= 1e-12
    assert fp.stability.values.tolist() == [1, -1, 1]
    # stability from the closed form: stable iff w σ'(w g + b) < 1
    s = 1.0 / (1.0 + np.exp(-(w * np.sort(found) + b)))
    np.testing.assert_array_equal(w * s * (1 - s) < 1, [True, False, True])


def test_continuation_finds_both_folds_of_the_hysteresis_loop():
    """At a fold F = 0 and F_g = 0: w σ'(w g + b) = 1 with σ = g, so g(1 − g) = 1/w,
    g± = (1 ± √(1 − 4/w))/2 and b = logit(g) − w g.  Continuation over b finds both folds to
    1e-6 (the Moore–Spence refinement converges to ~1e-12), the branch between them unstable."""
    for w in (6.0, 8.0):
        br = dl.continuation(_neuron(w, 0.0), "b", -12.0, 4.0)
        assert br.attrs["stop_reason"] == "left the range"
        # along increasing b the lower branch turns back first, at g− (the larger b)
        g = (1 + np.array([-1.0, 1.0]) * np.sqrt(1 - 4 / w)) / 2
        bf = np.log(g / (1 - g)) - w * g
        assert br.sizes["fold"] == 2 and br.fold_refined.values.all()
        np.testing.assert_allclose(br.fold_param.values, bf, rtol=0, atol=1e-6)
        np.testing.assert_allclose(br.fold_h.values[:, 0], g, rtol=0, atol=1e-6)
        assert br.residual.values.max() <= 1e-12
        # stability along the branch from the closed form w σ'(w g + b) < 1
        gb, bb = br.h_eq.values[:, 0], br.param.values
        s = 1.0 / (1.0 + np.exp(-(w * gb + bb)))
        margin = np.abs(w * s * (1 - s) - 1) > 1e-6
        expect = np.where(w * s * (1 - s) < 1, 1, -1)
        np.testing.assert_array_equal(br.stability.values[margin], expect[margin])
        assert (br.stability.values == -1).any() and (br.stability.values == 1).any()


def test_continuation_over_an_input_of_a_2d_ctrnn_agrees_with_newton():
    """Every branch point solves F = 0 (≤ 1e-12); for a contracting CTRNN (one equilibrium per
    input) the branch is Newton's equilibrium at the same input (1e-10), with no fold."""
    m = dl.make_model("ctrnn", 2, 1, seed=0, weight_scale=0.5)
    br = dl.continuation(m, "x", -3.0, 3.0)
    assert br.sizes["fold"] == 0 and br.residual.values.max() <= 1e-12
    lam = br.param.values[br.in_range.values == 1]
    eq = equilibrium(m, lam[:, None])
    np.testing.assert_allclose(br.h_eq.values[br.in_range.values == 1], eq.h_eq.values, rtol=0, atol=1e-10)
    with pytest.raises(ParameterError, match="over"):
        dl.continuation(m, "gamma", 0, 1)
    with pytest.raises(ParameterError, match="range"):
        dl.continuation(m, "x", 1, 0)


def test_no_equilibrium_is_reported_not_hidden():
    """ġ = tanh(b) with α = 0, U = 0 has no equilibrium for b ≠ 0: every solver says so
    (converged 0, residual tanh(1) ≈ 0.76), and continuation refuses to start."""
    m = CTRNN([[0.0]], [[1.0]], [1.0], alpha=0.0)
    for method in ("newton", "euler", "scipy"):
        eq = equilibrium(m, [0.0], method=method, max_iter=20)
        assert int(eq.converged) == 0
        assert float(eq.residual) == pytest.approx(np.tanh(1.0), rel=1e-12)
    with pytest.raises(ConvergenceError, match="no equilibrium found at b = 1"):
        dl.continuation(m, "b", 1.0, 2.0)


def test_kantorovich_certificate_contains_the_true_root():
    """Near a root (brentq's, independent) a perturbed point is certified and its radius holds
    the true root; a point far from any root (where h = βLη > ½) is not certified.  For relu
    a root inside one linear region is certified with radius = the Newton step."""
    w, b = 8.0, -4.0
    f = lambda g: -g + 1.0 / (1.0 + np.exp(-(w * g + b)))  # noqa: E731
    root = brentq(f, 0.9, 1.0, xtol=1e-15)
    system = _neuron(w, b).form().fixed_point_map()
    c = np.array([[b]])
    for delta in (1e-8, 1e-4, 1e-2):
        ok, radius = system.certify(np.array([[root + delta]]), c)
        assert ok[0] and abs(delta) <= radius[0] * (1 + 1e-9)
    ok, _ = system.certify(np.array([[0.7]]), c)
    assert not ok[0]
    m = _irnn(D=3, d=1, activation="relu", norm=0.5)
    eq = equilibrium(m, [1.5])
    rs = m.form().fixed_point_map()
    z = m.U @ eq.s_eq.values + m.W @ [1.5] + m.b
    assert np.min(np.abs(z)) > 1e-3  # the root is inside a linear region
    ok, radius = rs.certify(eq.s_eq.values[None] + 1e-7, rs.c(np.array([[1.5]])))
    assert ok[0] and radius[0] >= 1e-7 * np.sqrt(3) * 0.999


def test_a_ctrnn_equilibrium_dataset_keeps_the_model_s_own_method():
    """The solve's method is the attr ``solve_method``: as ``method`` it overwrote the CTRNN's own
    setting (euler, rk4, a scipy solver), so the model could not be rebuilt from the Dataset (the
    data contract: a result is recomputed from the file alone)."""
    m = dl.make_model("ctrnn", 3, 2, seed=1, weight_scale=0.8, method="euler", substeps=2, activation="relu")
    x = np.array([0.3, -0.2])
    for ds, how in ((equilibrium(m, x), "newton"), (fixed_points(m, x, n_starts=4), "search"),
                    (fixed_points(m, x, method="complete"), "complete")):
        back = dl.model_from_dataset(ds)
        assert back.method == "euler" and back.substeps == 2
        np.testing.assert_array_equal(back.U, m.U)
        assert ds.attrs["solve_method"] == how and ds.attrs["method"] == "euler"

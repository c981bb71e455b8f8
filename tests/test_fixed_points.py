"""Equilibria of the map models (gru, lstm, stack), the Lipschitz bound behind their
certificate, the unstable modes of fixed_points, and the flip-flop task.

Every number is checked against something independent: closed forms (a GRU with z ≡ 1 keeps
its state; the folds of a one-unit GRU), scalar root finding, ``scipy.optimize.root`` from a
grid, central differences, the eigen-equation J v = μ v, and a naive loop for the task.
"""
import numpy as np
import pytest

import dynlab as dl
from dynlab.models.lipschitz import jacobian_lipschitz
from dynlab.errors import ParameterError
from dynlab.models.gru_lstm import GRU, LSTM


def _one_unit_gru(w_hn=3.0, r_b=0.7, z_b=-0.4, w_in=1.0, b_in=0.1, b_hn=0.2):
    """h' = (1 − z) n + z h with r, z constant (no recurrent or input weights on them):
    fixed points solve h = tanh(w_in x + b_in + r (w_hn h + b_hn)), r = σ(r_b)."""
    W_ih = np.array([[0.0], [0.0], [w_in]])
    W_hh = np.array([[0.0], [0.0], [w_hn]])
    return GRU(W_ih, W_hh, np.array([r_b, z_b, b_in]), np.array([0.0, 0.0, b_hn]))


# ------------------------------------------------------------------ the Lipschitz bound
@pytest.mark.parametrize("name", ["gru", "lstm"])
@pytest.mark.parametrize("activation", ["tanh", "sigmoid", "identity"])
def test_lipschitz_bound_holds_on_random_pairs_in_the_ball(name, activation):
    rng = np.random.default_rng(1)
    for ws in (1.0, 3.0):
        m = dl.make_model(name, 6, 3, seed=2, weight_scale=ws, activation=activation)
        n = m.state_size
        worst = 0.0
        for trial in range(12):
            y = 2.0 * rng.standard_normal(n)
            x = rng.standard_normal(3)
            rho = (0.05, 0.5, 2.0)[trial % 3]
            L = jacobian_lipschitz(m, y[None], x[None], rho)[0]
            assert np.isfinite(L) and L > 0
            for k in range(30):
                u = rng.standard_normal((2, n))
                u /= np.linalg.norm(u, axis=1, keepdims=True)
                a = y + rho * rng.random() * u[0]
                b = a + 1e-4 * rho * u[1] if k % 2 else y + rho * rng.random() * u[1]
                J = m.step_jacobian(np.stack([a, b]), np.stack([x, x]))
                ratio = np.linalg.norm(J[0] - J[1], 2) / np.linalg.norm(a - b)
                assert ratio <= L, (name, activation, ws, ratio, L)
                worst = max(worst, ratio / L)
        # a bound, and not a vacuous one: the measured ratio comes within two decades of it
        assert worst > 1e-2, worst


def test_no_bound_for_deep_stacks_or_piecewise_affine_candidates():
    y = np.zeros((1, 12))
    assert jacobian_lipschitz(dl.make_model("stack", 3, 2, cell="lstm", layers=2, seed=0), np.zeros((1, 24)),
                              np.zeros((1, 2)), 0.5) is None
    assert jacobian_lipschitz(dl.make_model("gru", 12, 2, seed=0, activation="relu"), y, np.zeros((1, 2)), 0.5) is None
    one = dl.make_model("stack", 4, 2, cell="gru", layers=1, seed=0)
    assert jacobian_lipschitz(one, np.zeros((1, 4)), np.zeros((1, 2)), 0.5)[0] == pytest.approx(
        jacobian_lipschitz(one.layers[0], np.zeros((1, 4)), np.zeros((1, 2)), 0.5)[0])


def test_certificate_ball_holds_the_true_root_and_refuses_far_points():
    m = dl.make_model("lstm", 5, 2, seed=3, weight_scale=2.0)
    x = np.array([0.3, -0.2])
    eq = dl.equilibrium(m, x)
    root = eq["h_eq"].values
    assert float(eq["residual"]) <= 1e-14
    system = m.form().fixed_point_map()
    c = system.c(x[None])
    # the computed root is itself a rounded point: the true root lies within r0 (≈ 1e-16) of it,
    # which at a distance of 1e-9 is more than the 1e-9 relative slack below
    ok0, r0 = system.certify(root[None], c)
    assert ok0[0] and r0[0] <= 1e-14
    rng = np.random.default_rng(0)
    for size in (1e-9, 1e-6, 1e-4):
        y = root + size * rng.standard_normal(root.size)
        ok, radius = system.certify(y[None], c)
        assert ok[0]
        dist = np.linalg.norm(y - root)
        assert dist <= radius[0] * (1 + 1e-9) + r0[0]
        assert radius[0] <= 10 * dist  # the ball is tight (r ≈ ‖J⁻¹F‖ for small h)
    ok, _ = system.certify((root + 0.5 * rng.standard_normal(root.size))[None], c)
    assert not ok[0]


def test_deep_stack_fixed_points_are_found_but_never_certified():
    m = dl.make_model("stack", 3, 2, cell="gru", layers=2, seed=0)
    fp = dl.fixed_points(m, [0.1, 0.2], n_starts=8)
    assert fp.attrs["n_roots"] >= 1 and fp["residual"].values[fp["kind"].values == 1].max() <= 1e-12
    assert fp["certified"].values.sum() == 0
    assert fp.attrs["certificate"].startswith("not certified")


# ------------------------------------------------------------------ F, ∂F, closed forms
@pytest.mark.parametrize("kw", [dict(name="gru"), dict(name="lstm"), dict(name="stack", cell="lstm", layers=2)])
def test_step_system_is_step_minus_identity_with_its_jacobian(kw):
    kw = dict(kw)
    name = kw.pop("name")
    m = dl.make_model(name, 4, 2, seed=1, **kw)
    system = m.form().fixed_point_map()
    assert system.name == "step" and system.discrete and system.D == m.state_size
    rng = np.random.default_rng(0)
    y = rng.standard_normal((3, m.state_size))
    x = rng.standard_normal((3, 2))
    c = system.c(x)
    np.testing.assert_allclose(system.F(y, c), m.step(y, x) - y, rtol=0, atol=0)
    J = system.jac(y, c)
    eps = 1e-6
    for j in range(m.state_size):
        e = np.zeros(m.state_size)
        e[j] = eps
        fd = (system.F(y + e, c) - system.F(y - e, c)) / (2 * eps)
        np.testing.assert_allclose(J[:, :, j], fd, atol=1e-8)


def test_gru_with_z_one_keeps_every_state_marginal():
    m = dl.make_model("gru", 3, 2, seed=0)
    b_ih = m.b_ih.copy()
    b_ih[3:6] = 60.0  # σ(60) = 1 in float64: z ≡ 1, h' = h
    m = m.replace(b_ih=b_ih)
    h_prev = np.random.default_rng(0).standard_normal((4, 3))
    eq = dl.equilibrium(m, np.zeros((4, 2)), h_prev)
    np.testing.assert_array_equal(eq["h_eq"].values, h_prev)
    assert eq["residual"].values.max() == 0.0
    np.testing.assert_allclose(eq["step_radius"].values, 1.0, atol=1e-15)
    assert (eq["stability"].values == 0).all()  # marginal: every step eigenvalue on the unit circle


def test_lstm_with_f_one_i_zero_keeps_c_and_its_fixed_points_solve_h():
    m = dl.make_model("lstm", 3, 2, seed=4)
    b = m.b_ih.copy()
    b[:3], b[3:6] = -60.0, 60.0  # i ≡ 0, f ≡ 1: c' = c, h' = o(h) tanh(c)
    m = m.replace(b_ih=b)
    c0 = np.array([0.4, -0.7, 1.1])
    s0 = np.concatenate([np.zeros(3), c0])
    np.testing.assert_array_equal(m.step(s0[None], np.zeros((1, 2)))[0, 3:], c0)
    eq = dl.equilibrium(m, np.zeros(2), s0)
    s = eq["h_eq"].values
    assert float(eq["residual"]) <= 1e-14
    # every c is kept, so the fixed points form a family: h = o(h) ⊙ tanh(c) for the c reached
    o = 1 / (1 + np.exp(-(m.block("W_hh", "o") @ s[:3] + m.block("b_ih", "o") + m.block("b_hh", "o"))))
    np.testing.assert_allclose(s[:3], o * np.tanh(s[3:]), atol=1e-15)
    # the c-directions are neutral: three step eigenvalues equal 1 (marginal)
    mu = dl.eigenvalues_from(eq, "eig") + 1.0
    assert np.sum(np.abs(mu - 1.0) < 1e-12) == 3 and int(eq["stability"]) == 0
    assert list(eq["part"].values) == ["h"] * 3 + ["c"] * 3


def test_one_unit_gru_fixed_points_match_scalar_roots_with_saddle_direction():
    from scipy.optimize import brentq

    m = _one_unit_gru()
    r = 1 / (1 + np.exp(-0.7))
    g = lambda h: np.tanh(0.1 + r * (3.0 * h + 0.2)) - h  # noqa: E731
    grid = np.linspace(-1.2, 1.2, 2401)
    roots = [brentq(g, a, b, xtol=1e-15) for a, b in zip(grid[:-1], grid[1:]) if g(a) * g(b) < 0]
    assert len(roots) == 3
    fp = dl.fixed_points(m, [0.0], n_starts=32)
    got = np.sort(fp["h_eq"].values[fp["kind"].values == 1, 0])
    np.testing.assert_allclose(got, np.sort(roots), atol=1e-13)
    order = np.argsort(fp["h_eq"].values[:, 0])
    assert list(fp["n_unstable"].values[order]) == [0, 1, 0]
    mid = order[1]
    assert abs(fp["unstable_vectors"].values[mid, 0, 0]) == pytest.approx(1.0)
    # μ = 1 + (1 − z)(g'(h*)), g' = r w_hn (1 − h*²) − 1 for this one-unit map
    z = 1 / (1 + np.exp(0.4))
    hs = fp["h_eq"].values[mid, 0]
    mu = 1 + (1 - z) * (r * 3.0 * (1 - np.tanh(0.1 + r * (3 * hs + 0.2)) ** 2) - 1)
    assert fp["step_eig_real"].values[mid, 0] == pytest.approx(mu, abs=1e-13)
    assert fp.attrs["n_stable"] == 2 and fp.attrs["n_saddles"] == 1


def test_fixed_points_of_a_small_gru_match_scipy_from_a_grid():
    """A GRU's true fixed points lie in the open cube (−1, 1)^D (h = n there unless z = 1); far
    out, where z rounds to 1.0 in float64, every state is a "root" of the floating-point map to
    the last bit — those are found too, and the certificate refuses every one of them."""
    from scipy.optimize import root

    m = dl.make_model("gru", 2, 1, seed=10, weight_scale=5.0)
    x = np.array([0.2])
    fp = dl.fixed_points(m, x, n_starts=64, seed=1)
    roots = fp["kind"].values == 1
    h = fp["h_eq"].values
    inside = roots & (np.abs(h).max(axis=1) < 1)
    ref = []
    for a in np.linspace(-0.99, 0.99, 12):
        for b in np.linspace(-0.99, 0.99, 12):
            v = root(lambda s: m.step(s[None], x[None])[0] - s, [a, b], tol=1e-14).x
            if np.abs(m.step(v[None], x[None])[0] - v).max() <= 1e-12 and np.abs(v).max() < 1 and \
                    all(np.linalg.norm(v - u) > 1e-6 for u in ref):
                ref.append(v)
    assert len(ref) == 3 and inside.sum() == 3
    for v in ref:
        assert np.min(np.linalg.norm(h[inside] - v, axis=1)) <= 1e-9
    assert fp["certified"].values[inside].all()
    assert not fp["certified"].values[roots & ~inside].any()
    assert sorted(fp["n_unstable"].values[inside]) == [0, 0, 1]


def test_unstable_vectors_solve_the_eigen_equation():
    m = dl.make_model("gru", 6, 3, seed=0, weight_scale=3.0)
    H = dl.simulate(m, dl.tasks.flipflop(40, 6, seed=0)[0])["h"].values
    fp = dl.fixed_points(m, np.zeros(3), n_starts=64, trajectories=H)
    roots = np.flatnonzero(fp["kind"].values == 1)
    J = m.step_jacobian(fp["h_eq"].values[roots], np.zeros((roots.size, 3)))
    seen = 0
    for i, p in enumerate(roots):
        mu = np.linalg.eigvals(J[i])
        assert int(fp["n_unstable"][p]) == int(np.sum(np.abs(mu) > 1 + 1e-9))
        for k in range(int(fp["n_unstable"][p])):
            v = fp["unstable_vectors"].values[p, k] + 1j * fp["unstable_vectors_imag"].values[p, k]
            lam = fp["unstable_eig_real"].values[p, k] + 1j * fp["unstable_eig_imag"].values[p, k]
            assert np.linalg.norm(v) == pytest.approx(1.0)
            np.testing.assert_allclose(J[i] @ v, (lam + 1.0) * v, atol=1e-10)
            seen += 1
        assert np.isnan(fp["unstable_vectors"].values[p, int(fp["n_unstable"][p]):]).all()
    assert fp["stability"].values[roots].tolist() == [1 if n == 0 else -1 for n in fp["n_unstable"].values[roots]]
    # the principal components: orthonormal axes, points and trajectories projected on them
    A = fp["pc_axes"].values
    np.testing.assert_allclose(A @ A.T, np.eye(A.shape[0]), atol=1e-12)
    np.testing.assert_allclose(fp["h_pc"].values, (fp["h_eq"].values - fp["pc_mean"].values) @ A.T, atol=1e-12)
    np.testing.assert_allclose(fp["trajectory_pc"].values, (H - fp["pc_mean"].values) @ A.T, atol=1e-12)
    assert fp.attrs["starts_from"] == "trajectories"


def test_fixed_points_trajectories_are_checked():
    m = dl.make_model("lstm", 3, 2, seed=0)
    with pytest.raises(ParameterError, match="trajectories"):
        dl.fixed_points(m, np.zeros(2), trajectories=np.zeros((2, 5, 3)))
    with pytest.raises(ParameterError, match="start_noise"):
        dl.fixed_points(m, np.zeros(2), trajectories=np.zeros((2, 5, 6)), start_noise=-1.0)


# ------------------------------------------------------------------ spectrum, continuation
@pytest.mark.parametrize("kw", [dict(name="gru"), dict(name="lstm"), dict(name="stack", cell="gru", layers=2)])
def test_spectrum_of_map_models_is_the_step_jacobians(kw):
    kw = dict(kw)
    name = kw.pop("name")
    m = dl.make_model(name, 3, 2, seed=2, **kw)
    x = dl.tasks.random_walk(steps=6, inputs=2, variance=1.0, batch=2, seed=0)
    sp = dl.spectrum(m, x)
    H = dl.simulate(m, x)["h"].values
    hprev = np.concatenate([np.zeros((2, 1, m.state_size)), H[:, :-1]], axis=1)
    J = m.step_jacobian(hprev.reshape(-1, m.state_size), x.reshape(-1, 2))
    mu = np.linalg.eigvals(J).reshape(2, 6, -1)
    got = dl.eigenvalues_from(sp, "step_eig")
    flow = dl.eigenvalues_from(sp, "eig")
    for b in range(2):
        for t in range(6):
            np.testing.assert_allclose(np.sort_complex(got[b, t]), np.sort_complex(mu[b, t]), atol=1e-12)
            np.testing.assert_allclose(np.sort_complex(flow[b, t] + 1), np.sort_complex(mu[b, t]), atol=1e-12)
    radius = np.abs(mu).max(axis=-1)
    np.testing.assert_array_equal(sp["stability"].values, np.where(radius < 1 - 1e-9, 1, np.where(radius > 1 + 1e-9,
                                                                                                    -1, 0)))


def test_continuation_of_a_one_unit_gru_finds_its_two_folds_in_closed_form():
    m = _one_unit_gru()
    r = 1 / (1 + np.exp(-0.7))
    br = dl.continuation(m, "x", -3.0, 3.0)
    # fold: r w_hn (1 − h²) = 1, h = ±√(1 − 1/(r w_hn)), x = atanh(h) − b_in − r (w_hn h + b_hn)
    hs = np.array([-1.0, 1.0]) * np.sqrt(1 - 1 / (3.0 * r))
    xs = np.arctanh(hs) - 0.1 - r * (3.0 * hs + 0.2)
    assert br.attrs["n_folds"] == 2
    np.testing.assert_allclose(np.sort(br["fold_param"].values), np.sort(xs), atol=1e-12)
    assert br["fold_refined"].values.all() and br["fold_residual"].values.max() <= 1e-12
    assert br["residual"].values.max() <= 1e-12
    # the middle branch (between the folds) is the unstable one
    lam = br["param"].values
    h = br["h_eq"].values[:, 0]
    between = (h > hs[0] + 1e-3) & (h < hs[1] - 1e-3)
    assert (br["stability"].values[between] == -1).all()
    assert (br["stability"].values[(h < hs[0] - 1e-3) | (h > hs[1] + 1e-3)] == 1).all()
    assert lam.min() <= -3.0 + 1e-9 or lam.max() >= 3.0 - 1e-9


def test_continuation_of_an_lstm_follows_the_equilibria():
    m = dl.make_model("lstm", 3, 2, seed=0)
    br = dl.continuation(m, "x1", -1.0, 1.0, x=[0.5, 0.0])
    assert br["residual"].values.max() <= 1e-12
    for i in range(0, br.sizes["arc"], max(1, br.sizes["arc"] // 5)):
        x = np.array([0.5, br["param"].values[i]])
        s = br["h_eq"].values[i]
        np.testing.assert_allclose(m.step(s[None], x[None])[0], s, atol=1e-12)
    # over one input-side gate bias b_ih[i] (PyTorch's gate order): each point a fixed point of the
    # step of the model with that bias set to λ
    br = dl.continuation(m, "b4", -1.0, 1.0, x=[0.5, 0.0], detect=False)
    assert br["residual"].values.max() <= 1e-12
    for i in range(0, br.sizes["arc"], max(1, br.sizes["arc"] // 4)):
        b_ih = m.b_ih.copy()
        b_ih[4] = br["param"].values[i]
        s = br["h_eq"].values[i]
        np.testing.assert_allclose(m.replace(b_ih=b_ih).step(s[None], np.array([[0.5, 0.0]]))[0], s, atol=1e-12)
    for bad in ("b12", "alpha"):  # an LSTM with D = 3 has 12 gate biases (0..11) and no α
        with pytest.raises(ParameterError, match="over"):
            dl.continuation(m, bad, -1.0, 1.0)


# ------------------------------------------------------------------ the flip-flop task
def test_flipflop_targets_hold_the_sign_of_each_channels_last_pulse():
    x, y = dl.tasks.flipflop(60, 50, seed=3)
    assert x.shape == y.shape == (50, 60, 3)
    assert set(np.unique(x)) <= {-1.0, 0.0, 1.0} and (x[:, 0] != 0).all()
    for b in range(50):
        for k in range(3):
            held = 0.0
            for t in range(60):
                if x[b, t, k] != 0:
                    held = x[b, t, k]
                assert y[b, t, k] == held
    big, _ = dl.tasks.flipflop(400, 200, seed=0)
    rate = np.mean(big[:, 1:] != 0)
    assert abs(rate - dl.tasks.sequences.FLIPFLOP_P) < 4 * np.sqrt(0.05 * 0.95 / big[:, 1:].size)
    task = dl.make_task("flipflop", 30, n_train=4, n_val=2, n_test=2)
    assert (task.loss, task.inputs, task.outputs, task.steps, task.baseline) == ("mse-seq", 3, 3, 30, 1.0)
    with pytest.raises(ParameterError, match="pad"):
        dl.make_task("flipflop", 30, pad=3)


# ------------------------------------------------------------------ CLI
def test_cli_equilibria_and_spectrum_take_the_map_models(tmp_path):
    from click.testing import CliRunner

    from dynlab.cli import main

    runner = CliRunner()
    res = runner.invoke(main, ["equilibria", "--model", "lstm", "--hidden", "3", "--fixed-points", "8",
                               "--data", str(tmp_path / "fp.nc")])
    assert res.exit_code == 0, res.output
    assert "unstable modes" in res.output
    ds = dl.read_dataset(tmp_path / "fp.nc")
    assert ds.sizes["unit"] == 6 and "unstable_vectors" in ds
    res = runner.invoke(main, ["spectrum", "--model", "gru", "--hidden", "3", "--steps", "5"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["equilibria", "--model", "gru", "--hidden", "2", "--continue-over", "alpha",
                               "--range", "-1,1"])
    assert res.exit_code == 2
    assert res.output.strip().startswith("Error: --continue-over:") and res.output.strip().count("\n") == 0

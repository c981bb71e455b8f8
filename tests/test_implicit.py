"""Implicit networks: the model, the equilibrium solvers against scipy and closed forms, and the
implicit derivatives against central finite differences through the solver, backprop through
unrolled iterations, the Neumann series, and the single-neuron formula (paper eq. 2, corrected)."""
from __future__ import annotations

import numpy as np
import pytest

import dynlab
import naive
from dynlab.analysis.implicit import implicit_equilibrium, implicit_jacobian, implicit_vjp, implicit_neuron, solve
from dynlab.errors import ParameterError


def _model(layers, ws=1.0, act="sigmoid", seed=0, n=4, m=3, n2=2):
    return dynlab.make_model("implicit", hidden=n, inputs=m, seed=seed, weight_scale=ws, activation=act,
                             hidden2=n2 if layers == 2 else 0)


def _X(N, m=3, seed=1):
    return np.random.default_rng(seed).standard_normal((N, m))


def _naive_residual(model, X, Z):
    """max-abs of Z − f(A Z + c), one unit at a time with math-module φ (tests/naive.py)."""
    A, _ = model.stacked()
    C = model.drive(X)
    out = []
    for z, c in zip(Z.tolist(), C.tolist()):
        out.append(max(abs(z[i] - naive.phi(model.activation, sum(A[i, j] * z[j] for j in range(len(z))) + c[i]))
                       for i in range(len(z))))
    return np.array(out)


# ----------------------------------------------------------------------------------- model
def test_model_registry_shapes_and_validation(tmp_path):
    m = dynlab.make_model("implicit", hidden=5, inputs=3, seed=0)
    assert (m.hidden, m.inputs, m.hidden2, m.layers, m.activation) == (5, 3, 0, 1, "sigmoid")
    assert "implicit" in dynlab.MODELS
    m2 = dynlab.make_model("implicit", hidden=5, inputs=3, hidden2=2, seed=0)
    assert m2.W2.shape == (2, 2) and m2.Q2.shape == (2, 5) and m2.R.shape == (5, 2) and m2.units == 7
    # paper initialisation: Q, T uniform in [-0.5, 0.5]; weight_scale 0 gives W = 0
    assert np.all(np.abs(m.Q) <= 0.5) and np.all(np.abs(m.T) <= 0.5)
    z = dynlab.make_model("implicit", hidden=5, inputs=3, hidden2=2, seed=0, weight_scale=0.0)
    assert not z.W.any() and not z.W2.any() and not z.R.any()
    with pytest.raises(ParameterError) as e:
        dynlab.Implicit(W=np.zeros((3, 3)), Q=np.zeros((4, 2)), T=np.zeros(4))
    assert e.value.param == "W"
    with pytest.raises(ParameterError) as e:
        dynlab.Implicit(W=np.zeros((4, 4)), Q=np.zeros((4, 2)), T=np.zeros(4), W2=np.zeros((2, 2)))
    assert e.value.param == "Q2"
    with pytest.raises(ParameterError) as e:
        dynlab.make_model("implicit", hidden=3, inputs=2, hidden2=-1)
    assert e.value.param == "hidden2"
    for model in (m, m2):
        back = dynlab.load_model(dynlab.save_model(model, tmp_path / "w.npz"))
        assert back.hidden2 == model.hidden2
        for k, v in model.params().items():
            np.testing.assert_array_equal(back.params()[k], v)


# ----------------------------------------------------------------------------------- solvers
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("act", ["sigmoid", "tanh"])
def test_newton_reaches_1e12_and_agrees_with_scipy_root(layers, act):
    # weight_scale 1 with sigmoid (f' ≤ 1/4) and 0.5 with tanh keep ‖D A‖₂ < 1: the equilibrium is
    # unique (a contraction), so every solver must find the same point.
    model = _model(layers, ws=1.0 if act == "sigmoid" else 0.5, act=act)
    X = _X(20)
    Z, res, its, conv, _ = solve(model, X, method="newton")
    assert conv.all() and res.max() <= 1e-12
    assert _naive_residual(model, X, Z).max() <= 1e-12  # the reported residual is the true one
    Zs, rs, _, cs, _ = solve(model, X, method="scipy")
    assert cs.all()
    # both residuals ≤ 1e-12 and ‖(I − DA)⁻¹‖ ≤ 1/(1 − ‖DA‖) < 4 here: the points agree to < 1e-11
    np.testing.assert_allclose(Z, Zs, rtol=0, atol=1e-10)
    for method in ("auto", "anderson", "fixed-point"):
        Zm, rm, _, cm, _ = solve(model, X, method=method)
        assert cm.all() and rm.max() <= 1e-12, method
        np.testing.assert_allclose(Zm, Zs, rtol=0, atol=1e-10)


def test_rk4_thirty_steps_matches_closed_form_and_reaches_1e8():
    # W = 0 (the paper's initialisation): dY/dt = f(c) − Y is linear, and RK4 with step h multiplies
    # the error by R(−h) = 1 − h + h²/2 − h³/6 + h⁴/24 per step: Y_K = f(c)(1 − R(−h)^K) exactly.
    model = _model(1, ws=0.0)
    X = _X(10)
    for dt in (0.5, 1.0):
        Z = solve(model, X, method="rk4", steps=30, dt=dt)[0]
        Rh = 1 - dt + dt ** 2 / 2 - dt ** 3 / 6 + dt ** 4 / 24
        fc = 1 / (1 + np.exp(-model.drive(X)))
        np.testing.assert_allclose(Z, fc * (1 - Rh ** 30), rtol=1e-13, atol=1e-15)
    # small weights (paper settings, weight_scale 0.3): residual ≈ 1e-8 or better after 30 steps
    for layers in (1, 2):
        model = _model(layers, ws=0.3)
        _, res, _, _, _ = solve(model, X, method="rk4")
        assert res.max() <= 1e-8


@pytest.fixture(params=["numba-loop", "numpy-batched"])
def auto_path(request, monkeypatch):
    """Run a test on both forms of method="auto": the jitted per-point loop and the batched NumPy form."""
    import dynlab.config

    monkeypatch.setattr(dynlab.config, "IMPLICIT_NUMBA_MAX_UNITS", 1 << 30 if request.param == "numba-loop" else 0)
    return request.param


def test_auto_paths_agree_with_newton(auto_path):
    for layers in (1, 2):
        model = _model(layers, ws=2.0)
        X = _X(30)
        Zn = solve(model, X, method="newton")[0]
        Z, res, _, conv, _ = solve(model, X, method="auto")
        assert conv.all() and res.max() <= 1e-12
        assert _naive_residual(model, X, Z).max() <= 1e-12
        np.testing.assert_allclose(Z, Zn, rtol=0, atol=1e-10)


def test_auto_handles_maps_that_do_not_contract(auto_path):
    # large recurrent weights: Picard stalls or cycles for some inputs, several equilibria exist;
    # auto must still return true fixed points (residual checked independently) that are stable
    # for the flow dZ/dt = f(AZ + c) − Z (the RK4 flow from 0 selects them): Re λ(DA) < 1.
    model = _model(1, ws=8.0, n=8, seed=0)
    X = _X(60, seed=0)
    Z, res, its, conv, code = solve(model, X, method="auto")
    assert conv.all()
    assert _naive_residual(model, X, Z).max() <= 1e-12
    assert (code == 3).any()  # Newton was needed (the numba loop hands over after ≤ 10 Picard steps)
    A, _ = model.stacked()
    for z, c in zip(Z, model.drive(X)):
        s = 1 / (1 + np.exp(-(A @ z + c)))
        assert np.linalg.eigvals((s * (1 - s))[:, None] * A).real.max() < 1


def test_divergent_or_unconverged_points_are_reported_not_hidden():
    model = _model(1, ws=12.0, n=8, seed=1)
    X = _X(60, seed=0)
    Z, res, its, conv, _ = solve(model, X, method="fixed-point", max_iter=30)
    assert not conv.all()
    assert np.all(np.isfinite(res)) and np.all(res[~conv] > 1e-12) and np.all(its[~conv] == 30)


def test_equilibrium_dataset_contract_and_round_trip(tmp_path):
    model = _model(2)
    X = _X(5)
    ds = implicit_equilibrium(model, X)
    for v in ("h_eq", "Y", "residual", "iterations", "converged", "solver", "x", "W", "Q", "T", "R", "W2"):
        assert v in ds and "long_name" in ds[v].attrs and "units" in ds[v].attrs, v
    assert ds.h_eq.dims == ("batch", "unit_z") and ds.Y.shape == (5, 2)
    np.testing.assert_array_equal(ds.Y.values, ds.h_eq.values[:, 4:])
    assert list(ds.layer.values) == [1, 1, 1, 1, 2, 2]
    for a in ("model", "seed", "backend", "dynlab_version", "command", "activation"):
        assert a in ds.attrs
    path = dynlab.write_dataset(ds, tmp_path / "eq.nc")
    back = dynlab.read_dataset(path)
    m2 = dynlab.model_from_dataset(back)
    for k, v in model.params().items():
        np.testing.assert_array_equal(m2.params()[k], v)
    one = implicit_equilibrium(model, X[0])
    assert one.h_eq.dims == ("unit_z",)
    np.testing.assert_allclose(one.h_eq.values, ds.h_eq.values[0], atol=1e-13)


def test_errors_name_the_parameter():
    model = _model(1)
    for kwargs, param in (({"method": "bisect"}, "method"), ({"tol": -1.0}, "tol")):
        with pytest.raises(ParameterError) as e:
            implicit_equilibrium(model, _X(2), **kwargs)
        assert e.value.param == param
    with pytest.raises(ParameterError) as e:
        implicit_equilibrium(model, np.zeros((2, 5)))
    assert e.value.param == "X"
    with pytest.raises(ParameterError) as e:
        implicit_equilibrium(dynlab.make_model("rnn", 2, 1), np.zeros(1))
    assert e.value.param == "model"
    with pytest.raises(ParameterError) as e:
        implicit_vjp(model, _X(2), np.zeros((2, 4)), np.zeros((2, 4)), gradient="half")
    assert e.value.param == "gradient"


# ----------------------------------------------------------------------------------- derivatives
def _loss_fd(model, X, weights, eps=1e-6):
    """Central differences of L(θ) = Σ_n weights_n · Z_n(θ) through the Newton solver (tol ~1e-16)."""
    out = {}
    for name, p in model.params().items():
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            vals = []
            for s in (+1, -1):
                q = np.array(p)
                q[idx] += s * eps
                Z = solve(model.replace(**{name: q}), X, method="newton", tol=1e-15)[0]
                vals.append(np.sum(weights * Z))
            g[idx] = (vals[0] - vals[1]) / (2 * eps)
        out[name] = g
    return out


@pytest.mark.parametrize("layers", [1, 2])
def test_exact_implicit_gradient_equals_finite_differences(layers):
    # central differences with ε = 1e-6 on a smooth map: truncation ~ε² ≈ 1e-12 relative, rounding
    # ~1e-16/ε ≈ 1e-10 relative; asked: 1e-7 relative to the largest gradient entry.
    model = _model(layers, ws=1.5, n=3, m=2, n2=2)
    X = _X(3, m=2)
    Z = solve(model, X, method="newton")[0]
    weights = np.random.default_rng(5).standard_normal(Z.shape)
    got = implicit_vjp(model, X, Z, weights)
    fd = _loss_fd(model, X, weights)
    assert set(got) == set(fd) == set(model.params())
    scale = max(np.abs(v).max() for v in fd.values())
    for k in fd:
        assert np.abs(got[k] - fd[k]).max() <= 1e-7 * scale, k


@pytest.mark.parametrize("layers", [1, 2])
def test_paper_forward_form_eqs_4_to_6(layers):
    # J_θ = (I − f'⊙W)⁻¹ f'⊙δ_θ (the paper's printed forward form, read with (f'⊙W)_ij = f'_i W_ij)
    # contracted with δ_Z equals the reverse form, and J_T matches finite differences of Z.
    model = _model(layers, ws=1.5, n=3, m=2)
    x = _X(1, m=2)[0]
    Z = solve(model, x[None], method="newton")[0]
    J = implicit_jacobian(model, x, Z)
    delta = np.random.default_rng(2).standard_normal(model.units)
    rev = implicit_vjp(model, x[None], Z, delta[None])
    for k in J:
        np.testing.assert_allclose(np.tensordot(delta, J[k], axes=1), rev[k], rtol=1e-12, atol=1e-14)
    eps = 1e-6
    for j in range(model.hidden):
        T = np.array(model.T)
        T[j] += eps
        zp = solve(model.replace(T=T), x[None], method="newton", tol=1e-15)[0][0]
        T[j] -= 2 * eps
        zm = solve(model.replace(T=T), x[None], method="newton", tol=1e-15)[0][0]
        np.testing.assert_allclose((zp - zm) / (2 * eps), J["T"][:, j], atol=1e-8)


@pytest.mark.parametrize("layers", [1, 2])
def test_semi_gradient_is_the_gradient_of_one_frozen_pass(layers):
    # semi-gradient: the recurrent inputs (W Y1, R Y2, W2 Y2) are constants at the equilibrium Z*,
    # the feed-forward path Q2 Y1 is kept.  Finite differences of that frozen pass must match.
    model = _model(layers, ws=1.5, n=3, m=2)
    X = _X(3, m=2)
    Zs = solve(model, X, method="newton")[0]
    w = np.random.default_rng(7).standard_normal(Zs.shape)
    n = model.hidden
    sig = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731

    def frozen(mm):
        y1 = sig(Zs[:, :n] @ mm.W.T + X @ mm.Q.T + mm.T + (Zs[:, n:] @ mm.R.T if layers == 2 else 0))
        if layers == 1:
            return np.sum(w * y1)
        y2 = sig(Zs[:, n:] @ mm.W2.T + y1 @ mm.Q2.T + mm.T2)
        return np.sum(w * np.concatenate([y1, y2], axis=1))

    got = implicit_vjp(model, X, Zs, w, gradient="semi")
    eps = 1e-6
    for name, p in model.params().items():
        for idx in np.ndindex(p.shape):
            q = np.array(p)
            q[idx] += eps
            up = frozen(model.replace(**{name: q}))
            q[idx] -= 2 * eps
            dn = frozen(model.replace(**{name: q}))
            assert abs(got[name][idx] - (up - dn) / (2 * eps)) <= 1e-8, (name, idx)
    if layers == 1:  # one layer: J_W ≈ (D δ) Yᵀ, exactly the brief's formula
        D = sig(Zs @ model.W.T + model.drive(X)) * (1 - sig(Zs @ model.W.T + model.drive(X)))
        np.testing.assert_allclose(got["W"], (D * w).T @ Zs, rtol=1e-13)


@pytest.mark.parametrize("layers", [1, 2])
def test_implicit_gradient_equals_backprop_through_unrolled_iterations(layers):
    # Picard from 0 contracts here (‖DA‖₂ ≤ ‖A‖₂/4 < 0.5), so after K = 150 iterations both the state
    # and the unrolled gradient are within ~0.5^150 of their limits: agreement to 1e-12.
    model = _model(layers, ws=1.0, n=3, m=2)
    A, _ = model.stacked()
    assert np.linalg.norm(A, 2) / 4 < 0.5
    x = _X(1, m=2)[0]
    w = np.random.default_rng(3).standard_normal(model.units)
    zK, g = naive.implicit_unrolled_grads(model, x, w, K=150)
    Z = solve(model, x[None], method="newton")[0]
    np.testing.assert_allclose(zK, Z[0], atol=1e-13)
    got = implicit_vjp(model, x[None], Z, w[None])
    for k in got:
        np.testing.assert_allclose(got[k], np.array(g[k]), rtol=0, atol=1e-12)


def test_neumann_series_equals_the_inverse():
    # Σ_{k=0}^{K} (DW)^k → (I − DW)⁻¹ when ρ(DW) < 1; the tail after K terms is ≤ ‖DW‖^{K+1}/(1 − ‖DW‖).
    model = _model(1, ws=1.5, n=6)
    x = _X(1)
    Z = solve(model, x, method="newton")[0]
    A, _ = model.stacked()
    s = 1 / (1 + np.exp(-(Z[0] @ A.T + model.drive(x)[0])))
    DW = (s * (1 - s))[:, None] * A
    q = np.linalg.norm(DW, 2)
    assert q < 1
    K = int(np.ceil(np.log(1e-15 * (1 - q)) / np.log(q)))
    S, P = np.zeros_like(DW), np.eye(6)
    for _ in range(K + 1):
        S += P
        P = P @ DW
    inv = np.linalg.solve(np.eye(6) - DW, np.eye(6))
    np.testing.assert_allclose(S, inv, atol=1e-13)


def test_single_neuron_eq2_with_fprime_in_numerator_matches_numerical_derivative():
    # eq. 2 corrected: dy/dw = f'(x̃) y / (1 − w f'(x̃)), x̃ = w y + q x + t.  Numerical: central
    # differences (ε = 1e-6) of y solved to 1e-14: error ≲ 1e-8 relative.  Eq. 2 as printed has
    # f'(X) in the numerator (the tilde is missing): it is the corrected form times f'(x)/f'(x̃),
    # so it is off wherever the external input x and the total input x̃ differ in |·|.
    q, x, t = 1.0, 0.7, -0.3
    sp = lambda z: 1 / (1 + np.exp(-z)) * (1 - 1 / (1 + np.exp(-z)))  # noqa: E731
    worst = 0.0
    for w in np.linspace(-6.0, 3.5, 15):
        y, dy = implicit_neuron(w, q, x, t)
        yp, _ = implicit_neuron(w + 1e-6, q, x, t)
        ym, _ = implicit_neuron(w - 1e-6, q, x, t)
        num = (yp - ym) / 2e-6
        assert abs(dy - num) <= 1e-7 * abs(num), w
        xt = w * y + q * x + t
        printed = sp(x) * y / (1 - w * sp(xt))
        assert printed == pytest.approx(dy * sp(x) / sp(xt), rel=1e-12)
        worst = max(worst, abs(printed - num) / abs(num))
    assert worst > 0.1  # the printed form fails the agreement the paper's Fig. 1 shows


def test_auto_escapes_the_ghost_of_a_vanished_equilibrium(auto_path):
    # Met while training on the oscillator: past a fold the flow from 0 lingers for ~10³ time units
    # near where a stable equilibrium vanished; 30 RK4 steps + Newton stall at a local minimum of
    # ‖G‖ (≈ 5e-5).  The unique remaining root (found by a 3000-step flow, below) must be returned.
    A = np.array([[0.625914, -1.751079, 0.406597, -0.528683, -2.06617, -0.339718, 0.380868],
                  [-0.197165, -1.63198, -0.573296, 0.65622, -1.465882, -1.525559, -0.835975],
                  [0.29869, -1.632472, 0.262144, -0.738072, -1.849351, -0.653352, 0.051099],
                  [-0.859763, 3.109952, -0.475294, 1.646856, 0.995789, 1.43126, -1.589252],
                  [-1.951311, -2.85142, -2.482737, -0.170318, 1.351058, -0.732786, -0.242391],
                  [-0.131802, 1.604819, -1.362708, 0.218602, -1.766787, 1.3286, -0.539943],
                  [1.315985, -0.889362, 0.89047, -1.543558, 0.134053, -0.690432, 0.598612]])
    c = np.array([[0.130712, -0.817372, -0.604498, -0.709749, 0.435328, 0.029959, 0.360786]])
    from dynlab.analysis.implicit import solve_stacked
    from dynlab.backends.reference.implicit import solve_rk4
    long_flow = solve_rk4(A, c, "sigmoid", steps=3000, dt=1.0)
    assert np.abs(solve_rk4(A, c, "sigmoid", steps=300) - long_flow).max() > 1e-3  # still lingering at t=300
    Z, res, _, conv, _ = solve_stacked(A, c, "sigmoid")
    assert conv.all() and res.max() <= 1e-12
    np.testing.assert_allclose(Z, long_flow, atol=1e-10)

"""Closed-form one-step Jacobians (dynlab.analysis.jacobians) against independent references.

* Central finite differences of the actual one-step map (``run_states`` of one step from
  h_{t-1}, numpy backend) for every model × activation × backend.  Step ε = 1e-5 on states
  and inputs of order one: the truncation error is ε²/6·|f'''| ≈ 2e-11 and the rounding
  error ≈ 1e-16·|h|/ε ≈ 1e-11, so a correct Jacobian matches to ~1e-10, four orders inside
  the 1e-6 asserted.  For the scipy-integrated CTRNN the map also carries the solver's
  non-smooth error (≲ rtol·|h| = 1e-12 here, /ε → 1e-7), still inside 1e-6.  Points whose
  pre-activations come within 1e-3 of a kink (relu, leaky-relu, abs) are redrawn: ε moves
  z by ~1e-5, so no difference quotient straddles a kink.
* numba against numpy to 1e-12 (both evaluate the same formulas; they differ only in
  summation order, ≈ 1e-16 per operation).
* Closed forms: the linear iRNN (φ = identity) gives J = (p + σ)A^K − σI exactly
  (A = I + η(U − αI), p = 1 for g0 = "previous"); its K → ∞ limit −σI for ‖U‖₂ < α; the
  linear CTRNN flow is expm((U − αI)Δt/τ).
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from scipy.linalg import expm

import battery
import dynlab
import dynlab.config
import naive
from conftest import ACTIVATIONS, D_HIDDEN, D_IN
from dynlab.analysis.jacobians import flow_jacobian, jacobian_at, jacobian_path, jacobians
from dynlab.errors import ParameterError
from dynlab.simulation import run_states

FD_EPS = 1e-5
FD_RTOL = 1e-6
KINKED = ("relu", "leaky-relu", "abs")
KINK_MARGIN = 1e-3
ETA_ROWS = 6  # rows (time steps) of the per-(time, k) η table


#: The battery's cases with closed-form step Jacobians (tests/battery.py): the one-line cells, the
#: iRNN, the CTRNN on fixed steps and by scipy; ``build(activation)`` at D_HIDDEN × D_IN with a
#: per-(time, k) η table of ETA_ROWS rows.  Beside them, scipy's implicit Radau (the CTRNN's
#: one-point-at-a-time variational path).
CASES = {name: (lambda act, name=name: battery.build(name, D_HIDDEN, D_IN, ETA_ROWS, activation=act))
         for name in battery.names("cell", "irnn", "ctrnn", "ctrnn-scipy", exclude=("irnn-K1-identity",))}
CASES["ctrnn-Radau"] = lambda act: battery.build("ctrnn-DOP853", D_HIDDEN, D_IN, activation=act, method="Radau")


# ------------------------------------------------------------------------------ helpers
def one_step(model, x, h, t=0):
    """h_t from (x_t, h_{t-1}) by the simulator itself (numpy backend); x (d,), h (D,)."""
    if isinstance(model, dynlab.IRNN) and np.ndim(model.eta) == 2:
        model = model.replace(eta=np.asarray(model.eta)[t])  # the (K,) row of time t
    H, bad, _ = run_states(model, x[None, None, :].copy(), h[None, :].copy(), "numpy")
    assert bad[0] == 1
    return H[0, 0]


def fd_jacobians(model, x, h, t=0, eps=FD_EPS):
    """Central differences (f(v + εe_j) − f(v − εe_j)) / 2ε of the one-step map, per column."""
    D, d = h.size, x.size
    J, Jx = np.empty((D, D)), np.empty((D, d))
    for j in range(D):
        e = np.zeros(D)
        e[j] = eps
        J[:, j] = (one_step(model, x, h + e, t) - one_step(model, x, h - e, t)) / (2 * eps)
    for j in range(d):
        e = np.zeros(d)
        e[j] = eps
        Jx[:, j] = (one_step(model, x + e, h, t) - one_step(model, x - e, h, t)) / (2 * eps)
    return J, Jx


def smooth_point(model, t, rng):
    """A draw (x, h) with every pre-activation ≥ KINK_MARGIN from a kink of φ (and, for the
    scipy CTRNN, of constant sign along the sampled trajectory)."""
    for _ in range(500):
        x = 0.8 * rng.standard_normal(model.inputs)
        h = 0.6 * rng.standard_normal(model.hidden)
        if model.activation not in KINKED:
            return x, h
        Z = np.array(naive.step_preactivations(model, x, h, t))
        if np.abs(Z).min() >= KINK_MARGIN and np.all(np.abs(np.sign(Z).sum(axis=0)) == Z.shape[0]):
            return x, h
    raise AssertionError("no draw away from the kinks")


def rel_err(A, B):
    """max |A − B| / max |B| (B the reference; exact zero when both vanish)."""
    scale = np.abs(B).max()
    return np.abs(A - B).max() / scale if scale > 0 else np.abs(A).max()


# ------------------------------------------------------------------------------ finite differences
# Radau (the implicit, one-point-at-a-time variational path) at rtol 1e-12 costs ~5 s a case;
# DOP853 covers the scipy CTRNN for every activation, Radau runs a smooth and a kinked one.
FD_PARAMS = [(c, a) for c in CASES for a in ACTIVATIONS if c != "ctrnn-Radau" or a in ("tanh", "abs")]


@pytest.mark.parametrize("case,act", FD_PARAMS)
def test_matches_finite_differences(case, act):
    model = CASES[case](act)
    rng = np.random.default_rng(zlib.crc32(f"{case}/{act}".encode()))
    N = 3
    t = rng.integers(0, ETA_ROWS, N)
    pts = [smooth_point(model, int(t[n]), rng) for n in range(N)]
    X = np.array([p[0] for p in pts])
    Hp = np.array([p[1] for p in pts])
    ref = [fd_jacobians(model, X[n], Hp[n], int(t[n])) for n in range(N)]
    Jfd = np.array([r[0] for r in ref])
    Jxfd = np.array([r[1] for r in ref])
    assert np.abs(Jfd).max() > 1e-3  # the comparison is not between two zeros
    for backend in ("numpy", "numba"):
        J, Jx = jacobian_at(model, X, Hp, backend=backend, inputs=True, t=t)
        assert J.shape == (N, D_HIDDEN, D_HIDDEN) and Jx.shape == (N, D_HIDDEN, D_IN)
        assert rel_err(J, Jfd) <= FD_RTOL, (backend, rel_err(J, Jfd))
        assert rel_err(Jx, Jxfd) <= FD_RTOL, (backend, rel_err(Jx, Jxfd))


# ------------------------------------------------------------------------------ backends
@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("case", [c for c in CASES if c not in ("ctrnn-DOP853", "ctrnn-Radau")])
def test_numba_matches_numpy(case, act):
    model = CASES[case](act)
    rng = np.random.default_rng(7)
    N = 40
    X, Hp = rng.standard_normal((N, D_IN)), 0.8 * rng.standard_normal((N, D_HIDDEN))
    t = rng.integers(0, ETA_ROWS, N)
    assert jacobian_path(model, N, "numba") == "loops"
    J0, Jx0 = jacobian_at(model, X, Hp, backend="numpy", inputs=True, t=t)
    J1, Jx1 = jacobian_at(model, X, Hp, backend="numba", inputs=True, t=t)
    assert np.abs(J1 - J0).max() <= 1e-12 * max(1.0, np.abs(J0).max())
    assert np.abs(Jx1 - Jx0).max() <= 1e-12 * max(1.0, np.abs(Jx0).max())
    # without the input Jacobian the kernel runs with zero input columns: same J
    J2 = jacobian_at(model, X, Hp, backend="numba", t=t)
    np.testing.assert_array_equal(J2, J1)


@pytest.mark.parametrize("case", ["rnn", "irnn-K5-previous-minus", "irnn-K5-zero-plus", "irnn-K5-etaK",
                                  "irnn-K5-etaTK", "irnn-K5-lowrank1", "ctrnn-rk4"])
def test_numba_large_work_takes_the_numpy_form(case, monkeypatch):
    model = CASES[case]("tanh")
    for name in ("JACOBIAN_VECTORISE_MIN_HIDDEN", "JACOBIAN_IRNN_BLAS_MIN_HIDDEN"):
        monkeypatch.setattr(dynlab.config, name, 1)
    monkeypatch.setattr(dynlab.config, "VECTORISE_MIN_WORK", 0)
    monkeypatch.setattr(dynlab.config, "JACOBIAN_IRNN_CHUNK", 2)   # several chunks, a short last one
    rng = np.random.default_rng(8)
    X, Hp = rng.standard_normal((5, D_IN)), rng.standard_normal((5, D_HIDDEN))
    assert jacobian_path(model, 5, "numba") == "batched"
    t = np.arange(5)  # time indices (used by the per-time η table only)
    Jv, Jxv = jacobian_at(model, X, Hp, backend="numba", inputs=True, t=t)
    for name in ("JACOBIAN_VECTORISE_MIN_HIDDEN", "JACOBIAN_IRNN_BLAS_MIN_HIDDEN"):
        monkeypatch.setattr(dynlab.config, name, 1 << 30)
    assert jacobian_path(model, 5, "numba") == "loops"
    Jl, Jxl = jacobian_at(model, X, Hp, backend="numba", inputs=True, t=t)
    assert np.abs(Jv - Jl).max() <= 1e-12 and np.abs(Jxv - Jxl).max() <= 1e-12


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("case", ["irnn-K5-previous-minus", "irnn-K5-zero-plus", "irnn-K5-etaTK", "irnn-K1-zero-plus"])
def test_the_jitted_irnn_jacobians_equal_the_per_point_loops(case, activation, monkeypatch):
    """J alone on the numba backend's vectorised path (issue 20: one numba call per block of
    points, ``jac_numba.irnn_jacobians``, blocks of 2 points on 3 threads) against the per-point
    loops, 1e-12 (the same products, summed in BLAS's order)."""
    model = CASES[case](activation)
    monkeypatch.setattr(dynlab.config, "VECTORISE_MIN_WORK", 0)
    monkeypatch.setattr(dynlab.config, "JACOBIAN_IRNN_CHUNK", 2)
    monkeypatch.setattr(dynlab.config, "JACOBIAN_THREADS", 3)
    monkeypatch.setattr(dynlab.config, "JACOBIAN_MIN_POINTS_PER_THREAD", 1)
    rng = np.random.default_rng(3)
    X, Hp = rng.standard_normal((7, D_IN)), rng.standard_normal((7, D_HIDDEN))
    eta = np.asarray(model.eta)
    t = np.arange(7) % (eta.shape[0] if eta.ndim == 2 else 7)     # rows of a per-time η table
    for name in ("JACOBIAN_VECTORISE_MIN_HIDDEN", "JACOBIAN_IRNN_BLAS_MIN_HIDDEN"):
        monkeypatch.setattr(dynlab.config, name, 1)
    assert jacobian_path(model, 7, "numba") == "batched"
    Jv = jacobian_at(model, X, Hp, backend="numba", t=t)
    for name in ("JACOBIAN_VECTORISE_MIN_HIDDEN", "JACOBIAN_IRNN_BLAS_MIN_HIDDEN"):
        monkeypatch.setattr(dynlab.config, name, 1 << 30)
    Jl = jacobian_at(model, X, Hp, backend="numba", t=t)
    Jn = jacobian_at(model, X, Hp, backend="numpy", t=t)
    scale = max(1.0, float(np.abs(Jl).max()))
    assert np.abs(Jv - Jl).max() <= 1e-12 * scale and np.abs(Jn - Jl).max() <= 1e-12 * scale


# ------------------------------------------------------------------------------ closed forms
def _linear_irnn(K, g0, sign, eta, scale=0.9):
    return dynlab.make_model("irnn", D_HIDDEN, D_IN, seed=9, weight_scale=scale, activation="identity",
                             K=K, g0=g0, sign=sign, eta=eta, alpha=1.0)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("g0", ["zero", "previous"])
@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("K", [1, 3, 7])
def test_irnn_linear_closed_form(K, g0, sign, backend):
    """φ = identity: s_k = A_k s_{k-1} + η_k c, s_0 = (p + σ)h, h_m = s_K − σh, so
    J = (p + σ) A_K⋯A_1 − σI and Jx = Σ_k A_K⋯A_{k+1} η_k W, A_k = I + η_k(U − αI)."""
    eta = np.linspace(0.2, 0.8, K)
    m = _linear_irnn(K, g0, sign, eta)
    I = np.eye(D_HIDDEN)
    A = [I + e * (m.U - m.alpha * I) for e in eta]
    P = I.copy()
    for Ak in A:
        P = Ak @ P
    p = 1.0 if g0 == "previous" else 0.0
    J_exact = (p + sign) * P - sign * I
    Jx_exact = np.zeros((D_HIDDEN, D_IN))
    for k in range(K):
        tail = I.copy()
        for Aj in A[k + 1:]:
            tail = Aj @ tail
        Jx_exact += eta[k] * tail @ m.W
    rng = np.random.default_rng(1)
    X, Hp = rng.standard_normal((4, D_IN)), rng.standard_normal((4, D_HIDDEN))
    J, Jx = jacobian_at(m, X, Hp, backend=backend, inputs=True)
    for n in range(4):  # linear: the same Jacobian at every point
        assert np.abs(J[n] - J_exact).max() <= 1e-12
        assert np.abs(Jx[n] - Jx_exact).max() <= 1e-12


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_irnn_identity_case_minus_I_plus_A_power_K(backend):
    """The brief's form: φ = identity, g0 = 0, σ = +1, constant η: J = −I + A^K."""
    K, eta = 6, 0.4
    m = _linear_irnn(K, "zero", 1, eta)
    A = np.eye(D_HIDDEN) + eta * (m.U - m.alpha * np.eye(D_HIDDEN))
    J = jacobian_at(m, np.ones((1, D_IN)), np.ones((1, D_HIDDEN)), backend=backend)[0]
    assert np.abs(J - (-np.eye(D_HIDDEN) + np.linalg.matrix_power(A, K))).max() <= 1e-12


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("g0", ["zero", "previous"])
@pytest.mark.parametrize("sign", [1, -1])
def test_irnn_identity_gradient_limit(sign, g0, backend):
    """‖U‖₂ = 0.5 < α = 1, tanh (1-Lipschitz): the inner map contracts with ρ = 1 − ηα + η‖U‖₂
    = 0.75, so s_K → s*(x) independent of h_{m-1} and J = ∂(s_K − σh)/∂h → −σI, within
    ~ρ^K·‖∂s_0/∂h‖ ≈ 1e-25 at K = 200 (asserted 1e-10).  At K = 1 it is far from −σI, except
    for g0 = "previous", σ = −1, where s_0 = 0 and J = I exactly for every K."""
    m = dynlab.make_model("irnn", D_HIDDEN, D_IN, seed=10, activation="tanh", K=200, eta=0.5, alpha=1.0,
                          g0=g0, sign=sign)
    m = m.replace(U=m.U * (0.5 / np.linalg.norm(m.U, 2)))
    rng = np.random.default_rng(2)
    X, Hp = rng.standard_normal((5, D_IN)), rng.standard_normal((5, D_HIDDEN))
    target = -sign * np.eye(D_HIDDEN)
    J, Jx = jacobian_at(m, X, Hp, backend=backend, inputs=True)
    assert np.abs(J - target).max() <= 1e-10
    # ∂h_m/∂x = ∂s*/∂x = (αI − diag(φ') U)⁻¹ diag(φ') W at the equilibrium (implicit function theorem)
    s_star = one_step(m, X[0], Hp[0]) + sign * Hp[0]
    z = m.U @ s_star + m.W @ X[0] + m.b
    dp = 1.0 - np.tanh(z) ** 2
    Jx_ift = np.linalg.solve(m.alpha * np.eye(D_HIDDEN) - dp[:, None] * m.U, dp[:, None] * m.W)
    assert np.abs(Jx[0] - Jx_ift).max() <= 1e-10
    J1 = jacobian_at(m.replace(K=1), X, Hp, backend=backend)
    if g0 == "previous" and sign == -1:
        # s_0 = g_0 − h = 0: the inner iterates never see h, so J = +I exactly, for every K
        assert np.abs(J1 - target).max() == 0.0
    else:
        assert np.abs(J1 - target).max() > 0.1


def test_ctrnn_linear_flow_is_matrix_exponential():
    """φ = identity: τ ġ = (U − αI) g + c, so Φ(Δ) = expm((U − αI)Δ/τ) for any interval Δ, and
    Φx = ∫₀^Δ expm((U − αI)s/τ) ds W/τ = (U − αI)⁻¹(Φ − I) W.  Tolerance: rtol 1e-10 of the
    integration, ×10."""
    m = dynlab.make_model("ctrnn", D_HIDDEN, D_IN, seed=12, activation="identity", tau=2.0, alpha=1.5,
                          method="DOP853", rtol=1e-11, atol=1e-13)
    L = m.U - m.alpha * np.eye(D_HIDDEN)
    rng = np.random.default_rng(3)
    X, G = rng.standard_normal((3, D_IN)), rng.standard_normal((3, D_HIDDEN))
    for interval in (0.1, 0.7, 2.5):
        Phi, Phix = flow_jacobian(m, X, G, interval, inputs=True)
        E = expm(L * interval / m.tau)
        assert np.abs(Phi - E).max() <= 1e-9 * np.abs(E).max()
        Ex = np.linalg.solve(L, (E - np.eye(D_HIDDEN)) @ m.W)
        assert np.abs(Phix - Ex).max() <= 1e-9 * np.abs(Ex).max()


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_rk4_jacobian_converges_to_flow_jacobian(backend):
    """The derivative of RK4 with n substeps approaches the flow's as O(h⁴): at n = 40
    (h = 7.5e-3) the difference is ~1e-10 relative; asserted 1e-8."""
    m = dynlab.make_model("ctrnn", D_HIDDEN, D_IN, seed=13, activation="tanh", dt=0.3, substeps=40,
                          method="rk4", rtol=1e-12, atol=1e-14)
    rng = np.random.default_rng(4)
    X, Hp = rng.standard_normal((3, D_IN)), rng.standard_normal((3, D_HIDDEN))
    J, Jx = jacobian_at(m, X, Hp, backend=backend, inputs=True)
    F, Fx = flow_jacobian(m, X, Hp, m.dt, inputs=True)
    assert rel_err(J, F) <= 1e-8 and rel_err(Jx, Fx) <= 1e-8
    J1 = jacobian_at(m.replace(substeps=1, method="euler"), X, Hp, backend=backend)
    assert rel_err(J1, F) > 1e-4  # one Euler step is visibly different


# ------------------------------------------------------------------------------ the Dataset
@pytest.mark.parametrize("batched", [False, True])
def test_jacobians_dataset(batched, tmp_path):
    m = CASES["irnn-K5-etaTK"]("tanh")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, ETA_ROWS, D_IN) if batched else (ETA_ROWS, D_IN))
    h0 = rng.standard_normal((2, D_HIDDEN) if batched else D_HIDDEN)
    ds = jacobians(m, x, h0, backend="numba", command="test")
    lead = ("batch",) if batched else ()
    assert ds.jac.dims == lead + ("time", "unit", "unit_from")
    assert ds.jac_x.dims == lead + ("time", "unit", "unit_in")
    assert ds.h.dims == lead + ("time", "unit")
    for name in ("h", "x", "h0", "U", "W", "b", "eta", "alpha"):
        assert name in ds.variables
    for name, var in ds.data_vars.items():
        assert var.attrs.get("long_name") and var.attrs.get("units"), name
    assert ds.attrs["model"] == "irnn" and ds.attrs["command"] == "test" and ds.attrs["K"] == 5
    assert ds.attrs["backend"] == "numba" and "dynlab_version" in ds.attrs
    # every J_t is the one at (x_t, h_{t-1}) of the simulated path, with η of row t
    xb = x if batched else x[None]
    hb = ds.h.values if batched else ds.h.values[None]
    h0b = np.broadcast_to(h0, (xb.shape[0], D_HIDDEN))
    jb = ds.jac.values if batched else ds.jac.values[None]
    for bi in range(xb.shape[0]):
        for t in range(ETA_ROWS):
            hp = h0b[bi] if t == 0 else hb[bi, t - 1]
            mt = m.replace(eta=np.asarray(m.eta)[t])
            np.testing.assert_allclose(hb[bi, t], one_step(m, xb[bi, t], hp, t), rtol=0, atol=1e-14)
            Jt = jacobian_at(mt, xb[bi, t][None], hp[None], backend="numpy")[0]
            assert np.abs(jb[bi, t] - Jt).max() <= 1e-12
    path = dynlab.write_dataset(ds, tmp_path / "jac.nc")
    back = dynlab.read_dataset(path)
    for name in ("jac", "jac_x", "h", "x", "h0", "U", "eta"):
        np.testing.assert_array_equal(back[name].values, ds[name].values)
        assert back[name].dims == ds[name].dims
        assert back[name].attrs["long_name"] == ds[name].attrs["long_name"]
    assert back.attrs["model"] == "irnn" and back.attrs["jacobian_kernel"] == ds.attrs["jacobian_kernel"]
    assert dynlab.io.model_from_dataset(back).K == 5


def test_jacobians_without_inputs_and_ctrnn_scipy():
    m = CASES["ctrnn-DOP853"]("tanh")
    x = np.random.default_rng(6).standard_normal((4, D_IN))
    ds = jacobians(m, x, inputs=False)
    assert "jac_x" not in ds and ds.jac.shape == (4, D_HIDDEN, D_HIDDEN)
    assert ds.attrs["jacobian_kernel"] == "scipy" and ds.attrs["backend"] == "scipy"
    hp = np.vstack([np.zeros(D_HIDDEN), ds.h.values[:-1]])
    assert rel_err(ds.jac.values, flow_jacobian(m, x, hp, m.dt)) <= 1e-12


def test_jacobians_reports_divergence():
    """h_2 = 1e200·h_1 overflows: DivergenceError names step 2 and keeps h_1."""
    m = dynlab.make_model("rnn", 2, 1, seed=0, activation="identity")
    m = m.replace(U=1e200 * np.eye(2), b=np.zeros(2))
    with pytest.raises(dynlab.DivergenceError) as excinfo:
        jacobians(m, np.ones((5, 1)), h0=np.ones(2), backend="numpy")
    assert excinfo.value.step == 2 and excinfo.value.partial.sizes["time"] == 1


def test_exported():
    # dl.jacobians is the analysis function, wrapped to take progress= (dynlab.progress.reports)
    assert dynlab.jacobians.__wrapped__ is jacobians and dynlab.jacobian_at is jacobian_at


# ------------------------------------------------------------------------------ bad input
def _param(excinfo):
    return excinfo.value.param


def test_bad_input_names_the_parameter():
    m = CASES["rnn"]("tanh")
    ok_x, ok_h = np.zeros((3, D_IN)), np.zeros((3, D_HIDDEN))
    bad = [
        (lambda: jacobian_at(m, ok_x, np.zeros((3, D_HIDDEN + 1))), "hprev"),
        (lambda: jacobian_at(m, ok_x, np.zeros(D_HIDDEN)), "hprev"),
        (lambda: jacobian_at(m, np.zeros((2, D_IN)), ok_h), "x"),
        (lambda: jacobian_at(m, np.zeros((3, D_IN + 1)), ok_h), "x"),
        (lambda: jacobian_at(m, ok_x, np.where(np.eye(3, D_HIDDEN) > 0, np.nan, 0.0)), "hprev"),
        (lambda: jacobian_at(m, np.full((3, D_IN), np.inf), ok_h), "x"),
        (lambda: jacobian_at(m, [["a", "b"]] * 3, ok_h), "x"),
        (lambda: jacobian_at(m, ok_x, ok_h, backend="fortran"), "backend"),
        (lambda: jacobian_at("rnn", ok_x, ok_h), "model"),
        (lambda: jacobians(m, np.zeros((5, D_IN + 1))), "x"),
        (lambda: jacobians(m, np.zeros((5, D_IN)), h0=np.zeros(D_HIDDEN + 2)), "h0"),
        (lambda: flow_jacobian(m, ok_x, ok_h, 0.1), "model"),
    ]
    mt = CASES["irnn-K5-etaTK"]("tanh")
    bad += [
        (lambda: jacobian_at(mt, ok_x, ok_h), "t"),                               # per-time η needs t
        (lambda: jacobian_at(mt, ok_x, ok_h, t=np.array([0, 1, ETA_ROWS])), "t"),  # past the table
        (lambda: jacobian_at(mt, ok_x, ok_h, t=np.array([0.0, 1.0, 2.0])), "t"),  # not integers
        (lambda: jacobian_at(mt, ok_x, ok_h, t=np.array([0, 1])), "t"),           # wrong length
        (lambda: jacobians(mt, np.zeros((ETA_ROWS + 1, D_IN))), "eta"),           # η rows ≠ T
    ]
    mc = CASES["ctrnn-DOP853"]("tanh")
    bad += [
        (lambda: flow_jacobian(mc, ok_x, ok_h, 0.0), "interval"),
        (lambda: flow_jacobian(mc, ok_x, ok_h, np.nan), "interval"),
        (lambda: flow_jacobian(mc, ok_x, np.zeros((3, 1)), 0.1), "g"),
        (lambda: jacobian_path(mc, 3, "cupy"), "backend"),  # no scipy variational path on a GPU
    ]
    for call, param in bad:
        with pytest.raises(ParameterError) as excinfo:
            call()
        assert _param(excinfo) == param, (param, str(excinfo.value))


def test_per_time_eta_uses_row_t():
    """A per-(time, k) η: the Jacobian at t equals that of the model with the constant row η_t."""
    m = CASES["irnn-K5-etaTK"]("sigmoid")
    rng = np.random.default_rng(9)
    X, Hp = rng.standard_normal((ETA_ROWS, D_IN)), rng.standard_normal((ETA_ROWS, D_HIDDEN))
    t = np.arange(ETA_ROWS)[::-1].copy()
    for backend in ("numpy", "numba"):
        J = jacobian_at(m, X, Hp, backend=backend, t=t)
        for n in range(ETA_ROWS):
            Jr = jacobian_at(m.replace(eta=np.asarray(m.eta)[t[n]]), X[n:n + 1], Hp[n:n + 1], backend="numpy")
            assert np.abs(J[n] - Jr[0]).max() <= 1e-12
        J0 = jacobian_at(m.replace(eta=np.asarray(m.eta)[0]), X, Hp, backend="numpy")
        assert np.abs(J - J0).max() > 1e-3  # the rows do differ

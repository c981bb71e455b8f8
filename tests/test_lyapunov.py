"""Finite-time Lyapunov exponents (Benettin QR) against maps with known spectra.

A linear map h_t = U h_{t-1} is an ``rnn`` with the identity activation, b = 0 and W = 0;
its exponents are ln|eigenvalues of U| in the limit T → ∞.  Tolerances: 1e-3 for the finite-
time estimates (their error is O(ln κ / T) for a frame that must first align, κ the
eigenvector conditioning: ≈ 1e-4 at the sizes used); 1e-10 for identities that hold at every
T (Σλ_i = mean ln|det J_t|, the transient bookkeeping, backend agreement).
"""
from __future__ import annotations

import numpy as np
import pytest

import dynlab
from conftest import MODEL_CASES, inputs
from dynlab.analysis.lyapunov import lyapunov_spectrum
from dynlab.errors import ParameterError

BACKENDS = ("numpy", "numba")


def linear(U):
    D = U.shape[0]
    return dynlab.RNN(U, np.zeros((D, 1)), np.zeros(D), activation="identity")


@pytest.mark.parametrize("backend", BACKENDS)
def test_diagonal_map_gives_log_abs_entries(backend):
    p = np.array([0.3, -1.2, 0.8, -0.05])  # unsorted, with signs: exponents sorted, |p| taken
    T = 4000
    ds = dynlab.lyapunov(linear(np.diag(p)), np.zeros((T, 1)), transient=200, backend=backend)
    expect = np.sort(np.log(np.abs(p)))[::-1]
    np.testing.assert_allclose(ds["lyapunov"].values, expect, rtol=0, atol=1e-3)
    assert ds["lyapunov"].attrs["units"] == "1/step"


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_normal_map_gives_log_abs_eigenvalues(backend):
    """U = S diag(λ) S⁻¹ with a poorly conditioned S (κ ≈ 60) and a complex pair: the
    one-step norms mislead (‖U‖₂ ≫ max|λ|), the limit exponents do not."""
    rng = np.random.default_rng(0)
    S = np.eye(4) + 3.0 * np.triu(rng.standard_normal((4, 4)), 1)
    rot = 0.9 * np.array([[np.cos(1.0), -np.sin(1.0)], [np.sin(1.0), np.cos(1.0)]])  # |λ| = 0.9 twice
    A = np.zeros((4, 4))
    A[:2, :2] = rot
    A[2, 2], A[3, 3] = 1.1, -0.4
    U = S @ A @ np.linalg.inv(S)
    assert np.linalg.norm(U, 2) > 3
    T = 20000
    ds = dynlab.lyapunov(linear(U), np.zeros((T, 1)), transient=500, backend=backend)
    expect = np.sort(np.log(np.abs(np.linalg.eigvals(U))))[::-1]
    np.testing.assert_allclose(ds["lyapunov"].values, expect, rtol=0, atol=1e-3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["rnn", "irnn-K5-zero-plus", "fastrnn", "ctrnn-rk4"])
def test_sum_of_exponents_is_mean_log_det(case, backend):
    """|det J_t| = Π_i |R_t[i, i]| for k = D: Σλ_i = mean ln|det J_t| at every T."""
    T = 300
    m = MODEL_CASES[case]("tanh", T)
    x = inputs(2, T, seed=1)
    ds = dynlab.lyapunov(m, x, transient=20, backend=backend)
    J = dynlab.jacobians(m, x, inputs=False, backend="numpy")["jac"].values
    logdet = np.linalg.slogdet(J)[1][:, 20:].mean(axis=1)
    np.testing.assert_allclose(ds["lyapunov"].values.sum(axis=1), logdet, rtol=1e-10, atol=1e-12)


def test_transient_bookkeeping_and_running_mean():
    T, t0 = 500, 120
    m = MODEL_CASES["irnn-K5-previous-plus"]("tanh", T)
    x = inputs(None, T, seed=3)
    full = dynlab.lyapunov(m, x)
    cut = dynlab.lyapunov(m, x, transient=t0)
    run = full["lyapunov_running"].values  # (time, exponent): the mean of ln|R| over 1..t
    # Σ over t0 < t ≤ T = T·mean(1..T) − t0·mean(1..t0), direction by direction; each result
    # sorts its directions by its own final estimate, so compare the two sets in sorted order
    np.testing.assert_allclose(cut["lyapunov"].values * (T - t0), np.sort(T * run[-1] - t0 * run[t0 - 1])[::-1],
                               rtol=1e-10, atol=1e-10)
    assert np.all(np.isnan(cut["lyapunov_running"].values[:t0]))
    np.testing.assert_array_equal(cut["lyapunov_running"].values[-1], cut["lyapunov"].values)
    assert cut.attrs["transient"] == t0 and cut["lyapunov_running"].dims == ("time", "exponent")
    with pytest.raises(ParameterError) as err:
        dynlab.lyapunov(m, x, transient=T)
    assert err.value.param == "transient"


def test_first_k_exponents_and_backends_agree():
    """k < D tracks the first k columns of the same frame: the same R entries as k = D."""
    T = 400
    m = MODEL_CASES["antisymmetric"]("tanh", T)
    x = inputs(None, T, seed=5)
    ref = dynlab.lyapunov(m, x, backend="numpy")["lyapunov"].values
    np.testing.assert_allclose(dynlab.lyapunov(m, x, backend="numba")["lyapunov"].values, ref, rtol=1e-10)
    np.testing.assert_allclose(dynlab.lyapunov(m, x, k=2)["lyapunov"].values, ref[:2], rtol=1e-10)
    with pytest.raises(ParameterError) as err:
        dynlab.lyapunov(m, x, k=m.hidden + 1)
    assert err.value.param == "k"


def test_array_layer_and_ctrnn_rate():
    p = np.array([0.5, 0.25])
    out = lyapunov_spectrum(np.tile(np.diag(p), (2000, 1, 1)), transient=100)
    np.testing.assert_allclose(out["lyapunov"], np.log(p), atol=1e-3)
    m = MODEL_CASES["ctrnn-euler"]("tanh", 50)
    ds = dynlab.lyapunov(m, inputs(None, 50))
    np.testing.assert_allclose(ds["lyapunov_rate"].values, ds["lyapunov"].values / m.dt, rtol=1e-15)
    assert ds["lyapunov_rate"].attrs["units"] == "1/time"
    assert all("long_name" in ds[v].attrs and "units" in ds[v].attrs for v in ds.data_vars)


@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("kw", [dict(activation="tanh", g0="zero", sign=1),
                                dict(activation="relu", g0="previous", sign=1),
                                dict(activation="sigmoid", g0="zero", sign=-1, eta="TK")])
def test_irnn_tangent_propagation_equals_the_jacobian_qr(kw, k, monkeypatch):
    """For an iRNN with D > 32 the numba backend carries the k tangent vectors through the K
    inner Euler steps instead of forming J_t.  Against the LAPACK-QR path on the NumPy J_t
    (same initial frame): exponents and running means to 1e-12 (the same products in another
    order, then QR; the exponents are averages of logs of O(1) numbers)."""
    kw = dict(kw)
    T, D = 120, 37
    if kw.pop("eta", None) == "TK":
        kw["eta"] = np.random.default_rng(3).uniform(0.2, 0.9, (T, 3))
    m = dynlab.make_model("irnn", D, 2, K=3, seed=5, weight_scale=1.5, **kw)
    x = inputs(2, T, seed=3)
    h0 = 0.2 * np.random.default_rng(1).standard_normal((2, D))
    fast = dynlab.lyapunov(m, x, h0, k=k, transient=20)
    assert fast.attrs["lyapunov_kernel"] == "irnn_tangent"
    ref = dynlab.lyapunov(m, x, h0, k=k, transient=20, backend="numpy")
    np.testing.assert_allclose(fast["lyapunov"].values, ref["lyapunov"].values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast["lyapunov_running"].values, ref["lyapunov_running"].values, rtol=0,
                               atol=1e-12, equal_nan=True)
    monkeypatch.setattr(dynlab.config, "LYAPUNOV_TANGENT_MAX_K", 0)          # the J_t path, numba
    full = dynlab.lyapunov(m, x, h0, k=k, transient=20)
    assert full.attrs["lyapunov_kernel"] != "irnn_tangent"
    np.testing.assert_allclose(fast["lyapunov"].values, full["lyapunov"].values, rtol=0, atol=1e-12)
    assert np.ptp(fast["lyapunov"].values) > 0 or k == 1                     # distinct exponents


# ------------------------------------------------------------------ order and starting frame
@pytest.mark.parametrize("backend", BACKENDS)
def test_exponents_come_out_sorted_even_for_a_near_equal_pair(backend):
    """diag(0.5, 0.5005, 0.9) from a frame whose first column lies 0.1 rad from the *smaller*
    of the near-equal pair: over 40 steps that column has not turned, so the raw estimates
    come out as (ln 0.5, ln 0.5005, ln 0.9), increasing (checked); the result is sorted, its
    running columns follow the same order, and the sorted set equals the raw one."""
    p = np.array([0.5, 0.5005, 0.9])
    a = 0.1
    Q0 = np.eye(3)
    Q0[:2, :2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    T = 40
    raw = lyapunov_spectrum(np.tile(np.diag(p), (T, 1, 1)), Q0=Q0, backend=backend)["log_r"].mean(axis=0)
    assert raw[0] < raw[1] < raw[2]  # the unsorted case the sort exists for
    ds = dynlab.lyapunov(linear(np.diag(p)), np.zeros((T, 1)), Q0=Q0, backend=backend)
    lam = ds["lyapunov"].values
    assert np.all(np.diff(lam) <= 0)
    np.testing.assert_array_equal(ds["lyapunov_running"].values[-1], lam)
    np.testing.assert_allclose(lam, raw[::-1], rtol=1e-12, atol=1e-14)


def test_Q0_identity_gives_the_diagonal_map_exactly_and_the_default_frame_is_documented():
    p = np.array([0.3, -1.2, 0.8])
    m = linear(np.diag(p))
    x = np.zeros((7, 1))
    # Q0 = I on a diagonal map: Q_t R_t = diag(p) Q_{t-1} is exact with R_t = diag(p) at every t
    exact = dynlab.lyapunov(m, x, Q0=np.eye(3))
    np.testing.assert_allclose(exact["lyapunov"].values, np.sort(np.log(np.abs(p)))[::-1], rtol=0, atol=1e-14)
    # the default frame is initial_frame(D, k): passing it explicitly changes nothing, bit for bit
    from dynlab.analysis.lyapunov import initial_frame
    rng_x = inputs(None, 60, d=2)
    mm = MODEL_CASES["rnn"]("tanh", 60)
    a = dynlab.lyapunov(mm, rng_x, k=3)
    b = dynlab.lyapunov(mm, rng_x, Q0=initial_frame(mm.hidden, 3))
    np.testing.assert_array_equal(a["lyapunov"].values, b["lyapunov"].values)
    assert "seed 0" in a.attrs["lyapunov_method"] and "given" in b.attrs["lyapunov_method"]


def test_Q0_in_an_invariant_subspace_measures_that_subspace():
    """With k < D a frame inside an invariant subspace stays there: e_3 of diag(0.9, 0.5, 0.2)
    gives ln 0.2, not the top exponent ln 0.9 that the default (general-position) frame finds."""
    m = linear(np.diag([0.9, 0.5, 0.2]))
    x = np.zeros((400, 1))
    inside = dynlab.lyapunov(m, x, Q0=np.array([[0.0], [0.0], [1.0]]))
    np.testing.assert_allclose(inside["lyapunov"].values, [np.log(0.2)], atol=1e-14)
    top = dynlab.lyapunov(m, x, k=1, transient=100)
    np.testing.assert_allclose(top["lyapunov"].values, [np.log(0.9)], atol=1e-3)


@pytest.mark.parametrize("Q0, k, param", [
    (np.ones((3, 2)), None, "Q0"),                    # columns not orthonormal
    (np.eye(4)[:, :2], None, "Q0"),                   # wrong D
    (np.eye(3)[:, :2], 3, "k"),                       # k disagrees with Q0
    (np.full((3, 1), np.nan), None, "Q0"),
])
def test_bad_Q0_is_refused_naming_it(Q0, k, param):
    with pytest.raises(ParameterError) as e:
        dynlab.lyapunov(linear(np.diag([0.9, 0.5, 0.2])), np.zeros((10, 1)), Q0=Q0, k=k)
    assert e.value.param == param

"""Gradient flow: ‖∂h_T/∂h_t‖₂ from the one-pass backward products against independent references.

References: explicit products rebuilt from scratch for every t with np.linalg.norm(ord=2)
(``naive.backward_products``/``naive.norm2``); central differences of the slow simulation in
tests/naive.py; closed forms (a rotation-scaled U at a fixed point, the iRNN's J → −σI);
the top Lyapunov exponent from the separate QR method.

Tolerances.  1e-10 relative where the same J_t are multiplied in another order: the
backward recursion differs from the from-scratch products by rounding only (≈ T·D·2⁻⁵³ ≈
1e-13 for T ≤ 60), and the numba backend's norms are certified to 1e-12 (config.NORM_RTOL).
1e-6 against central differences (truncation + rounding ≈ 1e-9, see naive.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import dynlab
import dynlab.config
import naive
from conftest import MODEL_CASES, inputs
from dynlab.analysis.gradients import jacobian_norms
from dynlab.errors import ParameterError

BACKENDS = ("numpy", "numba")
RTOL = 1e-10


def _rotation(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def _stack(B, T, D, seed):
    """Random Jacobian-like stacks around 0.5·I (norms near 1, products that shrink and grow)."""
    rng = np.random.default_rng(seed)
    return 0.5 * np.eye(D) + 0.6 * rng.standard_normal((B, T, D, D)) / np.sqrt(D)


def _reference(J):
    P = naive.backward_products(J)
    jac = naive.norm2(P)
    return jac, naive.norm2(J), jac[0] / jac[-2], P


# ------------------------------------------------------------------------ array layer
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("D", [1, 2, 3, 6, 40])  # 40 > GRADIENT_NUMBA_MAX_HIDDEN: the BLAS product path
def test_array_layer_equals_explicit_products(backend, D):
    B, T = 2, 40
    J = _stack(B, T, D, seed=D)
    g = np.random.default_rng(1).standard_normal((B, D))
    out = jacobian_norms(J, dL_dhT=g, backend=backend)
    for b in range(B):
        jac, step, ratio, P = _reference(J[b])
        np.testing.assert_allclose(out["jac_norm"][b], jac, rtol=RTOL, atol=0)
        np.testing.assert_allclose(out["step_norm"][b], step, rtol=RTOL, atol=0)
        np.testing.assert_allclose(out["ratio"][b], ratio, rtol=RTOL, atol=0)
        assert out["jac_norm"][b, -1] == pytest.approx(1.0, rel=1e-15)  # P_T = I
        # ∂L/∂h_t = g P_t, its norm from the explicit products
        dl = np.linalg.norm(np.einsum("i,tij->tj", g[b], P), axis=1)
        np.testing.assert_allclose(out["dL_dh_norm"][b], dl, rtol=RTOL, atol=0)
        assert out["dL_dh1_norm"][b] == pytest.approx(dl[0], rel=RTOL)
    np.testing.assert_allclose(out["log_jac_norm"], np.log(out["jac_norm"]), rtol=0, atol=1e-12)
    # the products really vary over many orders of magnitude (not a trivially flat curve)
    assert np.ptp(out["log_jac_norm"]) > 3


def test_array_layer_unbatched_and_errors():
    J = _stack(1, 30, 3, seed=0)[0]
    out = jacobian_norms(J)
    assert out["jac_norm"].shape == (30,) and np.ndim(out["ratio"]) == 0
    with pytest.raises(ParameterError) as err:
        jacobian_norms(J[:1])
    assert err.value.param == "J"
    with pytest.raises(ParameterError) as err:
        jacobian_norms(J, dL_dhT=np.ones(4))
    assert err.value.param == "dL_dhT"


@pytest.mark.parametrize("backend", BACKENDS)
def test_chunking_changes_nothing(monkeypatch, backend):
    """Feeding the backward pass in blocks of 7 steps gives the same numbers as one block."""
    J = _stack(2, 50, 40, seed=3)  # D = 40: the BLAS path, warm starts carried across blocks
    whole = jacobian_norms(J, backend=backend)
    monkeypatch.setattr(dynlab.config, "JACOBIAN_CHUNK_ENTRIES", 7 * 2 * 40 * 40)
    parts = jacobian_norms(J, backend=backend)
    for k in ("log_jac_norm", "step_norm"):
        np.testing.assert_allclose(parts[k], whole[k], rtol=1e-12, atol=1e-12)


def test_norm_certificate_falls_back_on_clustered_spectra():
    """Near P_T = I every singular value is ≈ 1: the power iteration cannot certify and the
    Gram-matrix fallback must answer; the result is still the exact norm (a wrong fallback
    would show here)."""
    rng = np.random.default_rng(5)
    D, T = 48, 12
    J = np.eye(D) + 1e-3 * rng.standard_normal((T, D, D))
    out = jacobian_norms(J, backend="numba")
    jac, step, _, _ = _reference(J)
    np.testing.assert_allclose(out["jac_norm"], jac, rtol=RTOL)
    np.testing.assert_allclose(out["step_norm"], step, rtol=RTOL)


# ------------------------------------------------------------------------ model layer
# ‖∂h_T/∂h_t‖₂, ‖J_t‖₂, the ratio and ‖∂L/∂h_1‖ of every model on every backend against the
# products formed one by one: the common battery (tests/test_battery.py, check_gradient_norms).


@pytest.mark.parametrize("case", ["rnn", "irnn-K5-zero-plus", "irnn-K5-lowrank1"])
def test_products_equal_finite_differences_of_the_simulation(case):
    """‖∂h_T/∂h_t‖₂ against central differences of naive.simulate restarted at h_t."""
    T = 12
    m = MODEL_CASES[case]("tanh", T)
    x = inputs(None, T, seed=4)
    ds = dynlab.gradient_norms(m, x)
    h = ds["h"].values
    for t in (8, 10, 11):
        fd = naive.fd_final_state_jacobian(m, x[t:], h[t - 1])
        # 1e-6 relative; 1e-10 absolute covers the differences' rounding floor (2⁻⁵³·|h|/eps)
        assert ds["jac_norm"].values[t - 1] == pytest.approx(np.linalg.norm(fd, 2), rel=1e-6, abs=1e-10)
        assert ds["jac_norm"].values[t - 1] > 1e-4  # a norm the differences resolve


def test_dataset_contract(tmp_path):
    m = dynlab.make_model("irnn", 3, 2, K=5, eta=0.5, seed=0)
    ds = dynlab.gradient_norms(m, inputs(None, 40), dL_dhT=np.ones(3), command="test")
    for v in ("jac_norm", "log_jac_norm", "step_norm", "ratio", "dL_dh_norm", "dL_dh1_norm", "h", "x", "U", "eta"):
        assert v in ds
    assert ds["jac_norm"].dims == ("time",) and ds["ratio"].dims == ()
    assert all("long_name" in ds[v].attrs and "units" in ds[v].attrs for v in ds.data_vars)
    assert ds.attrs["command"] == "test" and ds.attrs["K"] == 5 and ds.attrs["backend"] == "numba"
    back = dynlab.read_dataset(dynlab.write_dataset(ds, tmp_path / "g.nc"))
    again = dynlab.gradient_norms(dynlab.model_from_dataset(back), back["x"].values, dL_dhT=back["dL_dhT"].values)
    np.testing.assert_array_equal(back["jac_norm"].values, again["jac_norm"].values)


def test_bad_input_names_the_parameter():
    m = dynlab.make_model("rnn", 2, 1, seed=0)
    with pytest.raises(ParameterError) as err:
        dynlab.gradient_norms(m, np.zeros((1, 1)))
    assert err.value.param == "x" and "T ≥ 2" in err.value.message
    with pytest.raises(ParameterError) as err:
        dynlab.gradient_norms(m, np.zeros((5, 1)), dL_dhT=np.ones(3))
    assert err.value.param == "dL_dhT"


def test_divergence_is_reported():
    m = dynlab.make_model("rnn", 2, 1, seed=0, activation="identity", weight_scale=1e3)
    with pytest.raises(dynlab.DivergenceError):
        dynlab.gradient_norms(m, np.ones((400, 1)))


# ------------------------------------------------------------------------ the science
@pytest.mark.parametrize("sign, limit", [(1, -1.0), (-1, 1.0)])
def test_irnn_large_K_makes_the_step_jacobian_minus_sigma_identity(sign, limit):
    """G_K + σI = Π_k (I + η_k(diag φ' U − αI)) (G_0 + σI), so with ‖U‖₂ < α and g_0 = 0,
    ‖J_t + σI‖ ≤ q^K, q = 1 − ηα + η‖U‖₂ (tanh: φ' ≤ 1).  K = 100, η = 0.5, ‖U‖₂ = 0.5:
    q^K = 0.75¹⁰⁰ ≈ 3e-13.  Hence ∂h_T/∂h_1 → (−σ)^{T−1} I and the ratio → 1."""
    D, T, K = 3, 40, 100
    rng = np.random.default_rng(0)
    U = rng.standard_normal((D, D))
    U *= 0.5 / np.linalg.norm(U, 2)
    m = dynlab.IRNN(U, rng.standard_normal((D, 1)), 0.1 * rng.standard_normal(D), eta=0.5, alpha=1.0, K=K,
                    sign=sign)
    x = dynlab.tasks.random_walk(T, 1, variance=1.0, seed=0)
    J = dynlab.jacobians(m, x, inputs=False)["jac"].values
    bound = 0.75 ** K
    assert naive.norm2(J - limit * np.eye(D)).max() <= bound * (1 + 1e-6) + 1e-15
    P1 = naive.backward_products(J)[0]
    np.testing.assert_allclose(P1, limit ** (T - 1) * np.eye(D), rtol=0, atol=T * bound + 1e-13)
    ds = dynlab.gradient_norms(m, x)
    assert abs(float(ds["ratio"]) - 1) < 1e-6
    np.testing.assert_allclose(ds["jac_norm"].values, 1.0, rtol=0, atol=1e-6)
    # not vacuous: with K = 1 the same cell's gradients vanish
    assert float(dynlab.gradient_norms(m.replace(K=1), x)["ratio"]) < 1e-3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_long_horizon_log_norm_is_exact_past_under_and_overflow(backend, scale):
    """tanh RNN at its fixed point h = 0 (b = 0, x = 0): J_t = U = scale·rotation, so
    ‖∂h_T/∂h_t‖₂ = scale^(T−t) exactly.  At T = 10⁵ that is 10^(∓30103): jac_norm under- or
    overflows, log_jac_norm = (T−t)·ln(scale) stays exact (1e-10 relative: a running sum of T
    rounded logs is good to T·2⁻⁵³ ≈ 1e-11 relative)."""
    T = 100_000 if backend == "numba" else 5000  # the NumPy reference loops in Python
    U = scale * _rotation(0.7)
    m = dynlab.RNN(U, np.ones((2, 1)), np.zeros(2))
    ds = dynlab.gradient_norms(m, np.zeros((T, 1)), backend=backend)
    lag = T - np.arange(1, T + 1)
    L = ds["log_jac_norm"].values
    assert np.all(np.isfinite(L))
    np.testing.assert_allclose(L, lag * np.log(scale), rtol=1e-10, atol=1e-12)
    assert ds["jac_norm"].values[0] == (0.0 if scale < 1 else np.inf)
    np.testing.assert_allclose(ds["step_norm"].values, scale, rtol=1e-14)


def test_vanishing_gradients_decay_at_the_top_lyapunov_rate():
    """A driven tanh RNN with small weights (D = 2, T = 10⁵): ln‖∂h_T/∂h_t‖ falls linearly in
    T − t; its fitted slope is the top Lyapunov exponent of the separate QR method (1e-3
    relative: both are finite-time estimates of one limit, differing by O(1/T))."""
    T = 100_000
    m = dynlab.make_model("rnn", 2, 1, seed=0, weight_scale=0.5)
    x = dynlab.tasks.make_input("noise", T, 1, seed=0)
    L = dynlab.gradient_norms(m, x)["log_jac_norm"].values
    assert np.all(np.isfinite(L)) and L[0] < -1000  # the norm itself underflowed long ago
    lag = T - np.arange(1, T + 1)
    slope = np.polyfit(lag, L, 1)[0]
    lam = float(dynlab.lyapunov(m, x, k=1)["lyapunov"][0])
    assert slope < 0 and slope == pytest.approx(lam, rel=1e-3)


# ------------------------------------------------------------------------ the curve alone (reverse mode)
REVERSE_D = 37  # > GRADIENT_NUMBA_MAX_HIDDEN, odd: row blocks of unequal size
REVERSE_CASES = {
    "tanh-zero-plus": dict(activation="tanh", g0="zero", sign=1),
    "tanh-zero-minus": dict(activation="tanh", g0="zero", sign=-1),
    "relu-previous-plus": dict(activation="relu", g0="previous", sign=1),
    "sigmoid-previous-minus": dict(activation="sigmoid", g0="previous", sign=-1),  # J = I: a = 1 + σ = 0
    "leaky-relu-etaTK": dict(activation="leaky-relu", eta="TK"),
    "tanh-lowrank3": dict(activation="tanh", rank=3, eta="K"),
}


def _reverse_model(case, T):
    kw = dict(REVERSE_CASES[case])
    eta = kw.pop("eta", 0.5)
    eta = {"TK": np.random.default_rng(5).uniform(0.2, 0.9, (T, 4)), "K": np.linspace(0.3, 0.8, 4)}.get(eta, eta)
    return dynlab.make_model("irnn", REVERSE_D, 2, K=4, eta=eta, seed=7, weight_scale=1.5, **kw)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(REVERSE_CASES))
def test_reverse_mode_curve_equals_explicit_products(case, threads, monkeypatch):
    """``step_norms=False`` pulls the rows of P_t back through the K inner steps (J_t never
    formed), in row blocks (one per Numba thread) and chunks (16 steps here, so T = 70 spans five
    chunks, the last one short).  Against the from-scratch products of the NumPy Jacobians with
    LAPACK norms: 1e-10, the tolerance of every other norm test (module docstring)."""
    import numba

    monkeypatch.setattr(dynlab.config, "GRADIENT_REVERSE_CHUNK", 16)
    T = 70
    m = _reverse_model(case, T)
    x = inputs(2, T, seed=9)
    g = np.random.default_rng(3).standard_normal((2, REVERSE_D))
    h0 = 0.3 * np.random.default_rng(4).standard_normal((2, REVERSE_D))
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        ds = dynlab.gradient_norms(m, x, h0, dL_dhT=g, step_norms=False)
    finally:
        numba.set_num_threads(old)
    assert ds.attrs["gradient_kernel"] == "reverse" and "step_norm" not in ds
    J = dynlab.jacobians(m, x, h0, backend="numpy", inputs=False)["jac"].values
    for b in range(2):
        jac, _, ratio, P = _reference(J[b])
        np.testing.assert_allclose(ds["jac_norm"].values[b], jac, rtol=RTOL, atol=0)
        np.testing.assert_allclose(ds["ratio"].values[b], ratio, rtol=RTOL, atol=0)
        np.testing.assert_allclose(ds["dL_dh_norm"].values[b], np.linalg.norm(g[b] @ P, axis=-1), rtol=RTOL)
    if case != "sigmoid-previous-minus":  # not vacuous: the products move away from 1
        assert np.ptp(ds["log_jac_norm"].values) > 1.0


def test_reverse_mode_chunks_respect_the_memory_budget(monkeypatch):
    """The chunk's P_t are stored for the norms: with JACOBIAN_CHUNK_ENTRIES = 3·D² the pass runs
    3 steps at a time and gives the same curve (1e-12: the same products, the norms' warm
    starts and the chunks' scale resets differ)."""
    import dynlab.backends.numba.norms as gn

    T = 40
    m = _reverse_model("tanh-zero-plus", T)
    x = inputs(None, T, seed=2)
    whole = dynlab.gradient_norms(m, x, step_norms=False)["log_jac_norm"].values
    sizes = []
    real = gn.irnn_reverse_chunk
    monkeypatch.setattr(gn, "irnn_reverse_chunk", lambda *a: (sizes.append(a[1].shape[0]), real(*a))[1])
    monkeypatch.setattr(dynlab.config, "JACOBIAN_CHUNK_ENTRIES", 3 * REVERSE_D ** 2)
    parts = dynlab.gradient_norms(m, x, step_norms=False)["log_jac_norm"].values
    assert max(sizes) == 3 and sum(sizes) == T
    np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-12)


def test_reverse_mode_log_norm_is_finite_past_underflow():
    """A contracting iRNN (K = 1, small η) at T = 3000: ‖∂h_T/∂h_1‖ underflows float64, the
    log-norm of the reverse pass stays finite and equals the J-forming pass's to 1e-10
    relative (two roundings of the same products, the log scales summed over 3000 steps)."""
    T = 3000
    m = dynlab.make_model("irnn", 40, 1, K=1, eta=0.3, seed=2, weight_scale=0.3)
    x = dynlab.tasks.random_walk(T, 1, variance=1.0, seed=1)
    fast = dynlab.gradient_norms(m, x, step_norms=False)
    full = dynlab.gradient_norms(m, x)
    assert fast.attrs["gradient_kernel"] == "reverse" and full.attrs["gradient_kernel"] != "reverse"
    L = fast["log_jac_norm"].values
    assert np.all(np.isfinite(L)) and L[0] < np.log(1e-300) and fast["jac_norm"].values[0] == 0.0
    np.testing.assert_allclose(L, full["log_jac_norm"].values, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", ["rnn", "irnn-K5-previous-minus", "ctrnn-rk4"])
def test_step_norms_false_changes_only_the_step_norms(case):
    """Below the reverse-mode threshold (and for other models) ``step_norms=False`` runs the same
    products and skips the T norms of J_t: the curve is bit-identical."""
    T = 30
    m = MODEL_CASES[case]("tanh", T)
    x = inputs(2, T, seed=2)
    a = dynlab.gradient_norms(m, x, step_norms=False)
    b = dynlab.gradient_norms(m, x)
    assert "step_norm" not in a and "step_norm" in b and a.attrs["step_norms"] == 0
    np.testing.assert_array_equal(a["jac_norm"].values, b["jac_norm"].values)
    with pytest.raises(ParameterError) as err:
        dynlab.gradient_norms(m, x, step_norms="no")
    assert err.value.param == "step_norms"


@pytest.mark.parametrize("maxit", [0, 40])
def test_gram_fallback_equals_the_svd_norm(maxit):
    """σ₁ as √λ_max(S Sᵀ) (``lapack_numba.gram_top``, jitted, in parallel): by LAPACK's dsyevr
    (maxit = 0) or first by Lanczos certified with a Cholesky test (maxit = 40).  Either is σ₁
    to relative O(D ε) even for ill-conditioned and clustered matrices (only the small singular
    values suffer in the Gram matrix): 1e-13 ≈ 4·D·ε at D = 64, the certificate's 1e-14 on top.
    Zero gives 0, a non-finite matrix NaN (as the SVD path does), and only the listed matrices
    are written."""
    from dynlab.backends.reference.norms import svd_top as _svd_top
    from dynlab.backends.numba import lapack as lapack_numba

    rng = np.random.default_rng(12)
    D = 64
    Q1, _ = np.linalg.qr(rng.standard_normal((D, D)))
    Q2, _ = np.linalg.qr(rng.standard_normal((D, D)))
    S = np.concatenate([rng.standard_normal((4, D, D)), np.eye(D) + 1e-6 * rng.standard_normal((3, D, D)),
                        (Q1 * np.logspace(0, -15, D)) @ Q2.T * np.array([1e-200, 1.0, 1e200])[:, None, None],
                        (Q1 * np.linspace(1, 0.97, D)) @ Q2.T * np.array([1e-150, 1.0])[:, None, None],
                        np.zeros((1, D, D)), rng.standard_normal((1, D, D))])
    S[-1, 5, 6] = np.inf
    sig = np.full(S.shape[0], -1.0)
    useg = np.tile(rng.standard_normal(D), (2, 1))
    lapack_numba.gram_top_stack(S, np.arange(S.shape[0] - 2), sig, useg, 1e-14, maxit)
    np.testing.assert_allclose(sig[:-2], _svd_top(S[:-2]), rtol=1e-13)
    assert sig[-2] == -1.0 and sig[-1] == -1.0
    assert lapack_numba.gram_top(S[-2]) == 0.0 and np.isnan(lapack_numba.gram_top(S[-1]))
    lam, info = lapack_numba.top_eig(np.diag([3.0, -1.0, 2.0]))
    assert info == 0 and lam == 3.0


def test_lanczos_and_its_cholesky_certificate():
    """The pieces of the certified fallback, each against LAPACK's eigvalsh: ``gram`` (dsyrk) is
    M Mᵀ; ``tri_top`` is the top eigenvalue of a tridiagonal matrix to 1e-15; the Lanczos Ritz
    value of a clustered Gram matrix (top σ's within 3 %) is a lower bound converged to 1e-13 in
    fewer than D steps; ``below`` (dpotrf of μI − G) accepts μ = λ_max(1 + 1e-12) and refuses
    μ = λ_max(1 − 1e-12), so it certifies at the tolerance used (not vacuous either way)."""
    from dynlab.backends.numba import lapack as ln

    rng = np.random.default_rng(21)
    D = 96
    Q1, _ = np.linalg.qr(rng.standard_normal((D, D)))
    Q2, _ = np.linalg.qr(rng.standard_normal((D, D)))
    M = (Q1 * np.r_[np.linspace(1.0, 0.97, 10), np.linspace(0.9, 0.05, D - 10)]) @ Q2.T
    G = np.empty((D, D))
    ln.gram(M, G)
    np.testing.assert_allclose(G, M @ M.T, rtol=0, atol=1e-15)
    assert np.array_equal(G, G.T)
    a, b = rng.standard_normal(20), rng.standard_normal(20)
    T = np.diag(a) + np.diag(b[:19], 1) + np.diag(b[:19], -1)
    assert ln.tri_top(a, b, 20) == pytest.approx(np.linalg.eigvalsh(T)[-1], rel=1e-15, abs=1e-15)
    lam = np.linalg.eigvalsh(G)[-1]
    theta, steps = ln.lanczos_top(G, rng.standard_normal(D), 60, 1e-14, np.empty((61, D)), np.empty(60),
                                  np.empty(60), np.empty(D))
    assert theta <= lam * (1 + 1e-15) and theta == pytest.approx(lam, rel=1e-13) and steps < 60
    work = np.empty((D, D))
    assert ln.below(G, lam * (1 + 1e-12), work)
    assert not ln.below(G, lam * (1 - 1e-12), work)


@pytest.mark.parametrize("layer", ["default", "workqueue"])
def test_reverse_mode_is_safe_from_several_threads(layer):
    """Two threads computing curves at once (as Dask workers with threads do) get the serial
    answers.  Numba's ``workqueue`` layer aborts the process on concurrent parallel launches;
    ``dynlab.backends.numba.parallel.launch`` serialises them there — run in a subprocess with that
    layer forced, where an abort would show as a non-zero exit."""
    import subprocess
    import sys

    code = """
import numpy as np, threading, dynlab as dl
ms = [dl.make_model("irnn", 40, 1, K=3, eta=0.5, seed=s, weight_scale=1.5) for s in (0, 1)]
x = dl.tasks.random_walk(300, 1, variance=1.0, seed=0)
ref = [dl.gradient_norms(m, x, step_norms=False)["log_jac_norm"].values for m in ms]
out = [None, None]
def work(i):
    for _ in range(3):
        out[i] = dl.gradient_norms(ms[i], x, step_norms=False)["log_jac_norm"].values
ts = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
[t.start() for t in ts]; [t.join() for t in ts]
assert all(np.array_equal(a, b) for a, b in zip(out, ref)), "threaded results differ"
import numba; print(numba.threading_layer())
"""
    env = dict(__import__("os").environ)
    if layer != "default":
        env["NUMBA_THREADING_LAYER"] = layer
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    if layer != "default":
        assert res.stdout.strip() == layer


@pytest.mark.parametrize("scale", [1e-150, 1.0, 1e150])
def test_the_spectral_norm_fallbacks_equal_lapacks_svd(scale):
    """The numba backend's σ₁ where the power iteration cannot certify: ``svd_top`` (gesdd of
    M / max|M|) and its fallback where gesdd fails to converge, ``gram_top`` (√λ_max of the Gram
    matrix), against NumPy's SVD of the same matrices, over 60 orders of magnitude either way
    (the unscaled Gram matrix would underflow or overflow).  σ₁ from either is exact to
    O(ε) relative: tolerance 1e-12."""
    from dynlab.backends.numba import norms

    rng = np.random.default_rng(3)
    for D in (3, 8, 32):
        M = rng.standard_normal((D, D)) * scale
        want = np.linalg.svd(M, compute_uv=False)[0]
        assert abs(norms.svd_top(M) - want) <= 1e-12 * want
        assert abs(norms.gram_top(M / np.abs(M).max()) * np.abs(M).max() - want) <= 1e-12 * want
    assert norms.svd_top(np.zeros((4, 4))) == 0.0


def test_the_reference_norm_falls_back_when_svd_does_not_converge(monkeypatch):
    """The reference ``svd_top`` where LAPACK's SVD raises (it can on finite matrices): σ₁ from the
    Gram matrix, equal to the SVD's to 1e-12 relative; non-finite matrices stay NaN."""
    from dynlab.backends.reference import norms as ref

    rng = np.random.default_rng(4)
    S = rng.standard_normal((5, 6, 6)) * np.array([1e-100, 1e-3, 1.0, 1e3, 1e100])[:, None, None]
    S[2, 0, 0] = np.nan
    want = ref.svd_top(S)
    svd = np.linalg.svd

    def fails(*a, **k):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(np.linalg, "svd", fails)
    got = ref.svd_top(S)
    monkeypatch.setattr(np.linalg, "svd", svd)
    assert np.isnan(got[2]) and np.isnan(want[2])
    ok = [0, 1, 3, 4]
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-12)

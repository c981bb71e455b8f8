"""The GPU backend's blocked scan of the backward products (``dynlab.backends.gpu.flow.scan_products``)
at the benchmark's length, against the sequential chain.

The scan is array code on the runtime's arrays (CuPy on a GPU, NumPy here: no kernel, no simulator
needed), so it is checked where the simulator cases cannot reach: T = 1000 steps of a real iRNN
trajectory's Jacobians, as ``gradient_norms`` feeds them in one chunk on a GPU.  The reference is
the chain P_{t−1} = P_t J_t kept Frobenius-normalised step by step (what the reference backend and
the fused kernel compute); ln‖P_t‖₂ by LAPACK's SVD on both sides.  The two associate the products
differently, so they agree to rounding: ≈ n·ε relative per product, a few hundred products deep —
bounded here by the benchmark's float64 bound, 1e-10·max(1, |ln‖P_t‖|).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")

pytestmark = pytest.mark.gpu


def _sequential(J):
    """ln‖P_t‖₂ for every t of the chunk, P_{T} = I, P_{t−1} = P_t J_t, normalised with its log."""
    B, m, n, _ = J.shape
    out = np.empty((B, m))
    for b in range(B):
        P, lg = np.eye(n), 0.0
        for j in range(m - 1, -1, -1):
            out[b, j] = lg + np.log(np.linalg.svd(P, compute_uv=False)[0])
            P = P @ J[b, j]
            f = np.linalg.norm(P)
            with np.errstate(divide="ignore", invalid="ignore"):    # past a zero J_t: not read
                P, lg = P / f, lg + np.log(f)
    return out


def _scan(J, P=None, logs=None):
    from dynlab.backends.gpu.device import to_device, to_host
    from dynlab.backends.gpu.flow import scan_products

    B, m, n, _ = J.shape
    P = np.broadcast_to(np.eye(n), (B, n, n)) if P is None else P
    S, Slog, Pn, Pl = scan_products(to_device(J), to_device(P), to_device(np.zeros(B) if logs is None else logs))
    S, Slog = to_host(S), to_host(Slog)
    finite = np.isfinite(S).all(axis=(-2, -1))
    sig = np.full(Slog.shape, np.nan)
    sig[finite] = np.linalg.svd(S[finite], compute_uv=False)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return Slog + np.log(sig), to_host(Pn), to_host(Pl)


def test_scan_equals_the_sequential_chain_over_a_thousand_steps():
    import dynlab as dl
    from dynlab.backends.reference import ReferenceBackend

    m = dl.make_model("irnn", 16, 1, seed=0, K=5, eta=0.5)
    x = dl.tasks.random_walk(1000, 1, seed=0)[None]
    be = ReferenceBackend()
    H = be.simulate(m.form(), x, np.zeros((1, 16)))[0]
    J = be.trajectory_jacobians(m.form(), x, np.zeros((1, 16)), H, 0, 1000)
    want = _sequential(J)
    got, _, _ = _scan(J)
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    assert err.max() <= 1e-10, err.max()
    assert np.ptp(want) > 1.0          # the norms do move over the chain (the check can fail)


def test_scan_carries_the_product_between_chunks():
    """Two chunks fed from the end (as ``gradient_flow`` does) give the one-chunk answer, for every
    chunk length the block split treats differently (m = 1, a square, not a square)."""
    rng = np.random.default_rng(1)
    J = 0.4 * rng.standard_normal((2, 23, 5, 5)) + np.eye(5)
    want = _sequential(J)
    for cut in (22, 14, 7):
        late, P, Pl = _scan(J[:, cut:])
        early, _, _ = _scan(J[:, :cut], P, Pl)
        got = np.concatenate([early, late], axis=1)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"cut at {cut}")


def test_scan_keeps_zero_and_non_finite_as_the_kernel_does():
    """An exactly zero Jacobian makes every earlier product zero (log −inf); a NaN one poisons every
    earlier product (NaN); the later ones are untouched."""
    rng = np.random.default_rng(2)
    J = rng.standard_normal((2, 9, 3, 3))
    J[0, 4] = 0.0
    J[1, 6] = np.nan
    got, _, _ = _scan(J)
    assert np.all(got[0, :4] == -np.inf) and np.all(np.isfinite(got[0, 4:]))
    assert np.all(np.isnan(got[1, :6])) and np.all(np.isfinite(got[1, 6:]))
    np.testing.assert_allclose(got[0, 4:], _sequential(J[:1, 4:])[0], rtol=1e-12)

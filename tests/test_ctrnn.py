"""The CTRNN τ ġ = −α g + φ(U g + W x(t) + b): convergence orders of the fixed-step
integrators against scipy's solve_ivp, the scipy reference against itself, and the linear
CTRNN against its matrix-exponential closed form."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm

import dynlab
from conftest import force_path

DT, T = 0.5, 10                        # 10 input intervals of length 0.5
SUBSTEPS = np.array([4, 8, 16, 32, 64])  # fixed step sizes 0.125 … 0.0078


def _nonlinear():
    """D = 3, tanh, weight_scale 1.5: genuinely nonlinear (|U g| reaches the bend of tanh)."""
    m = dynlab.make_model("ctrnn", 3, 2, seed=3, weight_scale=1.5, dt=DT, activation="tanh")
    x = np.random.default_rng(0).standard_normal((T, 2))
    h0 = np.array([0.5, -0.3, 0.8])
    return m, x, h0


def _reference(m, x, h0, rtol=1e-12, atol=1e-14, method="DOP853"):
    ds = dynlab.simulate(m.replace(method=method, rtol=rtol, atol=atol), x, h0)
    assert ds.attrs["kernel"] == "scipy" and ds.attrs["backend"] == "scipy"
    return ds.h.values


@pytest.mark.parametrize("path", ["numpy", "numba-loops", "numba-vectorised"])
@pytest.mark.parametrize("method,order", [("euler", 1), ("rk4", 4)])
def test_convergence_order(method, order, path, monkeypatch):
    """Slope of log(max error at the final time) against log(step size) equals the order.

    Errors are taken against DOP853 at rtol 1e-12 / atol 1e-14, whose own error (≤ 1e-12,
    see test_scipy_reference_is_converged) is ≥ 1000× below the smallest RK4 error here
    (≈ 1e-10 at 64 substeps), so it does not bend the line.  The error is C·hᵖ(1 + O(h)):
    the O(h) term shifts local slopes at the coarse end by a few hundredths to a tenth
    (measured: RK4 pairs 4.15, 4.08, 4.04, 4.02, fit 4.07; Euler pairs 0.976 … 0.996, fit
    0.988), so the fitted slope must lie within ±0.15
    of p — that tolerates the pre-asymptotic drift yet rejects the neighbouring orders p ± 1 —
    and the finest pair must be within 0.05 of p (the drift shrinks with h).
    """
    backend, kernel = force_path(monkeypatch, path)
    m, x, h0 = _nonlinear()
    ref = _reference(m, x, h0)[-1]
    errs = []
    for n in SUBSTEPS:
        ds = dynlab.simulate(m.replace(method=method, substeps=int(n)), x[None], h0[None], backend=backend)
        assert ds.attrs["kernel"] == kernel
        errs.append(np.max(np.abs(ds.h.values[0, -1] - ref)))
    errs = np.array(errs)
    steps = DT / SUBSTEPS
    assert errs.min() > 1e-11  # well above the reference's error and round-off
    slope = np.polyfit(np.log(steps), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.15, (slope, errs)
    last = np.log(errs[-2] / errs[-1]) / np.log(steps[-2] / steps[-1])
    assert abs(last - order) < 0.05, (last, errs)


def test_scipy_reference_is_converged():
    """DOP853 at (rtol, atol) = (1e-12, 1e-14) against DOP853 at (1e-10, 1e-12) and against the
    implicit Radau (analytic Jacobian) at (1e-12, 1e-14).  Measured in units of the looser
    tolerance of each pair, tol = atol + rtol·max|y|: global errors of a contracting flow over
    10 intervals stay within ≈ 10 local tolerances; accept 100."""
    m, x, h0 = _nonlinear()
    tight = _reference(m, x, h0)
    loose = _reference(m, x, h0, rtol=1e-10, atol=1e-12)
    radau = _reference(m, x, h0, method="Radau")
    scale = np.abs(tight).max()
    assert np.max(np.abs(tight - loose)) < 100 * (1e-12 + 1e-10 * scale)
    assert np.max(np.abs(tight - radau)) < 100 * (1e-14 + 1e-12 * scale)
    # the two solve the same problem as the fixed-step kernels: RK4 with fine steps agrees
    # (RK4's error at 64 substeps is ≈ 9e-11, so at 400 it is ≈ 9e-11·(64/400)⁴ ≈ 6e-14; accept 1e-11)
    fine = dynlab.simulate(m.replace(method="rk4", substeps=400), x, h0).h.values
    assert np.max(np.abs(fine - tight)) < 1e-11


def _linear_model():
    """φ = identity, τ = 2, α = 0.5: τ ġ = (U − αI) g + c with c = W x_m + b constant per interval."""
    rng = np.random.default_rng(2)
    D = 3
    U = 0.4 * rng.standard_normal((D, D))
    m = dynlab.models.CTRNN(U, rng.standard_normal((D, 2)), 0.2 * rng.standard_normal(D), tau=2.0, alpha=0.5,
                            dt=0.5, activation="identity")
    x = rng.standard_normal((8, 2))
    h0 = np.array([1.0, -0.5, 0.25])
    return m, x, h0


def _augmented(m, c):
    """The affine ODE ġ = A g + c/τ, A = (U − αI)/τ, as the linear system d/dt [g; 1] = M [g; 1]."""
    D = m.hidden
    M = np.zeros((D + 1, D + 1))
    M[:D, :D] = (m.U - m.alpha * np.eye(D)) / m.tau
    M[:D, D] = c / m.tau
    return M


def _linear_exact(m, x, h0, propagator):
    out, g = [], np.append(h0, 1.0)
    for xm in x:
        g = propagator(_augmented(m, m.W @ xm + m.b)) @ g
        out.append(g[:-1])
    return np.array(out)


def test_linear_ctrnn_matches_matrix_exponential():
    """g(mΔt) = exp(M Δt) [g((m−1)Δt); 1] exactly; scipy's expm is accurate to ≈ 1e-15 relative.
    DOP853 at rtol 1e-12 accumulates ≲ 1e-11 over 8 intervals; accept 1e-9 (as specified)."""
    m, x, h0 = _linear_model()
    exact = _linear_exact(m, x, h0, lambda M: expm(M * m.dt))
    np.testing.assert_allclose(_reference(m, x, h0), exact, rtol=0, atol=1e-9)
    # RK4 with 50 substeps: local error (h‖A‖)⁵/120 with h = 0.01 → ≈ 1e-13 per interval
    rk4 = dynlab.simulate(m.replace(method="rk4", substeps=50), x, h0).h.values
    np.testing.assert_allclose(rk4, exact, rtol=0, atol=1e-9)


@pytest.mark.parametrize("path", ["numpy", "numba-loops", "numba-vectorised"])
@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_linear_fixed_step_is_a_taylor_polynomial(method, path, monkeypatch):
    """On a linear (augmented) system one Euler step is I + hM and one RK4 step is the degree-4
    Taylor polynomial of exp(hM) — identities, not approximations.  The kernels and the matrix
    polynomial differ only in rounding (≈ 1e-16 per operation, 3 substeps × 8 intervals of a
    contracting flow): accept 1e-13 relative to max|g|."""
    backend, kernel = force_path(monkeypatch, path)
    m, x, h0 = _linear_model()
    m = m.replace(method=method, substeps=3)
    h = m.dt / m.substeps

    def step_poly(M):
        Z = h * M
        I = np.eye(M.shape[0])
        P = I + Z if method == "euler" else I + Z + Z @ Z / 2 + Z @ Z @ Z / 6 + Z @ Z @ Z @ Z / 24
        return np.linalg.matrix_power(P, m.substeps)

    exact = _linear_exact(m, x, h0, step_poly)
    ds = dynlab.simulate(m, x[None], h0[None], backend=backend)
    assert ds.attrs["kernel"] == kernel
    np.testing.assert_allclose(ds.h.values[0], exact, rtol=0, atol=1e-13 * np.abs(exact).max())
    # and it is not the exact flow (the test could tell the methods apart)
    flow = _linear_exact(m, x, h0, lambda M: expm(M * m.dt))
    assert np.max(np.abs(ds.h.values[0] - flow)) > 1e-9


def test_ctrnn_time_coordinate():
    m, x, h0 = _linear_model()
    ds = dynlab.simulate(m, x, h0)
    np.testing.assert_allclose(ds.t.values, m.dt * np.arange(1, len(x) + 1), rtol=1e-15)
    assert ds.t.dims == ("time",)

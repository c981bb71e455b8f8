"""Activations: φ against the naive math-module versions, φ' against central finite
differences, the sigmoid's stability at ±800, the affine-piece index, and name checking.
φ is written in dynlab.activations (the reference's, NumPy) and in dynlab.backends.cells (every
compiled kernel's), with the numba backend's vectorisable float64 tanh and sigmoid (``phi_f64``,
what its fused passes run) beside them; all are checked."""
from __future__ import annotations

import numpy as np
import pytest

import isa_child
import naive
from dynlab.activations import (ACTIVATION_IDS, ACTIVATIONS, MAX_AFFINE, check_activation, dphi, phi,
                                piece)
from dynlab.errors import ParameterError
from dynlab.backends.numba import loops as numba_cpu

LEAKS = (0.01, 0.2)
Z = np.concatenate([np.linspace(-6.0, 6.0, 241), [-1e-300, 0.0, 1e-300, -40.0, 40.0, -700.0, 700.0]])


def _naive(fn, name, z, leak):
    return np.array([fn(name, float(v), leak) for v in z])


@pytest.mark.parametrize("leak", LEAKS)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_phi_matches_naive(name, leak):
    """The NumPy φ and φ' against the math-module versions.  Same formulas per element, but
    numpy's tanh/exp may differ from libm's by an ulp: 1e-15 relative, 1e-300 absolute for φ.
    φ' of tanh and sigmoid is 1 − t² / s(1 − s), which cancels where φ' ≪ 1, so one ulp in t
    becomes ≈ eps absolute there: φ' gets 2.3e-16 (≈ eps) absolute on top."""
    np.testing.assert_allclose(phi(name, Z, leak), _naive(naive.phi, name, Z, leak), rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(dphi(name, Z, leak), _naive(naive.dphi, name, Z, leak), rtol=1e-15, atol=2.3e-16)


@pytest.mark.parametrize("leak", LEAKS)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_kernel_activations_match_naive(name, leak):
    """numba's act_scalar: per-element libm, 1e-15 relative.  The fused passes' ``phi_f64``
    (the branch-free tanh ≤ 2 ulp, sigmoid ≤ 3 ulp): 1e-15 relative (4.5 ulp) as well."""
    want = _naive(naive.phi, name, Z, leak)
    act = ACTIVATION_IDS[name]
    got = np.array([numba_cpu.act_scalar(act, float(v), leak) for v in Z])
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-300)
    fused = np.array([numba_cpu.phi_f64(act, float(v), leak) for v in Z])
    np.testing.assert_allclose(fused, want, rtol=1e-15, atol=1e-300)


# Central differences: error = truncation h²/6·|φ'''| + round-off ≈ eps·(|φ| + |z|·|φ'|)/h.
# With h = 1e-6, |z| ≤ 6, |φ| ≤ 6, |φ'''| ≤ 2: truncation ≤ 3.4e-13, round-off ≤ 2.2e-16·12/1e-6
# ≈ 2.7e-9.  So |fd − φ'| ≤ 1e-8 (absolute, φ' is O(1)) plus 1e-8 relative, with margin.
H_FD = 1e-6


@pytest.mark.parametrize("leak", LEAKS)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_derivative_matches_central_differences(name, leak):
    z = np.linspace(-6.0, 6.0, 301)
    z = z[np.abs(z) > 100 * H_FD]  # away from the kinks of relu, leaky-relu and abs at 0
    fd = (phi(name, z + H_FD, leak) - phi(name, z - H_FD, leak)) / (2 * H_FD)
    np.testing.assert_allclose(dphi(name, z, leak), fd, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("name", ["relu", "leaky-relu", "abs"])
def test_kink_derivative_is_the_right_derivative(name):
    """At 0 the documented convention is the right derivative: one-sided difference from 0+."""
    h = 1e-3
    right = (phi(name, np.array([h]))[0] - phi(name, np.array([0.0]))[0]) / h
    assert dphi(name, np.array([0.0]))[0] == right


def test_sigmoid_is_stable_at_extremes():
    z = np.array([-800.0, -745.0, -40.0, 0.0, 40.0, 800.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        s = phi("sigmoid", z)
        ds = dphi("sigmoid", z)
    assert s[0] == 0.0 or 0.0 < s[0] < 1e-300  # e^{-800} underflows: the limit 0, never nan
    assert s[-1] == 1.0 and s[3] == 0.5
    assert np.all(np.isfinite(s)) and np.all((s >= 0) & (s <= 1))
    assert s[2] == pytest.approx(np.exp(-40.0), rel=1e-15)  # σ(−40) ≈ e^{-40}: no cancellation
    assert ds[0] == 0.0 and ds[-1] == 0.0 and ds[3] == 0.25
    # the numba kernel's scalar and the fused passes' φ too
    sid = ACTIVATION_IDS["sigmoid"]
    assert numba_cpu.act_scalar(sid, -800.0, 0.01) == 0.0 and numba_cpu.act_scalar(sid, 800.0, 0.01) == 1.0
    assert numba_cpu.phi_f64(sid, -800.0, 0.01) == 0.0 and numba_cpu.phi_f64(sid, 800.0, 0.01) == 1.0


def test_phi_keeps_the_dtype():
    for name in ACTIVATIONS:
        z = np.linspace(-2, 2, 7, dtype=np.float32)
        assert phi(name, z).dtype == np.float32, name
        assert dphi(name, z).dtype == np.float32, name


# ----------------------------------------------------------------------------- pieces
SLOPES = {"relu": lambda leak: (0.0, 1.0), "leaky-relu": lambda leak: (leak, 1.0),
          "abs": lambda leak: (-1.0, 1.0), "identity": lambda leak: (1.0,)}


@pytest.mark.parametrize("name", MAX_AFFINE)
def test_piece_index_selects_the_slope(name):
    """For a max-affine φ, the slope of the piece each entry sits on is φ'(z)."""
    z = np.linspace(-3, 3, 61)
    idx = piece(name, z)
    assert idx.dtype == np.int8
    slopes = np.array(SLOPES[name](0.01))
    np.testing.assert_array_equal(slopes[idx], dphi(name, z))
    # and φ is the affine piece: φ(z) = slope·z (all four pass through the origin)
    np.testing.assert_allclose(slopes[idx] * z, phi(name, z), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_piece_refuses_smooth_activations(name):
    with pytest.raises(ParameterError) as info:
        piece(name, np.zeros(3))
    assert info.value.param == "activation" and name in str(info.value)


def test_check_activation():
    assert check_activation("TANH") == "tanh"
    assert check_activation("Leaky_ReLU") == "leaky-relu"
    assert check_activation("leakyrelu") == "leaky-relu"
    assert check_activation(" abs ") == "abs"
    for bad, param in [("softplus", "activation"), (3, "activation"), (None, "activation")]:
        with pytest.raises(ParameterError) as info:
            check_activation(bad)
        assert info.value.param == param
    with pytest.raises(ParameterError) as info:
        check_activation("gelu", param="--activation")
    assert info.value.param == "--activation" and "tanh" in info.value.message
    with pytest.raises(ParameterError) as info:
        phi("gelu", np.zeros(2))
    assert info.value.param == "activation"
    with pytest.raises(ParameterError) as info:
        dphi("gelu", np.zeros(2))
    assert info.value.param == "activation"


def _ulps(got, ref):
    """|got − ref| in units of the spacing of ref (0 where both are equal, ±inf included)."""
    diff = np.abs(got - ref)
    return np.where(got == ref, 0.0, diff / np.spacing(np.abs(ref)))


def test_vectorised_tanh_is_within_two_ulp_of_libm():
    """The branch-free float64 tanh of the numba fused kernels (``numba_cpu.tanh_inplace``)
    against np.tanh (libm, correctly rounded to ≤ 1 ulp): ≤ 2 ulp on a dense grid across both
    branches (|x| < 0.625 rational; e^{2|x|} beyond, up to the clamp at 2|x| = 40), on random
    points, and on 300 decades of tiny and 20 decades of large magnitudes.  A wrong polynomial
    coefficient, reduction constant or exponent bit shows up as thousands of ulps."""
    x, _ = isa_child.activation_grids()
    z = x.copy()[None, :]
    numba_cpu.tanh_inplace(z)
    assert np.max(_ulps(z[0], np.tanh(x))) <= 2.0


def test_vectorised_tanh_special_values():
    """NaN stays NaN (the divergence check depends on it), ±inf → ±1, −0 keeps its sign.  (The
    vectorised sigmoid's accuracy and special values: tests/test_gated_kernels.py.)"""
    z = np.array([[np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-320]])
    numba_cpu.tanh_inplace(z)
    assert np.isnan(z[0, 0]) and z[0, 1] == 1.0 and z[0, 2] == -1.0
    assert z[0, 3] == 0.0 and np.signbit(z[0, 3]) and not np.signbit(z[0, 4]) and z[0, 5] == 1e-320

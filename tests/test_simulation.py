"""dynlab.simulate: every model × every activation × every kernel path against tests/naive.py,
float32 against float64, batched against unbatched, divergence reporting, and the Dataset
contract of docs/design.md, *Data contract*.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import dynlab
import naive
from conftest import ACTIVATIONS, D_HIDDEN, D_IN, KERNEL_PATHS, MODEL_CASES, force_path, inputs
from dynlab.errors import DivergenceError, ParameterError
from dynlab.models import RNN

# Tolerance of the kernel comparisons.  The kernels and the naive reference evaluate the same
# arithmetic in a different order (BLAS vs left-to-right sums over D = 4 hidden and d = 2 input
# terms, tanh-based vs exp-based sigmoid), so each step differs by a few ulps, ≈ 1e-16·|h|.
# The dynamics of every case are contracting or only mildly expanding over T = 30 steps
# (weight_scale 0.5, 0.1 for the RIN's U + I; no exponential growth: max|h| < 1e3 is asserted
# below — the marginal cases, identity φ with the iRNN's ∂h_m/∂h_{m-1} ≈ ∓I, drift linearly
# to O(100)), so the accumulated difference is ≲ T · 10 ulps ≈ 1e-13 · scale, scale =
# max(1, max|h|) (rounding errors are relative to the size of the whole state vector, not of
# each entry): 1e-12 relative plus 1e-12·scale absolute leaves a 10× margin and still
# catches any wrong term (O(1e-3) or more).
RTOL = ATOL = 1e-12


def _h0(B, seed=9):
    return 0.4 * np.random.default_rng(seed).standard_normal((B, D_HIDDEN))


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_every_kernel_path_matches_naive(case, activation, monkeypatch):
    B, T = 3, 30
    model = MODEL_CASES[case](activation, T)
    x = inputs(B, T, seed=10 * list(MODEL_CASES).index(case) + ACTIVATIONS.index(activation))
    h0 = _h0(B)
    ref = naive.simulate(model, x, h0)
    # the run must stay moderate for the tolerance argument above to hold (and be non-trivial)
    scale = max(1.0, float(np.max(np.abs(ref))))
    assert np.all(np.isfinite(ref)) and scale < 1e3
    assert np.max(np.abs(ref - ref[:, :1])) > 1e-3  # the state actually moves
    results = {}
    for path in KERNEL_PATHS:
        backend, kernel = force_path(monkeypatch, path)
        ds = dynlab.simulate(model, x, h0, backend=backend)
        assert ds.attrs["kernel"] == kernel, f"{path} did not run the {kernel} kernel"
        assert ds.h.dims == ("batch", "time", "unit") and ds.h.shape == (B, T, D_HIDDEN)
        np.testing.assert_allclose(ds.h.values, ref, rtol=RTOL, atol=ATOL * scale, err_msg=f"{path} vs naive")
        results[path] = ds.h.values
    for path in ("numba-loops", "numba-vectorised"):
        np.testing.assert_allclose(results[path], results["numpy"], rtol=RTOL, atol=ATOL * scale,
                                   err_msg=f"{path} vs numpy")


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_batched_equals_unbatched(case, monkeypatch):
    """Row b of a (B, T, d) run equals the (T, d) run of sequence b on every path.

    Same tolerance as above: a batched BLAS product may sum in a different order than the
    single-row one, nothing else differs.
    """
    B, T = 3, 40
    model = MODEL_CASES[case]("tanh", T)
    x = inputs(B, T, seed=5)
    h0 = _h0(B, seed=2)
    for path in KERNEL_PATHS:
        backend, _ = force_path(monkeypatch, path)
        batched = dynlab.simulate(model, x, h0, backend=backend)
        for i in range(B):
            single = dynlab.simulate(model, x[i], h0[i], backend=backend)
            assert single.h.dims == ("time", "unit")
            assert single.x.dims == ("time", "unit_in") and single.h0.dims == ("unit",)
            np.testing.assert_allclose(single.h.values, batched.h.values[i], rtol=RTOL, atol=ATOL)
            np.testing.assert_array_equal(single.x.values, x[i])


@pytest.mark.parametrize("case", list(MODEL_CASES))
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_float32_agrees_with_float64(case, activation, monkeypatch):
    """float32 runs return float32 states within 1e-5 of the float64 run.

    float32 rounds at 6e-8 per operation; with ≈ 10 operations per unit and step and
    contracting dynamics the accumulated error is ≲ T·10·6e-8 ≈ 2e-5 in the worst case and
    ≈ 1e-6 in practice (random-sign roundings), for states of size O(1): 1e-5 relative +
    1e-5 absolute.  A float32 run that secretly computed in float64 would agree to 1e-12, so
    the dtype of the result is checked too.
    """
    B, T = 3, 30
    model = MODEL_CASES[case](activation, T)
    x = inputs(B, T, seed=8)
    h0 = _h0(B, seed=4)
    for path in KERNEL_PATHS:
        backend, kernel = force_path(monkeypatch, path)
        h64 = dynlab.simulate(model, x, h0, backend=backend).h
        ds32 = dynlab.simulate(model, x, h0, backend=backend, dtype=np.float32)
        assert ds32.attrs["kernel"] == kernel
        assert ds32.h.dtype == np.float32, f"{path}: float32 run returned {ds32.h.dtype}"
        np.testing.assert_allclose(ds32.h.values.astype(np.float64), h64.values, rtol=1e-5, atol=1e-5)
        # and it really is single precision: float32 cannot agree to float64 round-off
        assert np.max(np.abs(ds32.h.values - h64.values)) > 1e-12


# ----------------------------------------------------------------------------- divergence
DBL_MAX = np.finfo(np.float64).max


def _overflow_step(a: float, growth: float = 3.0) -> int:
    """First t ≥ 1 with growth^t · a > DBL_MAX (so a·growth^t overflows to inf).

    The kernel computes h_t = 3·h_{t-1} exactly as a chain of multiplications, each rounded:
    relative error ≤ t·2⁻⁵³ ≈ 7e-14 at t ≈ 650, far less than the margin asserted here.
    """
    v = (math.log(DBL_MAX) - math.log(a)) / math.log(growth)
    assert abs(v - round(v)) > 1e-6, "too close to the overflow boundary to predict"
    return int(math.floor(v)) + 1


def _exploding_rnn():
    D = 3
    return RNN(U=3.0 * np.eye(D), W=np.zeros((D, 1)), b=np.zeros(D), activation="identity")


H0_EXPLODE = np.array([[1.0, 0.5, -0.25], [0.5, -3.0, 2.0]])


@pytest.mark.parametrize("path", list(KERNEL_PATHS))
def test_divergence_raises_at_the_exact_step(path, monkeypatch):
    """h_t = 3 h_{t-1} (U = 3I, identity, zero input and bias): h_t = 3^t h_0 overflows at the
    first t with 3^t·max|h_0| > 1.8e308, in closed form."""
    backend, kernel = force_path(monkeypatch, path)
    model = _exploding_rnn()
    T = 700
    x = np.zeros((2, T, 1))
    steps = [_overflow_step(np.max(np.abs(h))) for h in H0_EXPLODE]
    assert steps == [647, 646]  # log(1.8e308)/log 3 = 646.07; the 3.0 of batch 1 costs one step
    with pytest.raises(DivergenceError) as info:
        dynlab.simulate(model, x, H0_EXPLODE, backend=backend)
    err = info.value
    assert err.step == min(steps) and err.batch == int(np.argmin(steps))
    assert f"t={min(steps)}" in str(err)
    part = err.partial
    assert part is not None and part.attrs["kernel"] == kernel
    assert part.sizes["time"] == min(steps) - 1
    assert np.all(np.isfinite(part.h.values))
    np.testing.assert_array_equal(part.time.values, np.arange(1, min(steps)))
    # the partial states are the non-diverging prefix: 3·h is exact in every kernel
    # (multiplying by 3 and adding exact zeros), so compare bitwise with the naive chain
    ref = naive.simulate(model, x[:, : min(steps) - 1], H0_EXPLODE)
    np.testing.assert_array_equal(part.h.values, ref)
    # and with the closed form 3^t h_0 up to the t·2⁻⁵³ rounding of the chain
    t = np.arange(1, min(steps))[None, :, None]
    np.testing.assert_allclose(part.h.values, 3.0 ** t * H0_EXPLODE[:, None, :], rtol=1e-12, atol=0)
    # the model and inputs travel with the partial result
    np.testing.assert_array_equal(part.U.values, model.U)


@pytest.mark.parametrize("path", list(KERNEL_PATHS))
def test_divergence_flag_reports_every_sequence(path, monkeypatch):
    backend, _ = force_path(monkeypatch, path)
    model = _exploding_rnn()
    T = 700
    ds = dynlab.simulate(model, np.zeros((2, T, 1)), H0_EXPLODE, backend=backend, on_divergence="flag")
    expect = [_overflow_step(np.max(np.abs(h))) for h in H0_EXPLODE]
    np.testing.assert_array_equal(ds.diverged_at.values, expect)
    assert ds.diverged_at.dims == ("batch",)
    assert {"long_name", "units"} <= set(ds.diverged_at.attrs)
    # a finite run is flagged 0; unbatched gives a scalar
    ok = dynlab.simulate(model, np.zeros((10, 1)), [1.0, 1.0, 1.0], backend=backend, on_divergence="flag")
    assert ok.diverged_at.dims == () and int(ok.diverged_at) == 0
    np.testing.assert_array_equal(ok.h.values[-1], [3.0 ** 10] * 3)


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_the_batch_split_equals_one_block(case, monkeypatch):
    """The vectorised CPU kernel split into blocks of sequences, one thread each,
    gives the one-block states: each sequence's arithmetic is the same, only BLAS's row
    blocking may differ (≤ 1e-14 relative after 30 steps of contracting dynamics)."""
    from dynlab import config
    from dynlab.simulation import run_states

    backend, _ = force_path(monkeypatch, "numba-vectorised")
    monkeypatch.setattr(config, "VECTORISED_MIN_ROWS_PER_THREAD", 1)
    model = MODEL_CASES[case]("tanh", 30)
    x, h0 = inputs(7, 30, seed=4), _h0(7, seed=3)
    monkeypatch.setattr(config, "VECTORISED_SIMULATION_THREADS", 1)
    one, bad1, path = run_states(model, x, h0, backend)
    assert path == "batched"
    monkeypatch.setattr(config, "VECTORISED_SIMULATION_THREADS", 3)
    three, bad3, _ = run_states(model, x, h0, backend)
    np.testing.assert_allclose(three, one, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(bad1, bad3)


def test_the_batch_split_reports_divergence_per_sequence(monkeypatch):
    """Blocks stop on their own: a sequence of the last block that overflows first is the one
    reported, and the others keep their own overflow steps (closed form, as above)."""
    from dynlab import config

    backend, _ = force_path(monkeypatch, "numba-vectorised")
    monkeypatch.setattr(config, "VECTORISED_MIN_ROWS_PER_THREAD", 1)
    monkeypatch.setattr(config, "VECTORISED_SIMULATION_THREADS", 3)
    h0 = np.ones((7, 3)) * np.array([1, 1, 1, 1, 1, 3, 1])[:, None]  # sequence 5 (block 3) fails first
    x = np.zeros((7, 700, 1))
    ds = dynlab.simulate(_exploding_rnn(), x, h0, backend=backend, on_divergence="flag")
    np.testing.assert_array_equal(ds.diverged_at.values, [_overflow_step(1.0)] * 5 + [_overflow_step(3.0)]
                                  + [_overflow_step(1.0)])
    with pytest.raises(DivergenceError) as info:
        dynlab.simulate(_exploding_rnn(), x, h0, backend=backend)
    assert info.value.step == _overflow_step(3.0) and info.value.batch == 5


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_the_fused_passes_equal_the_reference_for_every_activation(case, monkeypatch):
    """The numba backend's batched path (one product and one fused pass per inner step, φ the
    vectorisable tanh/sigmoid ≤ 3 ulp) against the NumPy reference for every activation: the same
    arithmetic up to fused multiply-adds and those ulps per step, so 1e-12 relative as in the
    kernel comparisons above; and its divergence steps in closed form."""
    backend, _ = force_path(monkeypatch, "numba-vectorised")
    for activation in ACTIVATIONS:
        model = MODEL_CASES[case](activation, 30)
        x, h0 = inputs(3, 30, seed=6), _h0(3, seed=8)
        fused = dynlab.simulate(model, x, h0, backend=backend)
        assert fused.attrs["kernel"] == "batched"
        ref = dynlab.simulate(model, x, h0, backend="numpy").h.values
        scale = max(1.0, float(np.max(np.abs(ref))))
        np.testing.assert_allclose(fused.h.values, ref, rtol=RTOL, atol=ATOL * scale, err_msg=activation)
    flagged = dynlab.simulate(_exploding_rnn(), np.zeros((2, 700, 1)), H0_EXPLODE, backend=backend,
                              on_divergence="flag")
    np.testing.assert_array_equal(flagged.diverged_at.values, [_overflow_step(np.max(np.abs(h))) for h in H0_EXPLODE])


def test_divergence_unbatched_single_sequence():
    model = _exploding_rnn()
    with pytest.raises(DivergenceError) as info:
        dynlab.simulate(model, np.zeros((1300, 1)), [0.0, 0.0, 1e-300])
    # 3^t · 1e-300 > DBL_MAX first at t = floor((709.78 + 690.78)/1.0986) + 1 = 1275
    assert info.value.step == _overflow_step(1e-300) == 1275 and info.value.batch == 0
    assert info.value.partial.h.dims == ("time", "unit")
    assert info.value.partial.sizes["time"] == info.value.step - 1


# ----------------------------------------------------------------------------- arguments
def test_simulate_argument_errors():
    m = dynlab.make_model("rnn", 3, 2, seed=0)
    x = np.zeros((5, 2))
    for kwargs, param in [({"backend": "fortran"}, "backend"), ({"on_divergence": "ignore"}, "on_divergence"),
                          ({"dtype": np.int32}, "dtype"), ({"h0": np.zeros(4)}, "h0"),
                          ({"h0": [np.nan, 0.0, 0.0]}, "h0")]:
        with pytest.raises(ParameterError) as info:
            dynlab.simulate(m, x, **kwargs)
        assert info.value.param == param
    with pytest.raises(ParameterError) as info:
        dynlab.simulate("rnn", x)
    assert info.value.param == "model"
    with pytest.raises(ParameterError) as info:
        dynlab.simulate(m, np.zeros((0, 2)))
    assert info.value.param == "x"


def test_one_dimensional_input_for_d1():
    """A (T,) x is read as (T, 1) when the model takes one input."""
    m = dynlab.make_model("irnn", 2, 1, K=3, seed=0)
    x = np.linspace(-1, 1, 12)
    a = dynlab.simulate(m, x, backend="numpy")
    np.testing.assert_allclose(a.h.values, naive.simulate(m, x[:, None]), rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------- data contract
EXPECTED_PARAMS = {
    "rnn": {"U", "W", "b"},
    "fastrnn": {"U", "W", "b", "alpha", "beta"},
    "antisymmetric": {"M", "W", "b", "eps", "gamma"},
    "rin": {"U", "W", "b"},
    "irnn": {"U", "W", "b", "eta", "alpha"},
    "irnn-lowrank": {"V", "H", "W", "b", "eta", "alpha"},
    "ctrnn": {"U", "W", "b", "tau", "alpha"},
}
EXPECTED_SETTINGS = {
    "rnn": {"activation", "leak", "init"},
    "fastrnn": {"activation", "leak"},
    "antisymmetric": {"activation", "leak"},
    "rin": {"activation", "leak"},
    "irnn": {"activation", "leak", "K", "g0", "sign", "lowrank", "P"},
    "ctrnn": {"activation", "leak", "dt", "substeps", "method", "rtol", "atol"},
}
PARAM_DIMS = {"U": ("unit", "unit_from"), "M": ("unit", "unit_from"), "W": ("unit", "unit_in"),
              "b": ("unit",), "V": ("unit", "rank"), "H": ("rank", "unit_from")}


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_dataset_contract(case):
    T, B = 12, 2
    model = MODEL_CASES[case]("tanh", T)
    x = inputs(B, T)
    ds = dynlab.simulate(model, x, _h0(B), backend="numpy", command="dynlab simulate --test")
    # dimensions and the state / input variables
    assert ds.h.dims == ("batch", "time", "unit")
    assert ds.x.dims == ("batch", "time", "unit_in") and ds.h0.dims == ("batch", "unit")
    np.testing.assert_array_equal(ds.x.values, x)
    np.testing.assert_array_equal(ds.h0.values, _h0(B))
    np.testing.assert_array_equal(ds.time.values, np.arange(1, T + 1))
    allowed_dims = {"batch", "time", "unit", "unit_in", "unit_from", "k", "rank", "eta_time"}
    assert set(ds.dims) <= allowed_dims, set(ds.dims) - allowed_dims
    # parameters as variables, with the model's values
    key = "irnn-lowrank" if "lowrank" in case else model.name
    names = EXPECTED_PARAMS[key]
    assert names <= set(ds.data_vars), names - set(ds.data_vars)
    for name in names:     # the parameters (for eq. 9 the paper's W, b, not the step's P W, P b)
        np.testing.assert_array_equal(ds[name].values, np.asarray(model.params()[name], dtype=np.float64))
        if name in PARAM_DIMS:
            assert ds[name].dims == PARAM_DIMS[name]
    if model.name == "irnn" and np.ndim(model.eta) == 1:
        assert ds.eta.dims == ("k",)
    if model.name == "irnn" and np.ndim(model.eta) == 2:
        assert ds.eta.dims == ("eta_time", "k")
    # attrs: model, seed, backend, version, command, every setting
    a = ds.attrs
    assert a["model"] == model.name
    assert a["seed"] == model.seed and a["weight_scale"] == model.weight_scale
    assert a["backend"] == "numpy" and a["dynlab_version"] == dynlab.__version__
    assert a["command"] == "dynlab simulate --test"
    for s in EXPECTED_SETTINGS[model.name]:
        assert s in a, f"setting {s} missing from attrs"
        assert a[s] == getattr(model, s), s
    # every data variable and coordinate labels itself
    for name, var in ds.variables.items():
        assert var.attrs.get("long_name"), f"{name} has no long_name"
        assert "units" in var.attrs, f"{name} has no units"


def test_dataset_default_command_is_recorded():
    m = dynlab.make_model("rnn", 2, 1, seed=0)
    ds = dynlab.simulate(m, np.zeros((3, 1)))
    assert isinstance(ds.attrs["command"], str) and ds.attrs["command"]
    assert ds.attrs["backend"] == "numba"  # the documented default

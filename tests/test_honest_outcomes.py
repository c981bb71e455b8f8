"""Honest outcomes: no silent NaN for 0/0 (a documented limit instead), partial results kept by
every command that can diverge, a failed reference makes ``converge`` exit 1, complex weights and
non-boolean spellings refused, and ``train --iterations 0`` refused up front."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

import dynlab as dl
from dynlab.cli import main
from dynlab.errors import ParameterError


def _cli(args):
    return CliRunner().invoke(main, args)


def _one_error_line(r):
    lines = [ln for ln in r.output.splitlines() if ln.startswith("Error")]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


# ---------------------------------------------------------------- 0/0 has a documented limit
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_ratio_of_a_zero_jacobian_is_its_limit_zero(backend):
    """U = 0 (tanh RNN, weight scale 0): ∂h_T/∂h_1 = ∂h_T/∂h_(T−1) = 0.  The ratio is defined by
    its limit along U → εU: ratio(ε) = O(ε^(T−2)) → 0, checked here on the scaling itself."""
    x = dl.tasks.make_input("random-walk", 8, 1, seed=0)
    zero = dl.gradient_norms(dl.make_model("rnn", 4, 1, seed=0, weight_scale=0.0), x, backend=backend)
    assert float(zero["ratio"]) == 0.0 and np.isneginf(zero["log_jac_norm"].values[0])
    r = [float(dl.gradient_norms(dl.make_model("rnn", 4, 1, seed=0, weight_scale=e), x, backend=backend)["ratio"])
         for e in (1e-3, 1e-4)]
    # T = 8: ratio ∝ ε^6 as ε → 0 (tanh' → 1 on the tiny states): a factor 10^6 per decade of ε
    assert r[0] / r[1] == pytest.approx(1e6, rel=1e-2)
    two = dl.gradient_norms(dl.make_model("rnn", 4, 1, seed=0, weight_scale=0.0), x[:2], backend=backend)
    assert float(two["ratio"]) == 1.0  # T = 2: the same matrix over itself


@pytest.mark.parametrize("batched", [True, False])
def test_sweep_ratio_uses_the_same_limit(batched):
    s = dl.sweep("gradient_norms", {"weight_scale": [0.0, 0.5]}, fixed={"model": "rnn", "hidden": 4, "steps": 20},
                 batched=batched)
    assert s["ratio"].values[0] == 0.0 and np.isneginf(s["log_ratio"].values[0])
    assert np.isfinite(s["ratio"].values).all()


# ---------------------------------------------------------------- partial results on divergence
DIVERGING = ["--activation", "relu", "--weight-scale", "30", "--steps", "500", "--hidden", "8"]


@pytest.mark.parametrize("command,model", [("spectrum", "rnn"), ("partition", "rnn"), ("equilibria", "rnn"),
                                           ("converge", "irnn"), ("simulate", "rnn")])
def test_every_command_that_can_diverge_keeps_its_partial_results(command, model, tmp_path):
    path = tmp_path / f"{command}.nc"
    r = _cli([command, "--model", model, *DIVERGING, "--data", str(path)])
    assert r.exit_code == 1
    line = _one_error_line(r)
    assert f"partial results written to {path}" in line and "give --data" not in line
    ds = xr.open_dataset(path)
    assert 0 < ds.sizes["time"] < 500
    for v in ds.data_vars.values():
        if v.dtype.kind == "f":
            assert np.isfinite(v.values).all(), v.name
    ds.close()


def test_partial_spectrum_equals_the_spectrum_of_the_finite_prefix():
    m = dl.make_model("rnn", 8, 1, seed=0, activation="relu", weight_scale=30)
    x = dl.tasks.make_input("random-walk", 500, 1, seed=0)
    with pytest.raises(dl.errors.DivergenceError) as info:
        dl.spectrum(m, x)
    part = info.value.partial
    n = part.sizes["time"]
    assert n == info.value.step - 1
    ref = dl.spectrum(m, x[:n])
    np.testing.assert_array_equal(part["max_real"].values, ref["max_real"].values)


# ---------------------------------------------------------------- converge's reference
def test_converge_exits_1_when_its_reference_did_not_converge(tmp_path):
    path = tmp_path / "c.nc"
    r = _cli(["converge", "--hidden", "16", "--weight-scale", "3", "--steps", "20", "--data", str(path)])
    assert r.exit_code == 1
    line = _one_error_line(r)
    assert "reference root did not converge" in line and "data kept" in line
    ds = xr.open_dataset(path)
    bad = ds["reference_converged"].values == 0
    assert bad.any() and (ds["reference_residual"].values[bad] > 1e-10).all()
    ds.close()
    ok = _cli(["converge", "--hidden", "16", "--weight-scale", "0.5", "--steps", "20"])
    assert ok.exit_code == 0, ok.output  # the control: a contracting recursion, its reference converges


# ---------------------------------------------------------------- values refused, not reinterpreted
def test_complex_weights_are_refused_not_truncated():
    with pytest.raises(ParameterError, match="complex"):
        dl.models.RNN(np.eye(2) * (1 + 1j), np.ones((2, 1)), np.zeros(2))
    with pytest.raises(ParameterError, match="complex"):
        dl.models.RNN([[1j, 0], [0, 1]], np.ones((2, 1)), np.zeros(2))
    dl.models.RNN(np.eye(2) + 0j.real, np.ones((2, 1)), np.zeros(2))  # real values pass


@pytest.mark.parametrize("value,ok", [("true", True), ("false", True), ("True", True), ("maybe", False),
                                      ("yes", False), ("2", False)])
def test_booleans_accept_only_true_or_false(value, ok):
    r = _cli(["simulate", "--model", "rnn", "--set", f"identity_init={value}", "--steps", "3", "-q"])
    if ok:
        assert r.exit_code == 0, r.output
    else:
        assert r.exit_code == 2 and "identity_init: must be true or false" in _one_error_line(r)


def test_train_iterations_zero_is_refused_up_front():
    r = _cli(["train", "--iterations", "0", "--steps", "10"])
    assert r.exit_code == 2 and "--iterations: must be ≥ 1" in _one_error_line(r)

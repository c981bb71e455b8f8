"""``dynlab gradients``: the picture, the printed table and the Dataset against the library.

Every entry of the written Dataset is recomputed from the parameters stored in it
(``model_from_dataset``) with the public ``gradient_norms`` and ``lyapunov`` and must match
exactly (same kernels, same inputs); the table must print the Dataset's numbers.
"""
from __future__ import annotations

import numpy as np
import pytest

import dynlab
from conftest import cli_ok as ok, cli_run as run


def _entries(ds):
    """The entry names of a gradients Dataset (every entry's parameters under ``<name>__``)."""
    return [str(n) for n in ds["model"].values]


def test_gradients_irnn_K_list_and_compare(tmp_path):
    png, nc = tmp_path / "g.png", tmp_path / "g.nc"
    res = ok("gradients", "--model", "irnn", "--K", "1,5", "--compare", "rnn,fastrnn", "--steps", "300",
             "--input", "random-walk", "--hidden", "2", "--out", png, "--data", nc)   # the setting this claim was measured in
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ds = dynlab.read_dataset(nc)
    assert _entries(ds) == ["irnn-K1", "irnn-K5", "rnn", "fastrnn"]
    # the attrs state what the file holds: each entry its own K, none at the top level
    assert "K" not in ds.attrs and ds.attrs["irnn-K1__K"] == 1 and ds.attrs["irnn-K5__K"] == 5
    assert ds.attrs["variance"] == 1.0  # the walk's effective variance, not "none"
    assert ds["jac_norm"].dims == ("model", "time") and ds["lyapunov"].sizes["exponent"] == 1
    x = ds["x"].values
    lines = res.stdout.strip().splitlines()
    for name in _entries(ds):
        model = dynlab.model_from_dataset(ds, entry=name)
        g = dynlab.gradient_norms(model, x)
        np.testing.assert_array_equal(ds["jac_norm"].sel(model=name).values, g["jac_norm"].values)
        np.testing.assert_array_equal(ds["step_norm"].sel(model=name).values, g["step_norm"].values)
        assert float(ds["ratio"].sel(model=name)) == float(g["ratio"])
        lam = dynlab.lyapunov(model, x, k=1)["lyapunov"].values
        np.testing.assert_array_equal(ds["lyapunov"].sel(model=name).values, lam)
        # the table prints this entry's ratio and top exponent
        row = next(line for line in lines if line.startswith(
            {"irnn-K1": "iRNN (K=1)", "irnn-K5": "iRNN (K=5)", "rnn": "RNN", "fastrnn": "FastRNN"}[name]))
        assert float(row.split()[-4]) == pytest.approx(float(g["ratio"]), rel=1e-3, abs=1e-300)
        assert float(row.split()[-1]) == pytest.approx(float(lam[0]), rel=1e-4)
    # the paper's point, on the data: K = 5 keeps the ratio near 1, K = 1 lets it decay
    assert abs(float(ds["ratio"].sel(model="irnn-K5")) - 1) < 0.05
    assert float(ds["ratio"].sel(model="irnn-K1")) < 0.5


def test_gradients_lyapunov_spectrum_and_no_step_norms(tmp_path):
    """--lyapunov: all D exponents, whose sum is the mean ln|det J_t| (1e-10).  --no-step-norms
    drops ``step_norm`` and, at D = 40 > 32, runs the iRNN's curve in reverse mode: the curve
    equals the default run's to 1e-12 relative (certified norms, rounding of other products)."""
    nc, nc2 = tmp_path / "a.nc", tmp_path / "b.nc"
    ok("gradients", "--model", "irnn", "--hidden", "40", "--K", "3", "--steps", "150", "--lyapunov", "--data", nc)
    ok("gradients", "--model", "irnn", "--hidden", "40", "--K", "3", "--steps", "150", "--no-step-norms",
       "--data", nc2)
    a, b = dynlab.read_dataset(nc), dynlab.read_dataset(nc2)
    assert a["lyapunov"].sizes["exponent"] == 40 and "step_norm" in a and "step_norm" not in b
    J = dynlab.jacobians(dynlab.model_from_dataset(a, entry="irnn"), a["x"].values, inputs=False)["jac"].values
    logdet = np.linalg.slogdet(J)[1].mean()
    assert float(a["lyapunov"].sum()) == pytest.approx(logdet, rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(b["jac_norm"].values, a["jac_norm"].values, rtol=1e-12)


@pytest.mark.parametrize("args, option", [
    (["--K", "1,x"], "--K"),
    (["--K", "1,0"], "--K"),
    (["--steps", "1"], "--steps"),
    (["--model", "nope"], "--model"),
    (["--model", "rnn", "--K", "1,5"], "--K"),
    (["--compare", "irnn"], "--compare"),
])
def test_gradients_bad_input_is_one_line_naming_the_option(args, option):
    result = run("gradients", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {option}: "), result.stderr
    assert "Traceback" not in result.stderr

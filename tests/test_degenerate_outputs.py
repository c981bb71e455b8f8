"""No silent NaN (issue 19, item 4): every command run on degenerate settings (weight scale 0, T = 1
or 2, D = 1) writes a Dataset whose non-finite floats all sit in variables that say why (their
``note`` attribute: a documented limit such as ln 0 = −inf, or an undefined fit), or refuses the
setting with exit 2.  Tiny sizes: the whole file runs in seconds."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

from conftest import cli_run as run

DEGENERATE = {"weight scale 0": ["--weight-scale", "0", "--steps", "4"], "T = 1": ["--steps", "1"],
              "T = 2, D = 1, weight scale 0": ["--steps", "2", "--hidden", "1", "--weight-scale", "0"]}
COMMANDS = {
    "simulate": ["--model", "rnn"],
    "phase": ["--model", "rnn", "--compare", "fastrnn"],
    "gradients": ["--model", "rnn", "--compare", "fastrnn,rin", "--lyapunov"],
    "equilibria": ["--model", "ctrnn"],
    "spectrum": ["--batch", "2"],
    "converge": ["--K-max", "6"],
    "partition": ["--batch", "3"],
    "train": ["--iterations", "2", "--batch", "4", "--record-every", "1"],
}


@pytest.mark.parametrize("setting", list(DEGENERATE))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_silent_non_finite_value(command, setting, tmp_path):
    data = tmp_path / "d.nc"
    args = [command, *COMMANDS[command], *DEGENERATE[setting], "--data", data, "-q"]
    if command == "train" and "--hidden" not in args:
        args += ["--hidden", "2"]
    r = run(*args)
    if r.exit_code == 2:  # refused up front, with one line naming the option
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: --") and "Traceback" not in r.output, r.output
        return
    assert r.exit_code == 0, (r.output, r.exception)
    ds = xr.load_dataset(data)
    for name, var in {**ds.data_vars, **ds.coords}.items():
        if var.dtype.kind in "fc" and not np.isfinite(var.values).all():
            assert "note" in var.attrs, f"{command} ({setting}): {name} is not finite and says nothing about it"


def test_an_undefined_fitted_rate_is_said_not_warned(tmp_path):
    """U = 0 with αη = 1: the recursion is exact after one step, no line to fit: the rate is NaN with its
    reason in the Dataset and the summary, and no RuntimeWarning (All-NaN slice) is printed."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = run("converge", "--weight-scale", "0", "--steps", "3", "--data", tmp_path / "c.nc")
    assert r.exit_code == 0, (r.output, r.exception)
    assert "fitted rate: none (undefined at 3/3 inputs" in r.output and "nan" not in r.output
    ds = xr.load_dataset(tmp_path / "c.nc")
    assert np.isnan(ds["rate"].values).all() and (ds["rate_points"].values < 3).all()
    assert "no line to fit" in ds["rate"].attrs["note"]


def test_the_sweep_rate_is_the_worst_defined_one():
    import dynlab as dl

    s = dl.sweep("convergence", {"weight_scale": [0.0, 0.5]}, fixed={"model": "irnn", "hidden": 2, "steps": 3,
                                                                     "eta": 1.0, "alpha": 1.0})
    rate = s["rate"].values
    assert np.isnan(rate[0]) and np.isfinite(rate[1]), rate
    assert "NaN where" in s["rate"].attrs["long_name"]


@pytest.mark.parametrize("analysis", ["gradient_norms", "lyapunov", "spectrum", "simulate", "convergence",
                                      "irnn_equilibrium"])
def test_sweep_outputs_at_weight_scale_0_say_where_they_are_not_finite(analysis):
    import dynlab as dl

    model = "irnn" if analysis in ("convergence", "irnn_equilibrium") else "rnn"
    s = dl.sweep(analysis, {"weight_scale": [0.0, 0.5]}, fixed={"model": model, "hidden": 2, "steps": 5})
    for name, var in s.data_vars.items():
        if var.dtype.kind == "f" and not np.isfinite(var.values).all():
            assert "−inf" in var.attrs["long_name"] or "NaN" in var.attrs["long_name"], (analysis, name)

"""The command line: options, outputs checked against the library, and one-line errors.

Numbers written by a command are checked against an independent recomputation: the model
is rebuilt from the written file (``model_from_dataset``) and simulated again through the
Python API (same backend, same kernel, so equality is exact), and equilibrium residuals are
recomputed here with plain NumPy from the stored parameters.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import dynlab
from conftest import cli_ok as ok, cli_run as run
from dynlab.cli import main
from dynlab.cli.options import ACTIVATION_NAMES, INPUT_KINDS, MODEL_NAMES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    """(width, height) from a PNG's IHDR chunk, after checking the magic bytes."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def tanh_residual(ds, s, x, prefix=""):
    """max-abs of α s − tanh(U s + W x + b), from the stored parameters, in plain NumPy."""
    U, W, b = (ds[prefix + k].values for k in ("U", "W", "b"))
    alpha = float(ds[prefix + "alpha"])
    return np.max(np.abs(alpha * s - np.tanh(s @ U.T + x @ W.T + b)), axis=-1)


# ----------------------------------------------------------------------------- basics
def test_version():
    result = ok("--version")
    assert result.stdout.strip() == f"dynlab {dynlab.__version__}"


def test_console_script_help():
    """The installed ``dynlab`` script starts and answers --help."""
    script = os.path.join(os.path.dirname(sys.executable), "dynlab")
    if not os.path.exists(script):
        script = shutil.which("dynlab")
    assert script, "the dynlab console script is not installed (pip install -e .)"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for command in ("models", "simulate", "phase"):
        assert command in proc.stdout


def test_cli_import_is_light():
    """``dynlab --help`` imports none of the heavy libraries (that is what keeps it fast)."""
    code = ("import sys, dynlab.cli; "
            "print(','.join(m for m in ('numpy', 'xarray', 'matplotlib', 'numba', 'scipy') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_help_on_every_command():
    assert set(main.commands) >= {"models", "simulate", "phase"}
    for name in main.commands:
        assert "Usage:" in ok(name, "--help").stdout


def test_choices_match_the_library():
    assert MODEL_NAMES == tuple(dynlab.MODELS)
    assert ACTIVATION_NAMES == tuple(dynlab.ACTIVATIONS)
    assert INPUT_KINDS == tuple(dynlab.tasks.INPUTS)


def test_models_lists_every_model_with_settings():
    out = ok("models").stdout
    for name, cls in dynlab.MODELS.items():
        assert re.search(rf"^{name}\s+{re.escape(cls.DESCRIPTION)}$", out, re.M), name
    assert "weight_scale=0.5" in out and "K=1" in out  # irnn's own defaults
    assert len(re.findall(r"^\S", out, re.M)) == len(dynlab.MODELS)


# --------------------------------------------------------------------------- simulate
def test_simulate_data_equals_library(tmp_path):
    nc, png = tmp_path / "s.nc", tmp_path / "s.png"
    result = ok("simulate", "--model", "irnn", "--K", "5", "--eta", "0.5", "--hidden", "3", "--inputs", "2",
                "--steps", "200", "--batch", "2", "--data", nc, "--out", png)
    assert "h has shape (2 batch × 200 time × 3 unit)" in result.stdout
    ds = dynlab.read_dataset(nc)
    model = dynlab.model_from_dataset(ds)
    assert (model.K, model.eta, model.hidden, model.inputs) == (5, 0.5, 3, 2)
    again = dynlab.simulate(model, ds["x"].values, backend=ds.attrs["backend"])
    np.testing.assert_array_equal(ds["h"].values, again["h"].values)
    assert ds.attrs["command"].startswith("dynlab simulate --model irnn")
    assert all("long_name" in ds[v].attrs and "units" in ds[v].attrs for v in ds.data_vars)
    assert png_size(png)[0] > 0


@pytest.mark.parametrize("name, weight_scale, activation", [("irnn", 0.5, "tanh"), ("rin", 0.1, "relu"),
                                                            ("rnn", 1.0, "tanh")])
def test_unset_options_keep_model_defaults(tmp_path, name, weight_scale, activation):
    nc = tmp_path / "d.nc"
    ok("simulate", "--model", name, "--steps", "5", "--data", nc)
    attrs = dynlab.read_dataset(nc).attrs
    assert (attrs["weight_scale"], attrs["activation"]) == (weight_scale, activation)


def test_simulate_from_weights(tmp_path):
    w = dynlab.save_model(dynlab.make_model("fastrnn", 3, 2, seed=7, beta=1.5), tmp_path / "w.npz")
    nc = tmp_path / "d.nc"
    ok("simulate", "--weights", w, "--steps", "50", "--seed", "3", "--data", nc)
    ds = dynlab.read_dataset(nc)
    assert ds.attrs["model"] == "fastrnn" and float(ds["beta"]) == 1.5
    expect = dynlab.simulate(dynlab.load_model(w), dynlab.tasks.noise(50, 2, seed=3),  # the default input
                             backend=ds.attrs["backend"])
    np.testing.assert_array_equal(ds["h"].values, expect["h"].values)
    for args, option in ((["--K", "5"], "--K"), (["--model", "rnn"], "--model"), (["--hidden", "4"], "--hidden")):
        result = run("simulate", "--weights", w, *args)
        assert result.exit_code == 2 and result.stderr.startswith(f"Error: {option}:")


def test_divergence_exits_1_and_keeps_partial_data(tmp_path):
    nc = tmp_path / "d.nc"
    result = run("simulate", "--model", "rnn", "--activation", "identity", "--weight-scale", "50",
                 "--steps", "500", "--data", nc)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    step = int(re.search(r"step t=(\d+)", lines[0]).group(1))
    assert 1 < step <= 500 and str(nc) in lines[0]
    part = dynlab.read_dataset(nc)
    assert part.sizes["time"] == step - 1 and np.all(np.isfinite(part["h"].values))
    again = dynlab.simulate(dynlab.model_from_dataset(part), part["x"].values, backend=part.attrs["backend"])
    np.testing.assert_array_equal(part["h"].values, again["h"].values)


# ------------------------------------------------------------------------------ phase
def test_phase_divergence_keeps_every_model(tmp_path):
    """One diverging entry: exit 1, and the file holds all entries (NaN past the failure)."""
    nc = tmp_path / "p.nc"
    result = run("phase", "--model", "rnn", "--compare", "irnn", "--activation", "identity",
                 "--weight-scale", "50", "--steps", "500", "--data", nc)
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    step = int(re.search(r"step t=(\d+)", result.stderr).group(1))
    ds = dynlab.read_dataset(nc)
    assert list(ds["diverged_at"].values) == [step, 0]
    rnn = ds["h"].sel(model="rnn").values
    assert np.all(np.isfinite(rnn[:step - 1])) and np.all(np.isnan(rnn[step - 1:]))
    assert np.all(np.isfinite(ds["h"].sel(model="irnn").values))


def test_phase_irnn_writes_png_and_dataset(tmp_path):
    png, nc = tmp_path / "p.png", tmp_path / "p.nc"
    result = ok("phase", "--model", "irnn", "--K", "5", "--steps", "200", "--input", "random-walk", "--out", png,
                "--data", nc)
    width, height = png_size(png)
    assert width > 0 and height > 0
    ds = dynlab.read_dataset(nc)
    assert list(ds["model"].values) == ["irnn"]
    assert ds["h"].dims == ("model", "time", "unit") and ds["x"].dims == ("time", "unit_in")
    assert ds.attrs["irnn__K"] == 5 and ds.attrs["variance"] == 10.0 and ds.attrs["input_seed"] == 0
    assert "K" not in ds.attrs  # nothing at the top level describes one entry only
    # the paper's input, asked for: a random walk with variance 10 (its default variance there)
    np.testing.assert_array_equal(ds["x"].values, dynlab.tasks.random_walk(200, 1, variance=10.0, seed=0))
    # s_m = h_m + h_{m-1} with h_0 = 0, and eq_residual is its equation's residual
    h = ds["h"].sel(model="irnn").values
    np.testing.assert_array_equal(ds["s"].values, h + np.vstack([np.zeros((1, 2)), h[:-1]]))
    np.testing.assert_allclose(ds["eq_residual"].values,
                               tanh_residual(ds, ds["s"].values, ds["x"].values, "irnn__"), rtol=0, atol=1e-15)
    # the curve: 400 inputs spanning [min x, max x], each point solving α s = tanh(U s + W x + b)
    x = ds["x"].values[:, 0]
    assert ds.sizes["x_grid"] == 400
    assert ds["x_grid"].values[0] == x.min() and ds["x_grid"].values[-1] == x.max()
    assert tanh_residual(ds, ds["s_eq"].values, ds["x_eq"].values, "irnn__").max() < 1e-10
    assert ds["s_eq_converged"].values.all()
    assert all("long_name" in ds[v].attrs and "units" in ds[v].attrs for v in ds.data_vars)
    assert "median" in result.stdout and "max" in result.stdout


def test_phase_large_K_puts_s_on_the_curve(tmp_path):
    """With η = α = 1 the inner loop is the Picard iteration; at K = 60 s_m solves the equation."""
    nc = tmp_path / "p.nc"
    ok("phase", "--model", "irnn", "--K", "60", "--eta", "1", "--alpha", "1", "--steps", "200", "--data", nc)
    ds = dynlab.read_dataset(nc)
    assert ds["eq_residual"].max() < 1e-10
    assert tanh_residual(ds, ds["s"].values, ds["x"].values, "irnn__").max() < 1e-10
    # not vacuous: one inner step (SiRNN) leaves s_m visibly off the curve
    ok("phase", "--model", "irnn", "--K", "1", "--steps", "200", "--data", nc)
    assert dynlab.read_dataset(nc)["eq_residual"].max() > 1e-3


def test_phase_compare(tmp_path):
    png, nc = tmp_path / "p.png", tmp_path / "p.nc"
    ok("phase", "--model", "irnn", "--K", "5", "--compare", "rnn,fastrnn", "--steps", "200",
       "--out", png, "--data", nc)
    ds = dynlab.read_dataset(nc)
    assert ds.sizes["model"] == 3 and list(ds["model"].values) == ["irnn", "rnn", "fastrnn"]
    # every entry alike: its parameters and settings under its own prefix, none at the top level
    assert {"irnn__U", "irnn__W", "irnn__b", "irnn__eta", "irnn__alpha", "rnn__U", "fastrnn__U",
            "fastrnn__beta"} <= set(ds.data_vars)
    assert not {"U", "W", "b", "eta", "alpha"} & set(ds.data_vars)
    assert ds.attrs["models"] == "irnn,rnn,fastrnn" and ds.attrs["model"] == "irnn,rnn,fastrnn"
    assert ds.attrs["irnn__model"] == "irnn" and ds.attrs["fastrnn__model"] == "fastrnn"
    # every entry is the library's simulation of the stored model on the stored input
    for name in ("irnn", "rnn", "fastrnn"):
        model = dynlab.model_from_dataset(ds, entry=name)
        assert model.name == name and model.seed == 0
        again = dynlab.simulate(model, ds["x"].values, backend=ds.attrs["backend"])
        np.testing.assert_array_equal(ds["h"].sel(model=name).values, again["h"].values)
    # compared models keep their own defaults (rnn: weight_scale 1, irnn: 0.5)
    assert ds.attrs["rnn__weight_scale"] == 1.0 and ds.attrs["irnn__weight_scale"] == 0.5
    assert png_size(png)[0] > 0


def test_phase_projects_on_top_two_pcs(tmp_path):
    nc = tmp_path / "p.nc"
    ok("phase", "--model", "irnn", "--K", "5", "--hidden", "5", "--compare", "rnn", "--steps", "200",
       "--data", nc, "--out", tmp_path / "p.png")
    ds = dynlab.read_dataset(nc)
    assert "projected on top-2 PCs" in ds.attrs["projection"]
    assert ds["pc_components"].dims == ("model", "pc", "unit") and ds.sizes["pc"] == 2
    for name in ("irnn", "rnn"):
        h = ds["h"].sel(model=name).values
        comps = ds["pc_components"].sel(model=name).values
        np.testing.assert_allclose(comps @ comps.T, np.eye(2), atol=1e-12)
        np.testing.assert_allclose(ds["pc_mean"].sel(model=name).values, h.mean(axis=0), atol=1e-12)
        # explained fractions: variance along each axis over the total, and no other direction does better
        centred = h - h.mean(axis=0)
        frac = (centred @ comps.T).var(axis=0) / centred.var(axis=0).sum()
        np.testing.assert_allclose(ds["pc_explained"].sel(model=name).values, frac, atol=1e-12)
        top = np.linalg.eigvalsh(np.cov(centred.T, bias=True))[::-1][:2] / centred.var(axis=0).sum()
        np.testing.assert_allclose(frac, top, atol=1e-10)
    # the picture is redrawn from the file alone, with projected labels
    fig = dynlab.plot.plot_phase(ds)
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(axes) == 2
    assert all("projected on top-2 PCs" in ax.get_title() for ax in axes)
    assert axes[0].get_xlabel().startswith("PC1 (") and "% var" in axes[0].get_xlabel()


@pytest.mark.parametrize("suffix, magic", [(".pdf", b"%PDF"), (".svg", b"<?xml")])
def test_phase_other_formats(tmp_path, suffix, magic):
    out = tmp_path / ("p" + suffix)
    ok("phase", "--steps", "50", "--out", out)
    assert out.read_bytes().startswith(magic)


def test_phase_variance_default_only_where_it_applies(tmp_path):
    """The Fig. 2 variance (10) is the default for a random walk; a sine input takes none."""
    nc = tmp_path / "p.nc"
    ok("phase", "--input", "sine", "--steps", "50", "--data", nc)
    ds = dynlab.read_dataset(nc)
    assert ds.attrs["variance"] == "none"
    np.testing.assert_array_equal(ds["x"].values, dynlab.tasks.sine(50, 1, seed=0))


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("args, option", [
    (["phase", "--K", "0"], "--K"),
    (["phase", "--eta", "-1"], "--eta"),
    (["phase", "--model", "nope"], "--model"),
    (["phase", "--activation", "nope"], "--activation"),
    (["phase", "--weights", "missing.npz"], "--weights"),
    (["phase", "--out", "x.txt"], "--out"),
    (["phase", "--K", "5", "--model", "rnn"], "--K"),
    (["phase", "--compare", "rnn,rnn"], "--compare"),
    (["phase", "--compare", "irnn"], "--compare"),
    (["phase", "--hidden", "1"], "--hidden"),
    (["phase", "--weight-scale", "-1"], "--weight-scale"),
    (["simulate", "--K", "abc"], "--K"),
    (["simulate", "--steps", "0"], "--steps"),
    (["simulate", "--input", "sine", "--variance", "2"], "--variance"),
    (["simulate", "--model", "fastrnn", "--set", "beta=x"], "--set beta"),
    (["simulate", "--data", "no/such/folder/d.nc"], "--data"),
])
def test_user_errors_are_one_line_naming_the_option(args, option):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"Error: {option}: "), lines[0]
    assert "Traceback" not in result.stderr and "Usage" not in result.stderr


def test_unknown_command_and_option_are_one_line():
    for args in (["nocommand"], ["phase", "--hiden", "3"]):
        result = run(*args)
        assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1

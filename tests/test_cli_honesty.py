"""CLI honesty (issue 15, item 5): nothing given is silently ignored, outputs are checked before
any computation, ``--quiet`` everywhere, ``python -m dynlab``, and pictures drawn by ``dynlab.plot.draw``.

Refusals are checked with every computing entry point of the commands replaced by one that
fails the test if called (``no_compute``): an option that does not apply, a bad suffix or an
unwritable path must be found before anything runs.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import dynlab
from conftest import cli_ok as ok, cli_run as run
from dynlab.cli.checks import FIXED_BY_CHECKPOINT, NOT_IMPLICIT

#: The calls through which the commands compute (``dynlab.commands``, the sweep, the figures).
COMPUTE = ["dynlab.commands.simulate_spec", "dynlab.commands.phase_dataset", "dynlab.commands.gradients_dataset",
           "dynlab.commands.equilibria_dataset", "dynlab.commands.spectrum_dataset", "dynlab.commands.converge_dataset",
           "dynlab.commands.partition_dataset", "dynlab.commands.train_spec", "dynlab.sweep.sweep_from_file",
           "dynlab.figures._recipe.run_recipe"]


class Computed(AssertionError):
    """A command computed although a user error should have stopped it first."""


@pytest.fixture
def no_compute(monkeypatch):
    """Every computing entry point of the commands raises ``Computed``."""
    def refuse(*args, **kwargs):
        raise Computed("the command computed before refusing")

    for target in COMPUTE:
        monkeypatch.setattr(target, refuse)


@pytest.fixture
def files(tmp_path):
    """A saved fastrnn (weights), a training checkpoint's path and a sweep spec, in tmp_path."""
    w = dynlab.save_model(dynlab.make_model("fastrnn", 2, 1, seed=1), tmp_path / "w.npz")
    ckpt = tmp_path / "ckpt.npz"
    ckpt.write_bytes(b"")  # the option only needs it to exist: refused before it is read
    spec = tmp_path / "s.toml"
    spec.write_text('analysis = "simulate"\n[model]\nname = "irnn"\nhidden = 2\n[input]\nsteps = 5\n'
                    '[grid]\neta = [0.5, 1.0]\n')
    store = tmp_path / "old.zarr"
    store.mkdir()
    return {"W": str(w), "CKPT": str(ckpt), "SPEC": str(spec), "STORE": str(store), "TMP": str(tmp_path)}


def _one_line_error(result, option):
    """Exit 2, stdout empty, exactly one stderr line ``Error: OPTION: …``, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert result.stdout == "" and len(lines) == 1, (result.stdout, result.stderr)
    assert lines[0].startswith(f"Error: {option}: "), lines[0]
    assert "Traceback" not in result.output and not isinstance(result.exception, Computed)


def _fill(args, files):
    return [str(a).format(**files) for a in args]


# ------------------------------------------------------ options that do not apply: refused
#: (command line, the option the one-line error names): found by ``dynlab.cli.checks`` before
#: any computation.
NOT_APPLICABLE = [
    # equilibria: the modes and what each uses
    (["equilibria", "--range", "0,1"], "--range"),
    (["equilibria", "--fixed-points", "4", "--continue-over", "b", "--range", "0,1"], "--fixed-points"),
    (["equilibria", "--fixed-points", "4", "--method", "euler"], "--method"),
    (["equilibria", "--fixed-points", "4", "--method", "newton"], "--method"),
    (["equilibria", "--continue-over", "b", "--range", "-1,1", "--method", "rk4"], "--method"),
    (["equilibria", "--fixed-points", "4", "--steps", "5"], "--steps"),
    (["equilibria", "--continue-over", "b", "--range", "0,1", "--steps", "5"], "--steps"),
    (["equilibria", "--fixed-points", "4", "--backend", "numpy"], "--backend"),
    (["equilibria", "--continue-over", "b", "--range", "0,1", "--backend", "numpy"], "--backend"),
    (["equilibria", "--model", "implicit", "--backend", "numpy"], "--backend"),
    (["equilibria", "--input", "sine", "--variance", "2"], "--variance"),
    (["equilibria", "--weights", "{W}", "--input", "constant", "--seed", "3"], "--seed"),
    # partition: the data set fixes the sequences; t-SNE and the embedding
    (["partition", "--dataset", "patterns", "--steps", "50"], "--steps"),
    (["partition", "--dataset", "patterns", "--input", "noise"], "--input"),
    (["partition", "--dataset", "patterns", "--variance", "2"], "--variance"),
    (["partition", "--tsne"], "--tsne"),
    (["partition", "--batch", "8", "--tsne"], "--tsne"),
    (["partition", "--embed"], "--embed"),
    (["partition", "--embed", "--batch", "2"], "--embed"),
    (["partition", "--input", "constant", "--variance", "1"], "--variance"),
    (["partition", "--set", "leak=0.1"], "--set leak"),
    # train: implicit networks and the tasks
    (["train", "--task", "xor"], "--task"),
    (["train", "--model", "implicit"], "--task"),
    (["train", "--model", "implicit", "--task", "oscillator", "--record-every", "5"], "--record-every"),
    # sweep
    (["sweep", "{SPEC}", "--resume"], "--resume"),
    (["sweep", "{SPEC}", "--out", "{STORE}", "--resume", "--region-size", "4"], "--region-size"),
    # every command with model options: leak without leaky-relu, a seed that seeds nothing, a variance
    # of an input kind that has none
    (["simulate", "--set", "leak=0.2"], "--set leak"),
    (["phase", "--activation", "tanh", "--set", "leak=0.2"], "--set leak"),
    (["train", "--model", "rnn", "--set", "leak=0.2"], "--set leak"),
    (["simulate", "--weights", "{W}", "--input", "constant", "--seed", "3"], "--seed"),
    (["phase", "--weights", "{W}", "--input", "constant", "--seed", "3"], "--seed"),
    (["gradients", "--weights", "{W}", "--input", "constant", "--seed", "3"], "--seed"),
    (["spectrum", "--weights", "{W}", "--input", "constant", "--seed", "3"], "--seed"),
    (["partition", "--weights", "{W}", "--input", "constant", "--seed", "3"], "--seed"),
    (["simulate", "--input", "constant", "--variance", "2"], "--variance"),
    (["phase", "--input", "sine", "--variance", "2"], "--variance"),
    (["gradients", "--input", "sine", "--variance", "2"], "--variance"),
    (["spectrum", "--input", "constant", "--variance", "2"], "--variance"),
    (["converge", "--input", "sine", "--variance", "2"], "--variance"),
]
#: A valid value of each option a training checkpoint fixes.
_TRAIN_SAMPLE = {"model": "rnn", "hidden": "8", "inputs": "2", "activation": "relu", "K": "2", "eta": "0.5",
                 "alpha": "0.5", "g0": "previous", "weight_scale": "0.3", "settings": "rank=2", "seed": "1",
                 "weights": "{W}", "task": "copy", "task_data": "{W}", "permute": "3", "steps": "20", "pad": "2", "lr": "0.1", "optimiser": "sgd",
                 "batch": "4", "clip": "1", "sigma_eps": "0.1", "record_every": "5", "eta_per_k": None}


def _option(name):
    from dynlab.cli import main

    param = next(p for p in main.commands["train"].params if p.name == name)
    return param.opts[0]


NOT_APPLICABLE += [(["train", "--resume", "{CKPT}", _option(n)] + ([] if _TRAIN_SAMPLE[n] is None else
                                                                   [_TRAIN_SAMPLE[n]]),
                    _option(n)) for n in FIXED_BY_CHECKPOINT]
NOT_APPLICABLE += [(["train", "--model", "implicit", "--task", "xor", _option(n)]
                    + ([] if n == "eta_per_k" else [{"resume": "{CKPT}", "weights": "{W}", "inputs": "2"}.get(
                        n, _TRAIN_SAMPLE.get(n, "1"))]), _option(n)) for n in NOT_IMPLICIT]


@pytest.mark.parametrize("args, option", NOT_APPLICABLE, ids=[" ".join(a) for a, _ in NOT_APPLICABLE])
def test_an_option_that_does_not_apply_is_refused_before_computing(args, option, files, no_compute):
    _one_line_error(run(*_fill(args, files)), option)


#: Refused by the library itself, before its computation starts (the model, the field, the task).
REFUSED_BY_LIBRARY = [
    (["simulate", "--model", "rnn", "--K", "5"], "--K"),
    (["simulate", "--model", "rnn", "--eta", "0.5"], "--eta"),
    (["simulate", "--model", "ctrnn", "--g0", "previous"], "--g0"),
    (["simulate", "--model", "rin", "--alpha", "0.5"], "--alpha"),
    (["gradients", "--model", "rnn", "--K", "1,5"], "--K"),
    (["partition", "--model", "rnn", "--alpha", "1"], "--alpha"),
    (["simulate", "--weights", "{W}", "--hidden", "3"], "--hidden"),
    (["phase", "--weights", "{W}", "--weight-scale", "3"], "--weight-scale"),
    (["phase", "--field"], "--field"),
    (["phase", "--model", "rnn", "--field"], "--field"),
    (["phase", "--model", "ctrnn", "--hidden", "3", "--input", "constant", "--field"], "--field"),
    (["converge", "--model", "rnn"], "--model"),
    (["converge", "--weights", "{W}"], "--model"),
    (["equilibria", "--continue-over", "b"], "--range"),
    (["equilibria", "--model", "implicit", "--fixed-points", "4"], "--fixed-points"),
    (["partition", "--layers", "2", "--weights", "{W}"], "--layers"),
    (["train", "--model", "rnn", "--eta-per-k"], "--eta-per-k"),
    (["train", "--task", "digits-rows", "--steps", "5"], "--steps"),
    (["train", "--task", "copy", "--pad", "3"], "--pad"),
]


@pytest.mark.parametrize("args, option", REFUSED_BY_LIBRARY, ids=[" ".join(a) for a, _ in REFUSED_BY_LIBRARY])
def test_the_library_refuses_the_rest_with_one_line(args, option, files, monkeypatch):
    """These reach the library, which refuses them before computing (the simulation is never run)."""
    def refuse(*a, **k):
        raise Computed("simulated before refusing")

    for target in ("dynlab.simulation.simulate", "dynlab.train.loop.train_model"):
        monkeypatch.setattr(target, refuse)
    _one_line_error(run(*_fill(args, files)), option)


def test_options_that_do_apply_still_run(tmp_path, files):
    """The refusals are precise: the same options in the mode that uses them run."""
    ok("equilibria", "--continue-over", "b", "--range", "-1,1", "--tol", "1e-10", "--quiet")
    ok("equilibria", "--fixed-points", "4", "--seed", "2", "--quiet")
    ok("equilibria", "--method", "euler", "--steps", "5", "--backend", "numpy", "--quiet")
    ok("partition", "--dataset", "patterns", "--batch", "5", "--embed", "--quiet")
    ok("simulate", "--activation", "leaky-relu", "--set", "leak=0.2", "--steps", "5", "--quiet")
    ok("phase", "--weights", files["W"], "--input", "constant", "--seed", "3", "--compare", "rnn", "--steps", "5",
       "--quiet")
    ok("simulate", "--weights", files["W"], "--input", "sine", "--seed", "3", "--steps", "5", "--quiet")


# ------------------------------------------------------------------- output paths, up front
DATA_COMMANDS = {
    "simulate": [], "phase": [], "gradients": [], "equilibria": [], "spectrum": [], "converge": [],
    "partition": [], "train": [], "sweep": ["{SPEC}"],
}
PICTURE_COMMANDS = [c for c in DATA_COMMANDS if c != "sweep"]
PROC = "/proc/dynlab-cannot-write-here"


@pytest.mark.parametrize("command", list(DATA_COMMANDS))
@pytest.mark.parametrize("path, message", [
    ("{TMP}/results.csv", "must end in .nc"),
    ("{TMP}/results", "must end in .nc"),
    ("{TMP}/no/such/folder/r.nc", "does not exist"),
    ("{TMP}/folder.nc", "is a directory"),
    (PROC + ".nc", "cannot write"),
])
def test_data_must_be_a_writable_nc_file(command, path, message, files, no_compute):
    if path.startswith("/proc") and not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    os.makedirs(os.path.join(files["TMP"], "folder.nc"), exist_ok=True)
    result = run(command, *_fill(DATA_COMMANDS[command], files), "--data", path.format(**files))
    _one_line_error(result, "--data")
    assert message in result.stderr


@pytest.mark.parametrize("command", PICTURE_COMMANDS)
@pytest.mark.parametrize("path, message", [
    ("{TMP}/p.txt", "must end in .png, .pdf, .svg"),
    ("{TMP}/no/such/folder/p.png", "does not exist"),
    ("{TMP}/folder.png", "is a directory"),
    (PROC + ".svg", "cannot write"),
])
def test_out_must_be_a_writable_picture_file(command, path, message, files, no_compute):
    if path.startswith("/proc") and not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    os.makedirs(os.path.join(files["TMP"], "folder.png"), exist_ok=True)
    result = run(command, "--out", path.format(**files))
    _one_line_error(result, "--out")
    assert message in result.stderr


@pytest.mark.parametrize("args, option, message", [
    (["train", "--save-weights", "{TMP}/w.pt"], "--save-weights", "must end in .npz"),
    (["train", "--save-weights", "{TMP}/folder.npz"], "--save-weights", "is a directory"),
    (["train", "--save-weights", PROC + ".npz"], "--save-weights", "cannot write"),
    (["train", "--resume", "{TMP}/w.pt"], "--resume", "must end in .npz"),
    (["train", "--resume", "{TMP}/missing.npz"], "--resume", "no such file"),
    (["sweep", "{SPEC}", "--out", "{TMP}/s.zip"], "--out", "must be a Zarr store path ending in .zarr"),
    (["sweep", "{SPEC}", "--out", "{TMP}/file.zarr"], "--out", "is not a directory"),
    (["sweep", "{SPEC}", "--out", PROC + ".zarr"], "--out", "cannot write"),
    (["figures", "make", "rin-gradients", "--out", "{TMP}/file.zarr"], "--out", "is not a directory"),
    (["figures", "all", "--out", PROC + "/figs"], "--out", "cannot write"),
    (["figures", "make", "rin-gradients", "--out", "{W}/figs"], "--out", "is not a directory"),
])
def test_other_outputs_are_checked_before_computing(args, option, message, files, no_compute):
    if any(a.startswith("/proc") for a in args) and not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    os.makedirs(os.path.join(files["TMP"], "folder.npz"), exist_ok=True)
    with open(os.path.join(files["TMP"], "file.zarr"), "w") as f:
        f.write("not a store")
    result = run(*_fill(args, files))
    _one_line_error(result, option)
    assert message in result.stderr


def test_the_writability_probe_leaves_no_file_and_clobbers_none(tmp_path, no_compute):
    """A refused run leaves a new --data path absent and an existing one byte-for-byte unchanged."""
    new, old = tmp_path / "new.nc", tmp_path / "old.nc"
    old.write_bytes(b"precious")
    for path in (new, old):
        result = run("equilibria", "--range", "0,1", "--data", path, "--out", tmp_path / "p.png")
        _one_line_error(result, "--range")
    assert not new.exists() and not (tmp_path / "p.png").exists()
    assert old.read_bytes() == b"precious"


def test_unwritable_data_is_found_before_a_long_run(tmp_path, monkeypatch):
    """Without the fixture: the real command, a /proc path, returns at once and computes nothing."""
    if not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    calls = []
    real = dynlab.commands.gradients_dataset
    monkeypatch.setattr("dynlab.commands.gradients_dataset", lambda *a, **k: calls.append(1) or real(*a, **k))
    _one_line_error(run("gradients", "--steps", "100000", "--data", PROC + ".nc"), "--data")
    assert calls == []


# ------------------------------------------------------------------------------------ quiet
QUIET_RUNS = {
    "simulate": ["--steps", "5"], "phase": ["--steps", "5"], "gradients": ["--steps", "5"],
    "equilibria": ["--steps", "5"], "spectrum": ["--steps", "5"], "converge": ["--steps", "3"],
    "partition": ["--steps", "5"],
    "train": ["--steps", "4", "--hidden", "3", "--batch", "4", "--iterations", "2", "--record-every", "1"],
    "sweep": ["{SPEC}"],
}


@pytest.mark.parametrize("where", ["group", "command", "short"])
@pytest.mark.parametrize("command", list(QUIET_RUNS))
def test_quiet_prints_nothing_and_still_writes(command, where, files, tmp_path, monkeypatch):
    progress = []
    real_train = dynlab.commands.train_spec
    monkeypatch.setattr("dynlab.commands.train_spec", lambda spec: progress.append(spec.progress) or real_train(spec))
    data, out = tmp_path / "q.nc", tmp_path / "q.png"
    args = _fill(QUIET_RUNS[command], files) + ["--data", str(data)]
    if command != "sweep":
        args += ["--out", str(out)]
    if command == "train":
        args += ["--save-weights", str(tmp_path / "q.npz")]
    line = {"group": ["--quiet", command, *args], "command": [command, *args, "--quiet"],
            "short": ["-q", command, *args] if command == "simulate" else [command, "-q", *args]}[where]
    loud = ok(command, *args)
    assert loud.stdout.strip() != ""   # not vacuous: without --quiet the command does print
    result = ok(*line)
    assert result.stdout == "" and result.stderr == "", (result.stdout, result.stderr)
    assert data.exists() and dynlab.read_dataset(data).sizes
    if command != "sweep":
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if command == "train":  # the quiet run is quiet by dynlab.progress.quiet(), not by a setting of its own
        assert (tmp_path / "q.npz").exists() and progress == [None, None]


def test_quiet_keeps_the_errors(tmp_path):
    """Errors still reach stderr with --quiet (here: equilibria that do not converge, exit 1)."""
    result = run("--quiet", "equilibria", "--method", "rk4", "--tol", "1e-300", "--steps", "3",
                 "--data", tmp_path / "e.nc")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: the equilibrium solve did not converge")
    assert (tmp_path / "e.nc").exists()
    _one_line_error(run("simulate", "--quiet", "--steps", "0"), "--steps")


def test_quiet_silences_the_sweep_progress_bar(files, monkeypatch):
    from dynlab import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)   # a long run, and the tests' quiet lifted
    monkeypatch.delenv("DYNLAB_QUIET")
    loud = ok("sweep", files["SPEC"])
    assert "points/s" in loud.stderr
    assert ok("sweep", files["SPEC"], "-q").stderr == ""


def test_quiet_figures_and_listings(tmp_path):
    """figures make: no progress bar, no PASS lines, files written; the listings (models, figures
    list) are the answer asked for and print the same with --quiet."""
    result = ok("figures", "make", "irnn-fig2-phase", "--quick", "--out", tmp_path, "--quiet")
    assert result.stdout == "" and result.stderr == ""
    assert (tmp_path / "claims.json").exists() and (tmp_path / "irnn-fig2-phase.png").exists()
    result = ok("--quiet", "figures", "all", "--help")
    assert "--quiet" in result.stdout
    for args in (["models"], ["figures", "list"]):
        assert ok(*args, "--quiet").stdout == ok(*args).stdout != ""
        assert ok("-q", *args).stdout == ok(*args).stdout


# -------------------------------------------------------------------------- python -m dynlab
def _python_m(*args):
    return subprocess.run([sys.executable, "-m", "dynlab", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_python_m_dynlab_version_and_help():
    proc = _python_m("--version")
    assert proc.returncode == 0 and proc.stdout == f"dynlab {dynlab.__version__}\n", proc.stderr
    proc = _python_m("--help")
    assert proc.returncode == 0 and proc.stdout.startswith("Usage: dynlab [OPTIONS] COMMAND")


def test_python_m_dynlab_bad_option_is_one_line_exit_2():
    proc = _python_m("simulate", "--no-such-option")
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "--no-such-option" in lines[0]
    proc = _python_m("simulate", "--data", "x.csv")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "Error: --data: must end in .nc (the results are written as NetCDF), got 'x.csv'"]


def test_python_m_dynlab_runs_a_command(tmp_path):
    proc = _python_m("-q", "simulate", "--steps", "5", "--data", tmp_path / "s.nc")
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc.stderr
    assert dynlab.read_dataset(tmp_path / "s.nc").sizes["time"] == 5


# ----------------------------------------------------------------- pictures: dynlab.plot.draw
DRAWN = {"simulate": "simulate", "phase": "phase", "gradients": "gradients", "equilibria": "equilibrium",
         "spectrum": "spectrum", "converge": "convergence", "partition": "partition", "train": "train_model"}


@pytest.mark.parametrize("command", list(DRAWN))
def test_pictures_are_drawn_by_draw_from_the_written_result(command, tmp_path, monkeypatch):
    """Every --out picture is ``dynlab.plot.draw`` of the very Dataset written to --data."""
    import dynlab.plot

    seen = []
    real = dynlab.plot.draw
    monkeypatch.setattr(dynlab.plot, "draw", lambda ds, *a, **k: seen.append(ds) or real(ds, *a, **k))
    data, out = tmp_path / "d.nc", tmp_path / "d.png"
    ok(command, *QUIET_RUNS[command], "--data", data, "--out", out, "-q")
    assert len(seen) == 1 and seen[0].attrs["result"] == DRAWN[command]
    written = dynlab.read_dataset(data)
    assert written.attrs["result"] == DRAWN[command]
    for name, var in written.data_vars.items():
        if np.issubdtype(var.dtype, np.number):
            np.testing.assert_array_equal(var.values, seen[0][name].values, err_msg=name)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

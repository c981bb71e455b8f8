"""The commands are built from one table, and their help texts come from the tables the code uses.

Checked: every row of ``dynlab.cli.commands.COMMANDS`` is a registered command whose options are
exactly the ids it lists and whose computing functions resolve; each command's ``--model`` help
lists the models it takes, every one of them runs and every other is refused with one line naming
--model (so the help can offer nothing the command refuses, and refuse nothing it offers); the
phase portrait's help names the colours the picture is drawn in; train's help names every task.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import dynlab as dl
from conftest import cli_ok as ok, cli_run as run
from dynlab import _palette
from dynlab.cli import commands as C, main
from dynlab.cli.defaults import COMMAND_MODELS
from dynlab.cli.options import MODEL_NAMES, OPTIONS

#: The smallest run of each command (tests of the model lists).
TINY = {"simulate": ["--hidden", 2, "--steps", 3], "phase": ["--hidden", 2, "--steps", 3],
        "gradients": ["--hidden", 2, "--steps", 3], "equilibria": ["--hidden", 2, "--steps", 3],
        "spectrum": ["--hidden", 2, "--steps", 3], "converge": ["--hidden", 2, "--steps", 2],
        "partition": ["--hidden", 2, "--steps", 3],
        "train": ["--hidden", 2, "--steps", 4, "--batch", 4, "--iterations", 1, "--record-every", 1]}
#: What a model needs beyond TINY to run at all.
NEEDS = {("train", "implicit"): ["--task", "xor", "--steps", None, "--record-every", None],
         ("phase", "implicit"): []}


def _command(key):
    cmd = main
    for part in key.split():
        cmd = cmd.commands[part]
    return cmd


def test_every_row_is_a_command_with_exactly_its_options():
    keys = {e.key for e in C.COMMANDS}
    registered = {n for n in main.commands} | {f"figures {n}" for n in main.commands["figures"].commands}
    assert keys == registered
    for entry in C.COMMANDS:
        cmd = _command(entry.key)
        assert cmd.help == entry.help and cmd.short_help == entry.short_help
        assert len(cmd.params) == len(entry.options), entry.key
        for param, oid in zip(cmd.params, entry.options):
            if oid == "model":
                assert param.name == "model"
                assert param.type.get_metavar(param) == "[" + "|".join(COMMAND_MODELS[entry.key]) + "]"
            else:
                assert param.name == OPTIONS[oid](lambda **kw: None).__click_params__[-1].name, (entry.key, oid)
        for ref in (entry.compute, entry.summary, entry.failed, entry.spec):
            if ref:
                assert callable(C._find(ref)), (entry.key, ref)


@pytest.mark.parametrize("key", sorted(COMMAND_MODELS))
def test_the_help_lists_the_models_that_run_and_the_others_are_refused(key):
    shown = "".join(ok(key, "--help").stdout.split())
    assert "--model[" + "|".join(COMMAND_MODELS[key]) + "]" in shown
    for model in MODEL_NAMES:
        args = [a for a in TINY[key]]
        extra = NEEDS.get((key, model), [])
        for flag, value in zip(extra[::2], extra[1::2]):
            if value is None and flag in args:
                i = args.index(flag)
                del args[i:i + 2]
            elif value is not None:
                args += [flag, value]
        r = run(key, "--model", model, *args, "-q")
        if model in COMMAND_MODELS[key]:
            assert r.exit_code in (0, 1), (key, model, r.stderr, r.exception)   # 1: a solve that did not converge
            assert r.exception is None or isinstance(r.exception, SystemExit), (key, model, r.exception)
        else:
            lines = r.stderr.strip().splitlines()
            assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: --model"), \
                (key, model, r.stderr)


def test_the_phase_help_names_the_colours_the_picture_uses(tmp_path):
    text = " ".join(ok("phase", "--help").stdout.split())
    found = re.search(r"h_0 \((\w+) circle\).*?range \((\w+)\).*?s_m = h_m \+ h_\(m-1\) \((\w+) dots\)", text)
    named = dict(zip(("start", "curve", "s"), found.groups()))
    assert named == _palette.PHASE
    ok("phase", "--model", "irnn", "--K", 5, "--steps", 50, "--data", tmp_path / "p.nc")
    fig = dl.plot.draw(dl.read_dataset(tmp_path / "p.nc"))
    ax = fig.axes[0]
    from matplotlib.colors import to_hex

    dots = [c for c in ax.collections if "s_m" in str(c.get_label())]
    curve = [line for line in ax.lines if "equilibria" in str(line.get_label())]
    start = [line for line in ax.lines if "start" in str(line.get_label())]
    assert to_hex(dots[0].get_facecolor()[0]).lower() == _palette.COLORS[named["s"]].lower()
    assert to_hex(curve[0].get_color()).lower() == _palette.COLORS[named["curve"]].lower()
    assert to_hex(start[0].get_color()).lower() == _palette.COLORS[named["start"]].lower()
    assert "green" not in text


def test_the_train_help_names_every_task():
    text = " ".join(ok("train", "--help").stdout.split())
    tasks = list(dl.tasks.TASKS) + ["xor", "oscillator"]
    line = re.search(r"on a task: (.*?) \(sequence models\), (.*?) \(--model implicit\)", text)
    assert line.group(1).split(", ") + line.group(2).split(", ") == tasks
    assert "[" + "|".join(tasks) + "]" in text.replace(" ", "")


def test_every_input_kind_is_named_in_the_help():
    text = " ".join(ok("simulate", "--help").stdout.split())
    assert "Input sequence kind: " + ", ".join(dl.tasks.INPUTS) + "." in text


def test_a_command_failure_exits_1_from_the_table(tmp_path, monkeypatch):
    """``failed`` of a row decides exit 1 (here equilibria that do not converge), after the data."""
    r = run("equilibria", "--method", "rk4", "--tol", "1e-300", "--steps", 3, "--hidden", 2, "--data",
            tmp_path / "e.nc")
    assert r.exit_code == 1 and (tmp_path / "e.nc").exists()
    assert np.isfinite(dl.read_dataset(tmp_path / "e.nc")["residual"].values).all()

"""``dynlab equilibria --fixed-points``: at any constant input, from a task's trajectories, only
reachable points unless asked — and the options that do not apply refused in one line."""
from __future__ import annotations

import numpy as np
import pytest

import dynlab as dl
from conftest import cli_ok as ok, cli_run as run


def test_from_a_tasks_trajectories_equals_the_library(tmp_path):
    w = dl.save_model(dl.make_model("gru", 6, 3, seed=1, weight_scale=2.0), tmp_path / "g.npz")
    data = tmp_path / "fp.nc"
    r = ok("equilibria", "--weights", w, "--fixed-points", 48, "--task", "flipflop", "--steps", 20, "--seed", 3,
           "--data", data)
    ds = dl.read_dataset(data)
    assert ds.attrs["starts"] == "states of the network on the flipflop task's test inputs"
    assert ds.sizes["time"] == 20 and ds["x"].values.tolist() == [0.0, 0.0, 0.0]
    task = dl.make_task("flipflop", 20, seed=3, n_test=200)
    want = dl.fixed_points(dl.load_model(w), np.zeros(3), trajectories=task, n_starts=48, seed=3)
    np.testing.assert_array_equal(ds["h_eq"].values, want["h_eq"].values)
    assert f"{want.attrs['n_roots']} root" in r.stdout


def test_unreachable_points_are_left_out_and_counted_or_kept_and_flagged(tmp_path):
    w = dl.save_model(dl.make_model("gru", 8, 1, weight_scale=4.0, seed=0), tmp_path / "g.npz")   # saturating gates
    r = ok("equilibria", "--weights", w, "--fixed-points", 200, "--data", tmp_path / "a.nc")
    a = dl.read_dataset(tmp_path / "a.nc")
    n = a.attrs["n_unreachable"]
    assert n > 0 and (np.abs(a["h_eq"].values) <= 1).all() and a["reachable"].values.all()
    assert f"{n} points outside the states a trajectory can reach (left out; --keep-unreachable keeps them)" in r.stdout
    r = ok("equilibria", "--weights", w, "--fixed-points", 200, "--keep-unreachable", "--data", tmp_path / "b.nc",
           "--out", tmp_path / "b.png")
    b = dl.read_dataset(tmp_path / "b.nc")
    assert int((b["reachable"] == 0).sum()) == n and "(kept, flagged)" in r.stdout and "(unreachable)" in r.stdout


@pytest.mark.parametrize("args, option", [
    (["--task", "flipflop"], "--task"),
    (["--constant-input", "1"], "--constant-input"),
    (["--keep-unreachable"], "--keep-unreachable"),
    (["--model", "rnn", "--fixed-points", "4", "--steps", "5"], "--steps"),
    (["--model", "rnn", "--fixed-points", "4", "--input", "sine"], "--input"),
    (["--model", "gru", "--fixed-points", "4", "--task", "adding", "--variance", "2"], "--variance"),
    (["--model", "rnn", "--inputs", "2", "--fixed-points", "4", "--constant-input", "1,2,3"], "--constant-input"),
    (["--fixed-points", "4", "--constant-input", "1,x"], "--constant-input"),
    (["--fixed-points", "4", "--constant-input", "nan"], "--constant-input"),
])
def test_what_does_not_apply_is_refused_in_one_line(args, option):
    r = run("equilibria", *args)
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"Error: {option}"), (args, r.stderr)


def test_what_applies_runs():
    ok("equilibria", "--model", "gru", "--hidden", 4, "--fixed-points", 8, "--steps", 30, "-q")   # its own input
    ok("equilibria", "--model", "rnn", "--hidden", 4, "--inputs", 3, "--fixed-points", 8, "--task", "flipflop",
       "--steps", 15, "-q")
    ok("equilibria", "--model", "rnn", "--hidden", 4, "--inputs", 2, "--fixed-points", 8, "--constant-input", "0.5,-1",
       "-q")

"""``dynlab train``: outputs checked against the library, resume through the CLI, one-line errors."""
import numpy as np
import pytest

import dynlab
from conftest import cli_ok as ok, cli_run as run
from dynlab.cli.options import TASK_NAMES
from dynlab.train.loop import train_model


COMMON = ("--task", "adding", "--steps", 8, "--hidden", 5, "--batch", 8, "--record-every", 2, "--lr", 0.01)


def test_task_names_match_the_library():
    assert TASK_NAMES == dynlab.tasks.TASKS


def test_train_writes_history_weights_and_picture_equal_to_the_library(tmp_path):
    data, out, w = tmp_path / "h.nc", tmp_path / "h.png", tmp_path / "w.npz"
    res = ok("train", *COMMON, "--model", "irnn", "--K", 2, "--g0", "previous", "--eta-per-k", "--iterations", 4,
             "--sigma-eps", 0.1, "--seed", 3, "--data", data, "--out", out, "--save-weights", w)
    assert "irnn on adding (T=8): 4 iterations" in res.stdout
    h = dynlab.read_dataset(data)
    assert list(h["iteration"].values) == [2, 4] and h.attrs["sigma_eps"] == 0.1
    assert out.stat().st_size > 5000
    # the same run through the Python API gives the same numbers
    task = dynlab.tasks.make_task("adding", 8, seed=3)
    m = dynlab.make_model("irnn", 5, 2, seed=3, K=2, g0="previous", eta=np.ones(2))
    lib = train_model(m, task, iterations=4, lr=0.01, batch=8, record_every=2, sigma_eps=0.1, seed=3)
    np.testing.assert_array_equal(h["loss"].values, lib.history["loss"].values)
    np.testing.assert_array_equal(dynlab.load_model(w).U, lib.model.U)
    assert np.shape(lib.model.eta) == (2,)
    # resume two more iterations: equal to a 6-iteration run
    data2 = tmp_path / "h2.nc"
    ok("train", "--resume", w, "--iterations", 2, "--data", data2)
    lib6 = train_model(m, task, iterations=6, lr=0.01, batch=8, record_every=2, sigma_eps=0.1, seed=3)
    h2 = dynlab.read_dataset(data2)
    np.testing.assert_array_equal(h2["loss"].values, lib6.history["loss"].values)
    np.testing.assert_array_equal(h2["U"].values, lib6.model.U)


def test_train_copy_with_a_baseline_model():
    res = ok("train", "--task", "copy", "--steps", 3, "--model", "fastrnn", "--hidden", 6, "--batch", 4,
             "--iterations", 2, "--record-every", 1, "--optimiser", "rmsprop")
    assert "val_accuracy" in res.stdout and "baseline 0.9041" in res.stdout   # 10 ln 8 / (3 + 20)


def test_noise_padded_task_through_the_cli(tmp_path):
    data = tmp_path / "p.nc"
    ok("train", "--task", "adding-ternary", "--steps", 6, "--pad", 4, "--model", "rnn", "--hidden", 4, "--batch", 4,
       "--iterations", 2, "--record-every", 1, "--data", data)
    h = dynlab.read_dataset(data)
    assert h.attrs["task_steps"] == 10 and h.attrs["task_pad"] == 4


@pytest.mark.parametrize("args,needle", [
    (("--task", "parity"), "--task"),
    (("--iterations", -1), "--iterations"),
    (("--sigma-eps", -0.5), "--sigma-eps"),
    (("--inputs", 3), "--inputs"),
    (("--model", "rnn", "--eta-per-k"), "--eta-per-k"),
    (("--save-weights", "w.txt"), "--save-weights"),
    (("--resume", "no-such.npz"), "--resume"),
    (("--task", "xor"), "--task"),
    (("--task", "copy", "--pad", 3), "--pad"),
])
def test_bad_options_exit_2_with_one_line(args, needle):
    res = run("train", "--steps", 5, "--hidden", 3, "--iterations", 1, *args)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1

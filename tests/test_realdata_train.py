"""Training on the real data's tasks: ``dynlab train --task … --task-data DIR`` equals the library,
resumes bit-for-bit (the checkpoint rebuilds the task from its files), and refuses bad input in one
line; ``evaluate`` builds a split in chunks and scores it exactly as in one piece."""
from __future__ import annotations

import numpy as np
import pytest

import dynlab as dl
import realdata_files as rf
from conftest import cli_ok as ok, cli_run as run
from dynlab.train import backprop as bp
from dynlab.train.loop import evaluate, run_outputs, train_model


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mnist")
    rf.write_mnist_idx(folder)
    return folder


@pytest.mark.parametrize("name,steps", [("noisy-mnist", 40), ("copy", 5)])
def test_evaluate_in_chunks_equals_the_whole_split_at_once(mnist_dir, name, steps):
    data = mnist_dir if name == "noisy-mnist" else None
    task = dl.make_task(name, steps, data=data, seed=1, n_train=20, n_val=9, n_test=5)
    m = dl.make_model("rnn", 3, task.inputs, seed=0)
    readout = bp.init_readout(3, task.outputs, seed=0)
    x, y = task.batch("val")                                   # the whole split in one piece
    L, _, extra = bp.loss_value(task.loss, run_outputs(m, readout, x, task.loss), y)
    for chunk in (2, 4, 500):
        ev = evaluate(m, readout, task, "val", chunk=chunk)
        assert ev["loss"] == pytest.approx(L, rel=1e-14, abs=0)
        assert ev["accuracy"] == extra["accuracy"]


COMMON = ("--model", "rnn", "--hidden", 4, "--batch", 6, "--record-every", 2, "--lr", 0.01, "--seed", 2)


def test_train_on_noisy_mnist_equals_the_library_and_resumes_bit_for_bit(mnist_dir, tmp_path):
    h, w = tmp_path / "h.nc", tmp_path / "w.npz"
    res = ok("train", "--task", "noisy-mnist", "--steps", 36, "--task-data", mnist_dir, *COMMON, "--iterations", 2,
             "--data", h, "--save-weights", w)
    assert "rnn on noisy-mnist (T=36): 2 iterations" in res.stdout
    task = dl.make_task("noisy-mnist", 36, data=mnist_dir, seed=2)
    m = dl.make_model("rnn", 4, 28, seed=2)
    lib = train_model(m, task, iterations=4, lr=0.01, batch=6, record_every=2, seed=2)
    hist = dl.read_dataset(h)
    np.testing.assert_array_equal(hist["loss"].values, lib.history["loss"].values[:1])
    ok("train", "--resume", w, "--iterations", 2, "--data", tmp_path / "h2.nc", "--quiet")
    h2 = dl.read_dataset(tmp_path / "h2.nc")
    np.testing.assert_array_equal(h2["loss"].values, lib.history["loss"].values)
    np.testing.assert_array_equal(h2["val_loss"].values, lib.history["val_loss"].values)


def test_permute_reaches_the_task(mnist_dir, monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def spy(model, task, **kw):
        seen["task"] = task
        raise Stop

    monkeypatch.setattr("dynlab.train.loop.train_model", spy)
    run("train", "--task", "mnist-pixels", "--task-data", mnist_dir, "--permute", 42, "--quiet")
    task = seen["task"]
    assert task.settings["permute"] == 42 and task.inputs == 1 and task.steps == 784
    ref = dl.make_task("mnist-pixels", data=mnist_dir, seed=0)
    order = np.random.default_rng(42).permutation(784)
    np.testing.assert_array_equal(task.batch("val")[0], ref.batch("val")[0][:, order])


@pytest.mark.parametrize("args,option,text", [
    (("--task", "mnist-rows"), "--task-data", "give MNIST"),
    (("--task", "har2", "--task-data", "{mnist}"), "--task-data", "no train/ and test/ folders of UCI HAR"),
    (("--task", "mnist-rows", "--task-data", "{bad}"), "--task-data", "magic number 0x00000801"),
    (("--task", "adding", "--task-data", "{mnist}"), "--task-data", "--task adding needs none"),
    (("--task", "copy", "--permute", "3"), "--permute", "not to copy"),
    (("--task", "noisy-mnist", "--task-data", "{mnist}", "--pad", "3"), "--pad", "give steps, not pad"),
    (("--task", "xor", "--model", "implicit", "--task-data", "{mnist}"), "--task-data", "no meaning"),
])
def test_bad_real_data_options_are_one_line_naming_the_option(mnist_dir, tmp_path, args, option, text):
    bad = tmp_path / "bad"
    rf.write_mnist_idx(bad, gz=False)
    (bad / "t10k-images-idx3-ubyte").write_bytes(rf.idx_bytes(np.zeros(3, np.uint8)))   # a labels file's magic
    args = [str(a).format(mnist=mnist_dir, bad=bad) for a in args]
    r = run("train", *args, "--quiet")
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, (r.stderr, r.exception)
    assert lines[0].startswith(f"Error: {option}") and text in lines[0], lines[0]
    if str(bad) in args:
        assert "t10k-images-idx3-ubyte" in lines[0]

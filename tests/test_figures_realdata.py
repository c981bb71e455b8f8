"""The figures' --data: at paper scale the HAR-2 and MNIST recipes read the real data sets through
``make_task``'s readers, from files written in exactly the formats they are distributed in
(``realdata_files``); sizes are shrunk here so that a whole recipe runs in seconds."""
import numpy as np
import pytest

from dynlab.errors import ParameterError
from dynlab.figures.irnn import _digits as hd
from dynlab.figures.irnn import _tables as tb
from dynlab.figures import get
from dynlab.figures._recipe import Scale, run_recipe

from realdata_files import write_har, write_mnist_idx


def test_a_har2_recipe_at_paper_scale_trains_on_the_har_files(tmp_path, monkeypatch):
    """irnn-fig8-gradnorm --scale paper --data DIR, end to end on a tiny UCI HAR folder: the record says
    HAR-2 at T = 128 with the paper's setting beside it (the paper's D = 80 and 1700 iterations shrunk
    to 4 and 4 for the test, so the record is not at paper scale)."""
    write_har(tmp_path / "data")
    monkeypatch.setitem(hd.D, "paper", 4)
    monkeypatch.setitem(hd.ITERATIONS, "paper", 4)
    monkeypatch.setitem(hd.RECORDS, "paper", 2)
    monkeypatch.setitem(hd.BATCHES, "paper", 8)
    rec = run_recipe(get("irnn-fig8-gradnorm"), tmp_path / "out", scale="paper", data=str(tmp_path / "data"))
    ours, paper = rec["setting"]["ours"], rec["setting"]["paper"]
    assert ours["data"] == paper["data"] == "HAR-2" and ours["T"] == paper["T"] == "128"
    assert ours["D"] == "4" and paper["D"] == "80" and rec["at_paper_scale"] is False
    assert rec["scale"] == "paper" and (tmp_path / "out" / "irnn-fig8-gradnorm.paper.png").exists()
    task = hd.task(Scale("paper", str(tmp_path / "data")))
    assert task.steps == 128 and task.inputs == 9 and task.outputs == 2


def test_the_mnist_recipes_read_mnist_at_paper_scale_and_name_the_missing_data(tmp_path):
    write_mnist_idx(tmp_path)
    task = tb.real_task(Scale("paper", str(tmp_path)), "pixels", permute=42)
    assert task.steps == 784 and task.inputs == 1 and task.outputs == 10
    natural = tb.real_task(Scale("paper", str(tmp_path)), "pixels")
    x, _ = task.batch("test", np.arange(2))
    xn, _ = natural.batch("test", np.arange(2))
    np.testing.assert_array_equal(np.sort(x, axis=1), np.sort(xn, axis=1))      # the same pixels, permuted
    assert not np.array_equal(x, xn)
    with pytest.raises(ParameterError, match="data"):
        tb.real_task(Scale("paper", None), "pixels")


def test_the_noisy_mnist_control_replaces_the_28_rows_batch_by_batch(tmp_path):
    """irnn-table2 at paper scale: the control's test inputs are Noisy-MNIST's with the 28 informative
    rows replaced by seeded N(0, 1) noise (the reader builds inputs per batch; nothing stored), the noise
    steps and the other splits untouched."""
    from dynlab.figures.irnn import table2_noisy_digits as t2

    write_mnist_idx(tmp_path)
    task = tb.real_task(Scale("paper", str(tmp_path)), "noisy")
    assert task.steps == 1000 and task.inputs == 28
    ctrl = t2.pure_noise(task, t2.PAPER_INFORMATIVE)
    idx = np.arange(3)
    x, y = task.batch("test", idx)
    xc, yc = ctrl.batch("test", idx)
    np.testing.assert_array_equal(y, yc)
    np.testing.assert_array_equal(xc[:, 28:], x[:, 28:])
    assert not np.allclose(xc[:, :28], x[:, :28])
    np.testing.assert_array_equal(ctrl.batch("test", idx)[0], xc)               # seeded: the same every time
    np.testing.assert_array_equal(ctrl.batch("train", idx)[0], task.batch("train", idx)[0])

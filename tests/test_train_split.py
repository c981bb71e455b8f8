"""``loss_and_grads`` on blocks of sequences, one thread each (issue 20), against one block.

Sequences are independent, so the split changes nothing but the order of the final sums over
the batch: every gradient, ∂L/∂h_0, ∂L/∂h_1, ∂L/∂R, the outputs and the tape's states agree with
the one-block call to 1e-13 relative (a few ulps of summation order over 7 sequences; any
misplaced row, missing block or double-counted term is O(1)).  Every model of the FD tests
(tests/test_backprop.py, tests/test_backprop_gated.py) and every loss, with the thresholds
lowered so that seven sequences split into three blocks.
"""
import numpy as np
import pytest

import dynlab
from dynlab import config
from dynlab.errors import DivergenceError
from dynlab.train import backprop as bp
from test_backprop import CASES as CELL_CASES
from test_backprop_gated import CASES as GATED_CASES
from test_backprop_gated import _data as gated_data

B = 7  # sequences: three blocks of 2, 2 and 3 rows
CASES = {**CELL_CASES, **GATED_CASES}


def _data(model, loss, seed=0):
    """Seven sequences of tests/test_backprop_gated.py's data (T = 6, d = 2, C = 3)."""
    return gated_data(model, loss, seed=seed, B=B)


def _split(monkeypatch, n):
    monkeypatch.setattr(config, "TRAIN_THREADS", n)
    monkeypatch.setattr(config, "TRAIN_MIN_WORK_PER_THREAD", 1)
    monkeypatch.setattr(config, "TRAIN_MIN_WORK_PER_THREAD_JITTED", 1)


def _close(a, b, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(float(np.max(np.abs(b))), 1e-300)
    assert a.shape == b.shape, what
    assert float(np.max(np.abs(a - b))) <= 1e-13 * scale, what


@pytest.mark.parametrize("loss", bp.LOSSES)
@pytest.mark.parametrize("case", list(CASES))
def test_the_split_equals_one_block(case, loss, monkeypatch):
    model = CASES[case]()
    x, h0, target, readout = _data(model, loss)
    _split(monkeypatch, 1)
    assert len(bp._train_blocks(model, B)) == 2
    L1, g1, i1 = bp.loss_and_grads(model, readout, x, target, loss=loss, h0=h0)
    _split(monkeypatch, 3)
    assert bp._train_blocks(model, B) == [0, 2, 4, 7]
    L3, g3, i3 = bp.loss_and_grads(model, readout, x, target, loss=loss, h0=h0)
    assert isinstance(i3["tape"], bp.BlockTape) and not isinstance(i1["tape"], bp.BlockTape)
    assert abs(L3 - L1) <= 1e-14 * abs(L1)
    assert set(g3) == set(g1)
    for k in g1:
        _close(g3[k], g1[k], f"∂L/∂{k}")
    for k in ("dL_dh1", "dL_dWr", "outputs"):
        _close(i3[k], i1[k], k)
    _close(i3["tape"].states, i1["tape"].states, "states")
    _close(i3["tape"].outputs, i1["tape"].outputs, "tape outputs")
    if "accuracy" in i1:
        assert i3["accuracy"] == i1["accuracy"]


def test_a_diverging_block_names_the_row_of_the_whole_batch(monkeypatch):
    """Row 5 (third block, rows 4–6) overflows first (step 646), the other rows at step 647:
    U = 3I, identity, h_t = 3^t h_0 (closed form as in tests/test_simulation.py); with rows 1
    and 5 tied at 646 the lower row is named."""
    model = dynlab.models.RNN(U=3.0 * np.eye(3), W=np.zeros((3, 1)), b=np.zeros(3), activation="identity")
    h0 = np.ones((B, 3))
    h0[5] = 3.0
    x = np.zeros((B, 700, 1))
    readout = bp.init_readout(3, 1, seed=0)
    for n in (1, 3):
        _split(monkeypatch, n)
        with pytest.raises(DivergenceError) as info:
            bp.loss_and_grads(model, readout, x, np.zeros((B, 1)), loss="mse", h0=h0)
        assert (info.value.step, info.value.batch) == (646, 5), n
        tied = h0.copy()
        tied[1] = 3.0
        with pytest.raises(DivergenceError) as info:
            bp.loss_and_grads(model, readout, x, np.zeros((B, 1)), loss="mse", h0=tied)
        assert (info.value.step, info.value.batch) == (646, 1), n


def test_the_jitted_loops_split_at_small_sizes_and_the_python_loops_do_not():
    """The default thresholds: the iRNN, the GRU, the LSTM and a stack of them (one numba call
    per pass) split a batch of 128 of D=8; an RNN of D=8 (a Python loop per step), and a stack
    with one, do not; D=128 RNNs do (where both were measured)."""
    cpus = len(__import__("os").sched_getaffinity(0))
    rnn8 = dynlab.make_model("rnn", 8, 2, seed=0)
    rnn128 = dynlab.make_model("rnn", 128, 2, seed=0)
    for m in (dynlab.make_model("irnn", 8, 2, K=5, seed=0), dynlab.make_model("gru", 8, 2, seed=0),
              dynlab.make_model("lstm", 8, 2, seed=0), dynlab.make_model("stack", 8, 2, cell="gru", layers=2, seed=0)):
        assert len(bp._train_blocks(m, 128)) - 1 == min(cpus, 128), m.name
    assert len(bp._train_blocks(rnn8, 128)) - 1 == 1
    assert len(bp._train_blocks(dynlab.make_model("stack", 8, 2, cell="rnn", layers=2, seed=0), 128)) - 1 == 1
    assert len(bp._train_blocks(rnn128, 128)) - 1 == min(cpus, 128 * 128 * 128 // config.TRAIN_MIN_WORK_PER_THREAD)


def test_no_thread_splits_inside_a_sweep_region(monkeypatch):
    """``_blas.serial`` (every sweep region runs inside it: the sweep's workers are its
    parallelism) turns every one of dynlab's own splits off; outside, the settings hold."""
    from dynlab.backends.numba.backend import batch_parts
    from dynlab.backends.numba.threads import serial, work_threads
    from dynlab.analysis import partition as P
    from dynlab.sweep import driver

    rnn = dynlab.make_model("rnn", 128, 2, seed=0)
    for name in ("TRAIN_THREADS", "PARTITION_THREADS", "VECTORISED_SIMULATION_THREADS"):
        monkeypatch.setattr(config, name, 2)
    monkeypatch.setattr(config, "PARTITION_MIN_WORK_PER_THREAD", 1)
    assert work_threads(3) == 3 and work_threads(None) >= 1
    assert len(bp._train_blocks(rnn, 128)) == 3
    assert P._reverse_threads(8, 1) == 2
    assert batch_parts(128, 2, 32) == 2
    with serial():
        assert work_threads(3) == 1 and work_threads(None) == 1
        assert len(bp._train_blocks(rnn, 128)) == 2
        assert P._reverse_threads(8, 1) == 1
        assert batch_parts(128, 2, 32) == 1
    seen = []
    monkeypatch.setattr(driver, "_compute_region", lambda *a: seen.append(work_threads(4)) or {})
    driver.compute_region(None, (), "numba")
    assert seen == [1]


@pytest.mark.parametrize("case", ["irnn-K5-previous-minus", "irnn-abs", "rin", "gru", "lstm", "stack-lstm-mixed"])
@pytest.mark.parametrize("threads", [1, 3])
def test_a_workspace_reuses_tape_memory_and_changes_no_number(case, threads, monkeypatch):
    """Three calls with one ``Workspace`` (different inputs, then another batch size) equal
    fresh calls bitwise; what a call returned besides its tape (gradients, ∂L/∂h_0, ∂L/∂h_1,
    outputs) survives the next call; the tape arrays are reused (the same memory)."""
    _split(monkeypatch, threads)
    model = CASES[case]()
    ws = bp.Workspace()
    kept = []
    for seed, rows in ((1, B), (2, B), (3, B - 2)):
        x, h0, target, readout = _data(model, "mse-seq", seed=seed)
        x, h0, target = x[:rows], h0[:rows], target[:rows]
        fresh = bp.loss_and_grads(model, readout, x, target, loss="mse-seq", h0=h0)
        got = bp.loss_and_grads(model, readout, x, target, loss="mse-seq", h0=h0, workspace=ws)
        assert got[0] == fresh[0]
        for k in fresh[1]:
            np.testing.assert_array_equal(got[1][k], fresh[1][k])
        for k in ("dL_dh1", "dL_dWr", "outputs"):
            np.testing.assert_array_equal(got[2][k], fresh[2][k])
        kept.append((fresh, got))
    for fresh, got in kept:                       # nothing but the tape lives in the workspace
        for k in fresh[1]:
            np.testing.assert_array_equal(got[1][k], fresh[1][k])
        np.testing.assert_array_equal(got[2]["dL_dh1"], fresh[2]["dL_dh1"])
    sizes = [sum(a.nbytes for a in arena.arrays) for arena in ws.arenas]
    x, h0, target, readout = _data(model, "mse-seq", seed=4)
    x, h0, target = x[:B - 2], h0[:B - 2], target[:B - 2]
    bp.loss_and_grads(model, readout, x, target, loss="mse-seq", h0=h0, workspace=ws)
    assert [sum(a.nbytes for a in arena.arrays) for arena in ws.arenas] == sizes and sum(sizes) > 0

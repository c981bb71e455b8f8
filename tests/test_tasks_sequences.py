"""Sequence tasks: structure, baselines (closed form or Monte Carlo with stated error), seeding."""
import math

import numpy as np
import pytest

import dynlab
from dynlab.errors import ParameterError
from dynlab.tasks import sequences as sq
from dynlab.train import backprop as bp


def test_adding_markers_one_in_each_half_and_target_is_the_marked_sum():
    T = 21
    x, y = sq.adding_problem(T, 500, seed=0)
    assert x.shape == (500, T, 2) and y.shape == (500, 1)
    m = x[:, :, 1]
    assert np.all(m.sum(axis=1) == 2)
    assert np.all(m[:, :T // 2].sum(axis=1) == 1) and np.all(m[:, T // 2:].sum(axis=1) == 1)
    assert np.all((x[:, :, 0] >= 0) & (x[:, :, 0] < 1))
    np.testing.assert_allclose(y[:, 0], (x[:, :, 0] * m).sum(axis=1), rtol=0, atol=1e-15)


def test_adding_baseline_is_the_variance_of_the_target():
    """MSE of predicting 1 → Var(U + U') = 1/6; with N = 20000 draws the sample mean of (y − 1)²
    has standard error √(Var((y−1)²)/N) ≈ 0.0013 (Var((y−1)²) = 1/15 − 1/36); tolerance 5 s.e."""
    task = sq.make_task("adding", 10, seed=3, n_train=20000, n_val=10, n_test=10)
    _, y = task.batch("train")
    assert task.baseline == pytest.approx(1 / 6, rel=1e-15)
    se = math.sqrt((1 / 15 - 1 / 36) / y.shape[0])
    assert abs(float(np.mean((y - 1) ** 2)) - 1 / 6) < 5 * se


def test_ternary_classes_are_the_tertiles_of_the_sum():
    """Class edges √(2/3), 2 − √(2/3) make each class 1/3 likely (triangular CDF c²/2):
    each frequency of N = 30000 within 5 binomial standard errors √(2/9/N) of 1/3."""
    a, b = sq.TERNARY_EDGES
    assert a * a / 2 == pytest.approx(1 / 3) and 1 - (2 - b) ** 2 / 2 == pytest.approx(2 / 3)
    x, lab = sq.adding_problem(10, 30000, seed=1, ternary=True)
    s = (x[:, :, 0] * x[:, :, 1]).sum(axis=1)
    assert np.array_equal(lab, (s >= a).astype(int) + (s >= b).astype(int))
    freq = np.bincount(lab, minlength=3) / lab.size
    assert np.all(np.abs(freq - 1 / 3) < 5 * math.sqrt(2 / 9 / lab.size))
    task = sq.make_task("adding-ternary", 10, seed=0)
    assert task.loss == "ce" and task.outputs == 3 and task.baseline == pytest.approx(math.log(3))


def test_copy_layout_and_memoryless_baseline_exactly():
    T = 7
    x, lab = sq.copy_memory(T, 50, seed=2)
    assert x.shape == (50, T + 20, 10) and lab.shape == (50, T + 20)
    codes = x.argmax(axis=2)
    assert np.all(x.sum(axis=2) == 1)
    assert np.all((codes[:, :10] >= 1) & (codes[:, :10] <= 8))
    assert np.all(codes[:, 10:T + 9] == 0) and np.all(codes[:, T + 9] == 9) and np.all(codes[:, T + 10:] == 0)
    assert np.all(lab[:, :T + 10] == 0) and np.array_equal(lab[:, T + 10:], codes[:, :10])
    # the memoryless strategy: blank with certainty before the answer, uniform over 1..8 in it
    p = np.zeros((50, T + 20, 9))
    p[:, :T + 10, 0] = 1.0
    p[:, T + 10:, 1:] = 1 / 8
    ce = -np.mean(np.log(np.take_along_axis(p, lab[..., None], axis=2)))
    assert ce == pytest.approx(sq.copy_baseline(T), rel=1e-14)
    assert sq.copy_baseline(T) == pytest.approx(10 * math.log(8) / (T + 20), rel=1e-15)
    task = sq.make_task("copy", T, seed=0, n_train=20)
    xb, yb = task.batch("train", np.arange(3))
    assert xb.shape == (3, T + 20, 10) and task.steps == T + 20 and task.loss == "ce-seq"
    # the task's loss kind matches the backprop loss on its targets
    L, _, _ = bp.loss_value(task.loss, np.zeros((T + 20, 3, 9)), np.asarray(yb))
    assert L == pytest.approx(math.log(9))


def test_noise_padding_appends_noise_and_keeps_targets():
    task = sq.make_task("adding", 10, seed=0, n_train=2000, n_val=5, n_test=5)
    padded = sq.make_task("adding", 10, seed=0, n_train=2000, n_val=5, n_test=5, pad=15, pad_variance=4.0)
    x, y = task.batch("train")
    xp, yp = padded.batch("train")
    assert padded.steps == 25 and xp.shape == (2000, 25, 2)
    assert np.array_equal(xp[:, :10], x) and np.array_equal(yp, y)
    # noise variance 4: sample variance of 60000 N(0, 4) draws within 5 s.e. (√(2/N)·4)
    assert abs(float(xp[:, 10:].var()) - 4.0) < 5 * 4 * math.sqrt(2 / xp[:, 10:].size)
    with pytest.raises(ParameterError, match="pad"):
        sq.make_task("copy", 5, pad=3)


def test_splits_are_seeded_and_independent():
    a = sq.make_task("adding", 10, seed=4, n_train=50, n_val=50, n_test=50)
    b = sq.make_task("adding", 10, seed=4, n_train=50, n_val=50, n_test=50)
    c = sq.make_task("adding", 10, seed=5, n_train=50, n_val=50, n_test=50)
    assert np.array_equal(a.batch("val")[0], b.batch("val")[0])
    assert not np.array_equal(a.batch("val")[0], c.batch("val")[0])
    assert not np.array_equal(a.batch("train")[0][:50], a.batch("val")[0])
    rng1, rng2 = np.random.default_rng(9), np.random.default_rng(9)
    assert np.array_equal(a.sample(rng1, 7)[0], a.sample(rng2, 7)[0])


def test_digits_as_pixel_and_row_sequences():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    imgs = load_digits().images
    x, y = sq.load_digits_sequences("rows")
    assert x.shape == (1797, 8, 8) and np.array_equal(x[5], imgs[5] / 16)
    xp, _ = sq.load_digits_sequences("pixels")
    assert xp.shape == (1797, 64, 1) and np.array_equal(xp[5, :, 0], imgs[5].ravel() / 16)
    task = sq.make_task("digits-rows", seed=0)
    n = sum(task.size(s) for s in sq.SPLITS)
    assert n == 1797 and task.outputs == 10 and task.baseline == pytest.approx(math.log(10))
    seen = np.concatenate([task.batch(s)[1] for s in sq.SPLITS])
    assert np.array_equal(np.sort(seen), np.sort(y))


def test_permuted_digits_apply_one_fixed_permutation_to_every_sequence():
    pytest.importorskip("sklearn")
    plain = sq.make_task("digits-pixels", seed=0)
    perm = sq.make_task("digits-pixels", seed=0, permute=3)
    p = np.random.default_rng(3).permutation(64)
    for split in sq.SPLITS:
        (x0, y0), (x1, y1) = plain.batch(split), perm.batch(split)
        assert np.array_equal(y0, y1) and np.array_equal(x1, x0[:, p])   # same images, same order, steps permuted
    assert perm.settings["permute"] == 3 and not np.array_equal(p, np.arange(64))
    assert not np.array_equal(sq.make_task("digits-pixels", seed=0, permute=4).batch("train")[0], perm.batch("train")[0])
    with pytest.raises(ParameterError, match="permute"):
        sq.make_task("adding", 10, permute=1)
    with pytest.raises(ParameterError, match="permute"):
        sq.make_task("digits-rows", permute=-1)


def test_bad_task_settings_name_the_parameter():
    with pytest.raises(ParameterError, match="task"):
        sq.make_task("parity")
    with pytest.raises(ParameterError, match="steps"):
        sq.make_task("adding", 1)
    with pytest.raises(ParameterError, match="split"):
        sq.make_task("adding", 5, n_train=3, n_val=3, n_test=3).batch("dev")
    assert "make_task" in dir(dynlab.tasks)


def test_binary_adding_is_the_maso_papers_ternary_task():
    """MASO §6: values fair coins in {0, 1}, two markers at distinct positions anywhere in T,
    label = the sum (0/1/2 with probabilities 1/4, 1/2, 1/4); frequencies of N = 30000 within
    5 binomial standard errors; the baseline is the label entropy 1.5 ln 2."""
    T = 12
    x, lab = sq.adding_problem(T, 30000, seed=1, ternary=True, binary=True)
    assert set(np.unique(x[:, :, 0])) == {0.0, 1.0}
    assert np.all(x[:, :, 1].sum(axis=1) == 2)
    assert np.array_equal(lab, (x[:, :, 0] * x[:, :, 1]).sum(axis=1).astype(int))
    for c, p in enumerate((0.25, 0.5, 0.25)):
        assert abs(np.mean(lab == c) - p) < 5 * math.sqrt(p * (1 - p) / lab.size)
    first = x[:, :, 1].argmax(axis=1)
    last = T - 1 - x[:, ::-1, 1].argmax(axis=1)
    # markers anywhere: both can fall in the same half (each half holds both with prob. ≈ 1/4)
    assert np.mean(last < T // 2) > 0.2 and np.mean(first >= T // 2) > 0.2
    task = sq.make_task("adding-ternary", T, seed=0, binary=True, n_train=20, n_val=5, n_test=5)
    assert task.baseline == pytest.approx(1.5 * math.log(2)) and task.outputs == 3
    reg = sq.make_task("adding", T, seed=0, binary=True, n_train=20000, n_val=5, n_test=5)
    _, y = reg.batch("train")
    assert reg.baseline == 0.5 and abs(float(np.mean((y - 1) ** 2)) - 0.5) < 5 * math.sqrt(0.25 / y.size)
    with pytest.raises(Exception):
        sq.make_task("copy", 5, binary=True)

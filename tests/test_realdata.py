"""The real data: MNIST (idx files, gzipped or not, keras' npz) and UCI HAR read from tiny files
written in exactly their formats (``realdata_files``), and the tasks built from them — pixel,
permuted, row and noisy MNIST, HAR-2 — checked against the arrays written, with NumPy computing
every statistic independently (from the written arrays, or from the text files by ``np.loadtxt``).
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import dynlab as dl
import realdata_files as rf
from dynlab.errors import ParameterError
from dynlab.tasks import datafiles as df


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mnist")
    return folder, rf.write_mnist_idx(folder, gz=True)


def _match(rows, source):
    """Index into ``source`` (N, …) of every row of ``rows`` (found by content; rows are distinct)."""
    flat = source.reshape(len(source), -1)
    lookup = {r.tobytes(): i for i, r in enumerate(flat)}
    assert len(lookup) == len(flat)
    return np.array([lookup[r.tobytes()] for r in rows.reshape(len(rows), -1)])


# ============================================================================ reading the files
@pytest.mark.parametrize("gz,dotted,sub", [(True, False, ""), (False, False, ""), (True, True, ""),
                                           (False, True, os.path.join("MNIST", "raw"))])
def test_idx_files_read_back_what_was_written(tmp_path, gz, dotted, sub):
    arrays = rf.write_mnist_idx(tmp_path / sub if sub else tmp_path, gz=gz, dotted=dotted)
    ds = dl.tasks.read_mnist(tmp_path)
    for split in ("train", "test"):
        x, y = ds.split(split)
        assert x.dtype == np.uint8 and x.shape == arrays[f"x_{split}"].shape
        np.testing.assert_array_equal(x, arrays[f"x_{split}"])
        np.testing.assert_array_equal(y, arrays[f"y_{split}"])
    assert not ds.x_train.flags.writeable
    if not sub:                                           # one of the files names its folder
        name = "t10k-labels" + (".idx1-ubyte" if dotted else "-idx1-ubyte") + (".gz" if gz else "")
        np.testing.assert_array_equal(dl.tasks.read_mnist(tmp_path / name).y_test, arrays["y_test"])


def test_idx_header_is_big_endian_with_the_documented_magic(tmp_path):
    rf.write_mnist_idx(tmp_path, gz=False)
    raw = (tmp_path / "train-images-idx3-ubyte").read_bytes()
    assert raw[:4] == b"\x00\x00\x08\x03" and int.from_bytes(raw[4:8], "big") == 60
    assert int.from_bytes(raw[8:12], "big") == 28 == int.from_bytes(raw[12:16], "big")
    assert (tmp_path / "train-labels-idx1-ubyte").read_bytes()[:4] == b"\x00\x00\x08\x01"
    x = df.read_idx(tmp_path / "train-images-idx3-ubyte", df.IDX_IMAGES)
    np.testing.assert_array_equal(x.reshape(-1), np.frombuffer(raw[16:], np.uint8))


def test_npz_reads_like_the_idx_files(tmp_path):
    arrays = rf.write_mnist_npz(tmp_path / "mnist.npz")
    for where in (tmp_path / "mnist.npz", tmp_path):          # the file, or the folder holding it
        ds = dl.tasks.read_mnist(where)
        np.testing.assert_array_equal(ds.x_test, arrays["x_test"])
        np.testing.assert_array_equal(ds.y_train, arrays["y_train"])


def test_har_reads_the_text_files_channel_by_channel(tmp_path):
    arrays = rf.write_har(tmp_path)
    for where in (tmp_path, rf.har_root(tmp_path)):
        ds = dl.tasks.read_har(where)
        assert ds.x_train.shape == (24, 128, 9) and ds.x_train.dtype == np.float32
        for c, name in enumerate(rf.HAR_SIGNALS):
            ref = np.loadtxt(os.path.join(rf.har_root(tmp_path), "train", "Inertial Signals", f"{name}_train.txt"))
            # float32 keeps each value to half its last place: 2**-24 relative
            np.testing.assert_allclose(ds.x_train[:, :, c], ref, rtol=2.0 ** -24, atol=0)
        np.testing.assert_array_equal(ds.y_test, arrays["y_test"])
        assert df.HAR_CHANNELS == rf.HAR_SIGNALS


# ============================================================================ MNIST tasks
def test_pixel_task_splits_labels_and_global_normalisation(mnist_dir):
    folder, a = mnist_dir
    task = dl.make_task("mnist-pixels", data=folder, seed=3, n_val=10, n_test=15)
    assert (task.steps, task.inputs, task.outputs, task.loss) == (784, 1, 10, "ce")
    assert {s: task.size(s) for s in ("train", "val", "test")} == {"train": 50, "val": 10, "test": 15}
    assert task.data["train"][0].dtype == np.uint8           # stored as the file's bytes
    pixels = {s: task.data[s][0] for s in task.data}
    tr, va = _match(pixels["train"], a["x_train"]), _match(pixels["val"], a["x_train"])
    te = _match(pixels["test"], a["x_test"])
    # validation carved from the official training set, disjoint from training; test from the test set
    assert sorted(np.concatenate([tr, va])) == list(range(60)) and len(set(te)) == 15
    for s, i, src in (("train", tr, "y_train"), ("val", va, "y_val"), ("test", te, "y_test")):
        np.testing.assert_array_equal(task.data[s][1], a[src.replace("val", "train")][i])
    # normalisation: mean and std of every training-split pixel scaled to [0, 1], by NumPy
    ref = a["x_train"][tr].astype(np.float64) / 255.0
    mu, sd = ref.mean(), ref.std()
    x, y = task.batch("val")
    np.testing.assert_allclose(x[:, :, 0], (a["x_train"][va].reshape(10, 784) / 255.0 - mu) / sd,
                               rtol=0, atol=1e-13)
    xt, _ = task.batch("train")
    assert abs(xt.mean()) < 1e-13 and xt.std() == pytest.approx(1.0, abs=1e-13)
    # baseline: the label entropy of the training split
    p = np.bincount(a["y_train"][tr], minlength=10) / 50
    assert task.baseline == pytest.approx(-sum(q * math.log(q) for q in p if q > 0), rel=1e-14)


def test_defaults_use_every_official_image_and_a_tenth_for_validation(mnist_dir):
    folder, a = mnist_dir
    task = dl.make_task("mnist-rows", data=folder, seed=0)
    assert (task.steps, task.inputs) == (28, 28)
    assert (task.size("train"), task.size("val"), task.size("test")) == (54, 6, 20)
    x, _ = task.batch("test")
    ref = dl.make_task("mnist-pixels", data=folder, seed=0).batch("test")[0]
    np.testing.assert_array_equal(x.reshape(20, 784), ref[:, :, 0])   # rows are the pixels, 28 at a time
    other = dl.make_task("mnist-rows", data=folder, seed=1)
    assert not np.array_equal(other.data["val"][0], task.data["val"][0])


def test_permuted_mnist_is_one_fixed_permutation_of_every_sequence(mnist_dir):
    folder, _ = mnist_dir
    plain = dl.make_task("mnist-pixels", data=folder, seed=0)
    perm = dl.make_task("mnist-pixels", data=folder, seed=0, permute=42)
    order = np.random.default_rng(42).permutation(784)             # the documented draw
    assert sorted(order) == list(range(784))
    for split in ("train", "test"):
        x, y = plain.batch(split)
        xp, yp = perm.batch(split)
        np.testing.assert_array_equal(xp, x[:, order])
        np.testing.assert_array_equal(yp, y)
    assert perm.settings["permute"] == 42 and "permute=42" in repr(perm)
    rows = dl.make_task("mnist-rows", data=folder, seed=0, permute=7).batch("val")[0]
    np.testing.assert_array_equal(rows, dl.make_task("mnist-rows", data=folder, seed=0).batch("val")[0]
                                  [:, np.random.default_rng(7).permutation(28)])


def test_noisy_mnist_rows_then_reproducible_standard_noise(mnist_dir):
    folder, _ = mnist_dir
    T = 400
    task = dl.make_task("noisy-mnist", T, data=folder, seed=5, n_val=6)
    rows = dl.make_task("mnist-rows", data=folder, seed=5, n_val=6)
    assert (task.steps, task.inputs, task.outputs) == (T, 28, 10)
    assert task.data["train"][0].dtype == np.uint8 and task.data["train"][0].nbytes == 54 * 784
    x, y = task.batch("train")
    np.testing.assert_array_equal(x[:, :28], rows.batch("train")[0])   # the first 28 steps are the rows
    np.testing.assert_array_equal(y, rows.batch("train")[1])
    noise = x[:, 28:]
    n = noise.size                                  # 54 × 372 × 28 ≈ 5.6e5 draws
    assert abs(noise.mean()) < 5 / math.sqrt(n)     # 5 standard errors of a N(0, 1) mean
    assert abs(noise.var() - 1.0) < 5 * math.sqrt(2 / n)
    # the same sequence gets the same noise in any batch, at any position; another seed, other noise
    xb, _ = task.batch("train", np.array([7, 3, 7]))
    np.testing.assert_array_equal(xb[0], x[7])
    np.testing.assert_array_equal(xb[2], x[7])
    np.testing.assert_array_equal(xb[1], x[3])
    rng = np.random.default_rng(0)
    xs, ys = task.sample(rng, 5)
    idx = np.random.default_rng(0).integers(0, 54, 5)
    np.testing.assert_array_equal(xs, x[idx])
    again = dl.make_task("noisy-mnist", T, data=folder, seed=5, n_val=6).batch("train")[0]
    np.testing.assert_array_equal(again, x)
    other = dl.make_task("noisy-mnist", T, data=folder, seed=6, n_val=6)
    # sequences differ in their noise: correlation of two sequences' noise ~ N(0, 1/m)
    a, b = x[0, 28:].ravel(), x[1, 28:].ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(a.size)
    assert not np.array_equal(other.view.noise("train", [0]), task.view.noise("train", [0]))
    assert not np.array_equal(task.view.noise("val", [0]), task.view.noise("train", [0]))
    assert dl.make_task("noisy-mnist", data=folder, n_val=6).steps == 1000


def test_pad_appends_noise_lazily_to_the_pixel_task(mnist_dir):
    folder, _ = mnist_dir
    task = dl.make_task("mnist-pixels", data=folder, pad=400, pad_variance=4.0)
    x, _ = task.batch("val")
    assert task.steps == 1184 and x.shape == (6, 1184, 1)
    np.testing.assert_array_equal(x[:, :784], dl.make_task("mnist-pixels", data=folder).batch("val")[0])
    np.testing.assert_array_equal(x[:, 784:], task.view.noise("val", range(6)))
    noise = x[:, 784:]
    assert abs(noise.var() - 4.0) < 5 * 4.0 * math.sqrt(2 / noise.size)     # variance 4, within 5 s.e.


def test_noise_padded_pads_a_data_task_lazily_like_make_task(mnist_dir):
    from dynlab.tasks.sequences import noise_padded

    folder, _ = mnist_dir
    padded = noise_padded(dl.make_task("mnist-rows", data=folder, seed=4), 30)
    ref = dl.make_task("mnist-rows", data=folder, seed=4, pad=30)
    assert padded.steps == ref.steps == 58 and padded.data["val"][0].dtype == np.uint8
    np.testing.assert_array_equal(padded.batch("val")[0], ref.batch("val")[0])
    with pytest.raises(ParameterError, match="padded already"):
        noise_padded(ref, 3)


# ============================================================================ HAR-2
def test_har2_merges_the_activities_as_the_paper_does_and_normalises_per_step(tmp_path):
    a = rf.write_har(tmp_path)
    task = dl.make_task("har2", data=tmp_path, seed=2, n_val=4)
    assert (task.steps, task.inputs, task.outputs) == (128, 9, 2)
    # the paper: "Sitting, Laying, Walking_Upstairs and Standing, Walking, Walking_Downstairs"
    names = dict(line.split() for line in rf.ACTIVITY_LABELS.splitlines())
    group = {"SITTING": 0, "LAYING": 0, "WALKING_UPSTAIRS": 0, "STANDING": 1, "WALKING": 1, "WALKING_DOWNSTAIRS": 1}
    merged = {int(k): group[v] for k, v in names.items()}
    root = rf.har_root(tmp_path)
    raw = np.stack([np.loadtxt(os.path.join(root, "train", "Inertial Signals", f"{s}_train.txt"))
                    for s in rf.HAR_SIGNALS], axis=2)
    acts = np.loadtxt(os.path.join(root, "train", "y_train.txt")).astype(int)
    tr = _match(task.data["train"][0].astype(np.float64), raw.astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(task.data["train"][1], [merged[v] for v in acts[tr]])
    te_y = np.loadtxt(os.path.join(root, "test", "y_test.txt")).astype(int)
    np.testing.assert_array_equal(task.batch("test")[1], [merged[v] for v in te_y])
    # z-score per (step, channel) with the training split's statistics, from the float64 text values
    mu, sd = raw[tr].mean(axis=0), raw[tr].std(axis=0)
    x, _ = task.batch("test")
    test_raw = np.stack([np.loadtxt(os.path.join(root, "test", "Inertial Signals", f"{s}_test.txt"))
                         for s in rf.HAR_SIGNALS], axis=2)
    # float32 storage: each value off by ≤ 2**-24 relative, i.e. ≤ 2**-24 |x|/σ after the z-score
    tol = 2.0 ** -24 * (np.abs(test_raw) + np.abs(mu)).max() / sd.min() * 4
    np.testing.assert_allclose(x, (test_raw - mu) / sd, rtol=0, atol=tol)
    xt, _ = task.batch("train")
    np.testing.assert_allclose(xt.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(xt.std(axis=0), 1, atol=1e-12)
    # the other statistics: per channel, and global
    xc, _ = dl.make_task("har2", data=tmp_path, seed=2, n_val=4, normalise="channel").batch("train")
    np.testing.assert_allclose(xc.mean(axis=(0, 1)), 0, atol=1e-12)
    np.testing.assert_allclose(xc.std(axis=(0, 1)), 1, atol=1e-12)
    xg, _ = dl.make_task("har2", data=tmp_path, seed=2, n_val=4, normalise="global").batch("train")
    assert abs(xg.mean()) < 1e-12 and xg.std() == pytest.approx(1, abs=1e-12)
    assert a["x_train"].shape == (24, 128, 9)


# ============================================================================ one line per bad file
def _one_line(exc_info, *needles):
    err = exc_info.value
    text = str(err)
    assert err.param == "data" and "\n" not in text, text
    for needle in needles:
        assert needle in text, (needle, text)
    return text


def _mnist_case(tmp_path, case):
    """Write good gzipped idx files, then break one as ``case`` says."""
    a = rf.mnist_like()
    rf.write_mnist_idx(tmp_path, a, gz=False)
    p = tmp_path / "train-images-idx3-ubyte"
    if case == "magic":
        p.write_bytes(rf.idx_bytes(a["y_train"])[:4] + p.read_bytes()[4:])
        return p, ("magic number 0x00000801", "expected 0x00000803")
    if case == "truncated":
        p.write_bytes(p.read_bytes()[:-100])
        return p, ("truncated", f"{60 * 784 - 100} of the {60 * 784} data bytes")
    if case == "header":
        p.write_bytes(p.read_bytes()[:10])
        return p, ("truncated", "16-byte header")
    if case == "gzip":
        import gzip
        q = tmp_path / "train-images-idx3-ubyte.gz"
        q.write_bytes(gzip.compress(p.read_bytes())[:-50])
        p.unlink()
        return q, ("truncated gzip stream",)
    if case == "count":
        (tmp_path / "train-labels-idx1-ubyte").write_bytes(rf.idx_bytes(a["y_train"][:59]))
        return tmp_path / "train-labels-idx1-ubyte", ("59 labels", "60 images")
    if case == "label":
        y = a["y_train"].copy()
        y[4] = 10
        (tmp_path / "train-labels-idx1-ubyte").write_bytes(rf.idx_bytes(y))
        return tmp_path / "train-labels-idx1-ubyte", ("label 10 (item 4) outside 0–9",)
    if case == "size":
        (tmp_path / "t10k-images-idx3-ubyte").write_bytes(rf.idx_bytes(a["x_test"][:, :20, :20]))
        return tmp_path / "t10k-images-idx3-ubyte", ("20 × 20", "expected 28 × 28")
    if case == "missing":
        (tmp_path / "t10k-labels-idx1-ubyte").unlink()
        return tmp_path, ("no t10k-labels-idx1-ubyte",)
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["magic", "truncated", "header", "gzip", "count", "label", "size", "missing"])
def test_a_malformed_mnist_file_is_one_line_naming_it(tmp_path, case):
    path, needles = _mnist_case(tmp_path, case)
    with pytest.raises(ParameterError) as exc:
        dl.make_task("mnist-pixels", data=tmp_path)
    _one_line(exc, str(path), *needles)


@pytest.mark.parametrize("case", ["key", "zip", "dtype", "count"])
def test_a_malformed_npz_is_one_line_naming_it(tmp_path, case):
    a = rf.mnist_like()
    p = tmp_path / "mnist.npz"
    if case == "key":
        np.savez(p, **{k: v for k, v in a.items() if k != "x_test"})
        needles = ("no x_test array",)
    elif case == "zip":
        p.write_bytes(b"PK\x03\x04 not really a zip archive")
        needles = ("not a readable .npz",)
    elif case == "dtype":
        np.savez(p, **dict(a, x_train=a["x_train"] / 255.0))
        needles = ("[x_train]", "dtype float64")
    else:
        np.savez(p, **dict(a, y_test=a["y_test"][:-1]))
        needles = ("[y_test]", "19 labels", "20 images")
    with pytest.raises(ParameterError) as exc:
        dl.make_task("mnist-rows", data=p)
    _one_line(exc, str(p), *needles)


def _har_case(tmp_path, case):
    rf.write_har(tmp_path)
    sig = tmp_path / "UCI HAR Dataset" / "train" / "Inertial Signals"
    if case == "steps":
        f = sig / "body_gyro_y_train.txt"
        lines = f.read_text().splitlines(keepends=True)
        lines[4] = rf.har_line(np.ones(127))
        f.write_text("".join(lines))
        return f, ("line 5 has 127 values, expected 128",)
    if case == "channel":
        (sig / "total_acc_z_train.txt").unlink()
        return sig, ("8 of the 9 channels", "missing total_acc_z_train.txt")
    if case == "number":
        f = sig / "body_acc_x_train.txt"
        f.write_text(f.read_text().replace("e-00", "x-00", 1))
        return f, ("line 1", "is not a number")
    if case == "rows":
        f = sig / "body_acc_z_train.txt"
        f.write_text("".join(f.read_text().splitlines(keepends=True)[:-1]))
        return f, ("23 windows", "body_acc_x_train.txt has 24")
    if case == "label":
        f = tmp_path / "UCI HAR Dataset" / "test" / "y_test.txt"
        f.write_text("7\n" + "".join(f.read_text().splitlines(keepends=True)[1:]))
        return f, ("label 7 (line 1) is not an activity 1–6",)
    if case == "labels":
        f = tmp_path / "UCI HAR Dataset" / "train" / "y_train.txt"
        f.write_text(f.read_text() + "3\n")
        return f, ("25 labels", "24 windows")
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["steps", "channel", "number", "rows", "label", "labels"])
def test_a_malformed_har_file_is_one_line_naming_it(tmp_path, case):
    path, needles = _har_case(tmp_path, case)
    with pytest.raises(ParameterError) as exc:
        dl.make_task("har2", data=tmp_path)
    _one_line(exc, str(path), *needles)


def test_the_arguments_of_the_data_tasks_are_checked(mnist_dir, tmp_path):
    folder, _ = mnist_dir
    cases = [(dict(name="mnist-pixels"), "data", "give MNIST"),
             (dict(name="har2"), "data", "UCI HAR"),
             (dict(name="mnist-pixels", data=tmp_path / "nowhere"), "data", "no such file or folder"),
             (dict(name="har2", data=tmp_path), "data", "no train/ and test/ folders"),
             (dict(name="adding", data=folder), "data", "applies to the tasks of the real data"),
             (dict(name="mnist-pixels", data=folder, steps=100), "steps", "fixed by the data"),
             (dict(name="noisy-mnist", data=folder, pad=3), "pad", "give steps, not pad"),
             (dict(name="noisy-mnist", data=folder, steps=20), "steps", ""),
             (dict(name="noisy-mnist", data=folder, permute=1), "permute", "not to noisy-mnist"),
             (dict(name="mnist-rows", data=folder, normalise="minmax"), "normalise", "global, channel"),
             (dict(name="mnist-rows", data=folder, n_val=60), "n_val", "leave a training example"),
             (dict(name="mnist-rows", data=folder, n_val=10, n_train=51), "n_train", "50 mnist training"),
             (dict(name="mnist-rows", data=folder, n_test=21), "n_test", "20 mnist test")]
    for kw, param, text in cases:
        with pytest.raises(ParameterError) as exc:
            dl.make_task(**kw)
        assert exc.value.param == param and text in exc.value.message, (kw, str(exc.value))

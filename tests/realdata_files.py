"""Tiny files in exactly the formats MNIST and UCI HAR are distributed in, for tests.

Written here from the formats' own descriptions, independently of ``dynlab.tasks.datafiles``:

* idx (LeCun's MNIST page): a big-endian 32-bit magic number — 0x00000803 for images (unsigned
  bytes, 3 dimensions), 0x00000801 for labels (1 dimension) — then each dimension as a big-endian
  32-bit integer, then the bytes row-major; distributed gzipped (``*.gz``);
* keras' ``mnist.npz``: uint8 ``x_train`` (N, 28, 28), ``y_train`` (N,), ``x_test``, ``y_test``;
* UCI HAR: ``UCI HAR Dataset/{train,test}/Inertial Signals/<signal>_<split>.txt`` with one window
  of 128 values a line, each printed as the data set prints them (``%.7e`` with a three-digit
  exponent, two spaces apart, e.g. `` 1.8085150e-004  1.0766810e-002``), and
  ``{train,test}/y_<split>.txt`` with one activity 1–6 a line; ``activity_labels.txt`` names them.

``write_mnist_idx``, ``write_mnist_npz`` and ``write_har`` return the arrays they wrote, so a test
compares what dynlab reads with what was written.  Other tests (the figures' ``--data``) can use
them too.
"""
from __future__ import annotations

import gzip
import os
import struct

import numpy as np

IDX_NAMES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
             "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}
HAR_SIGNALS = ("body_acc_x", "body_acc_y", "body_acc_z", "body_gyro_x", "body_gyro_y", "body_gyro_z",
               "total_acc_x", "total_acc_y", "total_acc_z")
ACTIVITY_LABELS = "1 WALKING\n2 WALKING_UPSTAIRS\n3 WALKING_DOWNSTAIRS\n4 SITTING\n5 STANDING\n6 LAYING\n"


def mnist_like(n_train: int = 60, n_test: int = 20, seed: int = 0) -> dict:
    """Random 28×28 uint8 "digits" (about 80 % of pixels 0, as in MNIST) and labels covering 0–9."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (n, 28, 28)).astype(np.uint8)
        x[rng.random((n, 28, 28)) < 0.8] = 0
        y = np.concatenate([np.arange(10), rng.integers(0, 10, max(0, n - 10))])[:n]
        out[f"x_{split}"], out[f"y_{split}"] = x, rng.permutation(y).astype(np.uint8)
    return out


def idx_bytes(array: np.ndarray) -> bytes:
    """The idx encoding of a uint8 array: magic 0x0000080<rank>, the dimensions, the bytes."""
    a = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">BBBB", 0, 0, 0x08, a.ndim) + struct.pack(">" + "I" * a.ndim, *a.shape)
    return header + a.tobytes()


def write_mnist_idx(folder, arrays: dict | None = None, *, gz: bool = True, dotted: bool = False) -> dict:
    """Write the four idx files (``.gz`` when ``gz``; ``train-images.idx3-ubyte`` spelling when
    ``dotted``) of ``arrays`` (default ``mnist_like()``) into ``folder``; returns the arrays."""
    arrays = mnist_like() if arrays is None else arrays
    os.makedirs(folder, exist_ok=True)
    for key, name in IDX_NAMES.items():
        if dotted:
            name = name.replace("-idx", ".idx")
        raw = idx_bytes(arrays[key])
        path = os.path.join(folder, name + (".gz" if gz else ""))
        with open(path, "wb") as f:
            f.write(gzip.compress(raw) if gz else raw)
    return arrays


def write_mnist_npz(path, arrays: dict | None = None) -> dict:
    """keras' ``mnist.npz`` layout of ``arrays`` (default ``mnist_like()``); returns the arrays."""
    arrays = mnist_like() if arrays is None else arrays
    np.savez_compressed(path, **arrays)
    return arrays


def har_like(n_train: int = 24, n_test: int = 12, seed: int = 0) -> dict:
    """Signals (N, 128, 9) with channel- and step-dependent means and scales, activities 1–6 (each
    at least twice per split), already rounded to the 8 significant digits the files print."""
    rng = np.random.default_rng(seed)
    out = {}
    t = np.arange(128)
    offset = rng.normal(0, 1, 9)
    scale = np.exp(rng.normal(-1, 1, 9))
    for split, n in (("train", n_train), ("test", n_test)):
        y = rng.permutation(np.concatenate([np.repeat(np.arange(1, 7), 2), rng.integers(1, 7, n - 12)]))
        wave = np.sin(2 * np.pi * (y[:, None, None] / 12.0) * t[None, :, None] / 16.0)
        x = offset + scale * (wave + 0.3 * rng.standard_normal((n, 128, 9)))
        out[f"x_{split}"] = np.array([[float(_fmt(v)) for v in row.ravel()] for row in x]).reshape(x.shape)
        out[f"y_{split}"] = y.astype(np.int64)
    return out


def _fmt(v: float) -> str:
    """UCI HAR's number format: ``%.7e`` with a three-digit exponent."""
    mant, exp = f"{v:.7e}".split("e")
    return f"{mant}e{exp[0]}{int(exp[1:]):03d}"


def har_line(values) -> str:
    return "".join(" " + (" " if v >= 0 else "") + _fmt(v) for v in values).rstrip() + "\n"


def write_har(folder, arrays: dict | None = None, *, inner: bool = True) -> dict:
    """Write UCI HAR's layout (``folder/UCI HAR Dataset/…`` when ``inner``, else straight into
    ``folder``) for ``arrays`` (default ``har_like()``); returns the arrays."""
    arrays = har_like() if arrays is None else arrays
    root = os.path.join(folder, "UCI HAR Dataset") if inner else os.fspath(folder)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "activity_labels.txt"), "w") as f:
        f.write(ACTIVITY_LABELS)
    for split in ("train", "test"):
        sig = os.path.join(root, split, "Inertial Signals")
        os.makedirs(sig, exist_ok=True)
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        for c, name in enumerate(HAR_SIGNALS):
            with open(os.path.join(sig, f"{name}_{split}.txt"), "w") as f:
                f.writelines(har_line(row) for row in x[:, :, c])
        with open(os.path.join(root, split, f"y_{split}.txt"), "w") as f:
            f.writelines(f"{int(v)}\n" for v in y)
    return arrays


def har_root(folder) -> str:
    return os.path.join(folder, "UCI HAR Dataset")

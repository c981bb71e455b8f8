"""Readers of two real data sets in the formats they are distributed in, for the tasks of
``dynlab.tasks.realdata``.  Nothing is downloaded: a user brings the files.

MNIST (LeCun et al.), either

* its four idx files, gzipped or not — ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
  ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte`` (also spelt ``train-images.idx3-ubyte``
  …), in the folder given or its ``raw/`` or ``MNIST/raw/`` (torchvision's layout).  An idx file
  is a big-endian header — the magic number 0x00000803 (unsigned bytes, 3 dimensions: images)
  or 0x00000801 (1 dimension: labels), then each dimension as a 32-bit integer — followed by
  exactly that many bytes, row-major;
* or keras' ``mnist.npz``: arrays ``x_train`` (60000, 28, 28) and ``x_test`` (10000, 28, 28) of
  uint8 pixels, ``y_train`` and ``y_test`` of labels 0–9 (read without pickles).

UCI HAR (Anguita et al. 2013, "Human Activity Recognition Using Smartphones"), its unpacked
folder ``UCI HAR Dataset/`` (or the folder holding it): the nine raw signals of
``train/Inertial Signals/`` (``body_acc_x_train.txt`` …, one 2.56 s window of 128 steps per line,
whitespace-separated numbers) and ``train/y_train.txt`` (one activity 1–6 per line), the same
for ``test``.  Channels are stacked in the order of ``HAR_CHANNELS``.

A missing or malformed file raises ``ParameterError("data", …)``: one line naming the file and
what is wrong with it (the CLI prints it and exits 2).  The arrays returned are read-only and
the last data set read is kept (one entry, keyed by the files' paths, sizes and modification
times), so building several tasks from the same files reads them once.
"""
from __future__ import annotations

import dataclasses
import gzip
import os
import zipfile
import zlib

import numpy as np

from ..errors import ParameterError

#: The idx files of MNIST, by split: (images, labels).
MNIST_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
               "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
#: Magic numbers of idx files of unsigned bytes: 0x08 (ubyte) in the third byte, the rank in the fourth.
IDX_IMAGES, IDX_LABELS = 0x00000803, 0x00000801
MNIST_SIZE = (28, 28)
#: keras' mnist.npz arrays.
NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
#: Sub-folders searched for the idx files, after the folder itself (torchvision keeps them in MNIST/raw).
MNIST_SUBDIRS = ("", "raw", os.path.join("MNIST", "raw"))
#: UCI HAR's raw signals, in the order they are stacked as input channels.
HAR_CHANNELS = ("body_acc_x", "body_acc_y", "body_acc_z", "body_gyro_x", "body_gyro_y", "body_gyro_z",
                "total_acc_x", "total_acc_y", "total_acc_z")
HAR_STEPS = 128
#: UCI HAR's activities, labels 1..6 in this order (activity_labels.txt).
HAR_ACTIVITIES = ("WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING", "LAYING")
HAR_FOLDER = "UCI HAR Dataset"


@dataclasses.dataclass(frozen=True, eq=False)
class LabelledData:
    """A data set's official splits as read from its files.

    Attributes
    ----------
    name : ``"mnist"`` or ``"har"``
    x_train, x_test : MNIST: uint8 images (N, 28, 28); HAR: float32 signals (N, 128, 9)
    y_train, y_test : int64 labels (N,): MNIST 0–9, HAR the activities 1–6
    source : the folder or file read
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str

    def split(self, name: str):
        """(x, y) of the official ``"train"`` or ``"test"`` split."""
        return (self.x_train, self.y_train) if name == "train" else (self.x_test, self.y_test)


def _bad(path, what: str) -> ParameterError:
    return ParameterError("data", f"{os.fspath(path)}: {what}")


# ============================================================================ the last read, kept
_LAST: dict = {}


def _stamp(paths) -> tuple:
    out = []
    for p in paths:
        st = os.stat(p)
        out.append((os.path.abspath(p), st.st_size, st.st_mtime_ns))
    return tuple(out)


def _cached(kind: str, paths, read):
    key = (kind, _stamp(paths))
    if _LAST.get("key") != key:
        _LAST.clear()
        value = read()
        _LAST.update(key=key, value=value)
    return _LAST["value"]


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# ============================================================================ MNIST
def _file_bytes(path) -> bytes:
    """A file's bytes, gunzipped when it starts with gzip's magic bytes (whatever its name)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise _bad(path, f"cannot be read ({exc.strerror or exc})") from None
    if raw[:2] != b"\x1f\x8b":
        if os.fspath(path).endswith(".gz"):
            raise _bad(path, "is named .gz but is not a gzip file")
        return raw
    try:
        return gzip.decompress(raw)
    except EOFError:
        raise _bad(path, "truncated gzip stream (the file ends before the compressed data does)") from None
    except (OSError, zlib.error) as exc:
        raise _bad(path, f"corrupt gzip data ({exc})") from None


def read_idx(path, magic: int) -> np.ndarray:
    """The array of one idx file of unsigned bytes (gzipped or not), checked against ``magic``.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    magic : int
        The expected magic number: ``IDX_IMAGES`` (0x00000803) or ``IDX_LABELS`` (0x00000801).

    Returns
    -------
    numpy.ndarray
        uint8 of the shape the header gives (read-only, a view of the file's bytes).
    """
    buf = _file_bytes(path)
    kind = {IDX_IMAGES: "idx3 images", IDX_LABELS: "idx1 labels"}.get(magic, "idx")
    if len(buf) < 4:
        raise _bad(path, f"truncated: {len(buf)} bytes, shorter than the 4-byte magic number")
    found = int.from_bytes(buf[:4], "big")
    if found != magic:
        raise _bad(path, f"magic number 0x{found:08X}, expected 0x{magic:08X} ({kind} of unsigned bytes)")
    rank = magic & 0xFF
    header = 4 + 4 * rank
    if len(buf) < header:
        raise _bad(path, f"truncated: {len(buf)} bytes, shorter than its {header}-byte header")
    dims = tuple(int(d) for d in np.frombuffer(buf, dtype=">u4", count=rank, offset=4))
    n = int(np.prod(dims, dtype=np.int64))
    body = len(buf) - header
    shape = " × ".join(map(str, dims))
    if body < n:
        raise _bad(path, f"truncated: {body} of the {n} data bytes its header announces ({shape})")
    if body > n:
        raise _bad(path, f"{body - n} bytes beyond the {n} its header announces ({shape})")
    return np.frombuffer(buf, dtype=np.uint8, count=n, offset=header).reshape(dims)


def _idx_path(folder: str, base: str) -> str | None:
    dotted = base.replace("-idx", ".idx")
    for sub in MNIST_SUBDIRS:
        for name in (base, base + ".gz", dotted, dotted + ".gz"):
            p = os.path.join(folder, sub, name)
            if os.path.isfile(p):
                return p
    return None


def _check_mnist(images, labels, img_src, lab_src):
    """Shapes and labels of one split; ``*_src`` name the files in the error line."""
    if images.ndim != 3 or images.shape[1:] != MNIST_SIZE:
        size = " × ".join(map(str, images.shape[1:])) if images.ndim == 3 else f"shape {images.shape}"
        raise _bad(img_src, f"images of {size}, expected 28 × 28 pixels (MNIST)")
    if labels.ndim != 1:
        raise _bad(lab_src, f"labels of shape {labels.shape}, expected one label per image")
    if labels.shape[0] != images.shape[0]:
        raise _bad(lab_src, f"{labels.shape[0]} labels but {os.path.basename(img_src)} has {images.shape[0]} images")
    bad = np.flatnonzero(labels > 9)
    if bad.size:
        raise _bad(lab_src, f"label {int(labels[bad[0]])} (item {int(bad[0])}) outside 0–9")


def _read_mnist_idx(folder: str) -> LabelledData:
    found = {}
    for split, bases in MNIST_FILES.items():
        for base in bases:
            p = _idx_path(folder, base)
            if p is None:
                raise _bad(folder, f"no {base} (or {base}.gz) here, nor in its raw/ or MNIST/raw/ "
                                   "(MNIST's four idx files, or give keras' mnist.npz)")
            found[base] = p

    def read():
        parts = []
        for split, (img, lab) in MNIST_FILES.items():
            x = read_idx(found[img], IDX_IMAGES)
            y = read_idx(found[lab], IDX_LABELS)
            _check_mnist(x, y, found[img], found[lab])
            parts += [x, _frozen(y.astype(np.int64))]
        return LabelledData("mnist", parts[0], parts[1], parts[2], parts[3], folder)

    return _cached("mnist-idx", list(found.values()), read)


def _read_mnist_npz(path: str) -> LabelledData:
    def read():
        try:
            z = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise _bad(path, f"not a readable .npz file ({exc})") from None
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise _bad(path, "holds one array, not an .npz archive of x_train, y_train, x_test, y_test")
        with z:
            missing = [k for k in NPZ_KEYS if k not in z.files]
            if missing:
                raise _bad(path, f"no {', '.join(missing)} array (keras' mnist.npz holds x_train, y_train, x_test, "
                                 f"y_test; found {', '.join(z.files) or 'none'})")
            arrays = {}
            for k in NPZ_KEYS:
                try:
                    arrays[k] = z[k]
                except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
                    raise _bad(path, f"array {k} cannot be read ({exc})") from None
        out = []
        for split in ("train", "test"):
            x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
            src_x, src_y = f"{path}[x_{split}]", f"{path}[y_{split}]"
            if x.ndim == 2 and x.shape[1] == 784:
                x = x.reshape(-1, 28, 28)
            for a, src, what in ((x, src_x, "pixels 0–255"), (y, src_y, "labels 0–9")):
                if not np.issubdtype(a.dtype, np.integer):
                    raise _bad(src, f"dtype {a.dtype}, expected integer {what} (as keras' uint8)")
            if x.size and (x.min() < 0 or x.max() > 255):
                raise _bad(src_x, f"pixel values {x.min()}..{x.max()}, outside 0–255")
            if y.size and y.min() < 0:
                raise _bad(src_y, f"label {int(y.min())} outside 0–9")
            _check_mnist(x, y, src_x, src_y)
            out += [_frozen(np.ascontiguousarray(x, dtype=np.uint8)), _frozen(y.astype(np.int64))]
        return LabelledData("mnist", out[0], out[1], out[2], out[3], path)

    return _cached("mnist-npz", [path], read)


def read_mnist(path) -> LabelledData:
    """MNIST's official training (60 000) and test (10 000) sets from the user's files.

    Parameters
    ----------
    path : str or os.PathLike
        A folder holding the four idx files (gzipped or not; also in its ``raw/`` or
        ``MNIST/raw/``) or a ``mnist.npz`` (or a folder holding one); one of the idx files names
        its folder.

    Returns
    -------
    LabelledData
        uint8 images (N, 28, 28) and int64 labels 0–9, read-only.  In memory: the images'
        bytes (47 MB for the training set, 7.8 MB for the test set), nothing in float.

    Raises
    ------
    dynlab.errors.ParameterError
        (``data``) naming the missing or malformed file: a wrong magic number, a truncated file
        (or gzip stream), images that are not 28 × 28, as many labels as images not given, a label
        outside 0–9, an .npz without one of x_train, y_train, x_test, y_test.
    """
    p = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if os.path.isfile(p):
        if p.endswith(".npz"):
            return _read_mnist_npz(p)
        name = os.path.basename(p)
        if any(name.startswith(b.replace("-idx", ".idx")) or name.startswith(b)
               for bases in MNIST_FILES.values() for b in bases):
            return _read_mnist_idx(os.path.dirname(p))
        raise _bad(p, "is neither an .npz nor one of MNIST's idx files; give the folder holding "
                      "train-images-idx3-ubyte(.gz) and the three others, or keras' mnist.npz")
    if not os.path.isdir(p):
        raise _bad(p, "no such file or folder")
    if _idx_path(p, MNIST_FILES["train"][0]) is None and os.path.isfile(os.path.join(p, "mnist.npz")):
        return _read_mnist_npz(os.path.join(p, "mnist.npz"))
    return _read_mnist_idx(p)


# ============================================================================ UCI HAR
def _read_table(path, width: int | None, what: str) -> np.ndarray:
    """The numbers of a whitespace-separated text file: (rows, width) float64, each line checked."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("ascii")
    except FileNotFoundError:
        raise _bad(path, "missing") from None
    except OSError as exc:
        raise _bad(path, f"cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise _bad(path, "is not a plain text file of numbers") from None
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    if not lines:
        raise _bad(path, "is empty")
    rows = []
    for number, line in lines:
        fields = line.split()
        if width is not None and len(fields) != width:
            raise _bad(path, f"line {number} has {len(fields)} values, expected {width} ({what})")
        rows.append(fields)
    try:
        return np.array(rows, dtype=np.float64)
    except ValueError:
        for number, line in lines:
            for tok in line.split():
                try:
                    float(tok)
                except ValueError:
                    raise _bad(path, f"line {number}: {tok!r} is not a number") from None
        raise


def _har_root(path: str) -> str:
    for root in (os.path.join(path, HAR_FOLDER), path):
        if os.path.isdir(os.path.join(root, "train")) and os.path.isdir(os.path.join(root, "test")):
            return root
    raise _bad(path, f"no train/ and test/ folders of UCI HAR here nor in {HAR_FOLDER}/ "
                     "(give the unpacked 'UCI HAR Dataset' folder)")


def _read_har_split(root: str, split: str):
    folder = os.path.join(root, split, "Inertial Signals")
    if not os.path.isdir(folder):
        raise _bad(folder, "missing (UCI HAR's raw signals: the nine *_" + split + ".txt files)")
    files = [os.path.join(folder, f"{ch}_{split}.txt") for ch in HAR_CHANNELS]
    missing = [os.path.basename(f) for f in files if not os.path.isfile(f)]
    if missing:
        raise _bad(folder, f"{len(HAR_CHANNELS) - len(missing)} of the {len(HAR_CHANNELS)} channels "
                           f"(missing {', '.join(missing)})")
    x = np.empty((0,), dtype=np.float32)
    n = None
    for c, f in enumerate(files):
        sig = _read_table(f, HAR_STEPS, "steps of a window")
        if n is None:
            n = sig.shape[0]
            x = np.empty((n, HAR_STEPS, len(HAR_CHANNELS)), dtype=np.float32)
        elif sig.shape[0] != n:
            raise _bad(f, f"{sig.shape[0]} windows but {os.path.basename(files[0])} has {n}")
        x[:, :, c] = sig
    lab_path = os.path.join(root, split, f"y_{split}.txt")
    y = _read_table(lab_path, 1, "one activity per line")[:, 0]
    if y.shape[0] != n:
        raise _bad(lab_path, f"{y.shape[0]} labels but the signals have {n} windows")
    bad = np.flatnonzero((y != np.round(y)) | (y < 1) | (y > len(HAR_ACTIVITIES)))
    if bad.size:
        raise _bad(lab_path, f"label {y[bad[0]]:g} (line {int(bad[0]) + 1}) is not an activity 1–6")
    return _frozen(x), _frozen(y.astype(np.int64))


def read_har(path) -> LabelledData:
    """UCI HAR's raw inertial signals and activities, official training (7352) and test (2947) sets.

    Parameters
    ----------
    path : str or os.PathLike
        The unpacked ``UCI HAR Dataset`` folder, or the folder holding it.

    Returns
    -------
    LabelledData
        float32 signals (N, 128, 9), channels in the order of ``HAR_CHANNELS``, and int64
        activities 1–6 (``HAR_ACTIVITIES``), read-only.  In memory: 34 MB (training set) and
        13.6 MB (test set) of float32, which rounds each value by at most 6e-8 relative (half
        its unit in the last place), below the files' own rounding to 7 significant digits.

    Raises
    ------
    dynlab.errors.ParameterError
        (``data``) naming the missing or malformed file: a missing channel, a line without 128
        values, a value that is not a number, channels or labels of different lengths, a label
        outside 1–6.
    """
    p = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if not os.path.isdir(p):
        raise _bad(p, "no such folder (give the unpacked 'UCI HAR Dataset' folder)")
    root = _har_root(p)
    paths = []
    for split in ("train", "test"):
        paths += [os.path.join(root, split, "Inertial Signals", f"{ch}_{split}.txt") for ch in HAR_CHANNELS]
        paths.append(os.path.join(root, split, f"y_{split}.txt"))

    def read():
        xtr, ytr = _read_har_split(root, "train")
        xte, yte = _read_har_split(root, "test")
        return LabelledData("har", xtr, ytr, xte, yte, root)

    if not all(os.path.isfile(f) for f in paths):
        return read()          # names the first missing file
    return _cached("har", paths, read)


__all__ = ["HAR_ACTIVITIES", "HAR_CHANNELS", "HAR_STEPS", "IDX_IMAGES", "IDX_LABELS", "LabelledData", "MNIST_FILES",
           "NPZ_KEYS", "read_har", "read_idx", "read_mnist"]

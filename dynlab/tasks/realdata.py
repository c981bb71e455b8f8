"""The papers' tasks on the real data sets, read from the user's files (``dynlab.tasks.datafiles``).

* ``mnist-pixels`` — Pixel-MNIST (iRNN paper App. A.4; MASO paper): each image read pixel by
  pixel, row-major, T = 784, d = 1, 10 classes.  ``permute=SEED`` gives Permuted-MNIST: one
  fixed permutation of the 784 time steps, ``numpy.random.default_rng(SEED).permutation(784)``,
  applied to every sequence of every split (the iRNN paper "keep[s] the random seed as 42" but
  does not say with which generator, so its exact permutation cannot be rebuilt;
  ``permute=42`` is the same seed, not the same permutation).
* ``mnist-rows`` — the image read row by row: T = 28, d = 28 (``permute`` permutes the rows).
* ``noisy-mnist`` — the iRNN paper's Noisy-MNIST: the 28 rows (d = 28) for the first 28 steps,
  then i.i.d. N(0, 1) noise up to T = ``steps`` (1000 by default).
* ``har2`` — the iRNN paper's HAR-2: UCI HAR's nine raw inertial signals, T = 128, d = 9, the six
  activities merged into two classes as the paper states them: class 0 = Sitting, Laying,
  Walking_Upstairs (activities 4, 6, 2), class 1 = Standing, Walking, Walking_Downstairs
  (5, 1, 3).

Splits: the validation split is carved from the official training set by a seeded shuffle
(``default_rng([seed, 30])``; ``n_val``: by default 5000 images for MNIST — the usual
55 000 / 5000 —, 735 windows, 10 %, for HAR, and never more than a tenth of the training set),
the training split is the rest (or ``n_train`` of it), the test split is the official test set
(or a seeded subset of ``n_test``, ``default_rng([seed, 31])``).  UCI HAR's
windows overlap by half, so a validation window shares half its samples with a training window:
validation scores on HAR are optimistic; the test set (other subjects) is not affected.

Normalisation ("zero mean, unit variance", with the statistics of the *training split* only):
pixels are first scaled to [0, 1] (÷ 255); then x ↦ (x − μ)/σ with μ, σ over every training
value (``normalise="global"``, MNIST's default: the torchvision convention 0.1307 / 0.3081), per
input feature over sequences and steps (``"channel"``), or per step and feature over sequences
(``"step"``, HAR's default: the per-feature z-score of the EdgeML pipeline the HAR-2 baselines come
from); ``"none"`` leaves the scaled values.  A σ below 1e-6 (a pixel that is 0 in every training
image) is replaced by 1, so that feature is only centred.  Noise is appended after normalising.

Memory: a task keeps each split's examples as the files store them — uint8 images (55 000 × 784
bytes = 43 MB for MNIST's training split), float32 signals for HAR (27 MB) — and builds the
float64 inputs of the sequences asked for, batch by batch (``Task.batch``, ``Task.sample``).  The
noise of ``noisy-mnist`` (and of ``pad``) is never stored: the noise of sequence i of a split is
drawn from ``default_rng([noise_seed, 20 + split index, i])`` each time that sequence is built, so
it is the same in every batch it appears in, and the same for the same ``seed``.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._resources import check_memory, nbytes, shape_text
from .._validate import as_int, as_scalar
from ..errors import ParameterError
from .datafiles import HAR_ACTIVITIES, read_har, read_mnist

DATA_TASKS = ("mnist-pixels", "mnist-rows", "noisy-mnist", "har2")
#: Which files each task reads.
DATASET_OF = {"mnist-pixels": "mnist", "mnist-rows": "mnist", "noisy-mnist": "mnist", "har2": "har"}
NORMALISE = ("global", "channel", "step", "none")
DEFAULT_NORMALISE = {"mnist": "global", "har": "step"}
#: Validation sequences carved from the official training set when ``n_val`` is not given.
DEFAULT_VAL = {"mnist": 5000, "har": 735}
NOISY_ROWS = 28
NOISY_STEPS = 1000
#: HAR-2's classes: the UCI activities (1–6) merged into class 0 and class 1 (iRNN paper App. A.4).
HAR2_CLASSES = ((2, 4, 6), (1, 3, 5))
STD_FLOOR = 1e-6
#: The split streams of the noise: split name → index in the seed ``[noise_seed, 20 + index, i]``.
SPLIT_INDEX = {"train": 0, "val": 1, "test": 2}


@dataclasses.dataclass(frozen=True, eq=False)
class SequenceView:
    """How a split's stored examples become model inputs, one batch at a time.

    An example stored as ``layout`` = (T0, d) values (after a reshape) becomes
    x = (scale · example − mean) / std, its steps reordered by ``order`` (when given), followed
    by ``pad`` steps of N(0, ``pad_variance``) noise — sequence i of a split draws its noise from
    ``default_rng([noise_seed, 20 + SPLIT_INDEX[split], i])``, so it is reproducible and never
    stored.  ``mean`` and ``std`` broadcast against (T0, d).
    """

    layout: tuple
    scale: float
    mean: np.ndarray
    std: np.ndarray
    order: np.ndarray | None = None
    pad: int = 0
    pad_variance: float = 1.0
    noise_seed: int = 0

    @property
    def steps(self) -> int:
        return int(self.layout[0]) + int(self.pad)

    @property
    def inputs(self) -> int:
        return int(self.layout[1])

    def noise(self, split: str, positions) -> np.ndarray:
        """The (B, pad, d) noise of the sequences at ``positions`` of ``split``."""
        pos = np.asarray(positions, dtype=np.int64).reshape(-1)
        out = np.empty((pos.size, self.pad, self.inputs))
        self._noise_into(out, split, pos)
        return out

    def _noise_into(self, out, split, pos):
        k = SPLIT_INDEX[split]
        sd = math.sqrt(self.pad_variance)
        for b, i in enumerate(pos):
            np.random.default_rng([self.noise_seed, 20 + k, int(i)]).standard_normal(out=out[b])
        if sd != 1.0:
            out *= sd

    def __call__(self, stored, split: str, positions) -> np.ndarray:
        """float64 inputs (B, T, d) of the stored examples ``stored`` (B, …) at ``positions`` of ``split``."""
        pos = np.asarray(positions, dtype=np.int64).reshape(-1)
        T0, d = self.layout
        B = pos.size
        check_memory(nbytes(B, self.steps, d), "split",
                     f"the inputs of {B} sequences ({shape_text(B, self.steps, d)} float64); take them in batches")
        out = np.empty((B, self.steps, d))
        head = out[:, :T0]
        head[...] = np.reshape(stored, (B, T0, d))
        head *= self.scale
        head -= self.mean
        head /= self.std
        if self.order is not None:
            head[...] = head[:, self.order]
        if self.pad:
            self._noise_into(out[:, T0:], split, pos)
        return out


def input_statistics(stored, layout, scale: float, mode: str, *, chunk: int = 4096):
    """(mean, std) of the scaled examples over the axes ``mode`` names, broadcastable to (T0, d).

    Two passes over chunks of ``chunk`` examples in float64 (no float64 copy of the whole split):
    the mean, then the mean squared deviation from it (the population variance, as
    ``numpy.std``).  A std below ``STD_FLOOR`` becomes 1.
    """
    T0, d = layout
    if mode == "none":
        return np.zeros((1, 1)), np.ones((1, 1))
    axes = {"global": (0, 1, 2), "channel": (0, 1), "step": (0,)}[mode]
    N = stored.shape[0]

    def chunks():
        for lo in range(0, N, chunk):
            yield np.reshape(stored[lo:lo + chunk], (-1, T0, d)).astype(np.float64) * scale

    count = N * math.prod(((N, T0, d)[a] for a in axes if a != 0), start=1)
    total = sum(c.sum(axis=axes, keepdims=True) for c in chunks())
    mean = total / count
    sq = sum(((c - mean) ** 2).sum(axis=axes, keepdims=True) for c in chunks())
    std = np.sqrt(sq / count)
    std = np.where(std < STD_FLOOR, 1.0, std)
    return mean[0], std[0]


def label_entropy(labels, classes: int) -> float:
    """−Σ_c p_c ln p_c of the labels' frequencies: the cross-entropy of the best memoryless predictor."""
    p = np.bincount(np.asarray(labels), minlength=classes) / len(labels)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def har2_labels(activities) -> np.ndarray:
    """HAR-2's class (0 or 1, ``HAR2_CLASSES``) of UCI HAR activities 1–6."""
    return np.isin(np.asarray(activities), HAR2_CLASSES[1]).astype(np.int64)


def _size(value, name, default, available, what):
    n = default if value is None else as_int(value, name, low=1)
    if n > available:
        raise ParameterError(name, f"{n} is more than the {available} {what}")
    return n



def build(key: str, steps, *, data, seed, n_train, n_val, n_test, permute, pad: int, pad_variance: float,
          normalise) -> dict:
    """The fields of the ``Task`` ``make_task(key, …, data=…)`` returns (module docstring)."""
    kind = DATASET_OF[key]
    if data is None:
        what = ("MNIST (a folder of its four idx files, gzipped or not, or keras' mnist.npz)" if kind == "mnist"
                else "UCI HAR (the unpacked 'UCI HAR Dataset' folder)")
        raise ParameterError("data", f"task {key} reads the real data from files: give {what}")
    if permute is not None and key not in ("mnist-pixels", "mnist-rows"):
        raise ParameterError("permute", f"applies to the pixel and row tasks (digits, mnist), not to {key}")
    mode = DEFAULT_NORMALISE[kind] if normalise is None else str(normalise).strip().lower()
    if mode not in NORMALISE:
        raise ParameterError("normalise", f"must be one of {', '.join(NORMALISE)}, got {normalise!r}")
    pad_variance = as_scalar(pad_variance, "pad_variance", low=0.0)
    if key == "noisy-mnist":
        if pad:
            raise ParameterError("pad", f"noisy-mnist is padded to steps (T = {NOISY_STEPS} by default); "
                                        "give steps, not pad")
        T = NOISY_STEPS if steps is None else as_int(steps, "steps", low=NOISY_ROWS)
        pad = T - NOISY_ROWS
    elif steps is not None:
        fixed = {"mnist-pixels": 784, "mnist-rows": 28, "har2": 128}[key]
        raise ParameterError("steps", f"is fixed by the data for {key} ({fixed}); pad= appends noise steps")

    ds = read_mnist(data) if kind == "mnist" else read_har(data)
    x_all, y_all = ds.split("train")
    x_test_all, y_test_all = ds.split("test")
    N, Nt = len(y_all), len(y_test_all)
    nv = _size(n_val, "n_val", min(DEFAULT_VAL[kind], max(1, N // 10)), N - 1,
               f"that leave a training example (the {kind} training set has {N})")
    ntr = _size(n_train, "n_train", N - nv, N - nv, f"{kind} training examples left after n_val = {nv}")
    nte = _size(n_test, "n_test", Nt, Nt, f"{kind} test examples")
    order = np.random.default_rng(None if seed is None else [int(seed), 30]).permutation(N)
    idx = {"train": np.sort(order[nv:nv + ntr]), "val": np.sort(order[:nv])}
    test_idx = (np.arange(Nt) if nte == Nt else
                np.sort(np.random.default_rng(None if seed is None else [int(seed), 31]).permutation(Nt)[:nte]))

    if kind == "mnist":
        layout = (784, 1) if key == "mnist-pixels" else (28, 28)
        scale, classes, relabel = 1.0 / 255.0, 10, (lambda y: y)
    else:
        layout = tuple(x_all.shape[1:])
        scale, classes, relabel = 1.0, 2, har2_labels
    splits = {"train": (x_all[idx["train"]], relabel(y_all[idx["train"]])),
              "val": (x_all[idx["val"]], relabel(y_all[idx["val"]])),
              "test": (x_test_all[test_idx], relabel(y_test_all[test_idx]))}
    mean, std = input_statistics(splits["train"][0], layout, scale, mode)
    perm = None
    settings = {"task": key, "n_train": ntr, "n_val": nv, "n_test": nte, "pad": 0 if key == "noisy-mnist" else pad,
                "steps": layout[0] + pad, "data": ds.source, "normalise": mode}
    if permute is not None:
        perm = np.random.default_rng(as_int(permute, "permute", low=0)).permutation(layout[0])
        settings["permute"] = int(permute)
    if pad:
        settings["pad_variance"] = pad_variance
    noise_seed = int(seed) if seed is not None else int(np.random.SeedSequence().entropy % 2 ** 63)
    view = SequenceView(layout, scale, mean, std, perm, pad, pad_variance, noise_seed)
    base = label_entropy(splits["train"][1], classes)
    name = ("label entropy of the training split (ln 10 = 2.303 for equal classes)" if classes == 10 else
            "label entropy of the training split (ln 2 = 0.693 for equal classes)")
    return dict(name=key, loss="ce", inputs=layout[1], outputs=classes, steps=view.steps, baseline=base,
                baseline_name=name, data=splits, settings=settings, seed=seed, view=view)


__all__ = ["DATASET_OF", "DATA_TASKS", "DEFAULT_NORMALISE", "DEFAULT_VAL", "HAR2_CLASSES", "HAR_ACTIVITIES",
           "NOISY_STEPS", "NORMALISE", "SequenceView", "build", "har2_labels", "input_statistics", "label_entropy"]

"""Sequence tasks for training: adding problem, copy memory, noise padding, digits.

Every generator is seeded; ``make_task`` draws fixed train / validation / test splits from
independent streams (``np.random.default_rng([seed, split])``) and wraps them in a ``Task``
that hands out batches.

Adding problem (Arjovsky et al. 2016, after Hochreiter & Schmidhuber): x_t = (v_t, m_t),
v_t ~ U[0, 1], m_t ∈ {0, 1} with exactly two markers, the first at a uniform position of the
first half (t < ⌊T/2⌋), the second of the second half; the target is Σ_t v_t m_t.
Predicting the mean 1 gives MSE Var(v_a + v_b) = 1/6 ≈ 0.167 (the baseline).

Ternary adding (the MASO paper's classification variant; the paper gives no thresholds, so
dynlab fixes them): the same inputs, label 0 / 1 / 2 for a sum below √(2/3), between
√(2/3) and 2 − √(2/3), above 2 − √(2/3).  These are the tertiles of the triangular law of
v_a + v_b (P(s < c) = c²/2), so the classes are equally likely and the memoryless baseline
is the cross-entropy ln 3 (accuracy 1/3).  ``binary=True`` gives the task as the MASO paper
states it (§6): v_t ∈ {0, 1} (a fair coin), the two markers at two distinct positions drawn from
all T, the label the sum itself (0 / 1 / 2 with probabilities 1/4, 1/2, 1/4), so the memoryless
baseline is the label entropy 1.5 ln 2 ≈ 1.040 nats; with ``adding`` the same inputs regress the
sum (baseline Var = 1/2).

Copy memory (Arjovsky et al. 2016): symbols 0 = blank, 1..8 data, 9 = delimiter, one-hot
(d = 10).  Input: 10 data symbols, T − 1 blanks, the delimiter, 10 blanks (length T + 20);
target: T + 10 blanks, then the 10 data symbols (9 classes), scored by the cross-entropy at
every step.  A memoryless strategy (blank until the delimiter, then uniform over the 8 data
symbols) scores 10 ln 8 / (T + 20), the baseline.

Noise padding: ``pad`` steps of N(0, variance) appended after the informative part of each
input of an end-of-sequence task, so the answer must be carried through noise.

3-bit flip-flop (Sussillo & Barak 2013): ``bits`` = 3 input channels of sparse ±1 pulses — at
every step each channel pulses with probability p = 0.05 (``FLIPFLOP_P``), the sign ±1 with
probability ½, and every channel pulses at t = 0 so its target is defined from the start —;
output k at step t is the sign of channel k's last pulse at or before t (it flips on the pulse
step and holds until the next).  Loss: the MSE at every step and channel (``mse-seq``).  The
memoryless baseline predicts 0: MSE 1 (the targets are ±1).

Digits: scikit-learn's bundled 8×8 digits (1797 images, optional extra ``dynlab[digits]``),
scaled to [0, 1], as pixel sequences (T = 64, d = 1, row-major) or row sequences (T = 8,
d = 8); 10 classes, baseline ln 10.  The splits are a seeded shuffle of the 1797 images.

The real data (``DATA_TASKS``, built by ``dynlab.tasks.realdata`` from the user's files,
``data=``): ``mnist-pixels`` (T = 784, d = 1; ``permute=`` for permuted MNIST), ``mnist-rows``
(T = 28, d = 28), ``noisy-mnist`` (the rows, then N(0, 1) noise to T = 1000) and ``har2`` (UCI HAR,
9 channels × 128 steps, two classes).  Their tasks keep the examples as the files store them and
build float64 inputs per batch (``Task.view``).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._validate import as_int, as_scalar
from ..errors import ParameterError
from .realdata import DATA_TASKS, build

TASKS = ("adding", "adding-ternary", "copy", "digits-pixels", "digits-rows", "flipflop") + DATA_TASKS
#: Tasks whose length the data fix (``make_task`` refuses ``steps``).
FIXED_STEPS = ("digits-pixels", "digits-rows", "mnist-pixels", "mnist-rows", "har2")
#: Split sizes of the synthetic tasks (and the proportions of the digits' split) when not given.
DEFAULT_SIZES = (10000, 1000, 1000)
SPLITS = ("train", "val", "test")
#: Tertiles of v_a + v_b (triangular on [0, 2]) — the ternary adding task's class edges.
TERNARY_EDGES = (math.sqrt(2.0 / 3.0), 2.0 - math.sqrt(2.0 / 3.0))
COPY_SYMBOLS = 10      # blank, 8 data symbols, delimiter
COPY_LENGTH = 10       # data symbols to remember
COPY_CLASSES = 9       # blank + 8 data symbols
FLIPFLOP_BITS = 3      # input channels / outputs of the flip-flop
FLIPFLOP_P = 0.05      # pulse probability per channel and step


# ============================================================================ generators
def adding_problem(steps: int, batch: int, *, seed=None, ternary: bool = False, binary: bool = False):
    """One batch of the adding problem (module docstring).

    Returns x (B, T, 2) and the target: (B, 1) sums, or (B,) int labels with ``ternary``.
    ``binary`` gives the MASO paper's form (Wang et al. 2019, §6): values in {0, 1} (a fair
    coin each), the two markers at two distinct positions drawn uniformly from all T, and —
    with ``ternary`` — the label the sum itself, 0 / 1 / 2 with probabilities 1/4, 1/2, 1/4.
    """
    T = as_int(steps, "steps", low=2)
    B = as_int(batch, "batch", low=1)
    rng = np.random.default_rng(seed)
    if binary:
        x = np.zeros((B, T, 2))
        x[:, :, 0] = rng.integers(0, 2, (B, T))
        marks = np.argsort(rng.random((B, T)), axis=1)[:, :2]   # two distinct positions per sequence
        rows = np.arange(B)[:, None]
        x[rows, marks, 1] = 1.0
        total = x[rows, marks, 0].sum(axis=1)
        if ternary:
            return x, total.astype(np.int64)
        return x, total[:, None]
    x = np.zeros((B, T, 2))
    x[:, :, 0] = rng.uniform(0.0, 1.0, (B, T))
    half = T // 2
    first = rng.integers(0, half, B)
    second = rng.integers(half, T, B)
    rows = np.arange(B)
    x[rows, first, 1] = 1.0
    x[rows, second, 1] = 1.0
    total = x[rows, first, 0] + x[rows, second, 0]
    if ternary:
        return x, ternary_labels(total)
    return x, total[:, None]


def flipflop(steps: int, batch: int, *, bits: int = FLIPFLOP_BITS, p: float = FLIPFLOP_P, seed=None):
    """One batch of the flip-flop task (module docstring): x (B, T, bits) with entries in
    {−1, 0, +1}, target (B, T, bits) = the sign of each channel's last pulse."""
    T = as_int(steps, "steps", low=1)
    B = as_int(batch, "batch", low=1)
    K = as_int(bits, "bits", low=1)
    p = as_scalar(p, "p", low=0.0, high=1.0)
    rng = np.random.default_rng(seed)
    pulse = rng.random((B, T, K)) < p
    pulse[:, 0, :] = True
    sign = np.where(rng.random((B, T, K)) < 0.5, -1.0, 1.0)
    x = np.where(pulse, sign, 0.0)
    # the last pulse's sign, held: index of the last pulse at or before t, then gather
    t_idx = np.where(pulse, np.arange(T)[None, :, None], 0)
    last = np.maximum.accumulate(t_idx, axis=1)
    target = np.take_along_axis(x, last, axis=1)
    return x, target


def ternary_labels(total) -> np.ndarray:
    """0 / 1 / 2 for a sum below, between, above the tertiles ``TERNARY_EDGES``."""
    return np.searchsorted(np.asarray(TERNARY_EDGES), np.asarray(total), side="right").astype(np.int64)


def copy_memory_codes(delay: int, batch: int, *, seed=None):
    """Copy task as symbol codes: inputs (B, T + 20) in 0..9, targets (B, T + 20) in 0..8."""
    T = as_int(delay, "steps", low=1)
    B = as_int(batch, "batch", low=1)
    rng = np.random.default_rng(seed)
    L = T + 2 * COPY_LENGTH
    data = rng.integers(1, 9, (B, COPY_LENGTH))
    codes = np.zeros((B, L), dtype=np.int64)
    codes[:, :COPY_LENGTH] = data
    codes[:, T + COPY_LENGTH - 1] = COPY_SYMBOLS - 1
    target = np.zeros((B, L), dtype=np.int64)
    target[:, T + COPY_LENGTH:] = data
    return codes, target


def copy_memory(delay: int, batch: int, *, seed=None):
    """Copy task (module docstring): x (B, T + 20, 10) one-hot, labels (B, T + 20) in 0..8."""
    codes, target = copy_memory_codes(delay, batch, seed=seed)
    return np.eye(COPY_SYMBOLS)[codes], target


def copy_baseline(delay: int) -> float:
    """The memoryless cross-entropy 10 ln 8 / (T + 20)."""
    return COPY_LENGTH * math.log(8.0) / (as_int(delay, "steps", low=1) + 2 * COPY_LENGTH)


def pad_with_noise(x, pad: int, *, variance: float = 1.0, seed=None) -> np.ndarray:
    """Append ``pad`` steps of N(0, variance) noise to every sequence of x (B, T, d)."""
    pad = as_int(pad, "pad", low=0)
    variance = as_scalar(variance, "variance", low=0.0)
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3:
        raise ParameterError("x", f"must have shape (B, T, d), got {x.shape}")
    noise = np.random.default_rng(seed).standard_normal((x.shape[0], pad, x.shape[2])) * math.sqrt(variance)
    return np.concatenate([x, noise], axis=1)


def load_digits_sequences(kind: str = "pixels"):
    """scikit-learn's 8×8 digits in [0, 1] as (1797, 64, 1) pixel or (1797, 8, 8) row sequences, labels."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ParameterError("task", "the digits tasks need scikit-learn (pip install 'dynlab[digits]')") from None
    data = load_digits()
    img = data.images.astype(np.float64) / 16.0
    if kind == "pixels":
        x = img.reshape(len(img), 64, 1)
    elif kind == "rows":
        x = img.reshape(len(img), 8, 8)
    else:
        raise ParameterError("kind", f"must be 'pixels' or 'rows', got {kind!r}")
    return np.ascontiguousarray(x), data.target.astype(np.int64)


# ============================================================================ Task
@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """A task with fixed splits.

    Attributes
    ----------
    name : registry name;  loss : ``mse`` | ``ce`` | ``ce-seq`` (``dynlab.train.backprop.LOSSES``)
    inputs, outputs : d and the read-out size C;  steps : the sequence length the model sees
    baseline : the loss of the best memoryless predictor (adding 1/6, ternary ln 3, copy
        10 ln 8/(T+20), digits ln 10);  baseline_name : what it is
    data : split → (x, target); the copy task keeps x as symbol codes, one-hot on demand; a
        task with a ``view`` keeps its examples as stored (uint8 images, float32 signals)
    settings : the generator's settings (recorded in the history's attrs)
    view : None, or how a split's stored examples become inputs, per batch
        (``dynlab.tasks.realdata.SequenceView``: called with the stored rows, the split and
        their positions in it); ``batch`` and ``sample`` apply it
    """

    name: str
    loss: str
    inputs: int
    outputs: int
    steps: int
    baseline: float
    baseline_name: str
    data: dict
    settings: dict
    seed: int | None = None
    onehot: int = 0
    view: object = None

    def size(self, split: str) -> int:
        return int(self._split(split)[1].shape[0])

    def _split(self, split):
        if split not in self.data:
            raise ParameterError("split", f"must be one of {', '.join(self.data)}, got {split!r}")
        return self.data[split]

    def batch(self, split: str, idx=None):
        """(x (B, T, d), target) for the sequences ``idx`` of a split (all when None).

        A task with a ``view`` builds float64 inputs of only these sequences (the whole split,
        for ``idx=None``, may not fit in memory: ``noisy-mnist``'s 10 000 test sequences are
        2.2 GB; take a split in batches, as ``dynlab.train.loop.evaluate`` does)."""
        x, y = self._split(split)
        if self.view is not None:
            pos = np.arange(len(y)) if idx is None else np.arange(len(y))[idx]
            return self.view(x[pos], split, pos), y[pos]
        if idx is not None:
            x, y = x[idx], y[idx]
        if self.onehot:
            x = np.eye(self.onehot)[x]
        return np.ascontiguousarray(x, dtype=np.float64), y

    def sample(self, rng, batch: int):
        """A training batch of ``batch`` sequences drawn with replacement by ``rng``."""
        idx = rng.integers(0, self.size("train"), as_int(batch, "batch", low=1))
        return self.batch("train", idx)

    def __repr__(self) -> str:
        """A few lines: name, loss, sizes, seed, baseline and every split by shape (never the data).

        The copy task stores its inputs as symbol codes; the shapes shown are those ``batch``
        returns (one-hot).  The dataclass keeps this method (it generates a repr only where the
        class defines none), and equality stays identity (``eq=False``).
        """
        from .._repr import number, shape, value

        extra = "".join(f", {k}={value(self.settings[k])}" for k in ("pad", "pad_variance") if self.settings.get(k))
        if self.view is not None:
            extra += "".join(f", {k}={value(self.settings[k])}" for k in ("permute", "normalise") if k in self.settings)
        splits = []
        for split, (x, y) in self.data.items():
            xs = tuple(np.shape(x)) + ((self.onehot,) if self.onehot else ())
            if self.view is not None:
                xs = (len(y), self.view.steps, self.view.inputs)
            splits.append(f"{split}: x {shape(xs)}, target {shape(y)}")
        return (f"Task({self.name!r}, loss={self.loss!r}, steps={self.steps}, inputs={self.inputs}, "
                f"outputs={self.outputs}, seed={value(self.seed)}{extra},\n"
                f"     baseline={number(self.baseline)} ({self.baseline_name}),\n"
                f"     {'; '.join(splits)})")


def _splits(gen, sizes, seed):
    out = {}
    for i, (split, n) in enumerate(zip(SPLITS, sizes)):
        n = as_int(n, f"n_{split}", low=1)
        out[split] = gen(n, None if seed is None else [int(seed), i])
    return out


def make_task(name: str, steps: int | None = None, *, seed: int | None = 0, n_train: int | None = None,
              n_val: int | None = None, n_test: int | None = None, pad: int = 0, pad_variance: float = 1.0,
              binary: bool = False, permute: int | None = None, data=None, normalise: str | None = None) -> Task:
    """A task by name with seeded train / validation / test splits.

    Parameters
    ----------
    name : ``adding``, ``adding-ternary``, ``copy``, ``digits-pixels``, ``digits-rows``, ``flipflop``,
        or, from the user's files (``data``), ``mnist-pixels``, ``mnist-rows``, ``noisy-mnist``, ``har2``
    steps : T (adding, flipflop: sequence length, default 100; copy: the delay, default 100;
        noisy-mnist: the total length, default 1000, the 28 rows then noise; digits, mnist-pixels,
        mnist-rows, har2: fixed by the data, must be None)
    seed : seeds the three splits (independent streams), and the noise of noisy-mnist and ``pad``
    n_train, n_val, n_test : split sizes (synthetic tasks: default 10000, 1000, 1000; digits split
        its 1797 images in these proportions; the real data: ``n_val`` carved from the official
        training set — default 5000 for MNIST, 735 for HAR —, ``n_train`` of the rest — default
        all —, ``n_test`` of the official test set — default all —; ``dynlab.tasks.realdata``)
    pad, pad_variance : noise padding (end-of-sequence tasks only): ``pad`` steps of
        N(0, pad_variance) appended to every input (the real data: built per batch, never stored)
    binary : adding tasks only: the MASO paper's form (``adding_problem``): values in {0, 1},
        markers anywhere; ``adding-ternary`` then labels the sum 0 / 1 / 2 (probabilities
        1/4, 1/2, 1/4; baseline the label entropy 1.5 ln 2), ``adding`` regresses it (baseline
        the MSE of predicting 1, Var = 1/2)
    permute : digits and mnist pixel/row tasks only: the *permuted* form (the papers' permuted
        pixel MNIST): one fixed permutation of the time steps, drawn from
        ``default_rng(permute).permutation(T)``, applied to every sequence of every split (None:
        the natural order).  The iRNN paper's seed is 42; its generator is not stated, so its
        exact permutation cannot be rebuilt
    data : the real data's files (mnist-pixels, mnist-rows, noisy-mnist: a folder of MNIST's idx files, gzipped or
        not, or keras' mnist.npz; har2: the unpacked "UCI HAR Dataset" folder); a missing or
        malformed file raises ``ParameterError("data", …)`` naming it
    normalise : the real data only: the z-score's statistics, from the training split —
        ``global`` (MNIST's default), ``channel``, ``step`` (HAR's default) or ``none``
        (``dynlab.tasks.realdata``)

    Example
    -------
    >>> task = make_task("adding", 100, seed=0)
    >>> x, y = task.sample(np.random.default_rng(0), 128)     # (128, 100, 2), (128, 1)
    >>> mnist = make_task("mnist-pixels", data="~/data/mnist", permute=42)   # doctest: +SKIP
    """
    key = str(name).strip().lower().replace("_", "-")
    if key not in TASKS:
        raise ParameterError("task", f"unknown task {name!r}; choose from {', '.join(TASKS)}")
    if seed is not None:
        seed = as_int(seed, "seed", low=0)
    pad = as_int(pad, "pad", low=0)
    if key in DATA_TASKS:
        if binary:
            raise ParameterError("binary", f"applies to the adding tasks only, not to {key}")
        return Task(**build(key, steps, data=data, seed=seed, n_train=n_train, n_val=n_val, n_test=n_test,
                            permute=permute, pad=pad, pad_variance=pad_variance, normalise=normalise))
    if data is not None:
        raise ParameterError("data", f"applies to the tasks of the real data ({', '.join(DATA_TASKS)}), not to {key}")
    if normalise is not None:
        raise ParameterError("normalise", f"applies to the tasks of the real data ({', '.join(DATA_TASKS)}), "
                                          f"not to {key}")
    sizes = tuple(d if n is None else n for n, d in zip((n_train, n_val, n_test), DEFAULT_SIZES))
    n_train, n_val, n_test = sizes
    settings = {"task": key, "n_train": n_train, "n_val": n_val, "n_test": n_test, "pad": pad}
    if permute is not None and not key.startswith("digits"):
        raise ParameterError("permute", f"applies to the digits tasks only, not to {key}")
    if binary and key not in ("adding", "adding-ternary"):
        raise ParameterError("binary", f"applies to the adding tasks only, not to {key}")
    if key in ("adding", "adding-ternary"):
        T = 100 if steps is None else as_int(steps, "steps", low=2)
        tern = key == "adding-ternary"
        data = _splits(lambda n, s: adding_problem(T, n, seed=s, ternary=tern, binary=binary), sizes, seed)
        if binary:
            base, base_name = ((1.5 * math.log(2.0), "label entropy 1.5 ln 2 (classes 1/4, 1/2, 1/4)") if tern
                               else (0.5, "MSE of predicting 1, Var = 1/2"))
        else:
            base, base_name = ((math.log(3.0), "chance cross-entropy ln 3") if tern
                               else (1.0 / 6.0, "MSE of predicting 1, Var = 1/6"))
        extra = {"binary": True} if binary else {}
        task = Task(key, "ce" if tern else "mse", 2, 3 if tern else 1, T, base, base_name,
                    data, dict(settings, steps=T, **extra), seed)
    elif key == "flipflop":
        T = 100 if steps is None else as_int(steps, "steps", low=1)
        if pad:
            raise ParameterError("pad", "noise padding applies to end-of-sequence tasks, not to flipflop")
        data = _splits(lambda n, s: flipflop(T, n, seed=s), sizes, seed)
        task = Task(key, "mse-seq", FLIPFLOP_BITS, FLIPFLOP_BITS, T, 1.0,
                    "MSE of predicting 0 (targets ±1)", data,
                    dict(settings, steps=T, bits=FLIPFLOP_BITS, p=FLIPFLOP_P), seed)
    elif key == "copy":
        T = 100 if steps is None else as_int(steps, "steps", low=1)
        if pad:
            raise ParameterError("pad", "noise padding applies to end-of-sequence tasks, not to copy")
        data = _splits(lambda n, s: copy_memory_codes(T, n, seed=s), sizes, seed)
        task = Task(key, "ce-seq", COPY_SYMBOLS, COPY_CLASSES, T + 2 * COPY_LENGTH, copy_baseline(T),
                    "memoryless 10 ln 8/(T+20)", data, dict(settings, steps=T), seed, onehot=COPY_SYMBOLS)
    else:
        if steps is not None:
            raise ParameterError("steps", f"is fixed by the data for {key} ({'64' if key.endswith('pixels') else '8'})")
        x, y = load_digits_sequences("pixels" if key.endswith("pixels") else "rows")
        order = np.random.default_rng(seed).permutation(len(y))
        w = np.array([as_int(s, f"n_{sp}", low=1) for s, sp in zip(sizes, SPLITS)], dtype=np.float64)
        cut = np.round(np.cumsum(w / w.sum()) * len(y)).astype(int)
        parts = np.split(order, cut[:-1])
        if permute is not None:
            perm = np.random.default_rng(as_int(permute, "permute", low=0)).permutation(x.shape[1])
            x = x[:, perm]
            settings.update(permute=int(permute))
        data = {sp: (x[p], y[p]) for sp, p in zip(SPLITS, parts)}
        settings.update(n_train=len(parts[0]), n_val=len(parts[1]), n_test=len(parts[2]))
        task = Task(key, "ce", x.shape[2], 10, x.shape[1], math.log(10.0), "chance cross-entropy ln 10", data,
                    settings, seed)
    if pad:
        task = noise_padded(task, pad, variance=pad_variance, seed=seed)
    return task


def noise_padded(task: Task, pad: int, *, variance: float = 1.0, seed=None) -> Task:
    """``task`` with ``pad`` steps of N(0, variance) noise appended to every input sequence.

    A task with a ``view`` (the real data) gets its noise built per batch, never stored (the
    view's ``pad``; its noise seed ``seed``, or the task's when None); a view that already pads
    (noisy-mnist, ``pad=``) is refused."""
    if task.loss.endswith("-seq"):
        raise ParameterError("pad", f"noise padding applies to end-of-sequence tasks, not to {task.name}")
    pad = as_int(pad, "pad", low=0)
    if task.view is not None:
        if task.view.pad:
            raise ParameterError("pad", f"{task.name} is padded already ({task.view.pad} steps); "
                                        "give make_task the whole padding")
        variance = as_scalar(variance, "variance", low=0.0)
        view = dataclasses.replace(task.view, pad=pad, pad_variance=variance,
                                   noise_seed=task.view.noise_seed if seed is None else as_int(seed, "seed", low=0))
        settings = dict(task.settings, pad=pad, pad_variance=float(variance), steps=view.steps)
        return dataclasses.replace(task, view=view, steps=view.steps, settings=settings)
    data = {}
    for i, (split, (x, y)) in enumerate(task.data.items()):
        data[split] = (pad_with_noise(x, pad, variance=variance, seed=None if seed is None else [int(seed), 10 + i]),
                       y)
    settings = dict(task.settings, pad=pad, pad_variance=float(variance))
    return dataclasses.replace(task, data=data, steps=task.steps + pad, settings=settings)


__all__ = ["COPY_CLASSES", "DATA_TASKS", "DEFAULT_SIZES", "FIXED_STEPS", "FLIPFLOP_BITS", "FLIPFLOP_P", "SPLITS",
           "TASKS", "TERNARY_EDGES", "Task", "adding_problem", "copy_baseline", "copy_memory", "copy_memory_codes",
           "flipflop", "load_digits_sequences", "make_task", "noise_padded", "pad_with_noise", "ternary_labels"]

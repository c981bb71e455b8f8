"""Shared by irnn-table1-pixel-digits and irnn-table2-noisy-digits: the iRNN paper's table rows
(Tables 1, 2, 7) trained by dynlab on the MNIST / Noisy-MNIST stand-ins.

``standardised(kind, permute=None)`` builds scikit-learn's 8×8 digits read pixel by pixel
(``digits-pixels``, T = 64, d = 1) or row by row (``digits-rows``, T = 8, d = 8), split
50 / 10 / 40 % into train / validation / test (the test split, 719 images, scores the table),
and standardised by the training split's mean and standard deviation (the paper's "zero mean -
unit variance normalized", App. A.4).  ``permute`` applies one fixed permutation of the 64 steps
(``make_task(..., permute=)``); ``pad`` appends N(0, 1) noise steps *after* standardising, so
the noise has the signal's scale (the paper's Noisy-MNIST: standard Gaussian noise after the
informative rows).

``ROWS`` names every cell once (a setting key of ``irnn._training``, the parameters it freezes, its
label); every cell is trained with the same hidden size, optimiser (Adam, lr 10⁻², clip 1), batch
and iteration count (``train_rows``), so the table compares cells, not tuning.  The iRNN rows are
the paper's iRNN (eq. 9, ReLU, g₀ = h_{m−1}, η₀ = 10⁻²; ``irnn._training``); the baselines are
tanh cells as in their papers: FastRNN with α, β trained; AntisymmetricRNN with ε = γ = 0.01 fixed
(Chang et al.'s hyper-parameters, not trained).
"""
from __future__ import annotations

import time

import numpy as np

from ._training import CLIP, LR, build
from .._recipe import train_model
from .._training import n_params, standardise

BATCH = 64

#: key → (setting key of ``irnn._training``, train_model freeze, label)
ROWS = {
    "fastrnn": ("fastrnn", None, "FastRNN"),
    "rnn": ("rnn", None, "RNN"),
    "lstm": ("lstm", None, "LSTM"),
    "antisymmetric": ("antisym-g0.01-e0.01", ("eps", "gamma"), "Antisymmetric"),
    "irnn-K1": ("irnn-K1", None, "iRNN (K=1)"),
    "irnn-K2": ("irnn-K2", None, "iRNN (K=2)"),
    "irnn-K3": ("irnn-K3", None, "iRNN (K=3)"),
    # the negative control: the iRNN K=1 with every recurrent parameter frozen at its random
    # initialisation, only the read-out trained
    "irnn-K1-readout": ("irnn-K1", ("V", "H", "W", "b", "eta", "alpha"), "iRNN (K=1), read-out only"),
}


def label(key: str) -> str:
    return ROWS[str(key)][2]


def standardised(kind: str = "pixels", *, permute: int | None = None, pad: int = 0):
    """The digits task (split 50 / 10 / 40 %), standardised by the training split; ``pad`` steps of
    N(0, 1) appended after standardising (``noise_padded``, seeded)."""
    import dynlab as dl
    from ...tasks.sequences import noise_padded

    task = standardise(dl.make_task(f"digits-{kind}", seed=0, n_train=50, n_val=10, n_test=40, permute=permute))
    if pad:
        task = noise_padded(task, pad, variance=1.0, seed=0)
    return task


#: the paper's MNIST items (Table 5: D = 128; "Hyper Parameters": batch 128, lr 10⁻²; "to convergence")
PAPER_D, PAPER_BATCH = 128, 128
#: our budget at paper scale, where the paper states none: 20 epochs of MNIST's 55 000 training images
PAPER_ITERATIONS = 8600


def real_task(scale, kind: str = "pixels", *, permute: int | None = None, item: str = "the MNIST items"):
    """The real MNIST task at paper scale (``--data DIR``): ``mnist-pixels`` (T = 784, permuted with
    ``permute``) or ``noisy-mnist`` (rows, then N(0, 1) noise to T = 1000); the readers z-score by the
    training split (the paper's "mean 0.1307, std 0.3081")."""
    from .._realdata import mnist_task

    if kind == "pixels":
        return mnist_task(scale, "mnist-pixels", item, permute=permute)
    return mnist_task(scale, "noisy-mnist", item)


def train_rows(task, keys, seeds, *, hidden: int, iterations: int, tests=None, batch: int = BATCH) -> dict:
    """Train every (row, seed) on ``task``; test accuracy, training seconds, parameters.

    ``tests``: extra {name: task} whose *test* split the trained networks are also scored on
    (the same networks, other inputs).  Returns ``{"accuracy": (row, seed), "seconds": (row, seed),
    "params": (row,), "val_accuracy": (row, seed), "<name>_accuracy": (row, seed)}`` as arrays.
    Seconds are the wall-clock time of ``train_model`` (training and its final validation pass);
    ``cell_params`` the recurrent cell's trained parameters alone (without the read-out), ``cell_weights``
    its trained matrices and biases alone (no η, gates, ε/γ).  A run whose
    state becomes non-finite scores the most frequent class of each split and is flagged ``diverged``.
    """
    from ...backends import get_backend
    from ...errors import DivergenceError
    from ...train.loop import evaluate

    tests = dict(tests or {})
    R, S = len(keys), len(seeds)
    out = {"accuracy": np.full((R, S), np.nan), "seconds": np.full((R, S), np.nan),
           "val_accuracy": np.full((R, S), np.nan), "params": np.zeros(R, dtype=np.int64),
           "cell_params": np.zeros(R, dtype=np.int64), "cell_weights": np.zeros(R, dtype=np.int64),
           "diverged": np.zeros((R, S), dtype=bool)}
    for name in tests:
        out[f"{name}_accuracy"] = np.full((R, S), np.nan)
    with get_backend(None):
        for i, key in enumerate(keys):
            setting_key, freeze, _ = ROWS[key]
            for j, s in enumerate(seeds):
                m, own_freeze = build(setting_key, hidden, task.inputs, task.steps, int(s))
                freeze = freeze or own_freeze
                out["params"][i] = n_params(m, freeze, task.outputs)
                out["cell_params"][i] = n_params(m, freeze)
                skip = set(freeze or ()) | {"eta", "alpha", "beta", "eps", "gamma"}
                out["cell_weights"][i] = sum(int(np.size(v)) for k, v in m.params().items() if k not in skip)
                t0 = time.perf_counter()
                try:
                    r = train_model(m, task, iterations=iterations, lr=LR, batch=batch, clip=CLIP, freeze=freeze,
                                    record_every=iterations, seed=int(s), diag_batch=1, progress=False)
                except DivergenceError:     # scored as the most frequent class, flagged
                    out["seconds"][i, j] = time.perf_counter() - t0
                    out["diverged"][i, j] = True
                    for k in ["accuracy", "val_accuracy"] + [f"{name}_accuracy" for name in tests]:
                        split = "val" if k == "val_accuracy" else "test"
                        y = task.data[split][1]
                        out[k][i, j] = float(np.bincount(y).max() / y.size)
                    continue
                out["seconds"][i, j] = time.perf_counter() - t0
                out["val_accuracy"][i, j] = float(r.history["val_accuracy"].values[-1])
                out["accuracy"][i, j] = float(evaluate(r.model, r.readout, task, "test")["accuracy"])
                for name, t in tests.items():
                    out[f"{name}_accuracy"][i, j] = float(evaluate(r.model, r.readout, t, "test")["accuracy"])
    return out


def cell(values, scale: float = 100.0, digits: int = 1) -> str:
    """``mean ± SE`` of per-seed values (×scale) as a table cell."""
    from .._stats import mean_se

    m, se, _ = mean_se(np.asarray(values, dtype=float) * scale)
    return f"{m:.{digits}f} ± {se:.{digits}f}"


def params_k(n) -> str:
    """A parameter count as the paper prints it (``4k``, ``8.75k``)."""
    n = float(n)
    return f"{n / 1000:.3g}k" if n >= 1000 else str(int(n))


def paper(value) -> object:
    """A paper cell: the number, or ``—`` where the paper gives none."""
    return "—" if value is None else value

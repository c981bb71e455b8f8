"""Shared by the MASO Table 1 and Table 4 recipes: one ReLU RNN (1 or 2 layers) trained on the
(permuted) pixel digits from a zero or random initial state, scored on the held-out split.

``train_score`` builds the network (``network``: 1 layer, ``dl.make_model("rnn", identity_init=True)``;
2 layers, ``dl.Stack`` of two such layers — U = I, b = 0, W ~ N(0, 1/d), the paper's "W_r
initialised as an identity matrix"), trains it with ``dl.train_model`` (no gradient clipping: the
paper names none, and Table 4's σ_ε = 0 failures are explosions that clipping would hide) and
returns the held-out accuracy from h_0 = 0 and how many classes the trained network predicts on the
held-out split (``classes_predicted``: a collapsed network — dead ReLU units, a read-out left with a
bias — predicts one or two, and its accuracy is a sum of a few class counts).  A run whose state
becomes non-finite (the
``DivergenceError`` of ``train_model``) scores the accuracy of always predicting the held-out
split's most frequent class — what the paper's diverged cells show (0.098, 0.114: MNIST's class
frequencies) — and is flagged ``diverged``.
"""
from __future__ import annotations

import numpy as np

from .._recipe import train_model
from .._training import n_params as _n_params


def network(layers: int, hidden: int, inputs: int, seed: int, cell: str = "rnn"):
    """1 layer: identity-initialised ReLU RNN; 2 layers: a ``Stack`` of two (layer 2 seeded seed + 500);
    ``cell="gru"`` / ``"lstm"``: one layer of dynlab's GRU / LSTM (PyTorch's initialisation, tanh)."""
    import dynlab as dl

    if cell != "rnn":
        return dl.make_model(cell, hidden, inputs, seed=seed)
    first = dl.make_model("rnn", hidden, inputs, activation="relu", identity_init=True, seed=seed)
    if layers == 1:
        return first
    more = [dl.make_model("rnn", hidden, hidden, activation="relu", identity_init=True, seed=seed + 500 * ell)
            for ell in range(1, layers)]
    return dl.Stack(layers=(first, *more))


def n_params(model, classes: int) -> int:
    """Trained parameters: the recurrent network's plus the linear read-out's (D·C + C)."""
    return _n_params(model, outputs=classes)


def majority_rate(y) -> float:
    """Accuracy of always predicting the most frequent class of y (the score of a diverged run)."""
    _, counts = np.unique(np.asarray(y), return_counts=True)
    return float(counts.max() / counts.sum())


def train_score(task, *, layers: int, hidden: int, seed: int, sigma_eps: float, optimiser: str, lr: float,
                iterations: int, batch: int, command: str, eval_sigma: float | None = None, cell: str = "rnn") -> dict:
    """Train one network; ``{"accuracy", "diverged", "params"[, "accuracy_eval_noise"]}``.

    ``eval_sigma``: also score the trained network from a random h_0 ~ N(0, eval_sigma² I) (one
    fixed draw, ``default_rng([seed, 7])``) — σ_ε applied at evaluation only."""
    from dynlab.errors import DivergenceError
    from dynlab.train.loop import evaluate, run_outputs

    model = network(layers, hidden, task.inputs, seed, cell)
    out = {"params": n_params(model, task.outputs)}
    x, y = task.batch("test")
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging run warns before it raises
        try:
            res = train_model(model, task, iterations=iterations, optimiser=optimiser, lr=lr, batch=batch, clip=None,
                              sigma_eps=sigma_eps, record_every=iterations, seed=seed, progress=False, command=command)
            acc = float(evaluate(res.model, res.readout, task, "test")["accuracy"])
            if not (np.isfinite(acc) and np.all(np.isfinite(res.history["loss"].values))):
                raise FloatingPointError("non-finite loss or held-out accuracy")
            pred = np.argmax(run_outputs(res.model, res.readout, x, task.loss), axis=-1)
            out.update(accuracy=acc, diverged=False, classes_predicted=int(np.unique(pred).size))
            if eval_sigma is not None:
                h0 = eval_sigma * np.random.default_rng([seed, 7]).standard_normal((len(y), res.model.state_size))
                Y = run_outputs(res.model, res.readout, x, task.loss, h0=h0)
                out["accuracy_eval_noise"] = float(np.mean(np.argmax(Y, axis=-1) == y))
        except (DivergenceError, FloatingPointError):
            out.update(accuracy=majority_rate(y), diverged=True, classes_predicted=1)
            if eval_sigma is not None:
                out["accuracy_eval_noise"] = majority_rate(y)
    return out

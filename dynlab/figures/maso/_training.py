"""Shared by the MASO Fig. 2 / Table 3 and Figs. 3, 8 recipes: ReLU RNNs trained on the digits.

``digit_networks(quick)`` trains one ReLU RNN per seed (``seeds_for(quick)``) with
``dynlab.train_model`` on scikit-learn's 8×8 digits read pixel by pixel (T = 64, d = 1; the
``digits-pixels`` task, split 50 / 10 / 40 % into train / validation / held-out), from the
paper's initialisation (U = I, b = 0, W ~ N(0, 1/d): "W_r initialised as an identity matrix").
The pixels are standardised like the paper's MNIST (``standardised_digits``).  It also builds the untrained networks of the negative controls: each seed's network before
training (the same identity initialisation) and a Gaussian random ReLU RNN (U ~ N(0, 1.2²/D),
b ~ N(0, 0.1²): the untrained setting the gallery used before).  The result is cached per
process (both recipes of one ``dynlab figures all`` share it); the recipes copy into their own
Datasets what their checks need.
"""
from __future__ import annotations

import numpy as np

from .._estimate import cost_of
from .._recipe import train_model
from .._training import standardise

#: sizes: (hidden D, iterations) quick / full; Adam lr 2e-3, batch 64, clip 1 (the paper: D = 128,
#: RMSprop lr 1e-4, 200 epochs of MNIST)
QUICK = (32, 500)
FULL = (64, 1500)
LR = 2e-3
BATCH = 64
CLIP = 1.0
RANDOM_SCALE = 1.2
_CACHE: dict = {}


def shared_gate(val_accuracy, chance: float = 0.1) -> list:
    """The gate maso-fig2 and maso-fig6 share (the same networks, the same pixel baseline): the trained
    networks learned (validation accuracy above chance beyond 2 SE).  How much room the raw pixels
    leave above them is reported by each (``room``), not gated: a ceiling keeps a claim from holding,
    it does not make a deficit beyond 2 SE meaningless."""
    from .._stats import level_test

    return [level_test("trained networks' validation accuracy", val_accuracy, chance)]


def room(pixel_score: float, top: float = 1.0) -> float:
    """The room the raw pixels leave above them in a record's measure (``top`` − their score)."""
    return round(top - float(pixel_score), 4)


#: the MASO items at paper scale (MNIST, D = 128): not wired here (the real data are not on this machine)
PAPER_COST = "needs MNIST (--data DIR), not wired for the MASO items; " + cost_of("maso-codes")


#: the paper's setting of the partition-code items (MNIST pixel by pixel; "a trained ReLU RNN (one
#: layer, 128-dimensional hidden state)", Fig. 5; its training length and batch are in a table the
#: text does not give)
def paper_codes_setting() -> dict:
    from .._recipe import setting

    return setting(data="MNIST", T=784, D=128)


def setting_json(quick: bool, dataset: str = "digits", *, hidden=None, iterations=None, lr=None, batch=None,
                 T=None) -> str:
    """Our setting (``_recipe.setting_attr``) of a MASO item on the digits stand-in."""
    from .._recipe import setting_attr

    D, its = sizes(quick)
    data = "8×8 digits" if dataset == "digits" else "synthetic patterns"
    return setting_attr(data=data, T=T or (64 if dataset == "digits" else 32), D=hidden or D, batch=batch or BATCH,
                        steps=iterations or its, lr=lr or LR)


def have_digits() -> bool:
    from ...tasks.labelled import have_digits as _have

    return _have()


def sizes(quick: bool):
    return QUICK if quick else FULL


def describe(quick: bool, dataset: str = "digits") -> str:
    """The scale-down, for ``attrs["scaling"]``."""
    from .._stats import seeds_for

    D, its = sizes(quick)
    data = ("8x8 digits read pixel by pixel (T=64" if dataset == "digits" else
            "synthetic pattern sequences, no scikit-learn (5 classes, T=32")
    return (f"{data}; 50/10/40% train/val/held-out; standardised) for MNIST (T=784); "
            f"ReLU RNN D={D} from U=I, Adam lr {LR}, {its} iterations, batch {BATCH}, "
            f"{len(seeds_for(quick))} seeds (paper: D=128, RMSprop, 200 epochs)" + (" (quick)" if quick else ""))


def standardised_digits(permute: int | None = None):
    """The ``digits-pixels`` task (split 50 / 10 / 40 %) with every pixel standardised by the
    training split's pixel mean and standard deviation — the paper's MNIST preprocessing
    ("centered and normalized with mean 0.1307 and standard deviation 0.3081", App. B).

    Without scikit-learn the synthetic labelled task stands in (``pattern_sequences``: 5 classes
    of noisy, shifted sinusoid mixtures, 600 sequences, T = 32), split and standardised alike, so
    the recipes still run; ``task.name`` says which (``digits-pixels`` or ``patterns``).

    ``permute``: the permuted form (the paper's permuted MNIST): one fixed permutation of the time
    steps, drawn from ``default_rng(permute)`` (``make_task(..., permute=)``; applied alike to the
    synthetic stand-in)."""
    import math

    import dynlab as dl
    from ...tasks import labelled
    from ...tasks.sequences import Task

    if labelled.have_digits():
        task = dl.make_task("digits-pixels", seed=0, n_train=50, n_val=10, n_test=40, permute=permute)
    else:
        x, y = labelled.pattern_sequences(n_per_class=120, classes=5, steps=32, noise=0.4, max_shift=4, seed=0)
        order = np.random.default_rng(0).permutation(len(y))
        cut = np.round(np.array([0.5, 0.6]) * len(y)).astype(int)
        parts = np.split(order, cut)
        if permute is not None:
            x = x[:, np.random.default_rng(int(permute)).permutation(x.shape[1])]
        data = {sp: (x[p], y[p]) for sp, p in zip(("train", "val", "test"), parts)}
        task = Task("patterns", "ce", 1, 5, 32, math.log(5.0), "chance cross-entropy ln 5", data,
                    {"task": "patterns"}, 0)
    return standardise(task)


def dataset_name(task) -> str:
    return "digits" if task.name == "digits-pixels" else "patterns"


def digit_networks(quick: bool) -> dict:
    """{"task", "seeds", "trained": [TrainResult], "init": [Model], "random": [Model], "val_accuracy": [...]}."""
    key = bool(quick)
    if key in _CACHE:
        return _CACHE[key]
    import dynlab as dl

    from .._stats import seeds_for

    D, its = sizes(quick)
    task = standardised_digits()
    trained, init, random, acc = [], [], [], []
    for s in seeds_for(quick):
        m0 = dl.make_model("rnn", D, task.inputs, activation="relu", identity_init=True, seed=s)
        res = train_model(m0, task, iterations=its, lr=LR, batch=BATCH, clip=CLIP, record_every=its,
                          seed=s, progress=False, command="dynlab figures make maso-fig2-codes")
        trained.append(res)
        init.append(m0)
        random.append(dl.make_model("rnn", D, task.inputs, activation="relu", seed=1000 + s,
                                    weight_scale=RANDOM_SCALE))
        acc.append(float(res.history["val_accuracy"].values[-1]))
    out = {"task": task, "seeds": seeds_for(quick), "trained": trained, "init": init, "random": random,
           "val_accuracy": acc, "hidden": D, "iterations": its}
    _CACHE[key] = out
    return out


def ridge_readout(H, y, C, lam=1e-4):
    """W_out, b_out minimising ‖H W_outᵀ + b_out − onehot(y)‖² + lam·N‖W_out‖² (centred normal equations)."""
    Y = np.eye(C)[y]
    mh, my = H.mean(0), Y.mean(0)
    Hc, Yc = H - mh, Y - my
    W = np.linalg.solve(Hc.T @ Hc + lam * len(y) * np.eye(H.shape[1]), Hc.T @ Yc).T
    return W, my - W @ mh


def prefix_sq_distances(features, times) -> np.ndarray:
    """Squared Euclidean distances between all sequences' prefixes f[:, :t] for every t in ``times``.

    features (N, T, K); returns (len(times), N, N).  The prefix distance is a running sum over time
    blocks, so all prefixes cost one pass over the data (for 0/1 codes the entries are integers,
    exact in float64, so ties fall exactly as in ``dynlab.knn_accuracy``).
    """
    f = np.asarray(features, dtype=np.float64)
    N = f.shape[0]
    out = np.empty((len(times), N, N))
    acc = np.zeros((N, N))
    prev = 0
    for j, t in enumerate(times):
        block = f[:, prev:int(t)].reshape(N, -1)
        sq = np.sum(block ** 2, axis=1)
        acc += sq[:, None] + sq[None, :] - 2.0 * (block @ block.T)
        out[j] = acc
        prev = int(t)
    return out


def knn_from_distances(d2, labels, ks, *, splits: int, seed: int = 0, train_fraction: float = 0.8) -> list:
    """k-NN accuracy for each k from a full squared-distance matrix, with the splits, neighbour order
    and vote of ``dynlab.knn_accuracy`` (seeded permutations seed, seed + 1, …; mean over splits)."""
    from ...analysis.partition_codes import _vote

    y = np.asarray(labels)
    n_train = int(round(train_fraction * len(y)))
    acc = np.zeros(len(ks))
    for s in range(splits):
        perm = np.random.default_rng(seed + s).permutation(len(y))
        tr, te = perm[:n_train], perm[n_train:]
        nn = y[tr][np.argsort(d2[np.ix_(te, tr)], axis=1, kind="stable")[:, :max(ks)]]
        classes = np.unique(y[tr])
        for i, k in enumerate(ks):
            acc[i] += float(np.mean(_vote(nn[:, :k], classes) == y[te])) / splits
    return acc.tolist()

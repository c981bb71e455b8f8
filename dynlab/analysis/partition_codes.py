"""The geometry of partition codes (MASO paper §5): prefix features, 2-D embeddings (PCA, t-SNE)
and a NumPy k-nearest-neighbour classifier on codes.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError

#: ``embed_codes`` uses ``projection.pca`` (a full SVD) when min(N, F) is at most this, else the
#: two leading eigenvectors of the Gram/scatter matrix (same projection, far cheaper).
PCA_SVD_MAX = 400

def prefix_features(codes, t: int) -> np.ndarray:
    """The partition code of each sequence after t steps: codes[:, :t] flattened, float64 (B, t·K)."""
    c = np.asarray(codes)
    return c[:, :t].reshape(c.shape[0], -1).astype(np.float64)


def _pca2_eigh(f: np.ndarray) -> np.ndarray:
    """Coordinates on the top two principal components of a large point cloud (N, F).

    The same projection as ``projection.pca`` (same sign convention: the largest-magnitude
    entry of each component positive), from the two leading eigenvectors of the smaller of the
    Gram matrix X Xᵀ and the scatter matrix Xᵀ X of the centred points (LAPACK ``syevr`` for
    those two only), instead of a full SVD, which costs ~10× more at N ≈ 2000, F ≈ 4000.
    Eigenvectors from the squared matrix are accurate to ≈ ε·λ₁/(λ₂ − λ₃), ample for a picture.
    """
    from scipy.linalg import eigh

    X = f - f.mean(axis=0)
    N, F = X.shape
    if F <= N:
        w, V = eigh(X.T @ X, subset_by_index=[F - 2, F - 1])
        comps = V[:, ::-1].T
    else:
        w, Uv = eigh(X @ X.T, subset_by_index=[N - 2, N - 1])
        comps = (X.T @ Uv[:, ::-1]).T
        comps /= np.maximum(np.linalg.norm(comps, axis=1, keepdims=True), np.finfo(float).tiny)
    flip = np.sign(comps[np.arange(2), np.argmax(np.abs(comps), axis=1)])
    comps *= np.where(flip == 0, 1.0, flip)[:, None]
    return X @ comps.T


def embed_codes(codes, times, *, method: str = "pca", seed: int = 0) -> np.ndarray:
    """2-D embedding of the prefix codes (steps 1..t) of B sequences at each of ``times``.

    Parameters
    ----------
    codes : (B, T, …) integer codes;  times : 1-based steps t
    method : "pca" (``dynlab.analysis.projection.pca``) or "tsne" (scikit-learn's TSNE,
        init="pca", random_state=seed; a ParameterError when scikit-learn is absent)

    Returns (len(times), B, 2).
    """
    from .projection import pca, project

    c = np.asarray(codes)
    T = c.shape[1]
    ts = [int(t) for t in np.atleast_1d(times)]
    for t in ts:
        if not 1 <= t <= T:
            raise ParameterError("times", f"must lie in 1..{T}, got {t}")
    key = str(method).lower().replace("-", "")
    if key not in ("pca", "tsne"):
        raise ParameterError("method", f"must be 'pca' or 'tsne', got {method!r}")
    if key == "tsne":
        try:
            from sklearn.manifold import TSNE
        except ImportError:
            raise ParameterError("method", "t-SNE needs scikit-learn (pip install 'dynlab[digits]'); "
                                           "use method='pca'") from None
    out = np.empty((len(ts), c.shape[0], 2))
    for i, t in enumerate(ts):
        f = prefix_features(c, t)
        if key == "pca":
            if f.shape[1] < 2:
                out[i] = np.column_stack([f[:, 0] - f[:, 0].mean(), np.zeros(len(f))])
            elif min(f.shape) <= PCA_SVD_MAX:
                mean, comps, _ = pca(f, 2)
                out[i] = project(f, mean, comps)
            else:
                out[i] = _pca2_eigh(f)
        elif not np.any(f != f[:1]):
            out[i] = 0.0  # every code identical: one point (sklearn's t-SNE fails on it)
        else:
            perp = float(min(30.0, max(2.0, (c.shape[0] - 1) / 3)))
            out[i] = TSNE(n_components=2, init="pca", random_state=seed, perplexity=perp).fit_transform(f)
    return out


def _neighbours(train_X, test_X, kmax: int) -> np.ndarray:
    """Indices of the kmax nearest training points of every test point, (distance, index) order."""
    A = np.asarray(train_X, dtype=np.float64)
    Q = np.asarray(test_X, dtype=np.float64)
    d2 = np.sum(Q ** 2, 1)[:, None] + np.sum(A ** 2, 1)[None] - 2.0 * Q @ A.T
    return np.argsort(d2, axis=1, kind="stable")[:, :kmax]


def _vote(labs: np.ndarray, classes: np.ndarray) -> np.ndarray:
    counts = np.stack([(labs == c).sum(axis=1) for c in classes], axis=1)
    tied = counts == counts.max(axis=1, keepdims=True)
    out = np.empty(labs.shape[0], dtype=labs.dtype)
    for i in range(labs.shape[0]):
        ok = set(classes[tied[i]].tolist())
        out[i] = next(v for v in labs[i] if v in ok)
    return out


def knn_predict(train_X, train_y, test_X, k: int) -> np.ndarray:
    """k-nearest-neighbour labels (Euclidean; for 0/1 codes the squared distance is the Hamming one).

    Neighbours are the k smallest distances, ties in distance broken by training index (stable
    sort); the vote is by count, a tie between classes going to the class of the nearest
    neighbour among the tied ones.
    """
    from .._validate import as_int

    k = as_int(k, "k", low=1)
    y = np.asarray(train_y)
    if k > len(y):
        raise ParameterError("k", f"must be ≤ the number of training points {len(y)}, got {k}")
    return _vote(y[_neighbours(train_X, test_X, k)], np.unique(y))


def knn_accuracy(features, labels, ks=(1, 2, 5, 10), *, train_fraction: float = 0.8, seed: int = 0,
                 splits: int = 1) -> dict:
    """k-NN test accuracy for each k (MASO Table 3: 80 % of the points train, 20 % test).

    The split is a seeded random permutation; with ``splits`` > 1 the accuracy is the mean over
    that many independent splits (seeds seed, seed + 1, …).  Returns {k: accuracy}.
    """
    from .._validate import as_int

    y = np.asarray(labels)
    X = np.asarray(features, dtype=np.float64).reshape(len(y), -1)
    if not 0.0 < train_fraction < 1.0:
        raise ParameterError("train_fraction", f"must lie in (0, 1), got {train_fraction}")
    splits = as_int(splits, "splits", low=1)
    ks = [as_int(k, "k", low=1) for k in np.atleast_1d(ks)]
    n_train = int(round(train_fraction * len(y)))
    if max(ks) > n_train:
        raise ParameterError("k", f"must be ≤ the number of training points {n_train}, got {max(ks)}")
    acc = {k: 0.0 for k in ks}
    for s in range(splits):
        perm = np.random.default_rng(seed + s).permutation(len(y))
        tr, te = perm[:n_train], perm[n_train:]
        nn = y[tr][_neighbours(X[tr], X[te], max(ks))]
        classes = np.unique(y[tr])
        for k in ks:
            acc[k] += float(np.mean(_vote(nn[:, :k], classes) == y[te])) / splits
    return acc

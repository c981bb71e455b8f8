"""Principal-component projection of a trajectory, for drawing D > 2 states in a plane."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError


def pca(points, n: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-``n`` principal components of a point cloud, by SVD of the centred points.

    Parameters
    ----------
    points : (N, D) array
        Rows are points (e.g. the states h_1..h_T); rows with a non-finite entry are ignored.
    n : int
        Number of components (≤ D).

    Returns
    -------
    mean : (D,) the centre;  components : (n, D) orthonormal rows, sign fixed so the largest
    entry of each is positive;  explained : (n,) fraction of the total variance along each.

    Example
    -------
    >>> mean, comps, frac = pca(h, 2);  xy = project(h, mean, comps)
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2:
        raise ParameterError("points", f"must have shape (N, D), got {pts.shape}")
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    if n < 1 or n > pts.shape[1]:
        raise ParameterError("n", f"must be between 1 and D={pts.shape[1]}, got {n}")
    if pts.shape[0] == 0:
        raise ParameterError("points", "has no finite row")
    mean = pts.mean(axis=0)
    _, sv, vt = np.linalg.svd(pts - mean, full_matrices=False)
    comps = vt[:n].copy()
    if comps.shape[0] < n:  # fewer points than components: pad with an orthonormal completion
        q, _ = np.linalg.qr(np.vstack([comps, np.eye(pts.shape[1])]).T)
        comps = q.T[:n]
    flip = np.sign(comps[np.arange(n), np.argmax(np.abs(comps), axis=1)])
    comps *= np.where(flip == 0, 1.0, flip)[:, None]
    var = sv ** 2
    total = var.sum()
    explained = np.zeros(n)
    k = min(n, var.size)
    explained[:k] = var[:k] / total if total > 0 else 0.0
    return mean, comps, explained


def project(points, mean, components) -> np.ndarray:
    """Coordinates of ``points`` (…, D) along ``components`` (n, D) about ``mean``: (…, n)."""
    return (np.asarray(points, dtype=np.float64) - np.asarray(mean)) @ np.asarray(components).T

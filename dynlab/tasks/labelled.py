"""Labelled sequence data sets for the MASO partition analysis (codes, k-NN, templates).

* ``digit_sequences``: scikit-learn's bundled 8×8 handwritten digits (1797 images, 10 classes),
  each image read pixel by pixel (row-major) as a length-64 sequence of one feature, scaled to
  [0, 1] — the small stand-in for the MASO paper's pixel-by-pixel MNIST.  Needs the optional
  extra ``digits`` (scikit-learn); nothing is downloaded (the data ship with scikit-learn).
* ``pattern_sequences``: a synthetic labelled task that needs nothing: each class is a
  smooth random template (a sum of three sinusoids); a sample is its class template, shifted
  in time by a random lag, scaled by a random gain and buried in Gaussian noise.
* ``labelled_sequences("auto")``: digits when scikit-learn is installed, otherwise patterns.
"""
from __future__ import annotations

import numpy as np

from .._validate import as_int, as_scalar
from ..errors import ParameterError

LABELLED = ("digits", "patterns")


def have_digits() -> bool:
    """Whether scikit-learn (and so its bundled digits) can be imported."""
    try:
        import sklearn.datasets  # noqa: F401
    except ImportError:
        return False
    return True


def digit_sequences(*, n: int | None = None, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The 8×8 digits as pixel sequences: x (N, 64, 1) in [0, 1] and labels (N,) in 0..9.

    ``n`` keeps a random subset of n images (drawn with ``seed``); None keeps all 1797 in
    scikit-learn's order.  Raises ParameterError (``dataset``) when scikit-learn is absent.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ParameterError("dataset", "the digits need scikit-learn (pip install 'dynlab[digits]'); "
                                        "use the synthetic 'patterns' task instead") from None
    data = load_digits()
    x = (data.images.reshape(len(data.target), 64, 1) / 16.0).astype(np.float64)
    y = data.target.astype(np.int64)
    if n is not None:
        n = as_int(n, "n", low=1)
        if n > len(y):
            raise ParameterError("n", f"must be ≤ {len(y)} (the digits data set), got {n}")
        idx = np.sort(np.random.default_rng(seed).permutation(len(y))[:n])
        x, y = x[idx], y[idx]
    return x, y


def pattern_sequences(*, n_per_class: int = 60, classes: int = 4, steps: int = 32, noise: float = 0.6,
                      max_shift: int = 4, gain_spread: float = 0.0, seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic labelled sequences: x (classes·n_per_class, steps, 1) and labels.

    Class c has the template τ_c(t) = Σ_{j=1..3} a_cj sin(2π f_cj t / steps + φ_cj)
    (a ~ U[0.5, 1], f ~ U{1..4}, φ ~ U[0, 2π)); a sample is g·τ_c(t − s) + noise·ξ_t with the
    lag s ~ U{−max_shift..max_shift} (circular), the gain g ~ U[0.7, 1.3]·e^{U[−gain_spread, gain_spread]}
    (a nuisance contrast, none by default), ξ ~ N(0, 1).  Samples are ordered class by class.
    """
    n_per_class = as_int(n_per_class, "n_per_class", low=1)
    classes = as_int(classes, "classes", low=2)
    steps = as_int(steps, "steps", low=2)
    noise = as_scalar(noise, "noise", low=0.0)
    max_shift = as_int(max_shift, "max_shift", low=0)
    gain_spread = as_scalar(gain_spread, "gain_spread", low=0.0)
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    amp = rng.uniform(0.5, 1.0, (classes, 3))
    freq = rng.integers(1, 5, (classes, 3))
    phase = rng.uniform(0, 2 * np.pi, (classes, 3))
    tmpl = np.einsum("cj,cjt->ct", amp, np.sin(2 * np.pi * freq[:, :, None] * t / steps + phase[:, :, None]))
    xs, ys = [], []
    for c in range(classes):
        shift = rng.integers(-max_shift, max_shift + 1, n_per_class)
        gain = rng.uniform(0.7, 1.3, n_per_class) * np.exp(rng.uniform(-gain_spread, gain_spread, n_per_class))
        base = np.stack([np.roll(tmpl[c], s) for s in shift]) * gain[:, None]
        xs.append(base + noise * rng.standard_normal((n_per_class, steps)))
        ys.append(np.full(n_per_class, c, dtype=np.int64))
    return np.concatenate(xs)[:, :, None], np.concatenate(ys)


def labelled_sequences(kind: str = "auto", *, seed: int | None = 0, **options) -> tuple[np.ndarray, np.ndarray, str]:
    """(x, labels, name) of ``digits``, ``patterns``, or ``auto`` (digits if scikit-learn is installed)."""
    key = str(kind).strip().lower()
    if key == "auto":
        key = "digits" if have_digits() else "patterns"
    if key == "digits":
        x, y = digit_sequences(seed=seed, **options)
    elif key == "patterns":
        x, y = pattern_sequences(seed=seed, **options)
    else:
        raise ParameterError("dataset", f"unknown data set {kind!r}; choose from auto, {', '.join(LABELLED)}")
    return x, y, key

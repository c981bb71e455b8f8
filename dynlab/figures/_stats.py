"""Seed statistics for the gallery's claims about training outcomes (issue rules, docs/design.md *Figures*).

A claim about a training outcome holds only if the effect is larger than two standard errors of
its mean over seeds; where two methods are compared on the same seeds the test is *paired*
(the per-seed differences, so seed-to-seed variation common to both methods cancels).

``mean_se(values)``          → (mean, standard error of the mean, n)
``beyond_2se(values)``       → the one-sample test "mean > 2 SE" on per-seed effects
``paired(a, b)``             → the paired test "a − b > 2 SE(a − b)" on per-seed values
``seeds_for(quick)``         → the seeds a training claim runs: 5 in full mode, 3 in quick mode
"""
from __future__ import annotations

import math

import numpy as np

#: seeds per training claim: ≥ 5 in full mode, ≥ 3 in quick mode (the gallery's rules)
FULL_SEEDS = 5
QUICK_SEEDS = 3


def seeds_for(quick: bool, full: int = FULL_SEEDS) -> list[int]:
    """The seeds of a training claim: ``range(QUICK_SEEDS)`` quick, ``range(full)`` (≥ 5) full."""
    return list(range(QUICK_SEEDS if quick else max(full, FULL_SEEDS)))


def mean_se(values) -> tuple[float, float, int]:
    """Mean, standard error of the mean (sample std, ddof = 1, over √n) and n of ``values``.

    Non-finite values are kept (a diverged seed makes the mean non-finite, so no claim can pass on
    it); n = 1 gives SE = inf (one seed decides nothing)."""
    v = np.asarray(values, dtype=float).ravel()
    n = int(v.size)
    if n == 0:
        return float("nan"), float("inf"), 0
    m = float(v.mean())
    se = float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else float("inf")
    return m, se, n


def beyond_2se(values, *, direction: str = "positive") -> dict:
    """One-sample test on per-seed effects: ``passed`` when mean − 2 SE > 0 (``direction="positive"``)
    or mean + 2 SE < 0 (``"negative"``); returns ``{"mean", "se", "n", "passed"}``."""
    if direction not in ("positive", "negative"):
        raise ValueError(f"direction must be 'positive' or 'negative', got {direction!r}")
    m, se, n = mean_se(values)
    ok = (m - 2 * se > 0) if direction == "positive" else (m + 2 * se < 0)
    return {"mean": m, "se": se, "n": n, "passed": bool(np.isfinite(m) and np.isfinite(se) and ok)}


def paired(a, b, *, larger: str = "a") -> dict:
    """Paired test over seeds: per-seed differences d = a − b; ``larger="a"`` passes when
    mean(d) − 2 SE(d) > 0, ``larger="b"`` when mean(d) + 2 SE(d) < 0.

    Returns ``{"diff_mean", "diff_se", "n", "passed"}``."""
    a = np.asarray(a, dtype=float).ravel()
    b = np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same seeds: {a.size} vs {b.size}")
    r = beyond_2se(a - b, direction="positive" if larger == "a" else "negative")
    return {"diff_mean": r["mean"], "diff_se": r["se"], "n": r["n"], "passed": r["passed"]}

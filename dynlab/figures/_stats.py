"""Seed statistics for the gallery's claims about training outcomes (issue rules, docs/design.md *Figures*).

A claim about a training outcome holds only if the effect is larger than two standard errors of
its mean over seeds; where two methods are compared on the same seeds the test is *paired*
(the per-seed differences, so seed-to-seed variation common to both methods cancels).

``mean_se(values)``          → (mean, standard error of the mean, n)
``beyond_2se(values)``       → the one-sample test "mean > 2 SE" on per-seed effects
``paired(a, b)``             → the paired test "a − b > 2 SE(a − b)" on per-seed values
``seeds_for(quick)``         → the seeds a training claim runs: 5 in full mode, 3 in quick mode

The record's verdict (``decide``) is one of ``VERDICTS``: *holds*, *does not hold*, *inconclusive*
(the competence gate declared in the recipe was not met: the networks did not learn enough for the
comparison to mean anything) or *underpowered* (the data agree both with no effect and with the
effect that matters).  ``comparison`` decides one comparative part and states its power (the seeds
that would resolve it), ``level_test`` / ``gate`` report the gate, ``effect`` the headline number.

Gates on every arm that decides: a part compares arms (cells, settings) at one condition (a T, a
data set); ``gated(part, items)`` makes it *inconclusive* unless every arm the part's claim says
succeeds reached its declared competence level there (``level_test(..., scope="arm")``).  The
record's gate is met only by its record-wide items (a solver's competence, the data having room for
the effect); the arm items decide the parts they gate, so a claim decided at T = 100 and 200 but not
learned at all at T = 400 reads "does not hold" if a decided part fails, else "inconclusive".

A *holds* needs the effect beyond 2 SE **and** at least the minimum effect declared in the recipe from
the task itself (``interest``: a tenth of a trivial predictor's loss, the resolution of an accuracy on
the test split — ``accuracy_resolution`` —, never the paper's effect on other data); ``noninferior``
decides "matches or beats" (one-sided, against a margin).
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


# ------------------------------------------------------------------ verdicts, gates and power
#: the verdicts a record can carry (the gallery's words)
VERDICTS = ("holds", "does not hold", "inconclusive", "underpowered")
#: an effect of Z_POWER standard errors passes the "beyond 2 SE" rule with ≈ 80 % probability
#: (2 + 0.84, the one-sided normal quantile of 0.8): the size at which a comparison is resolved
Z_POWER = 2.84


def comparison(name: str, values, *, interest: float, units: str = "", direction: str = "positive",
               paper: float | None = None) -> dict:
    """One comparative part of a claim, decided on per-seed effects ``values`` (paired differences,
    or a value minus a level), with its power against the effect that matters.

    ``interest`` (> 0, in the units of ``values``, in the claimed direction): the paper's effect where
    the paper gives one in comparable units, else the smallest effect the recipe declares worth
    resolving — fixed in the recipe before the run.  ``paper``: the paper's own number, reported.

    The part's verdict: ``holds`` when the mean is beyond 2 SE in the claimed direction and at least
    ``interest`` (the minimum effect that matters); ``does not hold`` when the data exclude an effect
    of size ``interest`` (mean + 2 SE below it, in the claimed direction); otherwise ``underpowered``
    (the data agree with an effect below what matters and with the effect of interest).  ``seeds_needed``: the seeds at which ``interest`` would be Z_POWER
    standard errors with the same spread over seeds, n·(Z_POWER·SE/interest)²."""
    if direction not in ("positive", "negative"):
        raise ValueError(f"direction must be 'positive' or 'negative', got {direction!r}")
    if not interest > 0:
        raise ValueError(f"interest must be > 0, got {interest!r}")
    m, se, n = mean_se(values)
    e = m if direction == "positive" else -m
    finite = bool(np.isfinite(m) and np.isfinite(se))
    if finite and e - 2 * se > 0 and e >= interest:
        verdict = "holds"
    elif not finite or e + 2 * se < interest:
        verdict = "does not hold"
    else:
        verdict = "underpowered"
    need = int(math.ceil(n * (Z_POWER * se / interest) ** 2)) if finite and se > 0 else (n if finite else None)
    return {"name": name, "mean": m, "se": se, "n": n, "direction": direction, "passed": verdict == "holds",
            "verdict": verdict, "interest": float(interest), "paper": paper, "units": units,
            "seeds_needed": need}


def level_test(name: str, values, level: float, *, direction: str = "above", scope: str = "record") -> dict:
    """A gate item: the per-seed ``values`` lie above (``direction="above"``) or below a stated
    ``level`` beyond 2 SE; returns ``{"name", "mean", "se", "n", "level", "met", "scope"}``.

    ``scope="record"``: the record's gate (unmet: the whole record is inconclusive); ``"arm"``: one
    arm's competence at one condition, which decides only the parts ``gated`` by it."""
    if scope not in ("record", "arm"):
        raise ValueError(f"scope must be 'record' or 'arm', got {scope!r}")
    r = beyond_2se(np.asarray(values, dtype=float) - level, direction="positive" if direction == "above" else "negative")
    return {"name": name, "mean": r["mean"] + level, "se": r["se"], "n": r["n"], "level": float(level),
            "direction": direction, "met": r["passed"], "scope": scope}


def gated(part: dict, items: list) -> dict:
    """``part`` made *inconclusive* (not passed, no power to buy) unless every arm item of ``items``
    (``level_test(..., scope="arm")``) is met: a comparison means nothing where an arm the claim
    says succeeds never reached its competence level.  Returns the part (a copy) with ``gated_by``."""
    out = dict(part)
    missing = [it["name"] for it in items if not it["met"]]
    out["gated_by"] = [it["name"] for it in items]
    if missing:
        out.update(verdict="inconclusive", passed=False, not_competent=missing)
    return out


def gate(items: list) -> dict:
    """The competence gate's report: ``met`` when every record-wide item (``level_test``, or a dict
    with ``met``; ``scope`` "record", the default) is met; ``arms_met`` when every arm item is;
    ``measured`` holds each item's numbers."""
    meas = {}
    for it in items:
        tag = " [arm]" if it.get("scope") == "arm" else ""
        if "mean" in it:
            meas[it["name"] + tag] = (f"{it['mean']:.4g} ± {it['se']:.2g} "
                                      f"({'>' if it.get('direction', 'above') == 'above' else '<'} {it['level']:.4g}"
                                      f"{'' if it['met'] else ': not met'})")
        else:
            meas[it["name"] + tag] = it.get("value", it["met"])
    rec = [it for it in items if it.get("scope", "record") == "record"]
    arms = [it for it in items if it.get("scope") == "arm"]
    return {"met": bool(all(it["met"] for it in rec)), "arms_met": bool(all(it["met"] for it in arms)),
            "measured": meas}


def decide(passed: bool, gate_met: bool, parts: list) -> str:
    """The record's verdict: ``inconclusive`` when the record's competence gate is not met (whatever
    the check says); ``holds`` when the check passed; ``does not hold`` when some decided part does
    not hold; ``inconclusive`` when a part is undecided because an arm never reached its competence
    level (``gated``); ``underpowered`` when it failed only on comparisons the data cannot resolve;
    otherwise ``does not hold``."""
    if not gate_met:
        return "inconclusive"
    if passed:
        return "holds"
    verdicts = [p["verdict"] for p in parts]
    if "does not hold" in verdicts:
        return "does not hold"
    if "inconclusive" in verdicts:
        return "inconclusive"
    if "underpowered" in verdicts:
        return "underpowered"
    return "does not hold"


def noninferior(name: str, diffs, *, margin: float, units: str = "", paper: float | None = None) -> dict:
    """"A matches or beats B" on per-seed differences ``diffs`` = A − B (larger is better), one-sided
    against the declared ``margin`` (> 0): ``holds`` when mean − 2 SE > −margin; ``does not hold``
    when mean + 2 SE < −margin (A is worse by more than the margin); otherwise ``underpowered``."""
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin!r}")
    m, se, n = mean_se(diffs)
    finite = bool(np.isfinite(m) and np.isfinite(se))
    if finite and m - 2 * se > -margin:
        verdict = "holds"
    elif not finite or m + 2 * se < -margin:
        verdict = "does not hold"
    else:
        verdict = "underpowered"
    need = int(math.ceil(n * (Z_POWER * se / margin) ** 2)) if finite and se > 0 else (n if finite else None)
    return {"name": name, "mean": m, "se": se, "n": n, "direction": "positive", "passed": verdict == "holds",
            "verdict": verdict, "interest": float(margin), "paper": paper, "units": units, "seeds_needed": need,
            "margin": float(margin)}


def level_part(name: str, values, level: float, *, direction: str = "below", units: str = "") -> dict:
    """A part that puts a level claim to the data ("the CE is below ``level``"): ``holds`` when the
    per-seed values lie beyond 2 SE on the claimed side of ``level``, ``does not hold`` when they lie
    beyond 2 SE on the other side, ``underpowered`` otherwise."""
    if direction not in ("above", "below"):
        raise ValueError(f"direction must be 'above' or 'below', got {direction!r}")
    m, se, n = mean_se(values)
    e = (m - level) if direction == "above" else (level - m)
    finite = bool(np.isfinite(m) and np.isfinite(se))
    verdict = ("holds" if finite and e - 2 * se > 0 else
               "does not hold" if not finite or e + 2 * se < 0 else "underpowered")
    return {"name": name, "mean": m, "se": se, "n": n, "direction": "positive", "passed": verdict == "holds",
            "verdict": verdict, "interest": None, "paper": None, "units": units, "seeds_needed": None,
            "level": float(level)}


def accuracy_resolution(n_test: int) -> float:
    """The smallest accuracy difference an item's test split resolves: the binomial standard error
    of one accuracy measured on ``n_test`` examples at p = 1/2, 0.5/√n (0.019 for the 719 held-out
    digits) — the minimum effect of an accuracy claim, from the task itself."""
    return float(0.5 / math.sqrt(int(n_test)))


def effect(name: str, part_or_mean, se: float | None = None, *, n: int | None = None, units: str = "",
           paper: float | None = None) -> dict:
    """The record's headline effect ``{"name", "ours", "se", "n", "units", "paper"}``, from a
    ``comparison`` part or from (mean, SE)."""
    if isinstance(part_or_mean, dict):
        p = part_or_mean
        return {"name": name, "ours": p["mean"], "se": p["se"], "n": p["n"], "units": p.get("units", units),
                "paper": p.get("paper") if paper is None else paper}
    return {"name": name, "ours": float(part_or_mean), "se": float(se if se is not None else 0.0),
            "n": int(n if n is not None else 1), "units": units, "paper": paper}


def fact(name: str, holds: bool, value=float("nan"), *, n: int = 1, units: str = "") -> dict:
    """A part of a claim decided without sampling error (a count over seeds, a closed-form check):
    its verdict is ``holds`` or ``does not hold`` (no power to buy); ``value`` is reported."""
    v = float(value) if isinstance(value, (int, float, np.floating, np.integer)) else float("nan")
    return {"name": name, "mean": v, "se": 0.0, "n": int(n), "direction": "positive", "passed": bool(holds),
            "verdict": "holds" if holds else "does not hold", "interest": None, "paper": None, "units": units,
            "seeds_needed": None}


def record_fields(*, effect: dict, gate_items: list, seeds: int, parts: list | None = None) -> dict:
    """The verdict's fields of a check's result (``Recipe`` contract): ``effect``, ``gate`` (from its
    items, ``gate``), ``seeds`` and, when given, the comparative ``parts``."""
    out = {"effect": effect, "gate": gate(gate_items), "seeds": int(seeds)}
    if parts:
        out["parts"] = parts
    return out

"""The benchmark harness: named workloads, medians and ratios measured in one run.

A workload builds its inputs once and returns a list of ``Impl`` (a name and a callable with
no arguments).  The harness

1. calls every implementation once (JIT compilation, caches) and checks its result against
   the workload's reference implementation with ``Workload.check`` (a benchmark of a wrong
   answer is worthless, so a mismatch is reported, and the row is marked);
2. times ``repeat`` calls of each, interleaved round by round in a fresh seeded order each
   round (so a slow spell of the machine, or a penalty for a position in the round, hits every
   implementation alike), each after a short rest (``PAUSE``: the spinning worker threads of
   the call before, OpenMP's or XLA's, would otherwise take a core from it), and reports the
   median and the ratio to the baseline.

Timings are wall-clock (``time.perf_counter``).  Nothing here is a test: machines are noisy;
the numbers go to BENCHMARKS.md.
"""
from __future__ import annotations

import dataclasses
import gc
import random
import statistics
import time
from typing import Any, Callable

import numpy as np

#: Seconds of rest before each timed call (see ``run_workload``).
PAUSE = 0.05


@dataclasses.dataclass
class Impl:
    """One implementation of a workload: ``fn()`` returns its result (an array or a tuple)."""

    name: str
    fn: Callable[[], Any]
    note: str = ""
    #: False for a floor (e.g. bare BLAS + tanh passes) that times the work without computing
    #: the workload's answer: it is timed but not compared.
    check: bool = True


@dataclasses.dataclass
class Workload:
    """A named workload (docs/design.md, *Benchmarks*).

    ``build(quick)`` returns (impls, info): the implementations, the first of which is the
    reference the others are checked against, and a dict of facts printed with the results
    (sizes, floors).  ``baseline`` names the implementation ratios are taken against.
    ``rtol`` is the agreement asked of every implementation with the reference.
    """

    name: str
    description: str
    build: Callable[[bool], tuple[list[Impl], dict]]
    baseline: str
    rtol: float = 1e-10
    repeat: int = 5


@dataclasses.dataclass
class Row:
    name: str
    median: float
    best: float
    ratio: float
    agrees: bool | None
    error: float
    note: str


def _as_arrays(result) -> list[np.ndarray]:
    if isinstance(result, (tuple, list)):
        return [np.asarray(r, dtype=np.float64) for r in result]
    return [np.asarray(result, dtype=np.float64)]


def max_rel_error(a, b) -> float:
    """max |a − b| / max(|b|, tiny) over every array of two results (NaN where shapes differ)."""
    worst = 0.0
    for x, y in zip(_as_arrays(a), _as_arrays(b)):
        if x.shape != y.shape:
            return float("nan")
        scale = max(float(np.max(np.abs(y))) if y.size else 0.0, 1e-300)
        worst = max(worst, float(np.max(np.abs(x - y))) / scale if x.size else 0.0)
    return worst


# info["per_item"] of a workload: (n, "setting") — every row's median over n items, in µs per item.
# info["ratios"] of a workload: (label, numerator, denominator), each side an implementation name
# (its median), a tuple of names (the sum of their medians, a name starting with "-"
# subtracted: a bound built from measured parts) or a time in seconds measured by the workload
# (for a target stated against a peer rather than the baseline); reported as their ratio.
def ratio_term(v, times: dict) -> tuple[float, str]:
    """(seconds, how they were formed) for one side of an info ratio; ``times``: {name: [s, …]}."""
    if isinstance(v, (int, float)):
        return float(v), f"{float(v):.3g} s"
    if isinstance(v, tuple):
        total, text = 0.0, ""
        for n in v:
            sign, n = (-1.0, n[1:]) if n.startswith("-") else (1.0, n)
            total += sign * statistics.median(times[n])
            text += (" − " if sign < 0 else " + " if text else "") + f"median of `{n}`"
        return total, f"({text})"
    return statistics.median(times[v]), f"median of `{v}`"


def ratio_term_known(v, times: dict) -> bool:
    """Whether every implementation ``v`` names was timed (a peer that is not installed was not)."""
    names = [n.removeprefix("-") for n in v] if isinstance(v, tuple) else [v]
    return isinstance(v, (int, float)) or all(n in times for n in names)


def run_workload(w: Workload, *, repeat: int | None = None, quick: bool = False, log=print) -> tuple[list[Row], dict]:
    """Check and time every implementation of ``w``; returns the rows and the workload's info."""
    impls, info = w.build(quick)
    repeat = w.repeat if repeat is None else repeat
    ref = None
    results = {}
    for impl in impls:
        t0 = time.perf_counter()
        out = impl.fn()
        results[impl.name] = out
        log(f"  {impl.name}: first call {time.perf_counter() - t0:.3g} s")
        if ref is None:
            ref = out
    times = {impl.name: [] for impl in impls}
    for round_ in range(repeat):
        # a fresh (seeded) order each round: an effect of the position in the round (the row
        # after a heavy one, or a periodic load) then hits every implementation alike
        for impl in random.Random(round_).sample(impls, len(impls)):
            gc.collect()
            # a peer's worker threads (OpenMP's, XLA's pool) spin for a while after its call
            # before they sleep; on a 2-core machine they would take a core from the next row
            time.sleep(PAUSE)
            t0 = time.perf_counter()
            impl.fn()
            times[impl.name].append(time.perf_counter() - t0)
    base = statistics.median(times[w.baseline])
    per = info.pop("per_item", None)     # (n, "setting"): each row's median per item, in µs
    if per is not None:
        n, item = per
        for impl in impls:
            info[f"µs per {item}, {impl.name}"] = f"{statistics.median(times[impl.name]) / n * 1e6:.3g}"
    for label, num, den in info.pop("ratios", []):
        if ratio_term_known(num, times) and ratio_term_known(den, times):
            (a, sa), (b, sb) = ratio_term(num, times), ratio_term(den, times)
            info[label] = f"{a / b:.3g}× ({sa} / {sb})"
    rows = []
    for i, impl in enumerate(impls):
        err = 0.0 if (i == 0 or not impl.check) else max_rel_error(results[impl.name], ref)
        rtol = info.get("rtol", {}).get(impl.name, w.rtol) if isinstance(info.get("rtol"), dict) else w.rtol
        med = statistics.median(times[impl.name])
        rows.append(Row(impl.name, med, min(times[impl.name]), base / med, None if (i == 0 or not impl.check) else err <= rtol, err,
                        impl.note))
    return rows, info


def format_rows(w: Workload, rows: list[Row], info: dict) -> str:
    """A Markdown table: implementation, median, best, speed relative to the baseline, agreement."""
    lines = [f"### `{w.name}`: {w.description}", ""]
    for k, v in info.items():
        if k != "rtol":
            lines.append(f"- {k}: {v}")
    if info:
        lines.append("")
    lines.append(f"| implementation | median (s) | best (s) | speed vs `{w.baseline}` | max rel. diff vs reference |  |")
    lines.append("|---|---:|---:|---:|---:|---|")
    for r in rows:
        agree = ("reference" if r.name == rows[0].name else "(not compared)") if r.agrees is None else (f"{r.error:.1e}" + ("" if r.agrees else " **MISMATCH**"))
        lines.append(f"| {r.name} | {r.median:.4g} | {r.best:.4g} | {r.ratio:.3g}× | {agree} | {r.note} |")
    return "\n".join(lines)

"""A figure recipe: compute a Dataset, draw from it alone, check the paper's claim on it."""
from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Callable

#: The order of the figure list (docs/design.md, *Figures*); recipes not listed here follow in name order (``recipes()``, claims.json).
ORDER = (
    "irnn-fig2-phase", "irnn-fig3-add", "irnn-fig4-copy", "irnn-fig5-add-length", "irnn-ablation-baselines",
    "irnn-fig6-convergence", "irnn-fig7-eigenvalues", "irnn-fig8-gradnorm", "irnn-table1-pixel-digits",
    "irnn-table2-noisy-digits", "irnn-table11-activation",
    "maso-fig2-codes", "maso-fig3-templates", "maso-fig4-random-h0", "maso-fig5-neighbours", "maso-fig6-tsne",
    "maso-table1-h0", "maso-table4-grid",
    "implicit-fig1-derivative", "implicit-fig2-xor", "implicit-fig6-oscillator", "implicit-fig7-size",
    "implicit-a2-iterative", "implicit-s34-stepsize", "rin-gradients", "flipflop-fixed-points",
    "flipflop-bifurcation",
)

@dataclasses.dataclass(frozen=True)
class Recipe:
    """One paper figure (docs/design.md, *Figures*).

    name     : ``irnn-fig6-convergence`` style; the module is the name with ``_`` for ``-``
    source   : the paper figure(s), e.g. ``"iRNN Fig. 6"``
    claim    : the claim, one line, as checked by ``check``
    compute  : ``compute(quick: bool) -> xarray.Dataset`` through the public API; its attrs
               carry ``scaling`` (how sizes differ from the paper) for the figure to print
    draw     : ``draw(ds) -> matplotlib.figure.Figure`` from the Dataset alone
    check    : ``check(ds) -> dict`` with ``passed`` (bool), the measured numbers, and
               ``control`` (always), ``per_seed`` (training claims), ``finding`` (when the
               claim does not hold) — the record contract below
    trains   : the claim is about a training outcome: ``check`` must report ``per_seed`` with
               ≥ 5 seeds in full mode (≥ 3 quick), and decide beyond 2 standard errors
               (``dynlab.figures._stats``)
    table    : the recipe reproduces a paper *table*: ``check`` must report ``table`` (below),
               built from the Dataset, with the paper's number beside ours
    quote    : the paper's claim in the paper's words, with where it stands (``claim`` is the
               check's restatement of it)
    gate     : the competence gate, declared here before anything runs: the level the reference
               cell and the baselines must reach (above chance, the majority class, a named
               trivial predictor; for a numerical claim, the accuracy of the reference solution)
               before the claim is judged at all

    The record contract (the gallery's rules; ``check_record`` enforces it):

    - ``control = {"setting": str, "measured": {...}, "passed": bool}`` — the same check applied
      where the paper's effect must be absent (untrained network, baseline cell, ablated part);
      it must *fail*.  A control that passes makes the record an error (the check cannot
      discriminate), whatever the claim says.
    - ``passed`` says whether the paper's claim held on our data.  A claim that does not hold is a
      finding, not an error: ``passed = False`` with ``finding`` stating what was measured instead.
    - ``per_seed``: a list with one entry (a dict of numbers, including ``"seed"``) per seed.
    - ``table`` (recipes with ``table=True``): ``{"title": str, "columns": [str, ...],
      "rows": [[cell, ...], ...], "note": str}`` — cells are numbers or short strings, every row
      as long as ``columns``; at least one column is the paper's number (its name starts with
      ``"paper"``, e.g. ``"paper (MNIST)"``; a cell is ``"—"`` where the paper gives none), and
      ``note`` names the data-set substitution.  The gallery prints it as a markdown table; the
      numbers come from the Dataset, which holds them as variables.
    - the Dataset's ``attrs["scaling"]`` states the scale-down against the paper (sizes, data set
      substitution, iterations); it is printed on the figure and copied into the record.
    - ``gate = {"met": bool, "measured": {...}}`` — the competence gate of ``Recipe.gate``
      measured on the data (``_stats.gate``); below it the verdict is *inconclusive*.
    - ``effect = {"name", "ours", "se", "n", "units", "paper"}`` — the headline effect ± SE over
      the ``n`` seeds (``_stats.effect``), the paper's number where it gives one.
    - ``seeds``: how many seeds (or independent networks) the verdict rests on.
    - ``parts`` (comparative claims): the ``_stats.comparison`` of every comparison the claim
      makes, each with the effect that matters, our SE and the seeds that would resolve it; they
      become the record's ``power`` and decide between *does not hold* and *underpowered*.

    ``run_recipe`` adds ``verdict`` (``_stats.decide``: holds / does not hold / inconclusive /
    underpowered) and keeps ``passed`` (= verdict is *holds*) for readers of the older records.
    """

    name: str
    source: str
    claim: str
    compute: Callable
    draw: Callable
    check: Callable
    trains: bool = False
    table: bool = False
    quote: str = ""
    gate: str = ""


class RecipeError(Exception):
    """A recipe broke the record contract (no control, too few seeds, no finding for a failed claim)."""


def check_record(recipe: "Recipe", rec: dict, quick: bool) -> None:
    """Raise RecipeError when the claim record ``rec`` breaks the contract of ``Recipe``."""
    problems = []
    c = rec.get("control")
    if not isinstance(c, dict) or not {"setting", "measured", "passed"} <= set(c):
        problems.append('no negative control ("control": {"setting", "measured", "passed"})')
    elif not isinstance(c["setting"], str) or not c["setting"].strip() or not isinstance(c["measured"], dict):
        problems.append("the control must name its setting and report its measured numbers")
    if recipe.trains:
        need = 3 if quick else 5
        seeds = rec.get("per_seed")
        if not isinstance(seeds, list) or len(seeds) < need:
            got = len(seeds) if isinstance(seeds, list) else "no"
            problems.append(f"a training claim needs per_seed with >= {need} seeds ({got} given)")
    if recipe.table:
        problems += _table_problems(rec.get("table"))
    if not rec["passed"] and not rec.get("control_passed") and not str(rec.get("finding") or "").strip():
        problems.append('a claim that does not hold needs a "finding" stating what was measured instead')
    problems += _verdict_problems(recipe, rec)
    if not str(rec.get("scaling") or "").strip():
        problems.append('the Dataset must state its scale-down against the paper in attrs["scaling"]')
    if problems:
        raise RecipeError(f"figure {recipe.name}: " + "; ".join(problems))


def _verdict_problems(recipe: "Recipe", rec: dict) -> list[str]:
    """What is missing for a verdict: the paper's words, the declared gate and its measurement, the
    headline effect ± SE, the seeds, a verdict among ``VERDICTS`` that agrees with ``passed``."""
    from ._stats import VERDICTS

    out = []
    if not str(recipe.quote or "").strip():
        out.append("the recipe must quote the paper's claim in the paper's words (Recipe.quote)")
    if not str(recipe.gate or "").strip():
        out.append("the recipe must declare its competence gate before it runs (Recipe.gate)")
    g = rec.get("gate")
    if not isinstance(g, dict) or not {"met", "measured"} <= set(g):
        out.append('the check must report the gate it measured ("gate": {"met", "measured"})')
    e = rec.get("effect")
    if not isinstance(e, dict) or not {"name", "ours", "se"} <= set(e):
        out.append('the check must report its headline effect ("effect": {"name", "ours", "se", ...})')
    if not isinstance(rec.get("seeds"), int) or rec.get("seeds", 0) < 1:
        out.append('the check must report how many seeds the verdict rests on ("seeds")')
    if rec.get("verdict") not in VERDICTS:
        out.append(f"the verdict must be one of {', '.join(VERDICTS)}, got {rec.get('verdict')!r}")
    elif (rec["verdict"] == "holds") != bool(rec["passed"]) and not rec.get("control_passed"):
        out.append("the verdict and passed disagree")
    return out


def _table_problems(t) -> list[str]:
    """What is wrong with a record's ``table`` (``Recipe`` contract); [] when it is well formed."""
    if not isinstance(t, dict) or not {"title", "columns", "rows", "note"} <= set(t):
        return ['a table recipe needs "table": {"title", "columns", "rows", "note"}']
    cols, rows = t["columns"], t["rows"]
    out = []
    if not isinstance(cols, list) or not cols or not all(isinstance(c, str) and c.strip() for c in cols):
        return ["the table's columns must be a non-empty list of names"]
    if not isinstance(rows, list) or not rows:
        out.append("the table has no rows")
    elif any(not isinstance(r, list) or len(r) != len(cols) for r in rows):
        out.append(f"every table row must have {len(cols)} cells (one per column)")
    elif any(not isinstance(c, (str, int, float)) or isinstance(c, bool) for r in rows for c in r):
        out.append("table cells must be numbers or strings")
    if not any(c.lower().startswith("paper") for c in cols):
        out.append('the table needs a column with the paper\'s number (its name starts with "paper")')
    if not str(t.get("note") or "").strip():
        out.append("the table's note must name the data-set substitution")
    return out


def _plain(value):
    """JSON-safe version of a measured number (numpy scalars → Python)."""
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def record_of(recipe: Recipe, result: dict, scaling: str = "") -> dict:
    """The claim record of a check's ``result`` (the ``Recipe`` contract): the verdict decided from
    the gate, the check and its comparative parts (``_stats.decide``), the power of each part, the
    finding of an inconclusive record prefixed with the gate's numbers."""
    from ._stats import decide

    measured = _plain(dict(result))
    passed = bool(measured.pop("passed"))
    # the negative control, the per-seed numbers, the finding, the gate… live in the record itself
    extra = {k: measured.pop(k) for k in ("control", "per_seed", "finding", "table", "gate", "effect", "seeds",
                                          "parts") if k in measured}
    parts = extra.pop("parts", None) or []
    rec = {"name": recipe.name, "source": recipe.source, "claim": recipe.claim, "quote": recipe.quote,
           "gate_level": recipe.gate, "passed": passed, "measured": measured, **extra, "scaling": str(scaling)}
    gate = rec.get("gate") if isinstance(rec.get("gate"), dict) else {"met": True}
    rec["verdict"] = decide(passed, bool(gate.get("met")), parts)
    if rec["verdict"] == "inconclusive":
        rec["passed"] = False
        nums = "; ".join(f"{k} {v}" for k, v in gate.get("measured", {}).items())
        rec["finding"] = (f"inconclusive at this scale: the competence gate ({recipe.gate}) was not met ({nums})"
                          + (f". {rec['finding']}" if rec.get("finding") else ""))
    if parts:
        rec["power"] = [{k: p.get(k) for k in ("name", "mean", "se", "n", "interest", "paper", "units",
                                                "seeds_needed", "verdict")} for p in parts]
    if isinstance(rec.get("control"), dict):
        rec["control"]["passed"] = bool(rec["control"].get("passed"))
        if rec["control"]["passed"]:
            rec["passed"] = False
            rec["control_passed"] = True
            rec["error"] = ("the negative control passes the same check "
                            f"({rec['control'].get('setting', '')}): the check does not discriminate")
    return rec


def run_recipe(recipe: Recipe, out_dir, *, quick: bool = False, fmt: str = "png") -> dict:
    """Compute, write ``NAME.nc``, draw ``NAME.<fmt>`` from the Dataset, check the claim.

    Returns the claim record (``record_of``: ``{"name", "source", "claim", "quote", "gate_level",
    "gate", "effect", "seeds", "verdict", "passed", "measured", "control", "scaling", "seconds",
    "quick"}`` plus ``per_seed``, ``power``, ``table`` and ``finding`` when the check reports
    them), and ``error`` when the negative control passed (then ``passed`` is False: a check
    that passes where the effect is absent proves nothing).  The data is written before
    drawing, so nothing computed is lost if drawing fails; a record that breaks the contract
    (``Recipe``) raises RecipeError after the data and picture are written.
    """
    from ..io import write_dataset
    from ..plot.style import save_figure

    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    ds = recipe.compute(quick)
    ds.attrs.setdefault("figure", recipe.name)
    ds.attrs["quick"] = int(bool(quick))
    write_dataset(ds, os.path.join(out_dir, f"{recipe.name}.nc"))
    rec = record_of(recipe, recipe.check(ds), ds.attrs.get("scaling", ""))
    fig = recipe.draw(ds)
    save_figure(fig, os.path.join(out_dir, f"{recipe.name}.{fmt}"))
    rec.update(seconds=round(time.perf_counter() - t0, 2), quick=bool(quick))
    check_record(recipe, rec, quick)
    return rec


def write_claims(records: list, out_dir) -> str:
    """Write ``claims.json`` into ``out_dir``; returns its path.

    Records of figures already in an existing ``claims.json`` but not among ``records`` are
    kept (so ``dynlab figures make A`` into a gallery updates A's record and loses no other);
    the file is written to a temporary name first and renamed, so it is never left half-written.
    """
    path = os.path.join(out_dir, "claims.json")
    merged = {}
    if os.path.exists(path):
        try:
            with open(path) as f:
                merged = {r["name"]: r for r in json.load(f) if isinstance(r, dict) and "name" in r}
        except (OSError, ValueError):
            merged = {}
    merged.update({r["name"]: r for r in records})
    rank = {n: i for i, n in enumerate(ORDER)}
    ordered = sorted(merged.values(), key=lambda r: (rank.get(r["name"], len(rank)), r["name"]))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ordered, f, indent=2, ensure_ascii=False)
    os.replace(tmp, path)
    return path

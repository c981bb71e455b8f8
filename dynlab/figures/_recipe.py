"""A figure recipe: compute a Dataset, draw from it alone, check the paper's claim on it."""
from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Callable

#: The order of the figure list (docs/design.md, *Figures*); recipes not listed here follow in name order (``recipes()``, claims.json).
ORDER = (
    "irnn-fig2-phase", "irnn-fig3-add", "irnn-fig4-copy", "irnn-fig6-convergence",
    "irnn-fig7-eigenvalues", "irnn-fig8-gradnorm", "maso-fig2-codes", "maso-fig3-templates",
    "maso-fig4-random-h0", "implicit-fig1-derivative", "implicit-fig2-xor",
    "implicit-fig6-oscillator", "rin-gradients", "flipflop-fixed-points",
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
    check    : ``check(ds) -> dict`` with ``passed`` (bool) and the measured numbers
    """

    name: str
    source: str
    claim: str
    compute: Callable
    draw: Callable
    check: Callable


def _plain(value):
    """JSON-safe version of a measured number (numpy scalars → Python)."""
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def run_recipe(recipe: Recipe, out_dir, *, quick: bool = False, fmt: str = "png") -> dict:
    """Compute, write ``NAME.nc``, draw ``NAME.<fmt>`` from the Dataset, check the claim.

    Returns the claim record ``{"name", "source", "claim", "passed", "measured", "seconds",
    "quick"}`` (plus ``per_seed`` and ``control`` when the check reports them); the data is written before drawing, so nothing computed is lost if drawing fails.
    """
    from ..io import write_dataset
    from ..plot.style import save_figure

    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    ds = recipe.compute(quick)
    ds.attrs.setdefault("figure", recipe.name)
    ds.attrs["quick"] = int(bool(quick))
    write_dataset(ds, os.path.join(out_dir, f"{recipe.name}.nc"))
    measured = _plain(dict(recipe.check(ds)))
    passed = bool(measured.pop("passed"))
    # a claim checked on several seeds and against a negative control keeps those in the record
    # itself: "per_seed" (seed → measured numbers) and "control" ({"setting", "measured", "passed"},
    # the same check on data where it must fail)
    extra = {k: measured.pop(k) for k in ("per_seed", "control") if k in measured}
    fig = recipe.draw(ds)
    save_figure(fig, os.path.join(out_dir, f"{recipe.name}.{fmt}"))
    return {"name": recipe.name, "source": recipe.source, "claim": recipe.claim, "passed": passed,
            "measured": measured, **extra, "seconds": round(time.perf_counter() - t0, 2), "quick": bool(quick)}


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

"""The paper figures (docs/design.md, *Figures*): one recipe module per figure, found by name.

Each module ``dynlab/figures/<name with _ for ->.py`` defines ``RECIPE = Recipe(...)``:

- ``compute(quick: bool) -> xarray.Dataset`` builds the figure's data with the public API;
- ``draw(ds) -> matplotlib.figure.Figure`` draws it from that Dataset alone (so a figure can be
  redrawn from its saved NetCDF without recomputation);
- ``check(ds) -> dict`` states the claim as a check on the data: ``{"passed": bool, ...}`` with
  the measured numbers (plain floats/ints/strings) that decide it.

``recipes()`` returns every recipe in ``ORDER`` (the order of docs/design.md, *Figures*); ``get(name)`` one of them.
"""
from __future__ import annotations

import importlib
import pkgutil

from ._recipe import ORDER, Recipe, run_recipe


def _module_names():
    return [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]


def recipes() -> dict:
    """name → Recipe for every recipe module present, in ``ORDER``."""
    found = {}
    for mod in _module_names():
        r = importlib.import_module(f"{__name__}.{mod}").RECIPE
        found[r.name] = r
    rank = {n: i for i, n in enumerate(ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def get(name: str) -> Recipe:
    """The recipe called ``name``; a ParameterError on ``name`` listing the known ones."""
    from ..errors import ParameterError

    mod = name.replace("-", "_")
    if mod not in _module_names():
        raise ParameterError("name", f"unknown figure {name!r}; choose from {', '.join(recipes())}")
    return importlib.import_module(f"{__name__}.{mod}").RECIPE


__all__ = ["ORDER", "Recipe", "get", "recipes", "run_recipe"]

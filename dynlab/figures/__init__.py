"""The paper figures (docs/design.md, *Figures*): one recipe module per figure, grouped by paper.

The recipes live in one subpackage per paper — ``irnn/``, ``maso/``, ``implicit/`` — and ``beyond/``
(the RIN note and the flip-flop items), with the helpers each paper's recipes share beside them
(``irnn/_training.py``, ``maso/_training.py``, …).  A module's name is the figure's name without
its paper's prefix, ``_`` for ``-``: ``irnn-fig7-eigenvalues`` is ``dynlab.figures.irnn.fig7_eigenvalues``
(``PACKAGES`` gives each subpackage's prefix).  Each module defines ``RECIPE = Recipe(...)``:

- ``compute(scale) -> xarray.Dataset`` builds the figure's data with the public API;
- ``draw(ds)`` draws its axes from that Dataset alone (so a figure can be redrawn from its saved
  NetCDF without recomputation); the ``Recipe`` adds the style and the title line;
- ``check(ds) -> dict`` states the claim as a check on the data: ``{"passed": bool, ...}`` with
  the measured numbers (plain floats/ints/strings) that decide it.

``recipes()`` returns every recipe in ``ORDER`` (the order of docs/design.md, *Figures*); ``get(name)`` one of them.

The flat module paths of before (``dynlab.figures.irnn_fig7_eigenvalues``, the helpers'
``dynlab.figures._irnn_training``…) still import, with a DeprecationWarning naming the new path;
they will be removed in dynlab ``REMOVED_IN`` (``dynlab._deprecate``: the release every deprecated
path goes in).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import pkgutil
import sys

from .. import _deprecate
from ._recipe import ORDER, Recipe, run_recipe

#: subpackage → the prefix its figures' names carry (``beyond``'s names carry none)
PACKAGES = {"irnn": "irnn-", "maso": "maso-", "implicit": "implicit-", "beyond": ""}
#: the helpers' old flat modules → their homes beside their recipes
_MOVED_HELPERS = {"_irnn_digits": "irnn._digits", "_irnn_parta": "irnn._parta", "_irnn_tables": "irnn._tables",
                  "_irnn_training": "irnn._training", "_maso_tables": "maso._tables",
                  "_maso_training": "maso._training"}
#: the release in which the flat module paths (``dynlab.figures.irnn_fig7_eigenvalues``) go
REMOVED_IN = _deprecate.REMOVED_IN


def _modules() -> dict:
    """Figure name → its module's full name, for every recipe module present (nothing imported)."""
    out = {}
    for pkg, prefix in PACKAGES.items():
        path = [os.path.join(p, pkg) for p in __path__]
        for m in pkgutil.iter_modules(path):
            if not m.name.startswith("_"):
                out[prefix + m.name.replace("_", "-")] = f"{__name__}.{pkg}.{m.name}"
    return out


def recipes() -> dict:
    """name → Recipe for every recipe module present, in ``ORDER``."""
    found = {}
    for mod in _modules().values():
        r = importlib.import_module(mod).RECIPE
        found[r.name] = r
    rank = {n: i for i, n in enumerate(ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def get(name: str) -> Recipe:
    """The recipe called ``name``; a ParameterError on ``name`` listing the known ones."""
    from ..errors import ParameterError

    mods = _modules()
    if name not in mods:
        raise ParameterError("name", f"unknown figure {name!r}; choose from {', '.join(recipes())}")
    return importlib.import_module(mods[name]).RECIPE


def moved() -> dict:
    """Old flat module name (``irnn_fig7_eigenvalues``, ``_irnn_training``) → its new full name."""
    out = {name.replace("-", "_"): mod for name, mod in _modules().items()}
    out.update({old: f"{__name__}.{new}" for old, new in _MOVED_HELPERS.items()})
    return out


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import dynlab.figures.<old flat name>`` (and ``from dynlab.figures import <old>``): the
    module at its new path, with a DeprecationWarning naming it."""

    def find_spec(self, fullname, path=None, target=None):
        parent, _, old = fullname.rpartition(".")
        if parent != __name__ or old not in moved():
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        import warnings

        old = module.__name__.rpartition(".")[2]
        new = moved()[old]
        # stacklevel 2: the importing line (warnings passes over importlib's own frames)
        warnings.warn(f"{module.__name__} is now {new} (the flat path is deprecated and will be removed in "
                      f"dynlab {REMOVED_IN})", DeprecationWarning, stacklevel=2)
        # the import system returns what sys.modules holds under the old name after this: the new module
        sys.modules[module.__name__] = importlib.import_module(new)


if not any(type(f).__name__ == "_MovedFinder" and getattr(f, "package", None) == __name__ for f in sys.meta_path):
    _finder = _MovedFinder()
    _finder.package = __name__
    sys.meta_path.append(_finder)


__all__ = ["ORDER", "PACKAGES", "Recipe", "get", "recipes", "run_recipe"]

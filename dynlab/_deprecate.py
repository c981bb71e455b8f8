"""One way to say that a name moved: a ``DeprecationWarning`` naming the new home and the release
that removes the old one (``REMOVED_IN``).  The shims that use it — ``dynlab.runs``, the moved
names of ``dynlab.analysis.partition``, … — list what they still hand on.

This module imports only the standard library.
"""
from __future__ import annotations

import importlib
import warnings

#: The release that removes every deprecated path (two minor releases after 0.1, where they moved).
REMOVED_IN = "0.3"


def moved(old: str, new: str, *, stacklevel: int = 3, note: str = ""):
    """Warn that ``old`` (a dotted path) is now ``new`` and return the object at ``new``
    (``module.name`` or a module)."""
    warnings.warn(f"{old} is now {new}{note}; the old path is deprecated and will be removed in dynlab {REMOVED_IN}",
                  DeprecationWarning, stacklevel=stacklevel)
    module, _, name = new.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (AttributeError, ModuleNotFoundError):
        return importlib.import_module(new)


__all__ = ["REMOVED_IN", "moved"]

"""Deprecated: the command layer is ``dynlab.commands`` (what each ``dynlab`` command computes).

``dynlab.runs.NAME`` (a function such as ``phase_dataset``, or a submodule such as ``stability``)
resolves to ``dynlab.commands.NAME`` with a ``DeprecationWarning``; it will be removed in dynlab 0.3
(``dynlab._deprecate.REMOVED_IN``).  Nothing in dynlab imports this module.
"""
from __future__ import annotations


def __getattr__(name):
    from ._deprecate import moved

    if name.startswith("__"):
        raise AttributeError(name)
    return moved(f"dynlab.runs.{name}", f"dynlab.commands.{name}", note=" (dynlab.runs is deprecated)")

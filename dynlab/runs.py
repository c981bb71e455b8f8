"""Deprecated: the command layer is ``dynlab.commands`` (what each ``dynlab`` command computes).

``dynlab.runs.NAME`` (a function such as ``phase_dataset``, or a submodule such as ``stability``)
resolves to ``dynlab.commands.NAME`` with a ``DeprecationWarning``; it will be removed in a later
release.  Nothing in dynlab imports this module.
"""
from __future__ import annotations


def __getattr__(name):
    import importlib
    import warnings

    if name.startswith("__"):
        raise AttributeError(name)
    warnings.warn(f"dynlab.runs.{name} is now dynlab.commands.{name} (dynlab.runs is deprecated)",
                  DeprecationWarning, stacklevel=2)
    commands = importlib.import_module("dynlab.commands")
    try:
        return getattr(commands, name)
    except AttributeError:
        return importlib.import_module(f"dynlab.commands.{name}")

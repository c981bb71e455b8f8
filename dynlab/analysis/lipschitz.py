"""Deprecated path: the Lipschitz bounds of the gated step Jacobians are ``dynlab.models.lipschitz``
(the fixed-point maps of the forms certify with them); ``dynlab.analysis.lipschitz.NAME`` reaches
them with a DeprecationWarning until dynlab 0.3 (``dynlab._deprecate``)."""
from __future__ import annotations


def __getattr__(name):
    from .._deprecate import moved

    if name.startswith("__"):
        raise AttributeError(name)
    return moved(f"dynlab.analysis.lipschitz.{name}", f"dynlab.models.lipschitz.{name}")

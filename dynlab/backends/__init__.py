"""Backends: where the kernels run, one object per backend, registered by name.

A backend is a ``dynlab.backends.base.Backend``: a small set of operations on kernel forms
(``dynlab.models.forms``) — simulate, step Jacobians, the backward products and norms of the
gradient flow, the QR steps of Lyapunov spectra, forward tangents for sweeps, partition codes,
training passes — each backend choosing its own paths and thresholds, in one place.  A public
function resolves the backend once (``get_backend``) and runs inside it (``with backend:``, the
backend's execution policy: the numba backend's BLAS threads, say); analyses never branch on a
backend's name.

=========  ==========================================  ===================================
name       what                                        where
=========  ==========================================  ===================================
numpy      the reference: plain, obviously-correct      ``dynlab.backends.reference``
           NumPy loops every other backend is tested
           against
numba      the CPU default: jitted loops, BLAS, the     ``dynlab.backends.numba``
           CPU-specific paths
cupy       a GPU: CuPy arrays and fused kernels that    ``dynlab.backends.gpu``
           keep the time loop on the device
=========  ==========================================  ===================================

``register_backend(name, "module:Class")`` adds one (imported on first use, like xarray's
engines); ``available_backends()`` says which import here.
"""
from __future__ import annotations

import importlib
import threading

import numpy as np

from .. import config
from ..errors import ParameterError

#: name → "module:attribute" of the Backend class (imported on first use).
_REGISTRY = {
    "numpy": "dynlab.backends.reference:ReferenceBackend",
    "numba": "dynlab.backends.numba:NumbaBackend",
    "cupy": "dynlab.backends.gpu:GPUBackend",
}
#: Other names a user may type for a registered backend.
ALIASES = {"gpu": "cupy", "reference": "numpy", "cpu": "numba"}
#: The registered names, in the order they are listed to users.
BACKENDS = tuple(_REGISTRY)

_INSTANCES: dict = {}
_LOCK = threading.Lock()


def register_backend(name: str, target: str) -> None:
    """Register a backend class under ``name``: ``target`` is "module:Class" (imported lazily)."""
    global BACKENDS
    _REGISTRY[str(name).lower()] = target
    BACKENDS = tuple(_REGISTRY)


def _name(backend) -> str:
    name = config.DEFAULT_BACKEND if backend is None else str(backend).strip().lower()
    name = ALIASES.get(name, name)
    if name not in _REGISTRY:
        raise ParameterError("backend", f"unknown backend {backend!r}; choose from {', '.join(_REGISTRY)}")
    return name


def get_backend(backend=None):
    """The backend object for ``backend`` (a name, None for ``config.DEFAULT_BACKEND``, or a
    Backend, returned as it is).  Fails with a ParameterError naming ``backend`` when it is
    unknown or cannot run here (no CuPy, no GPU): before any work."""
    from .base import Backend

    if isinstance(backend, Backend):
        return backend
    name = _name(backend)
    inst = _INSTANCES.get(name)
    if inst is None:
        with _LOCK:
            inst = _INSTANCES.get(name)
            if inst is None:
                module, _, attr = _REGISTRY[name].partition(":")
                try:
                    cls = getattr(importlib.import_module(module), attr)
                except ImportError as exc:
                    raise ParameterError("backend", f"{name} cannot be loaded here ({exc})") from None
                inst = cls()
                _INSTANCES[name] = inst
    inst.check_available()
    return inst


def resolve_backend(backend) -> str:
    """The validated name of a backend (``get_backend(backend).name``)."""
    return get_backend(backend).name


def available_backends() -> tuple:
    """The registered backends that can run on this machine now."""
    out = []
    for name in _REGISTRY:
        try:
            get_backend(name)
        except ParameterError:
            continue
        out.append(name)
    return tuple(out)


def to_numpy(a):
    """A NumPy array from any backend's array (CuPy's ``.get()``)."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


__all__ = ["BACKENDS", "ALIASES", "get_backend", "resolve_backend", "register_backend", "available_backends",
           "to_numpy"]

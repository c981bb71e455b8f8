"""Backend resolution: decided once, at the top of a public function."""
from __future__ import annotations

import numpy as np

from . import config
from .errors import ParameterError

BACKENDS = ("numpy", "numba", "cupy")


def resolve_backend(backend: str | None) -> str:
    """The backend name to use; ``None`` means ``config.DEFAULT_BACKEND`` (numba)."""
    name = config.DEFAULT_BACKEND if backend is None else str(backend).strip().lower()
    if name not in BACKENDS:
        raise ParameterError("backend", f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if name == "cupy":
        cupy_namespace()  # fails clearly here, before any work
    return name


def cupy_namespace():
    """Import CuPy and check a GPU is present, or raise a ParameterError naming ``backend``."""
    try:
        import cupy
    except ImportError:
        raise ParameterError("backend", "cupy is not installed (pip install 'dynlab[gpu]')") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device
        raise ParameterError("backend", f"cupy found no usable GPU ({type(exc).__name__}: {exc})") from None
    if n < 1:
        raise ParameterError("backend", "cupy found no GPU")
    return cupy


def namespace(backend: str):
    """The array namespace of a backend (NumPy for numpy and numba)."""
    return cupy_namespace() if backend == "cupy" else np


def to_numpy(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)

"""Launching Numba ``parallel=True`` kernels safely from several threads.

Numba's ``workqueue`` threading layer (its fallback when neither OpenMP nor TBB is present)
aborts the process when two threads launch parallel kernels at once — as Dask workers with
threads, or a user's thread pool, may.  ``launch(kernel, *args)`` serialises the launches until
the first one has shown which layer is in use, and for good when it is ``workqueue``; with
``omp`` or ``tbb`` it calls the kernel directly.
"""
from __future__ import annotations

import threading

_LOCK = threading.Lock()
_THREADSAFE = None  # whether numba's threading layer takes concurrent launches (omp, tbb)


def launch(kernel, *args):
    """``kernel(*args)`` for a Numba parallel kernel, made safe to call from several threads."""
    global _THREADSAFE
    if _THREADSAFE:
        return kernel(*args)
    with _LOCK:
        out = kernel(*args)
        if _THREADSAFE is None:
            import numba

            _THREADSAFE = numba.threading_layer() in ("omp", "tbb")
        return out


__all__ = ["launch"]

"""BLAS thread limits for loops of small products.

Threaded BLAS synchronises its threads at every call; for loops of small and medium products
(D ≤ a few hundred) on a 2-core machine that synchronisation costs more than the second thread
gains, and when a core is busy each call can wait for a scheduler time slice (measured: the
implicit-network ``equilibria`` workload 170 ms with 2 BLAS threads vs 8 ms with 1; the
``gradnorm`` Gram-matrix norms 12 ms vs 0.35 ms per 128×128 matrix).  ``limit_blas_threads(n)``
runs a block with n BLAS threads through threadpoolctl (a dependency); None, or threadpoolctl
finding no BLAS, leaves the threads alone.
"""
from __future__ import annotations

import contextlib

_CONTROLLER = []


def limit_blas_threads(n: int | None):
    """A context manager running BLAS on ``n`` threads (None: a no-op)."""
    if n is None:
        return contextlib.nullcontext()
    if not _CONTROLLER:
        try:
            # scipy's BLAS (the one Numba's np.dot and scipy.linalg call) must be loaded before
            # the controller is built, or the limit would miss it
            import scipy.linalg.cython_blas  # noqa: F401
            from threadpoolctl import ThreadpoolController
            _CONTROLLER.append(ThreadpoolController())
        except Exception:  # not installed, or no BLAS found: leave the threads alone
            _CONTROLLER.append(None)
    ctl = _CONTROLLER[0]
    return contextlib.nullcontext() if ctl is None else ctl.limit(limits=int(n), user_api="blas")

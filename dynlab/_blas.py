"""BLAS thread limits for loops of small products.

Threaded BLAS synchronises its threads at every call; for loops of small and medium products
(D ≤ a few hundred) on a 2-core machine that synchronisation costs more than the second thread
gains, and when a core is busy each call can wait for a scheduler time slice (measured: the
implicit-network ``equilibria`` workload 170 ms with 2 BLAS threads vs 8 ms with 1; the
``gradnorm`` Gram-matrix norms 12 ms vs 0.35 ms per 128×128 matrix; one training step
(``train-step``) 23.6 s vs 1.25 s with the other core busy).  ``limit_blas_threads(n)`` runs a
block with n BLAS threads through threadpoolctl (a dependency); None, or threadpoolctl finding
no BLAS, leaves the threads alone.

``blas_threads("FAMILY_BLAS_THREADS")`` decorates a public function: each call runs under the
limit that ``dynlab.config`` names (read at call time, so the tunable can be changed while a
program runs), set once for the whole call, not per product.  Limits nest: a call inside a
block that already holds the same limit costs a counter increment (≈1 µs; setting a limit
through threadpoolctl costs ≈12 µs), and the threads come back when the outermost block ends,
also when several Python threads share the limit (a Dask sweep on threads).  A different limit
inside (e.g. the one-thread blocks that Numba's parallel regions need) is set and restored
on its own.
"""
from __future__ import annotations

import contextlib
import functools
import threading

from . import config

_CONTROLLER = []
_LOCK = threading.Lock()
#: The shared limit in force: its thread count, how many blocks hold it, threadpoolctl's limiter.
_HELD = {"n": None, "count": 0, "limiter": None}


def _controller():
    if not _CONTROLLER:
        try:
            # scipy's BLAS (the one Numba's np.dot and scipy.linalg call) must be loaded before
            # the controller is built, or the limit would miss it
            import scipy.linalg.cython_blas  # noqa: F401
            from threadpoolctl import ThreadpoolController
            ctl = ThreadpoolController()
            _CONTROLLER.append(ctl)
            # OpenBLAS on OpenMP keeps one limit per thread: nothing to share between threads
            _CONTROLLER.append(any(getattr(lib, "threading_layer", "") == "openmp"
                                   for lib in ctl.lib_controllers if lib.user_api == "blas"))
        except Exception:  # not installed, or no BLAS found: leave the threads alone
            _CONTROLLER[:] = [None, False]
    return _CONTROLLER[0]


def _release_control():
    """threadpoolctl (≥ 3.6) lets only one Python thread at a time set OpenBLAS's process-wide
    limit — the last that set it, until its ``with`` block ends — and silently ignores the
    others.  The shared limit here is set by the first block to enter and given back by the
    last to leave, possibly another thread, so each change is made with no thread in control."""
    try:
        from threadpoolctl import OpenBLASController
    except ImportError:  # older threadpoolctl: any thread may set the limit
        return
    OpenBLASController.clear_controlling_thread(force=True)


class _Limit:
    """A block with BLAS on ``n`` threads (see the module docstring for nesting)."""

    __slots__ = ("ctl", "n", "own")

    def __init__(self, ctl, n: int):
        self.ctl, self.n, self.own = ctl, n, None

    def __enter__(self):
        if _CONTROLLER[1]:  # per-thread limits: this thread's own, nested as threadpoolctl nests
            self.own = self.ctl.limit(limits=self.n, user_api="blas").__enter__()
            return self
        with _LOCK:
            if _HELD["count"] and _HELD["n"] == self.n:
                _HELD["count"] += 1
                return self
            _release_control()
            limiter = self.ctl.limit(limits=self.n, user_api="blas")
            _release_control()
            if _HELD["count"]:  # a different limit inside the shared one: its own, restored on exit
                self.own = limiter
            else:
                _HELD.update(n=self.n, count=1, limiter=limiter)
        return self

    def __exit__(self, *exc):
        if _CONTROLLER[1]:
            self.own.__exit__(None, None, None)
            self.own = None
            return False
        with _LOCK:
            if self.own is not None:
                limiter, self.own = self.own, None
            else:
                _HELD["count"] -= 1
                if _HELD["count"]:
                    return False
                limiter = _HELD["limiter"]
                _HELD.update(n=None, limiter=None)
            _release_control()
            limiter.restore_original_limits()
            _release_control()
        return False


_SMALL = {}


def small_gemm() -> bool:
    """Whether the jitted loops split their products for a small-matrix path
    (``config.BLAS_SMALL_GEMM``; None: every BLAS threadpoolctl finds is OpenBLAS with one of
    ``config.SMALL_GEMM_ARCHITECTURES``, decided once per process)."""
    if config.BLAS_SMALL_GEMM is not None:
        return bool(config.BLAS_SMALL_GEMM)
    if "auto" not in _SMALL:
        ctl = _controller()
        libs = [] if ctl is None else [lib for lib in ctl.lib_controllers if lib.user_api == "blas"]
        _SMALL["auto"] = has_small_path([(lib.internal_api, getattr(lib, "architecture", None)) for lib in libs])
    return _SMALL["auto"]


def has_small_path(libs) -> bool:
    """Whether every BLAS of ``libs``, (internal API, architecture) pairs as threadpoolctl
    reports them, is OpenBLAS with one of ``config.SMALL_GEMM_ARCHITECTURES`` (and there is one)."""
    return bool(libs) and all(api == "openblas" and str(arch or "").lower() in config.SMALL_GEMM_ARCHITECTURES
                              for api, arch in libs)


def blas_thread_count() -> int | None:
    """How many threads BLAS would use now in this thread (the fewest over the loaded BLAS
    libraries: 1 inside a family limited to one thread, or where the user set
    OPENBLAS_NUM_THREADS=1); None when threadpoolctl finds no BLAS.  ≈ 2 µs."""
    ctl = _controller()
    if ctl is None:
        return None
    counts = [lib.num_threads for lib in ctl.lib_controllers if lib.user_api == "blas"]
    return min(counts) if counts else None


def limit_blas_threads(n: int | None):
    """A context manager running BLAS on ``n`` threads (None: a no-op)."""
    if n is None:
        return contextlib.nullcontext()
    ctl = _controller()
    return contextlib.nullcontext() if ctl is None else _Limit(ctl, int(n))


def blas_threads(setting: str):
    """Decorator: every call of the function runs with BLAS on ``dynlab.config.<setting>``
    threads (None: BLAS's own choice), read at call time."""
    def decorate(fn):
        @functools.wraps(fn)
        def limited(*args, **kwargs):
            with limit_blas_threads(getattr(config, setting)):
                return fn(*args, **kwargs)

        limited.blas_threads_setting = setting
        return limited

    return decorate


# ============================================================================ dynlab's own threads
_SERIAL = threading.local()


def cpu_count() -> int:
    """The CPUs this process may use (its affinity mask where the OS has one)."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def work_threads(setting: int | None) -> int:
    """How many threads one of dynlab's own splits of independent work may use (blocks of
    sequences, of time steps): ``setting`` (a ``config.*_THREADS`` value), or None for one per
    CPU this process may use; 1 inside ``serial()`` — a sweep region, whose workers are already
    one per core."""
    if getattr(_SERIAL, "depth", 0):
        return 1
    return max(1, int(setting) if setting is not None else cpu_count())


@contextlib.contextmanager
def serial():
    """A block (in this thread) in which dynlab splits no work between threads of its own."""
    _SERIAL.depth = getattr(_SERIAL, "depth", 0) + 1
    try:
        yield
    finally:
        _SERIAL.depth -= 1


_POOL = {"size": 0, "pool": None}
_POOL_LOCK = threading.Lock()


def _pool(n: int):
    """dynlab's worker threads (a pool that only grows)."""
    from concurrent.futures import ThreadPoolExecutor

    with _POOL_LOCK:
        if _POOL["size"] < n:
            _POOL.update(size=n, pool=ThreadPoolExecutor(max_workers=n, thread_name_prefix="dynlab-batch"))
        return _POOL["pool"]


def in_threads(fn, n: int) -> list:
    """[fn(0), …, fn(n − 1)] on n threads at once — fn(0) on the calling thread, the others on
    dynlab's pool — each with BLAS on one thread.  For independent pieces of work whose loops
    release the GIL (numba calls, BLAS): nothing waits for anything until all have finished.
    Every piece is waited for before the first exception (in piece order) is raised."""
    def run(i):
        with limit_blas_threads(1):
            return fn(i)

    futures = [_pool(n - 1).submit(run, i) for i in range(1, n)] if n > 1 else []
    out = [None] * n
    error = None
    try:
        out[0] = run(0)
    except BaseException as exc:  # raised below, once the other pieces have stopped
        error = exc
    for i, f in enumerate(futures, start=1):
        try:
            out[i] = f.result()
        except BaseException as exc:
            error = exc if error is None else error
    if error is not None:
        raise error
    return out

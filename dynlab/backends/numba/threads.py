"""BLAS thread limits for loops of small products.

Threaded BLAS synchronises its threads at every call; for loops of small and medium products
(D ≤ a few hundred) that synchronisation costs more than the second thread gains, and when a
core is busy each call can wait for a scheduler time slice (BENCHMARKS.md, ``blas-threads``).
``limit_blas_threads(n)`` runs a block with n BLAS threads; None, or threadpoolctl finding no
BLAS, leaves the threads alone.

The numba backend holds ``config.NUMBA_BLAS_THREADS`` for each public call (``with backend:``),
set once for the whole call, not per product.

Only threadpoolctl's public interface is used (``ThreadpoolController.info`` and ``.limit``).
How a limit is shared between Python threads depends on the release, and is decided once:

* threadpoolctl ≥ 3.8 lets one Python thread at a time change OpenBLAS's process-wide
  (pthreads) limit and silently ignores the others, so a limit is always set and given back
  **by the thread that holds it**; limits nest per thread (a block asking for the limit its
  thread already holds sets nothing; a different one inside is set and restored on its
  own).  The same holds wherever BLAS keeps one limit per thread (OpenMP).
* threadpoolctl < 3.8 lets any thread change the process-wide limit, so the threads that hold
  the same limit share it: the first to enter sets it, the last to leave gives it back (a
  thread leaving early does not take the limit from one still computing).

dynlab's own parallel sections (``in_threads``) hold their limit in the thread that starts them,
and their workers set none of their own (with per-thread limits, each sets its own), so they run
under it with every release.
"""
from __future__ import annotations

import contextlib
import threading

from ... import config

#: [controller or None, limits per thread (OpenMP), threads share one process-wide limit (< 3.8)]
_CONTROLLER = []
#: The limit each thread holds now (None: none of dynlab's).
_LOCAL = threading.local()
#: Shared mode (threadpoolctl < 3.8): the limit in force, how many blocks hold it, its limiter.
_LOCK = threading.Lock()
_HELD = {"n": None, "count": 0, "limiter": None}


def _release(version: str) -> tuple:
    try:
        return tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return (0, 0)


def _controller():
    if not _CONTROLLER:
        try:
            # scipy's BLAS (the one Numba's np.dot and scipy.linalg call) must be loaded before
            # the controller is built, or the limit would miss it
            import scipy.linalg.cython_blas  # noqa: F401
            import threadpoolctl
            from threadpoolctl import ThreadpoolController
            ctl = ThreadpoolController()
            blas = [lib for lib in ctl.info() if lib.get("user_api") == "blas"]
            per_thread = any(lib.get("threading_layer") == "openmp" for lib in blas)
            shared = not per_thread and _release(getattr(threadpoolctl, "__version__", "0")) < (3, 8)
            _CONTROLLER[:] = [ctl if blas else None, per_thread, shared]
        except Exception:  # not installed, or no BLAS found: leave the threads alone
            _CONTROLLER[:] = [None, False, False]
    return _CONTROLLER[0]


def _blas_info() -> list[dict]:
    """threadpoolctl's report of the loaded BLAS libraries, read now (num_threads changes)."""
    ctl = _controller()
    return [] if ctl is None else [lib for lib in ctl.info() if lib.get("user_api") == "blas"]


class _Limit:
    """A block with BLAS on ``n`` threads (the module docstring says who sets and restores it)."""

    __slots__ = ("ctl", "n", "limiter", "outer", "shared")

    def __init__(self, ctl, n: int):
        self.ctl, self.n, self.limiter, self.outer, self.shared = ctl, n, None, None, False

    def __enter__(self):
        self.outer = getattr(_LOCAL, "n", None)
        if self.outer == self.n:
            return self
        _LOCAL.n = self.n
        if _CONTROLLER[2]:
            with _LOCK:
                if _HELD["count"] and _HELD["n"] == self.n:
                    _HELD["count"] += 1
                    self.shared = True
                    return self
                limiter = self.ctl.limit(limits=self.n, user_api="blas")
                if _HELD["count"]:  # a different limit inside the shared one: its own, restored on exit
                    self.limiter = limiter
                else:
                    _HELD.update(n=self.n, count=1, limiter=limiter)
                    self.shared = True
            return self
        self.limiter = self.ctl.limit(limits=self.n, user_api="blas")
        self.limiter.__enter__()
        return self

    def __exit__(self, *exc):
        if self.outer == self.n and self.limiter is None and not self.shared:
            return False
        _LOCAL.n = self.outer
        if _CONTROLLER[2]:
            with _LOCK:
                if self.limiter is not None:
                    limiter, self.limiter = self.limiter, None
                else:
                    self.shared = False
                    _HELD["count"] -= 1
                    if _HELD["count"]:
                        return False
                    limiter = _HELD["limiter"]
                    _HELD.update(n=None, limiter=None)
                limiter.restore_original_limits()
            return False
        limiter, self.limiter = self.limiter, None
        limiter.__exit__(None, None, None)
        return False


_SMALL = {}


def small_gemm() -> bool:
    """Whether the jitted loops split their products for a small-matrix path
    (``config.BLAS_SMALL_GEMM``; None: every BLAS threadpoolctl finds is OpenBLAS with one of
    ``config.SMALL_GEMM_ARCHITECTURES``, decided once per process)."""
    if config.BLAS_SMALL_GEMM is not None:
        return bool(config.BLAS_SMALL_GEMM)
    if "auto" not in _SMALL:
        _SMALL["auto"] = has_small_path([(lib.get("internal_api"), lib.get("architecture")) for lib in _blas_info()])
    return _SMALL["auto"]


def has_small_path(libs) -> bool:
    """Whether every BLAS of ``libs``, (internal API, architecture) pairs as threadpoolctl
    reports them, is OpenBLAS with one of ``config.SMALL_GEMM_ARCHITECTURES`` (and there is one)."""
    return bool(libs) and all(api == "openblas" and str(arch or "").lower() in config.SMALL_GEMM_ARCHITECTURES
                              for api, arch in libs)


def blas_thread_count() -> int | None:
    """How many threads BLAS would use now in this thread (the fewest over the loaded BLAS
    libraries: 1 inside a family limited to one thread, or where the user set
    OPENBLAS_NUM_THREADS=1); None when threadpoolctl finds no BLAS."""
    counts = [lib["num_threads"] for lib in _blas_info() if lib.get("num_threads") is not None]
    return min(counts) if counts else None


def limit_blas_threads(n: int | None):
    """A context manager running BLAS on ``n`` threads (None: a no-op)."""
    if n is None:
        return contextlib.nullcontext()
    ctl = _controller()
    return contextlib.nullcontext() if ctl is None else _Limit(ctl, int(n))


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
    dynlab's pool — with BLAS on one thread.  For independent pieces of work whose loops
    release the GIL (numba calls, BLAS): nothing waits for anything until all have finished.
    Every piece is waited for before the first exception (in piece order) is raised.

    The calling thread holds the one-thread limit for the whole section; the workers set none
    (module docstring) unless BLAS keeps per-thread limits (OpenMP), where each sets its own."""
    per_thread = bool(_controller() is not None and _CONTROLLER[1])

    def run(i):
        if per_thread:
            with limit_blas_threads(1):
                return fn(i)
        return fn(i)

    with limit_blas_threads(1):
        return _run_all(run, n)


def _run_all(run, n: int) -> list:
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

"""Where the GPU backend's arrays live and whether its kernels can run here (one place).

``runtime()`` answers once per process, in this order:

1. ``numba.cuda`` must import (the ``numba-cuda`` package; Numba's own ``numba.cuda`` below
   0.60).  Under NumPy ≥ 2.5 the CUDA target of numba-cuda ≤ 0.30.4 registers an overload of
   ``np.row_stack``, which NumPy 2.5 removed, and fails on its first compilation; the shim
   ``numpy_row_stack_shim`` restores the name as what it always was, ``numpy.vstack`` (NumPy 2.0
   deprecated the alias, 2.5 removed it), before the CUDA target loads — and only then: the
   simulator never compiles, so it needs no shim.
2. Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` when ``numba`` was first imported;
   ``numba.config.ENABLE_CUDASIM``): the kernels run as Python on NumPy arrays, one Python
   thread per CUDA thread, with no GPU and no CuPy.  ``xp`` is NumPy.
3. Otherwise a real device: ``numba.cuda.is_available()`` and CuPy must import; ``xp`` is CuPy
   (its memory pool holds every array; the kernels read CuPy arrays through
   ``__cuda_array_interface__``, and both launch on the legacy default stream, so a CuPy GEMM
   and the kernel after it are ordered without an explicit synchronisation).

Whatever is missing becomes one ``ParameterError`` naming ``backend`` with the reason, raised by
``GPUBackend.check_available`` before any work.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What the GPU backend runs on: ``simulator`` (bool), ``xp`` (numpy or cupy), ``cuda``
    (numba.cuda), ``problem`` (None, or why it cannot run), ``device`` (a one-line name)."""

    simulator: bool
    xp: object
    cuda: object
    problem: str | None
    device: str


def numpy_row_stack_shim() -> bool:
    """Give NumPy back ``row_stack`` (= ``vstack``) where it was removed (NumPy ≥ 2.5), so that
    numba-cuda's CUDA target can load; True when the name had to be restored."""
    if hasattr(np, "row_stack"):
        return False
    np.row_stack = np.vstack
    return True


@functools.lru_cache(maxsize=1)
def runtime() -> Runtime:
    """The GPU backend's runtime (module docstring), decided once per process."""
    try:
        import numba
        from numba import cuda
    except Exception as exc:  # numba-cuda missing, or broken against this NumPy
        return Runtime(False, np, None, f"numba.cuda cannot be imported ({type(exc).__name__}: {exc}); "
                                        f"pip install 'dynlab[gpu]'", "none")
    if bool(numba.config.ENABLE_CUDASIM):
        return Runtime(True, np, cuda, None, "Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    try:
        present = bool(cuda.is_available())
    except Exception as exc:
        present, why = False, f"{type(exc).__name__}: {exc}"
    else:
        why = "numba.cuda.is_available() is False"
    if not present:
        return Runtime(False, np, cuda, f"no usable CUDA GPU here ({why}); set NUMBA_ENABLE_CUDASIM=1 to run "
                                        f"the GPU kernels on the CPU under Numba's simulator", "none")
    try:
        import cupy
    except Exception as exc:
        return Runtime(False, np, cuda, f"a GPU is present but CuPy cannot be imported ({type(exc).__name__}: "
                                        f"{exc}); pip install 'dynlab[gpu]'", "none")
    numpy_row_stack_shim()
    try:
        dev = cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    except Exception as exc:
        return Runtime(False, np, cuda, f"the CUDA device cannot be opened ({type(exc).__name__}: {exc})", "none")
    return Runtime(False, cupy, cuda, None, name)


def free_bytes() -> float:
    """Device memory this process can still allocate: the driver's free memory plus what CuPy's
    pool holds unused (inf under the simulator)."""
    rt = runtime()
    if rt.simulator or rt.problem is not None:
        return float("inf")
    free, _ = rt.xp.cuda.runtime.memGetInfo()
    return float(free + rt.xp.get_default_memory_pool().free_bytes())


def to_device(a, dtype=np.float64):
    """``a`` as a C-contiguous array of ``dtype`` where the kernels run (a CuPy array on a GPU,
    NumPy under the simulator); no copy when it already is a writable one (the simulator writes
    every argument back after a launch, so a read-only input — a form's frozen arrays — is copied)."""
    xp = runtime().xp
    out = xp.ascontiguousarray(xp.asarray(a, dtype=dtype))
    if xp is np and not out.flags.writeable:
        out = out.copy()
    return out


#: Device arrays of at least this many bytes come back through pinned (page-locked) host memory.
PINNED_MIN_BYTES = 1 << 16


def to_host(a) -> np.ndarray:
    """A NumPy array from a device (CuPy) or host array.  A CuPy array of ``PINNED_MIN_BYTES`` or
    more is copied into pinned host memory (``cupyx.empty_pinned``, from CuPy's pinned memory pool):
    the copy is one DMA transfer at the bus's speed instead of a staged copy through a pageable
    buffer; the NumPy array returned views that memory, which goes back to the pool when it is freed."""
    if not hasattr(a, "get"):
        return np.asarray(a)
    if a.nbytes < PINNED_MIN_BYTES:
        return a.get()
    import cupy
    import cupyx

    a = cupy.ascontiguousarray(a)
    out = cupyx.empty_pinned(a.shape, dtype=a.dtype)
    try:
        return cupy.asnumpy(a, out=out)       # synchronous (blocking=True by default)
    except TypeError:                         # a CuPy without ``out=``
        return a.get()


def synchronize() -> None:
    """Wait for the device (nothing under the simulator)."""
    rt = runtime()
    if not rt.simulator and rt.problem is None:
        rt.cuda.synchronize()


__all__ = ["Runtime", "runtime", "numpy_row_stack_shim", "free_bytes", "to_device", "to_host", "synchronize",
           "PINNED_MIN_BYTES"]

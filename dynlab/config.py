"""Tunables in one place (thresholds, flags) so kernels stay free of magic numbers."""

#: Backend used when a public function is called with ``backend=None``.
DEFAULT_BACKEND = "numba"

#: The numba backend runs jitted scalar loops when the per-step work is small, and the
#: vectorised BLAS kernel (one matrix product + one ufunc pass per inner step over the whole
#: batch) when B·D² reaches this size: past it a scalar ``tanh`` inside a loop (≈15 ns) and a
#: non-BLAS matrix-vector loop cost more than the Python overhead of the vectorised kernel
#: (≈10 µs per inner step).  Measured on 2 cores, see BENCHMARKS.md.
VECTORISE_MIN_WORK = 1 << 16

#: ``cache=True`` for every @njit kernel, so the compiled code survives the process.
NUMBA_CACHE = True

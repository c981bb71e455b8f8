"""The GPU backend's fused ``@cuda.jit`` kernels: the whole time loop inside one launch.

Layout, shared by every kernel:

* **One block per independent unit of work** — a slice of ``per`` sequences (simulate), one
  point (Jacobians; a grid-stride loop over the points), one sweep setting (forward tangents),
  one sequence (backward products, QR steps), one matrix (σ₁: ``top_sv_power``, ``top_sv``), one
  cotangent row (the MASO reverse pass), one implicit point; ``gate_step`` alone is elementwise,
  one thread per (sequence, unit), between the GEMMs of a GRU/LSTM step.  Blocks never talk to each
  other, so a launch is one chunk of work.
* **Threads stride over the block's items**: the (sequence, unit) pairs of a slice, the
  (row, column) entries of a matrix, so any block size is correct; the host picks a power of
  two (``threads``) — the tree reductions (``block_sum``) need one.
* **Shared memory** holds the vectors of the step (states, inner-step states, slopes) and, when
  they fit the budget the host computed (``wsh``), the recurrent weights — transposed (``RT[j·D
  + i] = R[i, j]``), so that the threads of consecutive units read consecutive addresses whether
  the weights sit in shared or global memory.  D×D iterates (tangents, products, Gram matrices)
  sit in shared memory when they fit and in a per-block slice of a global scratch array when not
  (``scratch``/``msh``), selected once per launch.
* **Synchronisation**: ``cuda.syncthreads`` between the phases of a step (the matrix-vector
  products read the whole previous vector); every thread reaches every barrier — the divergent
  work (a finished sequence, a padding thread) is skipped inside the phases, never around them.

Each cell's arithmetic is ``dynlab.backends.cells`` (``register_jitable``, precision-generic):
the kernels only add the products R h, U s, W_hh h and the bookkeeping.  A kernel compiles once
per floating type of its arrays; the scalars are passed in that type (``GPUBackend`` casts them),
so a float32 kernel runs in float32 throughout.  Dynamic shared memory has one type per kernel,
so the kernels are built per floating type (``kernels(dtype)``).

Divergence (``bad``): the 0-based step of the first non-finite state of a sequence (T: none);
with ``stop`` a sequence is not advanced past it (its rows from there on are filled with NaN by
the host, as the reference leaves them).  Forward tangents report the 1-based step (0: none).
"""
from __future__ import annotations

import functools
import math
import types

import numpy as np


#: The kernels ``kernels(dtype)`` builds.
KERNEL_NAMES = ("sim_cell", "sim_irnn", "sim_ctrnn", "sim_gated", "gate_step", "jac_cell", "jac_irnn", "jac_ctrnn",
                "jac_gated", "tangent", "products", "top_sv", "top_sv_power", "qr_steps", "reverse", "picard",
                "flow_rk4")


@functools.lru_cache(maxsize=None)
def kernels(dtype) -> types.SimpleNamespace:
    """The kernels for one floating type (float32 or float64), from the modules beside this one."""
    import numba

    from . import kernels_flow, kernels_jacobian, kernels_simulate, kernels_solve, kernels_tangent

    FT = numba.float32 if np.dtype(dtype) == np.float32 else numba.float64
    NINF = FT(-math.inf)   # constants in the kernel's own type (a float64 literal would promote)
    NAN = FT(math.nan)
    out = {}
    for module in (kernels_simulate, kernels_jacobian, kernels_flow, kernels_solve, kernels_tangent):
        out.update(module.build(FT, NINF, NAN))
    assert set(out) == set(KERNEL_NAMES), sorted(set(out) ^ set(KERNEL_NAMES))
    return types.SimpleNamespace(**out)


__all__ = ["kernels", "KERNEL_NAMES"]

"""Array helpers the numba backend's host code shares: rows per BLAS call of a per-step loop
(``gemm_rows``) and read-only views (``readonly``: one compiled signature per dtype).

Every simulation kernel of this backend takes the precomputed input drive and returns ``(H, bad)``:
H (B, T, D) the states h_1..h_T, and ``bad`` (B,) the 0-based step at which each sequence
first had a non-finite entry (T when it never did).  With ``stop=True`` a sequence is not
advanced past that step and the rest of its H is left unset.
"""

import numpy as np

from ... import config


def gemm_rows(M: int, K: int, N: int, small: bool) -> int:
    """Rows per ``np.dot``/``matmul`` call for the product (M × K)·(K × N) of a per-step loop:
    M (one call), or, with ``small`` (``threads.small_gemm()``: the BLAS has a small-matrix
    path) and M·K·N > ``config.SMALL_GEMM_MNK``, the rows of the fewest calls (M halved until
    each has at most that many multiply-adds), if that leaves at least
    ``config.SMALL_GEMM_MIN_ROWS`` rows a call."""
    limit = config.SMALL_GEMM_MNK
    if not small or M * K * N <= limit:
        return int(M)
    rows = int(M)
    while rows * K * N > limit and rows >= config.SMALL_GEMM_MIN_ROWS:
        rows = (rows + 1) // 2
    return rows if rows >= config.SMALL_GEMM_MIN_ROWS and rows * K * N <= limit else int(M)


def readonly(a, dtype=None) -> np.ndarray:
    """``a`` as a C-contiguous array of ``dtype`` (its own when None), handed to a jitted kernel
    as a read-only view (no copy beyond what the layout or dtype needs).

    Numba compiles one specialisation of a kernel per combination of its arguments' types, and
    an array's writeable flag is part of its type.  A model's validated weights are read-only; a
    copy made for a dtype or a layout, or a slice of a fresh array, is not — so the same kernel
    used to be compiled twice, once per flag (the LSTM scalar loop: ≈ 6 s each time, the
    GRU/LSTM batch loop ≈ 5 s).  Every argument that a kernel only reads goes through here, so
    it is compiled once per dtype; ``tests/test_kernel_signatures.py`` checks it."""
    v = np.ascontiguousarray(a, dtype=dtype).view()
    v.flags.writeable = False
    return v

"""The reverse pass of the MASO analyses (``dynlab.analysis.partition``) as one numba call per layer.

λ_{t−1} = a λ_t + (c λ_t ⊙ s_t) R for a (B·C, D) block of cotangent rows (C read-out rows per
sequence), from the top of the sequence down, with the input cotangents (c λ_t ⊙ s_t) W and the
offset terms (c λ_t ⊙ s_t)·b of every step.  Per step one product (B·C, D)·(D, D) and one
(B·C, D)·(D, d+1) (W and b side by side) through ``np.dot`` (BLAS), and two element-wise passes;
no Python between the steps, and the GIL released (a NumPy loop spends most of each step outside
the product: ``python -m benchmarks.ab``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...config import NUMBA_CACHE


@njit(nogil=True, cache=NUMBA_CACHE, error_model="numpy", fastmath={"contract"})
def gated_reverse(R, Wb, S, a, c, lam, out, offset, incoming, has_incoming, cs, tmp, xo):
    """One layer backwards.  R (D, D), Wb = [W | b] (D, d+1), S (B, T, D) the slopes φ'(z_t);
    lam (B·C, D): λ_T on entry (the top layer's read-out rows, else zeros), λ_0 on exit;
    out (B, C, T, d) ← the input cotangents; offset (B·C,) += Σ_t (c λ_t ⊙ s_t)·b;
    incoming (B, C, T, D): cotangents added to λ_t at every step when ``has_incoming`` (a lower
    layer of a stack); cs, tmp (B·C, D) and xo (B·C, d+1): scratch."""
    B, T, D = S.shape
    C = lam.shape[0] // B
    d = Wb.shape[1] - 1
    for t in range(T - 1, -1, -1):
        for b in range(B):
            for k in range(C):
                r = b * C + k
                if has_incoming:
                    for j in range(D):
                        lam[r, j] += incoming[b, k, t, j]
                for j in range(D):
                    cs[r, j] = c * lam[r, j] * S[b, t, j]
        np.dot(cs, R, tmp)
        np.dot(cs, Wb, xo)
        for b in range(B):
            for k in range(C):
                r = b * C + k
                for i in range(d):
                    out[b, k, t, i] = xo[r, i]
                offset[r] += xo[r, d]
        if a == 0.0:
            lam[...] = tmp
        else:
            for r in range(B * C):
                for j in range(D):
                    lam[r, j] = a * lam[r, j] + tmp[r, j]

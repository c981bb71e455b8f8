"""The MASO reverse pass (``reverse``) and the implicit equilibria (``picard``, ``flow_rk4``)
(``kernels.py``: the layout every kernel keeps).
"""
from __future__ import annotations

import math

from numba import cuda  # a module global: the simulator swaps it for its own in the kernels' globals

from ..cells import phi, one, zero
from .helpers import device_functions


def build(FT, NINF, NAN) -> dict:
    """The kernels of this module for the floating type FT (constants NINF, NAN in that type)."""
    jit = cuda.jit
    block_sum = device_functions(globals()).block_sum

    @jit
    def reverse(R, W, bias, S, a, gain, lam, incoming, has, cols, out, offset):
        """The MASO reverse pass through one one-line layer for one cotangent row per block
        (row r = b·C + c): λ ← λ + incoming_t, u = γ λ ⊙ s_t, out_t = u W, offset += u·b,
        λ ← a λ + u R, from t = T down; λ (B·C, D) holds λ_T on entry and λ_0 on exit.
        Shared: λ, u, λ' (D), reduction."""
        buf = cuda.shared.array(0, FT)
        B, T, D = S.shape
        din = W.shape[1]
        rr = cuda.blockIdx.x
        b = rr // cols
        c = rr - b * cols
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        L = buf[0:D]
        u = buf[D:2 * D]
        Ln = buf[2 * D:3 * D]
        red = buf[3 * D:3 * D + nt]
        for i in range(tid, D, nt):
            L[i] = lam[rr, i]
        cuda.syncthreads()
        total = zero(a)
        for t in range(T - 1, -1, -1):
            for i in range(tid, D, nt):
                v = L[i]
                if has:
                    v += incoming[b, c, t, i]
                    L[i] = v
                u[i] = gain * v * S[b, t, i]
            cuda.syncthreads()
            for mcol in range(tid, din, nt):
                v = zero(a)
                for i in range(D):
                    v += u[i] * W[i, mcol]
                out[b, c, t, mcol] = v
            q = zero(a)
            for i in range(tid, D, nt):
                q += u[i] * bias[i]
            total += block_sum(red, q)
            for j in range(tid, D, nt):
                v = zero(a)
                for i in range(D):
                    v += u[i] * R[i, j]
                Ln[j] = a * L[j] + v
            cuda.syncthreads()
            for j in range(tid, D, nt):
                L[j] = Ln[j]
            cuda.syncthreads()
        for i in range(tid, D, nt):
            lam[rr, i] = L[i]
        if tid == 0:
            offset[rr] = total

    # ======================================================================== implicit
    @jit
    def picard(A, C, act, leak, tol, max_iter, max_rate, Z, res, its, rate):
        """Picard Z ← f(Z Aᵀ + C) for one point per block (grid-stride), stopping as the
        reference's ``_picard`` does: residual max|f(zAᵀ + c) − z| ≤ tol, k = max_iter, or
        (k > 5) a contraction rate r_k/r_{k−1} above ``max_rate``; Z holds the start on entry.
        Shared: z, f(z) (U), reduction."""
        buf = cuda.shared.array(0, FT)
        N, U = C.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        z = buf[0:U]
        gz = buf[U:2 * U]
        red = buf[2 * U:2 * U + nt]
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            for i in range(tid, U, nt):
                z[i] = Z[pt, i]
            cuda.syncthreads()
            prev = math.inf
            k = 0
            rt = zero(tol)
            while True:
                mx = zero(tol)
                for i in range(tid, U, nt):
                    v = C[pt, i]
                    for j in range(U):
                        v += A[i, j] * z[j]
                    fv = phi(act, v, leak)
                    gz[i] = fv
                    dv = abs(fv - z[i])
                    if not math.isnan(mx) and (math.isnan(dv) or dv > mx):   # NaN is the maximum
                        mx = dv
                red[tid] = mx
                cuda.syncthreads()
                if tid == 0:
                    for i in range(1, nt):
                        if not math.isnan(mx) and (math.isnan(red[i]) or red[i] > mx):
                            mx = red[i]
                    red[0] = mx
                cuda.syncthreads()
                rn = red[0]
                cuda.syncthreads()
                if k > 0:
                    rt = rn / prev
                done = not (rn > tol) or k >= max_iter
                if k > 5 and rt > max_rate:
                    done = True
                if done:
                    break
                for i in range(tid, U, nt):
                    z[i] = gz[i]
                cuda.syncthreads()
                prev = rn
                k += 1
            for i in range(tid, U, nt):
                Z[pt, i] = z[i]
            if tid == 0:
                res[pt] = rn if math.isfinite(rn) else math.inf
                its[pt] = k
                rate[pt] = rt
            cuda.syncthreads()

    @jit
    def flow_rk4(A, C, act, leak, steps, dt, Z):
        """Classical RK4 on dZ/dt = f(Z Aᵀ + C) − Z, ``steps`` steps of ``dt`` from Z (in place),
        one point per block (grid-stride).  Shared: z, two stage inputs, the accumulated slope (U)."""
        buf = cuda.shared.array(0, FT)
        N, U = C.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        z = buf[0:U]
        ya = buf[U:2 * U]
        yb = buf[2 * U:3 * U]
        acc = buf[3 * U:4 * U]
        o = one(dt)
        two = o + o
        half = dt / two
        sixth = dt / (two + two + two)
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            for i in range(tid, U, nt):
                z[i] = Z[pt, i]
            cuda.syncthreads()
            for _ in range(steps):
                for stage in range(4):
                    for i in range(tid, U, nt):
                        v = C[pt, i]
                        if stage == 0:
                            for j in range(U):
                                v += A[i, j] * z[j]
                            k = phi(act, v, leak) - z[i]
                            acc[i] = k
                            ya[i] = z[i] + half * k
                        elif stage == 1:
                            for j in range(U):
                                v += A[i, j] * ya[j]
                            k = phi(act, v, leak) - ya[i]
                            acc[i] += two * k
                            yb[i] = z[i] + half * k
                        elif stage == 2:
                            for j in range(U):
                                v += A[i, j] * yb[j]
                            k = phi(act, v, leak) - yb[i]
                            acc[i] += two * k
                            ya[i] = z[i] + dt * k
                        else:
                            for j in range(U):
                                v += A[i, j] * ya[j]
                            k = phi(act, v, leak) - ya[i]
                            acc[i] += k
                    cuda.syncthreads()
                for i in range(tid, U, nt):
                    z[i] = z[i] + sixth * acc[i]
                cuda.syncthreads()
            for i in range(tid, U, nt):
                Z[pt, i] = z[i]
            cuda.syncthreads()

    return {"reverse": reverse, "picard": picard, "flow_rk4": flow_rk4}

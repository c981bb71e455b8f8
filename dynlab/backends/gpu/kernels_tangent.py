"""The sweep kernel: forward tangents of sweep settings (``tangent``; ``kernels.py``: the layout every
kernel keeps).

One block per setting at a time (a grid-stride loop over the settings), the state and the tangent
A = ∂h_m/∂h_1 (Frobenius-normalised, log scale in ``logs``) through the same update as the
reference (``dynlab.backends.reference.tangent``): iRNN St = G + σA, G ← G + η_k φ'(z) ⊙ (U St) −
η_k α St (``cells.irnn_slope``); cells G = a A + γ φ'(z) ⊙ (R A) (``cells.cell_slope``).  Every
tangent is D × D, the last step's too: J_T is not carried as the right half of a D × 2D block
[M_{T−1} | I] but by a second pass of the last step from the same state with A = I (the state
recursion, D² a step, is recomputed; the tangent work is the same as the wide block's).  At
T = 2, M_1 = I, so one pass gives J_T and M_T = J_T (normalised) at once.

Layout of a block (dynamic shared memory, in the kernel's floating type):

* vectors h, h_{T−1}, g, s, the slopes and the drive c (6·D), and ``max(32, threads)`` for the
  reductions;
* the iterates A, G (and St for the iRNN) as D × D row-major (``nmat``·D²) when ``msh`` ≥ 1, else
  the block's slice of the global ``scratch`` (blocks, 3, D²);
* Rᵀ (D², ``RT[j·D + i] = R[i, j]``) when ``msh`` = 2, else read from global memory.

At D = 32 in float64 with 256 threads: 8·(6·32 + 256 + 3·1024 + 1024) = 36.4 KB — within the
48 KB a block may have without opting in (``GPUBackend.tangent_launch`` decides, per size).

Register tiling: each thread computes 2 × 2 outputs of the D × D product R·B — rows {i, i + ⌈D/2⌉},
columns {j, j + ⌈D/2⌉} — from two loads of R and two of B per four multiply-adds (consecutive
threads take consecutive columns: consecutive shared-memory addresses; the threads of a warp
share their rows: broadcasts).  Indices are int32 values (``int32(…)`` around their arithmetic;
``range`` over int32 bounds gives int32 counters), and the inner loops step their offsets by
addition, so no integer multiply is left in them.  (Numba widens int32 arithmetic to 64 bits and
truncates back; on the CPU, LLVM keeps such a loop's adds 64-bit with no multiply — whether NVVM
narrows the adds too is not checked here: there is no NVVM on the CI machines.)

Reductions (Frobenius norm) are warp-level: a tree of ``shfl_down_sync`` within each warp, the
warps' partials through shared memory, the same tree once more.  Numba's CUDA simulator has no
warp shuffles (numba-cuda 0.30), so under it — and only there — the exchange of each round goes
through shared memory (``_warp_sum_sim``); the tree, the lanes and the partials are the same code.
The divergence test is one ``syncthreads_or``.
"""
from __future__ import annotations

import math

import numba
from numba import cuda, int32  # a module global: the simulator swaps ``cuda`` for its own in the kernels' globals
from numba.extending import register_jitable  # device helpers in this module's globals: swapped alike

from ..cells import cell_slope, cell_update, irnn_inner, irnn_slope, one, zero


@register_jitable
def _warp_sum_dev(v, red, tid, nt):
    """Σ of v within each warp (lane 0 holds it) by ``shfl_down_sync`` (a device)."""
    width = min(int32(32), nt)
    mask = numba.uint32(0xFFFFFFFF) if width == 32 else numba.uint32((1 << width) - 1)
    lane = int32(tid & 31)
    off = int32(16)
    while off > 0:
        w = cuda.shfl_down_sync(mask, v, off)
        if lane + off < width:
            v += w
        off = int32(off >> 1)
    return v


@register_jitable
def _warp_sum_sim(v, red, tid, nt):
    """``_warp_sum_dev`` with each round's exchange through shared memory ``red`` (≥ nt entries):
    the simulator has no warp shuffles.  Every thread of the block must call it."""
    width = min(int32(32), nt)
    lane = int32(tid & 31)
    off = int32(16)
    while off > 0:
        cuda.syncthreads()
        red[tid] = v
        cuda.syncthreads()
        if lane + off < width:
            v += red[tid + off]
        off = int32(off >> 1)
    cuda.syncthreads()
    return v


#: The warp sum of this process: shuffles on a device, shared memory under the simulator.
warp_sum = _warp_sum_sim if numba.config.ENABLE_CUDASIM else _warp_sum_dev


@register_jitable
def block_sum(v, red, tid, nt):
    """Σ of v over the block (every thread gets it): warp sums, their partials in ``red``, the
    warp sum of the partials.  Every thread of the block must call it."""
    v = warp_sum(v, red, tid, nt)
    nw = int32((nt + 31) >> 5)
    if (tid & 31) == 0:
        red[tid >> 5] = v
    cuda.syncthreads()
    p = red[tid & 31] if (tid & 31) < nw else v - v
    cuda.syncthreads()
    p = warp_sum(p, red, tid, nt)
    if tid == 0:
        red[0] = p
    cuda.syncthreads()
    out = red[0]
    cuda.syncthreads()
    return out


@register_jitable
def prod4(R, B, D, i0, i1, j0, j1):
    """The 2 × 2 tile {i0, i1} × {j0, j1} of R·B (R stored transposed: R[l·D + i] = R_il; B row-major
    D × D; i1, j1 clamped to D − 1 by the caller where the tile runs past the edge)."""
    a00 = a01 = a10 = a11 = B[j0] - B[j0]
    ro = int32(0)
    for _l in range(D):
        r0 = R[ro + i0]
        r1 = R[ro + i1]
        b0 = B[ro + j0]
        b1 = B[ro + j1]
        a00 += r0 * b0
        a01 += r0 * b1
        a10 += r1 * b0
        a11 += r1 * b1
        ro = int32(ro + D)
    return a00, a01, a10, a11


def build(FT, NINF, NAN) -> dict:
    """The kernels of this module for the floating type FT (constants NINF, NAN in that type)."""
    jit = cuda.jit

    @jit(device=True)
    def advance(gated, R, c, h, gv, s, sl, A, G, St, eta_n, kk, a_, sg, prev, ac, lk, tang, D, tid, nt):
        """One step of the state (h → gv) and, with ``tang``, of the tangent (A → G)."""
        ze = zero(a_)
        hD = int32((D + 1) >> 1)
        nti = int32(hD * hD)
        DD = int32(D * D)
        if gated:
            for i in range(tid, D, nt):
                z = c[i]
                ro = int32(0)
                for j in range(D):
                    z += R[ro + i] * h[j]
                    ro = int32(ro + D)
                sl[i] = cell_slope(eta_n[0], z, ac, lk)
                gv[i] = cell_update(a_, eta_n[0], h[i], z, ac, lk)
            cuda.syncthreads()
            if tang:
                for tl in range(tid, nti, nt):
                    i0 = int32(tl // hD)
                    j0 = int32(tl - i0 * hD)
                    i1 = int32(min(i0 + hD, D - 1))
                    j1 = int32(min(j0 + hD, D - 1))
                    p00, p01, p10, p11 = prod4(R, A, D, i0, i1, j0, j1)
                    e = int32(i0 * D + j0)
                    G[e] = a_ * A[e] + sl[i0] * p00
                    if j0 + hD < D:
                        G[e + hD] = a_ * A[e + hD] + sl[i0] * p01
                    if i0 + hD < D:
                        e = int32(e + hD * D)
                        G[e] = a_ * A[e] + sl[i1] * p10
                        if j0 + hD < D:
                            G[e + hD] = a_ * A[e + hD] + sl[i1] * p11
            cuda.syncthreads()
            return
        for i in range(tid, D, nt):
            gv[i] = h[i] if prev else ze
        if tang:
            for e in range(tid, DD, nt):
                G[e] = A[e] if prev else ze
        cuda.syncthreads()
        for k in range(kk):
            ek = eta_n[k]
            for i in range(tid, D, nt):
                s[i] = gv[i] + sg * h[i]
            if tang:
                for e in range(tid, DD, nt):
                    St[e] = G[e] + sg * A[e]
            cuda.syncthreads()
            for i in range(tid, D, nt):
                z = c[i]
                ro = int32(0)
                for j in range(D):
                    z += R[ro + i] * s[j]
                    ro = int32(ro + D)
                sl[i] = irnn_slope(z, ek, ac, lk)
                gv[i] = irnn_inner(gv[i], s[i], z, ek, a_, ac, lk)
            cuda.syncthreads()
            if tang:
                ea = ek * a_
                for tl in range(tid, nti, nt):
                    i0 = int32(tl // hD)
                    j0 = int32(tl - i0 * hD)
                    i1 = int32(min(i0 + hD, D - 1))
                    j1 = int32(min(j0 + hD, D - 1))
                    p00, p01, p10, p11 = prod4(R, St, D, i0, i1, j0, j1)
                    e = int32(i0 * D + j0)
                    G[e] += sl[i0] * p00 - ea * St[e]
                    if j0 + hD < D:
                        G[e + hD] += sl[i0] * p01 - ea * St[e + hD]
                    if i0 + hD < D:
                        e = int32(e + hD * D)
                        G[e] += sl[i1] * p10 - ea * St[e]
                        if j0 + hD < D:
                            G[e + hD] += sl[i1] * p11 - ea * St[e + hD]
            cuda.syncthreads()

    @jit
    def tangent(gated, RT, W, bias, X, group, eta, K, alpha, sign, g0prev, act, leak, scratch, msh, logs, M_out,
                J_out, diverged):
        """Forward tangents of the settings, one block per setting at a time (module docstring).
        RT (G, D²) the groups' transposed recurrent matrices, W (G, D, d), bias (G, D), X (G, T, d),
        group (S,) each setting's; the per-setting scalars as ``base.TangentBatch``; ``scratch``
        (blocks, 3, D²) the iterates when ``msh`` = 0.  Writes logs (S,), M_out, J_out (S, D, D),
        diverged (S,) (1-based step, 0: none)."""
        buf = cuda.shared.array(0, FT)
        S = group.shape[0]
        T = int32(X.shape[1])
        din = int32(X.shape[2])
        D = int32(M_out.shape[1])
        DD = int32(D * D)
        tid = int32(cuda.threadIdx.x)
        nt = int32(cuda.blockDim.x)
        nmat = int32(2 if gated else 3)
        h = buf[0:D]
        hp = buf[D:2 * D]
        gv = buf[2 * D:3 * D]
        s = buf[3 * D:4 * D]
        sl = buf[4 * D:5 * D]
        c = buf[5 * D:6 * D]
        nred = int32(max(32, nt))
        red = buf[6 * D:6 * D + nred]
        off = int32(6 * D + nred)
        slot = min(cuda.blockIdx.x, scratch.shape[0] - 1)
        A = scratch[slot, 0]
        G = scratch[slot, 1]
        St = scratch[slot, 2]
        if msh >= 1:
            A = buf[off:off + DD]
            G = buf[off + DD:off + 2 * DD]
            St = buf[off + 2 * DD:off + 3 * DD] if not gated else G
        for n in range(cuda.blockIdx.x, S, cuda.gridDim.x):
            q = int32(group[n])
            R = RT[q]
            if msh >= 2:
                for e in range(tid, DD, nt):
                    buf[off + nmat * DD + e] = RT[q, e]
                R = buf[off + nmat * DD:off + (nmat + 1) * DD]
            a_ = alpha[n]
            sg = sign[n]
            prev = g0prev[n]
            kk = int32(K[n])
            ac = act[n]
            lk = leak[n]
            eta_n = eta[n]
            o = one(a_)
            ze = zero(a_)
            for i in range(tid, D, nt):
                h[i] = ze
            for e in range(tid, DD, nt):        # M_1 = I
                A[e] = o if e == (e // D) * (D + 1) else ze
            cuda.syncthreads()
            lg = ze
            bad = 0
            for t in range(T):
                tang = t > 0
                last = t == T - 1
                for i in range(tid, D, nt):     # c_t = W x_t + b of the setting's group
                    v = bias[q, i]
                    for j in range(din):
                        v += W[q, i, j] * X[q, t, j]
                    c[i] = v
                    hp[i] = h[i]
                cuda.syncthreads()
                advance(gated, R, c, h, gv, s, sl, A, G, St, eta_n, kk, a_, sg, prev, ac, lk, tang, D, tid, nt)
                nf = False
                for i in range(tid, D, nt):
                    if not math.isfinite(gv[i]):
                        nf = True
                if cuda.syncthreads_or(nf):
                    bad = t + 1
                    break
                for i in range(tid, D, nt):
                    h[i] = gv[i]
                if tang:
                    f2 = ze
                    for e in range(tid, DD, nt):
                        f2 += G[e] * G[e]
                    f = math.sqrt(block_sum(f2, red, tid, nt))
                    ok = f > ze and math.isfinite(f)
                    if ok:
                        lg += math.log(f)
                    elif f == ze:
                        lg = NINF
                    else:
                        lg = NAN
                    inv = o / f if ok else o
                    for e in range(tid, DD, nt):
                        i = int32(e // D)
                        j = int32(e - i * D)
                        if last:
                            M_out[n, i, j] = G[e] * inv
                            if T == 2:          # M_1 = I: J_T = M_T before its normalisation
                                J_out[n, i, j] = G[e]
                        else:
                            A[e] = G[e] * inv
                cuda.syncthreads()
                if last and T > 2:              # J_T: the last step again, from h_{T−1}, with A = I
                    for i in range(tid, D, nt):
                        h[i] = hp[i]
                    for e in range(tid, DD, nt):
                        A[e] = o if e == (e // D) * (D + 1) else ze
                    cuda.syncthreads()
                    advance(gated, R, c, h, gv, s, sl, A, G, St, eta_n, kk, a_, sg, prev, ac, lk, True, D, tid, nt)
                    for e in range(tid, DD, nt):
                        i = int32(e // D)
                        J_out[n, i, e - i * D] = G[e]
                    for i in range(tid, D, nt):
                        h[i] = gv[i]
                    cuda.syncthreads()
            if tid == 0:
                diverged[n] = bad
                logs[n] = NAN if bad > 0 else lg
            if bad > 0 or T < 2:
                for e in range(tid, DD, nt):
                    i = int32(e // D)
                    j = int32(e - i * D)
                    M_out[n, i, j] = NAN if bad > 0 else (o if i == j else ze)
                    J_out[n, i, j] = NAN if bad > 0 else ze
            cuda.syncthreads()

    return {"tangent": tangent}

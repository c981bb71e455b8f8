"""The gradient-flow kernels: the backward chain P_t and its log-norms (``products``), σ₁ by one-sided
Jacobi on the Gram matrix (``top_sv``) and the Lyapunov QR steps (``qr_steps``) (``kernels.py``: the
layout every kernel keeps; the sweep's forward tangents are in ``kernels_tangent``).
"""
from __future__ import annotations

import math

from numba import cuda  # a module global: the simulator swaps it for its own in the kernels' globals

from ..cells import one, zero
from .helpers import device_functions


def build(FT, NINF, NAN) -> dict:
    """The kernels of this module for the floating type FT (constants NINF, NAN in that type)."""
    jit = cuda.jit
    helpers = device_functions(globals())
    block_sum = helpers.block_sum
    block_sum2 = helpers.block_sum2
    block_max = helpers.block_max

    # ======================================================================== norms, QR
    @jit
    def products(J, P, logs, g, wantg, scratch, psh, S, Slog, glog):
        """The gradient flow's backward chain for one sequence per block, fed J (B, m, n, n) in
        time order and run from the end: S[b, j] = P̃, Slog[b, j] = ℓ, then P ← P J_j, kept
        Frobenius-normalised (P = e^ℓ P̃); with a cotangent, glog = ℓ + ln‖g P̃‖.  P (B, n·n) and
        logs (B,) carry on to the next chunk.  Shared: the reduction, g P̃ (n); P, P' (n² each)
        when ``psh``, else the block's slice of ``scratch`` (B, 2, n²)."""
        buf = cuda.shared.array(0, FT)
        B, m, n, _ = J.shape
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        red = buf[0:nt]
        gp = buf[nt:nt + n]
        sx = min(b, scratch.shape[0] - 1)    # a (1, …) dummy when P, P' are shared
        Ps = scratch[sx, 0]
        Pn = scratch[sx, 1]
        if psh:
            Ps = buf[nt + n:nt + n + n * n]
            Pn = buf[nt + n + n * n:nt + n + 2 * n * n]
        for e in range(tid, n * n, nt):
            Ps[e] = P[b, e]
        lg = logs[b]
        cuda.syncthreads()
        ze = zero(lg)
        for j in range(m - 1, -1, -1):
            for e in range(tid, n * n, nt):
                S[b, j, e // n, e - (e // n) * n] = Ps[e]
            if tid == 0:
                Slog[b, j] = lg
            if wantg:
                for k in range(tid, n, nt):
                    v = ze
                    for i in range(n):
                        v += g[b, i] * Ps[i * n + k]
                    gp[k] = v
                cuda.syncthreads()
                q = ze
                for k in range(tid, n, nt):
                    q += gp[k] * gp[k]
                q = block_sum(red, q)
                if tid == 0:
                    glog[b, j] = lg + (math.log(q) / (one(q) + one(q)) if q > ze else NINF)
            f2 = ze
            for e in range(tid, n * n, nt):
                i = e // n
                k = e - i * n
                v = ze
                for l in range(n):
                    v += Ps[i * n + l] * J[b, j, l, k]
                Pn[e] = v
                f2 += v * v
            f = math.sqrt(block_sum(red, f2))
            good = f > ze and math.isfinite(f)
            if good:
                lg += math.log(f)
            elif f == ze:
                lg = NINF
            else:
                lg = NAN
            inv = one(f) / f if good else one(f)
            for e in range(tid, n * n, nt):
                Ps[e] = Pn[e] * inv
            cuda.syncthreads()
        for e in range(tid, n * n, nt):
            P[b, e] = Ps[e]
        if tid == 0:
            logs[b] = lg

    @jit
    def top_sv_power(M, n, tol, maxit, msh, sig, ok):
        """σ₁ of every matrix of M (N, n·n) — N row-major n×n matrices —
        (grid-stride over the matrices) by the numba backend's certified power iteration
        (``dynlab.backends.numba.norms.top_sv``) on A = M Mᵀ: for a unit u, ρ = ‖Mᵀu‖² ≤ λ₁ and
        ε = ‖A u − ρ u‖; every other eigenvalue is ≤ ‖M‖_F² − ρ, so when the gap 2ρ − ‖M‖_F² is
        positive Kato–Temple gives ρ ≤ λ₁ ≤ ρ + ε²/gap, and the iteration stops once
        ε² ≤ 2·tol·ρ·gap: 0 ≤ σ₁/√ρ − 1 ≤ tol.  Also certified: ρ ≥ (1 − 2 tol)·‖M‖₁‖M‖_∞ (Hölder:
        σ₁² ≤ ‖M‖₁‖M‖_∞; it settles a diagonal M, the identity P_T among them, at once).  No warm
        start (the matrices run in parallel): u₀ = 1 + frac(0.618·i) (Fibonacci hashing),
        normalised, a start no sign pattern is orthogonal to by accident; ``ok`` False (σ₁ = √ρ, a
        lower bound) after ``maxit`` iterations, once ρ stalls below ‖M‖_F²/2, or once the residual's
        observed contraction per iteration could not reach the bound within the iterations left
        (σ₂ ≈ σ₁), for the caller's Jacobi (``top_sv``).  NaN for a non-finite matrix, 0 for a zero
        one (both certified).  Shared: two reductions (blockDim each), u, w, v (n); M (n²) too when
        ``msh``."""
        buf = cuda.shared.array(0, FT)
        N, nn = M.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        red = buf[0:nt]
        red2 = buf[nt:2 * nt]
        u = buf[2 * nt:2 * nt + n]
        w = buf[2 * nt + n:2 * nt + 2 * n]
        v = buf[2 * nt + 2 * n:2 * nt + 3 * n]
        o = one(tol)
        ze = zero(tol)
        two = o + o
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            A = M[pt]
            if msh:
                A = buf[2 * nt + 3 * n:2 * nt + 3 * n + nn]
                for e in range(tid, nn, nt):
                    A[e] = M[pt, e]
                cuda.syncthreads()
            f2 = ze
            cmax = ze
            for j in range(tid, n, nt):          # column j: its squares and its absolute sum
                cs = ze
                for i in range(n):
                    a = A[i * n + j]
                    f2 += a * a
                    cs += abs(a)
                cmax = max(cmax, cs)
                u[j] = o + FT((j * 40503) % 65536) / FT(65536)
            F = block_sum(red, f2)
            rmax = ze
            for i in range(tid, n, nt):
                rs = ze
                for j in range(n):
                    rs += abs(A[i * n + j])
                rmax = max(rmax, rs)
            holder = block_max(red, cmax) * block_max(red, rmax)
            if not math.isfinite(F) or F == ze:
                if tid == 0:
                    sig[pt] = NAN if not math.isfinite(F) else ze
                    ok[pt] = True
                continue
            q = ze
            for i in range(tid, n, nt):
                q += u[i] * u[i]
            s = o / math.sqrt(block_sum(red, q))
            for i in range(tid, n, nt):
                u[i] *= s
            cuda.syncthreads()
            rho = ze
            rho_old = ze
            e2_old = ze
            done = False
            for it in range(maxit):
                for j in range(tid, n, nt):      # w = Mᵀ u
                    acc = ze
                    for i in range(n):
                        acc += A[i * n + j] * u[i]
                    w[j] = acc
                q = ze
                for j in range(tid, n, nt):
                    q += w[j] * w[j]
                rho = block_sum(red, q)
                e2 = ze
                nv = ze
                for i in range(tid, n, nt):      # v = M w = A u
                    acc = ze
                    for j in range(n):
                        acc += A[i * n + j] * w[j]
                    v[i] = acc
                    r = acc - rho * u[i]
                    e2 += r * r
                    nv += acc * acc
                e2, nv = block_sum2(red, red2, e2, nv)
                gap = two * rho - F
                target = two * tol * rho * gap
                if (gap > ze and e2 <= target) or rho >= (o - two * tol) * holder:
                    done = True
                    break
                if nv == ze or (it >= 2 and gap <= ze and rho < rho_old * (o + FT(0.01))):
                    break
                if it >= 3 and gap > ze:      # at the residual's contraction so far, is the bound in reach?
                    if e2 >= e2_old or math.log(target / e2) < FT(maxit - it) * math.log(e2 / e2_old):
                        break
                rho_old = rho
                e2_old = e2
                s = o / math.sqrt(nv)
                for i in range(tid, n, nt):
                    u[i] = v[i] * s
                cuda.syncthreads()
            if tid == 0:
                sig[pt] = math.sqrt(rho)
                ok[pt] = done
            cuda.syncthreads()

    @jit
    def top_sv(M, scratch, gsh, tol, max_sweeps, out):
        """σ₁ of every matrix of M (N, n, n) (grid-stride over the matrices): the largest
        eigenvalue of the Gram matrix G = MᵀM by the threshold cyclic Jacobi method — n/2
        disjoint rotations at a time in the round-robin (Brent–Luk) order, column then row
        updates — rotating every pair with |G_pq| > tol·max_i G_ii and stopping after a sweep
        that rotated none; σ₁ = √max_i G_ii.  The off-diagonal left is then below tol·λ_max per
        entry, which moves λ_max by at most n·tol·λ_max (Gershgorin), and the rounding of G and
        of the rotations about as much: σ₁ to a relative n·ε or so, i.e. exact to rounding (NaN
        for a non-finite matrix).  Shared: the rotations (c, s of n/2 pairs), the reduction; G
        (n²) in shared memory when ``gsh`` else in the block's slice of ``scratch``."""
        buf = cuda.shared.array(0, FT)
        N, n, _ = M.shape
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        mm = n + (n % 2)
        half = mm // 2
        cs = buf[0:half]
        sn = buf[half:2 * half]
        red = buf[2 * half:2 * half + nt]
        G = scratch[min(cuda.blockIdx.x, scratch.shape[0] - 1)]
        if gsh:
            G = buf[2 * half + nt:2 * half + nt + n * n]
        o = one(tol)
        ze = zero(tol)
        for pt in range(cuda.blockIdx.x, N, cuda.gridDim.x):
            nf = ze
            for e in range(tid, n * n, nt):
                i = e // n
                j = e - i * n
                v = ze
                for l in range(n):
                    v += M[pt, l, i] * M[pt, l, j]
                G[e] = v
                if not math.isfinite(v):
                    nf = o
            if block_sum(red, nf) > ze:
                if tid == 0:
                    out[pt] = NAN
                continue
            for sweep in range(max_sweeps):
                top = ze
                for i in range(tid, n, nt):
                    top = max(top, G[i * n + i])
                thr = tol * block_max(red, top)
                rotated = ze
                for rnd in range(mm - 1):
                    for k in range(tid, half, nt):
                        p = 0 if k == 0 else (rnd + k - 1) % (mm - 1) + 1
                        q = (rnd + mm - 2 - k) % (mm - 1) + 1
                        c = o
                        s_ = ze
                        if p < n and q < n:
                            gpq = G[p * n + q]
                            if abs(gpq) > thr:
                                tau = (G[q * n + q] - G[p * n + p]) / (gpq + gpq)
                                tt = o / (abs(tau) + math.sqrt(o + tau * tau))
                                if tau < ze:
                                    tt = -tt
                                c = o / math.sqrt(o + tt * tt)
                                s_ = tt * c
                                rotated = o
                        cs[k] = c
                        sn[k] = s_
                    cuda.syncthreads()
                    for e in range(tid, half * n, nt):     # columns p, q of G J
                        k = e // n
                        i = e - k * n
                        p = 0 if k == 0 else (rnd + k - 1) % (mm - 1) + 1
                        q = (rnd + mm - 2 - k) % (mm - 1) + 1
                        if p < n and q < n and sn[k] != ze:
                            x = G[i * n + p]
                            y = G[i * n + q]
                            G[i * n + p] = cs[k] * x - sn[k] * y
                            G[i * n + q] = sn[k] * x + cs[k] * y
                    cuda.syncthreads()
                    for e in range(tid, half * n, nt):     # rows p, q of Jᵀ (G J)
                        k = e // n
                        j = e - k * n
                        p = 0 if k == 0 else (rnd + k - 1) % (mm - 1) + 1
                        q = (rnd + mm - 2 - k) % (mm - 1) + 1
                        if p < n and q < n and sn[k] != ze:
                            x = G[p * n + j]
                            y = G[q * n + j]
                            G[p * n + j] = cs[k] * x - sn[k] * y
                            G[q * n + j] = sn[k] * x + cs[k] * y
                    cuda.syncthreads()
                if block_sum(red, rotated) == ze:
                    break
            top = ze
            for i in range(tid, n, nt):
                top = max(top, G[i * n + i])
            top = block_max(red, top)
            if tid == 0:
                out[pt] = math.sqrt(top)

    @jit
    def qr_steps(J, Q, given, scratch, qsh, out):
        """Benettin's QR for one sequence per block, fed J (B, m, n, n) in time order:
        A = J_t Q (``given``: J holds A = J_t Q itself, (B, m, n, k), formed outside, e.g. by one
        batched GEMM), then classical Gram–Schmidt twice (orthogonal to rounding, like Householder),
        ln R_ii = ln‖a_i − Q_{<i} Q_{<i}ᵀ a_i‖ (|R_ii| does not depend on the column signs, so it
        equals LAPACK's); Q (B, n, k) carries on.  Shared: the projections (k), the reduction;
        A, Q (n·k each) when ``qsh``, else the block's slice of ``scratch`` (B, 2, n·k)."""
        buf = cuda.shared.array(0, FT)
        B, m, n, _ = J.shape
        kq = Q.shape[2]
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        red = buf[0:nt]
        r = buf[nt:nt + kq]
        sx = min(b, scratch.shape[0] - 1)    # a (1, …) dummy when A, Q are shared
        A = scratch[sx, 0]
        Qs = scratch[sx, 1]
        if qsh:
            A = buf[nt + kq:nt + kq + n * kq]
            Qs = buf[nt + kq + n * kq:nt + kq + 2 * n * kq]
        for e in range(tid, n * kq, nt):
            Qs[e] = Q[b, e // kq, e - (e // kq) * kq]
        cuda.syncthreads()
        for t in range(m):
            for e in range(tid, n * kq, nt):
                i = e // kq
                c = e - i * kq
                if given:
                    A[e] = J[b, t, i, c]
                else:
                    v = zero(Qs[e])
                    for l in range(n):
                        v += J[b, t, i, l] * Qs[l * kq + c]
                    A[e] = v
            cuda.syncthreads()
            for c in range(kq):
                for _ in range(2):
                    for l in range(tid, c, nt):
                        v = zero(A[0])
                        for i in range(n):
                            v += Qs[i * kq + l] * A[i * kq + c]
                        r[l] = v
                    cuda.syncthreads()
                    for i in range(tid, n, nt):
                        v = A[i * kq + c]
                        for l in range(c):
                            v -= Qs[i * kq + l] * r[l]
                        A[i * kq + c] = v
                    cuda.syncthreads()
                q = zero(A[0])
                for i in range(tid, n, nt):
                    q += A[i * kq + c] * A[i * kq + c]
                nrm = math.sqrt(block_sum(red, q))
                if tid == 0:
                    out[b, t, c] = math.log(nrm) if nrm > zero(nrm) else NINF
                inv = one(nrm) / nrm
                for i in range(tid, n, nt):
                    Qs[i * kq + c] = A[i * kq + c] * inv
                cuda.syncthreads()
        for e in range(tid, n * kq, nt):
            Q[b, e // kq, e - (e // kq) * kq] = Qs[e]

    return {"products": products, "top_sv": top_sv, "top_sv_power": top_sv_power, "qr_steps": qr_steps}

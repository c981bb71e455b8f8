"""The GPU backend's gradient-flow host side: σ₁ of stacks of matrices, the backward products of
``gradient_norms`` and the QR steps of ``lyapunov`` — which kernel or which batched products run,
on the arrays where the kernels run (``device.runtime().xp``: CuPy on a GPU, NumPy under the
simulator, so the very same host code runs in the tests).

**σ₁** (``top_singular``): 1×1 and 2×2 in closed form; otherwise the certified power iteration of
the numba backend (``kernels.top_sv_power``, one matrix per block, Kato–Temple to relative
``POWER_RTOL``) and, for the matrices it cannot certify (a flat top of the spectrum: ρ stalls below
‖M‖_F²/2), the cyclic Jacobi method on the Gram matrix (``kernels.top_sv``), exact to rounding.

**The backward products** P_{t−1} = P_t J_t of a chunk (``Backward``) run one of two ways:

* ``products``, the fused kernel: one block per sequence walks the chunk's steps — the GPU is
  full when there are at least as many sequences as SMs (``GPUBackend.PRODUCTS_KERNEL_MIN_BATCH``);
* a blocked scan (``scan_products``) otherwise, every product a batched GEMM (cuBLAS through
  CuPy's ``matmul``) over the sequences *and* the blocks of the chunk: the m steps are cut into
  L ≈ √m blocks; within every block the partial products from its top, Lc_r = J_{a+ℓ−1} ⋯ J_{a+r+1},
  are formed at once for all blocks (ℓ − 1 batched products of B·L matrices); the L block totals are
  chained (L products of B matrices) into the carry C_blk entering each block; then every
  S_j = C_blk Lc_r in one batched product of B·m matrices.  2m + L products instead of m, but
  ≈ 2√m of them in sequence instead of m, each spread over the SMs.  Every partial product is kept
  Frobenius-normalised with its log scale, as the kernel keeps P, so nothing overflows.  The
  association differs from the sequential chain's: the products agree to rounding (≈ n·ε relative
  to ‖C‖‖Lc‖), which the tests bound at 1e-12 on the log-norms against the reference.

**The QR steps** (``QR``): ``qr_steps`` fused (one block per sequence through the chunk's steps)
when there are at least ``GPUBackend.QR_FUSED_MIN_BATCH`` sequences; otherwise step by step, the
product Z = J_t Q one batched GEMM over the sequences (cuBLAS) and the Gram–Schmidt of Z the same
kernel in its ``given`` mode — Benettin's recursion is sequential in t, so what can be spread over
the SMs is each step's product; the Jacobians themselves are formed in parallel over all points.
"""
from __future__ import annotations

import math

import numpy as np

from .device import runtime, to_device, to_host

#: The power iteration's certified relative accuracy on σ₁ (float64; float32: ``POWER_RTOL_F32``):
#: 10× tighter than the tests' 1e-12 on the log-norms, with room for the rounding of ρ (≈ n·ε).
POWER_RTOL = 1e-13
POWER_RTOL_F32 = 1e-6


def top_singular(be, M):
    """σ₁ of every matrix of a device stack M (N, n, n) (module docstring); a device array (N,)."""
    xp = runtime().xp
    from .kernels import kernels

    M = xp.ascontiguousarray(M)
    N, n, _ = M.shape
    dt = np.dtype(M.dtype)
    if N == 0:
        return xp.empty(0, dtype=dt)
    if n <= 2:
        if n == 1:
            out = xp.abs(M[:, 0, 0])
        else:
            a, b, c, d = M[:, 0, 0], M[:, 0, 1], M[:, 1, 0], M[:, 1, 1]
            out = (xp.hypot(a + d, b - c) + xp.hypot(a - d, b + c)) / 2     # σ₁ ± σ₂ = |(a ± d, b ∓ c)|
        finite = xp.all(xp.isfinite(M.reshape(N, n * n)), axis=1)
        return xp.where(finite, out, xp.asarray(np.nan, dtype=dt)).astype(dt)
    out = xp.empty(N, dtype=dt)
    ok = xp.empty(N, dtype=np.bool_)
    launch, msh = be._plan_power(N, n, dt.itemsize)
    tol = POWER_RTOL if dt == np.float64 else POWER_RTOL_F32
    be._launch(kernels(dt).top_sv_power, launch.blocks, launch.threads, launch.shared, M.reshape(N, n * n), int(n),
               dt.type(tol), int(be.POWER_MAXIT), bool(msh), out, ok)
    left = np.flatnonzero(~to_host(ok))
    if left.size:
        idx = xp.asarray(left)
        out[idx] = jacobi_top(be, xp.ascontiguousarray(M[idx]))
    return out


def jacobi_top(be, M):
    """σ₁ of every matrix of a device stack M (N, n, n) by the cyclic Jacobi method on the Gram
    matrix (``kernels.top_sv``), exact to rounding; a device array."""
    xp = runtime().xp
    from .kernels import kernels

    N, n, _ = M.shape
    dt = np.dtype(M.dtype)
    out = xp.empty(N, dtype=dt)
    launch, gsh = be._plan_jacobi(N, n, dt.itemsize)
    scratch = xp.empty((1, 1), dtype=dt) if gsh else xp.empty((launch.blocks, n * n), dtype=dt)
    be._launch(kernels(dt).top_sv, launch.blocks, launch.threads, launch.shared, M, scratch, bool(gsh),
               dt.type(np.finfo(dt).eps), 40, out)
    return out


def _normalised(xp, X, base):
    """(X / ‖X‖_F, base + ln‖X‖_F) over the last two axes — as the ``products`` kernel keeps P: an
    exactly zero X stays zero with log −inf, a non-finite one stays as it is with log NaN."""
    f = xp.sqrt(xp.sum(X * X, axis=(-2, -1)))
    good = (f > 0) & xp.isfinite(f)
    safe = xp.where(good, f, 1.0)
    Y = X / safe[..., None, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = xp.where(good, base + xp.log(safe), xp.where(f == 0, -np.inf, np.nan))
    return Y, lg


def scan_products(J, P, logs):
    """The backward products of one chunk by the blocked scan (module docstring).

    J (B, m, n, n) in time order; P (B, n, n), logs (B,) the carried product P_{t_hi} = e^logs·P.
    Returns (S (B, m, n, n), Slog (B, m), P', logs'): P_t = e^{Slog[:, j]}·S[:, j] for the chunk's
    j-th time t (S not normalised: its σ₁ is taken as it is), and the product carried on past J_0."""
    xp = runtime().xp
    B, m, n, _ = J.shape
    L = max(1, int(round(math.sqrt(m))))
    ln = -(-m // L)
    pad = L * ln - m
    eye = xp.eye(n, dtype=J.dtype)
    if pad:        # identities before the first step: blocks of one length; a product with I is exact
        J = xp.concatenate([xp.broadcast_to(eye, (B, pad, n, n)), J], axis=1)
    Jr = xp.ascontiguousarray(J.reshape(B, L, ln, n, n).transpose(2, 0, 1, 3, 4))    # (ln, B, L, n, n)
    Lc = xp.empty((ln, B, L, n, n), dtype=J.dtype)
    Ll = xp.zeros((ln, B, L), dtype=J.dtype)
    Lc[ln - 1] = eye
    for r in range(ln - 1, 0, -1):
        Lc[r - 1], Ll[r - 1] = _normalised(xp, xp.matmul(Lc[r], Jr[r]), Ll[r])
    Tot, Tl = _normalised(xp, xp.matmul(Lc[0], Jr[0]), Ll[0])                    # (B, L, n, n), (B, L)
    C = xp.empty((L, B, n, n), dtype=J.dtype)
    Cl = xp.empty((L, B), dtype=J.dtype)
    C[L - 1] = P
    Cl[L - 1] = logs
    for blk in range(L - 1, 0, -1):
        C[blk - 1], Cl[blk - 1] = _normalised(xp, xp.matmul(C[blk], Tot[:, blk]), Cl[blk] + Tl[:, blk])
    Pn, Pl = _normalised(xp, xp.matmul(C[0], Tot[:, 0]), Cl[0] + Tl[:, 0])
    Ct = xp.ascontiguousarray(C.transpose(1, 0, 2, 3))                              # (B, L, n, n)
    S = xp.matmul(Ct[None], Lc)                                                      # (ln, B, L, n, n)
    Slog = Cl.T[None] + Ll
    S = xp.ascontiguousarray(S.transpose(1, 2, 0, 3, 4)).reshape(B, L * ln, n, n)[:, pad:]
    Slog = xp.ascontiguousarray(Slog.transpose(1, 2, 0)).reshape(B, L * ln)[:, pad:]
    return xp.ascontiguousarray(S), Slog, xp.ascontiguousarray(Pn), Pl


class Backward:
    """The gradient flow's backward pass on the device (``backward_norms``; module docstring)."""

    def __init__(self, be, batch, size, dL_dhT, step_norms):
        xp = runtime().xp
        self.be = be
        self.B, self.n = int(batch), int(size)
        self.step_norms = bool(step_norms)
        self.P = to_device(np.broadcast_to(np.eye(self.n), (self.B, self.n, self.n)))
        self.logs = xp.zeros(self.B)
        self.g = None if dL_dhT is None else to_device(np.reshape(dL_dhT, (self.B, self.n)))
        self.path = "fused" if be._products_fused(self.B) else "scan"

    def feed(self, J) -> dict:
        xp = runtime().xp
        from .kernels import kernels

        J = to_device(J)
        B, m, n, _ = J.shape
        wantg = self.g is not None
        if self.path == "fused":
            S = xp.empty((B, m, n, n))
            Slog = xp.empty((B, m))
            glog = xp.empty((B, m)) if wantg else xp.empty((1, 1))
            launch, psh = self.be._plan_products(B, n)
            scratch = xp.empty((1, 2, 1)) if psh else xp.empty((B, 2, n * n))
            self.be._launch(kernels(np.float64).products, launch.blocks, launch.threads, launch.shared, J,
                            self.P.reshape(B, n * n), self.logs, self.g if wantg else xp.empty((1, 1)), wantg,
                            scratch, bool(psh), S, Slog, glog)
        else:
            S, Slog, self.P, self.logs = scan_products(J, self.P, self.logs)
            if wantg:
                gS = xp.matmul(self.g[:, None, None, :], S)[..., 0, :]
                q = xp.sum(gS * gS, axis=-1)
                with np.errstate(divide="ignore", invalid="ignore"):
                    glog = Slog + xp.where(q > 0, xp.log(xp.where(q > 0, q, 1.0)) / 2, -np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = {"log_jac_norm": to_host(Slog + xp.log(top_singular(self.be, S.reshape(B * m, n, n)).reshape(B, m)))}
        if self.step_norms:
            out["step_norm"] = to_host(top_singular(self.be, J.reshape(B * m, n, n)).reshape(B, m))
        if wantg:
            out["log_dL_dh_norm"] = to_host(glog)
        return out


class QR:
    """Benettin's QR steps on the device (``tangent_qr``; module docstring); ``Q`` the carried frames."""

    def __init__(self, be, Q):
        self.be = be
        self._Q = to_device(Q).copy()
        self.path = "fused" if be._qr_fused(self._Q.shape[0]) else "stepwise"

    @property
    def Q(self) -> np.ndarray:
        return to_host(self._Q)

    def feed(self, J) -> np.ndarray:
        xp = runtime().xp
        from .kernels import kernels

        J = to_device(J)
        B, m, n, _ = J.shape
        k = self._Q.shape[2]
        launch, qsh = self.be._plan_qr(B, n, k)
        scratch = xp.empty((1, 2, 1)) if qsh else xp.empty((B, 2, n * k))
        kernel = kernels(np.float64).qr_steps
        if self.path == "fused":
            out = xp.empty((B, m, k))
            self.be._launch(kernel, launch.blocks, launch.threads, launch.shared, J, self._Q, False, scratch,
                            bool(qsh), out)
            return to_host(out)
        out = xp.empty((m, B, 1, k))
        Z = xp.empty((B, n, k))
        for t in range(m):
            xp.matmul(J[:, t], self._Q, out=Z)
            self.be._launch(kernel, launch.blocks, launch.threads, launch.shared, Z[:, None], self._Q, True, scratch,
                            bool(qsh), out[t])
        return to_host(out[:, :, 0].transpose(1, 0, 2))


__all__ = ["top_singular", "jacobi_top", "scan_products", "Backward", "QR", "POWER_RTOL", "POWER_RTOL_F32"]

"""The reference backward pass of the gradient flow and the reference QR steps.

Backward pass (``BackwardProducts``): P_T = I, P_t = P_{t+1} J_{t+1}, kept Frobenius-normalised,
P_t = e^{ℓ_t} P̃_t with ‖P̃_t‖_F = 1, so that ln‖P_t‖₂ = ℓ_t + ln σ₁(P̃_t) stays finite at any
horizon; σ₁ by LAPACK's SVD of every matrix (exact to rounding).  With a cotangent g = ∂L/∂h_T,
ln‖g P_t‖₂ from the same products.

QR steps (``QRSteps``): Q_t R_t = J_t Q_{t−1} by LAPACK's QR, ln|R_t[i, i]| reported.
"""
from __future__ import annotations

import numpy as np


def svd_top(S) -> np.ndarray:
    """σ₁ of every matrix of an (m, n, n) stack by LAPACK (NaN for a non-finite matrix)."""
    if S.shape[0] == 0:
        return np.empty(0)
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(S).all(axis=(-2, -1))
        out = np.full(S.shape[0], np.nan)
        if (~bad).any():
            try:
                out[~bad] = np.linalg.svd(S[~bad], compute_uv=False)[:, 0]
            except np.linalg.LinAlgError:   # gesdd can fail to converge on a finite matrix: √λ_max(SᵀS)
                G = S[~bad]
                amax = np.abs(G).max(axis=(-2, -1))
                Gs = G / np.where(amax > 0, amax, 1.0)[:, None, None]
                lam = np.linalg.eigvalsh(np.swapaxes(Gs, -1, -2) @ Gs)[:, -1]
                out[~bad] = amax * np.sqrt(np.maximum(lam, 0.0))
    return out


def log(v):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(v)


class BackwardProducts:
    """The backward pass fed J (B, m, n, n) for times t_lo … t_hi, from the end backwards
    (``dynlab.backends.base``); ``feed`` returns per-time (B, m) arrays ``log_jac_norm``,
    ``step_norm`` (with ``step_norms``) and ``log_dL_dh_norm`` (with a cotangent)."""

    path = "numpy"

    def __init__(self, batch: int, size: int, *, dL_dhT=None, step_norms: bool = True):
        self.B, self.n = int(batch), int(size)
        self.step_norms = bool(step_norms)
        self.P = np.broadcast_to(np.eye(self.n), (self.B, self.n, self.n)).copy()
        self.logs = np.zeros(self.B)
        self.g = None if dL_dhT is None else np.ascontiguousarray(dL_dhT, dtype=np.float64).reshape(self.B, self.n)

    def feed(self, J) -> dict:
        J = np.ascontiguousarray(J, dtype=np.float64)
        B, m, n, _ = J.shape
        S = np.empty((B, m, n, n))
        logs = np.empty((B, m))
        with np.errstate(all="ignore"):
            for j in range(m - 1, -1, -1):
                S[:, j] = self.P
                logs[:, j] = self.logs
                Pn = np.matmul(self.P, J[:, j])
                f = np.sqrt(np.einsum("bij,bij->b", Pn, Pn))
                good = (f > 0) & np.isfinite(f)
                Pn[good] /= f[good, None, None]
                self.logs = np.where(good, self.logs + np.log(np.where(good, f, 1.0)),
                                     np.where(f == 0, -np.inf, np.nan))
                self.P = Pn
        out = {"log_jac_norm": np.empty((B, m))}
        if self.step_norms:
            out["step_norm"] = np.empty((B, m))
        if self.g is not None:
            gp = np.einsum("bi,bnik->bnk", self.g, S)
            out["log_dL_dh_norm"] = logs + 0.5 * log(np.einsum("bnk,bnk->bn", gp, gp))
        for b in range(B):
            out["log_jac_norm"][b] = logs[b] + log(svd_top(S[b]))
            if self.step_norms:
                out["step_norm"][b] = svd_top(J[b])
        return out


class QRSteps:
    """Benettin's QR fed J (B, m, n, n) in time order; ``feed`` returns ln|R_t[i, i]| (B, m, k)
    and carries the frames ``Q`` (B, n, k) on."""

    path = "numpy"

    def __init__(self, Q):
        self.Q = np.array(Q, dtype=np.float64, order="C")

    def feed(self, J) -> np.ndarray:
        J = np.ascontiguousarray(J, dtype=np.float64)
        B, m, _, _ = J.shape
        out = np.empty((B, m, self.Q.shape[2]))
        with np.errstate(divide="ignore", invalid="ignore"):
            for j in range(m):
                Q, R = np.linalg.qr(np.matmul(J[:, j], self.Q))
                out[:, j] = np.log(np.abs(np.diagonal(R, axis1=1, axis2=2)))
                self.Q = Q
        return out

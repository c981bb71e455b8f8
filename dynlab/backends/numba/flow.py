"""The numba backend's gradient flow and QR steps (host side; kernels in ``norms``, ``lapack``).

The backward pass P_t = P_{t+1} J_{t+1} (P_T = I), kept Frobenius-normalised (P_t = e^{ℓ_t} P̃_t),
as in the reference (``dynlab.backends.reference.norms``), with three differences:

* D ≤ ``config.GRADIENT_NUMBA_MAX_HIDDEN``: the whole pass — products, norms, cotangent — in one
  jitted loop (``norms.backward_chunk``); D = 2 in closed form;
* larger D: the products in one jitted BLAS chain (``norms.product_chain``), then σ₁ of every P̃_t
  and J_t by warm-started power iteration on P̃ P̃ᵀ stopped by the Kato–Temple bound, which
  certifies σ₁ to relative ``config.NORM_RTOL``; where it cannot certify (clustered top singular
  values, e.g. P_t ≈ I near T), √λ_max of the Gram matrix by Lanczos certified by a Cholesky test,
  else LAPACK's ``dsyevr`` (``gram_fallback``) — every norm within NORM_RTOL of LAPACK's SVD;
* an iRNN without step norms never forms a J_t (``irnn_reverse_norms``): the rows of P_t are
  pulled back through the K inner Euler steps, P A_k = (1 − η_k α) P + (P diag(η_k φ'(z_k))) U,
  K products per step, as reverse-mode differentiation would for the single product ∂h_T/∂h_1.

Lyapunov: jitted classical Gram–Schmidt twice for small D (``GramSchmidtQR``); for an iRNN with
large D and few exponents, k tangent vectors carried through the K inner steps,
J_t Q = a·(A_K ⋯ A_1 Q) − σQ (``irnn_tangent_logr``), J_t never formed.
"""
from __future__ import annotations

import numpy as np

from ... import config
from ..._progress import progress
from ..base import previous_states
from ._arrays import readonly
from .threads import limit_blas_threads


def _log(v):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(v)


def gram_fallback(S, ok, sig, u):
    """sig[j] for every uncertified j (``ok`` False) from the Gram matrix S[j] S[j]ᵀ: Lanczos
    certified by a Cholesky test, else LAPACK's ``dsyevr`` for the top eigenvalue
    (``lapack.gram_top``), in parallel over the matrices (BLAS on one thread)."""
    import numba

    from . import lapack
    from .parallel import launch

    useg = np.broadcast_to(u, (max(1, numba.get_num_threads()), S.shape[-1])).copy()
    with limit_blas_threads(1):
        launch(lapack.gram_top_stack, S, np.flatnonzero(~ok), sig, useg, config.NORM_RTOL, config.GRAM_LANCZOS_MAXIT)


def certified_norms(S, u) -> np.ndarray:
    """‖S[j]‖₂ for an (m, n, n) stack: certified power iteration warm-started from u (updated),
    the Gram fallback where it cannot certify."""
    from . import norms

    sig = np.empty(S.shape[0])
    ok = np.empty(S.shape[0], dtype=np.bool_)
    u0 = u.copy()
    norms.top_sv_stack(S, u, config.NORM_RTOL, config.NORM_MAXIT, sig, ok)
    if not ok.all():
        gram_fallback(S, ok, sig, u0)
    return sig


class BackwardChain:
    """The backward pass (module docstring), fed J (B, m, n, n) from the end backwards."""

    def __init__(self, batch: int, size: int, *, dL_dhT=None, step_norms: bool = True):
        self.B, self.n = int(batch), int(size)
        self.step_norms = bool(step_norms)
        self.P = np.broadcast_to(np.eye(self.n), (self.B, self.n, self.n)).copy()
        self.logs = np.zeros(self.B)
        self.g = None if dL_dhT is None else np.ascontiguousarray(dL_dhT, dtype=np.float64).reshape(self.B, self.n)
        rng = np.random.default_rng(0)  # a generic start: never orthogonal to the top vector
        self.u = np.broadcast_to(rng.standard_normal(self.n), (self.B, self.n)).copy()
        self.uJ = self.u.copy()
        self.path = "loops" if self.n <= config.GRADIENT_NUMBA_MAX_HIDDEN else "batched"

    def feed(self, J) -> dict:
        from . import norms

        J = np.ascontiguousarray(J, dtype=np.float64)
        B, m, n, _ = J.shape
        out = {"log_jac_norm": np.empty((B, m))}
        if self.step_norms:
            out["step_norm"] = np.empty((B, m))
        if self.g is not None:
            out["log_dL_dh_norm"] = np.empty((B, m))
        if self.path == "loops":
            glog = out.get("log_dL_dh_norm", np.empty((B, 0)))
            g = readonly(self.g if self.g is not None else np.empty((B, 0)), np.float64)
            step = out.get("step_norm", np.empty((B, m)))
            norms.backward_chunk(J, self.P, self.logs, self.u, self.uJ, g, out["log_jac_norm"], step, glog,
                                 config.NORM_RTOL, config.NORM_MAXIT, self.step_norms)
            return out
        S = np.empty((B, m, n, n))
        logs = np.empty((B, m))
        self.logs = np.array(self.logs, dtype=np.float64)
        with np.errstate(all="ignore"):
            norms.product_chain(J, self.P, self.logs, S, logs, np.empty((n, n)))
        if self.g is not None:
            gp = np.einsum("bi,bnik->bnk", self.g, S)
            out["log_dL_dh_norm"][:] = logs + 0.5 * _log(np.einsum("bnk,bnk->bn", gp, gp))
        for b in range(B):
            out["log_jac_norm"][b] = logs[b] + _log(certified_norms(S[b], self.u[b]))
            if self.step_norms:
                out["step_norm"][b] = certified_norms(J[b], self.uJ[b])
        return out


class GramSchmidtQR:
    """Benettin's QR steps by jitted classical Gram–Schmidt twice (``norms.qr_chunk``)."""

    path = "loops"

    def __init__(self, Q):
        self.Q = np.array(Q, dtype=np.float64, order="C")

    def feed(self, J) -> np.ndarray:
        from . import norms

        J = np.ascontiguousarray(J, dtype=np.float64)
        out = np.empty((J.shape[0], J.shape[1], self.Q.shape[2]))
        norms.qr_chunk(J, self.Q, out)
        return out


# ============================================================================ the iRNN's inner steps
def irnn_step_form(form):
    """(a, σ) of the iRNN's step Jacobian J = a·A_K ⋯ A_1 − σI: σ = sign, a = σ for g₀ = 0 and
    1 + σ for g₀ = h_{m−1}."""
    sigma = float(form.sign)
    return (1.0 + sigma if form.g0prev else sigma), sigma


def irnn_linearisation(form, c, hp, e):
    """The inner-step linearisation of the iRNN at n consecutive points: A_k = keep_k I +
    diag(dpe_k) U for the K inner Euler steps of each, from the previous states.

    c (n, D) = W x_t + b; hp (n, D) = h_{t−1}; e (n, K) the η of each point.  Returns dpe
    (n, K, D) = η_k φ'(z_k) and keep (n, K) = 1 − η_k α, one BLAS product per inner step for all
    n points (the pre-activations from the reference's step, ``reference.simulate.irnn_step``)."""
    from ..reference import cells
    from ..reference.simulate import irnn_step

    n, D = hp.shape
    Z = np.empty((form.K, n, D))
    irnn_step(form.U, hp, c, e, form.alpha, form.K, form.g0prev, form.sign, form.act, form.leak, Z=Z)
    dpe = np.empty((n, form.K, D))
    for k in range(form.K):
        dpe[:, k] = cells.irnn_slope(Z[k], e[:, k, None], form.act, form.leak)
    return dpe, np.ascontiguousarray(1.0 - e * form.alpha)


def _eta(form, lo: int, hi: int) -> np.ndarray:
    return form.eta[lo:hi] if form.eta.shape[0] > 1 else np.broadcast_to(form.eta, (hi - lo, form.K))


def _row_blocks(D: int) -> np.ndarray:
    """Row-block bounds for the parallel reverse pass: one block per Numba thread."""
    import numba

    nb = max(1, min(int(numba.get_num_threads()), D))
    return np.array([(D * b) // nb for b in range(nb + 1)], dtype=np.int64)


def irnn_reverse_norms(form, x, h0, H, *, dL_dhT=None, chunk: int | None = None) -> dict:
    """ln‖∂h_T/∂h_t‖₂ (and ln‖∂L/∂h_t‖₂) of an iRNN for every t by reverse-mode products
    (module docstring): the rows split into one block per Numba thread, each carried through a
    chunk of ``config.GRADIENT_REVERSE_CHUNK`` steps with its own Frobenius scale, then put on one
    scale and the norms taken in parallel.  No step norms (‖J_t‖ would need J_t).

    x (B, T, d), h0 (B, D), H (B, T, D); dL_dhT (B, D) or None.  Returns (B, T) arrays."""
    from . import norms
    from .parallel import launch

    B, T, _ = x.shape
    D = form.hidden
    chunk = int(chunk or min(config.GRADIENT_REVERSE_CHUNK, max(1, config.JACOBIAN_CHUNK_ENTRIES // (D * D))))
    U = np.ascontiguousarray(form.U)
    a, sigma = irnn_step_form(form)
    bounds = _row_blocks(D)
    nb = bounds.shape[0] - 1
    out = {"log_jac_norm": np.empty((B, T))}
    if dL_dhT is not None:
        out["log_dL_dh_norm"] = np.empty((B, T))
    u0 = np.random.default_rng(0).standard_normal(D)
    with limit_blas_threads(1), np.errstate(all="ignore"):
        for b in range(B):
            c = x[b] @ form.W.T + form.b
            P = np.eye(D)
            blog = np.zeros(nb)
            useg = np.broadcast_to(u0, (nb, D)).copy()
            g = np.empty(0) if dL_dhT is None else np.ascontiguousarray(dL_dhT[b])
            hi = T
            while hi > 0:
                lo = max(0, hi - chunk)
                n = hi - lo
                dpe, keep = irnn_linearisation(form, c[lo:hi], previous_states(h0[b], H[b], lo, hi), _eta(form, lo, hi))
                S = np.empty((n, D, D))
                Slog = np.empty((n, nb))
                launch(norms.irnn_reverse_chunk, U, dpe, keep, a, sigma, P, blog, S, Slog, bounds)
                sig = np.empty(n)
                ok = np.empty(n, dtype=np.bool_)
                lscale = np.empty(n)
                glog = np.empty(n)
                launch(norms.block_stack_norms, S, Slog, bounds, g, useg, config.NORM_RTOL, config.NORM_MAXIT,
                       sig, ok, lscale, glog)
                useg[:] = useg[0]                                   # the earliest time's vector goes on
                if not ok.all():
                    gram_fallback(S, ok, sig, useg[0])
                out["log_jac_norm"][b, lo:hi] = lscale + _log(sig)
                if dL_dhT is not None:
                    out["log_dL_dh_norm"][b, lo:hi] = glog
                hi = lo
                progress("gradient flow (steps)", b * T + T - lo, B * T)
    return out


def irnn_tangent_logr(form, x, h0, H, Q):
    """ln|R_t[i, i]| (B, T, k) of an iRNN by tangent propagation through the K inner steps:
    J_t Q = a·(A_K ⋯ A_1 Q) − σQ costs K products U·(D × k) per step instead of forming J_t
    (``norms.irnn_tangent_qr_chunk``).  Q (B, D, k) the initial frames, updated in place."""
    from . import norms

    B, T, _ = x.shape
    k = Q.shape[2]
    U = np.ascontiguousarray(form.U)
    a, sigma = irnn_step_form(form)
    n = config.GRADIENT_REVERSE_CHUNK
    logr = np.empty((B, T, k))
    with limit_blas_threads(1):
        for b in range(B):
            c = x[b] @ form.W.T + form.b
            Qb = np.ascontiguousarray(Q[b])
            for lo in range(0, T, n):
                hi = min(T, lo + n)
                dpe, keep = irnn_linearisation(form, c[lo:hi], previous_states(h0[b], H[b], lo, hi), _eta(form, lo, hi))
                norms.irnn_tangent_qr_chunk(U, dpe, keep, a, sigma, Qb, logr[b, lo:hi])
            Q[b] = Qb
            progress("Lyapunov spectrum (steps)", (b + 1) * T, B * T)
    return logr

"""Gradient flow through time: ‖∂h_T/∂h_t‖₂ for every t, in one backward pass.

By the chain rule the product of one-step Jacobians J_t = ∂h_t/∂h_{t-1},

    P_t = ∂h_T/∂h_t = J_T J_{T-1} ⋯ J_{t+1},      P_T = I,   P_t = P_{t+1} J_{t+1},

is built for every t = T … 1 in ONE backward pass (never T separate products).  To stay
finite at any horizon, the running product is kept Frobenius-normalised, P_t = e^{ℓ_t} P̃_t
with ‖P̃_t‖_F = 1, and its log scale ℓ_t accumulated; then ln‖P_t‖₂ = ℓ_t + ln‖P̃_t‖₂ is finite
even where ‖P_t‖₂ itself under- or overflows float64.  With a loss gradient g = ∂L/∂h_T,
∂L/∂h_t = g P_t (a row vector), computed from the same products.

Two layers (docs/design.md, *Architecture*):

* ``gradient_norms(model, x, …)`` simulates, evaluates the closed-form J_t
  (``dynlab.analysis.jacobians.jacobian_at``) a chunk of time steps at a time, runs the backward
  pass and wraps a Dataset;
* ``BackwardNorms`` / ``jacobian_norms(J)`` work on J stacks alone, for sweeps and for code
  that has its own Jacobians.

The 2-norms.  ``numpy`` (the reference): LAPACK's SVD of every P̃_t and J_t (batched
``np.linalg.svd(compute_uv=False)``), exact to rounding.  ``numba``: D = 2 in closed form;
otherwise warm-started power iteration on P̃ P̃ᵀ stopped by the Kato–Temple bound, which
certifies σ₁ to relative ``config.NORM_RTOL`` (1e-12), with √λ_max of the Gram matrix (LAPACK
``syevr``, top eigenvalue only, after Lanczos on the Gram matrix certified by a Cholesky test;
``_gram_fallback``) wherever it cannot certify (clustered top
singular values, e.g. the first steps back from T, where P_t ≈ I, and the step Jacobians of a
well-conditioned iRNN).
Measured at D = 128, T = 1000 (iRNN, K = 5) on 2 quiet cores, BLAS on one thread: SVD 1–2 ms
per matrix, the Gram fallback 0.1–0.3 ms (Lanczos + Cholesky, or syevr), one certified power step ≈ 2.5 µs; the certificate holds
for P_t once the product has a dominant direction (all but the ~175 steps nearest T) but not
for the clustered J_t of a well-conditioned iRNN (see BENCHMARKS.md, ``gradnorm``).  Small D (≤ ``config.GRADIENT_NUMBA_MAX_HIDDEN``) runs
the whole backward pass in one jitted loop (``dynlab.kernels.grad_numba``); larger D does the
products as batched BLAS matmuls.

The curve alone (``gradient_norms(..., step_norms=False)``) of an iRNN with D >
``config.GRADIENT_NUMBA_MAX_HIDDEN`` under the numba backend never forms a J_t: the rows of P_t
are pulled back through the K inner Euler steps, P A_k = (1 − η_k α) P + (P diag(η_k φ'(z_k))) U,
K BLAS products per step, as reverse-mode automatic differentiation would for the single product
∂h_T/∂h_1 — the curve then costs what that one product costs, plus the norms
(``irnn_reverse_norms``; the rows split into one block per Numba thread, each block with its own
scale, so the threads never wait on each other inside a chunk).

Memory: the J_t are evaluated for blocks of time steps (≤ ``config.JACOBIAN_CHUNK_ENTRIES``
float64 entries per block), from the end backwards, so T = 10⁵ needs O(T·D) memory for the
states, not O(T·D²).
"""
from __future__ import annotations


import numpy as np

from .. import config
from .._blas import blas_threads
from .._resources import progress
from ..backends import resolve_backend
from ..errors import ParameterError
from ..models import IRNN
from .jacobians import jacobian_blocks, prepared_states, previous_states

#: Names of the norm methods, recorded in the Dataset attrs.
NORM_METHODS = {
    "numpy": "LAPACK SVD of every product (np.linalg.svd, compute_uv=False)",
    "numba": "closed form (D=2) or warm-started power iteration certified by the Kato-Temple bound "
             "to relative {tol:g}, sqrt of the Gram matrix's top eigenvalue (LAPACK syevr) where it cannot certify",
}


# ============================================================================ lower layer
def _svd_top(S):
    """σ₁ of every matrix of a (…, D, D) stack by LAPACK (exact to rounding)."""
    if S.shape[0] == 0:
        return np.empty(0)
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(S).all(axis=(-2, -1))
        out = np.full(S.shape[0], np.nan)
        if (~bad).any():
            out[~bad] = np.linalg.svd(S[~bad], compute_uv=False)[:, 0]
    return out


def _gram_fallback(S, ok, sig, u):
    """sig[j] for every uncertified j (``ok`` False) from the Gram matrix S[j] S[j]ᵀ: Lanczos
    certified by a Cholesky test, else LAPACK's ``dsyevr`` for the top eigenvalue
    (``dynlab.kernels.lapack_numba``), in parallel over the matrices (BLAS on one thread).  σ₁
    comes out exact to relative O(D ε) (``lapack_numba.gram_top``) — ≈ 5× cheaper than an SVD."""
    import numba

    from .._blas import limit_blas_threads
    from ..kernels import lapack_numba
    from ..kernels.parallel import launch

    useg = np.broadcast_to(u, (max(1, numba.get_num_threads()), S.shape[-1])).copy()
    with limit_blas_threads(1):
        launch(lapack_numba.gram_top_stack, S, np.flatnonzero(~ok), sig, useg, config.NORM_RTOL,
               config.GRAM_LANCZOS_MAXIT)


def jacobian_stack(J):
    """A (T, D, D) or (B, T, D, D) Jacobian stack as float64 (B, T, D, D) and whether it was
    batched; a ParameterError on ``J`` for any other shape."""
    arr = np.asarray(J, dtype=np.float64)
    if arr.ndim not in (3, 4) or arr.shape[-1] != arr.shape[-2]:
        raise ParameterError("J", f"must have shape (T, D, D) or (B, T, D, D), got {arr.shape}")
    batched = arr.ndim == 4
    return (arr if batched else arr[None]), batched


def _log(v):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(v)


class BackwardNorms:
    """The backward pass on J stacks, fed in chunks from the end of the sequence backwards.

    P_T = I; for each fed chunk of times t_lo … t_hi (J given in ascending time order) it
    reports, for every t in the chunk, ln‖P_t‖₂ (P_t = ∂h_T/∂h_t), ‖J_t‖₂ and, with a
    cotangent, ln‖g P_t‖₂; then it carries P_{t_lo−1} = P_{t_lo} J_{t_lo} on to the next chunk.

    Parameters
    ----------
    batch, hidden : int — B and D
    backend : "numpy" | "numba" — the norm method and product loop (module docstring)
    dL_dhT : (B, D) array, optional — the cotangent g = ∂L/∂h_T of each sequence
    step_norms : bool — also ‖J_t‖₂ for every t (default); False skips those T norms

    Example
    -------
    >>> acc = BackwardNorms(1, 2, backend="numba")
    >>> out = acc.feed(J[None, 500:])      # times 501..T first,
    >>> out2 = acc.feed(J[None, :500])     # then 1..500
    """

    def __init__(self, batch: int, hidden: int, *, backend: str = "numba", dL_dhT=None, step_norms: bool = True):
        self.B, self.D = int(batch), int(hidden)
        self.backend = backend
        self.step_norms = bool(step_norms)
        self.P = np.broadcast_to(np.eye(self.D), (self.B, self.D, self.D)).copy()
        self.logs = np.zeros(self.B)
        self.g = None if dL_dhT is None else np.ascontiguousarray(dL_dhT, dtype=np.float64).reshape(self.B, self.D)
        rng = np.random.default_rng(0)  # a generic start: never orthogonal to the top vector
        self.u = np.broadcast_to(rng.standard_normal(self.D), (self.B, self.D)).copy()
        self.uJ = self.u.copy()
        if backend == "numpy":
            self.path = "numpy"
        elif self.D <= config.GRADIENT_NUMBA_MAX_HIDDEN:
            self.path = "numba_cpu"
        else:
            self.path = "vectorised"

    def feed(self, J) -> dict:
        """Process J (B, n, D, D) for times t_lo … t_hi; returns per-time arrays (B, n).

        Returns a dict: ``log_jac_norm`` ln‖∂h_T/∂h_t‖₂, ``step_norm`` ‖J_t‖₂ (only with
        ``step_norms``) and, with a cotangent, ``log_dL_dh_norm`` ln‖∂L/∂h_t‖₂.  Runs BLAS on ``config.GRADIENT_BLAS_THREADS``
        threads: the pass is a loop of D×D products and per-matrix LAPACK calls (``dynlab._blas``).
        """
        from .._blas import limit_blas_threads

        with limit_blas_threads(config.GRADIENT_BLAS_THREADS):
            return self._feed(J)

    def _feed(self, J) -> dict:
        J = np.ascontiguousarray(J, dtype=np.float64)
        B, n, D, _ = J.shape
        out = {"log_jac_norm": np.empty((B, n)), "step_norm": np.empty((B, n))}
        if self.g is not None:
            out["log_dL_dh_norm"] = np.empty((B, n))
        if self.path == "numba_cpu":
            from ..kernels import grad_numba, readonly

            glog = out.get("log_dL_dh_norm", np.empty((B, 0)))
            g = readonly(self.g if self.g is not None else np.empty((B, 0)), np.float64)
            grad_numba.backward_chunk(J, self.P, self.logs, self.u, self.uJ, g, out["log_jac_norm"],
                                      out["step_norm"], glog, config.NORM_RTOL, config.NORM_MAXIT, self.step_norms)
            if not self.step_norms:
                del out["step_norm"]
            return out
        # the products (BLAS, in one numba call); the normalised P̃_t of the chunk kept for the norms
        S = np.empty((B, n, D, D))
        logs = np.empty((B, n))
        if self.path == "numpy":
            with np.errstate(all="ignore"):
                for j in range(n - 1, -1, -1):
                    S[:, j] = self.P
                    logs[:, j] = self.logs
                    Pn = np.matmul(self.P, J[:, j])
                    f = np.sqrt(np.einsum("bij,bij->b", Pn, Pn))
                    good = (f > 0) & np.isfinite(f)
                    Pn[good] /= f[good, None, None]
                    self.logs = np.where(good, self.logs + np.log(np.where(good, f, 1.0)),
                                         np.where(f == 0, -np.inf, np.nan))
                    self.P = Pn
        else:
            from ..kernels import grad_numba

            self.logs = np.array(self.logs, dtype=np.float64)
            with np.errstate(all="ignore"):
                grad_numba.product_chain(J, self.P, self.logs, S, logs, np.empty((D, D)))
        if self.g is not None:
            gp = np.einsum("bi,bnik->bnk", self.g, S)
            out["log_dL_dh_norm"][:] = logs + 0.5 * _log(np.einsum("bnk,bnk->bn", gp, gp))
        for b in range(B):
            out["log_jac_norm"][b] = logs[b] + _log(self._norms(S[b], self.u[b]))
            if self.step_norms:
                out["step_norm"][b] = self._norms(J[b], self.uJ[b])
        if not self.step_norms:
            del out["step_norm"]
        return out

    def _norms(self, S, u):
        """‖S[j]‖₂ for a (n, D, D) stack: SVD (numpy) or certified power iteration + SVD (numba)."""
        if self.path == "numpy":
            return _svd_top(S)
        from ..kernels import grad_numba

        sig = np.empty(S.shape[0])
        ok = np.empty(S.shape[0], dtype=np.bool_)
        u0 = u.copy()
        grad_numba.top_sv_stack(S, u, config.NORM_RTOL, config.NORM_MAXIT, sig, ok)
        if not ok.all():
            _gram_fallback(S, ok, sig, u0)
        return sig


def _row_blocks(D: int) -> np.ndarray:
    """Row-block bounds for the parallel reverse pass: one block per Numba thread."""
    import numba

    nb = max(1, min(int(numba.get_num_threads()), D))
    return np.array([(D * b) // nb for b in range(nb + 1)], dtype=np.int64)


def irnn_step_form(model):
    """(a, σ) of the iRNN's step Jacobian J = a·A_K ⋯ A_1 − σI (``irnn_xp``): σ = sign,
    a = σ for g₀ = 0 and 1 + σ for g₀ = h_{m−1}."""
    sigma = float(model.sign)
    return (1.0 + sigma if model.g0 == "previous" else sigma), sigma


def irnn_linearisation(model, U, c, hp, table, lo: int):
    """The inner-step linearisation of the iRNN at n consecutive points: A_k = keep_k I +
    diag(dpe_k) U for the K inner Euler steps of each, from the previous states.

    U (D, D); c (n, D) = W x_t + b; hp (n, D) = h_{t−1}; table the (rows, K) η table; lo the
    0-based time of the first point.  Returns dpe (n, K, D) = η_k φ'(z_k) and keep (n, K) =
    1 − η_k α (C order), one BLAS product per inner step for all n points (as ``irnn_xp``)."""
    from ..activations import dphi, phi

    n, D = hp.shape
    K = model.K
    sigma = float(model.sign)
    alpha, act, leak = float(model.alpha), model.activation, float(model.leak)
    e = table[lo:lo + n] if table.shape[0] > 1 else np.broadcast_to(table, (n, K))
    dpe = np.empty((n, K, D))
    gk = hp.copy() if model.g0 == "previous" else np.zeros_like(hp)
    for k in range(K):
        s = gk + sigma * hp
        z = s @ U.T + c
        dpe[:, k] = e[:, k, None] * dphi(act, z, leak)
        gk = gk + e[:, k, None] * (phi(act, z, leak) - alpha * s)
    return dpe, np.ascontiguousarray(1.0 - e * alpha)


def irnn_reverse_norms(model, xa, h0a, H, *, dL_dhT=None, chunk: int | None = None) -> dict:
    """ln‖∂h_T/∂h_t‖₂ (and ln‖∂L/∂h_t‖₂) of an iRNN for every t by reverse-mode products.

    P_{t−1} = P_t J_t with J_t = a·A_K ⋯ A_1 − σI (``irnn_xp``) is applied as K products of
    P's rows against U — the pullback of the K inner Euler steps, J_t never formed — so the
    whole curve costs what ONE reverse-mode product ∂h_T/∂h_1 costs (K D³ per step), plus
    the 2-norms.  The rows are split into one block per Numba thread, each carried through a
    chunk of ``config.GRADIENT_REVERSE_CHUNK`` steps (fewer where n·D² would pass
    ``config.JACOBIAN_CHUNK_ENTRIES``) with its own Frobenius scale (BLAS on one
    thread per block); the blocks are then put on one scale and the norms taken in parallel
    by the certified power iteration of ``top_sv``, the uncertified ones by ``_gram_fallback``.
    No step norms: ‖J_t‖ would need J_t.

    xa (B, T, d), h0a (B, D), H (B, T, D) (the simulated states); dL_dhT (B, D) or None.
    Returns a dict of (B, T) arrays ``log_jac_norm`` (and ``log_dL_dh_norm``).
    """
    from .._blas import limit_blas_threads
    from ..kernels import grad_numba
    from ..kernels.parallel import launch

    B, T, _ = xa.shape
    D = model.hidden
    # time steps per chunk: the chunk's P_t are kept for the norms, so at most
    # JACOBIAN_CHUNK_ENTRIES float64 entries (n·D²), as for the J_t of the other path
    chunk = int(chunk or min(config.GRADIENT_REVERSE_CHUNK, max(1, config.JACOBIAN_CHUNK_ENTRIES // (D * D))))
    U = np.ascontiguousarray(model.U, dtype=np.float64)
    a, sigma = irnn_step_form(model)
    table = model.eta_table(T)
    bounds = _row_blocks(D)
    nb = bounds.shape[0] - 1
    out = {"log_jac_norm": np.empty((B, T))}
    if dL_dhT is not None:
        out["log_dL_dh_norm"] = np.empty((B, T))
    rng = np.random.default_rng(0)
    u0 = rng.standard_normal(D)
    with limit_blas_threads(1), np.errstate(all="ignore"):
        for b in range(B):
            c = xa[b] @ model.W.T + model.b                          # (T, D)
            P = np.eye(D)
            blog = np.zeros(nb)
            useg = np.broadcast_to(u0, (nb, D)).copy()
            g = np.empty(0) if dL_dhT is None else np.ascontiguousarray(dL_dhT[b])
            hi = T
            while hi > 0:
                lo = max(0, hi - chunk)
                n = hi - lo
                hp = previous_states(h0a[b], H[b], lo, hi)
                dpe, keep = irnn_linearisation(model, U, c[lo:hi], hp, table, lo)
                S = np.empty((n, D, D))
                Slog = np.empty((n, nb))
                launch(grad_numba.irnn_reverse_chunk, U, dpe, keep, a, sigma, P, blog, S, Slog, bounds)
                sig = np.empty(n)
                ok = np.empty(n, dtype=np.bool_)
                lscale = np.empty(n)
                glog = np.empty(n)
                launch(grad_numba.block_stack_norms, S, Slog, bounds, g, useg, config.NORM_RTOL, config.NORM_MAXIT,
                       sig, ok, lscale, glog)
                useg[:] = useg[0]                                   # the earliest time's vector goes on
                if not ok.all():
                    _gram_fallback(S, ok, sig, useg[0])
                out["log_jac_norm"][b, lo:hi] = lscale + _log(sig)
                if dL_dhT is not None:
                    out["log_dL_dh_norm"][b, lo:hi] = glog
                hi = lo
                progress("gradient flow (steps)", b * T + T - lo, B * T)
    return out


def _chunk_steps(B: int, D: int, T: int) -> int:
    return int(max(1, min(T, config.JACOBIAN_CHUNK_ENTRIES // max(1, B * D * D))))


def log_ratio(log1, logT, T: int):
    """ln(‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T−1)‖) = log1 − logT, with the limit −∞ where ∂h_T/∂h_1 = 0.

    ∂h_T/∂h_1 = J_T ⋯ J_2 contains ∂h_T/∂h_(T−1) = J_T, so the denominator vanishes only with the
    numerator; the quotient 0/0 is then defined by its limit along U → εU, ε → 0: the numerator
    is O(ε^(T−1)), the denominator O(ε), so the ratio → 0 (ln → −∞) for T > 2.  (For T = 2 the
    two are the same matrix and the ratio is 1.)"""
    log1 = np.asarray(log1, dtype=float)
    logT = np.asarray(logT, dtype=float)
    if T == 2:
        return np.zeros(np.broadcast(log1, logT).shape)
    with np.errstate(invalid="ignore"):
        lr = log1 - logT
    return np.where(np.isneginf(log1) & np.isneginf(logT), -np.inf, lr)


def _finish(out: dict, B: int, T: int) -> dict:
    """Derived quantities from the per-time logs: norms, the ratio, ∂L/∂h_1."""
    log_jac = out["log_jac_norm"]
    with np.errstate(over="ignore", invalid="ignore"):
        res = {"log_jac_norm": log_jac, "jac_norm": np.exp(log_jac),
               "ratio": np.exp(log_ratio(log_jac[:, 0], log_jac[:, T - 2], T))}
        if "step_norm" in out:
            res["step_norm"] = out["step_norm"]
        if "log_dL_dh_norm" in out:
            res["log_dL_dh_norm"] = out["log_dL_dh_norm"]
            res["dL_dh_norm"] = np.exp(out["log_dL_dh_norm"])
            res["dL_dh1_norm"] = res["dL_dh_norm"][:, 0]
    return res


@blas_threads("GRADIENT_BLAS_THREADS")
def jacobian_norms(J, *, dL_dhT=None, backend=None) -> dict:
    """Norms of the backward products of a given Jacobian stack (the array-level layer).

    P_t = J_T ⋯ J_{t+1} (P_T = I) for t = 1..T in one backward pass; see the module docstring
    for the scaling and the 2-norm methods.

    Parameters
    ----------
    J : (T, D, D) or (B, T, D, D) array — J[..., t−1, :, :] = ∂h_t/∂h_{t-1}, T ≥ 2
    dL_dhT : (D,) or (B, D) array, optional — ∂L/∂h_T
    backend : "numpy" | "numba" (default)

    Returns
    -------
    dict of NumPy arrays with a leading (B,) axis only when J has one:
    ``jac_norm``, ``log_jac_norm``, ``step_norm`` (…, T); ``ratio`` (…) =
    ‖∂h_T/∂h_1‖₂/‖∂h_T/∂h_{T−1}‖₂; with ``dL_dhT`` also ``dL_dh_norm``, ``log_dL_dh_norm``
    (…, T) and ``dL_dh1_norm`` (…).

    Example
    -------
    >>> J = np.tile(0.9 * np.eye(2), (50, 1, 1))
    >>> jacobian_norms(J)["jac_norm"][0]         # 0.9**49
    """
    backend = resolve_backend(backend)
    arr, batched = jacobian_stack(J)
    B, T, D, _ = arr.shape
    if T < 2:
        raise ParameterError("J", f"needs at least 2 time steps for ∂h_T/∂h_(T-1), got {T}")
    g = _check_cotangent(dL_dhT, B, D, batched)
    acc = BackwardNorms(B, D, backend="numpy" if backend == "numpy" else "numba", dL_dhT=g)
    out = _run_chunks(acc, lambda lo, hi: arr[:, lo:hi], B, D, T)
    res = _finish(out, B, T)
    return res if batched else {k: v[0] for k, v in res.items()}


def _run_chunks(acc: BackwardNorms, get_J, B: int, D: int, T: int) -> dict:
    """Feed J for blocks of times from the end backwards; stitch the per-time outputs."""
    n = _chunk_steps(B, D, T)
    out = {}
    hi = T
    while hi > 0:
        lo = max(0, hi - n)
        part = acc.feed(get_J(lo, hi))
        for k, v in part.items():
            out.setdefault(k, np.empty((B, T)))[:, lo:hi] = v
        hi = lo
        progress("gradient flow (steps)", T - lo, T)
    return out


def _check_flag(value, name: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ParameterError(name, f"must be True or False, got {value!r}")


def _check_cotangent(dL_dhT, B: int, D: int, batched: bool):
    if dL_dhT is None:
        return None
    try:
        g = np.asarray(dL_dhT, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError("dL_dhT", f"must be a numeric array ({exc})") from None
    if g.ndim == 1 and g.shape == (D,):
        g = np.broadcast_to(g, (B, D))
    if g.shape != (B, D):
        want = f"({D},) or ({B}, {D})" if batched else f"({D},)"
        raise ParameterError("dL_dhT", f"must have shape {want}, got {np.shape(dL_dhT)}")
    if not np.all(np.isfinite(g)):
        raise ParameterError("dL_dhT", "contains a non-finite value")
    return np.ascontiguousarray(g)


@blas_threads("GRADIENT_BLAS_THREADS")
def gradient_norms(model, x, h0=None, *, backend=None, dL_dhT=None, step_norms=True, command=None):
    """‖∂h_T/∂h_t‖₂ for every t = 1..T, the step norms and the iRNN paper's ratio, as a Dataset.

    P_t = ∂h_T/∂h_t = J_T ⋯ J_{t+1}, J_t = ∂h_t/∂h_{t-1} (closed form, ``jacobian_at``), all
    t in one backward pass P_t = P_{t+1} J_{t+1} from P_T = I (module docstring: scaling,
    2-norm methods and their accuracy, memory).

    Parameters
    ----------
    model : dynlab model
    x : (T, d) or (B, T, d) array, T ≥ 2 ((T,) when d = 1)
    h0 : (D,) or (B, D) array, optional (zeros)
    backend : "numpy" | "numba" (default) | "cupy" (the Jacobians on the GPU, the products on CPU)
    dL_dhT : (D,) or (B, D) array, optional — a loss gradient ∂L/∂h_T; adds ‖∂L/∂h_t‖
    step_norms : bool — also ‖∂h_t/∂h_{t-1}‖₂ for every t (default).  False leaves
        ``step_norm`` out and, for an iRNN with D > ``config.GRADIENT_NUMBA_MAX_HIDDEN`` under
        the numba backend, runs the curve in reverse mode without forming any J_t
        (``irnn_reverse_norms``: K products per step instead of K + 1, parallel over row
        blocks; ≈ 3× faster at D = 128, K = 5, BENCHMARKS.md ``gradnorm``)
    command : str, optional — recorded in the attrs

    Returns
    -------
    xarray.Dataset (leading ``batch`` only for a batched x):
    ``jac_norm`` ((batch,) time) ‖∂h_T/∂h_t‖₂ (t = T gives 1), ``log_jac_norm`` its natural
    log (finite where jac_norm under/overflows), ``step_norm`` ((batch,) time) ‖∂h_t/∂h_{t-1}‖₂,
    ``ratio`` ((batch,)) ‖∂h_T/∂h_1‖₂/‖∂h_T/∂h_{T−1}‖₂ (iRNN paper Fig. 3b); with ``dL_dhT``:
    ``dL_dhT``, ``dL_dh_norm`` ((batch,) time) ‖∂L/∂h_t‖₂ and ``dL_dh1_norm`` ((batch,)); plus
    ``h``, ``x``, ``h0``, the parameters and the attrs of docs/design.md, *Data contract* (``norm_method``,
    ``norm_rtol``, ``gradient_kernel``).  Raises ParameterError naming ``x`` when T < 2,
    DivergenceError when the state becomes non-finite.

    Example
    -------
    >>> m = make_model("irnn", hidden=2, inputs=1, K=5, eta=0.5, seed=0)
    >>> g = gradient_norms(m, random_walk(steps=1000, inputs=1, variance=10.0, seed=0))
    >>> float(g.ratio)
    """
    import xarray as xr

    from .._dataset import base_attrs, finish

    backend = resolve_backend(backend)
    from ..simulation import check_input, check_model
    model = check_model(model)
    xa, batched = check_input(x, model.inputs)
    B, T, _ = xa.shape
    if T < 2:
        raise ParameterError("x", f"needs at least 2 time steps (T ≥ 2) for ∂h_T/∂h_(T-1), got T={T}")
    D = model.state_size
    from .._resources import check_gradients
    check_gradients(model, B, T)  # before simulating: refuses what cannot fit or finish
    g = _check_cotangent(dL_dhT, B, D, batched)
    step_norms = _check_flag(step_norms, "step_norms")
    xa, batched, h0a, H, ds = prepared_states(model, x, h0, backend)
    method = "numpy" if backend == "numpy" else "numba"
    if not step_norms and backend == "numba" and isinstance(model, IRNN) and D > config.GRADIENT_NUMBA_MAX_HIDDEN:
        out = _finish(irnn_reverse_norms(model, xa, h0a, H, dL_dhT=g), B, T)
        kernel = "reverse"
    else:
        acc = BackwardNorms(B, D, backend=method, dL_dhT=g, step_norms=step_norms)
        out = _finish(_run_chunks(acc, jacobian_blocks(model, xa, h0a, H, backend), B, D, T), B, T)
        kernel = acc.path

    lead = ("batch",) if batched else ()
    sel = slice(None) if batched else 0
    ds["jac_norm"] = xr.Variable(lead + ("time",), out["jac_norm"][sel],
                                 {"long_name": "‖∂h_T/∂h_t‖₂", "units": "1"})
    ds["log_jac_norm"] = xr.Variable(lead + ("time",), out["log_jac_norm"][sel],
                                     {"long_name": "ln ‖∂h_T/∂h_t‖₂", "units": "1"})
    if step_norms:
        ds["step_norm"] = xr.Variable(lead + ("time",), out["step_norm"][sel],
                                      {"long_name": "‖∂h_t/∂h_(t-1)‖₂", "units": "1"})
    ds["ratio"] = xr.Variable(lead, out["ratio"][sel],
                              {"long_name": "‖∂h_T/∂h_1‖₂ / ‖∂h_T/∂h_(T-1)‖₂", "units": "1"})
    if g is not None:
        ds["dL_dhT"] = xr.Variable(lead + ("unit",), g[sel], {"long_name": "loss gradient ∂L/∂h_T", "units": "1"})
        ds["dL_dh_norm"] = xr.Variable(lead + ("time",), out["dL_dh_norm"][sel],
                                       {"long_name": "‖∂L/∂h_t‖₂", "units": "1"})
        ds["dL_dh1_norm"] = xr.Variable(lead, out["dL_dh1_norm"][sel], {"long_name": "‖∂L/∂h_1‖₂", "units": "1"})
    ds.attrs.update(base_attrs(backend, command))
    ds.attrs["norm_method"] = NORM_METHODS[method].format(tol=config.NORM_RTOL)
    ds.attrs["norm_rtol"] = 0.0 if method == "numpy" else float(config.NORM_RTOL)
    ds.attrs["gradient_kernel"] = kernel
    ds.attrs["step_norms"] = int(step_norms)
    ds.attrs["steps"] = T
    return finish(ds, "gradient_norms")


__all__ = ["gradient_norms", "jacobian_norms", "BackwardNorms", "NORM_METHODS", "irnn_reverse_norms"]

"""A random initial state of a piecewise-affine RNN (MASO paper §6): 𝒜_h = ∂h_T/∂h_0, the loss
gradient ∂L/∂h_0 (eq. 10), the regulariser a random h_0 ~ N(0, σ²I) adds to the loss (Theorem 3,
corrected and as printed) and its antithetic Monte-Carlo estimate; on ``dynlab.analysis.partition``'s
forward and reverse passes.
"""
from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..errors import ParameterError
from ..models import Stack
from .partition import LOSSES, _check_readout, _reverse_chunked, forward

def initial_state_jacobian(model, x, h0=None, *, backend=None) -> np.ndarray:
    """𝒜_h = ∂h_T/∂h_0 = ∏_{s=T}^{1} A_σ^(s) W_r (MASO §6) for each sequence.

    For a gated cell the factor is J_s = a I + c diag(φ'(z_s)) R.  For L layers h_0 is the
    concatenation of every layer's initial state and 𝒜_h = ∂h^(L)_T/∂[h^(1)_0, …, h^(L)_0].

    Returns (…, D, L·D) (leading (B,) only for a batched x).
    """
    with get_backend(backend):
        tr = forward(model, x, h0, backend=backend)
        D = tr.layers[-1].hidden
        r = _reverse_chunked(tr, np.eye(D))
        Ah = np.concatenate(r["dh0"], axis=-1)
        return Ah if tr.batched else Ah[0]


def _check_targets(y, N: int, C: int, loss: str) -> np.ndarray:
    if loss == "mse":
        arr = np.asarray(y, dtype=np.float64)
        if arr.ndim == 1 and C == 1:
            arr = arr[:, None]
        if arr.shape != (N, C):
            raise ParameterError("y", f"½-MSE targets must have shape ({N}, {C}), got {np.shape(y)}")
        if not np.all(np.isfinite(arr)):
            raise ParameterError("y", "contains a non-finite value")
        return arr
    arr = np.asarray(y)
    if arr.shape != (N,) or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError("y", f"cross-entropy targets must be {N} integer class labels, got shape "
                                  f"{np.shape(y)}, dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= C:
        raise ParameterError("y", f"class labels must lie in 0..{C - 1}")
    return arr.astype(np.int64)


def _check_loss(loss: str) -> str:
    key = str(loss).strip().lower()
    if key not in LOSSES:
        raise ParameterError("loss", f"must be 'mse' (½‖z − y‖²) or 'ce' (softmax cross-entropy), got {loss!r}")
    return key


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def losses(z, y, loss: str) -> np.ndarray:
    """Per-sequence losses: ½‖z − y‖² (``mse``) or −log softmax(z)_y (``ce``); (…, C) → (…)."""
    if loss == "mse":
        return 0.5 * np.sum((z - y) ** 2, axis=-1)
    zmax = z.max(axis=-1, keepdims=True)
    lse = zmax[..., 0] + np.log(np.sum(np.exp(z - zmax), axis=-1))
    return lse - np.take_along_axis(z, y[..., None], axis=-1)[..., 0]


def _prepare(model, x, y, W_out, b_out, loss, h0, backend):
    loss = _check_loss(loss)
    tr = forward(model, x, h0, backend=backend)
    Wo, bo = _check_readout(W_out, b_out, tr.layers[-1].hidden)
    yy = _check_targets(y, tr.x.shape[0], Wo.shape[0], loss)
    return loss, tr, Wo, bo, yy


def loss_gradient_h0(model, x, y, W_out, b_out=None, *, loss: str = "mse", h0=None, backend=None) -> dict:
    """∂L/∂h_0 = (∂L/∂z) W_out 𝒜_h for L = (1/N) Σ_n ℓ(z_n, y_n), z_n = W_out h_T + b_out (eq. 10).

    Parameters
    ----------
    model, x (N sequences), h0, backend : as ``forward``
    y : (N, C) targets (``mse``) or (N,) integer labels (``ce``)
    W_out (C, D), b_out (C,) : the read-out;  loss : "mse" (½‖z − y‖²) or "ce"

    Returns dict: ``dL_dh0`` (N, L·D), ``dL_dz`` (N, C), ``M`` (N, C, L·D) = ∂z/∂h_0 = W_out 𝒜_h,
    ``loss`` (the mean loss L).
    """
    with get_backend(backend):
        loss, tr, Wo, bo, yy = _prepare(model, x, y, W_out, b_out, loss, h0, backend)
        N = tr.x.shape[0]
        z = tr.H[-1][:, -1] @ Wo.T + bo
        if loss == "mse":
            dz = (z - yy) / N
        else:
            dz = _softmax(z)
            dz[np.arange(N), yy] -= 1.0
            dz /= N
        M = np.concatenate(_reverse_chunked(tr, Wo)["dh0"], axis=-1)
        return {"dL_dh0": np.einsum("nc,ncj->nj", dz, M), "dL_dz": dz, "M": M,
                "loss": float(np.mean(losses(z, yy, loss)))}


def random_h0_regulariser(model, x, y, W_out, b_out=None, *, sigma: float, loss: str = "mse", h0=None,
                          printed: bool = False, backend=None) -> dict:
    """The regulariser ℛ = E_ε[L̃] − L of a random initial state h_0 + ε, ε ~ N(0, σ² I) (MASO Thm. 3).

    Corrected forms (M_n = ∂z_n/∂h_0 = W_out 𝒜_h, the output layer included):

    * ½-MSE:  ℛ = σ²/(2N) Σ_n ‖M_n‖²_F — exact for a piecewise-linear network as long as ε
      leaves the partition unchanged (z is then affine in ε);
    * cross-entropy:  ℛ ≈ σ²/(2N) Σ_n Tr(M_nᵀ (diag p_n − p_n p_nᵀ) M_n), p_n = softmax(z_n):
      the second-order term (the Hessian of log Σ exp is diag p − ppᵀ); error O(σ⁴).

    ``printed=True`` evaluates the theorem as printed: ½-MSE σ²/(2N) Σ ‖𝒜_h‖²_F and
    cross-entropy σ²/(2N) Σ_n ‖diag(p_n,i (1 − p_n,i)) 𝒜_h‖²_F.  Both omit W_out; the
    cross-entropy form is defined only when the number of classes C equals D (the paper's 𝒜_h
    stands where W_out 𝒜_h belongs) and, even with W_out = I, it squares the diagonal of the
    softmax Jacobian and drops the −ppᵀ coupling, so it does not equal E[L̃] − L
    (docs/background/errata.md).

    Returns dict: ``value`` ℛ, ``per_sequence`` (N,) the summands σ²/2·(…), ``loss`` L.
    """
    with get_backend(backend):
        sigma = float(sigma)
        if not np.isfinite(sigma) or sigma < 0:
            raise ParameterError("sigma", f"must be a finite number ≥ 0, got {sigma}")
        loss, tr, Wo, bo, yy = _prepare(model, x, y, W_out, b_out, loss, h0, backend)
        N = tr.x.shape[0]
        z = tr.H[-1][:, -1] @ Wo.T + bo
        p = _softmax(z)
        if printed:
            D = tr.layers[-1].hidden
            Ah = np.concatenate(_reverse_chunked(tr, np.eye(D))["dh0"], axis=-1)
            if loss == "mse":
                per = np.sum(Ah ** 2, axis=(1, 2))
            else:
                if Wo.shape[0] != D:
                    raise ParameterError("W_out", f"the printed cross-entropy form ‖diag(p(1−p)) 𝒜_h‖² needs as many "
                                                  f"classes as hidden units (C = D = {D}), got C = {Wo.shape[0]}")
                per = np.sum(((p * (1 - p))[:, :, None] * Ah) ** 2, axis=(1, 2))
        else:
            M = np.concatenate(_reverse_chunked(tr, Wo)["dh0"], axis=-1)
            if loss == "mse":
                per = np.sum(M ** 2, axis=(1, 2))
            else:
                pM = np.einsum("nc,ncj->nj", p, M)
                per = np.einsum("nc,ncj,ncj->n", p, M, M) - np.sum(pM ** 2, axis=1)
        per = 0.5 * sigma ** 2 * per
        return {"value": float(per.sum() / N), "per_sequence": per, "loss": float(np.mean(losses(z, yy, loss)))}


def random_h0_monte_carlo(model, x, y, W_out, b_out=None, *, sigma: float, loss: str = "mse", pairs: int = 256,
                          seed: int | None = 0, h0=None, backend=None) -> dict:
    """Monte-Carlo estimate of E_ε[L̃] − L with antithetic pairs (the reference for Thm. 3).

    For each pair k, one ε_k,n ~ N(0, σ² I) per sequence n (and layer), and
    Δ_k = ½(L(h_0 + ε_k) + L(h_0 − ε_k)) − L(h_0); the antithetic pair cancels the first-order
    term exactly, so Δ_k carries only the even orders.  Estimate mean_k Δ_k, standard error
    std_k(Δ_k)/√pairs.  ``changed_fraction``: the fraction of perturbed runs whose partition
    codes differ from the unperturbed run's (then the piecewise-linear expansion does not hold).

    Returns dict: ``estimate``, ``stderr``, ``pairs``, ``changed_fraction``, ``loss``.
    """
    with get_backend(backend):
        from .._validate import as_int

        sigma = float(sigma)
        if not np.isfinite(sigma) or sigma < 0:
            raise ParameterError("sigma", f"must be a finite number ≥ 0, got {sigma}")
        pairs = as_int(pairs, "pairs", low=2)
        loss, tr, Wo, bo, yy = _prepare(model, x, y, W_out, b_out, loss, h0, backend)
        N, T, d = tr.x.shape
        L, D = len(tr.layers), tr.layers[0].hidden
        base_loss = float(np.mean(losses(tr.H[-1][:, -1] @ Wo.T + bo, yy, loss)))
        base_codes = tr.codes()
        rng = np.random.default_rng(seed)
        chunk = max(1, min(pairs, (1 << 20) // max(1, 2 * N * T * D * L)))
        deltas, changed, runs = [], 0, 0
        done = 0
        while done < pairs:
            P = min(chunk, pairs - done)
            eps = sigma * rng.standard_normal((P, L, N, D))
            xs = np.broadcast_to(tr.x, (2 * P, N, T, d)).reshape(2 * P * N, T, d)
            h0s = [np.concatenate([(tr.h0[ell] + eps[:, ell]), (tr.h0[ell] - eps[:, ell])]).reshape(2 * P * N, D)
                   for ell in range(L)]
            model_in = tr.layers[0] if L == 1 else Stack(tr.layers)
            pt = forward(model_in, xs, h0s if L > 1 else h0s[0], backend=backend)
            zz = pt.H[-1][:, -1] @ Wo.T + bo
            ll = losses(zz, np.tile(yy, (2 * P,) + (1,) * (yy.ndim - 1)), loss).reshape(2, P, N).mean(axis=2)
            deltas.append(0.5 * (ll[0] + ll[1]) - base_loss)
            codes = pt.codes().reshape((2 * P, N) + base_codes.shape[1:])
            changed += int(np.sum(np.any((codes != base_codes[None]).reshape(2 * P, N, -1), axis=2)))
            runs += 2 * P * N
            done += P
        delta = np.concatenate(deltas)
        return {"estimate": float(delta.mean()), "stderr": float(delta.std(ddof=1) / np.sqrt(pairs)),
                "pairs": pairs, "changed_fraction": changed / runs, "loss": base_loss}

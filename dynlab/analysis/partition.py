"""Max-affine spline (MASO) analysis of piecewise-affine RNNs (Wang et al., MASO paper).

A cell h_t = a h_{t-1} + c φ(R h_{t-1} + W x_t + b) with a max-affine activation φ (relu,
leaky-relu, abs, identity) is, given the affine piece every unit is on, *exactly* affine:
φ(z) = s ⊙ z with the slopes s = φ'(z) (these activations have no offset), so

    h_t = J_t h_{t-1} + Jx_t x_t + β_t,   J_t = a I + c diag(s_t) R  (= A_σ W_r for the RNN),
                                          Jx_t = c diag(s_t) W,  β_t = c s_t ⊙ b.

Unrolled over t = 1..T (MASO Theorem 1) the whole state sequence is h = A_RNN x + B_RNN with
block (t, s) of A_RNN equal to 𝒜_{s:t} Jx_s, 𝒜_{s:t} = J_t ⋯ J_{s+1}, and
B_RNN,t = Σ_s 𝒜_{s:t} β_s + 𝒜_{0:t} h_0; L layers compose (Theorem 2):
A_RNN = A^(L) ⋯ A^(1), B_RNN = Σ_ℓ A^(L) ⋯ A^(ℓ+1) B^(ℓ).  Stacking order: dynlab stacks
h = [h_1; …; h_T] in *increasing* time (the paper stacks T first); A_RNN is then block lower
triangular instead of upper — the same matrix with rows and columns reversed.

What this module computes
-------------------------
* ``partition`` (the Dataset of ``dynlab partition``): partition ``codes`` — the affine piece
  index of every unit at every step and layer (``dynlab.activations.piece``) — the number of
  distinct codes seen so far (``regions``), the number of distinct prefix codes over a batch
  (``prefix_regions``), and the exact ``reconstruction_error`` of A_RNN x + B_RNN.
* ``affine_form``: A_RNN, B_RNN per sequence (materialised; for small T·D).
* ``templates``: dz/dx for z = W_out h_T + b_out by reverse-mode products (never the
  (T·D)×(T·d) matrix), with z_c = ⟨template_c, x⟩ + bias_c exactly.
* ``hamming_distances``, ``count_regions``.

Beside it: ``partition_h0`` (``initial_state_jacobian`` 𝒜_h = ∂h_T/∂h_0 (= ∏ A_σ W_r),
``loss_gradient_h0``, ``random_h0_regulariser`` (Theorem 3, corrected and as printed),
``random_h0_monte_carlo`` (antithetic Monte-Carlo estimate of E[L̃] − L)) and ``partition_codes``
(``embed_codes`` (PCA, t-SNE), ``knn_accuracy`` (numpy k-NN)); their names are reached from here too.

Models: ``rnn``, ``rin``, ``fastrnn``, ``antisymmetric`` (all of the gated form above) and
``Stack`` of one-line layers (L ``rnn`` layers); activations relu, leaky-relu, abs, identity.  A smooth
activation (tanh, sigmoid) has no partition: asking for codes raises ``ParameterError``.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._dataset import finish
from .._progress import progress
from ..activations import MAX_AFFINE, dphi, piece
from ..backends import get_backend
from ..errors import DivergenceError, ParameterError
from ..models import Model

LOSSES = ("mse", "ce")
#: Materialise A_RNN for the reconstruction check up to this many float64 entries (B·T·D·T·d).
MATERIALISE_MAX_ENTRIES = 1 << 24
#: Entries of the (B, C, T, D) cotangent block held at once by the multi-layer reverse pass.
REVERSE_CHUNK_ENTRIES = 1 << 24


# ============================================================================ validation
def model_layers(model) -> tuple:
    """The layers of a model the MASO analysis accepts, or a ParameterError.

    One-layer one-line cells (rnn, rin, fastrnn, antisymmetric) and stacks of them; every layer's
    activation must be a max-affine spline (relu, leaky-relu, abs, identity).
    """
    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model, got {type(model).__name__}")
    form = model.form() if model.SEQUENCE else None
    layers = model.layers if form is not None and form.kind == "stack" else (model,)
    if form is None or any(m.form().kind != "cell" for m in layers):
        raise ParameterError("model", f"the MASO partition analysis takes rnn, rin, fastrnn, antisymmetric or a "
                                      f"stack of them (h_t = a h_(t-1) + c φ(R h_(t-1) + W x_t + b)); "
                                      f"got {model.name!r}")
    for ell, m in enumerate(layers):
        if m.activation not in MAX_AFFINE:
            where = f" (layer {ell + 1})" if len(layers) > 1 else ""
            raise ParameterError("activation", f"{m.activation!r}{where} is not a max-affine spline: it has no "
                                               f"partition codes or exact affine form; use one of "
                                               f"{', '.join(MAX_AFFINE)}")
    return tuple(layers)


def _check_h0s(h0, layers, B: int) -> list:
    from ..simulation import check_h0

    L, D = len(layers), layers[0].hidden
    if h0 is None:
        return [np.zeros((B, D)) for _ in range(L)]
    if L == 1:
        return [check_h0(h0, B, D)]
    if isinstance(h0, (list, tuple)) and len(h0) == L:
        return [check_h0(h, B, D) for h in h0]
    arr = np.asarray(h0, dtype=np.float64) if not isinstance(h0, (list, tuple)) else None
    if arr is not None and arr.ndim in (1, 2) and arr.shape[-1] == L * D:   # the stack's state, as simulate takes it
        return [check_h0(arr[..., ell * D:(ell + 1) * D], B, D) for ell in range(L)]
    if arr is not None and arr.ndim in (2, 3) and arr.shape[0] == L:
        return [check_h0(arr[ell], B, D) for ell in range(L)]
    raise ParameterError("h0", f"a {L}-layer model takes one initial state per layer: a sequence of {L} arrays "
                               f"of shape ({D},) or ({B}, {D}), or one array of shape ({L}, {D}) or ({L}, {B}, {D})")


# ============================================================================ forward pass
@dataclasses.dataclass
class Trace:
    """The forward pass of a (stacked) piecewise-affine RNN with everything the analyses need.

    ``x`` (B, T, d); per layer ℓ (lists of length L): ``h0`` (B, D), ``H`` (B, T, D) the states
    h^(ℓ)_1..T from dynlab's simulation kernels, ``Z`` the pre-activations
    R h_{t-1} + W h^(ℓ-1)_t + b, ``S`` the slopes φ'(Z), ``P`` the piece indices (int8).
    """

    layers: tuple
    x: np.ndarray
    batched: bool
    h0: list
    H: list
    Z: list
    S: list
    P: list
    #: the backend the trace ran on (its reverse passes run there too)
    backend: object = None

    @property
    def shape(self):
        return self.x.shape

    def layer_input(self, ell: int) -> np.ndarray:
        return self.x if ell == 0 else self.H[ell - 1]

    def codes(self) -> np.ndarray:
        """(B, T, D) for one layer, (B, T, D, L) for several."""
        return self.P[0] if len(self.P) == 1 else np.stack(self.P, axis=-1)

    def states(self) -> np.ndarray:
        return self.H[0] if len(self.H) == 1 else np.stack(self.H, axis=-1)


def forward(model, x, h0=None, *, backend=None) -> Trace:
    """Run the model (layer by layer, dynlab's kernels) and record pre-activations and pieces.

    Parameters
    ----------
    model : rnn / rin / fastrnn / antisymmetric model or a stack of them, max-affine activation
    x : (T, d) or (B, T, d) array
    h0 : initial state(s): (D,) or (B, D); for L > 1 layers a sequence of L of those, or the
        stack's whole state (L·D,) or (B, L·D), layers bottom first (what ``simulate`` takes)
    backend : "numpy" | "numba" (default)

    Returns a ``Trace``; raises ``DivergenceError`` (step, sequence) on a non-finite state.
    """
    from ..simulation import check_input

    layers = model_layers(model)
    be = get_backend(backend)
    forms = [m.form() for m in layers]
    for f in forms:
        be.require("partition_trace", f)
    xa, batched = check_input(x, layers[0].inputs)
    B, T, _ = xa.shape
    from .._resources import check_memory, check_work, largest, nbytes, shape_text, simulation_work

    D = max(m.hidden for m in layers)
    check_work(sum(simulation_work(m, B, T)[0] for m in layers), largest(batch=B, steps=T / 100, hidden=D * D),
               f"the partition trace (B×T = {B}×{T} steps of {len(layers)} layer(s) of D ≤ {D})")
    check_memory(4 * len(layers) * nbytes(B, T, D), largest(batch=B, steps=T, hidden=D),
                 f"the partition trace (4 arrays of B×T×D = {shape_text(B, T, D)} float64 per layer: states, "
                 f"pre-activations, slopes, pieces; {len(layers)} layer(s))")
    h0s = _check_h0s(h0, layers, B)
    Hs, Zs, Ss, Ps = [], [], [], []
    progress("partition trace (layers)", 0, len(layers))
    with be:
        trace = be.partition_trace(forms, xa, h0s)
    for ell, (m, (H, bad, Z)) in enumerate(zip(layers, trace)):
        if int(bad.min()) < T:
            where = f" in layer {ell + 1}" if len(layers) > 1 else ""
            raise DivergenceError(step=int(bad.min()) + 1, batch=int(np.argmin(bad)), model=m.name + where)
        Hs.append(H)
        Zs.append(Z)
        Ss.append(dphi(m.activation, Z, m.leak))
        Ps.append(piece(m.activation, Z))
        progress("partition trace (layers)", ell + 1, len(layers))
    return Trace(layers, xa, batched, h0s, Hs, Zs, Ss, Ps, be)


def partition_codes(model, x, h0=None, *, backend=None) -> np.ndarray:
    """Affine-piece index of every unit at every step (and layer): (…, T, D[, L]) int8.

    relu/leaky-relu/abs: 1 where the pre-activation is ≥ 0, 0 where it is < 0; identity: 0.
    Leading (B,) axis only for a batched x.  A tanh/sigmoid model raises ``ParameterError``.
    """
    backend = get_backend(backend)      # resolved once; the object goes down
    with backend:
        tr = forward(model, x, h0, backend=backend)
        c = tr.codes()
        return c if tr.batched else c[0]


# ============================================================================ regions, distances
def count_regions(codes) -> tuple[np.ndarray, np.ndarray]:
    """Distinct codes seen so far, over time.

    Parameters
    ----------
    codes : (B, T, …) integer array (per-step codes of B sequences)

    Returns
    -------
    regions : (T,) — the number of distinct per-step codes c_{b,s} over all b and s ≤ t (the
        linear regions of the one-step map visited so far);
    prefix_regions : (T,) — the number of distinct prefix codes (c_{b,1}, …, c_{b,t}) over the
        batch: the cells of the input-sequence partition (Theorem 1) the batch occupies at t.
    Both are non-decreasing in t.
    """
    c = np.asarray(codes)
    if c.ndim < 2:
        raise ParameterError("codes", f"must have shape (B, T, ...), got {c.shape}")
    B, T = c.shape[:2]
    flat = c.reshape(B * T, -1)
    _, ids = np.unique(flat, axis=0, return_inverse=True)
    ids = ids.reshape(B, T)
    first = np.full(ids.max() + 1, T, dtype=np.int64)
    np.minimum.at(first, ids.ravel(), np.broadcast_to(np.arange(T), (B, T)).ravel())
    regions = np.cumsum(np.bincount(first, minlength=T)[:T])
    prefix = np.empty(T, dtype=np.int64)
    g = np.zeros(B, dtype=np.int64)
    for t in range(T):
        _, g = np.unique(np.stack([g, ids[:, t]], axis=1), axis=0, return_inverse=True)
        g = g.reshape(B)
        prefix[t] = g.max() + 1
    return regions, prefix


def hamming_distances(codes_a, codes_b=None) -> np.ndarray:
    """Pairwise Hamming distances between codes: the number of entries that differ.

    Parameters
    ----------
    codes_a : (Na, …) integer array;  codes_b : (Nb, …), default ``codes_a``

    Returns (Na, Nb) int64.  Computed as K − Σ_p [a = p]·[b = p] over the piece values p (one
    matrix product per value), exact for any number of pieces.
    """
    a = np.asarray(codes_a)
    b = a if codes_b is None else np.asarray(codes_b)
    a = a.reshape(a.shape[0], -1)
    b = b.reshape(b.shape[0], -1)
    if a.shape[1] != b.shape[1]:
        raise ParameterError("codes_b", f"codes have {b.shape[1]} entries but codes_a have {a.shape[1]}")
    same = np.zeros((a.shape[0], b.shape[0]))
    for p in np.union1d(np.unique(a), np.unique(b)):
        same += (a == p).astype(np.float64) @ (b == p).astype(np.float64).T
    return (a.shape[1] - np.rint(same)).astype(np.int64)


# ============================================================================ affine form
def _layer_matrix(m, S, h0, din):
    """A^(ℓ) (B, T, D, T, din) and B^(ℓ) (B, T, D) of one layer (Theorem 1), by the block recursion.

    Block row t = J_t · (block row t−1) with the diagonal block Jx_t; B_t = J_t B_{t−1} + β_t.
    """
    a, c, R = m.gated_form()
    B, T, D = S.shape
    A = np.zeros((B, T, D, T, din))
    Bv = np.empty((B, T, D))
    prevA = np.zeros((B, D, T, din))
    prevB = h0
    for t in range(T):
        s = c * S[:, t]
        cur = a * prevA + s[:, :, None, None] * np.einsum("ij,bjsk->bisk", R, prevA)
        cur[:, :, t, :] = s[:, :, None] * m.W[None]
        A[:, t] = cur
        Bv[:, t] = a * prevB + s * (prevB @ R.T) + s * m.b
        prevA, prevB = cur, Bv[:, t]
    return A, Bv


def affine_form(model, x, h0=None, *, backend=None) -> dict:
    """The exact affine form h = A_RNN x + B_RNN of each input (MASO Theorems 1–2).

    Parameters
    ----------
    model, x, h0, backend : as ``forward``

    Returns
    -------
    dict of NumPy arrays (leading (B,) only for a batched x):
    ``A`` (…, T·D, T·d) and ``B`` (…, T·D) with h stacked in increasing time, index t·D + i
    for h_{t+1, i} of the last layer; ``h`` (…, T·D) the forward pass; ``error`` (…) the
    reconstruction error max |A x + B − h|.  Memory is O(B·T²·D·d): for long sequences use
    ``templates`` (reverse mode) or ``partition`` (which switches to the recursion).

    Example
    -------
    >>> m = make_model("rnn", 4, 2, activation="relu", seed=0)
    >>> af = affine_form(m, np.random.default_rng(0).standard_normal((10, 2)))
    >>> af["error"] < 1e-12
    True
    """
    backend = get_backend(backend)      # resolved once; the object goes down
    with backend:
        tr = forward(model, x, h0, backend=backend)
        from .._resources import check_memory, nbytes, shape_text

        B, T, d = tr.x.shape
        D = tr.layers[-1].hidden
        din = max(d, D if len(tr.layers) > 1 else d)
        check_memory(2 * nbytes(B, T, D, T, din), "x", f"the materialised A_RNN (B×T·D×T·d = "
                                                      f"{shape_text(B, T * D, T * din)} float64, and its build); "
                                                      "use templates or partition for long sequences")
        A, Bv = _compose(tr)
        B, T, d = tr.x.shape
        h = tr.H[-1].reshape(B, -1)
        err = np.max(np.abs(np.einsum("bij,bj->bi", A, tr.x.reshape(B, -1)) + Bv - h), axis=1)
        out = {"A": A, "B": Bv, "h": h, "error": err}
        return out if tr.batched else {k: v[0] for k, v in out.items()}


def _compose(tr: Trace):
    B, T, d = tr.x.shape
    A_tot = None
    B_tot = None
    for ell, m in enumerate(tr.layers):
        din = d if ell == 0 else m.hidden
        A, Bv = _layer_matrix(m, tr.S[ell], tr.h0[ell], din)
        A = A.reshape(B, T * m.hidden, T * din)
        Bv = Bv.reshape(B, T * m.hidden)
        if A_tot is None:
            A_tot, B_tot = A, Bv
        else:
            A_tot = A @ A_tot
            B_tot = np.einsum("bij,bj->bi", A, B_tot) + Bv
    return A_tot, B_tot


def _reconstruct_recursion(tr: Trace) -> np.ndarray:
    """h rebuilt from the affine pieces alone, h_t = J_t h_{t-1} + Jx_t u_t + β_t (no φ): (B, T, D)."""
    inp = tr.x
    for ell, m in enumerate(tr.layers):
        a, c, R = m.gated_form()
        S = tr.S[ell]
        lin = inp @ m.W.T + m.b
        out = np.empty_like(tr.H[ell])
        h = tr.h0[ell]
        for t in range(inp.shape[1]):
            h = a * h + c * S[:, t] * (h @ R.T + lin[:, t])
            out[:, t] = h
        inp = out
    return inp


def reconstruction_error(tr: Trace, method: str = "auto") -> tuple[np.ndarray, str]:
    """max |ĥ − h| per sequence with ĥ = A_RNN x + B_RNN ("matrix") or the same affine map
    evaluated step by step ("recursion"); "auto" materialises when B·T·D·T·d is small."""
    B, T, d = tr.x.shape
    D = tr.layers[-1].hidden
    if method == "auto":
        entries = B * T * D * T * max(d, D if len(tr.layers) > 1 else d)
        method = "matrix" if entries <= MATERIALISE_MAX_ENTRIES else "recursion"
    if method == "matrix":
        with np.errstate(over="ignore", invalid="ignore"):
            A, Bv = _compose(tr)
            rec = (np.einsum("bij,bj->bi", A, tr.x.reshape(B, -1)) + Bv).reshape(B, T, D)
        if not np.isfinite(rec).all() and np.isfinite(tr.H[-1]).all():
            # the products J_t⋯J_s of A_RNN overflow before the states do (states near the float
            # range): the same affine map evaluated step by step stays finite
            return np.max(np.abs(_reconstruct_recursion(tr) - tr.H[-1]), axis=(1, 2)), \
                "recursion (the materialised A_RNN overflowed)"
    elif method == "recursion":
        rec = _reconstruct_recursion(tr)
    else:
        raise ParameterError("reconstruction", f"must be 'auto', 'matrix' or 'recursion', got {method!r}")
    return np.max(np.abs(rec - tr.H[-1]), axis=(1, 2)), method


# ============================================================================ reverse mode
def _check_readout(W_out, b_out, D: int):
    Wo = np.asarray(W_out, dtype=np.float64)
    if Wo.ndim == 1:
        Wo = Wo[None]
    if Wo.ndim != 2 or Wo.shape[1] != D:
        raise ParameterError("W_out", f"must have shape (C, {D}), got {np.shape(W_out)}")
    if not np.all(np.isfinite(Wo)):
        raise ParameterError("W_out", "contains a non-finite value")
    bo = np.zeros(Wo.shape[0]) if b_out is None else np.asarray(b_out, dtype=np.float64).reshape(-1)
    if bo.shape != (Wo.shape[0],):
        raise ParameterError("b_out", f"must have shape ({Wo.shape[0]},), got {np.shape(b_out)}")
    if not np.all(np.isfinite(bo)):
        raise ParameterError("b_out", "contains a non-finite value")
    return Wo, bo


def _layer_backward(m, S, incoming_T, incoming, backend=None):
    """Reverse pass through one layer for a (B, C, D) cotangent (the backend's ``reverse_cotangents``).

    ``incoming_T`` (B, C, D) is the cotangent on h_T only (top layer), ``incoming`` (B, C, T, D)
    the cotangent on every h_t (lower layers); one of them is None.  Returns the cotangent on
    the layer input at every step (B, C, T, din), the offset part Σ_t λ_t β_t (B, C) and
    λ_0 = ∂z/∂h_0 (B, C, D).
    """
    B, T, D = S.shape
    C = (incoming_T if incoming_T is not None else incoming).shape[1]
    lam = np.zeros((B * C, D)) if incoming_T is None else np.array(incoming_T, dtype=np.float64).reshape(B * C, D)
    out, offset = get_backend(backend).reverse_cotangents(m.form(), S, lam, incoming)
    return out, offset.reshape(B, C), lam.reshape(B, C, D)


def reverse(tr: Trace, G) -> dict:
    """Cotangents of y = G h^(L)_T (G (C, D) or (B, C, D)) through the whole stack, without A_RNN.

    Returns ``dx`` (B, C, T, d) = ∂y/∂x, ``offset`` (B, C) = y − ⟨∂y/∂x, x⟩ − Σ_ℓ ∂y/∂h^ℓ_0 h^ℓ_0
    (the β terms), ``dh0`` list of (B, C, D) = ∂y/∂h^(ℓ)_0 per layer.
    """
    B = tr.x.shape[0]
    G = np.asarray(G, dtype=np.float64)
    G = np.broadcast_to(G, (B,) + G.shape[-2:]) if G.ndim == 2 else G
    L = len(tr.layers)
    dh0 = [None] * L
    offset = np.zeros((B, G.shape[1]))
    incoming_T, incoming = np.ascontiguousarray(G), None
    for ell in range(L - 1, -1, -1):
        out, off, lam = _layer_backward(tr.layers[ell], tr.S[ell], incoming_T, incoming, tr.backend)
        offset += off
        dh0[ell] = lam
        incoming_T, incoming = None, out
    return {"dx": incoming, "offset": offset, "dh0": dh0}


def _chunks(B: int, per_item: int, parts: int = 1):
    """Blocks of sequences: at most REVERSE_CHUNK_ENTRIES cotangent entries each, and at least
    ``parts`` blocks (for the threads) where there are that many sequences."""
    step = max(1, REVERSE_CHUNK_ENTRIES // max(1, per_item))
    step = max(1, min(step, -(-B // max(1, parts))))
    return [(lo, min(B, lo + step)) for lo in range(0, B, step)]


def _reverse_threads(B: int, work_per_sequence: int, backend=None) -> int:
    """How many blocks of sequences ``_reverse_chunked`` runs at once: the backend's
    ``parallel_pieces`` (the numba backend: ``config.PARTITION_THREADS``, None for one per CPU, 1 in
    a sweep region), none below ``config.PARTITION_MIN_WORK_PER_THREAD`` flops of work per thread."""
    from .. import config

    return get_backend(backend).parallel_pieces(B, work_per_sequence, least=config.PARTITION_MIN_WORK_PER_THREAD,
                                                setting=config.PARTITION_THREADS)


def _reverse_chunked(tr: Trace, G) -> dict:
    """``reverse`` over blocks of sequences so the (B, C, T, D) cotangents stay bounded; the
    blocks run at once when the work is large enough (``_reverse_threads``; the numba backend: one
    jitted call per layer that releases the GIL, BLAS on one thread, per block)."""
    B, T, _ = tr.x.shape
    G = np.asarray(G, dtype=np.float64)
    C = G.shape[-2]
    per = C * T * max(tr.layers[0].hidden, tr.x.shape[2])
    n = _reverse_threads(B, C * T * sum(2 * m.hidden * m.hidden for m in tr.layers), tr.backend)
    blocks = _chunks(B, per, n)

    def run(lo, hi):
        sub = Trace(tr.layers, tr.x[lo:hi], True, [h[lo:hi] for h in tr.h0], [h[lo:hi] for h in tr.H],
                    [z[lo:hi] for z in tr.Z], [s[lo:hi] for s in tr.S], [p[lo:hi] for p in tr.P], tr.backend)
        return reverse(sub, G if G.ndim == 2 else G[lo:hi])

    if n == 1:
        parts = [run(lo, hi) for lo, hi in blocks]
    else:
        parts = []
        for first in range(0, len(blocks), n):   # n blocks at a time: memory stays bounded
            group = blocks[first:first + n]
            parts += get_backend(tr.backend).run_pieces(lambda i: run(*group[i]), len(group))
    return {"dx": np.concatenate([p["dx"] for p in parts]),
            "offset": np.concatenate([p["offset"] for p in parts]),
            "dh0": [np.concatenate([p["dh0"][ell] for p in parts]) for ell in range(len(tr.layers))]}


def template_arrays(tr: Trace, W_out, b_out=None) -> dict:
    """Templates of a prepared forward pass: see ``templates``.  Arrays with a leading (B,) axis."""
    Wo, bo = _check_readout(W_out, b_out, tr.layers[-1].hidden)
    r = _reverse_chunked(tr, Wo)
    B = tr.x.shape[0]
    inner = np.einsum("bctk,btk->bc", r["dx"], tr.x)
    bias = bo + r["offset"] + sum(np.einsum("bcd,bd->bc", g, h) for g, h in zip(r["dh0"], tr.h0))
    z = tr.H[-1][:, -1] @ Wo.T + bo
    return {"template": r["dx"], "inner": inner, "bias": bias, "z": z, "W_out": Wo, "b_out": bo,
            "dz_dh0": np.concatenate(r["dh0"], axis=-1).reshape(B, Wo.shape[0], -1)}


def templates(model, x, W_out, b_out=None, h0=None, *, backend=None, command=None):
    """Matched-filter templates dz/dx of a linear read-out z = W_out h_T + b_out (MASO §5).

    The template of class c is the row c of dz/dx = W_out ∂h_T/∂x, a (T, d) array, computed by
    reverse-mode products λ_{t-1} = λ_t J_t from λ_T = W_out (cost O(T·C·D²), the (T·D)×(T·d)
    matrix A_RNN is never formed).  Because the network is affine on the input's region,
    z_c = ⟨template_c, x⟩ + bias_c exactly, with bias_c = b_out,c + W_out,c B_RNN,T (the β terms
    and 𝒜_h h_0).

    Parameters
    ----------
    model, x, h0, backend : as ``forward``
    W_out : (C, D) read-out of the last layer's h_T;  b_out : (C,), default 0

    Returns
    -------
    xarray.Dataset: ``template`` ([batch,] class, time, unit_in); ``inner_product``
    ⟨template_c, x⟩, ``bias``, ``z`` (forward pass) and ``z_error`` |⟨template_c, x⟩ + bias_c − z_c|
    ([batch,] class); ``W_out``, ``b_out``, ``x`` and the model's parameters.

    Example
    -------
    >>> ds = templates(m, x, W_out=np.eye(3, m.hidden))
    >>> float(ds["z_error"].max()) < 1e-12
    True
    """
    backend = get_backend(backend)      # resolved once; the object goes down
    with backend:
        import xarray as xr

        tr = forward(model, x, h0, backend=backend)
        r = template_arrays(tr, W_out, b_out)
        sel = slice(None) if tr.batched else 0
        lead = ("batch",) if tr.batched else ()
        err = np.abs(r["inner"] + r["bias"] - r["z"])
        data = {
            "template": xr.Variable(lead + ("class", "time", "unit_in"), r["template"][sel],
                                    {"long_name": "template dz_c/dx_t", "units": "1"}),
            "inner_product": xr.Variable(lead + ("class",), r["inner"][sel],
                                         {"long_name": "⟨template_c, x⟩", "units": "1"}),
            "bias": xr.Variable(lead + ("class",), r["bias"][sel], {"long_name": "bias_c = z_c − ⟨template_c, x⟩",
                                                                   "units": "1"}),
            "z": xr.Variable(lead + ("class",), r["z"][sel], {"long_name": "read-out z = W_out h_T + b_out (forward)",
                                                               "units": "1"}),
            "z_error": xr.Variable(lead + ("class",), err[sel],
                                   {"long_name": "|⟨template_c, x⟩ + bias_c − z_c|", "units": "1"}),
            "W_out": xr.Variable(("class", "unit"), r["W_out"], {"long_name": "read-out weights W_out", "units": "1"}),
            "b_out": xr.Variable(("class",), r["b_out"], {"long_name": "read-out bias b_out", "units": "1"}),
        }
        return finish(_wrap(model, tr, data, command, backend), "templates")


# ============================================================================ Dataset
def _param_variables(model, layers):
    """One layer: its parameters as they are.  L > 1 layers: every layer alike, under
    ``layer{ℓ}_`` (ℓ = 1..L), its settings as attrs under the same prefix."""
    import xarray as xr

    from .._dataset import model_attrs, model_variables

    if len(layers) == 1:
        return dict(model_variables(layers[0])), {}
    out, attrs = {}, {}
    for ell, m in enumerate(layers, start=1):
        prefix = f"layer{ell}_"
        for name, v in model_variables(m, prefix).items():
            dims = ("unit", "unit_from") if (ell > 1 and name == prefix + "W") else v.dims
            out[name] = xr.Variable(dims, v.values, v.attrs)
        attrs.update(model_attrs(m, prefix))
    return out, attrs


def _wrap(model, tr: Trace, data: dict, command, backend):
    import xarray as xr

    from .._dataset import base_attrs, model_attrs

    layers = tr.layers
    B, T, d = tr.x.shape
    D = layers[0].hidden
    sel = slice(None) if tr.batched else 0
    lead = ("batch",) if tr.batched else ()
    params, extra = _param_variables(model, layers)
    data = dict(data)
    data.setdefault("x", xr.Variable(lead + ("time", "unit_in"), tr.x[sel], {"long_name": "input x_t", "units": "1"}))
    data.update(params)
    coords = {"time": ("time", np.arange(1, T + 1), {"long_name": "time step t", "units": "step"}),
              "unit": ("unit", np.arange(D), {"long_name": "hidden unit", "units": "1"}),
              "unit_from": ("unit_from", np.arange(D), {"long_name": "presynaptic unit", "units": "1"}),
              "unit_in": ("unit_in", np.arange(d), {"long_name": "input feature", "units": "1"})}
    if tr.batched:
        coords["batch"] = ("batch", np.arange(B), {"long_name": "sequence", "units": "1"})
    if len(layers) > 1:
        coords["layer"] = ("layer", np.arange(1, len(layers) + 1), {"long_name": "layer ℓ", "units": "1"})
    attrs = model_attrs(layers[0]) if len(layers) == 1 else {"model": "rnn",
                                                             "activation": layers[0].activation}
    attrs.update(extra)
    attrs["layers"] = len(layers)
    attrs.update(base_attrs(get_backend(backend).name, command))
    return xr.Dataset(data, coords=coords, attrs=attrs)


def partition(model, x, h0=None, *, backend=None, reconstruction: str = "auto", command=None):
    """Partition codes, regions and the exact affine reconstruction of an RNN on its input(s).

    Parameters
    ----------
    model : rnn / rin / fastrnn / antisymmetric (max-affine activation) or a ``Stack`` of them
    x : (T, d) or (B, T, d) array;  h0 : initial state(s) (``forward``)
    backend : "numpy" | "numba" (default) for the simulation kernels
    reconstruction : "auto" | "matrix" | "recursion" — how ĥ = A_RNN x + B_RNN is evaluated:
        materialising A_RNN ("matrix", O(B·T²·D·d) memory; "auto" does so when that is at most
        ``MATERIALISE_MAX_ENTRIES``) or the same affine map applied step by step from the pieces
        alone, h_t = J_t h_{t-1} + Jx_t x_t + β_t without evaluating φ ("recursion")

    Returns
    -------
    xarray.Dataset (docs/design.md, *Data contract*): ``codes`` ([batch,] time, unit[, layer]) int8 piece index;
    ``regions`` (time) distinct per-step codes seen so far (all sequences pooled);
    ``prefix_regions`` (time) distinct prefix codes over the batch; ``reconstruction_error``
    ([batch]) max |ĥ − h|; ``h`` ([batch,] time, unit[, layer]); ``x``, ``h0``; parameters
    (layer ℓ ≥ 2 under ``layer{ℓ}_``); attrs incl. ``layers`` and ``reconstruction_method``.

    Example
    -------
    >>> ds = partition(make_model("rnn", 8, 1, activation="relu", seed=0), x)
    >>> ds["regions"].values        # non-decreasing
    """
    backend = get_backend(backend)      # resolved once; the object goes down
    with backend:
        import xarray as xr

        try:
            tr = forward(model, x, h0, backend=backend)
        except DivergenceError as err:
            # the steps before the divergence are kept: the partition of the finite prefix
            n = err.step - 1
            if err.partial is None and n >= 1:
                xa = np.asarray(x)
                try:
                    err.partial = partition(model, xa[..., :n, :], h0, backend=backend, reconstruction=reconstruction,
                                            command=command)
                except DivergenceError as inner:
                    err.partial = inner.partial
            raise
        codes = tr.codes()
        regions, prefix = count_regions(codes)
        err, method = reconstruction_error(tr, reconstruction)
        sel = slice(None) if tr.batched else 0
        lead = ("batch",) if tr.batched else ()
        tail = ("layer",) if len(tr.layers) > 1 else ()
        h0 = tr.h0[0] if len(tr.layers) == 1 else np.stack(tr.h0, axis=-1)
        data = {
            "codes": xr.Variable(lead + ("time", "unit") + tail, codes[sel],
                                 {"long_name": "partition code (affine piece of φ)", "units": "1"}),
            "regions": xr.Variable(("time",), regions, {"long_name": "distinct codes seen so far", "units": "1"}),
            "prefix_regions": xr.Variable(("time",), prefix, {"long_name": "distinct prefix codes c_1..c_t over the "
                                                                           "batch", "units": "1"}),
            "reconstruction_error": xr.Variable(lead, err[sel], {"long_name": "max |A_RNN x + B_RNN − h|",
                                                                 "units": "1"}),
            "h": xr.Variable(lead + ("time", "unit") + tail, tr.states()[sel],
                             {"long_name": "hidden state h_t", "units": "1"}),
            "h0": xr.Variable(lead + ("unit",) + tail, h0[sel], {"long_name": "initial state h_0", "units": "1"}),
        }
        ds = _wrap(model, tr, data, command, backend)
        ds.attrs["reconstruction_method"] = method
        return finish(ds, "partition")


#: Public names that moved to the modules beside this one (the random initial state; the codes'
#: geometry): reached from here with a DeprecationWarning naming the new home (dynlab's own code
#: imports them from there; ``dl.NAME`` is unchanged).
_MOVED = {**{n: "dynlab.analysis.partition_h0" for n in (
    "initial_state_jacobian", "losses", "loss_gradient_h0", "random_h0_regulariser", "random_h0_monte_carlo")},
    **{n: "dynlab.analysis.partition_codes" for n in (
        "prefix_features", "embed_codes", "knn_predict", "knn_accuracy", "PCA_SVD_MAX")},
    "model_from_partition": "dynlab.io"}   # rebuilding a model from a Dataset is dynlab.io's


def __getattr__(name):
    if name in _MOVED:  # by name: those modules import this one
        from .._deprecate import moved

        return moved(f"dynlab.analysis.partition.{name}", f"{_MOVED[name]}.{name}",
                     note="" if name.isupper() else f" (dl.{name} is unchanged)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

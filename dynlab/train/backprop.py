"""Exact gradients by reverse mode through time (BPTT) for every discrete model.

The forward pass (``forward``) runs the model over a batch and keeps, time-major, what the
backward pass needs; the backward pass (``backward``) walks the same per-step chain rule as
the closed-form Jacobians of ``dynlab.analysis.jacobians`` — J_t = ∂h_t/∂h_{t-1} — but
applies it to cotangent rows (vector–Jacobian products, batched over B) instead of building
D×D matrices, and accumulates the parameter gradients on the way.

Gated cells, h_t = a h_{t-1} + c φ(z_t), z_t = R h_{t-1} + W x_t + b (RNN, FastRNN,
AntisymmetricRNN, RIN; ``Model.gated_form``), with h̄_t = ∂L/∂h_t:

    z̄_t = c h̄_t ⊙ φ'(z_t),   h̄_{t-1} += a h̄_t + R ᵀ z̄_t,
    R̄ = Σ_t z̄_t h_{t-1}ᵀ,  W̄ = Σ_t z̄_t x_tᵀ,  b̄ = Σ_t z̄_t,  ā = Σ_t ⟨h̄_t, h_{t-1}⟩,  c̄ = Σ_t ⟨h̄_t, φ(z_t)⟩,

then per model: RNN Ū = R̄; RIN (R = U + I) Ū = R̄; Antisymmetric (R = M − Mᵀ − γI, a = 1,
c = ε) M̄ = R̄ − R̄ᵀ, γ̄ = −tr R̄, ε̄ = c̄; FastRNN (a = σ(β), c = σ(α) on the raw gates)
β̄ = ā σ'(β), ᾱ = c̄ σ'(α).

iRNN (eq. 5), at time m with s_{k-1} = g_{k-1} + σ h_{m-1}, z_k = U s_{k-1} + W x_m + b,
g_k = g_{k-1} + η_{m,k}(φ(z_k) − α s_{k-1}), h_m = g_K; backwards over k = K … 1 from ḡ_K = h̄_m:

    η̄_{m,k} = ⟨ḡ_k, φ(z_k) − α s_{k-1}⟩,  ᾱ −= η_{m,k}⟨ḡ_k, s_{k-1}⟩,
    z̄_k = η_{m,k} ḡ_k ⊙ φ'(z_k),  s̄ = Uᵀ z̄_k − α η_{m,k} ḡ_k,
    ḡ_{k-1} = ḡ_k + s̄,  h̄_{m-1} += σ s̄  (+ ḡ_0 when g_0 = h_{m-1}),
    Ū = Σ_{m,k} z̄_k s_{k-1}ᵀ;  low rank U = I + V H:  V̄ = Ū Hᵀ,  H̄ = Vᵀ Ū.

η's gradient takes η's own shape (scalar: Σ_{m,k}; (K,): Σ_m; (T, K): as is).  The big
parameter sums (R̄, Ū, W̄) are single BLAS products over all stored steps.

The read-out y_t = W_out h_t + b_out and the losses (``LOSSES``):

    mse      L = mean_{b,c} (y_T − target)²                 target (B, C)
    mse-seq  L = mean_{b,t,c} (y_t − target_t)²             target (B, T, C)
    ce       L = mean_b −log softmax(y_T)[label]             target (B,) int
    ce-seq   L = mean_{b,t} −log softmax(y_t)[label_t]       target (B, T) int (copy task)

Every gradient is checked against central finite differences in tests/test_backprop.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._blas import blas_threads
from ..activations import dphi, phi
from ..errors import DivergenceError, ParameterError
from ..models import CTRNN, IRNN, RIN, RNN, AntisymmetricRNN, FastRNN, Model

LOSSES = ("mse", "mse-seq", "ce", "ce-seq")
#: Parameters of the read-out layer, trained with the recurrent model.
READOUT = ("W_out", "b_out")


# ============================================================================ parameters
def param_names(model: Model) -> tuple[str, ...]:
    """Names of the model's trainable parameters, in the order ``model.params()`` lists them."""
    _check_trainable(model)
    return tuple(model.params())


def _check_trainable(model):
    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model, got {type(model).__name__}")
    if isinstance(model, CTRNN):
        raise ParameterError("model", "BPTT training covers the discrete models (rnn, fastrnn, antisymmetric, "
                                      "rin, irnn); a ctrnn has no discrete backward pass here")
    if not isinstance(model, (IRNN, RNN, FastRNN, AntisymmetricRNN, RIN)):
        raise ParameterError("model", f"no backward pass for model {model.name!r}")


def with_params(model: Model, params: dict) -> Model:
    """A copy of ``model`` with the named parameters replaced (validated again).

    Keys not among the model's parameters (the read-out, h0) are ignored.
    """
    own = {k: v for k, v in params.items() if k in model.params()}
    if isinstance(model, IRNN) and model.V is not None:
        own.setdefault("V", model.V)
        own.setdefault("H", model.H)
        own["U"] = None
    if "eta" in own:
        e = np.asarray(own["eta"], dtype=np.float64)
        own["eta"] = float(e) if e.ndim == 0 else e
    for k in ("alpha", "beta", "eps", "gamma"):
        if k in own:
            own[k] = float(np.asarray(own[k]))
    return model.replace(**own)


# ============================================================================ tape
@dataclasses.dataclass
class Tape:
    """What the forward pass keeps (time-major): states H (T+1, B, D) with H[0] = h_0, inputs
    x (T, B, d), and per step (gated) or per inner step (iRNN, (T, K, B, D)) the pre-activation
    derivative ``dphi``, the activation ``act`` and, for the iRNN, the inner states ``S``."""

    model: Model
    x: np.ndarray
    H: np.ndarray
    act: np.ndarray
    dphi: np.ndarray
    S: np.ndarray | None = None
    eta: np.ndarray | None = None
    #: ∂L/∂R for the matrix R multiplying h_{t-1} (or s) inside φ, set by ``backward``
    dL_dWr: np.ndarray | None = None

    @property
    def states(self) -> np.ndarray:
        """h_1..h_T as (B, T, D), the layout of ``dynlab.simulate``."""
        return np.swapaxes(self.H[1:], 0, 1)


def _as_batch(model, x, h0):
    from ..simulation import check_h0, check_input

    xa, _ = check_input(x, model.inputs)
    h0a = check_h0(h0, xa.shape[0], model.hidden)
    return xa, h0a


@blas_threads("TRAIN_BLAS_THREADS")
def forward(model: Model, x, h0=None) -> Tape:
    """Run ``model`` over x (B, T, d) from h0 (B, D) (zeros by default), keeping the tape.

    The states equal ``dynlab.simulate``'s (the same update in the same order; tested to
    1e-12).  A non-finite state raises ``DivergenceError`` naming the step.
    """
    _check_trainable(model)
    xa, h0a = _as_batch(model, x, h0)
    B, T, d = xa.shape
    D = model.hidden
    xt = np.ascontiguousarray(np.swapaxes(xa, 0, 1))           # (T, B, d)
    cin = xt @ model.W.T + model.b                              # (T, B, D)
    H = np.empty((T + 1, B, D))
    H[0] = h0a
    name, leak = model.activation, float(model.leak)
    with np.errstate(all="ignore"):
        if isinstance(model, IRNN):
            K, alpha, sign = model.K, float(model.alpha), float(model.sign)
            eta = model.eta_table(T)
            eta = np.broadcast_to(eta, (T, K)) if eta.shape[0] == 1 else eta
            UT = np.ascontiguousarray(model.U.T)
            S = np.empty((T, K, B, D))
            Z = np.empty((T, K, B, D))
            A = np.empty((T, K, B, D))
            f = np.empty((B, D))
            for m in range(T):
                hp = H[m]
                g = hp.copy() if model.g0 == "previous" else np.zeros_like(hp)
                for k in range(K):
                    s, z, a = S[m, k], Z[m, k], A[m, k]
                    np.add(g, hp, out=s) if sign > 0 else np.subtract(g, hp, out=s)
                    np.matmul(s, UT, out=z)
                    z += cin[m]
                    _phi_into(name, z, leak, a)
                    np.multiply(s, alpha, out=f)
                    np.subtract(a, f, out=f)
                    f *= eta[m, k]
                    g += f
                H[m + 1] = g
                _check_finite(model, H, m)
            return Tape(model, xt, H, A, _dphi_inplace(name, Z, A, leak), S, np.ascontiguousarray(eta))
        a_, c_, R = model.gated_form()
        RT = np.ascontiguousarray(R.T)
        Z = np.empty((T, B, D))
        A = np.empty((T, B, D))
        for t in range(T):
            z = Z[t]
            np.matmul(H[t], RT, out=z)
            z += cin[t]
            _phi_into(name, z, leak, A[t])
            np.multiply(A[t], c_, out=H[t + 1])
            if a_ != 0.0:
                H[t + 1] += a_ * H[t]
            _check_finite(model, H, t)
        return Tape(model, xt, H, A, _dphi_inplace(name, Z, A, leak))


def _dphi_inplace(name, Z, A, leak):
    """φ'(z) written over the pre-activations Z (A = φ(Z)), saving one tape-sized array:
    tanh 1 − A², sigmoid A(1 − A), the rest from Z (right derivative at kinks)."""
    if name == "tanh":
        np.multiply(A, A, out=Z)
        np.subtract(1.0, Z, out=Z)
    elif name == "sigmoid":
        np.subtract(1.0, A, out=Z)
        Z *= A
    else:
        for i in range(Z.shape[0]):  # a time step at a time: temporaries stay small
            Z[i] = dphi(name, Z[i], leak)
    return Z


def _phi_into(name, z, leak, out):
    """out[...] = φ(z) without a temporary for the common activations."""
    if name == "tanh":
        np.tanh(z, out=out)
    elif name == "relu":
        np.maximum(z, 0.0, out=out)
    else:
        out[...] = phi(name, z, leak)


def _check_finite(model, H, t):
    ok = np.isfinite(H[t + 1]).all(axis=1)
    if not ok.all():
        raise DivergenceError(step=t + 1, batch=int(np.argmin(ok)), model=model.name)


# ============================================================================ backward
@blas_threads("TRAIN_BLAS_THREADS")
def backward(tape: Tape, dL_dH) -> tuple[dict, np.ndarray, np.ndarray]:
    """Vector–Jacobian products through time.

    Parameters
    ----------
    tape : Tape from ``forward``
    dL_dH : (T, B, D) array — the explicit loss cotangents ∂L/∂h_t (zero where the loss does
        not read h_t; only the last row for a loss at the end)

    Returns
    -------
    (grads, dL_dh0, dL_dh1): the model parameters' gradients by name (shapes as the
    parameters), ∂L/∂h_0 (B, D) and the total ∂L/∂h_1 (B, D).
    """
    model = tape.model
    if isinstance(model, IRNN):
        return _backward_irnn(tape, dL_dH)
    return _backward_gated(tape, dL_dH)


def _backward_gated(tape, ext):
    model = tape.model
    T, B, D = ext.shape
    a, c, R = model.gated_form()
    H, A, Dp = tape.H, tape.act, tape.dphi
    Zb = np.empty((T, B, D))
    hb = np.zeros((B, D))
    abar = cbar = 0.0
    dh1 = None
    for t in range(T - 1, -1, -1):
        hb = hb + ext[t]
        if t == 0:
            dh1 = hb.copy()
        abar += float(np.vdot(hb, H[t]))
        cbar += float(np.vdot(hb, A[t]))
        zb = c * hb * Dp[t]
        Zb[t] = zb
        hb = a * hb + zb @ R
    Zf = Zb.reshape(T * B, D)
    Rbar = Zf.T @ H[:-1].reshape(T * B, D)
    tape.dL_dWr = Rbar
    grads = {"W": Zf.T @ tape.x.reshape(T * B, -1), "b": Zf.sum(axis=0)}
    if isinstance(model, AntisymmetricRNN):
        grads.update(M=Rbar - Rbar.T, eps=cbar, gamma=-float(np.trace(Rbar)))
    elif isinstance(model, FastRNN):
        sa, sb = _sig(model.alpha), _sig(model.beta)
        grads.update(U=Rbar, alpha=cbar * sa * (1 - sa), beta=abar * sb * (1 - sb))
    else:  # RNN, RIN (R = U + I)
        grads["U"] = Rbar
    return {k: grads[k] for k in model.params()}, hb, dh1


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v)) if v >= 0 else np.exp(v) / (1.0 + np.exp(v))


def _backward_irnn(tape, ext):
    model = tape.model
    T, B, D = ext.shape
    K, alpha, sign = model.K, float(model.alpha), float(model.sign)
    U, S, A, Dp, eta = model.U, tape.S, tape.act, tape.dphi, tape.eta
    prev = model.g0 == "previous"
    Zb = np.empty((T, K, B, D))
    etab = np.empty((T, K))
    gs = np.empty((T, K))
    hb = np.zeros((B, D))
    sb = np.empty((B, D))
    tmp = np.empty((B, D))
    dh1 = None
    for m in range(T - 1, -1, -1):
        hb += ext[m]
        if m == 0:
            dh1 = hb.copy()
        gb = hb.copy()
        hpb = np.zeros((B, D))
        for k in range(K - 1, -1, -1):
            e = eta[m, k]
            gs[m, k] = np.vdot(gb, S[m, k])
            etab[m, k] = np.vdot(gb, A[m, k]) - alpha * gs[m, k]
            zb = Zb[m, k]
            np.multiply(gb, Dp[m, k], out=zb)
            zb *= e
            np.matmul(zb, U, out=sb)
            np.multiply(gb, alpha * e, out=tmp)
            sb -= tmp
            gb += sb
            if sign > 0:
                hpb += sb
            else:
                hpb -= sb
        if prev:
            hpb += gb
        hb = hpb
    alphab = -float(np.sum(eta * gs))       # ᾱ = −Σ η_{m,k}⟨ḡ_k, s_{k-1}⟩
    Ubar = Zb.reshape(-1, D).T @ S.reshape(-1, D)
    tape.dL_dWr = Ubar
    Cb = Zb.sum(axis=1).reshape(T * B, D)
    grads = {"W": Cb.T @ tape.x.reshape(T * B, -1), "b": Cb.sum(axis=0), "alpha": alphab}
    e0 = np.asarray(model.eta)
    grads["eta"] = float(etab.sum()) if e0.ndim == 0 else (etab.sum(axis=0) if e0.ndim == 1 else
                                                            (etab.sum(axis=0, keepdims=True) if e0.shape[0] == 1
                                                             else etab))
    if model.V is not None:
        grads["V"] = Ubar @ model.H.T
        grads["H"] = model.V.T @ Ubar
    else:
        grads["U"] = Ubar
    return {k: grads[k] for k in model.params()}, hb, dh1


# ============================================================================ read-out and losses
def init_readout(hidden: int, outputs: int, seed=None) -> dict:
    """W_out ~ N(0, 1/D), b_out = 0."""
    rng = np.random.default_rng(seed)
    return {"W_out": rng.standard_normal((outputs, hidden)) / np.sqrt(hidden), "b_out": np.zeros(outputs)}


def check_loss(loss: str) -> str:
    key = str(loss).strip().lower()
    if key not in LOSSES:
        raise ParameterError("loss", f"unknown loss {loss!r}; choose from {', '.join(LOSSES)}")
    return key


def _log_softmax(y):
    m = y.max(axis=-1, keepdims=True)
    z = y - m
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def loss_value(loss: str, Y, target):
    """(L, dL/dY, extra) for outputs Y ((B, C) or (T, B, C) for the -seq losses).

    ``extra`` holds ``accuracy`` for the cross-entropy losses.
    """
    loss = check_loss(loss)
    if loss.startswith("mse"):
        t = np.asarray(target, dtype=np.float64)
        if loss == "mse-seq":
            t = np.swapaxes(t, 0, 1)
        if t.shape != Y.shape:
            raise ParameterError("target", f"must have shape {Y.shape} for loss {loss!r}, got {np.shape(target)}")
        r = Y - t
        return float(np.mean(r * r)), 2.0 * r / r.size, {}
    lab = np.asarray(target)
    if loss == "ce-seq":
        lab = np.swapaxes(lab, 0, 1)
    if lab.shape != Y.shape[:-1] or not np.issubdtype(lab.dtype, np.integer):
        raise ParameterError("target", f"must be integer labels of shape {Y.shape[:-1]} for loss {loss!r}, "
                                       f"got {lab.dtype} {lab.shape}")
    C = Y.shape[-1]
    if lab.size and (lab.min() < 0 or lab.max() >= C):
        raise ParameterError("target", f"labels must lie in [0, {C}), got [{lab.min()}, {lab.max()}]")
    ls = _log_softmax(Y)
    picked = np.take_along_axis(ls, lab[..., None], axis=-1)[..., 0]
    n = lab.size
    G = np.exp(ls)
    np.put_along_axis(G, lab[..., None], np.take_along_axis(G, lab[..., None], axis=-1) - 1.0, axis=-1)
    acc = float(np.mean(np.argmax(Y, axis=-1) == lab))
    return float(-picked.mean()), G / n, {"accuracy": acc}


def readout_outputs(readout, H, loss):
    """Y = W_out h + b_out at the end ((B, C)) or at every step ((T, B, C)) for -seq losses."""
    Hs = H[1:] if loss.endswith("-seq") else H[-1]
    return Hs @ readout["W_out"].T + readout["b_out"]


@blas_threads("TRAIN_BLAS_THREADS")
def loss_and_grads(model: Model, readout: dict, x, target, *, loss: str, h0=None):
    """The loss and the exact gradient of every parameter.

    Parameters
    ----------
    model : discrete dynlab model;  readout : {"W_out": (C, D), "b_out": (C,)}
    x : (B, T, d) inputs;  target : see the module docstring for each ``loss``
    h0 : (B, D) or (D,) initial states (zeros by default)

    Returns
    -------
    (L, grads, info): grads holds the model's parameters, ``W_out``, ``b_out`` and ``h0``
    (∂L/∂h_0, (B, D)); info holds the tape, ``dL_dh1`` (B, D), ``dL_dWr`` (D, D) = ∂L/∂R for
    the matrix R multiplying h_{t-1} inside φ (U; M − Mᵀ − γI; U + I for the RIN; I + VH),
    ``outputs`` and, for cross-entropy, ``accuracy``.

    Example
    -------
    >>> L, g, _ = loss_and_grads(m, init_readout(m.hidden, 1, 0), x, y, loss="mse")
    """
    loss = check_loss(loss)
    tape = forward(model, x, h0)
    T, B, D = tape.H.shape[0] - 1, tape.H.shape[1], tape.H.shape[2]
    Y = readout_outputs(readout, tape.H, loss)
    L, dY, extra = loss_value(loss, Y, target)
    ext = np.zeros((T, B, D))
    if loss.endswith("-seq"):
        ext[:] = dY @ readout["W_out"]
        Hs = tape.H[1:].reshape(T * B, D)
        gW = dY.reshape(T * B, -1).T @ Hs
        gb = dY.reshape(T * B, -1).sum(axis=0)
    else:
        ext[-1] = dY @ readout["W_out"]
        gW = dY.T @ tape.H[-1]
        gb = dY.sum(axis=0)
    grads, dh0, dh1 = backward(tape, ext)
    grads["W_out"], grads["b_out"], grads["h0"] = gW, gb, dh0
    info = {"tape": tape, "dL_dh1": dh1, "dL_dWr": tape.dL_dWr, "outputs": Y}
    info.update(extra)
    return L, grads, info


@blas_threads("TRAIN_BLAS_THREADS")
def predict(model: Model, readout: dict, x, *, loss: str, h0=None):
    """The read-out outputs of ``model`` on x ((B, C), or (T, B, C) for -seq losses)."""
    tape = forward(model, x, h0)
    return readout_outputs(readout, tape.H, check_loss(loss))


__all__ = ["LOSSES", "READOUT", "Tape", "backward", "forward", "init_readout", "loss_and_grads", "loss_value",
           "param_names", "predict", "with_params"]

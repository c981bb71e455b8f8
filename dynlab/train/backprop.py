"""Exact gradients by reverse mode through time (BPTT) for every discrete model.

The forward pass (``forward``) runs the model over a batch and keeps, time-major, what the
backward pass needs; the backward pass (``backward``) walks the same per-step chain rule as
the closed-form Jacobians — J_t = ∂h_t/∂h_{t-1} — but applies it to cotangent rows
(vector–Jacobian products, batched over B) instead of building D×D matrices, and accumulates
the gradients on the way.  Both are backend operations on the model's form
(``train_forward``/``train_backward``, ``dynlab.backends``): the rules for every form are written
out in ``dynlab.backends.reference.bptt`` (the reference), the numba backend's jitted loops in
``dynlab.backends.numba.bptt``.  The backend returns the cotangents of the form's arrays; the
model maps them to its own parameters (``Model.pullback``: RNN and RIN Ū = R̄; AntisymmetricRNN
M̄ = R̄ − R̄ᵀ, γ̄ = −tr R̄, ε̄ = γ̄_cell; FastRNN β̄ = ā σ'(β), ᾱ = γ̄ σ'(α); the low-rank iRNN
V̄ = Ū Hᵀ, H̄ = Vᵀ Ū; eq. 9's chain rule to the paper's U, W, b; η̄ in η's own shape).

The read-out reads the output h (an LSTM's h, not c), so the loss's cotangents enter h̄_t alone;
h_0 and its gradient are the whole state (an LSTM's [h_0; c_0], every layer of a stack).  The
returned ∂L/∂h_1 is the cotangent of the dynamical state s_1 (what ∂L/∂h_0 = (∂L/∂h_1) J_1
needs): for a stack it counts the paths from s_1 through the steps after the first, not the
path from layer ℓ − 1 into layer ℓ within step 1 (that is part of J_1).

The read-out y_t = W_out h_t + b_out and the losses (``LOSSES``):

    mse      L = mean_{b,c} (y_T − target)²                 target (B, C)
    mse-seq  L = mean_{b,t,c} (y_t − target_t)²             target (B, T, C)
    ce       L = mean_b −log softmax(y_T)[label]             target (B,) int
    ce-seq   L = mean_{b,t} −log softmax(y_t)[label_t]       target (B, T) int (copy task)

Every gradient is checked against central finite differences in tests/test_backprop.py and
tests/test_backprop_gated.py, and the GRU's, LSTM's and stacks' also against PyTorch's autograd
(tests/test_backprop_gated.py, with a committed fixture from tests/fixtures/make_torch_bptt.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..backends import get_backend
from ..backends.base import Workspace
from ..errors import DivergenceError, ParameterError
from ..models import Model

LOSSES = ("mse", "mse-seq", "ce", "ce-seq")
#: Parameters of the read-out layer, trained with the recurrent model.
READOUT = ("W_out", "b_out")
#: The forms the backward pass covers (a stack's layers: the one-line cells, GRU, LSTM).
TRAINABLE = ("cell", "irnn", "gru", "lstm", "stack")


# ============================================================================ parameters
def param_names(model: Model) -> tuple[str, ...]:
    """Names of the model's trainable parameters, in the order ``model.params()`` lists them."""
    _check_trainable(model)
    return tuple(model.params())


def _check_trainable(model):
    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model, got {type(model).__name__}")
    form = model.form()
    if form.kind == "ctrnn":
        raise ParameterError("model", "BPTT training covers the discrete models (rnn, fastrnn, antisymmetric, "
                                      "rin, irnn, gru, lstm, stack); a ctrnn has no discrete backward pass here")
    if form.kind == "stack":
        for ell, (layer, f) in enumerate(zip(model.layers, form.layers), start=1):
            if f.kind not in ("cell", "gru", "lstm"):
                raise ParameterError("model", f"layer {ell} of the stack is a {layer.name!r}; the backward pass of a "
                                              f"stack covers layers rnn, fastrnn, antisymmetric, rin, gru, lstm")
        return
    if form.kind not in TRAINABLE:
        raise ParameterError("model", f"no backward pass for model {model.name!r}")


def with_params(model: Model, params: dict) -> Model:
    """A copy of ``model`` with the named parameters replaced (validated again).

    Keys not among the model's parameters (the read-out, h0) are ignored.  A stack's
    ``layer{ℓ}_<name>`` keys replace that layer's parameter (each layer validated as a model).
    """
    return model.with_params(params)


def recurrent_gradient(form, g: dict) -> np.ndarray:
    """∂L/∂R for the matrix R multiplying the previous state inside φ (the cells' R, the iRNN's U,
    W_hh of a GRU or an LSTM; every layer's stacked along the rows for a stack)."""
    if form.kind == "stack":
        return np.concatenate([g[f"layer{ell}_{f.recurrent}"] for ell, f in enumerate(form.layers, start=1)], axis=0)
    return g[form.recurrent]


# ============================================================================ tape
@dataclasses.dataclass
class Tape:
    """What the forward pass keeps: the model, the backend that ran it and the backend's own tape
    (``inner``).  ``H`` the states s_0..s_T (T+1, B, n); ``outputs`` what the read-out reads
    (T+1, B, hidden); ``states`` s_1..s_T as (B, T, n), the layout of ``dynlab.simulate``; ``x``
    the inputs (T, B, d); ``dL_dWr`` ∂L/∂R of the recurrent matrix, set by ``backward``."""

    model: Model
    backend: object
    inner: object
    dL_dWr: np.ndarray | None = None

    @property
    def H(self) -> np.ndarray:
        return self.inner.H

    @property
    def outputs(self) -> np.ndarray:
        return self.inner.outputs

    @property
    def states(self) -> np.ndarray:
        return self.inner.states

    @property
    def x(self) -> np.ndarray:
        return self.inner.x


def _as_batch(model, x, h0):
    from ..simulation import check_h0, check_input

    xa, _ = check_input(x, model.inputs)
    h0a = check_h0(h0, xa.shape[0], model.state_size)
    return xa, h0a


def _named(err: DivergenceError, model) -> DivergenceError:
    return DivergenceError(step=err.step, batch=err.batch, model=model.name)


def forward(model: Model, x, h0=None, *, backend=None) -> Tape:
    """Run ``model`` over x (B, T, d) from h0 (B, n) (zeros by default), keeping the tape.

    n is ``model.state_size`` (an LSTM's [h; c], every layer of a stack).  The states equal
    ``dynlab.simulate``'s (the same update; tested to 1e-14).  A non-finite state raises
    ``DivergenceError`` naming the step.
    """
    _check_trainable(model)
    be = get_backend(backend)
    be.require("train_forward", model.form())
    xa, h0a = _as_batch(model, x, h0)
    xt = np.ascontiguousarray(np.swapaxes(xa, 0, 1))           # (T, B, d)
    with be:
        try:
            return Tape(model, be, be.train_forward(model.form(), xt, h0a))
        except DivergenceError as err:
            raise _named(err, model) from None


def backward(tape: Tape, dL_dH) -> tuple[dict, np.ndarray, np.ndarray]:
    """Vector–Jacobian products through time.

    Parameters
    ----------
    tape : Tape from ``forward``
    dL_dH : (T, B, D) array — the explicit loss cotangents ∂L/∂h_t (zero where the loss does
        not read h_t).  For a GRU, an LSTM or a stack, cotangents of the outputs (T, B, hidden),
        or of the whole states (T, B, state_size).  A shorter array (T', B, ·), 1 ≤ T' ≤ T,
        holds the cotangents of the last T' steps only, the earlier ones being zero: a loss at
        the end passes (1, B, ·), and no (T, B, ·) array of zeros is made or read.

    Returns
    -------
    (grads, dL_dh0, dL_dh1): the model parameters' gradients by name (shapes as the
    parameters), ∂L/∂h_0 (B, n) and the total ∂L/∂h_1 (B, n), n = ``state_size``.
    """
    model = tape.model
    ext = np.asarray(dL_dH, dtype=np.float64)
    T, B = tape.x.shape[0], tape.x.shape[1]
    widths = tuple(sorted({model.hidden, model.state_size}))
    _check_cotangents(ext, T, B, widths)
    form = model.form()
    with tape.backend, np.errstate(over="ignore", invalid="ignore"):
        g, dh0, dh1 = tape.backend.train_backward(form, tape.inner, ext)
    tape.dL_dWr = recurrent_gradient(form, g)
    return model.pullback(g), dh0, dh1


def _check_cotangents(ext, T, B, widths):
    """ParameterError naming dL_dH unless ext is (T', B, w), 1 ≤ T' ≤ T, w in ``widths``."""
    if ext.ndim != 3 or not 1 <= ext.shape[0] <= T or ext.shape[1] != B or ext.shape[2] not in widths:
        want = " or ".join(f"({T}, {B}, {w})" for w in widths)
        raise ParameterError("dL_dH", f"must have shape {want} (or fewer steps: the last ones), got {ext.shape}")


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


def loss_and_grads(model: Model, readout: dict, x, target, *, loss: str, h0=None, workspace=None, backend=None):
    """The loss and the exact gradient of every parameter.

    Parameters
    ----------
    model : discrete dynlab model;  readout : {"W_out": (C, D), "b_out": (C,)} on the output h
        (D = ``model.hidden``)
    x : (B, T, d) inputs;  target : see the module docstring for each ``loss``
    h0 : (B, n) or (n,) initial states (zeros by default), n = ``model.state_size``
    workspace : ``Workspace``, optional — tape memory reused from the previous call with the
        same workspace (``train_model`` passes one); ``info["tape"]`` is then valid only until
        the next such call (the numba backend's)
    backend : "numpy" | "numba" (default)

    Returns
    -------
    (L, grads, info): grads holds the model's parameters, ``W_out``, ``b_out`` and ``h0``
    (∂L/∂h_0, (B, n)); info holds the tape, ``dL_dh1`` (B, n), ``dL_dWr`` (D, D) = ∂L/∂R for
    the matrix R multiplying h_{t-1} inside φ (U; M − Mᵀ − γI; U + I for the RIN; I + VH;
    W_hh (G·D, D) for a GRU or an LSTM; every layer's stacked for a stack), ``outputs`` and,
    for cross-entropy, ``accuracy``.

    A large batch is split into blocks of sequences, one thread each (``config.TRAIN_THREADS``,
    ``config.TRAIN_MIN_WORK_PER_THREAD``): sequences are independent, so each block runs its
    forward and backward pass on its own, BLAS on one thread, and the parameter gradients are
    the sums of the blocks' (the loss and its cotangents are taken on the whole batch).  Only
    the order of the final sums differs from one block (≤ 1e-15 relative, tested).

    Example
    -------
    >>> L, g, _ = loss_and_grads(m, init_readout(m.hidden, 1, 0), x, y, loss="mse")
    """
    loss = check_loss(loss)
    _check_trainable(model)
    be = get_backend(backend)
    xa, h0a = _as_batch(model, x, h0)
    edges = _train_blocks(model, xa.shape[0], be)
    if workspace is not None:
        workspace.start()
    with be:
        if len(edges) == 2:
            with be.tape_memory(None if workspace is None else workspace.arena(0)):
                return _loss_and_grads_block(model, readout, xa, target, loss, h0a, be)
        return _loss_and_grads_split(model, readout, xa, target, loss, h0a, edges, workspace, be)


def _loss_and_grads_block(model, readout, x, target, loss, h0, backend):
    """``loss_and_grads`` in one block (the calling thread)."""
    tape = forward(model, x, h0, backend=backend)
    out = tape.outputs
    Y = readout_outputs(readout, out, loss)
    L, dY, extra = loss_value(loss, Y, target)
    ext, gW, gb = _readout_cotangents(loss, dY, out, readout)
    grads, dh0, dh1 = backward(tape, ext)
    grads["W_out"], grads["b_out"], grads["h0"] = gW, gb, dh0
    info = {"tape": tape, "dL_dh1": dh1, "dL_dWr": tape.dL_dWr, "outputs": Y}
    info.update(extra)
    return L, grads, info


def _readout_cotangents(loss, dY, out, readout):
    """(ext, ∂L/∂W_out, ∂L/∂b_out) from dY = ∂L/∂Y: ext holds ∂L/∂h_t through the read-out,
    (T, B, D), or (1, B, D) for a loss at the end (the last step's: ``backward``'s short form)."""
    T, B, D = out.shape[0] - 1, out.shape[1], out.shape[2]
    if loss.endswith("-seq"):
        ext = dY @ readout["W_out"]
        gW = dY.reshape(T * B, -1).T @ out[1:].reshape(T * B, D)
        gb = dY.reshape(T * B, -1).sum(axis=0)
    else:
        ext = (dY @ readout["W_out"])[None]          # (1, B, D): the last step's only
        gW = dY.T @ out[-1]
        gb = dY.sum(axis=0)
    return ext, gW, gb


def _train_blocks(model, B: int, backend=None) -> list:
    """Row edges of the blocks ``loss_and_grads`` splits a batch of B into: as many as the
    backend runs at once (``parallel_pieces``; the numba backend: ``config.TRAIN_THREADS``, None
    for one per CPU, 1 in a sweep region), fewer where a block's work per step — its rows times
    the product's size, rows · hidden · state size — would fall below
    ``config.TRAIN_MIN_WORK_PER_THREAD`` (cells whose time loop runs in Python: below it the
    Python work of a step, which holds the GIL, outweighs what another core gains), or below
    ``config.TRAIN_MIN_WORK_PER_THREAD_JITTED`` for the iRNN, the GRU and the LSTM (and stacks of
    them), whose whole loops are one jitted call each."""
    from .. import config

    form = model.form()
    kinds = [f.kind for f in form.layers] if form.kind == "stack" else [form.kind]
    jitted = all(k in ("irnn", "gru", "lstm") for k in kinds)
    least = config.TRAIN_MIN_WORK_PER_THREAD_JITTED if jitted else config.TRAIN_MIN_WORK_PER_THREAD
    n = get_backend(backend).parallel_pieces(B, model.hidden * model.state_size, least=least,
                                             setting=config.TRAIN_THREADS)
    return [int(e) for e in np.linspace(0, B, n + 1).astype(int)]


def _each_block(fn, edges, backend=None):
    """[fn(i, lo, hi) for each block i], at once (the backend's ``run_pieces``).  A
    ``DivergenceError`` names the batch row in the whole batch; when several blocks diverge,
    the earliest step (then the lowest row) is raised."""
    n = len(edges) - 1
    errors = [None] * n

    def work(i):
        lo, hi = edges[i], edges[i + 1]
        try:
            return fn(i, lo, hi)
        except DivergenceError as err:
            errors[i] = DivergenceError(step=err.step, batch=err.batch + lo, model=err.model)

    out = get_backend(backend).run_pieces(work, n)
    div = [e for e in errors if e is not None]
    if div:
        raise min(div, key=lambda e: (e.step, e.batch))
    return out


def _loss_and_grads_split(model, readout, x, target, loss, h0, edges, workspace=None, backend=None):
    """``loss_and_grads`` on blocks of sequences, one thread each (see there); block i's tape
    memory is the workspace's arena i."""
    if workspace is not None:
        workspace.arena(len(edges) - 2)   # every block's arena made here, before the threads start

    def arena(i):
        return backend.tape_memory(None if workspace is None else workspace.arena(i))

    def fwd(i, lo, hi):
        with arena(i):
            return forward(model, x[lo:hi], h0[lo:hi], backend=backend)

    def bwd(i, lo, hi):
        with arena(i):
            return backward(tapes[i], parts[i][0])

    tapes = _each_block(fwd, edges, backend)
    outs = [t.outputs for t in tapes]
    Y = np.concatenate([readout_outputs(readout, o, loss) for o in outs], axis=-2)
    L, dY, extra = loss_value(loss, Y, target)
    parts = [_readout_cotangents(loss, dY[..., lo:hi, :], o, readout) for o, lo, hi in zip(outs, edges, edges[1:])]
    res = _each_block(bwd, edges, backend)
    grads = {k: sum(r[0][k] for r in res) for k in res[0][0]}
    grads["W_out"] = sum(p[1] for p in parts)
    grads["b_out"] = sum(p[2] for p in parts)
    grads["h0"] = np.concatenate([r[1] for r in res], axis=0)
    tape = BlockTape(model, x, tapes, sum(t.dL_dWr for t in tapes))
    info = {"tape": tape, "dL_dh1": np.concatenate([r[2] for r in res], axis=0), "dL_dWr": tape.dL_dWr,
            "outputs": Y}
    info.update(extra)
    return L, grads, info


@dataclasses.dataclass
class BlockTape:
    """The tapes of ``loss_and_grads``'s blocks of sequences (rows ``edges``), seen as one:
    ``H``, ``outputs`` and ``states`` are the blocks' joined along the batch axis (copies)."""

    model: Model
    x: np.ndarray
    blocks: list
    dL_dWr: np.ndarray | None = None

    @property
    def H(self) -> np.ndarray:
        return np.concatenate([t.H for t in self.blocks], axis=1)

    @property
    def outputs(self) -> np.ndarray:
        return np.concatenate([t.outputs for t in self.blocks], axis=1)

    @property
    def states(self) -> np.ndarray:
        return np.concatenate([t.states for t in self.blocks], axis=0)


def predict(model: Model, readout: dict, x, *, loss: str, h0=None, backend=None):
    """The read-out outputs of ``model`` on x ((B, C), or (T, B, C) for -seq losses)."""
    tape = forward(model, x, h0, backend=backend)
    return readout_outputs(readout, tape.outputs, check_loss(loss))


def release_tape_memory():
    """Let go of the tape arrays the backends keep for reuse by calls without a workspace
    (the numba backend: ``config.TAPE_POOL_BYTES``); arrays still referred to stay with their users."""
    from ..backends import _INSTANCES

    for be in list(_INSTANCES.values()):
        be.release_tape_memory()


__all__ = ["BlockTape", "Workspace", "LOSSES", "READOUT", "Tape", "backward", "forward", "init_readout",
           "loss_and_grads", "loss_value", "param_names", "predict", "release_tape_memory", "with_params"]

"""The training loop: exact BPTT gradients, a first-order optimiser, gradient diagnostics.

``train_model(model, task, …)`` trains a discrete model plus a linear read-out on a ``Task``
(``dynlab.tasks.make_task``) and returns a ``TrainResult`` whose ``history`` is an
``xarray.Dataset`` over ``iteration``.  Every ``record_every`` iterations it records

==============  =====================================================================
``loss``        training loss of that iteration's batch
``val_loss``    loss on the whole validation split (h_0 = 0); ``val_accuracy`` for
                classification tasks
``jac_norm``    ‖∂h_T/∂h_1‖₂            (geometric mean over the diagnostic sequences)
``step_norm``   ‖∂h_T/∂h_{T-1}‖₂        (idem)
``ratio``       ‖∂h_T/∂h_1‖₂ / ‖∂h_T/∂h_{T-1}‖₂  (iRNN paper Fig. 3b; idem)
``A_h_norm``    ‖𝒜_h‖₂ = ‖∂h_T/∂h_0‖₂    (MASO paper; idem)
``dL_dh1_norm`` ‖∂ℓ/∂h_1‖₂ of each training sequence's own loss ℓ, mean over the batch
``dL_dWr_norm`` ‖∂L/∂W_r‖_F, W_r the matrix multiplying h_{t-1} inside φ (U; M − Mᵀ − γI
                for the antisymmetric cell; U = I + VH for a low-rank iRNN; W_hh for a GRU or
                an LSTM; every layer's, stacked, for a stack)
``grad_norm``   global norm of all gradients before clipping;  ``lr`` the learning rate
==============  =====================================================================

For a GRU, an LSTM or a stack, h in these norms is the dynamical state s every analysis works
on (an LSTM's [h; c], every layer's state of a stack), and so are h_0, ε and a learned h0; the
read-out reads the output h (``model.output_slice``).

The Jacobian norms come from the closed-form one-step Jacobians
(``dynlab.analysis.jacobians.jacobian_at``) and the one-pass backward products of
``dynlab.analysis.gradients.jacobian_norms`` on the first ``diag_batch`` validation
sequences from h_0 = 0: the stack [I, J_1, …, J_T] gives ∂h_T/∂h_t for t = 0 … T at once.

Randomness: the batch of iteration i is drawn by ``default_rng([seed, 1, i])`` and the
random initial states h_0 = ε ~ N(0, σ_ε² I) by ``default_rng([seed, 2, i])``, so a run is a
pure function of its seed and iteration count — which, with the optimiser's exact state, is
what lets a resumed run continue bit-for-bit (``save_checkpoint`` / ``resume_training``).

An iRNN's η is optimised as ln η (the gradient ∂L/∂ln η = η ∂L/∂η), so that it stays
positive and Adam's steps are relative: with steps of ≈ lr in η itself a learnable η₀ = 0.1
collapses toward 0 within tens of iterations at lr = 1e-2 and the adding task stalls at the
baseline.  Other constraints are kept by projection after each step: an iRNN's α ≥ 0, the
antisymmetric cell's ε ≥ 1e-6 and γ ≥ 0.  By default every parameter is trained
except an iRNN's α (a fixed hyper-parameter in the iRNN paper); ``freeze`` changes that.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time

import numpy as np

from .._progress import progress as report_progress
from ..errors import DivergenceError, ParameterError
from ..models import Model
from ..progress import meter
from . import backprop as bp
from .optim import Plateau, clip_by_global_norm, make_optimiser

HISTORY_VARS = {
    "loss": ("training loss", "1"),
    "val_loss": ("validation loss", "1"),
    "val_accuracy": ("validation accuracy", "1"),
    "jac_norm": ("‖∂h_T/∂h_1‖₂", "1"),
    "step_norm": ("‖∂h_T/∂h_{T-1}‖₂", "1"),
    "ratio": ("‖∂h_T/∂h_1‖₂ / ‖∂h_T/∂h_{T-1}‖₂", "1"),
    "A_h_norm": ("‖A_h‖₂ = ‖∂h_T/∂h_0‖₂ (MASO 𝒜_h)", "1"),
    "dL_dh1_norm": ("‖∂L/∂h_1‖₂", "1"),
    "dL_dWr_norm": ("‖∂L/∂W_r‖_F", "1"),
    "grad_norm": ("global gradient norm (before clipping)", "1"),
    "lr": ("learning rate", "1"),
}
EPS_MIN = 1e-6
_CKPT = "train/"


@dataclasses.dataclass
class TrainResult:
    """A finished (or interrupted) run: the trained model and read-out, the optimiser with
    its exact state, the number of iterations done, the history Dataset and the settings."""

    model: Model
    readout: dict
    optimiser: object
    iteration: int
    history: object
    config: dict
    h0: np.ndarray | None = None
    plateau: Plateau | None = None

    def save(self, path) -> str:
        """``save_checkpoint(path, self)``."""
        return save_checkpoint(path, self)

    def __repr__(self) -> str:
        """A few lines: the model, the task and optimiser, the last record of the history.

        Defined here, so the dataclass decorator keeps it (and still generates ``__eq__``)."""
        return _result_repr(self)


# ============================================================================ helpers
def _result_repr(res) -> str:
    """``TrainResult`` → its few lines (the arrays of the model, read-out and history by shape)."""
    from .._repr import number, value

    h, c = res.history, res.config
    task = c.get("task", {})
    a = getattr(h, "attrs", {})
    lines = [f"TrainResult({res.model!r},",
             f"    task={task.get('task')!r} (steps={task.get('steps')}, loss={a.get('loss_kind')!r}, "
             f"baseline={number(a.get('baseline'))}), iteration={res.iteration}, optimiser={c.get('optimiser')!r}, "
             f"lr={value(getattr(res.optimiser, 'lr', None))}, batch={c.get('batch')}, seed={c.get('seed')},"]
    if getattr(h, "sizes", {}).get("iteration"):
        last = int(h["iteration"].values[-1])
        shown = [k for k in ("loss", "val_loss", "val_accuracy", "jac_norm", "ratio", "grad_norm") if k in h]
        lines.append(f"    at iteration {last}: " + ", ".join(f"{k}={number(h[k].values[-1])}" for k in shown) + ",")
        n = h.sizes["iteration"]
        lines.append(f"    history: {n} record{'s' * (n != 1)} over iteration "
                     f"{int(h['iteration'].values[0])}..{last}, {len(h.data_vars)} variables)")
    else:
        lines.append("    history: no records)")
    return "\n".join(lines)


def _default_freeze(model):
    return tuple(model.TRAIN_FROZEN)


def _log_params(model, params):
    """Positive parameters trained in log space (``Model.TRAIN_LOG``: an iRNN's η)."""
    return [k for k in model.TRAIN_LOG if k in params]


def _project(model, params):
    """The optimiser's step projected onto the model's bounds (``Model.TRAIN_LOWER``)."""
    for k, low in model.TRAIN_LOWER.items():
        if k in params:
            params[k] = np.maximum(params[k], low)
    return params


def _check_penalty(model, penalty) -> dict:
    """``train_model``'s ``penalty`` as ``{name: [λ, c]}`` (JSON-safe); a ParameterError on ``penalty``."""
    if penalty is None:
        return {}
    if not isinstance(penalty, dict):
        raise ParameterError("penalty", f"must be a dict {{parameter: λ or (λ, c)}}, got {type(penalty).__name__}")
    params = model.params()
    out = {}
    for name, spec in penalty.items():
        if name not in params:
            raise ParameterError("penalty", f"{name!r} is not a parameter of {model.name} ({', '.join(params)})")
        try:
            lam, c = (spec, 0.0) if np.ndim(spec) == 0 else spec
            lam, c = float(lam), float(c)
        except (TypeError, ValueError):
            raise ParameterError("penalty", f"{name}: give λ or (λ, c) with numbers, got {spec!r}") from None
        if not (math.isfinite(lam) and lam >= 0 and math.isfinite(c)):
            raise ParameterError("penalty", f"{name}: λ must be finite and ≥ 0 and c finite, got {spec!r}")
        shape = np.shape(params[name])
        if c != 0.0 and (len(shape) != 2 or shape[0] != shape[1]):
            raise ParameterError("penalty", f"{name}: a centre c·I needs a square matrix, {name} has shape {shape}")
        out[str(name)] = [lam, c]
    return out


def penalty_terms(model, penalty) -> tuple[float, dict]:
    """The L2 penalty Σ λ‖θ − c·I‖²_F of ``train_model`` (``penalty`` as there) and its exact
    gradient {name: 2λ(θ − c·I)}; returns (value, gradients)."""
    value, grads = 0.0, {}
    params = model.params()
    for name, (lam, c) in _check_penalty(model, penalty).items():
        theta = np.asarray(params[name], dtype=np.float64)
        diff = theta - c * np.eye(theta.shape[0]) if c != 0.0 else theta
        value += lam * float(np.sum(diff * diff))
        grads[name] = 2.0 * lam * diff
    return value, grads


def _gmean(v):
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return float(np.exp(np.mean(np.log(v))))


def run_outputs(model, readout, x, loss, h0=None, chunk: int = 500, backend=None):
    """Read-out outputs on x (B, T, d) without keeping a tape: the simulation kernels
    (``dynlab.simulation.run_states``) of ``backend`` (a name, a Backend, or None for
    ``config.DEFAULT_BACKEND``), in chunks of sequences."""
    from ..backends import get_backend
    from ..simulation import check_h0, check_input, run_states

    xa, _ = check_input(x, model.inputs)
    B = xa.shape[0]
    h0a = check_h0(h0, B, model.state_size)
    outs = []
    be = get_backend(backend)
    for lo in range(0, B, chunk):
        with be:
            H, bad, _ = run_states(model, xa[lo:lo + chunk], h0a[lo:lo + chunk], be, stop=True)
        if bad.min() < xa.shape[1]:
            raise DivergenceError(step=int(bad.min()) + 1, batch=lo + int(np.argmin(bad)), model=model.name)
        Hs = np.swapaxes(H[:, :, model.output_slice], 0, 1)     # the read-out reads the output h
        Hs = Hs if loss.endswith("-seq") else Hs[-1]
        outs.append(Hs @ readout["W_out"].T + readout["b_out"])
    return np.concatenate(outs, axis=-2)


def evaluate(model, readout, task, split: str = "val", chunk: int = 500, backend=None) -> dict:
    """Loss (and accuracy for classification) of a model on a whole split, from h_0 = 0.

    The split's inputs are built ``chunk`` sequences at a time (``task.batch``), so a task that
    builds its inputs per batch (noisy MNIST: T = 1000) never holds the whole split in float64."""
    from ..backends import get_backend

    be = get_backend(backend)
    n = task.size(split)
    outs, ys = [], []
    for lo in range(0, n, chunk):
        x, y = task.batch(split, np.arange(lo, min(n, lo + chunk)))
        outs.append(run_outputs(model, readout, x, task.loss, chunk=chunk, backend=be))
        ys.append(y)
    Y, y = np.concatenate(outs, axis=-2), np.concatenate(ys, axis=0)
    L, _, extra = bp.loss_value(task.loss, Y, y)
    return {"loss": L, **extra}


def jacobian_diagnostics(model, x, h0=None, backend=None) -> dict:
    """‖∂h_T/∂h_0‖, ‖∂h_T/∂h_1‖, ‖∂h_T/∂h_{T-1}‖ and their ratio for each sequence of x (B, T, d).

    The one-step Jacobians J_t come from ``jacobian_at`` along the simulated trajectory;
    the backward products of the stack [I, J_1, …, J_T] (``jacobian_norms``) give
    ‖∂h_T/∂h_t‖₂ for t = 0 … T in one pass.  h is the dynamical state every analysis works
    on: s = [h; c] for an LSTM, every layer's state for a stack.  Returns arrays of shape (B,).
    ``backend`` runs the forward pass (a name, a Backend, or None for ``config.DEFAULT_BACKEND``).
    """
    from ..analysis.gradients import jacobian_norms
    from ..analysis.jacobians import jacobian_at
    from ..backends import get_backend

    be = get_backend(backend)
    tape = bp.forward(model, x, h0, backend=be)
    S = tape.H
    T, B, D = S.shape[0] - 1, S.shape[1], S.shape[2]
    if T < 2:
        raise ParameterError("steps", f"the gradient diagnostics need T ≥ 2, got {T}")
    hprev = np.swapaxes(S[:-1], 0, 1).reshape(B * T, D)
    xs = np.swapaxes(tape.x, 0, 1).reshape(B * T, -1)
    t = np.tile(np.arange(T, dtype=np.int64), B)
    J = jacobian_at(model, xs, hprev, t=t, backend=be).reshape(B, T, D, D)
    stack = np.concatenate([np.broadcast_to(np.eye(D), (B, 1, D, D)), J], axis=1)
    norms = jacobian_norms(stack, backend=be)
    lj = norms["log_jac_norm"]              # index i: ln‖∂h_T/∂h_i‖, i = 0..T
    return {"A_h_norm": np.exp(lj[:, 0]), "jac_norm": np.exp(lj[:, 1]), "step_norm": np.exp(lj[:, T - 1]),
            "ratio": np.exp(lj[:, 1] - lj[:, T - 1])}


#: The stage training reports (``dynlab.progress``), with the batch loss as its note.
STAGE = "training (iterations)"


# ============================================================================ the loop
def train_model(model: Model, task, *, iterations: int, optimiser: str = "adam", lr: float = 1e-3,
                batch: int = 128, clip: float | None = None, sigma_eps: float = 0.0, record_every: int = 10,
                seed: int = 0, freeze=None, learn_h0: bool = False, diag_batch: int = 8,
                plateau: int | None = None, progress: bool | None = None, command: str | None = None,
                penalty: dict | None = None, engine: str = "numba", device=None, dtype="float64",
                checkpoint=None, checkpoint_every: int | None = None, backend=None,
                _resume: dict | None = None) -> TrainResult:
    """Train ``model`` and a linear read-out on ``task`` with exact BPTT gradients.

    Each iteration: draw a batch (``default_rng([seed, 1, i])``) and h_0 = h0 + ε,
    ε ~ N(0, σ_ε² I) (``default_rng([seed, 2, i])``; the learned h0 only with ``learn_h0``),
    compute the loss and every gradient (``dynlab.train.backprop.loss_and_grads``), clip by
    global norm, step the optimiser, project the constrained parameters (module docstring).

    Parameters
    ----------
    model : discrete dynlab model (rnn, fastrnn, antisymmetric, rin, irnn, gru, lstm, stack); the
        read-out reads the output h (``output_slice``: an LSTM's h, not c; a stack's top layer)
    task : ``dynlab.tasks.Task``
    iterations : number of iterations to run
    optimiser, lr : ``adam`` | ``rmsprop`` | ``sgd`` and its learning rate
    batch : sequences per iteration;  clip : max global gradient norm (None: no clipping)
    sigma_eps : σ_ε of the random initial state (0: h_0 = 0); ε lives on the whole dynamical
        state (an LSTM's [h; c], every layer of a stack)
    record_every : record the history every n iterations, and at the run's last iteration (an
        extra record that changes nothing: a run resumed from there records the same values at
        the shared iterations)
    seed : seeds the read-out's initial weights, the batches and ε
    freeze : parameter names not trained (default: an iRNN's ``alpha``)
    learn_h0 : also learn a shared initial state h0 (added to ε; ``state_size`` entries)
    diag_batch : validation sequences the Jacobian diagnostics are averaged over
    plateau : patience (in records) of a reduce-on-plateau schedule on ``val_loss``; None: off
    progress : None, bool or callable(stage, done, total), optional — a progress meter
        (``dynlab.progress``) told every iteration, with the batch loss as a note: None shows a bar
        on stderr once training has run a few seconds (nothing when quiet), False nothing, True a
        bar at once
    penalty : L2 weight penalties added to the batch loss, ``{name: λ}`` or ``{name: (λ, c)}``:
        λ‖θ − C‖²_F for the model parameter ``name``, with C = 0 (``λ`` alone) or C = c·I (a
        square matrix parameter; e.g. ``{"U": (λ, -1.0)}`` on a RIN penalises V = U + I, while
        ``{"U": λ}`` penalises U).  Its exact gradient 2λ(θ − C) joins the data gradient before
        clipping (``penalty_terms``); the recorded ``loss`` stays the data loss.  None: no penalty
    engine, device, dtype : "numba" (default: exact BPTT on the CPU) or "torch": the ``dl.to_torch``
        module and autograd on ``device`` (default "cuda" if PyTorch sees a GPU, else "cpu") in ``dtype``
        ("float64" or "float32"), the rest of the run the same (``dynlab.train.torch_engine``)
    checkpoint, checkpoint_every : a ``.npz`` path the run's whole state is written to (atomically)
        every ``checkpoint_every`` iterations (default ``record_every``) and at the end: a run killed
        at any point continues from it with ``resume_training``, as if it had never stopped
    backend : where dynlab's own engine runs the forward and backward passes, the evaluation and
        the Jacobian diagnostics: "numpy" (the reference) or "numba"; None: ``config.DEFAULT_BACKEND``
        (a Backend object is used as it is).  A backend without training passes (``cupy``) is refused
        with a ParameterError naming ``backend`` before any work; the history's ``backend`` attribute
        names the backend that ran

    Returns
    -------
    TrainResult with the trained ``model``, ``readout``, ``optimiser``, ``iteration`` and the
    ``history`` Dataset (variables in the module docstring, over ``iteration``).  A non-finite
    state raises ``DivergenceError`` naming the iteration, with the history so far in
    ``err.partial``.

    Example
    -------
    >>> task = dl.tasks.make_task("adding", 100, seed=0)
    >>> m = dl.make_model("irnn", 64, 2, K=5, rank=4, g0="previous", activation="relu", eta=0.1, seed=0)
    >>> res = train_model(m, task, iterations=600, lr=1e-2)
    """
    from .._validate import as_int, as_scalar
    from ..backends import get_backend
    from ..tasks.sequences import Task
    from .torch_engine import check_engine, make_engine

    bp.param_names(model)
    be = get_backend(backend)       # resolved once: every pass below runs on this object
    check_engine(engine)
    be.require("train_forward", model.form())     # the passes (and the diagnostics' forward pass)
    be.require("train_backward", model.form())    # of every engine
    if not isinstance(task, Task):
        raise ParameterError("task", f"must be a dynlab.tasks.Task (see make_task), got {type(task).__name__}")
    if task.inputs != model.inputs:
        raise ParameterError("inputs", f"the model takes {model.inputs} inputs but task {task.name!r} has "
                                       f"{task.inputs} input features")
    iterations = as_int(iterations, "iterations", low=1)
    batch = as_int(batch, "batch", low=1)
    record_every = as_int(record_every, "record_every", low=1)
    diag_batch = as_int(diag_batch, "diag_batch", low=1)
    _check_tapes(model, task, batch)
    sigma_eps = as_scalar(sigma_eps, "sigma_eps", low=0.0)
    seed = as_int(seed, "seed", low=0)
    if clip is not None:
        clip = as_scalar(clip, "clip", low=0.0, low_open=True)
    penalty = _check_penalty(model, penalty)
    freeze = tuple(_default_freeze(model) if freeze is None else freeze)
    for name in freeze:
        if name not in model.params():
            raise ParameterError("freeze", f"{name!r} is not a parameter of {model.name} "
                                           f"({', '.join(model.params())})")
    n = model.state_size        # h_0 (and ε) live on the dynamical state: [h; c] for an LSTM
    config = {"task": dict(task.settings, seed=task.seed), "optimiser": str(optimiser).lower(), "batch": batch,
              "clip": clip, "sigma_eps": sigma_eps, "record_every": record_every, "seed": seed,
              "freeze": list(freeze), "learn_h0": bool(learn_h0), "diag_batch": diag_batch, "plateau": plateau}
    if penalty:
        config["penalty"] = penalty
    if checkpoint is not None:
        checkpoint = os.fspath(checkpoint)
        checkpoint_every = as_int(record_every if checkpoint_every is None else checkpoint_every, "checkpoint_every",
                                  low=1)
    # the one dispatch point of the engines: where the loss, its gradients and the evaluation outputs come from
    eng = make_engine(engine, model, device=device, dtype=dtype)
    if eng is not None:
        config.update(eng.config())
    if eng is None:
        def step_fn(*args, **kw):
            return bp.loss_and_grads(*args, backend=be, **kw)

        def score(*args):
            return evaluate(*args, backend=be)
    else:
        step_fn, score = eng.loss_and_grads, eng.evaluate

    if _resume is None:
        readout = bp.init_readout(model.hidden, task.outputs, seed=[seed, 0])
        opt = make_optimiser(optimiser, lr=lr)
        sched = None if plateau is None else Plateau(opt, patience=as_int(plateau, "plateau", low=1))
        start, past = 0, None
        h0 = np.zeros(n) if learn_h0 else None
    else:
        readout, opt, sched, start, past, h0 = (_resume[k] for k in ("readout", "optimiser", "plateau", "start",
                                                                      "history", "h0"))

    xd, _ = task.batch("val", np.arange(min(diag_batch, task.size("val"))))
    records = {k: [] for k in HISTORY_VARS}
    its = []
    talk = contextlib.ExitStack()
    talk.enter_context(meter(progress))
    report_progress(STAGE, 0, iterations)
    t0 = time.perf_counter()
    end = start + iterations
    loss = math.nan
    it = start
    workspace = bp.Workspace()  # the tape memory of every step, reused (its tapes are never kept)
    try:
        for it in range(start + 1, end + 1):
            x, y = task.sample(np.random.default_rng([seed, 1, it]), batch)
            eps = sigma_eps * np.random.default_rng([seed, 2, it]).standard_normal((batch, n))
            hstart = eps if h0 is None else eps + h0
            loss, grads, info = step_fn(model, readout, x, y, loss=task.loss, h0=hstart, workspace=workspace)
            if not math.isfinite(loss):
                raise DivergenceError(step=task.steps, batch=0, model=model.name)
            params = {**model.params(), **readout}
            g = {k: grads[k] for k in params}
            if penalty:
                g.update({k: g[k] + v for k, v in penalty_terms(model, penalty)[1].items()})
            if h0 is not None:
                params["h0"], g["h0"] = h0, grads["h0"].sum(axis=0)
            for name in freeze:
                params.pop(name), g.pop(name)
            for name in _log_params(model, params):       # optimised as ln θ: ∂L/∂ln θ = θ ∂L/∂θ
                value = np.asarray(params.pop(name), dtype=np.float64)
                params["log_" + name] = np.log(value)
                g["log_" + name] = g.pop(name) * value
            g, gnorm = clip_by_global_norm(g, clip)
            new = opt.step(params, g)
            for key in [k for k in new if k.startswith("log_")]:
                new[key[4:]] = np.exp(new.pop(key))
            new = _project(model, new)
            readout = {k: new[k] for k in bp.READOUT}
            h0 = new.get("h0", h0)
            model = bp.with_params(model, new)
            if it % record_every == 0 or it == end:
                ev = score(model, readout, task, "val")
                dg = jacobian_diagnostics(model, xd, backend=be)
                its.append(it)
                rec = {"loss": loss, "val_loss": ev["loss"], "val_accuracy": ev.get("accuracy", math.nan),
                       "dL_dh1_norm": float(np.mean(np.linalg.norm(batch * info["dL_dh1"], axis=1))),
                       "dL_dWr_norm": float(np.linalg.norm(info["dL_dWr"])), "grad_norm": gnorm, "lr": opt.lr}
                rec.update({k: _gmean(v) for k, v in dg.items()})
                for k in HISTORY_VARS:
                    records[k].append(rec[k])
                if sched is not None and it % record_every == 0:  # not the extra record at a run's end,
                    sched.update(ev["loss"])                      # so a resumed run sees the same schedule
            if checkpoint is not None and it % checkpoint_every == 0 and it != end:
                hist = _history(model, readout, task, records, its, past, config, command, eng, be.name)
                _write_checkpoint(checkpoint, TrainResult(model, readout, opt, it, hist, config, h0, sched))
            report_progress(STAGE, it - start, iterations, note=f"loss {loss:.4g}")
    except DivergenceError as err:
        hist = _history(model, readout, task, records, its, past, config, command, eng, be.name)
        raise DivergenceError(step=err.step, batch=err.batch, model=f"{model.name} (training iteration {it})",
                              partial=hist) from None
    finally:
        talk.close()
    hist = _history(model, readout, task, records, its, past, config, command, eng, be.name)
    hist.attrs["seconds"] = round(time.perf_counter() - t0, 3)
    result = TrainResult(model, readout, opt, end, hist, config, h0, sched)
    if checkpoint is not None:
        _write_checkpoint(checkpoint, result)
    return result


def _write_checkpoint(path: str, result: TrainResult) -> None:
    """``save_checkpoint`` beside ``path``, renamed over it: a kill while writing keeps the last one."""
    final = path if path.endswith(".npz") else path + ".npz"
    tmp = save_checkpoint(final[:-4] + ".writing.npz", result)
    os.replace(tmp, final)


def _history(model, readout, task, records, its, past, config, command, eng=None, backend="numba"):
    import xarray as xr

    from .._dataset import base_attrs, clean_attr, finish, model_attrs, model_variables

    data = {k: np.asarray(v, dtype=np.float64) for k, v in records.items()}
    it = np.asarray(its, dtype=np.int64)
    if past is not None:
        it = np.concatenate([past["iteration"], it])
        data = {k: np.concatenate([past[k], v]) for k, v in data.items()}
    if task.loss not in ("ce", "ce-seq"):
        data.pop("val_accuracy")
    dvars = {k: xr.Variable(("iteration",), v, {"long_name": HISTORY_VARS[k][0], "units": HISTORY_VARS[k][1]})
             for k, v in data.items()}
    dvars.update(model_variables(model))
    dvars["W_out"] = xr.Variable(("output", "unit"), readout["W_out"], {"long_name": "read-out weights W_out",
                                                                         "units": "1"})
    dvars["b_out"] = xr.Variable(("output",), readout["b_out"], {"long_name": "read-out bias b_out", "units": "1"})
    attrs = model_attrs(model)
    attrs.update(base_attrs(backend, command))        # the backend that ran
    attrs.update({"task": task.name, "loss_kind": task.loss, "baseline": float(task.baseline),
                  "baseline_name": task.baseline_name, "task_steps": int(task.steps)})
    for k, v in config.items():
        if k == "task":
            attrs.update({f"task_{kk}": clean_attr(vv) for kk, vv in v.items() if kk not in ("task", "steps")})
        elif k == "seed":
            attrs["train_seed"] = int(v)
        elif k == "penalty":
            attrs["penalty"] = json.dumps(v)
        else:
            attrs[k] = clean_attr(v if not isinstance(v, list) else ",".join(v))
    if eng is not None:
        attrs.update(eng.attrs())
    coords = {"iteration": ("iteration", it, {"long_name": "training iteration", "units": "1"})}
    return finish(xr.Dataset(dvars, coords=coords, attrs=attrs), "train_model")


# ============================================================================ checkpoints
def save_checkpoint(path, result: TrainResult) -> str:
    """One ``.npz``: the model exactly as ``dynlab.save_model`` writes it (so ``load_model``
    reads it), plus, under ``train/``, the read-out, the optimiser's exact state, the learned
    h0, the iteration count, the history so far and the run's settings (JSON)."""
    from ..io import save_model

    path = os.fspath(path)
    if not path.endswith(".npz"):
        path += ".npz"
    import tempfile

    with tempfile.TemporaryDirectory() as tmpdir:  # the model entries exactly as save_model writes them
        tmp = save_model(result.model, os.path.join(tmpdir, "model.npz"))
        with np.load(tmp, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    arrays.update({_CKPT + k: np.asarray(v) for k, v in result.readout.items()})
    arrays.update({_CKPT + k: v for k, v in result.optimiser.state_dict().items()})
    if result.plateau is not None:
        arrays.update({_CKPT + k: v for k, v in result.plateau.state_dict().items()})
    if result.h0 is not None:
        arrays[_CKPT + "h0"] = np.asarray(result.h0)
    arrays[_CKPT + "iteration"] = np.array(result.iteration)
    arrays[_CKPT + "config"] = np.array(json.dumps(result.config))
    hist = result.history
    arrays[_CKPT + "history/iteration"] = hist["iteration"].values
    for k in HISTORY_VARS:
        if k in hist:
            arrays[_CKPT + "history/" + k] = hist[k].values
    try:
        np.savez(path, **arrays)
    except OSError as exc:
        raise ParameterError("save_weights", f"cannot write {path} ({exc.strerror or exc})") from None
    return path


class _Checkpoint:
    """Field-by-field reading of a checkpoint's ``train/…`` entries: every problem is one
    ``ParameterError`` on ``resume`` naming the file and the entry (``train/opt/m/U``), or the
    key inside the JSON settings (``train/config``, key ``task.steps``)."""

    def __init__(self, path: str, data: dict):
        self.path, self.data = path, data

    def fail(self, field: str, message: str, key: str | None = None):
        from ..io import field_error

        raise field_error("resume", self.path, _CKPT + field, f"key {key!r}: {message}" if key else message)

    def need(self, field: str) -> np.ndarray:
        if field not in self.data:
            self.fail(field, "is missing (the checkpoint is incomplete; it was not written by this dynlab, or "
                             "it was altered)")
        return self.data[field]

    def scalar(self, field: str, kind: str) -> float | int | str:
        """A 0-d entry of kind 'int', 'float' (real, finite unless inf is allowed) or 'str'."""
        v = self.need(field)
        if v.ndim != 0:
            self.fail(field, f"must be a single value, got an array of shape {v.shape}")
        k = v.dtype.kind
        if kind == "str":
            if k != "U":
                self.fail(field, f"must be a string, got dtype {v.dtype}")
            return str(v)
        if kind == "int":
            if k not in "iu":
                self.fail(field, f"must be an integer, got dtype {v.dtype} ({v.item()!r})")
            return int(v)
        if k not in "fiu":
            self.fail(field, f"must be a real number, got dtype {v.dtype}")
        return float(v)

    def array(self, field: str, shape: tuple, *, finite: bool = True) -> np.ndarray:
        v = self.need(field)
        if v.dtype.kind == "c":
            self.fail(field, f"must be real, got complex values (dtype {v.dtype})")
        if v.dtype.kind != "f":
            self.fail(field, f"must be floating-point numbers, got dtype {v.dtype}")
        if v.shape != tuple(shape):
            self.fail(field, f"must have shape {tuple(shape)}, got {v.shape}")
        if finite and not np.all(np.isfinite(v)):
            self.fail(field, f"contains a non-finite value at index "
                             f"{tuple(int(i) for i in np.argwhere(~np.isfinite(v))[0])}")
        return v


def _config_value(ck: _Checkpoint, config: dict, key: str, check, what: str, *, where=None, optional=False):
    """``config[key]`` if ``check(value)``, else a ParameterError naming train/config and the key."""
    where = where or key
    if key not in config:
        if optional:
            return None
        ck.fail("config", "is missing this key", where)
    value = config[key]
    if not check(value):
        ck.fail("config", f"must be {what}, got {value!r}", where)
    return value


def _is_int(v, low=None):
    return isinstance(v, int) and not isinstance(v, bool) and (low is None or v >= low)


def _is_num(v, low=None, low_open=False):
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and (low is None or (v > low if low_open else v >= low)))


def _read_config(ck: _Checkpoint) -> dict:
    from ..tasks import TASKS
    from .optim import OPTIMISERS

    text = ck.scalar("config", "str")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        ck.fail("config", f"is not valid JSON ({exc})")
    if not isinstance(config, dict):
        ck.fail("config", f"must be a JSON object of the run's settings, got {type(config).__name__}")
    task = _config_value(ck, config, "task", lambda v: isinstance(v, dict), "an object of the task's settings")
    _config_value(ck, task, "task", lambda v: isinstance(v, str) and v in TASKS,
                  f"one of {', '.join(TASKS)}", where="task.task")
    for key in ("n_train", "n_val", "n_test"):
        _config_value(ck, task, key, lambda v: _is_int(v, 1), "an integer ≥ 1", where=f"task.{key}")
    _config_value(ck, task, "seed", lambda v: _is_int(v, 0), "an integer ≥ 0", where="task.seed")
    _config_value(ck, task, "steps", lambda v: v is None or _is_int(v, 1), "an integer ≥ 1 or null",
                  where="task.steps", optional=True)
    _config_value(ck, task, "pad", lambda v: _is_int(v, 0), "an integer ≥ 0", where="task.pad", optional=True)
    _config_value(ck, task, "pad_variance", lambda v: _is_num(v, 0.0, True), "a number > 0",
                  where="task.pad_variance", optional=True)
    _config_value(ck, config, "optimiser", lambda v: v in OPTIMISERS, f"one of {', '.join(OPTIMISERS)}")
    for key in ("batch", "record_every", "diag_batch"):
        _config_value(ck, config, key, lambda v: _is_int(v, 1), "an integer ≥ 1")
    _config_value(ck, config, "seed", lambda v: _is_int(v, 0), "an integer ≥ 0")
    _config_value(ck, config, "clip", lambda v: v is None or _is_num(v, 0.0, True), "a number > 0 or null")
    _config_value(ck, config, "sigma_eps", lambda v: _is_num(v, 0.0), "a number ≥ 0")
    _config_value(ck, config, "freeze", lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v),
                  "a list of parameter names")
    _config_value(ck, config, "learn_h0", lambda v: isinstance(v, bool), "true or false")
    _config_value(ck, config, "plateau", lambda v: v is None or _is_int(v, 1), "an integer ≥ 1 or null")
    _config_value(ck, config, "engine", lambda v: v in ("numba", "torch"), "'numba' or 'torch'", optional=True)
    _config_value(ck, config, "device", lambda v: isinstance(v, str), "a device name", optional=True)
    _config_value(ck, config, "torch_dtype", lambda v: v in ("float32", "float64"), "'float32' or 'float64'",
                  optional=True)
    return config


#: The moments each optimiser keeps per trained array (SGD: only with momentum).
_SLOTS = {"adam": ("m", "v"), "rmsprop": ("r",), "sgd": ("v",)}


def load_checkpoint(path) -> dict:
    """Read what ``save_checkpoint`` wrote: model, readout, optimiser, plateau, h0, iteration,
    history arrays, config and the task; every entry is checked (type, shape, range, and that
    the optimiser's moments cover exactly the trained arrays), so a damaged or altered
    checkpoint is refused naming the file and the entry instead of resuming differently."""
    from ..io import _load_model

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ParameterError("resume", f"no such file: {path}")
    model = _load_model(path, param="resume")
    with np.load(path, allow_pickle=False) as f:
        data = {k[len(_CKPT):]: f[k] for k in f.files if k.startswith(_CKPT)}
    if "config" not in data:
        raise ParameterError("resume", f"{path} holds weights but no training state (written by save_model, "
                                       "not by a training run)")
    ck = _Checkpoint(path, data)
    config = _read_config(ck)
    task = _checkpoint_task(ck, config, model)

    start = ck.scalar("iteration", "int")
    if start < 1:
        ck.fail("iteration", f"must be ≥ 1 (the iterations the run has done), got {start}")
    readout = {"W_out": ck.array("W_out", (task.outputs, model.hidden)), "b_out": ck.array("b_out", (task.outputs,))}
    h0 = None
    if config["learn_h0"]:
        h0 = ck.array("h0", (model.state_size,))
    elif "h0" in data:
        ck.fail("h0", "is present but the run's settings (train/config, key 'learn_h0') say h0 is not learned")

    name = ck.scalar("opt_name", "str")
    if name != config["optimiser"]:
        ck.fail("opt_name", f"is {name!r} but the run's settings (train/config, key 'optimiser') say "
                            f"{config['optimiser']!r}")
    t = ck.scalar("opt_t", "int")
    if t != start:
        ck.fail("opt_t", f"must equal the iteration count train/iteration = {start} (one optimiser step per "
                         f"iteration), got {t}")
    probe = make_optimiser(name)
    hyper = {k: ck.scalar(f"opt_{k}", "float") for k in probe.hyper()}
    try:
        opt = make_optimiser(name, **hyper)
    except ParameterError as exc:
        ck.fail(f"opt_{exc.param}", exc.message)
    opt.t = t

    # the moments: exactly one per slot and trained array, with that array's shape
    params = {**model.params(), **readout}
    if h0 is not None:
        params["h0"] = h0
    for name_ in config["freeze"]:
        if name_ not in model.params():
            ck.fail("config", f"{name_!r} is not a parameter of {model.name} ({', '.join(model.params())})",
                    "freeze")
        params.pop(name_)
    for name_ in _log_params(model, params):
        params["log_" + name_] = params.pop(name_)
    slots = _SLOTS[name] if (name != "sgd" or opt.momentum > 0) else ()
    expected = {f"opt/{s}/{k}": np.shape(v) for s in slots for k, v in params.items()}
    for key in sorted(k for k in data if k.startswith("opt/")):
        if key not in expected:
            ck.fail(key, f"is not a moment of this run's {name} optimiser (it keeps "
                         f"{', '.join(slots) or 'none'} for {', '.join(params)})")
    for key, shape in expected.items():
        _, slot, pname = key.split("/", 2)
        opt.slots.setdefault(slot, {})[pname] = np.array(ck.array(key, shape), dtype=np.float64)

    sched = None
    if config["plateau"] is not None:
        sched = Plateau(opt, patience=config["plateau"])
        best = ck.scalar("plateau_best", "float")
        if math.isnan(best):
            ck.fail("plateau_best", "must be a number, got nan")
        bad = ck.scalar("plateau_bad", "int")
        if not 0 <= bad < config["plateau"]:
            ck.fail("plateau_bad", f"must lie in [0, {config['plateau']}) (the patience), got {bad}")
        sched.best, sched.bad = best, bad

    its = ck.need("history/iteration")
    if its.ndim != 1 or its.dtype.kind not in "iu":
        ck.fail("history/iteration", f"must be a 1-d array of integers, got dtype {its.dtype} shape {its.shape}")
    if its.size and (np.any(np.diff(its) <= 0) or its[0] < 1 or its[-1] > start):
        ck.fail("history/iteration", f"must increase within [1, {start}] (train/iteration)")
    hist = {"iteration": its}
    for key in sorted(k for k in data if k.startswith("history/") and k != "history/iteration"):
        var = key[len("history/"):]
        if var not in HISTORY_VARS:
            ck.fail(key, f"is not a history variable ({', '.join(HISTORY_VARS)})")
        hist[var] = ck.array(key, its.shape, finite=False)
    for k in HISTORY_VARS:
        hist.setdefault(k, np.full(its.shape, np.nan))
    known = ({"config", "iteration", "W_out", "b_out", "h0", "opt_name", "opt_t", "plateau_best", "plateau_bad"}
             | {f"opt_{k}" for k in hyper})
    for key in data:
        if key not in known and not key.startswith(("opt/", "history/")):
            ck.fail(key, "is not an entry of a training checkpoint")
    return {"model": model, "readout": {k: np.array(v) for k, v in readout.items()}, "optimiser": opt,
            "plateau": sched, "h0": None if h0 is None else np.array(h0), "start": start, "history": hist,
            "config": config, "task": task}


def _checkpoint_task(ck: _Checkpoint, config: dict, model):
    """The run's task, rebuilt from its settings; a problem names train/config and the key."""
    try:
        task = task_from_config(config)
    except ParameterError as exc:
        ck.fail("config", exc.message, f"task.{exc.param}")
    if task.inputs != model.inputs:
        ck.fail("config", f"task {task.name!r} has {task.inputs} input features but the model takes "
                          f"{model.inputs}", "task.task")
    try:
        _check_penalty(model, config.get("penalty"))
    except ParameterError as exc:
        ck.fail("config", exc.message, "penalty")
    return task


def task_from_config(config: dict):
    """The task a run's settings describe (``make_task`` with the saved name, steps, seed, sizes,
    padding, permutation, and for the real data its files and normalisation)."""
    from ..tasks import make_task
    from ..tasks.sequences import FIXED_STEPS

    t = config["task"]
    return make_task(t["task"], None if t["task"] in FIXED_STEPS else t.get("steps"), seed=t["seed"],
                     n_train=t["n_train"], n_val=t["n_val"], n_test=t["n_test"], pad=t.get("pad", 0),
                     pad_variance=t.get("pad_variance", 1.0), permute=t.get("permute"), data=t.get("data"),
                     normalise=t.get("normalise"), binary=bool(t.get("binary", False)))


def resume_training(path, iterations: int, *, progress=None, command=None, device=None, checkpoint=None,
                    checkpoint_every: int | None = None, backend=None) -> TrainResult:
    """Continue the run saved in ``path`` for ``iterations`` more iterations, bit-for-bit as if
    it had never stopped (same batches, same ε, same optimiser moments), on its engine and dtype
    (``device`` overrides the torch engine's); ``checkpoint``, ``checkpoint_every`` and ``backend``
    as ``train_model``'s."""
    from .._validate import as_int

    iterations = as_int(iterations, "iterations", low=1)
    state = load_checkpoint(path)
    c = state["config"]
    engine = {"engine": c.get("engine", "numba")}
    if engine["engine"] == "torch":
        engine.update(device=c["device"] if device is None else device, dtype=c.get("torch_dtype", "float64"))
    elif device is not None:
        raise ParameterError("device", f"{os.fspath(path)} is a run of dynlab's own engine (CPU); device applies "
                                       f"to engine='torch'")
    try:
        return train_model(state["model"], state["task"], iterations=iterations, optimiser=c["optimiser"],
                           lr=state["optimiser"].lr, batch=c["batch"], clip=c["clip"], sigma_eps=c["sigma_eps"],
                           record_every=c["record_every"], seed=c["seed"], freeze=c["freeze"],
                           learn_h0=c["learn_h0"], diag_batch=c["diag_batch"], plateau=c["plateau"],
                           progress=progress, command=command, penalty=c.get("penalty"), checkpoint=checkpoint,
                           checkpoint_every=checkpoint_every, backend=backend, _resume=state, **engine)
    except ParameterError as exc:  # every setting here came from the file, none from an option
        raise ParameterError("resume", f"{os.fspath(path)}: {exc.param}: {exc.message}") from None


def _check_tapes(model, task, batch: int) -> None:
    """Refuse (before anything is drawn) a minibatch whose BPTT tapes this machine cannot hold:
    the states of every step and of every inner iteration (K for an irnn, 1 otherwise) plus the
    pre-activations, B×T×D float64 each, and the minibatch's inputs B×T×d."""
    from .._resources import check_memory, largest, nbytes, shape_text

    B, T, D, d = int(batch), int(task.steps), int(model.state_size), int(model.inputs)
    K = model.step_cost().inner_steps
    n = (2 * K + 1) * nbytes(B, T, D) + nbytes(B, T, d)
    check_memory(n, largest(batch=B, steps=T, hidden=D),
                 f"the BPTT tapes ({2 * K + 1} × B×T×D = {shape_text(B, T, D)} float64, and the inputs)")


__all__ = ["HISTORY_VARS", "TrainResult", "evaluate", "jacobian_diagnostics", "load_checkpoint", "resume_training",
           "run_outputs", "save_checkpoint", "task_from_config", "train_model"]

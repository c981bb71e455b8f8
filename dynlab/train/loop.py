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
import math
import os
import time

import numpy as np

from .._progress import progress as report_progress
from ..errors import DivergenceError, ParameterError
from ..models import Model
from ..progress import meter
from . import backprop as bp
from .checkpoint import load_checkpoint, save_checkpoint, task_from_config, write_checkpoint
from .history import HISTORY_VARS, history_dataset
from .optim import Plateau, clip_by_global_norm, make_optimiser
from .params import _check_penalty, _default_freeze, _log_params, _project, penalty_terms

EPS_MIN = 1e-6


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
                hist = history_dataset(model, readout, task, records, its, past, config, command, eng, be.name)
                write_checkpoint(checkpoint, TrainResult(model, readout, opt, it, hist, config, h0, sched))
            report_progress(STAGE, it - start, iterations, note=f"loss {loss:.4g}")
    except DivergenceError as err:
        hist = history_dataset(model, readout, task, records, its, past, config, command, eng, be.name)
        raise DivergenceError(step=err.step, batch=err.batch, model=f"{model.name} (training iteration {it})",
                              partial=hist) from None
    finally:
        talk.close()
    hist = history_dataset(model, readout, task, records, its, past, config, command, eng, be.name)
    hist.attrs["seconds"] = round(time.perf_counter() - t0, 3)
    result = TrainResult(model, readout, opt, end, hist, config, h0, sched)
    if checkpoint is not None:
        write_checkpoint(checkpoint, result)
    return result


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


#: ``load_checkpoint``, ``save_checkpoint`` and ``task_from_config`` live in ``dynlab.train.checkpoint``,
#: ``HISTORY_VARS`` in ``dynlab.train.history`` and ``penalty_terms`` in ``dynlab.train.params``; they
#: stay importable from here, where they were first documented.
__all__ = ["HISTORY_VARS", "TrainResult", "evaluate", "jacobian_diagnostics", "load_checkpoint", "penalty_terms",
           "resume_training", "run_outputs", "save_checkpoint", "task_from_config", "train_model"]

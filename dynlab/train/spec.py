"""The CLI's entry to training (``dynlab train``): ``TrainSpec`` → a training run of a sequence
model (``train_model``, ``resume_training``) or an implicit network (``train_implicit``), with the
defaults the command line documents.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np

from .._validate import as_bool
from ..errors import ParameterError
from . import loop
from .loop import TrainResult

@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """A ``dynlab train`` run: the shared ``RunSpec`` (model) plus the task and the optimiser.

    Parameters
    ----------
    run : dynlab.spec.RunSpec — the model (``hidden`` None means 64; ``inputs`` come from the task) and
        the backend that trains it (``--backend``; one that cannot train is refused in one line)
    task : task name (``dynlab.tasks.TASKS``; ``xor``/``oscillator`` with ``--model implicit``)
    task_data : the real data's files for ``mnist-pixels``, ``mnist-rows``, ``noisy-mnist``, ``har2``
        (``make_task``'s ``data``)
    steps : the task's T (None: its default);  pad : noise-padding steps (``make_task``)
    permute : the permuted pixel order's seed (``make_task``'s ``permute``; None: natural order)
    iterations, lr, optimiser, batch, clip, sigma_eps, record_every : as ``train_model``;
        iterations None means 500 (3000 for the implicit tasks), lr None 1e-3 (0.01 for them)
    eta_per_k : give an iRNN one learnable η per inner step (η becomes a (K,) array)
    resume : a checkpoint to continue (model, task and optimiser all come from it)
    save_weights : where to write the checkpoint (model + training state, ``.npz``)
    """

    run: object
    task: str = "adding"
    steps: int | None = None
    pad: int = 0
    task_data: str | None = None
    permute: int | None = None
    iterations: int | None = None
    lr: float | None = None
    optimiser: str = "adam"
    batch: int = 128
    clip: float | None = None
    sigma_eps: float = 0.0
    record_every: int = 10
    eta_per_k: bool = False
    resume: str | None = None
    save_weights: str | None = None
    progress: bool | None = None


#: ``hidden`` of a ``dynlab train`` model when not given.
TRAIN_DEFAULT_HIDDEN = 64
#: Tasks of the implicit-network trainer (``--model implicit``).
IMPLICIT_TASKS = ("xor", "oscillator")
#: (iterations, lr) when not given: sequence tasks, and the implicit tasks (the paper's Adam 0.01).
TRAIN_DEFAULTS = {"sequence": (500, 1e-3), "implicit": (3000, 1e-2)}


def _defaults(spec: TrainSpec, kind: str) -> tuple:
    its, lr = TRAIN_DEFAULTS[kind]
    return (its if spec.iterations is None else spec.iterations), (lr if spec.lr is None else spec.lr)


def train_spec(spec: TrainSpec) -> TrainResult:
    """Build the spec's model and task and train (or resume), then write the checkpoint if asked."""
    run = spec.run
    if (run.model or "").lower() == "implicit" or str(spec.task).lower() in IMPLICIT_TASKS:
        return train_implicit_spec(spec)
    if spec.resume is not None:
        if not os.path.isfile(spec.resume):
            raise ParameterError("resume", f"no such file: {spec.resume}")
        given = {"model": run.model, "hidden": run.hidden, "inputs": run.inputs, "weights": run.weights,
                 "weight_scale": run.weight_scale, **run.given_settings()}
        for key, value in given.items():
            if value is not None:
                raise ParameterError(key, "cannot be combined with resume: the checkpoint fixes the model")
        res = loop.resume_training(spec.resume, _defaults(spec, "sequence")[0], progress=spec.progress,
                                   command=run.command, backend=run.backend)
    else:
        from ..spec import build_model
        from ..tasks import make_task

        try:
            task = make_task(spec.task, spec.steps, seed=run.seed, pad=spec.pad, data=spec.task_data,
                             permute=spec.permute)
        except ParameterError as exc:   # make_task's data= is --task-data here (--data is the history file)
            if exc.param != "data":
                raise
            raise ParameterError("task_data", exc.message) from None
        if run.inputs is not None and run.inputs != task.inputs:
            raise ParameterError("inputs", f"task {task.name!r} has {task.inputs} input features, not {run.inputs}")
        if run.weights is None:
            run = dataclasses.replace(run, inputs=task.inputs,
                                      hidden=TRAIN_DEFAULT_HIDDEN if run.hidden is None else run.hidden)
        model = build_model(run)
        if spec.eta_per_k:
            if "eta" not in model.TRAIN_LOG:
                raise ParameterError("eta_per_k", f"applies to irnn, not {model.name}")
            if np.ndim(model.eta) == 0:
                model = model.replace(eta=np.full(model.K, float(model.eta)))
        iterations, lr = _defaults(spec, "sequence")
        res = loop.train_model(model, task, iterations=iterations, optimiser=spec.optimiser, lr=lr,
                               batch=spec.batch, clip=spec.clip, sigma_eps=spec.sigma_eps,
                               record_every=spec.record_every, seed=run.seed, progress=spec.progress,
                               command=run.command, backend=run.backend)
    if spec.save_weights is not None:
        loop.save_checkpoint(spec.save_weights, res)
    return res


@dataclasses.dataclass
class ImplicitTrainResult:
    """A finished implicit-network run: the trained model and the history Dataset of
    ``dynlab.train.implicit.train_implicit``."""

    model: object
    history: object

    def __repr__(self) -> str:
        """A few lines: the model, the task and gradient, the final losses (never the arrays)."""
        from .._repr import number

        h = self.history
        a = h.attrs
        final = [f"{k}={number(h[k].values[-1])}" for k in ("loss", "val_loss") if k in h and h[k].size]
        if "test_loss" in h:
            final.append(f"test_loss={number(h['test_loss'].values)}")
        return (f"ImplicitTrainResult({self.model!r},\n"
                f"    task={a.get('task')!r}, gradient={a.get('gradient')!r}, iterations={a.get('iterations')}, "
                f"optimiser={a.get('optimiser')!r}, lr={a.get('lr')},\n"
                f"    final: {', '.join(final)})")


#: ``dynlab train`` options that have no meaning for the implicit networks, with their defaults.
_NOT_IMPLICIT = {"steps": None, "pad": 0, "clip": None, "sigma_eps": 0.0, "eta_per_k": False, "resume": None,
                 "task_data": None, "permute": None}
#: ``--set`` settings passed on to ``train_implicit`` (the rest are model settings).
_IMPLICIT_TRAIN_SETTINGS = ("hidden2", "gradient", "feedforward", "second", "samples", "window", "eval_every", "tol")


def train_implicit_spec(spec: TrainSpec) -> ImplicitTrainResult:
    """``--model implicit`` (tasks ``xor``, ``oscillator``): ``dynlab.train.implicit.train_implicit``.

    ``--hidden`` is the first layer's size (default 2), ``--set hidden2=n`` adds the second
    layer, ``--set gradient=semi`` the semi-gradient, ``--set feedforward=1`` the feed-forward
    baseline, ``--set second=or`` the XOR's second target; ``--weight-scale`` the recurrent
    weights' scale (default 0, as the paper); ``--save-weights`` writes the trained model.
    Options without a meaning here (``--steps``, ``--pad``, ``--clip``, ``--sigma-eps``,
    ``--eta-per-k``, ``--resume``) are refused, naming the option.
    """
    from .implicit import train_implicit

    run = spec.run
    if (run.model or "").lower() != "implicit":
        raise ParameterError("task", f"{spec.task!r} is a task of the implicit networks; use --model implicit")
    if str(spec.task).lower() not in IMPLICIT_TASKS:
        raise ParameterError("task", f"the implicit networks train on {', '.join(IMPLICIT_TASKS)}, not {spec.task!r}")
    for name, default in _NOT_IMPLICIT.items():
        if getattr(spec, name) != default:
            raise ParameterError(name, "has no meaning for the implicit networks")
    for name in ("K", "eta", "alpha", "g0", "weights"):
        if getattr(run, name) is not None:
            raise ParameterError(name, "has no meaning for the implicit networks")
    settings = dict(run.settings)
    extra = {k: settings.pop(k) for k in list(settings) if k in _IMPLICIT_TRAIN_SETTINGS}
    if settings:
        raise ParameterError(next(iter(settings)), f"is not a setting of implicit training; choose from "
                                                   f"{', '.join(_IMPLICIT_TRAIN_SETTINGS)}")
    if "feedforward" in extra:
        extra["feedforward"] = as_bool(extra["feedforward"], "feedforward")
    iterations, lr = _defaults(spec, "implicit")
    model, history = train_implicit(str(spec.task).lower(), hidden=2 if run.hidden is None else run.hidden,
                                    activation=run.activation or "sigmoid", optimiser=spec.optimiser, lr=lr,
                                    iterations=iterations, batch=spec.batch, seed=run.seed,
                                    weight_scale=0.0 if run.weight_scale is None else run.weight_scale,
                                    weights_out=spec.save_weights, command=run.command, backend=run.backend,
                                    **extra)
    return ImplicitTrainResult(model, history)


__all__ = ["IMPLICIT_TASKS", "ImplicitTrainResult", "TRAIN_DEFAULTS", "TRAIN_DEFAULT_HIDDEN", "TrainSpec", "train_implicit_spec",
           "train_spec"]

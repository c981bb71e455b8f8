"""Training checkpoints: one ``.npz`` that ``dynlab.load_model`` reads as the model and that holds,
under ``train/``, everything a run needs to continue bit-for-bit (``save_checkpoint``), read back
field by field so a damaged or altered file is refused naming the entry (``load_checkpoint``).
``dynlab.train.loop.resume_training`` continues a run from one.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from ..errors import ParameterError
from .history import HISTORY_VARS
from .optim import Plateau, make_optimiser
from .params import _check_penalty, _log_params

#: the prefix of a checkpoint's training entries (the model's own entries have none)
_CKPT = "train/"


def save_checkpoint(path, result) -> str:
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


def write_checkpoint(path: str, result) -> None:
    """``save_checkpoint`` beside ``path``, renamed over it: a kill while writing keeps the last one."""
    final = path if path.endswith(".npz") else path + ".npz"
    tmp = save_checkpoint(final[:-4] + ".writing.npz", result)
    os.replace(tmp, final)


__all__ = ["load_checkpoint", "save_checkpoint", "task_from_config", "write_checkpoint"]

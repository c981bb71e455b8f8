"""Options that do not apply to the chosen mode are refused, never silently ignored.

``RULES[command]`` lists ``Rule(option, applies_not, message)``: ``applies_not(v, g)`` sees the
command's option values ``v`` (after ``dynlab.cli.defaults.fill``) and the set ``g`` of the
options the user gave, and is true when a given option would have no effect.  ``check`` runs a
command's rules in order before anything is computed and raises a ``ParameterError`` for the
first that fires; the command line prints it as one line, ``Error: --opt: message``, exit 2.

Combinations the library refuses on its own before computing (``--K`` on a model that has no
K, any model setting with ``--weights``, ``--variance`` of a constant input in most commands, …)
need no rule here; the table in ``tests/test_cli_honesty.py`` covers both kinds.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable

import click

from ..errors import ParameterError
from ..spec import VARIANCE_INPUTS
from .defaults import IMPLICIT_TASKS, MAP_MODELS
from .options import DATA_TASK_NAMES


@dataclasses.dataclass(frozen=True)
class Rule:
    """``option`` (a parameter name, or a ``--set`` key) is refused with ``message`` when
    ``applies_not(values, given)`` is true."""

    option: str
    applies_not: Callable[[dict, set], bool]
    message: str | Callable[[dict], str]


def _kind(v) -> str:
    return str(v.get("input") or "random-walk").lower()


def _settings(v) -> dict:
    return dict(v.get("settings") or ())


# ---------------------------------------------------------------------------- shared rules
def model_rules(*, seed_used_by=()) -> list:
    """Rules of every command with the model options.  ``seed_used_by``: options that, given,
    make ``--seed`` matter even with --weights and a constant input (``--compare``, …)."""
    return [
        Rule("leak", lambda v, g: "leak" in _settings(v) and v.get("weights") is None
             and str(v.get("activation") or "").lower() != "leaky-relu",
             "is the slope of leaky-relu below zero; it applies only with --activation leaky-relu"),
        Rule("seed", lambda v, g: "seed" in g and v.get("weights") is not None and "input" in v
             and _kind(v) == "constant" and not any(v.get(o) not in (None, False, ()) for o in seed_used_by),
             "seeds nothing here: --weights fixes the model and --input constant is not random"),
    ]


VARIANCE_RULE = Rule("variance", lambda v, g: "variance" in g and _kind(v) not in VARIANCE_INPUTS,
                     lambda v: f"applies to the {' and '.join(VARIANCE_INPUTS)} inputs, not to --input {_kind(v)}")


# ------------------------------------------------------------------------------ equilibria
def _eq_mode(v) -> str | None:
    if v.get("n_starts") is not None:
        return "--fixed-points"
    if v.get("complete"):
        return "--complete"
    if v.get("continue_over") is not None:
        return "--continue-over"
    return None


#: The solver each mode runs instead of --method.
_OWN_SOLVER = {"--fixed-points": "a multi-start Levenberg–Marquardt search, polished by Newton",
               "--complete": "an exact linear solve in every activation region",
               "--continue-over": "pseudo-arclength continuation with a Newton corrector"}

def _fp_from_input(v) -> bool:
    """Whether ``--fixed-points`` starts from the trajectory of the input sequence: no --task, and a
    model given by its step map (gru, lstm, stack; a --weights file's kind is known only later)."""
    model = str(v.get("model") or "").lower()
    return v.get("task") is None and (model in MAP_MODELS or (not model and v.get("weights") is not None))


def _fp_starts(v) -> str:
    return ("the states of the --task trajectories" if v.get("task") is not None else
            "random states run along the dynamics (the input sequence is used only by gru, lstm and stack, "
            "or with --task)")


EQUILIBRIA = [
    Rule("param_range", lambda v, g: "param_range" in g and v.get("continue_over") is None,
         "applies only with --continue-over NAME (it is the range of that parameter)"),
    Rule("n_starts", lambda v, g: v.get("n_starts") is not None and v.get("continue_over") is not None,
         "and --continue-over are two modes; give one of them"),
    Rule("complete", lambda v, g: v.get("complete") and (v.get("n_starts") is not None
                                                          or v.get("continue_over") is not None),
         lambda v: f"and {'--fixed-points' if v.get('n_starts') is not None else '--continue-over'} are two modes; "
                   "give one of them"),
    Rule("constant_input", lambda v, g: "constant_input" in g and v.get("n_starts") is None and not v.get("complete"),
         "applies only with --fixed-points N or --complete (the constant input of the search)"),
    *(Rule(name, lambda v, g, name=name: name in g and v.get("n_starts") is None,
           "applies only with --fixed-points N (the multi-start search)")
      for name in ("task", "keep_unreachable")),
    *(Rule(name, lambda v, g, name=name: name in g and not v.get("complete"),
           "applies only with --complete (the region enumeration)")
      for name in ("cycles", "max_regions")),
    *(Rule(name, lambda v, g, name=name: name in g and v.get("complete"),
           lambda v, name=name: f"--complete enumerates the regions at --constant-input; leave --{name} out")
      for name in ("steps", "input", "variance")),
    Rule("method", lambda v, g: "method" in g and _eq_mode(v) is not None,
         lambda v: f"chooses the solver of the equilibria along the sequence; {_eq_mode(v)} runs its own "
                   f"({_OWN_SOLVER[_eq_mode(v)]}): leave --method out"),
    Rule("steps", lambda v, g: "steps" in g and v.get("continue_over") is not None,
         "--continue-over uses only the first input x_1; leave --steps out"),
    Rule("steps", lambda v, g: "steps" in g and v.get("n_starts") is not None and v.get("task") is None
         and not _fp_from_input(v),
         lambda v: f"--fixed-points starts here from {_fp_starts(v)}; leave --steps out"),
    *(Rule(name, lambda v, g, name=name: name in g and v.get("n_starts") is not None and not _fp_from_input(v),
           lambda v, name=name: f"--fixed-points starts here from {_fp_starts(v)}; leave --{name} out")
      for name in ("input", "variance")),
    Rule("backend", lambda v, g: "backend" in g and (_eq_mode(v) is not None
                                                    or str(v.get("model") or "").lower() == "implicit"),
         lambda v: "is where the trajectory h_(m-1) of the equilibria along the sequence is simulated; "
                   + (f"{_eq_mode(v)} simulates none" if _eq_mode(v) else "an implicit net has no trajectory")),
    VARIANCE_RULE,
    *model_rules(seed_used_by=("n_starts",)),
]

# ------------------------------------------------------------------------------- partition
_DATASET_FIXES = "the --dataset sequences fix it (their length, kind and values are the data's)"
PARTITION = [
    *(Rule(name, lambda v, g, name=name: name in g and v.get("dataset") is not None, _DATASET_FIXES)
      for name in ("steps", "input", "variance")),
    Rule("tsne", lambda v, g: v.get("tsne") and not v.get("embed"),
         "goes with --embed (it adds t-SNE to the PCA embedding)"),
    Rule("embed", lambda v, g: v.get("embed") and v.get("dataset") is None and (v.get("batch") or 1) < 3,
         "needs at least 3 sequences: give --batch B (B ≥ 3) or --dataset"),
    VARIANCE_RULE,
    *model_rules(seed_used_by=("dataset",)),
]

# ----------------------------------------------------------------------------------- train
#: What a checkpoint fixes: with --resume only --iterations and the outputs may be given.
FIXED_BY_CHECKPOINT = ("model", "hidden", "inputs", "activation", "K", "eta", "alpha", "g0", "weight_scale",
                       "settings", "seed", "weights", "task", "task_data", "steps", "pad", "permute", "lr", "optimiser",
                       "batch", "clip", "sigma_eps", "record_every", "eta_per_k")
#: Options without a meaning for the implicit networks (``train_implicit`` has no such setting).
NOT_IMPLICIT = ("steps", "pad", "clip", "sigma_eps", "record_every", "eta_per_k", "resume", "inputs", "K", "eta",
                "alpha", "g0", "weights", "task_data", "permute")
#: The tasks a permutation applies to (``--permute``; ``make_task``'s ``permute``).
PERMUTABLE = ("digits-pixels", "digits-rows", "mnist-pixels", "mnist-rows")


def _task(v) -> str:
    return str(v.get("task") or "adding").lower()


def _implicit_model(v) -> bool:
    return str(v.get("model") or "").lower() == "implicit"


TRAIN = [
    *(Rule(name, lambda v, g, name=name: name in g and _implicit_model(v),
           "has no meaning for the implicit networks (--model implicit)")
      for name in NOT_IMPLICIT),
    *(Rule(name, lambda v, g, name=name: name in g and v.get("resume") is not None,
           "the checkpoint given with --resume fixes it; with --resume give only --iterations and the outputs "
           "(--save-weights, --data, --out)")
      for name in FIXED_BY_CHECKPOINT),
    Rule("task", lambda v, g: _task(v) in IMPLICIT_TASKS and not _implicit_model(v),
         lambda v: f"{_task(v)!r} is a task of the implicit networks; use --model implicit"),
    Rule("task", lambda v, g: _implicit_model(v) and _task(v) not in IMPLICIT_TASKS,
         lambda v: f"the implicit networks train on {', '.join(IMPLICIT_TASKS)}, not {_task(v)!r}"),
    Rule("task_data", lambda v, g: "task_data" in g and v.get("resume") is None and not _implicit_model(v)
         and _task(v) not in DATA_TASK_NAMES,
         lambda v: f"reads the files of --task {', '.join(DATA_TASK_NAMES)}; --task {_task(v)} needs none"),
    Rule("permute", lambda v, g: "permute" in g and v.get("resume") is None and not _implicit_model(v)
         and _task(v) not in PERMUTABLE,
         lambda v: f"applies to --task {', '.join(PERMUTABLE)}, not to {_task(v)}"),
    *model_rules(),
]

# ----------------------------------------------------------------------------------- sweep
_VERIFY_ONLY = ("store", "resume", "scheduler", "region_size", "backend", "data")
SWEEP = [
    *[Rule(name, (lambda name: lambda v, g: v.get("verify_store") is not None and name in g)(name),
           "--verify only reads the store it names; leave the sweep's options out") for name in _VERIFY_ONLY],
    Rule("spec_file", lambda v, g: v.get("verify_store") is not None and v.get("spec_file") is not None,
         "--verify reads the store alone; leave SPEC.toml out"),
    Rule("spec_file", lambda v, g: v.get("verify_store") is None and v.get("spec_file") is None,
         "missing: give the sweep's SPEC.toml (or --verify STORE.zarr to check a store)"),
    Rule("resume", lambda v, g: v.get("resume") and v.get("store") is None,
         "needs the store to continue: give --out STORE.zarr"),
    Rule("region_size", lambda v, g: "region_size" in g and v.get("resume") and v.get("store") is not None
         and os.path.exists(v["store"]),
         "the store being resumed fixes its regions (its chunks); leave --region-size out"),
]

RULES = {
    "simulate": [VARIANCE_RULE, *model_rules()],
    "phase": [VARIANCE_RULE, *model_rules(seed_used_by=("compare",))],
    "gradients": [VARIANCE_RULE, *model_rules(seed_used_by=("compare",))],
    "equilibria": EQUILIBRIA,
    "spectrum": [VARIANCE_RULE, *model_rules()],
    "converge": [VARIANCE_RULE, *model_rules()],
    "partition": PARTITION,
    "train": TRAIN,
    "sweep": SWEEP,
}


def spelling(ctx: click.Context, name: str) -> str:
    """How the user spelled the option of parameter ``name`` (``--fixed-points`` for n_starts);
    a ``--set`` key comes back unchanged (the group prints it as ``--set NAME``)."""
    argv = (ctx.find_root().obj or {}).get("argv") or []
    for param in ctx.command.params:
        if param.name == name and isinstance(param, click.Option):
            opts = list(param.opts) + list(param.secondary_opts)
            typed = [o for o in opts if o in argv or any(a.startswith(o + "=") for a in argv)]
            return typed[0] if typed else max(opts, key=len)
    return name


def check(ctx: click.Context, command: str, values: dict, given: set) -> None:
    """Raise ``ParameterError`` naming the first option of ``values`` that does not apply."""
    for rule in RULES.get(command, ()):
        if rule.applies_not(values, given):
            message = rule.message(values) if callable(rule.message) else rule.message
            raise ParameterError(spelling(ctx, rule.option), message)

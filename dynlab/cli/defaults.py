"""Every option's default, per command, in one table: what ``--help`` states is what the command uses.

``DEFAULTS[command][name]`` (``command`` as ``dynlab.cli.defaults.command_key`` spells it:
``"simulate"``, ``"figures make"``, ``"dynlab"`` for the group; ``name`` the click parameter
name) is a ``Default`` or ``NO_DEFAULT`` (flags, paths, repeatable ``--set``, mode switches,
arguments).  ``stated_defaults`` writes each ``Default`` into its option: a plain value
becomes click's default, and the help line carries ``[default: …]`` rendered from the same
entry.  A default that depends on another option (``By``: per model, per ``--input``, per
``--task``) or that a weights file or checkpoint overrides (``unless``) is filled in by
``fill`` in the command body, before the spec is built.  Defaults the library applies
itself (``fill=False``: the model's own settings, ``spec.DEFAULT_MODEL``, ``config.DEFAULT_BACKEND``)
are stated from the library's constants where a light module holds them, and the tests run
every command without each option and compare what it used with what ``--help`` says.

Nothing heavy is imported here: ``--help`` stays fast.
"""
from __future__ import annotations

import dataclasses

import click

from .. import config, spec
from .options import MODEL_NAMES, OPTION_OF


class _NotApplicable:
    """``By.otherwise`` when the option does not apply to the other values (giving it is an error)."""

    def __repr__(self):
        return "NA"


NA = _NotApplicable()


class _NoDefault:
    """The table entry of a flag, a path, ``--set``, a mode switch or an argument: nothing to state."""

    def __repr__(self):
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault()


class _Described:
    """``Default.value`` of a default that depends on something no option sets (the sweep's target):
    ``text`` states it, and a dedicated test measures it."""

    def __repr__(self):
        return "DESCRIBED"


DESCRIBED = _Described()


@dataclasses.dataclass(frozen=True)
class By:
    """A default that depends on the value of another option ``option`` (a parameter name):
    ``values[that value]``, else ``otherwise`` (``NA``: the option does not apply then)."""

    option: str
    values: dict
    otherwise: object = NA

    def get(self, key):
        """The default when ``option`` has the value ``key`` (``NA`` where it does not apply)."""
        return self.values.get(key, self.otherwise)


@dataclasses.dataclass(frozen=True)
class Default:
    """One option's default for one command.

    value : the value used when the option is not given (a literal, None, or a ``By``).
    fill : True when the command passes ``value`` itself; False when the library applies the
        same default (the model's own settings, ``spec.DEFAULT_MODEL``), so it is only stated.
    unless : parameter names that, when given, fix this value instead (``weights``: the file's
        model; ``resume``: the checkpoint's): then nothing is filled in.
    text : the help wording when the rendering of ``value`` needs words; ``value`` stays the
        machine-checked truth (the tests measure it).
    """

    value: object
    fill: bool = True
    unless: tuple = ()
    text: str | None = None

    def render(self) -> str:
        """The text of ``[default: …]`` in --help."""
        return self.text if self.text is not None else render_value(self.value)


def _fmt(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(map(_fmt, value)) if value else "none"
    return str(value)


def render_value(value) -> str:
    """A default as --help states it; a ``By`` as "0.1 for rin; 0.5 for irnn; 1 otherwise"."""
    if not isinstance(value, By):
        return _fmt(value)
    groups: dict = {}
    for key, v in value.values.items():
        groups.setdefault("" if v is NA else render_value(v), []).append(str(key))
    label = "" if value.option == "model" else OPTION_OF.get(value.option, "--" + value.option) + " "
    parts = [f"{v} for {label}{', '.join(keys)}" if v else f"not used with {label}{', '.join(keys)}"
             for v, keys in groups.items()]
    if value.otherwise is NA:
        parts.append("other models do not take it" if value.option == "model" else "not used otherwise")
    else:
        parts.append(f"{render_value(value.otherwise)} otherwise")
    return "; ".join(parts)


# ------------------------------------------------------------------- the model's own settings
#: Each model's own default of the settings that have an option (``dynlab.model_options``; a test
#: checks this equals the library).  A model missing from a row does not take that setting.
MODEL_SETTINGS = {
    "activation": {"rnn": "tanh", "fastrnn": "tanh", "antisymmetric": "tanh", "rin": "relu", "irnn": "tanh",
                   "ctrnn": "tanh", "implicit": "sigmoid", "gru": "tanh", "lstm": "tanh", "stack": "tanh"},
    "weight_scale": {"rnn": 1.0, "fastrnn": 1.0, "antisymmetric": 1.0, "rin": 0.1, "irnn": 0.5, "ctrnn": 1.0,
                     "implicit": 1.0, "gru": 1.0, "lstm": 1.0, "stack": 1.0},
    "K": {"irnn": 1},
    "eta": {"irnn": 1.0},
    "alpha": {"irnn": 1.0, "ctrnn": 1.0, "fastrnn": -3.0},
    "g0": {"irnn": "zero"},
}
#: The models each command takes (the others are refused, naming --model).
SEQUENCE_MODELS = tuple(m for m in MODEL_NAMES if m != "implicit")
#: The models given by their step map alone (PyTorch's cells and stacks of them).
MAP_MODELS = ("gru", "lstm", "stack")
#: Equilibria and spectra: F(y) = γ φ(R y + c) − β y, and for the map models F(s) = step(s, x) − s.
EQUILIBRIA_MODELS = tuple(MODEL_NAMES)
SPECTRUM_MODELS = SEQUENCE_MODELS
PARTITION_MODELS = ("rnn", "fastrnn", "antisymmetric", "rin")
TRAIN_MODELS = ("rnn", "fastrnn", "antisymmetric", "rin", "irnn", "implicit", "gru", "lstm", "stack")
#: The models each command takes: its --help lists them (a test runs every one and checks that the
#: library refuses every other with one line naming --model).
COMMAND_MODELS = {"simulate": SEQUENCE_MODELS, "phase": SEQUENCE_MODELS, "gradients": SEQUENCE_MODELS,
                  "equilibria": EQUILIBRIA_MODELS, "spectrum": SPECTRUM_MODELS, "converge": ("irnn",),
                  "partition": PARTITION_MODELS, "train": TRAIN_MODELS}


def per_model(setting: str, models, overrides=None) -> By | object:
    """The ``By("model", …)`` of a model setting over the models a command takes: the most common
    value is ``otherwise`` (or ``NA`` when some model does not take the setting), the rest listed."""
    row = {m: v for m, v in MODEL_SETTINGS[setting].items() if m in models}
    row.update(overrides or {})
    if not row:
        return NA
    if len(models) == 1:
        return row.get(models[0], NA)
    values = list(row.values())
    takes_all = all(m in row for m in models)
    common = max(values, key=values.count) if takes_all else NA
    listed = {m: v for m, v in row.items() if common is NA or v != common}
    return By("model", listed, common) if listed else common


def model_defaults(models, *, model=spec.DEFAULT_MODEL, model_fill=False, hidden=spec.DEFAULT_HIDDEN,
                   inputs=spec.DEFAULT_INPUTS, overrides=None, **extra) -> dict:
    """The table rows of ``model_options`` for a command taking ``models``; ``overrides`` maps a
    setting to {model: value} where the command differs from the model's own default.  A setting
    none of ``models`` takes gets no row (the command has no such option)."""
    overrides = overrides or {}
    rows = {
        "model": Default(model, fill=model_fill, unless=("weights",)),
        "hidden": Default(hidden, fill=False),
        "inputs": Default(inputs, fill=False),
        "seed": Default(0),
        "weights": NO_DEFAULT,
        "settings": NO_DEFAULT,
    }
    for setting in ("activation", "K", "eta", "alpha", "g0", "weight_scale"):
        value = per_model(setting, models, overrides.get(setting))
        if value is not NA:
            rows[setting] = Default(value, fill=False)
    rows.update(extra)
    return rows


#: The input options of the commands that draw their own sequence.
def input_defaults(steps: int, *, variance=None, variance_fill=False, batch=True) -> dict:
    """Rows for ``input_options``: T, the kind, and the variance of the kinds that take one."""
    variance = variance if variance is not None else {k: 1.0 for k in spec.VARIANCE_INPUTS}
    rows = {"steps": Default(steps), "input": Default(spec.DEFAULT_INPUT),
            "variance": Default(By("input", variance), fill=variance_fill)}
    if batch:
        rows["batch"] = Default(None, fill=False, text="one sequence (unbatched)")
    return rows


_OUTPUTS = {"out": NO_DEFAULT, "data": NO_DEFAULT, "quiet": NO_DEFAULT, "force": NO_DEFAULT}
_BACKEND = {"backend": Default(config.DEFAULT_BACKEND, fill=False)}

#: Implicit-network training (``--task xor``/``oscillator`` with ``--model implicit``).
IMPLICIT_TASKS = ("xor", "oscillator")
#: ``dynlab train`` defaults that differ between sequence tasks and implicit-network tasks
#: (``dynlab.train.spec``: TRAIN_DEFAULT_HIDDEN, TRAIN_DEFAULTS, train_implicit_spec; a test checks).
TRAIN_HIDDEN, IMPLICIT_HIDDEN = 64, 2
TRAIN_ITERATIONS, IMPLICIT_ITERATIONS = 500, 3000
TRAIN_LR, IMPLICIT_LR = 1e-3, 1e-2
#: Input size of each sequence task (``make_task(name).inputs``; a test checks).
TASK_INPUTS = {"adding": 2, "adding-ternary": 2, "copy": 10, "digits-pixels": 1, "digits-rows": 8, "flipflop": 3,
               "mnist-pixels": 1, "mnist-rows": 28, "noisy-mnist": 28, "har2": 9}
#: ``--steps`` of the tasks that take one (``make_task``; digits, mnist-pixels, mnist-rows, har2 fix their own).
TASK_STEPS = {"adding": 100, "adding-ternary": 100, "copy": 100, "flipflop": 100, "noisy-mnist": 1000}
#: ``--batch`` of ``dynlab partition --dataset`` (``dynlab.commands.partition.DATASET_BATCH``; a test checks).
PARTITION_DATASET_BATCH = 500
#: ``dynlab phase``'s input variance per input kind (``dynlab.commands.phase.DEFAULT_VARIANCE``: the iRNN
#: paper's Fig. 2 walk has variance 10) and hidden size (``PHASE_HIDDEN``: Fig. 2's 2-D cells).
PHASE_VARIANCE = {"random-walk": 10.0, "noise": 1.0}
PHASE_HIDDEN = 2


#: ``dynlab figures``: the rendered gallery (full ``figures all``) and the scratch folder every other
#: run writes to by default, so that a quick or single-figure run never overwrites the gallery.
GALLERY, FIGURES_SCRATCH = "gallery", "figures-scratch"

#: ``dynlab partition --dataset`` choices: labelled sequences replace the drawn input.
DATASETS = ("auto", "digits", "patterns")


def _without_dataset(value) -> By:
    """A ``dynlab partition`` input default: ``value``, but no default with --dataset (the data fix it)."""
    return By("dataset", {k: NA for k in DATASETS}, value)


def _by_kind(implicit, sequence) -> By:
    """A ``dynlab train`` default: ``implicit`` for the implicit-network tasks, ``sequence`` otherwise."""
    return By("task", {t: implicit for t in IMPLICIT_TASKS}, sequence)


DEFAULTS = {
    "dynlab": {"version": NO_DEFAULT, "quiet": NO_DEFAULT},
    "models": {"quiet": NO_DEFAULT},
    "simulate": {**model_defaults(SEQUENCE_MODELS), **input_defaults(1000), **_BACKEND, **_OUTPUTS},
    "phase": {**model_defaults(SEQUENCE_MODELS, hidden=PHASE_HIDDEN),
              **input_defaults(1000, variance=PHASE_VARIANCE, variance_fill=True, batch=False),
              "compare": Default((), fill=False),
              "field": Default(By("model", {"ctrnn": By("input", {"constant": True}, False)}, False), fill=False,
                               text="on for a 2-D ctrnn with --input constant, off otherwise"),
              **_BACKEND, **_OUTPUTS},
    "gradients": {**model_defaults(SEQUENCE_MODELS), **input_defaults(1000, batch=False),
                  "compare": Default((), fill=False), "lyapunov": NO_DEFAULT, "step_norms": Default(True),
                  **_BACKEND, **_OUTPUTS},
    "equilibria": {**model_defaults(EQUILIBRIA_MODELS), **input_defaults(100, batch=False),
                   "method": Default("newton"), "tol": Default(1e-12),
                   "n_starts": NO_DEFAULT, "constant_input": Default(DESCRIBED, fill=False, text="0 for every input unit"),
                   "task": NO_DEFAULT, "keep_unreachable": NO_DEFAULT,
                   "continue_over": NO_DEFAULT, "param_range": NO_DEFAULT, "complete": NO_DEFAULT,
                   "cycles": Default(DESCRIBED, fill=False, text="1 (fixed points only)"),
                   "max_regions": Default(DESCRIBED, fill=False, text=f"{spec.COMPLETE_MAX_REGIONS}"),
                   **_BACKEND, **_OUTPUTS},
    "spectrum": {**model_defaults(SPECTRUM_MODELS), **input_defaults(200), "at": Default("trajectory"),
                 **_BACKEND, **_OUTPUTS},
    "converge": {**model_defaults(("irnn",)), **input_defaults(20, batch=False), "K_max": Default(50),
                 **_BACKEND, **_OUTPUTS},
    "partition": {**model_defaults(PARTITION_MODELS, model="rnn", model_fill=True),
                  "activation": Default("relu", unless=("weights",)),
                  "steps": Default(_without_dataset(200), text="200; none with --dataset (the data fix it)"),
                  "input": Default(_without_dataset("random-walk"), text="random-walk; none with --dataset"),
                  "variance": Default(_without_dataset(By("input", {k: 1.0 for k in spec.VARIANCE_INPUTS})),
                                      fill=False, text="1 for --input random-walk, noise; not used otherwise, "
                                                       "nor with --dataset"),
                  "batch": Default(By("dataset", {k: PARTITION_DATASET_BATCH for k in DATASETS}, None),
                                   text=f"{PARTITION_DATASET_BATCH} with --dataset (all of them when it has "
                                        "fewer); one sequence (unbatched) otherwise"),
                  "layers": Default(1), "embed": NO_DEFAULT, "tsne": NO_DEFAULT,
                  "dataset": Default(None, fill=False, text="none: the --input sequences"),
                  **_BACKEND, **_OUTPUTS},
    "train": {**model_defaults(TRAIN_MODELS, inputs=By("task", TASK_INPUTS),
                               overrides={"weight_scale": {"implicit": 0.0}}),
              "hidden": Default(_by_kind(IMPLICIT_HIDDEN, TRAIN_HIDDEN), unless=("weights", "resume")),
              "task": Default("adding"),
              "task_data": NO_DEFAULT,
              "steps": Default(By("task", TASK_STEPS), fill=False,
                               text="100 for --task adding, adding-ternary, copy, flipflop; 1000 for noisy-mnist; "
                                    "the digits, mnist-pixels, mnist-rows and har2 fix their own"),
              "pad": Default(0),
              "permute": Default(None, fill=False, text="none: the natural order"),
              "iterations": Default(_by_kind(IMPLICIT_ITERATIONS, TRAIN_ITERATIONS)),
              "lr": Default(_by_kind(IMPLICIT_LR, TRAIN_LR)),
              "optimiser": Default("adam"), "batch": Default(128),
              "clip": Default(None, fill=False, text="none (no clipping)"),
              "sigma_eps": Default(0.0), "record_every": Default(10), "eta_per_k": NO_DEFAULT,
              "resume": NO_DEFAULT, "save_weights": NO_DEFAULT, **_BACKEND, **_OUTPUTS},
    "sweep": {"spec_file": NO_DEFAULT, "store": NO_DEFAULT, "resume": NO_DEFAULT, "verify_store": NO_DEFAULT,
              "scheduler": Default(None, fill=False, text="in process"),
              "region_size": Default(DESCRIBED, fill=False,
                                     text="the spec file's region_size, else the backend's size for batched targets (numba: "
                                          f"{config.SWEEP_REGION_FLOPS:.0e} flops of tangent work a region, "
                                          f"{config.SWEEP_REGION_RANGE[0]}–{config.SWEEP_REGION_RANGE[1]} settings; "
                                          "the GPU: half its free memory), 8 otherwise"),
              "backend": Default(config.DEFAULT_BACKEND, fill=False, text=f"the spec file's backend, "
                                                                          f"else {config.DEFAULT_BACKEND}"),
              "data": NO_DEFAULT, "quiet": NO_DEFAULT},
    "figures": {"quiet": NO_DEFAULT},
    "figures list": {"quiet": NO_DEFAULT},
    "figures make": {"names": NO_DEFAULT, "out_dir": Default(FIGURES_SCRATCH, text=f"{FIGURES_SCRATCH}/ (a scratch "
                                                                                      "folder, never the gallery)"),
                     "quick": NO_DEFAULT, "scale": NO_DEFAULT,
                     "real_data": NO_DEFAULT, "engine": Default("auto"), "redraw": NO_DEFAULT, "fmt": Default("png"),
                     "quiet": NO_DEFAULT},
    "figures all": {"out_dir": Default(By("quick", {True: FIGURES_SCRATCH}, GALLERY),
                                       text=f"{GALLERY}/ (the gallery); {FIGURES_SCRATCH}/ with --quick"),
                    "quick": NO_DEFAULT, "scale": NO_DEFAULT,
                    "real_data": NO_DEFAULT, "engine": Default("auto"), "redraw": NO_DEFAULT, "fmt": Default("png"),
                     "quiet": NO_DEFAULT},
}


def command_key(ctx: click.Context) -> str:
    """The table key of the running command: its path below ``dynlab`` ("figures make")."""
    names = []
    while ctx is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    names = names[::-1][1:]
    return " ".join(names) if names else "dynlab"


def stated_defaults(key: str):
    """Decorator of a click Command: state every option's default from ``DEFAULTS[key]``.

    A plain ``Default`` that the command fills becomes click's default; every ``Default``
    appends ``[default: …]`` to its help.  Options missing from the table are left alone
    (the tests list them: every option must be in the table).
    """
    table = DEFAULTS[key]

    def apply(command: click.Command) -> click.Command:
        for param in command.params:
            entry = table.get(param.name)
            if not isinstance(entry, Default):
                continue
            if entry.fill and not entry.unless and not isinstance(entry.value, By):
                param.default = entry.value
            if isinstance(param, click.Option):
                param.show_default = False
                help_text = (param.help or "").rstrip()
                param.help = f"{help_text} [default: {entry.render()}]".strip()
        return command

    return apply


def given(ctx: click.Context) -> set:
    """The parameter names the user gave (on the command line or through the environment)."""
    from click.core import ParameterSource

    out = set()
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if source is not None and source != ParameterSource.DEFAULT:
            out.add(param.name)
    return out


def resolve(value, values: dict, table: dict):
    """A default's value for these option values: a ``By`` is followed through the option it
    depends on (its given value, else that option's own plain default; neither: ``otherwise``).
    ``NA`` where the option does not apply."""
    while isinstance(value, By):
        key = values.get(value.option)
        if key is None:
            entry = table.get(value.option)
            key = resolve(entry.value, values, table) if isinstance(entry, Default) else None
        value = value.otherwise if key is None or key is NA else value.get(str(key).lower())
    return value


def fill(ctx: click.Context, values: dict) -> dict:
    """``values`` with the defaults that depend on other options filled in (``By``, ``unless``).

    Only options the user did not give, whose entry fills (``fill=True``), none of whose
    ``unless`` options were given, and whose default applies (not ``NA``) are filled.
    """
    table = DEFAULTS[command_key(ctx)]
    user = given(ctx)
    out = dict(values)
    for name, entry in table.items():
        if name not in out or name in user or not isinstance(entry, Default) or not entry.fill:
            continue
        if not (isinstance(entry.value, By) or entry.unless):
            continue
        if any(out.get(u) not in (None, False, ()) for u in entry.unless):
            continue
        value = resolve(entry.value, out, table)
        if value is not NA:
            out[name] = value
    return out

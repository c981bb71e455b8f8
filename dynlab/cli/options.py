"""Every option of every command, in one table (``OPTIONS``), so that ``--model`` means the same everywhere.

The commands are built from ``dynlab.cli.commands.COMMANDS``, which names the option ids each
command takes; ``dynlab.cli.defaults.DEFAULTS`` states every default.  The model and input
options become fields of ``dynlab.spec.RunSpec`` under the same name (``--K`` → ``K``,
``--weight-scale`` → ``weight_scale``, ``--set`` → ``settings``); ``make_spec`` turns a command's
keyword arguments into that one frozen spec.  An option left unset is ``None``, so the model's
own default applies.  Nothing heavy is imported here: ``--help`` stays fast.
"""
from __future__ import annotations

import os
import shlex

import click

#: The registry's names when dynlab is installed (tests check this equals ``dynlab.MODELS``);
#: ``--model`` reads the registry itself once ``dynlab.models`` is imported (``model_names``), so a
#: model added to ``dynlab.MODELS`` at run time is a choice too.
MODEL_NAMES = ("rnn", "fastrnn", "antisymmetric", "rin", "irnn", "ctrnn", "implicit", "gru", "lstm", "stack")
#: Activation names (tests check this equals ``dynlab.ACTIVATIONS``).
ACTIVATION_NAMES = ("tanh", "relu", "sigmoid", "identity", "leaky-relu", "abs")
#: Input kinds (tests check this equals ``dynlab.tasks.INPUTS``).
INPUT_KINDS = ("random-walk", "constant", "sine", "noise")
G0_CHOICES = ("zero", "previous")

#: Python parameter name (as a ``ParameterError`` spells it) → the option that sets it.
OPTION_OF = {
    "model": "--model", "hidden": "--hidden", "inputs": "--inputs", "activation": "--activation",
    "K": "--K", "eta": "--eta", "alpha": "--alpha", "g0": "--g0", "weight_scale": "--weight-scale",
    "seed": "--seed", "weights": "--weights", "steps": "--steps", "batch": "--batch",
    "input": "--input", "x": "--input", "variance": "--variance", "backend": "--backend",
    "out": "--out", "data": "--data", "compare": "--compare", "settings": "--set",
    "K_values": "--K",
    "out_dir": "--out", "name": "NAME", "verify_store": "--verify", "spec_file": "SPEC.toml",
    "scale": "--scale", "real_data": "--data", "redraw": "--redraw", "engine": "--engine",
}
#: Settings with an option of their own may not be given through ``--set``.
_OWN_OPTION = ("activation", "K", "eta", "alpha", "g0", "weight_scale", "seed", "hidden", "inputs")


class _AsciiOnly:
    """A number typed in ASCII only: Python's int() and float() also read other scripts' digits
    ('٣' is 3), which no one types on purpose."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{value!r} is not a valid {self.name} (ASCII digits only)", param, ctx)
        return super().convert(value, param, ctx)


class _Int(_AsciiOnly, click.types.IntParamType):
    pass


class _Float(_AsciiOnly, click.types.FloatParamType):
    pass


class IntRangeAscii(_AsciiOnly, click.IntRange):
    """``click.IntRange`` of ASCII digits."""


#: The number types of every option (``type=INT``, ``type=FLOAT``).
INT, FLOAT = _Int(), _Float()


def option_for(param: str, set_keys=()) -> str:
    """The command-line spelling of a library parameter name (``weight_scale`` → ``--weight-scale``)."""
    if param in set_keys:  # given with --set (a stack's layers, a ctrnn's method): not --layers, --method
        return f"--set {param}"
    if param in OPTION_OF:
        return OPTION_OF[param]
    return param


def _stack(*decorators):
    """One decorator applying several click options, listed in the order they appear in --help."""
    def apply(func):
        for dec in reversed(decorators):
            func = dec(func)
        return func
    return apply


def _literal(text: str):
    """A ``--set`` value: int, float, true/false, none, or the string itself."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for kind in ((int, float) if text.isascii() else ()):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _parse_settings(ctx, param, values):
    out = []
    for item in values:
        name, eq, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not eq or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", ctx, param)
        if name in _OWN_OPTION:
            raise click.BadParameter(f"{name} has its own option, {OPTION_OF[name]}", ctx, param)
        if name in dict(out):
            raise click.BadParameter(f"{name} is given twice", ctx, param)
        out.append((name, _literal(value)))
    if ctx.obj is not None:
        ctx.obj.setdefault("set_keys", set()).update(dict(out))
    return tuple(out)


def _parse_compare(ctx, param, value):
    if value is None:
        return ()
    names = tuple(n.strip().lower() for n in value.split(","))
    if not any(names):
        raise click.BadParameter("expected a comma-separated list of models, e.g. rnn,fastrnn", ctx, param)
    if not all(names):
        raise click.BadParameter(f"an empty item in {value!r}; expected e.g. rnn,fastrnn", ctx, param)
    known = model_names()
    for n in names:
        if n not in known:
            raise click.BadParameter(f"unknown model {n!r}; choose from {', '.join(known)}", ctx, param)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise click.BadParameter(f"{', '.join(map(repr, dup))} listed more than once; each model appears once",
                                 ctx, param)
    return names


def _fail(ctx, param, message: str):
    raise click.BadParameter(message, ctx, param)


def _check_parent(path: str, ctx, param) -> str:
    """``path``'s folder exists (the only check when click is only completing the command line)."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        _fail(ctx, param, f"the folder {os.path.dirname(path) or '.'!r} of {path!r} does not exist")
    return path


def check_writable_file(path: str, ctx=None, param=None) -> str:
    """``path`` can be written, found out before any computation by trying it.

    The folder must exist; an existing directory of that name is refused; an existing file is
    opened for appending (never truncated, so nothing is clobbered); a new file is created with
    O_EXCL and removed again.  ``os.access`` is not used: as root it answers yes under /proc or
    on a read-only mount.
    """
    _check_parent(path, ctx, param)
    if os.path.isdir(path):
        _fail(ctx, param, f"{path!r} is a directory")
    if ctx is not None and ctx.resilient_parsing:
        return path
    try:
        if os.path.exists(path):
            with open(path, "ab"):
                pass
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            os.unlink(path)
    except OSError as exc:
        _fail(ctx, param, f"cannot write {path!r} ({exc.strerror or exc})")
    return path


def check_writable_dir(path: str, ctx=None, param=None, *, may_exist: bool = True) -> str:
    """``path`` is (or can be made) a directory we can write into, tried before any computation.

    An existing path must be a directory (``may_exist``), and a file is created in it and removed;
    a new one needs its nearest existing ancestor to be a directory in which a directory can be
    created (one is made there and removed).
    """
    if os.path.exists(path):
        if not os.path.isdir(path):
            _fail(ctx, param, f"{path!r} exists and is not a directory")
        if not may_exist:
            return path
        where = path
    else:
        where = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(where):
            where = os.path.dirname(where)
        if not os.path.isdir(where):
            _fail(ctx, param, f"{where!r} (in {path!r}) is not a directory")
    if ctx is not None and ctx.resilient_parsing:
        return path
    import tempfile

    try:
        probe = tempfile.mkdtemp(prefix=".dynlab-probe-", dir=where)
        os.rmdir(probe)
    except OSError as exc:
        _fail(ctx, param, f"cannot write into {where!r} ({exc.strerror or exc})")
    return path


def _parse_out(ctx, param, value):
    if value is None:
        return None
    from ..plot.style import FORMATS

    if os.path.splitext(value)[1].lower() not in FORMATS:
        _fail(ctx, param, f"must end in {', '.join(FORMATS)} (the picture format is read from the suffix), "
                          f"got {value!r}")
    return check_writable_file(value, ctx, param)


def _parse_data(ctx, param, value):
    if value is None:
        return None
    if os.path.splitext(value)[1].lower() != ".nc":
        _fail(ctx, param, f"must end in .nc (the results are written as NetCDF), got {value!r}")
    return check_writable_file(value, ctx, param)


def _set_quiet(ctx, param, value):
    """``--quiet`` anywhere on the line (before or after the command) silences the whole run."""
    if value and not ctx.resilient_parsing:
        ctx.ensure_object(dict)["quiet"] = True
    return value


def is_quiet(ctx) -> bool:
    """Whether ``--quiet``/``-q`` was given, to the group or to the command."""
    while ctx is not None:
        if isinstance(ctx.obj, dict) and ctx.obj.get("quiet"):
            return True
        ctx = ctx.parent
    return False


#: ``-q``/``--quiet`` (the group's and every command's): no progress bars, no summaries.
quiet_option = click.option("-q", "--quiet", is_flag=True, default=False, expose_value=False, callback=_set_quiet,
                            help="Print nothing but errors: no progress bar, no summary, no 'wrote' line "
                                 "(results are still written).")


def _set_force(ctx, param, value):
    """``--force``: run a computation whatever its estimated time (``dynlab._resources.check_work``
    asks for it past ``config.CLI_CONFIRM_SECONDS``)."""
    if value and not ctx.resilient_parsing:
        from .._resources import confirm_over

        confirm_over(None)
    return value


#: ``--force`` (every command that computes): no confirmation for a long estimated run.
force_option = click.option("--force", is_flag=True, default=False, expose_value=False, callback=_set_force,
                            help="Run even when the work is estimated to take longer than the confirmation "
                                 "limit (config.CLI_CONFIRM_SECONDS); the 1-hour limit (DYNLAB_MAX_HOURS) still holds.")


_CHOICE = dict(case_sensitive=False)


class BackendChoice(click.Choice):
    """``--backend``'s choices, read from ``dynlab.backends`` each time they are asked for (at parse
    time, for ``--help``): the registered names (``BACKENDS``, with any ``register_backend`` added
    at run time) and their aliases (``ALIASES``).  ``--help`` lists the registered names."""

    name = "backend"

    def __init__(self):
        super().__init__((), case_sensitive=False)

    @property
    def choices(self):
        from .. import backends

        return tuple(backends.BACKENDS) + tuple(a for a in backends.ALIASES if a not in backends.BACKENDS)

    @choices.setter
    def choices(self, value):        # click.Choice.__init__ sets it; the registry is the one list
        pass

    def get_metavar(self, param, ctx=None):
        from .. import backends

        return "[" + "|".join(backends.BACKENDS) + "]"


def model_names() -> tuple:
    """The model registry's names: ``dynlab.models.MODELS`` once it is imported (a model added at run
    time is there), else the names it is installed with (``--help`` imports no NumPy)."""
    import sys

    registry = sys.modules.get("dynlab.models")
    return tuple(registry.MODELS) if registry is not None else MODEL_NAMES


class ModelChoice(click.Choice):
    """``--model``'s choices, read from the model registry each time they are asked for
    (``model_names``); ``--help`` lists the models the command takes, and any added at run time."""

    name = "model"

    def __init__(self, shown=MODEL_NAMES):
        super().__init__((), case_sensitive=False)
        self._shown = tuple(shown)

    @property
    def choices(self):
        return model_names()

    @choices.setter
    def choices(self, value):        # click.Choice.__init__ sets it; the registry is the one list
        pass

    def get_metavar(self, param, ctx=None):
        return "[" + "|".join(self._shown + tuple(n for n in model_names() if n not in MODEL_NAMES)) + "]"


def model_option(models=MODEL_NAMES):
    """``--model``: any registry name parses (so a model a command refuses gets the library's own
    one-line reason), and the help lists the models this command takes (``dynlab.cli.defaults``)."""
    return click.option("--model", type=ModelChoice(models), default=None,
                        help="Model kind (see `dynlab models`).")


def _parse_K_list(ctx, param, value):
    """``--K 1,5,10`` → (1, 5, 10): positive integers, each once."""
    if value is None:
        return ()
    items = [v.strip() for v in value.split(",")]
    if not any(items):
        raise click.BadParameter("expected a comma-separated list of integers, e.g. 1,5,10", ctx, param)
    if not all(items):
        raise click.BadParameter(f"an empty item in {value!r}; expected e.g. 1,5,10", ctx, param)
    out = []
    for v in items:
        try:
            k = int(v)
        except ValueError:
            raise click.BadParameter(f"expected integers, got {v!r} in {value!r}", ctx, param) from None
        if k < 1:
            raise click.BadParameter(f"every K must be ≥ 1, got {k}", ctx, param)
        if k in out:
            raise click.BadParameter(f"K={k} is listed twice", ctx, param)
        out.append(k)
    return tuple(out)


def _parse_range(ctx, param, value):
    """``--range LO,HI`` → (lo, hi) with lo < hi."""
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise click.BadParameter(f"expected two numbers LO,HI, got {value!r}", ctx, param) from None
    if not lo < hi:
        raise click.BadParameter(f"needs LO < HI, got {value!r}", ctx, param)
    return (lo, hi)


def _parse_numbers(ctx, param, value):
    """``--constant-input 0`` or ``0.5,-1,0`` → a tuple of finite floats (ASCII digits)."""
    if value is None:
        return None
    out = []
    for v in (s.strip() for s in value.split(",")):
        try:
            if not v.isascii():
                raise ValueError
            out.append(float(v))
        except ValueError:
            raise click.BadParameter(f"expected one number or comma-separated numbers, got {value!r}",
                                     ctx, param) from None
        if out[-1] != out[-1] or out[-1] in (float("inf"), float("-inf")):
            raise click.BadParameter(f"must be finite, got {value!r}", ctx, param)
    return tuple(out)


def _parse_store(ctx, param, value):
    """A ``.zarr`` store path whose folder exists and can take (or whose store can take) new files."""
    if value is None:
        return None
    value = value.rstrip("/")
    if not value.endswith(".zarr"):
        _fail(ctx, param, f"must be a Zarr store path ending in .zarr, got {value!r}")
    _check_parent(value, ctx, param)
    return check_writable_dir(value, ctx, param)


def _parse_npz_out(ctx, param, value):
    if value is None:
        return None
    if not value.endswith(".npz"):
        _fail(ctx, param, f"must end in .npz, got {value!r}")
    return check_writable_file(value, ctx, param)


def _parse_npz_in(ctx, param, value):
    if value is None:
        return None
    if not value.endswith(".npz"):
        _fail(ctx, param, f"must end in .npz (a checkpoint written by --save-weights), got {value!r}")
    if not os.path.isfile(value):
        _fail(ctx, param, f"no such file: {value}")
    return value


def _parse_data_dir(ctx, param, value):
    """An existing folder (the real data sets); what is in it is checked by the task readers."""
    if value is None:
        return None
    path = os.path.expanduser(value)
    if not os.path.isdir(path):
        _fail(ctx, param, f"no such folder: {value}")
    return path


def _parse_out_dir(ctx, param, value):
    """A directory we can write into (made when missing), checked before any figure runs."""
    return None if value is None else check_writable_dir(value, ctx, param)


#: Settings of the iRNN alone (commands whose models include no iRNN leave their options out).
IRNN_ONLY = ("K", "eta", "g0")
#: Solvers of ``dynlab equilibria --method``.
EQ_METHOD_NAMES = ("newton", "euler", "rk4", "scipy")
#: Task names of ``dynlab train`` (tests check this equals ``dynlab.tasks.TASKS``): the synthetic
#: ones, and those of the real data, read from the user's files (``--task-data``; tests check
#: ``DATA_TASK_NAMES`` equals ``dynlab.tasks.DATA_TASKS``); and the implicit-network tasks
#: (``--model implicit``).
SYNTHETIC_TASK_NAMES = ("adding", "adding-ternary", "copy", "digits-pixels", "digits-rows", "flipflop")
DATA_TASK_NAMES = ("mnist-pixels", "mnist-rows", "noisy-mnist", "har2")
TASK_NAMES = SYNTHETIC_TASK_NAMES + DATA_TASK_NAMES
IMPLICIT_TASK_NAMES = ("xor", "oscillator")
OPTIMISER_NAMES = ("adam", "rmsprop", "sgd")

O = click.option
#: Every option (and argument) of every command, by id, in --help order within a command: the one
#: table the commands are built from (``dynlab.cli.commands.COMMANDS`` lists the ids each command
#: takes; ``dynlab.cli.defaults.DEFAULTS`` states each default).  ``model`` is made per command
#: (``model_option``), listing the models that command takes.
OPTIONS = {
    # ------------------------------------------------------------ the model
    "hidden": O("--hidden", type=INT, default=None, metavar="D", help="Hidden-state size D."),
    "inputs": O("--inputs", type=INT, default=None, metavar="d", help="Input size d."),
    "activation": O("--activation", type=click.Choice(ACTIVATION_NAMES, **_CHOICE), default=None,
                    help="Activation φ."),
    "K": O("--K", "K", type=INT, default=None, help="irnn: number of inner Euler steps K (K=1 is SiRNN)."),
    "K_list": O("--K", "K", type=str, default=None, metavar="K1,K2,…", callback=_parse_K_list,
                help="irnn: inner Euler steps K, one model per value, e.g. 1,5,10."),
    "eta": O("--eta", type=FLOAT, default=None, help="irnn: inner step size η > 0."),
    "alpha": O("--alpha", type=FLOAT, default=None, help="irnn, ctrnn: the leak α ≥ 0; fastrnn: its raw gate α."),
    "g0": O("--g0", type=click.Choice(G0_CHOICES, **_CHOICE), default=None, help="irnn: inner start g_0 = 0 or h_{m-1}."),
    "weight_scale": O("--weight-scale", "weight_scale", type=FLOAT, default=None, metavar="S",
                      help="Scale of the random recurrent weights, U ~ N(0, S²/D)."),
    "settings": O("--set", "settings", multiple=True, metavar="NAME=VALUE", callback=_parse_settings,
                  help="Any other model setting listed by `dynlab models` (beta, eps, rank, …); repeatable.  "
                       "leak needs --activation leaky-relu."),
    "seed": O("--seed", type=INT, default=None, metavar="N", help="Seed of the random weights and of the input sequence."),
    "weights": O("--weights", type=str, default=None, metavar="FILE",
                 help="Load the model from a dynlab.save_model .npz instead of drawing random weights; the file "
                      "fixes the model, its sizes and settings (the model options above may not be given with it).  "
                      "Also a PyTorch network's parameters under PyTorch's names (.safetensors or .npz of a "
                      "state_dict): --model rnn|gru|lstm checks the kind, --activation relu gives an RNN's "
                      "nonlinearity."),
    # ------------------------------------------------------------ the input sequence
    "steps": O("--steps", type=INT, default=None, metavar="T", help="Sequence length T."),
    "batch": O("--batch", type=INT, default=None, metavar="B", help="Number of independent sequences B."),
    "input": O("--input", "input", type=click.Choice(INPUT_KINDS, **_CHOICE), default=None,
               help="Input sequence kind: " + ", ".join(INPUT_KINDS) + "."),
    "variance": O("--variance", type=FLOAT, default=None, metavar="V",
                  help="Step variance of random-walk, variance of noise."),
    # ------------------------------------------------------------ where it runs, what it writes
    "backend": O("--backend", type=BackendChoice(), default=None,
                 help="Where the kernels run: a registered backend (dynlab.backends.register_backend adds one), "
                      "or an alias of one (gpu: cupy, reference: numpy, cpu: numba)."),
    "out": O("--out", type=str, default=None, metavar="FILE", callback=_parse_out,
             help="Write the picture (.png, .pdf or .svg, by suffix)."),
    "data": O("--data", type=str, default=None, metavar="FILE.nc", callback=_parse_data,
              help="Write the results as a NetCDF Dataset (.nc)."),
    "quiet": quiet_option,
    "force": force_option,
    # ------------------------------------------------------------ phase, gradients
    "compare": O("--compare", type=str, default=None, metavar="NAMES", callback=_parse_compare,
                 help="Comma-separated models drawn beside --model on the same input (same seed, sizes, "
                      "activation), e.g. rnn,fastrnn."),
    "field": O("--field/--no-field", "field", default=None,
               help="Draw the vector field (streamlines), nullclines and equilibria (by stability) of a 2-D ctrnn "
                    "or cell (not irnn) at a constant input (--input constant)."),
    "lyapunov": O("--lyapunov", is_flag=True, default=False,
                  help="Also compute the full finite-time Lyapunov spectrum and draw it."),
    "step_norms": O("--step-norms/--no-step-norms", default=True,
                    help="Also ‖∂h_t/∂h_(t-1)‖ for every t. --no-step-norms leaves them out (an iRNN with "
                         "--hidden > 32 then runs the curve in reverse mode, ≈ 3× faster)."),
    # ------------------------------------------------------------ equilibria, spectrum, converge
    "method": O("--method", type=click.Choice(EQ_METHOD_NAMES, **_CHOICE), default=None,
                help="Solver of the equilibria along the sequence: Newton with the analytic Jacobian, the Euler "
                     "(iRNN) recursion, fixed-step RK4 on the flow, or scipy's root (the reference).  "
                     "--fixed-points and --continue-over run their own solvers and refuse it."),
    "tol": O("--tol", type=FLOAT, default=None, help="Residual tolerance ‖F‖∞ (every mode)."),
    "n_starts": O("--fixed-points", "n_starts", type=INT, default=None, metavar="N",
                  help="Instead: a multi-start search for every fixed point at the constant input "
                       "--constant-input, from N starts; points outside the states a trajectory can reach are "
                       "left out (--keep-unreachable keeps them, flagged)."),
    "constant_input": O("--constant-input", "constant_input", type=str, default=None, metavar="X[,X…]",
                        callback=_parse_numbers,
                        help="With --fixed-points: the constant input x (one number for every input unit, or d "
                             "numbers)."),
    "starts_task": O("--task", "task", type=click.Choice(SYNTHETIC_TASK_NAMES, **_CHOICE), default=None,
                     help="With --fixed-points: start from the states the network visits on this task's test "
                          "inputs (and draw those trajectories), as for a network trained on it."),
    "keep_unreachable": O("--keep-unreachable", "keep_unreachable", is_flag=True, default=False,
                          help="With --fixed-points: keep the points outside the states a trajectory can reach "
                               "(flagged in `reachable`)."),
    "complete": O("--complete", "complete", is_flag=True, default=False,
                  help="Instead: every fixed point at --constant-input of a piecewise-affine model (relu, "
                       "leaky-relu, abs; rnn, fastrnn, rin, irnn, ctrnn), by branch and bound over its activation "
                       "regions with an LP test (HiGHS), certified complete — or reported incomplete when "
                       "--max-regions stops it (exit 1, data kept)."),
    "cycles": O("--cycles", "cycles", type=INT, default=None, metavar="K",
                help="With --complete, for the maps: also every cycle of period 2..K."),
    "max_regions": O("--max-regions", "max_regions", type=INT, default=None, metavar="N",
                     help="With --complete: the work limit (LP nodes plus regions solved)."),
    "continue_over": O("--continue-over", "continue_over", type=str, default=None, metavar="NAME",
                       help="Instead: continue the equilibria at x_1 over x, x<j>, b, b<i> or alpha (pseudo-arclength; "
                            "bifurcation diagram with folds, Hopf / Neimark–Sacker points, flips and branch points, "
                            "the other branch followed at each branch point); needs --range; no --steps, --method or "
                            "--backend."),
    "param_range": O("--range", "param_range", type=str, default=None, metavar="LO,HI", callback=_parse_range,
                     help="Range of the --continue-over parameter (only with it)."),
    "at": O("--at", "at", type=click.Choice(("trajectory", "equilibrium"), **_CHOICE), default=None,
            help="Spectra at the simulated states, or at each input's equilibrium."),
    "K_max": O("--K-max", "K_max", type=INT, default=None, help="Last inner iteration k of the recursion."),
    # ------------------------------------------------------------ partition (MASO)
    "layers": O("--layers", type=INT, default=None, metavar="L",
                help="Stacked rnn layers; layer ℓ > 1 reads layer ℓ−1's state at the same step."),
    "embed": O("--embed", is_flag=True, default=False,
               help="Embed the batch's partition codes in 2-D at four time slices (PCA)."),
    "tsne": O("--tsne", is_flag=True, default=False,
              help="With --embed (only), also a t-SNE embedding (needs scikit-learn; slow for large batches)."),
    "dataset": O("--dataset", type=click.Choice(("auto", "digits", "patterns"), case_sensitive=False), default=None,
                 help="Labelled sequences instead of --input: scikit-learn's 8×8 digits as pixel sequences, or a "
                      "synthetic pattern task (auto: digits when scikit-learn is installed).  The data fix the "
                      "sequences: no --steps, --input or --variance."),
    # ------------------------------------------------------------ train
    "task": O("--task", type=click.Choice(TASK_NAMES + IMPLICIT_TASK_NAMES, **_CHOICE), default=None,
              help="Training task (xor, oscillator: with --model implicit)."),
    "task_steps": O("--steps", type=INT, default=None, metavar="T",
                    help="Task length T (adding: sequence length; copy: the delay)."),
    "pad": O("--pad", type=INT, default=None, metavar="P",
             help="Noise padding: append P steps of N(0, 1) noise to every input (end-of-sequence tasks)."),
    "task_data": O("--task-data", "task_data", type=str, default=None, metavar="DIR|FILE",
                   help="The real data's files, for --task " + ", ".join(DATA_TASK_NAMES) + ": a folder of "
                        "MNIST's four idx files (gzipped or not) or keras' mnist.npz; the unpacked 'UCI HAR "
                        "Dataset' folder for har2.  (--data names the history file written.)"),
    "permute": O("--permute", type=INT, default=None, metavar="SEED",
                 help="Permuted pixel order (digits-*, mnist-pixels, mnist-rows): one fixed permutation of the "
                      "time steps, numpy's default_rng(SEED).permutation(T); the iRNN paper's seed is 42."),
    "iterations": O("--iterations", type=INT, default=None, metavar="N",
                    help="Training iterations (with --resume: further iterations)."),
    "lr": O("--lr", type=FLOAT, default=None, help="Learning rate."),
    "optimiser": O("--optimiser", type=click.Choice(OPTIMISER_NAMES, **_CHOICE), default=None, help="Optimiser."),
    "train_batch": O("--batch", type=INT, default=None, metavar="B", help="Sequences per iteration."),
    "clip": O("--clip", type=FLOAT, default=None, metavar="C", help="Clip the gradients to global norm C."),
    "sigma_eps": O("--sigma-eps", "sigma_eps", type=FLOAT, default=None, metavar="σ",
                   help="Random initial state h_0 = ε ~ N(0, σ² I), drawn afresh every iteration."),
    "record_every": O("--record-every", "record_every", type=INT, default=None, metavar="N",
                      help="Record the loss and gradient diagnostics every N iterations."),
    "eta_per_k": O("--eta-per-k", "eta_per_k", is_flag=True, default=False, help="irnn: one learnable η per inner step k."),
    "resume": O("--resume", type=str, default=None, metavar="FILE.npz", callback=_parse_npz_in,
                help="Continue the run saved with --save-weights (bit-for-bit): the checkpoint fixes the model, the "
                     "task and the optimiser, so only --iterations and the outputs may be given with it."),
    "save_weights": O("--save-weights", "save_weights", type=str, default=None, metavar="FILE.npz",
                      callback=_parse_npz_out,
                      help="Write the trained model with the training state (readable by --weights and --resume)."),
    # ------------------------------------------------------------ sweep
    "spec_file": click.argument("spec_file", metavar="SPEC.toml", type=str, required=False),
    "store": O("--out", "store", type=str, default=None, metavar="STORE.zarr", callback=_parse_store,
               help="The Zarr store, written region by region as points finish (never overwritten)."),
    "sweep_resume": O("--resume", is_flag=True, default=False,
                      help="Continue the sweep in --out (killed or interrupted): compute only the missing points "
                           "(the store fixes the regions: no --region-size then)."),
    "scheduler": O("--scheduler", type=str, default=None, metavar="local|ADDRESS",
                   help="Run regions as Dask tasks: `local` (a LocalCluster) or a scheduler address."),
    "region_size": O("--region-size", "region_size", type=IntRangeAscii(min=1), default=None, metavar="N",
                     help="Points per region (the store's chunk)."),
    "verify_store": O("--verify", "verify_store", type=str, default=None, metavar="STORE.zarr",
                      help="Check a store's health instead of running a sweep: every region marked done is read and "
                           "its checksums compared; exit 1 when a region is damaged (--resume recomputes it)."),
    # ------------------------------------------------------------ figures
    "names": click.argument("names", nargs=-1, required=True),
    "out_dir": O("--out", "out_dir", type=str, default=None, metavar="DIR", callback=_parse_out_dir,
                 help="Directory for the pictures, the NetCDF data and claims.json (made when missing)."),
    "quick": O("--quick", is_flag=True, default=False, help="Reduced sizes (a few seconds per figure; scaling printed on each); "
                                                             "the same as --scale quick."),
    "scale": O("--scale", "scale", type=click.Choice(["quick", "stand-in", "paper"]), default=None,
               help="quick: seconds per figure (the tests); stand-in: the gallery's reduced sizes (used when neither --scale "
                    "nor --quick is given); paper: the paper's "
                    "sizes and budgets (D, T, batch, steps, lr as the paper states them; the real data sets need "
                    "--data). Every record states the paper's setting and ours."),
    "figures_data": O("--data", "real_data", type=str, default=None, metavar="DIR", callback=_parse_data_dir,
                      help="A folder with the real data sets for the recipes that use them: MNIST's files "
                           "(train-images-idx3-ubyte[.gz] …, or mnist.npz) and the unpacked 'UCI HAR Dataset' folder "
                           "(in DIR or DIR/UCI HAR Dataset)."),
    "engine": O("--engine", "engine", type=click.Choice(["auto", "numba", "torch"]), default=None,
                help="What trains the recipes' networks: auto (PyTorch through dl.to_torch on a CUDA GPU at "
                     "--scale paper when torch sees one; dynlab's exact-gradient trainer otherwise), numba (dynlab's "
                     "trainer, CPU) or torch (PyTorch, on the GPU when there is one). Each record names its engine."),
    "redraw": O("--redraw", is_flag=True, default=False,
                help="No computation: re-check and redraw each figure from its NAME.nc in --out."),
    "fmt": O("--format", "fmt", type=click.Choice(["png", "pdf", "svg"]), default=None, help="Picture format."),
}
del O

#: Option ids shared by several commands, in --help order.
MODEL = ("model", "hidden", "inputs", "activation", "K", "eta", "alpha", "g0", "weight_scale", "settings", "seed",
         "weights")
INPUT = ("steps", "batch", "input", "variance")
RUNS = ("backend", "out", "data", "quiet", "force")

#: Python parameter name (as a ``ParameterError`` spells it) → the option that sets it, for the
#: options above whose spelling is not ``--`` + the name.
OPTION_OF.update({"store": "--out", "scheduler": "--scheduler", "region_size": "--region-size",
                  "spec": "SPEC.toml", "analysis": "SPEC.toml analysis",
                  "tol": "--tol", "n_starts": "--fixed-points", "over": "--continue-over",
                  "continue_over": "--continue-over", "range": "--range", "param_range": "--range",
                  "K_max": "--K-max", "at": "--at", "field": "--field", "constant_input": "--constant-input",
                  "keep_unreachable": "--keep-unreachable", "complete": "--complete", "cycles": "--cycles",
                  "max_regions": "--max-regions",
                  "layers": "--layers", "embed": "--embed", "dataset": "--dataset", "tsne": "--tsne",
                  "task": "--task", "iterations": "--iterations", "lr": "--lr", "optimiser": "--optimiser",
                  "clip": "--clip", "sigma_eps": "--sigma-eps", "record_every": "--record-every",
                  "resume": "--resume", "save_weights": "--save-weights", "eta_per_k": "--eta-per-k",
                  "pad": "--pad", "task_data": "--task-data", "permute": "--permute"})
# ("method" is left out: it is also the ctrnn's integration setting, given with --set method=…;
# the solver's --method is a click Choice, checked before the library sees it)


def options(ids, models=MODEL_NAMES):
    """One decorator applying the options ``ids`` (keys of ``OPTIONS``, and ``model``) in that order."""
    return _stack(*(model_option(models) if i == "model" else OPTIONS[i] for i in ids))


def announce_compilation(ctx: click.Context) -> None:
    """Unless ``--quiet``: say once on stderr when dynlab's Numba kernels are being compiled (a
    first run), and how long it took at the end (``dynlab._compile_notice``).  Called by every
    command that computes, after its options are parsed (so ``--help`` and bad input import no
    Numba).  ``DYNLAB_COMPILE_NOTICE=0`` or ``DYNLAB_QUIET=1`` in the environment turns it off."""
    from ..progress import is_quiet as quiet_default

    if not is_quiet(ctx) and not quiet_default() and os.environ.get("DYNLAB_COMPILE_NOTICE", "1").strip() != "0":
        from .._compile_notice import install

        install()


def make_spec(ctx: click.Context, options: dict):
    """The frozen ``RunSpec`` of a command's options (unknown keys are a bug, not a user error)."""
    from ..spec import RunSpec

    argv = (ctx.obj or {}).get("argv")
    command = None if argv is None else "dynlab " + shlex.join(argv)
    spec = RunSpec(command=command, **options)
    announce_compilation(ctx)  # after the options are valid: bad input imports no Numba
    return spec

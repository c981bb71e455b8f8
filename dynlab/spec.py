"""One frozen description of a run: which model, which input, where it runs.

The command line turns its options into a single ``RunSpec`` (black's ``Mode``) and the
library functions take only that object: ``build_model(spec)``, ``build_input(spec)``,
``dynlab.plot.phase.phase_dataset(spec)``.  A field left at ``None`` means "not given":
the model's (or the generator's) own default applies, so ``irnn`` keeps weight_scale 0.5
and ``rin`` keeps ReLU unless asked otherwise.

This module imports nothing heavy at import time (the CLI reads it to answer ``--help``).
"""
from __future__ import annotations

import dataclasses

#: The model a spec builds when ``model`` is not given.
DEFAULT_MODEL = "irnn"
#: Sizes used when neither the options nor a weights file give them.  D = 32: a size the papers'
#: smaller networks use (the MASO and iRNN experiments run 32–128 units; the flip-flop example 16–64),
#: small enough for every analysis to answer in seconds on two cores.  The phase portrait keeps
#: the iRNN paper's 2-D cells (Fig. 2; ``dynlab.commands.phase.PHASE_HIDDEN``).
DEFAULT_HIDDEN = 32
DEFAULT_INPUTS = 1
#: The input kind used when none is given: i.i.d. N(0, variance) noise, whose size does not grow with
#: T (a random walk's |x| grows like √(variance·T) and saturates every bounded cell within a few
#: hundred steps).  ``random-walk`` stays available (the iRNN paper's Fig. 2 input).
DEFAULT_INPUT = "noise"
#: Input kinds that take a ``variance``.
VARIANCE_INPUTS = ("random-walk", "noise")
#: Model settings with a field of their own (the rest go through ``settings``).
SETTING_FIELDS = ("activation", "K", "eta", "alpha", "g0")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything needed to build a model and its input sequence, and to run it.

    Parameters
    ----------
    model : str or None
        Registry name (``dynlab.MODELS``); None means ``DEFAULT_MODEL`` (or the weights file's).
    hidden, inputs : int or None
        D and d; None means ``DEFAULT_HIDDEN`` (32) and 1 (or the weights file's).
    activation, K, eta, alpha, g0 : optional model settings; None means the model's default.
    weight_scale : float or None
        Scale of the random recurrent weights; None means the model's default.
    settings : tuple of (name, value) pairs
        Further model settings by name (``beta``, ``eps``, ``rank``, ...; see ``model_options``).
    seed : int
        Seeds both the random weights and the input sequence.
    weights : str or None
        A ``.npz`` written by ``dynlab.save_model``, or a PyTorch network's parameters under
        PyTorch's names (``.safetensors`` or ``.npz``; ``model`` then names the kind, rnn, gru or
        lstm, and ``activation`` an RNN's nonlinearity); replaces random construction.
    steps, batch : int, int or None
        Sequence length T and number of sequences B (None: one unbatched sequence).
    input : str
        Input kind (``dynlab.tasks.INPUTS``; ``DEFAULT_INPUT``, bounded noise, when not given); ``variance`` (None: the generator's default)
        applies to ``random-walk`` and ``noise``.
    backend : str or None
        ``numpy``, ``numba`` or ``cupy``; None means the library default.
    compare : tuple of str
        Further models run on the same input beside the primary one (``phase``).
    command : str or None
        The command line recorded in the Dataset attrs.
    """

    model: str | None = None
    hidden: int | None = None
    inputs: int | None = None
    activation: str | None = None
    K: int | None = None
    eta: float | None = None
    alpha: float | None = None
    g0: str | None = None
    weight_scale: float | None = None
    settings: tuple = ()
    seed: int = 0
    weights: str | None = None
    steps: int = 1000
    batch: int | None = None
    input: str = DEFAULT_INPUT
    variance: float | None = None
    backend: str | None = None
    compare: tuple = ()
    command: str | None = None

    def given_settings(self) -> dict:
        """The model settings the user gave (fields that are not None, then ``settings``)."""
        out = {k: getattr(self, k) for k in SETTING_FIELDS if getattr(self, k) is not None}
        out.update(dict(self.settings))
        return out


def build_model(spec: RunSpec, name: str | None = None, *, like=None):
    """The model a spec describes.

    Parameters
    ----------
    spec : RunSpec
    name : str, optional
        Build this compared model instead of the primary one.  A compared model shares
        ``seed``, ``activation`` and the sizes of ``like`` (the primary model) and keeps its
        own defaults for everything else, so its weights are drawn as a fresh model would be.
    like : Model, optional
        The primary model, whose ``hidden``/``inputs`` a compared model takes.

    Returns
    -------
    dynlab model.  Raises ``ParameterError`` naming the offending setting, including a setting
    the chosen model does not take, or a model setting given together with ``weights``.
    """
    from .errors import ParameterError
    from .models import get_model_class, make_model

    if name is not None:
        cls = get_model_class(name, "compare")
        if not getattr(cls, "SEQUENCE", True):
            raise ParameterError("compare", f"{cls.name} is a static equilibrium model, not a sequence model, so it "
                                            f"cannot be compared along an input sequence (dynlab.implicit_equilibrium)")
        hidden = like.hidden if like is not None else (spec.hidden or DEFAULT_HIDDEN)
        inputs = like.inputs if like is not None else (spec.inputs or DEFAULT_INPUTS)
        extra = {} if spec.activation is None else {"activation": spec.activation}
        return make_model(cls.name, hidden, inputs, seed=spec.seed, **extra)

    if spec.weights is not None:
        from .io import load_model

        fixed = {"hidden": spec.hidden, "inputs": spec.inputs, "weight_scale": spec.weight_scale,
                 **spec.given_settings()}
        fixed.pop("activation", None)  # a PyTorch RNN's nonlinearity: load_model takes it, or refuses it for a dynlab file
        for key, value in fixed.items():
            if value is not None:
                raise ParameterError(key, "cannot be combined with weights: the weights file fixes the model")
        # load_model checks ``model`` against the file (a file of PyTorch parameters: the kind of
        # module they are from, rnn/gru/lstm; several layers make a stack of that kind)
        return load_model(spec.weights, spec.model, activation=spec.activation)

    return make_model(spec.model or DEFAULT_MODEL,
                      DEFAULT_HIDDEN if spec.hidden is None else spec.hidden,
                      DEFAULT_INPUTS if spec.inputs is None else spec.inputs,
                      seed=spec.seed, weight_scale=spec.weight_scale, **spec.given_settings())


def build_input(spec: RunSpec, inputs: int):
    """The input sequence(s) a spec describes: (T, d), or (B, T, d) when ``spec.batch`` is set.

    ``inputs`` is d, taken from the model so a weights file's size wins.
    """
    from .errors import ParameterError
    from .tasks import make_input

    options = {}
    if spec.variance is not None:
        kind = input_kind(spec)
        if kind not in VARIANCE_INPUTS:
            raise ParameterError("variance", f"applies to the {' and '.join(VARIANCE_INPUTS)} inputs, "
                                             f"not to {spec.input!r}")
        options["variance"] = spec.variance
    return make_input(spec.input, spec.steps, inputs, batch=spec.batch, seed=spec.seed, **options)


def input_kind(spec: RunSpec) -> str:
    """The spec's input kind, normalised (``random_walk`` → ``random-walk``)."""
    return str(spec.input).strip().lower().replace("_", "-")


def effective_variance(spec: RunSpec):
    """The variance the spec's input is drawn with: ``spec.variance``, else the generator's own
    default (``dynlab.tasks.random_walk``/``noise``: 1); None for inputs that take none."""
    import inspect

    from .tasks import INPUTS

    kind = input_kind(spec)
    if kind not in VARIANCE_INPUTS:
        return None
    if spec.variance is not None:
        return float(spec.variance)
    return float(inspect.signature(INPUTS[kind]).parameters["variance"].default)


def input_attrs(spec: RunSpec, steps: int) -> dict:
    """Dataset attrs that say which input a command ran on (kind, seed, effective variance, T)."""
    variance = effective_variance(spec)
    return {"input": input_kind(spec), "input_seed": spec.seed,
            "variance": "none" if variance is None else variance, "steps": int(steps)}


def simulate_spec(spec: RunSpec):
    """Build the spec's model and input and run ``dynlab.simulate`` on them.

    Returns the simulation Dataset (``h`` ([batch,] time, unit), ``x``, parameters, attrs
    with ``command = spec.command`` and the input's kind, seed, variance and T, as every
    command's Dataset records them); raises ``DivergenceError`` with the finite steps in
    ``err.partial`` when a state becomes non-finite.
    """
    from ._resources import check_input, check_simulation
    from .simulation import simulate

    model = build_model(spec)
    check_input(spec.steps, model.inputs, spec.batch)
    check_simulation(model, spec.batch or 1, spec.steps)  # the work, before the input is drawn
    ds = simulate(model, build_input(spec, model.inputs), backend=spec.backend, command=spec.command)
    ds.attrs.update(input_attrs(spec, ds.sizes["time"]))
    return ds


@dataclasses.dataclass(frozen=True)
class GradientSpec:
    """A ``dynlab gradients`` run: the shared ``RunSpec`` plus the K values and the spectrum flag.

    Parameters
    ----------
    run : RunSpec
        The primary model, input and backend; ``run.K`` must be None (the K values are here).
    K_values : tuple of int
        One primary model per value (irnn only); empty means one model with its default K.
    lyapunov : bool
        Compute the full finite-time Lyapunov spectrum (otherwise only the top exponent).
    step_norms : bool
        Also ‖∂h_t/∂h_{t-1}‖₂ for every t (``gradient_norms(step_norms=...)``).
    """

    run: RunSpec
    K_values: tuple = ()
    lyapunov: bool = False
    step_norms: bool = True


#: The work limit of ``dynlab equilibria --complete`` (``dynlab.analysis.pwa.MAX_REGIONS``; a test
#: checks they agree, so --help states what the library does without importing it).
COMPLETE_MAX_REGIONS = 200_000


@dataclasses.dataclass(frozen=True)
class EquilibriaSpec:
    """A ``dynlab equilibria`` run: the shared ``RunSpec`` plus the solve and its mode.

    Parameters
    ----------
    run : RunSpec (one sequence: ``batch`` None)
    method : "newton", "euler", "rk4" or "scipy" (``dynlab.equilibrium``)
    tol : residual tolerance ‖F‖∞
    n_starts : int or None — multi-start search (``dynlab.fixed_points``) at ``constant_input``
    constant_input : tuple of float or None — the constant input of the search: one value for every
        input unit, or d values; None means 0
    task : str or None — the search starts from the states the network visits on this task's test
        inputs (``dynlab.make_task(task, steps)``); None: from the trajectory of the run's input for
        gru, lstm and stack, from random states run along the dynamics for the others
    keep_unreachable : keep the points outside the states a trajectory can reach (flagged)
    continue_over : str or None — continuation (``dynlab.continuation``) over x, x<j>, b, b<i>, alpha
    param_range : (lo, hi) of the continuation
    complete : every fixed point by region enumeration (``dynlab.fixed_points(method="complete")``)
        at ``constant_input``
    cycles : with ``complete``, the longest cycle period searched (1: fixed points only)
    max_regions : with ``complete``, the work limit
    """

    run: RunSpec
    method: str = "newton"
    tol: float = 1e-12
    n_starts: int | None = None
    constant_input: tuple | None = None
    task: str | None = None
    keep_unreachable: bool = False
    continue_over: str | None = None
    param_range: tuple | None = None
    complete: bool = False
    cycles: int = 1
    max_regions: int = COMPLETE_MAX_REGIONS

    def __post_init__(self):
        # checked here, where the values are first seen: the default mode simulates the
        # trajectory before its solver would see a bad tol
        from ._validate import as_int, as_scalar

        object.__setattr__(self, "tol", as_scalar(self.tol, "tol", low=0.0, low_open=True))
        if self.n_starts is not None:
            object.__setattr__(self, "n_starts", as_int(self.n_starts, "n_starts", low=1))
        object.__setattr__(self, "cycles", as_int(1 if self.cycles is None else self.cycles, "cycles", low=1))
        object.__setattr__(self, "max_regions", as_int(COMPLETE_MAX_REGIONS if self.max_regions is None
                                                       else self.max_regions, "max_regions", low=1))


@dataclasses.dataclass(frozen=True)
class SpectrumSpec:
    """A ``dynlab spectrum`` run: ``run`` plus where the spectra are taken (``at``)."""

    run: RunSpec
    at: str = "trajectory"


@dataclasses.dataclass(frozen=True)
class ConvergeSpec:
    """A ``dynlab converge`` run: ``run`` (an irnn) plus the last inner iteration ``K_max``."""

    run: RunSpec
    K_max: int = 50

    def __post_init__(self):
        from ._validate import as_int

        object.__setattr__(self, "K_max", as_int(self.K_max, "K_max", low=1))  # before the trajectory is run


@dataclasses.dataclass(frozen=True)
class PartitionSpec:
    """A ``dynlab partition`` run: the shared ``RunSpec`` plus the MASO options.

    Parameters
    ----------
    run : RunSpec
        Model, input and backend; ``run.model`` None means ``rnn`` and ``run.activation`` None
        means ``relu`` here (the partition needs a max-affine activation).
    layers : int
        Number of stacked rnn layers (a ``dynlab.Stack`` of rnn layers); 1 is the plain model.
    embed : bool
        Also embed the prefix codes of the batch in 2-D at four time slices (PCA).
    tsne : bool
        With ``embed``, also a t-SNE embedding (scikit-learn; slow for large batches).
    dataset : str or None
        ``digits`` / ``patterns`` / ``auto``: labelled sequences replace the ``--input`` sequence
        (``--batch`` sequences of it, 500 by default; ``--steps`` is the data set's own).
    """

    run: RunSpec
    layers: int = 1
    embed: bool = False
    tsne: bool = False
    dataset: str | None = None

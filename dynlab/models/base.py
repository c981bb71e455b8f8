"""What a system is: the frozen parameter dataclass every model derives from.

A model holds its parameters as read-only NumPy arrays (or Python scalars) and its
settings (activation, K, ...) as plain values.  It is validated once, at construction:
shapes, finiteness and ranges, each failure a ``ParameterError`` naming the parameter.
Models know nothing about backends; kernels receive the plain arrays that
``kernel_args`` prepares.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from .._validate import as_int, as_matrix, as_scalar  # also importable from here, as before
from ..activations import DEFAULT_LEAK, check_activation
from ..errors import ParameterError


@dataclasses.dataclass(frozen=True, eq=False)
class Model:
    """Base class of the model zoo.

    Subclasses declare ``name`` (the registry key), ``PARAMS`` (names of the parameters
    saved to ``.npz`` and Datasets, arrays or scalars) and ``SETTINGS`` (names of the
    non-array settings, written as Dataset attrs).  ``seed`` and ``weight_scale`` record how
    a random model was made (``None`` for a model built from explicit arrays).
    """

    name: ClassVar[str] = "model"
    PARAMS: ClassVar[tuple[str, ...]] = ()
    SETTINGS: ClassVar[tuple[str, ...]] = ("activation", "leak")
    DEFAULT_ACTIVATION: ClassVar[str] = "tanh"
    DEFAULT_WEIGHT_SCALE: ClassVar[float] = 1.0
    DESCRIPTION: ClassVar[str] = ""
    #: A sequence model (driven by x_t, simulated over time); the implicit networks are not.
    SEQUENCE: ClassVar[bool] = True
    #: The class of the kernel form ``form()`` gives (``dynlab.models.forms``): what is known of
    #: the model before one is built (its cost per step: ``gates``, for the memory estimates).
    FORM: ClassVar[type | None] = None
    #: The sizes the repr starts with.
    REPR_SIZES: ClassVar[tuple[str, ...]] = ("hidden", "inputs")
    #: Training (``dynlab.train_model``): parameters kept fixed unless the caller says otherwise,
    #: positive parameters trained in log space, and lower bounds the optimiser's steps are
    #: projected onto.
    TRAIN_FROZEN: ClassVar[tuple[str, ...]] = ()
    TRAIN_LOG: ClassVar[tuple[str, ...]] = ()
    TRAIN_LOWER: ClassVar[dict] = {}

    def _set(self, field: str, value: Any) -> None:
        object.__setattr__(self, field, value)

    def _check_common(self) -> tuple[int, int]:
        """Validate U/W/b-like fields shared by most models; return (hidden, inputs)."""
        self._set("activation", check_activation(self.activation))
        self._set("leak", as_scalar(self.leak, "leak", low=0.0, high=1.0))
        W = as_matrix(self.W, "W", (None, None))
        D, d = W.shape
        if D < 1 or d < 1:
            raise ParameterError("W", f"must be non-empty, got shape {W.shape}")
        self._set("W", W)
        self._set("b", as_matrix(self.b, "b", (D,)))
        if self.seed is not None:
            self._set("seed", as_int(self.seed, "seed", low=0))
        return D, d

    # ----------------------------------------------------------------- sizes
    @property
    def hidden(self) -> int:
        return int(self.W.shape[0])

    @property
    def inputs(self) -> int:
        return int(self.W.shape[1])

    @property
    def recurrent(self) -> np.ndarray:
        """The matrix that multiplies h_{t-1} inside φ (e.g. U + I for the RIN)."""
        return self.U

    @property
    def state_size(self) -> int:
        """Size n of the dynamical state s every analysis works on (the Jacobians are n × n):
        D for every model but the LSTM, whose state is s = [h; c] (2D)."""
        return self.hidden

    def state_labels(self):
        """What each entry of the state is (``("h", …, "c", …)`` for an LSTM), or None when the
        state is the hidden state h itself."""
        return None

    @property
    def output_slice(self) -> slice:
        """The entries of the state s that are the cell's output h (what a read-out reads)."""
        return slice(0, self.hidden)

    # ------------------------------------------------------------ time
    def check_steps(self, steps: int) -> None:
        """Refuse (ParameterError) an input of ``steps`` steps this model cannot run over (a
        per-time parameter with another number of rows); nothing to check by default."""

    def for_steps(self, lo: int, hi: int) -> "Model":
        """The model over the time steps lo … hi − 1 of its input (0-based): itself, unless a
        parameter varies over time (the iRNN's per-time η)."""
        return self

    @property
    def time_step(self):
        """Continuous time per step of a model sampled from a flow (a CTRNN's Δt), else None."""
        return None

    # ------------------------------------------------------------- form
    def form(self):
        """The kernel form of this model (``dynlab.models.forms``): the update rule's kind and
        arrays, which the backends compute on.  Made once per model (models are immutable)."""
        cached = self.__dict__.get("_form")
        if cached is None:
            cached = self._make_form()
            object.__setattr__(self, "_form", cached)
        return cached

    def _make_form(self):
        from ..errors import ParameterError
        raise ParameterError("model", f"{self.name} is not a sequence model: it has no kernel form")

    def step_cost(self):
        """The cost of one step, ``form().cost`` (``dynlab.models.forms.StepCost``: gate blocks,
        inner iterations), known without building the form — a resource check runs before the
        arrays of a large model's form are made (an iRNN's (1, K) η table)."""
        return self.form().cost if self.FORM is None else self.FORM.cost_of(self)

    # ------------------------------------------------------------- the map
    def step(self, S, X, *, backend="reference"):
        """One step of the update on row-batched states: s_t for s_{t−1} = S (N, n) and x_t = X
        (N, d), as a NumPy array, by ``backend`` (a name or a Backend).

        The default is the NumPy reference (``dynlab.backends.reference``) on purpose: the
        fixed-point and continuation solvers (``analysis.equilibria``, ``analysis.family``) call
        this once per Newton or scipy.optimize iteration on a few host points, where a compiled
        backend's dispatch (or a device's transfers) costs more than the step itself."""
        from ..backends import get_backend, to_numpy

        be = get_backend(backend)
        S = np.ascontiguousarray(np.atleast_2d(S), dtype=np.float64)
        X = np.ascontiguousarray(np.atleast_2d(X), dtype=np.float64)
        with be:
            H, _, _ = be.simulate(self.form(), X[:, None, :], S, stop=False)
        return to_numpy(H[:, 0])

    def step_jacobian(self, S, X, *, inputs: bool = False, backend="reference"):
        """∂s_t/∂s_{t−1} (N, n, n) at row-batched (S, X), and with ``inputs`` also ∂s_t/∂x_t
        (N, n, d): the closed forms of ``backend`` (a name or a Backend), as NumPy arrays.  The
        default is the NumPy reference on purpose, as for ``step``: the Newton and continuation
        solvers call this per iteration on a few host points."""
        from ..backends import get_backend, to_numpy

        be = get_backend(backend)
        S = np.ascontiguousarray(np.atleast_2d(S), dtype=np.float64)
        X = np.ascontiguousarray(np.atleast_2d(X), dtype=np.float64)
        with be:
            J, Jx, _ = be.jacobians(self.form(), X, S, inputs=inputs)
        return (to_numpy(J), None if Jx is None else to_numpy(Jx)) if inputs else to_numpy(J)

    # ---------------------------------------------------------- training
    def pullback(self, g: dict) -> dict:
        """The gradients of this model's parameters (``params()``) from those of its form's
        arrays (``g``, by the form's field names): the chain rule through ``form()``.  By
        default the form's arrays are the parameters themselves."""
        return {k: g[k] for k in self.params()}

    def with_params(self, params: dict) -> "Model":
        """A copy with the named parameters replaced (validated again); other keys (a read-out,
        h0) are ignored."""
        own = {k: v for k, v in params.items() if k in self.params()}
        for k, v in own.items():
            if isinstance(getattr(self, k, None), float):
                own[k] = float(np.asarray(v))
        return self.replace(**own)

    # ------------------------------------------------------- introspection
    def params(self) -> dict[str, Any]:
        """Parameters by name (arrays and scalars), as saved to ``.npz`` and Datasets."""
        return {k: getattr(self, k) for k in self.PARAMS}

    def settings(self) -> dict[str, Any]:
        """Scalar settings by name (activation, K, …), as written to Dataset attrs."""
        return {k: getattr(self, k) for k in self.SETTINGS}

    def replace(self, **changes) -> "Model":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        """One line: sizes, every setting and scalar parameter, then the arrays by shape.

        ``IRNN(hidden=128, inputs=2, eta=0.1, alpha=1.0, K=5, g0='zero', sign=1, activation='tanh',
        seed=0, weight_scale=0.5, P='I', U=<array 128×128>, W=<array 128×2>, b=<array 128>)``.  Absent
        optional arrays (the low-rank factors, a second layer) are left out, and so is ``leak``
        unless the activation is leaky-relu.  Subclasses are declared with ``repr=False`` so that
        the dataclass decorator keeps this repr instead of generating one that prints every weight.
        """
        from .._repr import value

        head = [f"{k}={getattr(self, k)}" for k in self.REPR_SIZES]
        scalars, arrays = [], []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None and f.name not in ("seed", "weight_scale"):
                continue
            if f.name == "leak" and self.activation != "leaky-relu":
                continue
            (arrays if isinstance(v, np.ndarray) and v.ndim > 0 else scalars).append(f"{f.name}={value(v)}")
        return f"{type(self).__name__}({', '.join(head + scalars + arrays)})"

    # ---------------------------------------------------------------- random
    @classmethod
    def random(cls, hidden: int, inputs: int, *, seed: int | None = None,
               weight_scale: float | None = None, **settings) -> "Model":
        raise NotImplementedError  # every registered model overrides it

    @staticmethod
    def _rng_and_sizes(hidden, inputs, seed, weight_scale, default_scale):
        hidden = as_int(hidden, "hidden", low=1)
        inputs = as_int(inputs, "inputs", low=1)
        if seed is not None:
            seed = as_int(seed, "seed", low=0)
        ws = default_scale if weight_scale is None else as_scalar(weight_scale, "weight_scale", low=0.0)
        return np.random.default_rng(seed), hidden, inputs, seed, ws

    @staticmethod
    def _gaussian_weights(rng, D, d, ws):
        """U ~ N(0, ws²/D), W ~ N(0, 1/d), b ~ N(0, 0.1²) (the documented default)."""
        U = rng.standard_normal((D, D)) * (ws / np.sqrt(D))
        W = rng.standard_normal((D, d)) / np.sqrt(d)
        b = rng.standard_normal(D) * 0.1
        return U, W, b


LEAK_FIELD = dataclasses.field(default=DEFAULT_LEAK)

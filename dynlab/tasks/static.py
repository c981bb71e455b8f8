"""Static (non-sequence) tasks for implicit networks: XOR and the damped-oscillator regression.

Each task returns a ``StaticTask``: inputs as rows ``X_*`` (N, m) and targets ``Y_*`` (N, k)
for the train / validation / test splits.  A NaN target marks an output that the loss leaves
free (the paper's "Any").  Targets map onto the first k output units of a network.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ParameterError

#: second targets the XOR task can ask of Y2 (the paper trains Y2 freely, or, for the
#: semi-gradient, on a simpler gate: its table is x2 AND NOT x1)
XOR_SECOND = ("free", "and", "or", "nor", "andnot")


@dataclasses.dataclass(frozen=True)
class StaticTask:
    """Inputs and targets of a static regression/classification task, split three ways."""

    name: str
    X_train: np.ndarray
    Y_train: np.ndarray
    X_val: np.ndarray
    Y_val: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    info: dict = dataclasses.field(default_factory=dict)

    @property
    def inputs(self) -> int:
        return int(self.X_train.shape[1])

    @property
    def targets(self) -> int:
        return int(self.Y_train.shape[1])

    def __repr__(self) -> str:
        """Two lines: name, sizes, the splits by shape and the generator's settings (``info``).

        Defined here, so the dataclass decorator keeps it and still generates ``__eq__`` (and
        no ``__hash__``), as before."""
        from .._repr import shape, value

        splits = "; ".join(f"{name}: X {shape(getattr(self, 'X_' + name))}, Y {shape(getattr(self, 'Y_' + name))}"
                           for name in ("train", "val", "test"))
        info = ", ".join(f"{k}={value(v)}" for k, v in self.info.items())
        return (f"StaticTask({self.name!r}, inputs={self.inputs}, targets={self.targets}, {splits},\n"
                f"           info: {info or 'none'})")


def xor(second: str = "free") -> StaticTask:
    """XOR on the four points of {0, 1}²: target 1 of Y1 is x1 XOR x2.

    ``second`` adds a target for Y2: "free" (NaN, the loss ignores it — the paper's exact-gradient
    run), "and", "or", "nor", or "andnot" (x2 AND NOT x1, the paper's Fig. 5 table).  The task has
    no held-out data: train, validation and test are the same four points.

    >>> t = xor("and"); t.Y_train[:, 0]
    array([0., 1., 1., 0.])
    """
    if second not in XOR_SECOND:
        raise ParameterError("second", f"must be one of {', '.join(XOR_SECOND)}, got {second!r}")
    X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    a, b = X[:, 0].astype(bool), X[:, 1].astype(bool)
    gates = {"free": np.full(4, np.nan), "and": a & b, "or": a | b, "nor": ~(a | b), "andnot": b & ~a}
    Y = np.stack([(a ^ b).astype(float), np.asarray(gates[second], dtype=float)], axis=1)
    return StaticTask("xor", X, Y, X.copy(), Y.copy(), X.copy(), Y.copy(), {"second": second})


def oscillator_trajectory(x0, v0, omega0, delta, times):
    """Closed-form solution of ẍ + 2δẋ + ω₀²x = 0 at ``times`` (arrays broadcast over samples).

    x(t) = e^{−δt} (x0 C(t) + (v0 + δ x0) S(t)) with, for Ω² = ω₀² − δ²,
    C = cos(√Ω² t), S = sin(√Ω² t)/√Ω² (under-damped), C = cosh(κt), S = sinh(κt)/κ with
    κ = √(δ² − ω₀²) (over-damped), C = 1, S = t (critical).
    """
    x0, v0, w, d = (np.asarray(a, dtype=np.float64)[..., None] for a in (x0, v0, omega0, delta))
    t = np.asarray(times, dtype=np.float64)
    om2 = w * w - d * d
    k = np.sqrt(np.abs(om2))
    under, over = om2 > 0, om2 < 0
    ks = np.where(k > 0, k, 1.0)
    C = np.where(under, np.cos(k * t), np.where(over, np.cosh(k * t), 1.0))
    S = np.where(under, np.sin(k * t) / ks, np.where(over, np.sinh(k * t) / ks, t))
    return np.exp(-d * t) * (x0 * C + (v0 + d * x0) * S)


def damped_oscillator(samples: int = 2000, *, window: int = 20, dt: float = 0.1, variance: float = 2.0,
                      normalise: bool = True, split=(0.6, 0.2, 0.2), seed: int | None = 0) -> StaticTask:
    """Regression of (ω₀, δ) from a window of a damped oscillator's trajectory (implicit paper §2.4).

    ẍ + 2δẋ + ω₀²x = 0 with x0, v0 ~ N(0, ``variance``) (the paper's N(0, 2), read as variance 2),
    ω₀ ~ U[1, 2], δ ~ U[0, 2].  Features: x(kΔt) for k = 0..window−1 (Δt = ``dt`` = 0.1), divided
    by max_k |x(kΔt)| when ``normalise`` (the default): x(t) is linear in (x0, v0), so the
    amplitude carries no information on (ω₀, δ) and only the window's shape is kept.
    Targets, scaled into [0, 1] so that a sigmoid output can reach them: (ω₀ − 1, δ/2)
    (``info["target_offset"]``, ``info["target_scale"]`` undo it).  Splits by ``split`` fractions.
    """
    from .._validate import as_int, as_scalar

    samples = as_int(samples, "samples", low=3)
    window = as_int(window, "window", low=2)
    dt = as_scalar(dt, "dt", low=0.0, low_open=True)
    variance = as_scalar(variance, "variance", low=0.0)
    fr = np.asarray(split, dtype=np.float64)
    if fr.shape != (3,) or np.any(fr < 0) or not np.isclose(fr.sum(), 1.0) or fr[0] == 0:
        raise ParameterError("split", f"must be three fractions (train, validation, test) summing to 1, got {split}")
    rng = np.random.default_rng(seed)
    sd = np.sqrt(variance)
    x0, v0 = rng.normal(0.0, sd, samples), rng.normal(0.0, sd, samples)
    w0, d = rng.uniform(1.0, 2.0, samples), rng.uniform(0.0, 2.0, samples)
    X = oscillator_trajectory(x0, v0, w0, d, dt * np.arange(window))
    if normalise:
        X = X / np.max(np.abs(X), axis=1, keepdims=True)
    Y = np.stack([w0 - 1.0, d / 2.0], axis=1)
    n_tr = int(round(fr[0] * samples))
    n_va = int(round(fr[1] * samples))
    s_tr, s_va = slice(0, n_tr), slice(n_tr, n_tr + n_va)
    s_te = slice(n_tr + n_va, samples)
    info = {"window": window, "dt": dt, "variance": variance, "normalise": int(bool(normalise)), "seed": -1 if seed is None else int(seed),
            "target_offset": [1.0, 0.0], "target_scale": [1.0, 2.0], "targets": "omega0 - 1, delta / 2"}
    return StaticTask("oscillator", X[s_tr], Y[s_tr], X[s_va], Y[s_va], X[s_te], Y[s_te], info)


STATIC_TASKS = {"xor": xor, "oscillator": damped_oscillator}

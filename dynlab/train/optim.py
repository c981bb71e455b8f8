"""First-order optimisers on dicts of NumPy arrays, with exactly restorable state.

Parameters and gradients are ``dict[str, np.ndarray]`` with the same keys and shapes.  An
optimiser's ``step(params, grads)`` returns new parameter arrays (the inputs are not
modified).  ``state_dict()`` returns plain arrays and scalars (savable with ``np.savez``)
and ``load_state_dict`` restores them, so that training resumed from saved weights and
optimiser state continues bit-for-bit.

    opt = make_optimiser("adam", lr=1e-2)
    params = opt.step(params, grads)

Updates (g the gradient, t the 1-based step count):
- SGD:     v ← μ v + g;  θ ← θ − lr·v                               (μ = ``momentum``)
- RMSprop: r ← ρ r + (1−ρ) g²;  θ ← θ − lr·g/(√r + ε)               (Tieleman & Hinton)
- Adam:    m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²;
           θ ← θ − lr·m̂/(√v̂ + ε), m̂ = m/(1−β₁ᵗ), v̂ = v/(1−β₂ᵗ)   (Kingma & Ba)
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError


def _positive(name, value, *, allow_zero=False):
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ParameterError(name, f"must be a finite number {'≥' if allow_zero else '>'} 0, got {value}")
    return value


def _fraction(name, value):
    value = float(value)
    if not (0.0 <= value < 1.0):
        raise ParameterError(name, f"must lie in [0, 1), got {value}")
    return value


def clip_by_global_norm(grads: dict, max_norm: float | None):
    """Scale every gradient by min(1, max_norm/‖g‖) with ‖g‖ the norm of all entries together.

    Returns (clipped grads, the norm before clipping).  ``max_norm=None`` clips nothing.
    """
    norm = math.sqrt(sum(float(np.sum(np.square(g))) for g in grads.values()))
    if max_norm is None or norm <= max_norm or norm == 0.0:
        return dict(grads), norm
    scale = float(max_norm) / norm
    return {k: g * scale for k, g in grads.items()}, norm


class _Optimiser:
    name = ""

    def __init__(self, lr: float):
        self.lr = _positive("lr", lr)
        self.t = 0
        self.slots: dict[str, dict[str, np.ndarray]] = {}

    def _slot(self, slot: str, key: str, like: np.ndarray) -> np.ndarray:
        s = self.slots.setdefault(slot, {})
        if key not in s:
            s[key] = np.zeros_like(like, dtype=np.float64)
        return s[key]

    def step(self, params: dict, grads: dict) -> dict:
        """One update; returns the new parameters (a new dict of new arrays)."""
        missing = set(params) ^ set(grads)
        if missing:
            raise ParameterError("grads", f"keys differ from the parameters' on {sorted(missing)}")
        self.t += 1
        out = {}
        for k, p in params.items():
            g = np.asarray(grads[k], dtype=np.float64)
            if g.shape != np.shape(p):
                raise ParameterError("grads", f"{k} has shape {g.shape}, the parameter {np.shape(p)}")
            out[k] = np.asarray(p, dtype=np.float64) - self._delta(k, g)
        return out

    def _delta(self, key, g):  # pragma: no cover - abstract
        raise NotImplementedError

    def hyper(self) -> dict:
        return {"lr": self.lr}

    def state_dict(self) -> dict:
        """Flat dict of arrays: ``opt_t``, ``opt_lr``, hyper-parameters, and ``opt/SLOT/KEY`` moments."""
        out = {"opt_name": np.array(self.name), "opt_t": np.array(self.t)}
        out.update({f"opt_{k}": np.array(v) for k, v in self.hyper().items()})
        for slot, d in self.slots.items():
            for key, arr in d.items():
                out[f"opt/{slot}/{key}"] = arr.copy()
        return out

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` returned (also from an ``np.load`` of a saved file)."""
        name = str(np.asarray(state["opt_name"]))
        if name != self.name:
            raise ParameterError("optimiser", f"saved state is for {name!r}, not {self.name!r}")
        self.t = int(np.asarray(state["opt_t"]))
        for k in self.hyper():
            setattr(self, k, float(np.asarray(state[f"opt_{k}"])))
        self.slots = {}
        for full, arr in state.items():
            if full.startswith("opt/"):
                _, slot, key = full.split("/", 2)
                self.slots.setdefault(slot, {})[key] = np.array(arr, dtype=np.float64)


class SGD(_Optimiser):
    """Gradient descent with heavy-ball momentum μ ∈ [0, 1) (μ = 0: plain SGD)."""

    name = "sgd"

    def __init__(self, lr: float = 1e-2, momentum: float = 0.0):
        super().__init__(lr)
        self.momentum = _fraction("momentum", momentum)

    def hyper(self):
        return {"lr": self.lr, "momentum": self.momentum}

    def _delta(self, key, g):
        if self.momentum == 0.0:
            return self.lr * g
        v = self._slot("v", key, g)
        v *= self.momentum
        v += g
        return self.lr * v


class RMSprop(_Optimiser):
    """RMSprop with decay ρ and ε added to √r."""

    name = "rmsprop"

    def __init__(self, lr: float = 1e-3, rho: float = 0.9, eps: float = 1e-8):
        super().__init__(lr)
        self.rho = _fraction("rho", rho)
        self.eps = _positive("eps", eps)

    def hyper(self):
        return {"lr": self.lr, "rho": self.rho, "eps": self.eps}

    def _delta(self, key, g):
        r = self._slot("r", key, g)
        r *= self.rho
        r += (1.0 - self.rho) * g * g
        return self.lr * g / (np.sqrt(r) + self.eps)


class Adam(_Optimiser):
    """Adam with bias correction."""

    name = "adam"

    def __init__(self, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        super().__init__(lr)
        self.beta1 = _fraction("beta1", beta1)
        self.beta2 = _fraction("beta2", beta2)
        self.eps = _positive("eps", eps)

    def hyper(self):
        return {"lr": self.lr, "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}

    def _delta(self, key, g):
        m = self._slot("m", key, g)
        v = self._slot("v", key, g)
        m *= self.beta1
        m += (1.0 - self.beta1) * g
        v *= self.beta2
        v += (1.0 - self.beta2) * g * g
        mhat = m / (1.0 - self.beta1 ** self.t)
        vhat = v / (1.0 - self.beta2 ** self.t)
        return self.lr * mhat / (np.sqrt(vhat) + self.eps)


OPTIMISERS = {"sgd": SGD, "rmsprop": RMSprop, "adam": Adam}


def make_optimiser(name: str, **settings) -> _Optimiser:
    """An optimiser by name (``sgd``, ``rmsprop``, ``adam``) with its settings."""
    try:
        cls = OPTIMISERS[str(name).lower()]
    except KeyError:
        raise ParameterError("optimiser", f"unknown optimiser {name!r}; choose from {', '.join(OPTIMISERS)}") from None
    return cls(**settings)


class Plateau:
    """Reduce-on-plateau schedule: lr ← lr·factor after ``patience`` checks without a relative
    improvement of at least ``threshold`` in the monitored value, never below ``min_lr``."""

    def __init__(self, optimiser: _Optimiser, *, factor: float = 0.5, patience: int = 10,
                 threshold: float = 1e-3, min_lr: float = 1e-6):
        self.opt = optimiser
        if not (0.0 < float(factor) < 1.0):
            raise ParameterError("factor", f"must lie in (0, 1), got {factor}")
        if int(patience) < 1:
            raise ParameterError("patience", f"must be ≥ 1, got {patience}")
        self.factor, self.patience = float(factor), int(patience)
        self.threshold, self.min_lr = _positive("threshold", threshold, allow_zero=True), float(min_lr)
        self.best, self.bad = math.inf, 0

    def update(self, value: float) -> float:
        """Record one monitored value; returns the learning rate now in force."""
        if value < self.best * (1.0 - self.threshold) if self.best > 0 else value < self.best:
            self.best, self.bad = float(value), 0
        else:
            self.bad += 1
            if self.bad >= self.patience:
                self.opt.lr = max(self.opt.lr * self.factor, self.min_lr)
                self.bad = 0
        return self.opt.lr

    def state_dict(self) -> dict:
        return {"plateau_best": np.array(self.best), "plateau_bad": np.array(self.bad)}

    def load_state_dict(self, state: dict) -> None:
        self.best = float(np.asarray(state["plateau_best"]))
        self.bad = int(np.asarray(state["plateau_bad"]))

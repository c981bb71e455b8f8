"""Shared fixtures and model cases for the dynlab tests.

``MODEL_CASES`` builds every model variant the simulation tests sweep over: name →
``build(activation, T)``.  Weights are kept small (weight_scale 0.5; 0.1 for the RIN, whose
recurrence is U + I) so that even the unbounded activations (identity, relu, abs,
leaky-relu) keep the states of a T ≈ 40 run of moderate size: then the kernels differ from
each other and from tests/naive.py only by summation order, ≈ 1e-16 relative per step.

``kernel_path`` runs one test on each of the three kernel families: the NumPy reference,
the numba backend's jitted loops (``VECTORISE_MIN_WORK`` huge) and its vectorised BLAS kernel
(``VECTORISE_MIN_WORK`` = 0).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # so tests can `import naive`

import dynlab  # noqa: E402
import dynlab.config  # noqa: E402

D_HIDDEN = 4
D_IN = 2


def _irnn(activation, T, **kw):
    kw.setdefault("eta", 0.5)
    return dynlab.make_model("irnn", D_HIDDEN, D_IN, seed=3, weight_scale=0.5, activation=activation, **kw)


def _eta_K(K):
    return np.linspace(0.3, 0.9, K)


def _eta_TK(T, K):
    return np.random.default_rng(11).uniform(0.2, 1.0, (T, K))


MODEL_CASES = {
    "rnn": lambda act, T: dynlab.make_model("rnn", D_HIDDEN, D_IN, seed=1, weight_scale=0.5, activation=act),
    "rnn-identity-init": lambda act, T: dynlab.make_model("rnn", D_HIDDEN, D_IN, seed=1, weight_scale=0.5,
                                                          identity_init=True, activation=act),
    "fastrnn": lambda act, T: dynlab.make_model("fastrnn", D_HIDDEN, D_IN, seed=2, weight_scale=0.5,
                                                activation=act, alpha=-1.0, beta=2.0),
    "antisymmetric": lambda act, T: dynlab.make_model("antisymmetric", D_HIDDEN, D_IN, seed=4, weight_scale=0.5,
                                                      activation=act, eps=0.2, gamma=0.05),
    "rin": lambda act, T: dynlab.make_model("rin", D_HIDDEN, D_IN, seed=5, weight_scale=0.1, activation=act),
    "irnn-K1": lambda act, T: _irnn(act, T, K=1),
    "irnn-K5-zero-plus": lambda act, T: _irnn(act, T, K=5, g0="zero", sign=1),
    "irnn-K5-zero-minus": lambda act, T: _irnn(act, T, K=5, g0="zero", sign=-1),
    "irnn-K5-previous-plus": lambda act, T: _irnn(act, T, K=5, g0="previous", sign=1),
    "irnn-K5-previous-minus": lambda act, T: _irnn(act, T, K=5, g0="previous", sign=-1),
    "irnn-K5-etaK": lambda act, T: _irnn(act, T, K=5, eta=_eta_K(5)),
    "irnn-K5-etaTK": lambda act, T: _irnn(act, T, K=5, eta=_eta_TK(T, 5), g0="previous"),
    "irnn-K5-lowrank1": lambda act, T: _irnn(act, T, K=5, rank=1),
    "ctrnn-euler": lambda act, T: dynlab.make_model("ctrnn", D_HIDDEN, D_IN, seed=6, weight_scale=0.5,
                                                    activation=act, method="euler", substeps=3, dt=0.3),
    "ctrnn-rk4": lambda act, T: dynlab.make_model("ctrnn", D_HIDDEN, D_IN, seed=6, weight_scale=0.5,
                                                  activation=act, method="rk4", substeps=3, dt=0.3),
}

ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity", "leaky-relu", "abs")

KERNEL_PATHS = {
    # name: (backend, VECTORISE_MIN_WORK, expected Dataset attr "kernel")
    "numpy": ("numpy", None, "numpy_ref"),
    "numba-loops": ("numba", 1 << 62, "numba_cpu"),
    "numba-vectorised": ("numba", 0, "vectorised"),
}


def inputs(B, T, d=D_IN, seed=0, scale=0.7):
    """Moderate Gaussian inputs, (T, d) for B=None or (B, T, d)."""
    shape = (T, d) if B is None else (B, T, d)
    return scale * np.random.default_rng(seed).standard_normal(shape)


@pytest.fixture(params=list(KERNEL_PATHS))
def kernel_path(request, monkeypatch):
    """(backend, expected kernel name); the numba threshold is patched to force the path."""
    backend, threshold, kernel = KERNEL_PATHS[request.param]
    if threshold is not None:
        monkeypatch.setattr(dynlab.config, "VECTORISE_MIN_WORK", threshold)
    return backend, kernel


def force_path(monkeypatch, name):
    """Patch the numba threshold for the named path; return (backend, expected kernel)."""
    backend, threshold, kernel = KERNEL_PATHS[name]
    if threshold is not None:
        monkeypatch.setattr(dynlab.config, "VECTORISE_MIN_WORK", threshold)
    return backend, kernel


def cli_run(*args):
    """Invoke ``dynlab ARGS`` in-process (every argument str()-ed); returns click's Result."""
    from click.testing import CliRunner

    from dynlab.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def cli_ok(*args):
    """``cli_run`` that must exit 0 (the output and exception are shown when it does not)."""
    result = cli_run(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result

"""dynlab: numerical dynamics and gradient analysis of recurrent networks.

The public surface, re-exported explicitly.  Names are imported on first use (PEP 562) so
that ``import dynlab`` and ``dynlab --help`` stay fast; the table below is the whole API.
"""
from __future__ import annotations

import importlib

from . import _cache
from ._version import __version__

_cache.prepare()  # before any dynlab module imports Numba: the per-user kernel cache (dynlab._cache)

_EXPORTS = {
    # models
    "make_model": "dynlab.models",
    "get_model_class": "dynlab.models",
    "model_options": "dynlab.models",
    "MODELS": "dynlab.models",
    "Model": "dynlab.models",
    "RNN": "dynlab.models",
    "FastRNN": "dynlab.models",
    "AntisymmetricRNN": "dynlab.models",
    "RIN": "dynlab.models",
    "IRNN": "dynlab.models",
    "CTRNN": "dynlab.models",
    "Implicit": "dynlab.models",
    "GRU": "dynlab.models",
    "LSTM": "dynlab.models",
    "Stack": "dynlab.models",
    # backends
    "get_backend": "dynlab.backends",
    "available_backends": "dynlab.backends",
    # simulation
    "simulate": "dynlab.simulation",
    # analyses
    "irnn_equilibrium": "dynlab.analysis.equilibria",
    "equilibrium_curve": "dynlab.analysis.equilibria",
    "gradient_norms": "dynlab.analysis.gradients",
    "lyapunov": "dynlab.analysis.lyapunov",
    "jacobians": "dynlab.analysis.jacobians",
    "jacobian_at": "dynlab.analysis.jacobians",
    "equilibrium": "dynlab.analysis.equilibria",
    "fixed_points": "dynlab.analysis.fixed_points",
    "eigenvalues_from": "dynlab.analysis.equilibria",
    "spectrum": "dynlab.analysis.spectra",
    "convergence": "dynlab.analysis.convergence",
    "continuation": "dynlab.analysis.continuation",
    "bifurcation_curve": "dynlab.analysis.codim2",
    "implicit_equilibrium": "dynlab.analysis.implicit",
    "implicit_vjp": "dynlab.analysis.implicit",
    "implicit_jacobian": "dynlab.analysis.implicit",
    "implicit_neuron": "dynlab.analysis.implicit",
    "train_implicit": "dynlab.train.implicit",
    # io
    "save_model": "dynlab.io",
    "load_model": "dynlab.io",
    "write_dataset": "dynlab.io",
    "read_dataset": "dynlab.io",
    "model_from_dataset": "dynlab.io",
    "from_torch": "dynlab.torch_import",
    "to_torch": "dynlab.torch_import",
    # errors
    "DynlabError": "dynlab.errors",
    "ParameterError": "dynlab.errors",
    "DivergenceError": "dynlab.errors",
    "ConvergenceError": "dynlab.errors",
    # activations
    "ACTIVATIONS": "dynlab.activations",
    # MASO partition analysis
    "StackedRNN": "dynlab.models.stacked",
    "partition": "dynlab.analysis.partition",
    "partition_codes": "dynlab.analysis.partition",
    "affine_form": "dynlab.analysis.partition",
    "templates": "dynlab.analysis.partition",
    "initial_state_jacobian": "dynlab.analysis.partition_h0",
    "loss_gradient_h0": "dynlab.analysis.partition_h0",
    "random_h0_regulariser": "dynlab.analysis.partition_h0",
    "random_h0_monte_carlo": "dynlab.analysis.partition_h0",
    "hamming_distances": "dynlab.analysis.partition",
    "count_regions": "dynlab.analysis.partition",
    "embed_codes": "dynlab.analysis.partition_codes",
    "knn_accuracy": "dynlab.analysis.partition_codes",
    # training (tasks, exact gradients, the loop)
    "make_task": "dynlab.tasks",
    "loss_and_grads": "dynlab.train.backprop",
    "train_model": "dynlab.train.loop",
    "resume_training": "dynlab.train.loop",
    "save_checkpoint": "dynlab.train.loop",
    "load_checkpoint": "dynlab.train.loop",
}
#: The long calls: their public names take ``progress=`` and talk (``dynlab.progress.reports``).
#: (``train_model`` and ``sweep`` take it in their own signature.)
_LONG = ("simulate", "gradient_norms", "lyapunov", "jacobians", "equilibrium", "fixed_points", "spectrum",
         "continuation", "bifurcation_curve", "partition", "templates", "train_implicit")
_SUBMODULES = ("tasks", "models", "activations", "analysis", "backends", "io", "plot", "errors")
_SUBMODULES += ("sweep", "progress")  # dynlab.sweep is a callable package: dl.sweep(analysis, grid, ...)

__all__ = sorted(_EXPORTS) + list(_SUBMODULES) + ["__version__"]


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        if name in _LONG:
            from .progress import reports

            value = reports(value)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"dynlab.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'dynlab' has no attribute {name!r}")


def __dir__():
    return __all__

"""What each ``dynlab`` command computes: one frozen spec → models → analyses → one Dataset (and its text).

Each ``dynlab`` command is a few lines in ``dynlab.cli`` that build a spec (``dynlab.spec``),
call the ``*_dataset(spec)`` function here, and hand the Dataset to ``dynlab.plot`` and to
``*_summary(ds)`` for the printed text.  Scripts can call them directly:

>>> from dynlab.spec import RunSpec
>>> from dynlab.commands import phase_dataset
>>> ds = phase_dataset(RunSpec(model="irnn", K=5, compare=("rnn", "fastrnn")))
>>> dynlab.plot.draw(ds)

Layering: this package imports the computing layers (models, analysis, simulation, train) and
``dynlab.plot.labels`` for display names; ``dynlab.plot`` never imports this package.
"""
from __future__ import annotations

from .gradients import gradients_dataset, gradients_summary
from .partition import partition_dataset, partition_summary
from .phase import add_field, phase_dataset, phase_summary
from .simulate import simulate_spec, simulate_summary
from .stability import (converge_dataset, converge_summary, equilibria_dataset, equilibria_summary, not_converged,
                        spectrum_dataset, spectrum_summary)
from .train import implicit_train_summary, train_result_summary, train_spec, train_summary

__all__ = ["add_field", "converge_dataset", "converge_summary", "equilibria_dataset", "equilibria_summary",
           "gradients_dataset", "gradients_summary", "implicit_train_summary", "not_converged", "partition_dataset",
           "partition_summary", "phase_dataset", "phase_summary", "simulate_spec", "simulate_summary",
           "spectrum_dataset", "spectrum_summary", "train_result_summary", "train_spec", "train_summary"]

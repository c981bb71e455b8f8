"""Dataset → matplotlib Figure: every picture is drawn from a result alone; nothing is computed here.

``draw(result)``            the picture of any public call's result, chosen from the result
                            itself (``attrs["result"]``); the functions below draw one kind each
                            and accept the same results:
``plot_states``             h_t over time (``simulate``)
``plot_phase``              phase portraits (``dynlab phase``, or any result with states h)
``plot_gradients``          ‖∂h_T/∂h_t‖₂ against T − t (``gradient_norms``, ``dynlab gradients``)
``plot_lyapunov``           finite-time Lyapunov spectra (``lyapunov``)
``plot_jacobians``          step Jacobians over time (``jacobians``)
``plot_equilibria``         ``equilibrium``, ``irnn_equilibrium``, ``fixed_points``, ``continuation``,
                            ``implicit_equilibrium``
``plot_bifurcation``        bifurcation diagrams (``continuation``: branches by stability, special
                            points labelled) and two-parameter curves (``bifurcation_curve``)
``plot_fixed_points``       ``fixed_points`` with trajectories: the FixedPointFinder picture in the
                            top principal components (stable points, saddles, unstable directions)
``plot_spectrum``           eigenvalues of ∇φU − αI (``spectrum``)
``plot_convergence``        the iRNN inner recursion (``convergence``)
``plot_partition``, ``plot_templates``   MASO codes and templates
``plot_training``, ``plot_implicit_training``   training histories
``plot_sweep``              sweep results
``save_figure``             write a Figure as png, pdf or svg (chosen by suffix)

Layering: this package reads Datasets only; it imports no model, analysis, kernel, simulation,
training, sweep or command (``dynlab.commands``) module (a test checks it).  matplotlib is imported
only when something is drawn.  The command-level computations that used to live here
(``phase_dataset``, ``gradients_dataset``, …) are in ``dynlab.commands``; their old names here
were deprecated a release ago and are gone (an AttributeError names the new place).
"""
from __future__ import annotations

from .bifurcation import plot_bifurcation
from .draw import PICTURES, draw, result_kind
from .fixed_points import plot_fixed_points
from .gradients import plot_gradients
from .jacobians import plot_jacobians
from .lyapunov import plot_lyapunov
from .partition import plot_partition, plot_templates
from .phase import plot_phase
from .stability import plot_convergence, plot_equilibria, plot_spectrum
from .states import plot_states
from .style import COLORS, PANEL_WIDTH, new_figure, save_figure
from .sweep import plot_sweep
from .training import plot_implicit_training, plot_training

__all__ = ["COLORS", "PANEL_WIDTH", "PICTURES", "draw", "new_figure", "plot_bifurcation", "plot_convergence",
           "plot_equilibria",
           "plot_fixed_points", "plot_gradients", "plot_implicit_training", "plot_jacobians", "plot_lyapunov", "plot_partition",
           "plot_phase", "plot_spectrum", "plot_states", "plot_sweep", "plot_templates", "plot_training",
           "result_kind", "save_figure"]

#: Names that were moved to the command layer and then removed from here: an AttributeError says where
#: they are (by name only: dynlab.plot imports nothing above it).
_REMOVED = ("phase_dataset", "phase_summary", "gradients_dataset", "gradients_summary", "equilibria_dataset",
            "equilibria_summary", "spectrum_dataset", "spectrum_summary", "converge_dataset", "converge_summary",
            "partition_dataset", "partition_summary", "simulate_summary")


def __getattr__(name):
    if name in _REMOVED:
        raise AttributeError(f"dynlab.plot.{name} was removed (dynlab.plot only draws): use dynlab.commands.{name}")
    raise AttributeError(f"module 'dynlab.plot' has no attribute {name!r}")

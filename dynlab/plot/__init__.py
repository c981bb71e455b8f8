"""Dataset → matplotlib: every picture is drawn from a Dataset alone (DESIGN §2).

``phase_dataset`` / ``plot_phase``  phase portraits (iRNN paper Fig. 2), with equilibria;
``gradients_dataset`` / ``plot_gradients``  ‖∂h_T/∂h_t‖₂ against T − t, Lyapunov spectra;
``plot_states``                     h_t over time for one sequence of ``dynlab.simulate``;
``save_figure``                     write a Figure as png, pdf or svg (chosen by suffix).

matplotlib is imported only when something is drawn.
"""
from .gradients import gradients_dataset, gradients_summary, plot_gradients
from .partition import partition_dataset, partition_summary, plot_partition
from .phase import phase_dataset, phase_summary, plot_phase
from .states import plot_states, simulate_summary
from .stability import (converge_dataset, converge_summary, equilibria_dataset, equilibria_summary, plot_convergence,
                        plot_equilibria, plot_spectrum, spectrum_dataset, spectrum_summary)
from .style import COLORS, PANEL_WIDTH, new_figure, save_figure

__all__ = ["COLORS", "PANEL_WIDTH", "gradients_dataset", "gradients_summary", "plot_gradients", "new_figure", "phase_dataset", "phase_summary", "plot_phase",
           "plot_states", "save_figure", "simulate_summary",
           "converge_dataset", "converge_summary", "equilibria_dataset", "equilibria_summary", "plot_convergence",
           "plot_equilibria", "plot_spectrum", "spectrum_dataset", "spectrum_summary"]
__all__ += ["partition_dataset", "partition_summary", "plot_partition"]

"""``draw(result)``: the picture of any dynlab result, chosen from the result itself.

Every public call names itself in its Dataset's ``attrs["result"]`` (``simulate``,
``gradient_norms``, ``lyapunov``, ``jacobians``, ``equilibrium``, ``fixed_points``, ``spectrum``,
``convergence``, ``continuation``, ``bifurcation_curve``, ``partition``, ``templates``, ``sweep``, the command results
``phase`` and ``gradients``, …); ``PICTURES`` maps that name to the drawing function.  A file
written before results named themselves is recognised by its variables.  Nothing is computed
here: the picture is drawn from what the result holds.
"""
from __future__ import annotations

from ..errors import ParameterError
from .bifurcation import plot_bifurcation
from .gradients import plot_gradients
from .fixed_points import plot_fixed_points
from .jacobians import plot_jacobians
from .lyapunov import plot_lyapunov
from .partition import plot_partition, plot_templates
from .phase import plot_phase
from .stability import plot_convergence, plot_equilibria, plot_spectrum
from .states import plot_states
from .sweep import plot_sweep
from .training import history_of, plot_implicit_training, plot_training

#: ``attrs["result"]`` → the function that draws it.
PICTURES = {
    "simulate": plot_states,
    "phase": plot_phase,
    "gradient_norms": plot_gradients,
    "gradients": plot_gradients,
    "lyapunov": plot_lyapunov,
    "jacobians": plot_jacobians,
    "equilibrium": plot_equilibria,
    "irnn_equilibrium": plot_equilibria,
    "fixed_points": plot_fixed_points,
    "continuation": plot_bifurcation,
    "bifurcation_curve": plot_bifurcation,
    "implicit_equilibrium": plot_equilibria,
    "spectrum": plot_spectrum,
    "convergence": plot_convergence,
    "partition": plot_partition,
    "templates": plot_templates,
    "train_model": plot_training,
    "train_implicit": plot_implicit_training,
    "sweep": plot_sweep,
}

#: For files without ``attrs["result"]``: (a variable or dimension it must hold, result name),
#: tried in order.
_BY_CONTENT = (
    ("done", "sweep"), ("template", "templates"), ("codes", "partition"), ("Y_test", "train_implicit"),
    ("loss", "train_model"), ("jac_norm", "gradient_norms"), ("lyapunov_running", "lyapunov"),
    ("jac", "jacobians"), ("error", "convergence"), ("param2", "bifurcation_curve"), ("param", "continuation"), ("kind", "fixed_points"),
    ("Y", "implicit_equilibrium"), ("h_eq", "equilibrium"), ("eig_real", "spectrum"), ("h", "simulate"),
)


def result_kind(ds) -> str:
    """The name of the call that made ``ds``: ``attrs["result"]``, else read from its contents."""
    result = ds.attrs.get("result")
    if result in PICTURES:
        return result
    if "model" in getattr(ds, "dims", {}) and "h" in ds:
        return "gradients" if "jac_norm" in ds else "phase"
    for key, name in _BY_CONTENT:
        if key in ds.variables or key in ds.dims:
            return name
    raise ParameterError("ds", "not a dynlab result: no 'result' attribute and no variable dynlab draws")


def draw(result, ax=None, **options):
    """The picture of a dynlab result, as a matplotlib Figure.

    Parameters
    ----------
    result : the return value of a public call — an ``xarray.Dataset`` (``simulate``,
        ``gradient_norms``, ``lyapunov``, ``jacobians``, ``equilibrium``, ``fixed_points``,
        ``spectrum``, ``convergence``, ``continuation``, ``bifurcation_curve``, ``partition``, ``templates``, ``sweep``,
        or a command's Dataset, also read back with ``dynlab.read_dataset``), a ``TrainResult``
        (``train_model``) or the (model, history) pair of ``train_implicit``
    ax : matplotlib Axes, or a sequence of Axes for every panel, optional
        One Axes receives the picture's main panel; by default a new Figure is made.
    options : passed to the drawing function (e.g. ``batch=1``)

    Returns
    -------
    matplotlib.figure.Figure (``dynlab.plot.save_figure(fig, "out.png")`` writes it).

    Example
    -------
    >>> fig = dl.plot.draw(dl.gradient_norms(m, x))
    """
    ds = history_of(result)
    if not hasattr(ds, "data_vars"):
        raise ParameterError("result", f"draw takes a dynlab result (a Dataset or a training result), "
                                       f"got {type(result).__name__}")
    return PICTURES[result_kind(ds)](ds, ax=ax, **options)

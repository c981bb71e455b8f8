"""``dynlab.plot.draw`` on the direct result of every public call, and the data convention.

Every public call's result must (a) name itself in ``attrs["result"]``, (b) give every
dimension a coordinate (``time`` 1-based), and (c) be drawable as it is returned, by
``draw`` and by its own ``plot_*`` function, from memory and from its NetCDF file alike.  The
pictures themselves are checked by looking at them (``dynlab figures``); here the checks are
structural: a Figure comes back, with the panels the picture promises and labelled axes.
"""
from __future__ import annotations

import numpy as np
import pytest

import dynlab as dl
from dynlab.errors import ParameterError

T = 40


def _irnn(D=3):
    return dl.make_model("irnn", hidden=D, inputs=1, K=5, eta=0.5, seed=0)


def _x(B=None, steps=T, inputs=1):
    return dl.tasks.random_walk(steps=steps, inputs=inputs, variance=1.0, batch=B, seed=0)


def _relu(D=4, d=1):
    return dl.make_model("rnn", D, d, activation="relu", seed=0)


def _train():
    task = dl.make_task("adding", 20)
    return dl.train_model(dl.make_model("irnn", 6, 2, K=2, seed=0), task, iterations=3, record_every=1)


def _gru_fixed_points():
    m = dl.make_model("gru", 4, 3, weight_scale=3.0, seed=0)
    H = dl.simulate(m, dl.tasks.flipflop(30, 4, seed=0)[0])["h"].values
    return dl.fixed_points(m, np.zeros(3), n_starts=16, trajectories=H)


def _fold_curve():
    m = dl.CTRNN([[8.0]], [[0.7]], [0.0], activation="sigmoid")
    return dl.bifurcation_curve(m, dl.continuation(m, "b", -8, 0), 0, "x", -1, 1)


# name → (the call, the plot_* function that draws it, the expected attrs["result"])
CALLS = {
    "simulate": (lambda: dl.simulate(_irnn(), _x()), "plot_states", "simulate"),
    "simulate-batched": (lambda: dl.simulate(_irnn(), _x(B=3)), "plot_states", "simulate"),
    "gradient_norms": (lambda: dl.gradient_norms(_irnn(), _x()), "plot_gradients", "gradient_norms"),
    "lyapunov": (lambda: dl.lyapunov(_irnn(), _x(), k=2), "plot_lyapunov", "lyapunov"),
    "jacobians": (lambda: dl.jacobians(_irnn(), _x()), "plot_jacobians", "jacobians"),
    "equilibrium": (lambda: dl.equilibrium(_irnn(), _x()[:8]), "plot_equilibria", "equilibrium"),
    "equilibrium-one": (lambda: dl.equilibrium(_irnn(), _x()[0]), "plot_equilibria", "equilibrium"),
    "irnn_equilibrium": (lambda: dl.irnn_equilibrium(_irnn(), _x()[:8]), "plot_equilibria", "irnn_equilibrium"),
    "fixed_points": (lambda: dl.fixed_points(dl.make_model("rnn", 2, 1, weight_scale=2.0, seed=1), _x()[0]),
                     "plot_fixed_points", "fixed_points"),
    "fixed_points-trajectories": (lambda: _gru_fixed_points(), "plot_fixed_points", "fixed_points"),
    "continuation": (lambda: dl.continuation(dl.make_model("ctrnn", 1, 1, weight_scale=3.0, seed=0), "b", -4, 4,
                                             x=np.zeros(1)), "plot_bifurcation", "continuation"),
    "continuation-hopf": (lambda: dl.continuation(dl.CTRNN([[0.7, -1.3], [1.3, 0.7]], [[0.0], [0.0]], [0.0, 0.0]),
                                                  "alpha", 0.2, 1.2), "plot_bifurcation", "continuation"),
    "bifurcation_curve": (lambda: _fold_curve(), "plot_bifurcation", "bifurcation_curve"),
    "implicit_equilibrium": (lambda: dl.implicit_equilibrium(dl.make_model("implicit", 3, 2, seed=0),
                                                             np.random.default_rng(0).standard_normal((6, 2))),
                             "plot_equilibria", "implicit_equilibrium"),
    "spectrum": (lambda: dl.spectrum(_irnn(), _x(B=2)), "plot_spectrum", "spectrum"),
    "convergence": (lambda: dl.convergence(_irnn(), _x()[:4], K_max=12), "plot_convergence", "convergence"),
    "partition": (lambda: dl.partition(_relu(), _x(B=3)), "plot_partition", "partition"),
    "templates": (lambda: dl.templates(_relu(), _x(B=2), np.eye(3, 4)), "plot_templates", "templates"),
    "train_model": (_train, "plot_training", "train_model"),
    "train_implicit": (lambda: dl.train_implicit("xor", iterations=20), "plot_implicit_training", "train_implicit"),
    "sweep-1d": (lambda: dl.sweep("gradient_norms", {"K": [1, 2, 3]}, fixed={"hidden": 3, "steps": 20}),
                 "plot_sweep", "sweep"),
    "sweep-2d": (lambda: dl.sweep("gradient_norms", {"K": [1, 2], "eta": [0.1, 0.5, 1.0]},
                                  fixed={"hidden": 3, "steps": 20}), "plot_sweep", "sweep"),
    "sweep-3d-extra-dim": (lambda: dl.sweep("lyapunov", {"K": [1, 2], "eta": [0.5, 1.0], "seed": [0, 1]},
                                            fixed={"hidden": 3, "steps": 20}), "plot_sweep", "sweep"),
}


def _dataset(result):
    if hasattr(result, "history"):
        return result.history
    if isinstance(result, tuple):
        return result[1]
    return result


@pytest.fixture(scope="module", params=list(CALLS))
def case(request):
    call, plot_name, expected = CALLS[request.param]
    return request.param, call(), plot_name, expected


def _drawn_axes(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>" and ax.has_data()]


def test_draw_takes_every_public_result_as_returned(case):
    from matplotlib.figure import Figure

    name, result, plot_name, expected = case
    fig = dl.plot.draw(result)
    assert isinstance(fig, Figure)
    drawn = _drawn_axes(fig)
    assert drawn, f"{name}: nothing drawn"
    for ax in drawn:
        assert ax.get_xlabel() or ax.get_title(), f"{name}: an unlabelled panel"
    # the picture is the one its own plot_* function draws
    assert dl.plot.result_kind(_dataset(result)) == expected
    assert dl.plot.PICTURES[expected] is getattr(dl.plot, plot_name)
    own = getattr(dl.plot, plot_name)(result)
    assert len(_drawn_axes(own)) == len(drawn)


def test_every_result_names_itself_and_labels_every_dimension(case):
    name, result, _, expected = case
    ds = _dataset(result)
    assert ds.attrs["result"] == expected
    missing = [d for d in ds.dims if d not in ds.coords]
    assert not missing, f"{name}: dimensions without a coordinate: {missing}"
    if "time" in ds.dims:
        assert ds["time"].values[0] == 1 and np.all(np.diff(ds["time"].values) == 1)
    for var in ds.data_vars.values():
        assert "long_name" in var.attrs and "units" in var.attrs, f"{name}: {var.name} unlabelled"


def test_a_result_read_back_from_its_file_draws_the_same_picture(case, tmp_path):
    name, result, _, expected = case
    ds = _dataset(result)
    path = tmp_path / "r.nc"
    dl.write_dataset(ds, path)
    back = dl.read_dataset(path)
    assert back.attrs["result"] == expected
    assert len(_drawn_axes(dl.plot.draw(back))) == len(_drawn_axes(dl.plot.draw(result)))


def test_one_axes_gets_the_main_panel_and_a_wrong_count_is_refused():
    from dynlab.plot.style import new_figure

    g = dl.gradient_norms(_irnn(), _x())
    fig, (ax,) = new_figure(1)
    assert dl.plot.draw(g, ax=ax) is fig and ax.get_yscale() == "log"
    sp = dl.spectrum(_irnn(), _x())
    fig, axes = new_figure(3)
    assert dl.plot.draw(sp, ax=axes) is fig and all(a.has_data() for a in axes)
    with pytest.raises(ParameterError) as e:
        dl.plot.draw(sp, ax=axes[:2])
    assert e.value.param == "ax"


def test_files_written_before_results_named_themselves_are_recognised():
    """No ``result`` attr (an older file): the picture is read from the variables; a Dataset
    that is no dynlab result is refused naming it."""
    import xarray as xr

    for call, expected in ((lambda: dl.gradient_norms(_irnn(), _x()), "gradient_norms"),
                           (lambda: dl.spectrum(_irnn(), _x()), "spectrum"),
                           (lambda: dl.partition(_relu(), _x()), "partition"),
                           (lambda: dl.simulate(_irnn(), _x()), "simulate")):
        ds = call()
        del ds.attrs["result"]
        assert dl.plot.result_kind(ds) == expected
    with pytest.raises(ParameterError):
        dl.plot.draw(xr.Dataset({"a": ("q", np.zeros(3))}))
    with pytest.raises(ParameterError) as e:
        dl.plot.draw(np.zeros(3))
    assert e.value.param == "result"


def test_a_picture_that_needs_what_the_result_lacks_says_so():
    g = dl.gradient_norms(_irnn(), _x())
    with pytest.raises(ParameterError, match="codes"):
        dl.plot.plot_partition(g)
    with pytest.raises(ParameterError, match="eig"):
        dl.plot.plot_spectrum(g)


def test_plot_phase_draws_any_result_with_states():
    """The issue's own examples: ``plot_phase(dl.simulate(m, x))`` etc. raised KeyError."""
    m2 = dl.make_model("irnn", hidden=2, inputs=1, K=5, seed=0)
    for ds in (dl.simulate(m2, _x()), dl.simulate(_irnn(4), _x(B=2)), dl.gradient_norms(m2, _x()),
               dl.lyapunov(m2, _x())):
        fig = dl.plot.plot_phase(ds)
        assert len(_drawn_axes(fig)) == 1
    projected = dl.plot.plot_phase(dl.simulate(_irnn(4), _x()))
    assert _drawn_axes(projected)[0].get_xlabel().startswith("PC1 (")


def test_plot_gradients_and_equilibria_draw_direct_results():
    """``plot_gradients(dl.gradient_norms(m, x))`` and ``plot_equilibria(dl.equilibrium(m, x))``
    raised KeyError ('model', 'time') before; the legend names the model and its ratio."""
    g = dl.gradient_norms(_irnn(), _x())
    fig = dl.plot.plot_gradients(g)
    legend = _drawn_axes(fig)[0].get_legend().get_texts()[0].get_text()
    assert legend.startswith("iRNN (K=5)") and f"{float(g['ratio']):.3g}" in legend
    eq = dl.equilibrium(_irnn(), _x()[:8])
    fig = dl.plot.plot_equilibria(eq)
    np.testing.assert_array_equal(_drawn_axes(fig)[0].lines[0].get_ydata(), eq["max_real"].values)


def test_removed_command_functions_say_where_they_are_and_plot_reaches_no_higher():
    """The command functions' old names under dynlab.plot are gone (deprecated a release ago): the
    error names dynlab.commands, and asking for them imports nothing above dynlab.plot."""
    import sys

    before = set(sys.modules)
    with pytest.raises(AttributeError, match=r"use dynlab\.commands\.phase_dataset"):
        dl.plot.phase_dataset  # noqa: B018
    assert not {m for m in set(sys.modules) - before if m.startswith("dynlab.")}
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        dl.plot.no_such_name  # noqa: B018


def test_the_old_command_layer_path_warns_and_resolves():
    from dynlab.commands import phase_dataset, stability

    with pytest.warns(DeprecationWarning, match="dynlab.commands.phase_dataset"):
        from dynlab.runs import phase_dataset as old
    assert old is phase_dataset
    with pytest.warns(DeprecationWarning):
        from dynlab.runs import stability as old_module
    assert old_module is stability

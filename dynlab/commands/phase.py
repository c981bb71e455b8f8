"""``dynlab phase``: simulate one or more models on one input and collect a phase portrait.

``phase_dataset(spec)`` computes every number into one Dataset (``dynlab.plot.plot_phase``
draws it, from the NetCDF file too); ``phase_summary(ds)`` is the printed text.  States with
D > 2 are drawn in the plane of the top two principal components of each model's trajectory
(stored in the Dataset as ``pc_*``).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import DivergenceError, ParameterError
from ._entries import add_entries, entry_coords

#: Number of input values at which the equilibrium curve is solved when d = 1.
CURVE_POINTS = 400
#: Input variance when none is given: the iRNN paper's Fig. 2 drives its random walk with variance 10;
#: noise (the default input) keeps unit variance, where W x has unit scale and the cells do not saturate.
DEFAULT_VARIANCE = {"random-walk": 10.0, "noise": 1.0}
#: Hidden size when neither the spec nor a weights file gives one: the 2-D cells of the paper's Fig. 2.
PHASE_HIDDEN = 2
#: Number of principal components kept for D > 2.
N_PC = 2
#: Grid points per axis of the stored vector field (streamlines and nullcline contours).
FIELD_POINTS = 121
#: Models whose phase portrait can carry a vector field (the iRNN draws its equilibrium curve).
FIELD_MODELS = ("ctrnn", "rnn", "fastrnn", "antisymmetric", "rin")


def compared_models(spec, primary):
    """Entry names and models: the primary model, then each ``spec.compare`` model (built with
    the primary's sizes, seed and activation); ParameterError on ``compare`` for a repeat."""
    from ..models import get_model_class
    from ..spec import build_model

    names = [primary.name]
    for name in spec.compare:
        canonical = get_model_class(name, "compare").name
        if canonical in names:
            what = "is the primary model" if canonical == primary.name else "is listed twice"
            raise ParameterError("compare", f"{canonical!r} {what}; each model appears once")
        names.append(canonical)
    return names, [primary] + [build_model(spec, name, like=primary) for name in names[1:]]


def phase_dataset(spec, field=None):
    """Simulate the spec's model (and ``spec.compare`` models) on one input and collect a phase portrait.

    Every model runs on the same input sequence x_1..x_T from h_0 = 0.  The compared models
    share the seed, sizes and activation of the primary one and keep their own defaults.

    Parameters
    ----------
    spec : dynlab.spec.RunSpec
        ``spec.batch`` must be None (one sequence); D = hidden must be ≥ 2 (unset: 2, the
        paper's Fig. 2).  An unset ``variance`` is 10 for the random walk (Fig. 2), 1 for noise.
    field : bool or None
        Also the primary model's vector field, nullclines and equilibria (``add_field``);
        None means: on for a 2-D ctrnn with a constant input, off otherwise.

    Returns
    -------
    xarray.Dataset (``attrs["result"] = "phase"``) with
      ``h`` (model, time, unit)  the states, one entry per model along ``model`` (names); for
      an LSTM or a stack the output h (``model.output_slice``: an LSTM's h, not c; a stack's
      top layer), so every entry has D units;
      ``x`` (time, unit_in), ``h0`` (unit), ``diverged_at`` (model): 0, or the first
      non-finite step (states from there on are NaN);
      every entry's parameters and settings under the prefix ``<name>__`` (``_entries``);
      for the iRNN entry (at most one, named by attr ``irnn_entry``): ``s`` (time, unit) =
      h_m + sign·h_{m-1}, ``eq_residual`` (time) = ‖α s_m − φ(U s_m + W x_m + b)‖∞, and the
      equilibrium curve ``s_eq`` (x_grid, unit) at inputs ``x_eq`` (x_grid, unit_in) with its
      ``s_eq_residual`` and ``s_eq_converged`` (x_grid): a grid of 400 values over
      [min x, max x] for d = 1 (``x_grid`` is then x itself), the inputs x_m along the
      sequence for d > 1 (``x_grid`` is then the time step);
      for D > 2: ``pc_mean`` (model, unit), ``pc_components`` (model, pc, unit) and
      ``pc_explained`` (model, pc) of each model's trajectory; attr ``projection``.

    Raises
    ------
    ParameterError naming the setting (``compare`` for unknown or repeated models);
    DivergenceError when a state becomes non-finite, with the full Dataset (NaN past the
    failure) in ``err.partial``.

    Example
    -------
    >>> ds = phase_dataset(RunSpec(model="irnn", K=5, variance=10.0, compare=("rnn", "fastrnn")))
    """
    import xarray as xr

    from .._dataset import base_attrs, finish
    from ..analysis.equilibria import equilibrium_curve
    from ..analysis.projection import pca
    from ..backends import resolve_backend
    from ..simulation import simulate
    from ..spec import VARIANCE_INPUTS, build_input, build_model, input_attrs, input_kind

    if spec.variance is None and input_kind(spec) in VARIANCE_INPUTS:
        spec = dataclasses.replace(spec, variance=DEFAULT_VARIANCE[input_kind(spec)])
    if spec.hidden is None and spec.weights is None:
        spec = dataclasses.replace(spec, hidden=PHASE_HIDDEN)
    if spec.batch is not None:
        raise ParameterError("batch", "a phase portrait draws one sequence; leave batch unset")
    backend = resolve_backend(spec.backend)
    primary = build_model(spec)
    if primary.hidden < 2:
        raise ParameterError("hidden", f"a phase portrait needs at least 2 hidden units, got {primary.hidden}")
    kind = input_kind(spec)
    if field:  # refused before anything is simulated
        _check_field(primary, kind)
    names, models = compared_models(spec, primary)
    x = build_input(spec, primary.inputs)
    T, D = x.shape[0], primary.hidden

    H = np.full((len(models), T, D), np.nan)
    diverged = np.zeros(len(models), dtype=np.int64)
    for i, model in enumerate(models):
        try:
            H[i] = simulate(model, x, backend=backend, command=spec.command)["h"].values[:, model.output_slice]
        except DivergenceError as err:
            H[i, :err.step - 1] = err.partial["h"].values[:, model.output_slice]
            diverged[i] = err.step

    data = {
        "h": xr.Variable(("model", "time", "unit"), H, {"long_name": "hidden state h_m", "units": "1"}),
        "x": xr.Variable(("time", "unit_in"), x, {"long_name": "input x_m", "units": "1"}),
        "h0": xr.Variable(("unit",), np.zeros(D), {"long_name": "initial state h_0", "units": "1"}),
        "diverged_at": xr.Variable(("model",), diverged,
                                   {"long_name": "first step with a non-finite state (0: none)", "units": "step"}),
    }
    coords = entry_coords(names, models, T, "time step m")
    attrs = base_attrs(backend, spec.command)
    add_entries(data, attrs, names, models)
    attrs.update(input_attrs(spec, T))
    attrs.update({"irnn_entry": "none", "projection": "none"})

    irnn_at = [i for i, m in enumerate(models) if m.form().kind == "irnn"]
    if irnn_at:
        i = irnn_at[0]
        model = models[i]
        h = H[i]
        s = h + model.sign * np.vstack([np.zeros((1, D)), h[:-1]])
        with np.errstate(invalid="ignore"):
            residual = np.max(np.abs(model.equilibrium_residual(s, x)), axis=1)
        if model.inputs == 1:
            grid = np.linspace(x.min(), x.max(), CURVE_POINTS)
            xs = grid[:, None]
            grid_attrs = {"long_name": "input x", "units": "1"}
        else:
            grid, xs = np.arange(1, T + 1), x
            grid_attrs = {"long_name": "time step of the input x_m on the path", "units": "step"}
        s_eq, s_res, s_conv = equilibrium_curve(model, xs)
        coords["x_grid"] = ("x_grid", grid, grid_attrs)
        sign = "+" if model.sign > 0 else "−"
        data.update({
            "s": xr.Variable(("time", "unit"), s, {"long_name": f"s_m = h_m {sign} h_(m-1)", "units": "1"}),
            "eq_residual": xr.Variable(("time",), residual,
                                       {"long_name": "max-abs residual of α s_m − φ(U s_m + W x_m + b)",
                                        "units": "1"}),
            "s_eq": xr.Variable(("x_grid", "unit"), s_eq,
                                {"long_name": "equilibrium α s = φ(U s + W x + b)", "units": "1"}),
            "x_eq": xr.Variable(("x_grid", "unit_in"), xs, {"long_name": "input x of the equilibrium", "units": "1"}),
            "s_eq_residual": xr.Variable(("x_grid",), s_res,
                                         {"long_name": "max-abs residual of the equilibrium solve", "units": "1"}),
            "s_eq_converged": xr.Variable(("x_grid",), s_conv.astype(np.int8),
                                          {"long_name": "equilibrium solve converged (1) or not (0)", "units": "1"}),
        })
        attrs["irnn_entry"] = names[i]

    if D > N_PC:
        means, comps, explained = zip(*(pca(H[i], N_PC) for i in range(len(models))))
        coords["pc"] = ("pc", np.arange(1, N_PC + 1), {"long_name": "principal component", "units": "1"})
        data.update({
            "pc_mean": xr.Variable(("model", "unit"), np.array(means),
                                   {"long_name": "mean of the trajectory h", "units": "1"}),
            "pc_components": xr.Variable(("model", "pc", "unit"), np.array(comps),
                                         {"long_name": "principal axes of the trajectory h", "units": "1"}),
            "pc_explained": xr.Variable(("model", "pc"), np.array(explained),
                                        {"long_name": "fraction of the trajectory's variance", "units": "1"}),
        })
        attrs["projection"] = f"projected on top-{N_PC} PCs of each model's trajectory h"

    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    if field is None:
        field = primary.name == "ctrnn" and D == 2 and kind == "constant"
    if field:
        ds = add_field(ds, primary, x[0], H[0])
    ds = finish(ds, "phase")
    if diverged.any():  # everything computed is in the Dataset; report the first failure
        i = int(np.flatnonzero(diverged)[0])
        raise DivergenceError(step=int(diverged[i]), batch=0, model=names[i], partial=ds)
    return ds


def _check_field(model, kind: str) -> None:
    """ParameterError naming ``field`` unless ``model`` and the input ``kind`` can have a vector field."""
    if model.name not in FIELD_MODELS:
        raise ParameterError("field", f"a vector field is drawn for {', '.join(FIELD_MODELS)}; the iRNN's "
                                      f"portrait shows its equilibrium curve instead")
    if model.hidden != 2:
        raise ParameterError("field", f"a vector field needs a 2-D state, got hidden={model.hidden}")
    if kind != "constant":
        raise ParameterError("field", "the vector field of a driven system changes with every input; "
                                      "use --input constant")


def add_field(ds, model, x, h):
    """Add the vector field, nullclines and equilibria of a 2-D model at a constant input x.

    The field is F of the form's fixed-point map (``dynlab.models.fixed_point``): the CTRNN's dg/dt, or for a discrete
    cell the displacement step(h) − h (its zeros are the map's fixed points).  The nullclines
    are the zero sets F_1 = 0 and F_2 = 0, drawn as contours of F on the grid, so every branch
    shows; the equilibria come from ``dynlab.fixed_points`` (multi-start, certified) with their
    stability.  The grid covers the trajectory h and the equilibria, padded by 25 %.

    Adds ``field_F1``, ``field_F2`` (field_x2, field_x1) on coords ``field_x1``, ``field_x2``,
    and ``fp_h`` (fixed_point, unit), ``fp_stability``, ``fp_certified`` (fixed_point); attr
    ``field`` describing F.
    """
    import xarray as xr

    from ..analysis.equilibria import STABILITY_ATTRS, fixed_point_map
    from ..analysis.fixed_points import fixed_points

    _check_field(model, "constant")
    system = fixed_point_map(model)
    h = h[np.all(np.isfinite(h), axis=1)]
    scale = max(1.0, float(np.abs(h).max()) if h.size else 1.0)
    fp = fixed_points(model, x, n_starts=64, spread=scale, seed=0)
    pts = np.vstack([h, fp["h_eq"].values, np.zeros((1, 2))])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = 0.25 * np.maximum(hi - lo, 0.2)
    g1 = np.linspace(lo[0] - pad[0], hi[0] + pad[0], FIELD_POINTS)
    g2 = np.linspace(lo[1] - pad[1], hi[1] + pad[1], FIELD_POINTS)
    Y = np.stack(np.meshgrid(g1, g2), axis=-1).reshape(-1, 2)
    F = system.F(Y, np.broadcast_to(system.c(np.asarray(x)[None]), Y.shape)).reshape(FIELD_POINTS, FIELD_POINTS, 2)
    what = system.field_label
    ds = ds.assign_coords(field_x1=("field_x1", g1, {"long_name": "h₁", "units": "1"}),
                          field_x2=("field_x2", g2, {"long_name": "h₂", "units": "1"}))
    ds["field_F1"] = xr.Variable(("field_x2", "field_x1"), F[..., 0], {"long_name": f"{what}, component 1", "units": "1"})
    ds["field_F2"] = xr.Variable(("field_x2", "field_x1"), F[..., 1], {"long_name": f"{what}, component 2", "units": "1"})
    roots = fp["kind"].values == 1
    ds["fp_h"] = xr.Variable(("fixed_point", "unit"), fp["h_eq"].values[roots], {"long_name": "equilibrium", "units": "1"})
    ds["fp_stability"] = xr.Variable(("fixed_point",), fp["stability"].values[roots], dict(STABILITY_ATTRS))
    ds["fp_certified"] = xr.Variable(("fixed_point",), fp["certified"].values[roots],
                                     {"long_name": "certified root (Newton–Kantorovich)", "units": "1"})
    ds.attrs["field"] = f"{what} at the constant input x = {np.array2string(np.asarray(x), precision=4)}"
    return ds


def phase_summary(ds) -> str:
    """A short text summary of a ``phase_dataset`` Dataset (sizes; iRNN equilibrium residuals)."""
    from ..plot.labels import entry_title

    names = [str(n) for n in ds["model"].values]
    T, D, d = ds.sizes["time"], ds.sizes["unit"], ds.sizes["unit_in"]
    lines = [f"phase portrait of {', '.join(entry_title(ds, n) for n in names)}: T={T} steps, D={D} hidden "
             f"units, d={d} input(s), {ds.attrs.get('input', 'input')} input, backend {ds.attrs.get('backend')}"]
    if "projection" in ds.attrs and ds.attrs["projection"] != "none":
        frac = ds["pc_explained"].sum("pc").values
        lines.append(ds.attrs["projection"] + "; variance kept: "
                     + ", ".join(f"{n} {100 * f:.0f}%" for n, f in zip(names, frac)))
    entry = ds.attrs.get("irnn_entry", "none")
    if entry != "none":
        r = ds["eq_residual"].values
        r = r[np.isfinite(r)]
        lines.append(f"iRNN distance of {ds['s'].attrs['long_name']} from the equilibrium (max-abs residual of "
                     f"α s − φ(U s + W x + b)): median {np.median(r):.3g}, max {np.max(r):.3g}")
        bad = int((ds["s_eq_converged"].values == 0).sum())
        if bad:
            lines.append(f"warning: the equilibrium curve did not converge at {bad} of "
                         f"{ds.sizes['x_grid']} inputs (max residual {float(ds['s_eq_residual'].max()):.3g})")
    if "fp_h" in ds:
        stab = ds["fp_stability"].values
        lines.append(f"vector field {ds.attrs['field']}: {ds.sizes['fixed_point']} equilibria "
                     f"({int((stab == 1).sum())} stable, {int((stab == -1).sum())} unstable): "
                     + "; ".join(np.array2string(h, precision=4) for h in ds["fp_h"].values))
    for n, at in zip(names, ds["diverged_at"].values):
        if at:
            lines.append(f"{n}: state became non-finite at step m={int(at)}")
    return "\n".join(lines)

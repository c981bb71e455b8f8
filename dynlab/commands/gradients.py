"""``dynlab gradients``: ‖∂h_T/∂h_t‖₂ of several models on one input, as one Dataset.

``gradients_dataset(spec)`` computes every number (one entry per model along ``model``: the
primary model once per K value, then each compared model); ``dynlab.plot.plot_gradients``
draws it; ``gradients_summary(ds)`` is the printed table.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import DivergenceError, ParameterError
from ._entries import add_entries, entry_coords


def _entry_name(model, several_K: bool) -> str:
    return f"irnn-K{model.K}" if (model.name == "irnn" and several_K) else model.name


def gradients_dataset(spec):
    """Gradient norms (and Lyapunov exponents) of each model of a ``GradientSpec`` on one input.

    Every model runs on the same input x_1..x_T from h_0 = 0; ``dynlab.gradient_norms`` and
    ``dynlab.lyapunov`` (top exponent, or the whole spectrum with ``spec.lyapunov``).

    Parameters
    ----------
    spec : dynlab.spec.GradientSpec

    Returns
    -------
    xarray.Dataset (``attrs["result"] = "gradients"``) with, along ``model`` (entry names:
    ``irnn-K5`` … when several K, else the registry name): ``jac_norm``, ``log_jac_norm``,
    ``step_norm`` (model, time; not with ``spec.step_norms`` False); ``ratio`` (model);
    ``lyapunov`` (model, exponent) per step, in decreasing order (with ``spec.lyapunov`` the
    whole spectrum of each entry's state: an LSTM's [h; c] has 2D exponents, a stack one per
    state entry; NaN past an entry's own state size); ``h`` (model, time, unit) the output h
    (``model.output_slice``: an LSTM's h, a stack's top layer; the norms are on the whole state);
    ``diverged_at`` (model); ``x`` (time, unit_in); every entry's parameters and settings under
    ``<entry>__`` (as ``phase``).  Raises ParameterError (``steps`` for T < 2, ``K`` for K values
    on a non-iRNN model, ``compare`` for repeated models) and DivergenceError with the full
    Dataset (NaN for the diverged entry) in ``err.partial``.

    Example
    -------
    >>> ds = gradients_dataset(GradientSpec(RunSpec(model="irnn"), K_values=(1, 5), lyapunov=True))
    """
    import xarray as xr

    from .._dataset import base_attrs, finish
    from ..analysis.gradients import gradient_norms
    from ..analysis.lyapunov import lyapunov
    from ..backends import get_backend
    from ..models import get_model_class
    from ..spec import build_input, build_model, input_attrs

    run = spec.run
    if run.batch is not None:
        raise ParameterError("batch", "gradients compares models on one sequence; leave batch unset")
    if run.steps < 2:
        raise ParameterError("steps", f"needs at least 2 steps for ∂h_T/∂h_(T-1), got {run.steps}")
    be = get_backend(run.backend)    # resolved once: the object goes to every analysis below
    Ks = tuple(spec.K_values) or (None,)
    from .._resources import check_gradients

    for K in Ks:  # the work, before any model is drawn (a D = 30000 model alone takes a minute)
        like = sized_like(run, K)
        if like is not None:
            check_gradients(like, 1, run.steps, lyapunov=False)
    primaries = [build_model(dataclasses.replace(run, K=K)) for K in Ks]
    if len(Ks) > 1 and primaries[0].name != "irnn":
        raise ParameterError("K", f"lists several values, but K is an irnn setting (model {primaries[0].name!r})")
    several = len(Ks) > 1
    names = [_entry_name(m, several) for m in primaries]
    models = list(primaries)
    for name in run.compare:
        canonical = get_model_class(name, "compare").name
        if canonical in names or (canonical == primaries[0].name):
            raise ParameterError("compare", f"{canonical!r} is already an entry; each model appears once")
        names.append(canonical)
        models.append(build_model(run, canonical, like=primaries[0]))
    x = build_input(run, primaries[0].inputs)
    T, D = x.shape[0], primaries[0].hidden
    k = max(m.state_size for m in models) if spec.lyapunov else 1

    n = len(models)
    out = {v: np.full((n, T), np.nan)
           for v in ("jac_norm", "log_jac_norm") + (("step_norm",) if spec.step_norms else ())}
    ratio = np.full(n, np.nan)
    lam = np.full((n, k), np.nan)
    H = np.full((n, T, D), np.nan)
    diverged = np.zeros(n, dtype=np.int64)
    for i, model in enumerate(models):
        try:
            g = gradient_norms(model, x, backend=be, step_norms=spec.step_norms, command=run.command)
        except DivergenceError as err:
            H[i, :err.step - 1] = err.partial["h"].values[:, model.output_slice]
            diverged[i] = err.step
            continue
        for v in out:
            out[v][i] = g[v].values
        ratio[i] = float(g["ratio"])
        H[i] = g["h"].values[:, model.output_slice]
        ki = min(k, model.state_size)
        lam[i, :ki] = lyapunov(model, x, k=ki, backend=be)["lyapunov"].values

    data = {
        "jac_norm": xr.Variable(("model", "time"), out["jac_norm"], {"long_name": "‖∂h_T/∂h_t‖₂", "units": "1"}),
        "log_jac_norm": xr.Variable(("model", "time"), out["log_jac_norm"],
                                    {"long_name": "ln ‖∂h_T/∂h_t‖₂", "units": "1",
                                     "note": "−inf where ∂h_T/∂h_t = 0 exactly (ln 0; e.g. weight scale 0)"}),
        **({"step_norm": xr.Variable(("model", "time"), out["step_norm"],
                                     {"long_name": "‖∂h_t/∂h_(t-1)‖₂", "units": "1"})} if spec.step_norms else {}),
        "ratio": xr.Variable(("model",), ratio, {"long_name": "‖∂h_T/∂h_1‖₂ / ‖∂h_T/∂h_(T-1)‖₂", "units": "1"}),
        "lyapunov": xr.Variable(("model", "exponent"), lam,
                                {"long_name": "finite-time Lyapunov exponent λ_i", "units": "1/step",
                                 "note": "−inf where the product of step Jacobians is singular along that "
                                         "direction (ln 0; e.g. weight scale 0)"}),
        "h": xr.Variable(("model", "time", "unit"), H, {"long_name": "hidden state h_t", "units": "1"}),
        "x": xr.Variable(("time", "unit_in"), x, {"long_name": "input x_t", "units": "1"}),
        "h0": xr.Variable(("unit",), np.zeros(D), {"long_name": "initial state h_0", "units": "1"}),
        "diverged_at": xr.Variable(("model",), diverged,
                                   {"long_name": "first step with a non-finite state (0: none)", "units": "step"}),
    }
    coords = entry_coords(names, models, T)
    coords["exponent"] = ("exponent", np.arange(1, k + 1), {"long_name": "exponent index i", "units": "1"})
    attrs = base_attrs(be.name, run.command)
    add_entries(data, attrs, names, models)
    attrs.update(input_attrs(run, T))
    attrs.update({"lyapunov_spectrum": int(spec.lyapunov), "step_norms": int(spec.step_norms)})
    ds = finish(xr.Dataset(data, coords=coords, attrs=attrs), "gradients")
    if diverged.any():
        i = int(np.flatnonzero(diverged)[0])
        raise DivergenceError(step=int(diverged[i]), batch=0, model=names[i], partial=ds)
    return ds


def gradients_summary(ds) -> str:
    """The printed table: per model the ratio, ‖∂h_T/∂h_1‖₂ (its log when it under/overflows)
    and the top Lyapunov exponent."""
    from ..plot.labels import entry_title

    names = [str(n) for n in ds["model"].values]
    labels = [entry_title(ds, n) for n in names]
    w = max(12, max(map(len, labels)) + 2)
    lines = [f"gradient flow over T={ds.sizes['time']} steps, D={ds.sizes['unit']}, backend {ds.attrs.get('backend')}",
             f"{'model':<{w}}{'ratio':>12}{'‖∂h_T/∂h_1‖':>14}{'ln‖∂h_T/∂h_1‖':>16}{'top λ (1/step)':>16}"]
    for name, label in zip(names, labels):
        r = float(ds["ratio"].sel(model=name))
        j1 = float(ds["jac_norm"].sel(model=name)[0])
        l1 = float(ds["log_jac_norm"].sel(model=name)[0])
        lam = float(ds["lyapunov"].sel(model=name)[0])
        lines.append(f"{label:<{w}}{r:>12.4g}{j1:>14.4g}{l1:>16.6g}{lam:>16.5g}")
    return "\n".join(lines)


def sized_like(spec, K=None):
    """A stand-in with the sizes a ``RunSpec`` will build (name, state_size, inputs, and the
    cost per step ``step_cost()``), so the work of a run is
    estimated before its model is drawn (None when a weights file sets them)."""
    import types

    from ..models import gates_of
    from ..models.forms import StepCost
    from ..spec import DEFAULT_HIDDEN, DEFAULT_INPUTS, DEFAULT_MODEL

    if spec.weights is not None:
        return None
    name = str(spec.model or DEFAULT_MODEL).lower()
    D = int(DEFAULT_HIDDEN if spec.hidden is None else spec.hidden)
    k = K if K is not None else spec.K
    cost = StepCost(gates_of(name, spec.given_settings()), int(k) if (name == "irnn" and k is not None) else 1)
    return types.SimpleNamespace(name=name, state_size=D, inputs=int(DEFAULT_INPUTS if spec.inputs is None
                                                                     else spec.inputs), step_cost=lambda: cost)

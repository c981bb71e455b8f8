"""The registry of sweep targets: analysis name → the summary variables of one point.

A target turns one point's settings into a few numbers (scalars, or short arrays along a
fixed extra dimension) that a sweep stores along its grid.  Adding a target is a few lines:

.. code-block:: python

    from dynlab.sweep import Target, Var, register_target, model_and_input

    def _convergence(run, opts, backend):             # run: model/input settings, opts: options
        model, x = model_and_input(run)                # the point's model and input sequence
        ds = dynlab.convergence(model, x[0], K=opts["K_max"])
        return {"rate": float(ds.rate), "bound_rate": float(ds.bound_rate)}

    register_target(Target(
        "convergence", _convergence,
        variables={"rate": Var("fitted linear rate"), "bound_rate": Var("contraction bound ρ")},
        options={"K_max": (50, int)},                  # name → (default, type); sweepable
    ))

``variables`` is a dict name → ``Var`` or a function settings → such a dict, when a shape
depends on a (fixed) option: name those options in ``shape_settings`` so a sweep refuses to
vary them, and give ``coords`` for the extra dimensions.  ``batched(points, backend)`` may
compute many points at once (a list of (run, opts) → a list of result dicts); a target
without it is computed point by point.  ``vectorised(table, backend)`` may compute a whole
region from its settings as columns (``grid.SettingsTable``) → a dict name → array (n,) + the
variable's extra dims, without a dict per point (``gradient_norms``: ``columns``); the driver
prefers it to ``batched``.  ``validate(model, x, opts)`` may reject a bad option
before any work (it runs on every axis value when the sweep starts).  A numerical failure of one point is recorded in its
variables (e.g. ``diverged_at``), never raised: the sweep goes on.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..errors import ParameterError

#: Run settings and their types (float settings accept ints): what ``model_and_input`` builds a
#: point's run from; the sweep spec (``grid``) validates a grid against them.
RUN_SETTINGS = {
    "model": str, "hidden": int, "inputs": int, "activation": str, "K": int, "eta": float, "alpha": float,
    "g0": str, "weight_scale": float, "seed": int, "steps": int, "input": str, "variance": float,
}


@dataclasses.dataclass(frozen=True)
class Var:
    """One summary variable: labels, dtype and extra dimensions ((name, size) pairs)."""

    long_name: str
    units: str = "1"
    dtype: str = "float64"
    dims: tuple = ()


@dataclasses.dataclass(frozen=True)
class Target:
    """A sweep target (module docstring).

    Parameters
    ----------
    name : str — the registry key (``dynlab sweep``'s ``analysis = "…"``)
    compute : (run: dict, opts: dict, backend: str) → dict name → value
    variables : dict name → Var, or settings → such a dict
    options : dict name → (default, type) — the target's own settings (None: not passed)
    description : str
    batched : (points: list of (run, opts), backend) → list of dicts, optional
    shape_settings : options that fix a variable's shape (may not be swept)
    coords : settings → {dim: (values, attrs)} for the extra dimensions, optional
    validate : (model, x, opts) → None, optional — raise ParameterError for a bad option or
        model before any work (run on every axis value; the analysis itself may only find
        out mid-sweep)
    vectorised : (table: SettingsTable, backend) → dict name → array, optional — a whole
        region at once from its settings as columns (the module docstring)
    """

    name: str
    compute: Callable
    variables: object
    options: dict = dataclasses.field(default_factory=dict)
    description: str = ""
    batched: Callable | None = None
    shape_settings: tuple = ()
    coords: Callable | None = None
    validate: Callable | None = None
    vectorised: Callable | None = None

    def variables_for(self, settings: dict) -> dict:
        return self.variables(settings) if callable(self.variables) else dict(self.variables)


#: name → Target.
TARGETS: dict[str, Target] = {}


def register_target(target: Target, *, replace: bool = False) -> Target:
    """Add a target to ``TARGETS`` (``replace=True`` to redefine an existing name)."""
    if not isinstance(target, Target):
        raise TypeError("register_target takes a dynlab.sweep.Target")
    if target.name in TARGETS and not replace:
        raise ValueError(f"sweep target {target.name!r} is already registered")
    TARGETS[target.name] = target
    return target


def get_target(name) -> Target:
    key = str(name).strip().lower().replace("-", "_")
    if key not in TARGETS:
        raise ParameterError("analysis", f"unknown analysis {name!r}; choose from {', '.join(sorted(TARGETS))}")
    return TARGETS[key]


def model_and_input(run: dict):
    """The model and input sequence (T, d) of a point's run settings (``dynlab.spec`` rules)."""
    from ..spec import RunSpec, build_input, build_model

    fields = {k: v for k, v in run.items() if k in RUN_SETTINGS}
    extra = tuple(sorted((k, v) for k, v in run.items() if k not in RUN_SETTINGS))
    spec = RunSpec(settings=extra, **fields)
    model = build_model(spec)
    return model, build_input(spec, model.inputs)


def _nan_result(variables: dict, diverged_at: int) -> dict:
    out = {}
    for name, var in variables.items():
        shape = tuple(n for _, n in var.dims)
        out[name] = np.full(shape, np.nan) if var.dtype.startswith("float") else np.zeros(shape, dtype=var.dtype)
    out["diverged_at"] = int(diverged_at)
    return out


_DIVERGED = Var("first step with a non-finite state (0: none)", "step", "int64")


# ============================================================================ simulate
_SIM_VARS = {
    "final_norm": Var("‖h_T‖₂ of the whole state (an LSTM's [h; c], a stack's layers; NaN when the run diverged)"),
    "mean_abs_h": Var("mean |h_t,i| over the finite steps and units"),
    "max_abs_h": Var("max |h_t,i| over the finite steps and units"),
    "diverged_at": _DIVERGED,
}


def _simulate(run, opts, backend):
    from ..simulation import simulate

    model, x = model_and_input(run)
    ds = simulate(model, x, backend=backend, on_divergence="flag")
    h = ds["h"].values
    at = int(ds["diverged_at"])
    finite = np.abs(h if at == 0 else h[:at - 1])
    top = float(finite.max()) if finite.size else np.nan
    # the mean of values near overflow (the steps just before a divergence) scaled by the max
    mean = float((finite / top).mean() * top) if finite.size and top > 0 else (0.0 if finite.size else np.nan)
    return {"final_norm": float(np.linalg.norm(h[-1])) if at == 0 else np.nan,
            "mean_abs_h": mean, "max_abs_h": top, "diverged_at": at}


# ============================================================================ gradient_norms
_GRAD_VARS = {
    "ratio": Var("‖∂h_T/∂h_1‖₂ / ‖∂h_T/∂h_(T-1)‖₂"),
    "log_ratio": Var("ln of ‖∂h_T/∂h_1‖₂ / ‖∂h_T/∂h_(T-1)‖₂ (−inf where the ratio is 0)"),
    "log_jac_norm_1": Var("ln ‖∂h_T/∂h_1‖₂ (−inf where it is 0)"),
    "log_step_norm_T": Var("ln ‖∂h_T/∂h_(T-1)‖₂ (−inf where it is 0)"),
    "diverged_at": _DIVERGED,
}


def _grad_summary(log1, logT, T, diverged_at=0):
    from ..analysis.gradients import log_ratio

    with np.errstate(over="ignore", invalid="ignore"):
        lr = float(log_ratio(log1, logT, T))
        return {"ratio": float(np.exp(lr)), "log_ratio": float(lr), "log_jac_norm_1": float(log1),
                "log_step_norm_T": float(logT), "diverged_at": int(diverged_at)}


def gradient_summaries(log1, logT, steps, diverged) -> dict:
    """``_grad_summary`` of n points as arrays: log1, logT (n,) the logs of the two norms, steps
    (n,) their T, diverged (n,) the divergence step (0: none; NaN summaries there)."""
    from ..analysis.gradients import log_ratio

    steps = np.asarray(steps)
    lr = np.empty(np.shape(log1))
    with np.errstate(over="ignore", invalid="ignore"):
        for T in np.unique(steps):
            at = steps == T
            lr[at] = log_ratio(log1[at], logT[at], int(T))
        bad = np.asarray(diverged) > 0
        out = {"ratio": np.exp(lr), "log_ratio": lr, "log_jac_norm_1": np.array(log1, dtype=np.float64),
               "log_step_norm_T": np.array(logT, dtype=np.float64)}
    for v in out.values():
        v[bad] = np.nan
    out["diverged_at"] = np.asarray(diverged, dtype=np.int64)
    return out


def _gradient_norms_columns(table, backend):
    """The summaries of a region's points from their settings as columns (``columns``)."""
    from .columns import Memo, tangent_norms

    memo = table.memo if table.memo is not None else Memo(model_and_input)
    log1, logT, bad, steps, single = tangent_norms(table, backend, TARGETS["gradient_norms"], memo)
    out = gradient_summaries(log1, logT, steps, bad)
    for i, res in single.items():
        for name in _GRAD_VARS:
            out[name][i] = res[name]
    return out


def _gradient_norms(run, opts, backend):
    from ..analysis.gradients import gradient_norms
    from ..errors import DivergenceError

    model, x = model_and_input(run)
    try:
        ds = gradient_norms(model, x, backend=backend)
    except DivergenceError as err:
        return _nan_result(_GRAD_VARS, err.step)
    lj = ds["log_jac_norm"].values
    return _grad_summary(lj[0], lj[-2], lj.shape[-1])


def _gradient_norms_batched(points, backend):
    """Settings whose forms the backend has batched forward tangents for (``sweep_gradients``:
    the iRNN and the one-line cells), grouped by kind and shape, run as one batch each; the others
    (CTRNN, GRU, LSTM, stacks) per point."""
    from ..backends import get_backend

    be = get_backend(backend)
    built = [model_and_input(run) for run, _ in points]
    out = [None] * len(points)
    groups = {}
    for i, (m, x) in enumerate(built):
        form = m.form()
        if form.kind not in ("irnn", "cell") or not be.supports("sweep_gradients", form) or x.shape[0] < 2:
            out[i] = _gradient_norms(points[i][0], points[i][1], backend)
            continue
        key = (form.kind, m.hidden, m.inputs, x.shape[0], m.activation, m.leak)
        groups.setdefault(key, []).append(i)
    with be:
        for key, idx in groups.items():
            T = key[3]
            log1, logT, bad = be.sweep_gradients([built[i][0].form() for i in idx], [built[i][1] for i in idx])
            for j, i in enumerate(idx):
                out[i] = _nan_result(_GRAD_VARS, bad[j]) if bad[j] else _grad_summary(log1[j], logT[j], T)
    return out


def batched_gradient_summaries(models, xs, backend=None):
    """(ln‖∂h_T/∂h_1‖₂, ln‖∂h_T/∂h_(T−1)‖₂, diverged step) per setting, as one batch: the
    backend's ``sweep_gradients`` on the models' forms (one kind — iRNN or one-line cells —, one
    activation, hidden and input size; ``xs`` their inputs (T, d), one T)."""
    from ..backends import get_backend

    be = get_backend(backend)
    with be:
        return be.sweep_gradients([m.form() for m in models], [np.asarray(x, dtype=np.float64) for x in xs])


# ============================================================================ lyapunov
def _lyap_vars(settings):
    k = settings.get("k", 1)
    return {"lyapunov": Var("finite-time Lyapunov exponent λ_i (−inf along a direction the Jacobians annihilate)",
                            "1/step", dims=(("exponent", k),)),
            "diverged_at": _DIVERGED}


def _lyap_coords(settings):
    k = settings.get("k", 1)
    return {"exponent": (np.arange(1, k + 1), {"long_name": "exponent index i", "units": "1"})}


def _lyapunov(run, opts, backend):
    from ..analysis.lyapunov import lyapunov
    from ..errors import DivergenceError

    model, x = model_and_input(run)
    try:
        ds = lyapunov(model, x, k=opts.get("k", 1), transient=opts.get("transient", 0), backend=backend)
    except DivergenceError as err:
        return _nan_result(_lyap_vars(opts), err.step)
    return {"lyapunov": ds["lyapunov"].values, "diverged_at": 0}


# ============================================================================ irnn_equilibrium
_EQ_VARS = {
    "residual": Var("max over steps of the max-abs residual of α s − φ(U s + W x + b)"),
    "iterations": Var("max over steps of the solver iterations", "1", "int64"),
    "converged": Var("1 when every step's solve reached tol", "1", "int8"),
    "n_unconverged": Var("steps whose solve did not reach tol", "1", "int64"),
    "h_gap": Var("max over steps of max |h_m − h_eq,m| (K-step state vs equilibrium)"),
    "diverged_at": _DIVERGED,
}


def _irnn_equilibrium(run, opts, backend):
    from ..analysis.equilibria import irnn_equilibrium
    from ..errors import DivergenceError
    from ..simulation import simulate

    model, x = model_and_input(run)
    if model.name != "irnn":
        raise ParameterError("model", f"irnn_equilibrium needs the irnn model, got {model.name!r}")
    try:
        h = simulate(model, x, backend=backend)["h"].values
    except DivergenceError as err:
        return _nan_result(_EQ_VARS, err.step)
    h_prev = np.vstack([np.zeros((1, model.hidden)), h[:-1]])
    kw = {k: opts[k] for k in ("method", "tol", "max_iter") if opts.get(k) is not None}
    eq = irnn_equilibrium(model, x, h_prev, **kw)
    conv = eq["converged"].values.astype(bool)
    return {"residual": float(eq["residual"].max()), "iterations": int(eq["iterations"].max()),
            "converged": int(conv.all()), "n_unconverged": int((~conv).sum()),
            "h_gap": float(np.abs(h - eq["h_eq"].values).max()), "diverged_at": 0}


def _check_grad(model, x, opts):
    if x.shape[0] < 2:
        raise ParameterError("steps", f"gradient_norms needs T ≥ 2 steps, got {x.shape[0]}")


def _check_lyap(model, x, opts):
    k, transient = opts.get("k", 1), opts.get("transient", 0)
    if not 1 <= k <= model.hidden:
        raise ParameterError("k", f"must be between 1 and hidden={model.hidden}, got {k}")
    if not 0 <= transient < x.shape[0]:
        raise ParameterError("transient", f"must be ≥ 0 and < steps={x.shape[0]}, got {transient}")


def _check_eq(model, x, opts):
    from ..analysis.equilibria import METHODS

    if model.name != "irnn":
        raise ParameterError("model", f"irnn_equilibrium needs model irnn, got {model.name!r}")
    if opts.get("method", "newton") not in METHODS:
        raise ParameterError("method", f"must be one of {', '.join(METHODS)}, got {opts.get('method')!r}")
    if opts.get("tol", 1e-12) <= 0 or (opts.get("max_iter") is not None and opts["max_iter"] < 1):
        raise ParameterError("tol" if opts.get("tol", 1e-12) <= 0 else "max_iter", "must be > 0")


register_target(Target(
    "simulate", _simulate, _SIM_VARS,
    description="dynlab.simulate: ‖h_T‖₂, mean and max |h|, the step where the state diverged"))
register_target(Target(
    "gradient_norms", _gradient_norms, _GRAD_VARS, batched=_gradient_norms_batched, validate=_check_grad,
    vectorised=_gradient_norms_columns,
    description="dynlab.gradient_norms: ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T-1)‖ and its logs; batched kernels "
                "for the iRNN and the gated cells"))
register_target(Target(
    "lyapunov", _lyapunov, _lyap_vars, options={"k": (1, int), "transient": (0, int)},
    shape_settings=("k",), coords=_lyap_coords, validate=_check_lyap,
    description="dynlab.lyapunov: the top k finite-time Lyapunov exponents"))
register_target(Target(
    "irnn_equilibrium", _irnn_equilibrium, _EQ_VARS,
    options={"method": ("newton", str), "tol": (1e-12, float), "max_iter": (None, int)}, validate=_check_eq,
    description="dynlab.irnn_equilibrium at every step of the iRNN's own trajectory (h_prev = h_(m-1)): "
                "residual, iterations, converged, distance of h_m from the equilibrium"))


# ------------------------------------------------------------- convergence, spectrum
_CONV_VARS = {
    "rate": Var("fitted linear rate of e_k = ‖g_k − h_eq‖ (worst over the sequence's inputs where it is defined; "
                "NaN where at no input 3 errors lie above the rounding floor: no line to fit)"),
    "local_rate": Var("spectral radius of I + η(∇φU − αI) at h_eq (worst over the inputs)"),
    "bound_rate": Var("contraction bound ρ = 1 − αη + η‖U‖₂"),
    "bound_holds": Var("e_k ≤ ρ^k e_0 for every k and input (1) or not (0)", "1", "int64"),
    "final_error": Var("largest e_(K_max) over the inputs"),
}


def _convergence_target(run, opts, backend):
    """dynlab.convergence at every input x_m of the point's sequence, from h_prev = 0."""
    from ..analysis.convergence import convergence

    model, x = model_and_input(run)
    cv = convergence(model, x, K_max=opts["K_max"])
    rates = np.atleast_1d(cv["rate"].values)
    rates = rates[np.isfinite(rates)]  # NaN: an input too fast to fit (analysis.convergence), not the worst one
    return {"rate": float(rates.max()) if rates.size else float("nan"), "local_rate": float(np.max(cv["local_rate"].values)),
            "bound_rate": float(cv["bound_rate"]), "bound_holds": int(np.all(cv["bound_holds"].values)),
            "final_error": float(np.max(cv["error"].isel(k=-1).values))}


def _check_conv(model, x, opts):
    if model.name != "irnn":
        raise ParameterError("model", f"convergence needs model irnn, got {model.name!r}")
    if opts.get("K_max", 50) < 1:
        raise ParameterError("K_max", f"must be ≥ 1, got {opts.get('K_max')}")


_SPEC_VARS = {
    "max_real": Var("largest real part of an eigenvalue of the linearisation (dynlab.spectrum: ∇φU − αI for irnn) over the trajectory"),
    "frac_stable": Var("fraction of the trajectory's points labelled stable"),
    "max_step_radius": Var("largest spectral radius of the step Jacobian ∂h_m/∂h_(m-1)"),
    "diverged_at": _DIVERGED,
}


def _analyse(run, analysis, variables, backend):
    """``analysis(model, x, backend=…)`` on the point's model and input; a divergence of the
    simulation inside it becomes the point's ``diverged_at`` with NaN summaries (never raised)."""
    from ..errors import DivergenceError

    model, x = model_and_input(run)
    try:
        return analysis(model, x, backend=backend), None
    except DivergenceError as err:
        return None, _nan_result(variables, err.step)


def _spectrum_target(run, opts, backend):
    """dynlab.spectrum along the point's own trajectory."""
    from ..analysis.spectra import spectrum

    sp, failed = _analyse(run, spectrum, _SPEC_VARS, backend)
    if failed is not None:
        return failed
    return {"max_real": float(sp["max_real"].max()), "frac_stable": float(np.mean(sp["stability"].values == 1)),
            "max_step_radius": float(sp["step_radius"].max()), "diverged_at": 0}


register_target(Target(
    "convergence", _convergence_target, _CONV_VARS, options={"K_max": (50, int)}, validate=_check_conv,
    description="dynlab.convergence at every input of the sequence: fitted and local rates, the bound ρ, "
                "whether e_k ≤ ρ^k e_0 held"))
register_target(Target(
    "spectrum", _spectrum_target, _SPEC_VARS,
    description="dynlab.spectrum along the trajectory: largest real part, fraction stable, step radius"))


# ------------------------------------------------------------------------ partition
_PART_VARS = {
    "regions": Var("distinct partition codes seen by the last step"),
    "prefix_regions": Var("distinct prefix codes c_1..c_T over the batch"),
    "reconstruction_error": Var("largest |A_RNN x + B_RNN − h| over the batch"),
    "diverged_at": _DIVERGED,
}


def _partition_target(run, opts, backend):
    """dynlab.analysis.partition.partition on the point's input (a max-affine activation)."""
    from ..analysis.partition import partition

    ds, failed = _analyse(run, partition, _PART_VARS, backend)
    if failed is not None:
        return failed
    return {"regions": float(ds["regions"].values[-1]), "prefix_regions": float(ds["prefix_regions"].values[-1]),
            "reconstruction_error": float(np.max(ds["reconstruction_error"].values)), "diverged_at": 0}


def _check_part(model, x, opts):
    from ..analysis.partition import model_layers

    model_layers(model)  # refuses a model or activation without max-affine pieces, naming it


register_target(Target(
    "partition", _partition_target, _PART_VARS, validate=_check_part,
    description="MASO partition of a relu/leaky-relu/abs RNN: regions seen, prefix regions, exact "
                "reconstruction error of h = A_RNN x + B_RNN"))

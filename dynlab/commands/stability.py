"""``dynlab equilibria``, ``spectrum`` and ``converge``: spec → analyses → one Dataset each,
and the text each command prints.  ``dynlab.plot`` draws the Datasets (``plot_equilibria``,
``plot_spectrum``, ``plot_convergence``, or ``draw`` for any of them).
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError

STAB_NAMES = {1: "stable", 0: "marginal", -1: "unstable"}


def _model_and_input(run):
    from ..spec import build_input, build_model

    if run.batch is not None:
        raise ParameterError("batch", "this command analyses one sequence; leave batch unset")
    model = build_model(run)
    return model, build_input(run, model.inputs)


def _previous_states(model, x, backend):
    from ..simulation import simulate

    h = simulate(model, x, backend=backend)["h"].values
    return np.vstack([np.zeros((1, model.state_size)), h[:-1]])


def _resolved(backend) -> str:
    """The backend the trajectory h_(m-1) was simulated on (attr ``trajectory_backend``; the solves
    themselves run in NumPy, attr ``backend``)."""
    from ..backends import resolve_backend

    return resolve_backend(backend)


def _along_time(ds, T: int, long_name: str = "time step m"):
    """A per-input result along ``time`` (the command's inputs are the steps of one sequence)."""
    ds = ds.rename({"batch": "time"})
    return ds.assign_coords(time=("time", np.arange(1, T + 1), {"long_name": long_name, "units": "step"}))


# ------------------------------------------------------------------------- equilibria
def equilibria_dataset(spec):
    """The Dataset of ``dynlab equilibria`` for an ``EquilibriaSpec``.

    Default: ``dynlab.equilibrium`` at every input x_m of the sequence with h_prev = h_{m-1}
    of the simulated trajectory (for the iRNN the step equilibrium; for the others the fixed
    point at the constant input x_m, Newton started from h_{m-1}), along ``time``;
    ``n_starts``: ``dynlab.fixed_points`` at ``constant_input`` (``_fixed_points``); ``complete``: the same
    with ``method="complete"``; ``continue_over``: ``dynlab.continuation``
    from x_1 over the named input/parameter; an implicit net: ``dynlab.implicit_equilibrium``
    at every input.  ``attrs["result"]`` names the call that made it.
    """
    from ..analysis.continuation import continuation
    from ..analysis.equilibria import equilibrium
    from ..spec import input_attrs

    run = spec.run
    model, x = _model_and_input(run)
    if model.name == "implicit":
        return _implicit_equilibria(spec, model, x)
    if spec.continue_over is not None:
        if spec.param_range is None:
            raise ParameterError("param_range", "continuation needs a range LO,HI")
        lo, hi = spec.param_range
        ds = continuation(model, spec.continue_over, lo, hi, x=x[0], tol=spec.tol, command=run.command)
    elif spec.n_starts is not None:
        ds = _fixed_points(spec, model, x)
    elif spec.complete:
        from ..analysis.fixed_points import fixed_points

        ds = fixed_points(model, constant_input(spec, model), method="complete", cycles=spec.cycles,
                          max_regions=spec.max_regions, tol=spec.tol, command=run.command)
    else:
        hp = _previous_states(model, x, run.backend)
        ds = equilibrium(model, x, hp, method=spec.method, tol=spec.tol, command=run.command)
        ds = _along_time(ds, x.shape[0])
        ds.attrs["trajectory_backend"] = _resolved(run.backend)
    ds.attrs.update(input_attrs(run, x.shape[0]))
    return ds


def constant_input(spec, model) -> np.ndarray:
    """The (d,) constant input of the fixed-point search: ``spec.constant_input`` (one value for every
    input unit, or d values), zeros when not given."""
    given = spec.constant_input
    if given is None:
        return np.zeros(model.inputs)
    values = np.asarray(given, dtype=np.float64).reshape(-1)
    if values.size == 1:
        return np.full(model.inputs, float(values[0]))
    if values.size != model.inputs:
        raise ParameterError("constant_input", f"needs 1 or {model.inputs} values (the model has {model.inputs} "
                                               f"input(s)), got {values.size}")
    return values


#: Test sequences of a --task whose states start the fixed-point search.
TASK_SEQUENCES = 200


def _fixed_points(spec, model, x):
    """``dynlab.fixed_points`` at the spec's constant input, started from the states the network
    visits: on the task's test inputs (``spec.task``), else for the maps given by their step (gru,
    lstm, stack) on the command's input sequence — random states far outside that set end in
    saturated slow points that no trajectory reaches — else random states run along the dynamics."""
    from ..analysis.fixed_points import fixed_points
    from ..tasks import make_task

    run = spec.run
    if spec.task is not None:
        steps = None if spec.task.startswith("digits") else run.steps   # the digits fix their own length
        task = make_task(spec.task, steps, seed=run.seed, n_test=TASK_SEQUENCES)
        traj, starts = task, f"states of the network on the {task.name} task's test inputs"
    elif getattr(model, "MAP", False):
        traj, starts = _previous_states(model, x, run.backend)[1:], "states of the network's trajectory on the input"
    else:
        traj, starts = None, "random states run along the dynamics"
    ds = fixed_points(model, constant_input(spec, model), n_starts=spec.n_starts, seed=run.seed, tol=spec.tol,
                      trajectories=traj, keep_unreachable=spec.keep_unreachable, command=run.command)
    ds.attrs["starts"] = starts
    return ds


#: ``dynlab equilibria --method`` → ``implicit_equilibrium`` method ("euler": the plain
#: fixed-point iteration Y ← f(WY + QX + T), the implicit net's analogue of the Euler recursion).
IMPLICIT_METHODS = {"newton": "newton", "euler": "fixed-point", "rk4": "rk4", "scipy": "scipy"}


def _implicit_equilibria(spec, model, x):
    """Implicit nets: ``dynlab.implicit_equilibrium`` at every input x_m of the sequence (the rows
    of x are N independent inputs)."""
    from ..analysis.implicit import implicit_equilibrium
    from ..spec import input_attrs

    for name in ("n_starts", "continue_over"):
        if getattr(spec, name) is not None:
            raise ParameterError(name, "is not available for the implicit networks")
    if spec.complete:
        raise ParameterError("complete", "is not available for the implicit networks")
    ds = implicit_equilibrium(model, x, method=IMPLICIT_METHODS[spec.method], tol=spec.tol,
                              command=spec.run.command)
    ds = _along_time(ds, x.shape[0], "input m")
    ds.attrs.update({"solve_method": spec.method, "tol": spec.tol, **input_attrs(spec.run, x.shape[0])})
    return ds


def _count(n, word: str) -> str:
    """"1 root", "3 roots"."""
    return f"{int(n)} {word}{'' if int(n) == 1 else 's'}"


def equilibria_summary(ds) -> str:
    """The text ``dynlab equilibria`` prints for its Dataset (any of its results)."""
    result = ds.attrs.get("result")
    name = ds.attrs.get("model")
    if result == "continuation":
        lines = [f"continuation of the {name} equilibria over {ds.attrs['over']} ∈ [{ds.attrs['lo']:g}, "
                 f"{ds.attrs['hi']:g}]: {ds.sizes['arc']} points on the branch{'es' if ds.attrs.get('n_branches', 1) > 1 else ''}, max residual "
                 f"{float(ds['residual'].max()):.3g}; stopped: {ds.attrs['stop_reason']}"]
        lines += _special_lines(ds)
        n_unst = int((ds["stability"].values == -1).sum())
        lines.append(f"{n_unst} of {ds.sizes['arc']} points unstable")
        return "\n".join(lines)
    if result == "fixed_points" and ds.attrs.get("solve_method") == "complete":
        return _complete_summary(ds, name)
    if result == "fixed_points":
        far = int(ds.attrs.get("n_unreachable", 0))
        kept = "reachable" in ds and int((ds["reachable"] == 0).sum()) > 0
        lines = [f"multi-start search ({ds.attrs['n_starts']} starts) for equilibria of {name} at x = "
                 f"{np.array2string(ds['x'].values, precision=4)}: {_count(ds.attrs['n_roots'], 'root')}, "
                 f"{_count(ds.attrs['n_slow'], 'slow point')}"
                 + (f"; {_count(far, 'point')} outside the states a trajectory can reach "
                    f"({'kept, flagged' if kept else 'left out; --keep-unreachable keeps them'})" if far else "")]
        for i in range(ds.sizes["point"]):
            kind = ("root" if int(ds["kind"][i]) == 1 else "slow point") + (
                " (unreachable)" if "reachable" in ds and not int(ds["reachable"][i]) else "")
            cert = "certified" if int(ds["certified"][i]) else "not certified"
            modes = f", {int(ds['n_unstable'][i])} unstable modes" if "n_unstable" in ds else ""
            lines.append(f"  {kind}: h = {np.array2string(ds['h_eq'].values[i], precision=6)}, residual "
                         f"{float(ds['residual'][i]):.2g}, {STAB_NAMES[int(ds['stability'][i])]}{modes}, "
                         f"max Re λ {float(ds['max_real'][i]):.4g}, {cert}")
        return "\n".join(lines)
    n, ok = ds["converged"].size, int(ds["converged"].sum())
    if result == "implicit_equilibrium":
        return (f"equilibria of the implicit net at {n} inputs ({ds.attrs['solve_method']}, tol {ds.attrs['tol']:g}): "
                f"{ok}/{n} converged, max residual {float(ds['residual'].max()):.3g}, iterations ≤ "
                f"{int(ds['iterations'].max())}")
    stab = ds["stability"].values
    lines = [f"equilibria of {name} at {n} inputs ({ds.attrs['solve_method']}, tol {ds.attrs['tol']:g}): {ok}/{n} converged, "
             f"max residual {float(ds['residual'].max()):.3g}, iterations ≤ {int(ds['iterations'].max())}",
             f"stability: {int((stab == 1).sum())} stable, {int((stab == 0).sum())} marginal, "
             f"{int((stab == -1).sum())} unstable; max Re λ = {float(ds['max_real'].max()):.4g}"]
    return "\n".join(lines)


#: Names of the special points of a continuation, by ``special_type``.
SPECIAL_NAMES = {1: "fold", 2: "Hopf point", 3: "Neimark–Sacker point", 4: "flip", 5: "branch point"}
CRITICALITY = {-1: "supercritical", 1: "subcritical", 0: ""}
COEFFICIENT = {1: "a", 2: "l1", 3: "d", 4: "c"}


def _special_lines(ds) -> list:
    """One line per special point of a continuation (files without them: their folds)."""
    if "special_type" not in ds:
        return [f"fold at {ds.attrs['over']} = {float(ds['fold_param'][i]):.10g}, h = "
                f"{np.array2string(ds['fold_h'].values[i], precision=6)} "
                f"({'refined' if int(ds['fold_refined'][i]) else 'interpolated'})" for i in range(ds.sizes.get("fold", 0))]
    out = []
    for i in range(ds.sizes.get("special", 0)):
        code = int(ds["special_type"][i])
        crit = CRITICALITY[int(ds["special_criticality"][i])]
        coef = float(ds["special_coefficient"][i])
        extra = f", {COEFFICIENT[code]} = {coef:.6g}" if code in COEFFICIENT and np.isfinite(coef) else ""
        freq = float(ds["special_frequency"][i])
        extra += (f", ω = {freq:.6g}" if code == 2 else f", θ = {freq:.6g}") if code in (2, 3) and np.isfinite(freq) else ""
        how = "refined" if int(ds["special_refined"][i]) else ("interpolated" if code == 1 else "bisected")
        br = f" (branch {int(ds['special_branch'][i])})" if int(ds['special_branch'][i]) else ""
        out.append(f"{(crit + ' ') if crit else ''}{SPECIAL_NAMES[code]} at {ds.attrs['over']} = "
                   f"{float(ds['special_param'][i]):.10g}{br}, h = "
                   f"{np.array2string(ds['special_h'].values[i], precision=6, threshold=8)} ({how}{extra})")
    if int(ds.attrs.get("n_branches", 1)) > 1:
        out.append(f"{int(ds.attrs['n_branches'])} branches (the others switched at branch points): "
                   f"{ds.attrs.get('stop_reasons', '')}")
    return out


def _complete_summary(ds, name) -> str:
    """The text of ``dynlab equilibria --complete``."""
    lines = [f"every fixed point of {name} at x = {np.array2string(ds['x'].values, precision=4)} by region "
             f"enumeration: {_count(ds.attrs['n_roots'], 'root')} ({int(ds.attrs['n_stable'])} stable, "
             f"{int(ds.attrs['n_saddles'])} with one unstable mode)",
             ds.attrs["completeness"]]
    for i in range(ds.sizes["point"]):
        lines.append(f"  root: h = {np.array2string(ds['h_eq'].values[i], precision=6, threshold=8)}, residual "
                     f"{float(ds['residual'][i]):.2g}, {STAB_NAMES[int(ds['stability'][i])]}, "
                     f"{int(ds['n_unstable'][i])} unstable modes")
    for i in range(ds.sizes.get("cycle", 0)):
        k = int(ds["cycle_period"][i])
        lines.append(f"  {k}-cycle: h_1 = {np.array2string(ds['cycle_h'].values[i, 0], precision=6, threshold=8)}, "
                     f"{STAB_NAMES[int(ds['cycle_stability'][i])]} (multiplier radius "
                     f"{float(ds['cycle_radius'][i]):.4g})")
    return "\n".join(lines)


def not_converged(ds) -> str | None:
    """One line saying where a solve of ``dynlab equilibria`` failed (None when all converged), or that
    a ``--complete`` enumeration was stopped by its work limit."""
    if ds.attrs.get("result") == "fixed_points" and ds.attrs.get("solve_method") == "complete":
        return None if int(ds.attrs["complete"]) else ds.attrs["completeness"]
    if ds.attrs.get("result") not in ("equilibrium", "implicit_equilibrium"):
        return None
    bad = np.flatnonzero(ds["converged"].values == 0)
    if not bad.size:
        return None
    m = int(ds["time"].values[bad[0]])
    return (f"the equilibrium solve did not converge at {bad.size} of {ds.sizes['time']} inputs (first at step "
            f"m={m}, residual {float(ds['residual'].values[bad[0]]):.3g} > tol {ds.attrs['tol']:g})")


# ------------------------------------------------------------------------- spectrum
def spectrum_dataset(spec):
    """``dynlab.spectrum`` of the spec's model along its input sequence(s) (batch allowed)."""
    from ..analysis.spectra import spectrum
    from ..spec import build_input, build_model, input_attrs

    run = spec.run
    from .._resources import check_spectrum
    from .gradients import sized_like

    like = sized_like(run)
    if like is not None:  # the work, before the model is drawn
        check_spectrum(like, run.batch or 1, run.steps)
    model = build_model(run)
    x = build_input(run, model.inputs)
    ds = spectrum(model, x, at=spec.at, backend=run.backend, command=run.command)
    ds.attrs.update(input_attrs(run, ds.sizes["time"]))
    return ds


def spectrum_summary(ds) -> str:
    """The text ``dynlab spectrum`` prints."""
    from .._dataset import eigenvalues_from

    ev = eigenvalues_from(ds, "eig")
    n = ds["max_real"].size
    lines = [f"spectra of {ds.attrs.get('model')} at {n} points ({ds.attrs.get('at')}): max Re λ = {ev.real.max():.4g}, "
             f"{100 * (ev.real < 0).mean():.1f}% of eigenvalues with negative real part, "
             f"{int(ds.attrs['n_stable'])}/{n} points stable"]
    if "step_radius" in ds:
        r = ds["step_radius"].values
        lines.append(f"step Jacobian spectral radius: median {np.median(r):.4g}, max {r.max():.4g}")
    if "converged" in ds:
        lines.append(f"equilibria: {int(ds['converged'].sum())}/{n} converged, max residual "
                     f"{float(ds['residual'].max()):.3g}")
    return "\n".join(lines)


# ------------------------------------------------------------------------- convergence
def converge_dataset(spec):
    """``dynlab.convergence`` at every step of the spec's sequence: x_m with h_prev = h_{m-1}
    of the simulated trajectory (one problem per step, along ``time``)."""
    from ..analysis.convergence import convergence
    from ..spec import input_attrs

    run = spec.run
    model, x = _model_and_input(run)
    if model.name != "irnn":
        raise ParameterError("model", f"converge studies the iRNN's inner recursion; got {model.name!r}")
    hp = _previous_states(model, x, run.backend)
    ds = convergence(model, x, hp, K_max=spec.K_max, command=run.command)
    ds = _along_time(ds, x.shape[0])
    ds.attrs["trajectory_backend"] = _resolved(run.backend)
    ds.attrs.update(input_attrs(run, x.shape[0]))
    return ds


def reference_failed(ds) -> str | None:
    """One line saying where scipy's reference root of ``dynlab converge`` did not converge (None when it did)."""
    if "reference_converged" not in ds:
        return None
    ok = np.atleast_1d(ds["reference_converged"].values).astype(bool)
    if ok.all():
        return None
    res = np.atleast_1d(ds["reference_residual"].values)
    bad = np.flatnonzero(~ok)
    where = f"time {int(np.atleast_1d(ds['time'].values)[bad[0]])}" if "time" in ds.dims else f"input {int(bad[0])}"
    return (f"scipy's reference root did not converge at {bad.size}/{ok.size} inputs (first at {where}, residual "
            f"{float(res[bad[0]]):.3g}); e_k and the bound check are void there (data kept)")


def _fitted_rates(rates) -> str:
    """The fitted rates' median and max, and where there was no line to fit (rate NaN)."""
    fit = rates[np.isfinite(rates)]
    text = f"fitted rate: median {np.median(fit):.4g}, max {fit.max():.4g}" if fit.size else "fitted rate: none"
    if fit.size < rates.size:
        text += (f" (undefined at {rates.size - fit.size}/{rates.size} inputs: fewer than 3 errors above the "
                 f"rounding floor, rate NaN there)")
    return text


def converge_summary(ds) -> str:
    """The text ``dynlab converge`` prints."""
    rates = np.atleast_1d(ds["rate"].values)
    local = np.atleast_1d(ds["local_rate"].values)
    holds = np.atleast_1d(ds["bound_holds"].values)
    printed = np.atleast_2d(ds["printed_bound_holds"].values)
    n = rates.size
    ok = (np.atleast_1d(ds["reference_converged"].values).astype(bool) if "reference_converged" in ds
          else np.ones(n, dtype=bool))
    holds, printed = holds & ok, printed[ok]
    return "\n".join([
        f"inner recursion of the iRNN over k = 0..{ds.attrs['K_max']} at {n} inputs, against scipy's root "
        f"(max residual {float(ds['reference_residual'].max()):.2g})",
        _fitted_rates(rates) + f"; local rate "
        f"(spectral radius of I + η(∇φU − αI)): median {np.median(local):.4g}, max {local.max():.4g}",
        f"bound ρ = |1 − αη| + η‖U‖₂ = {float(ds['bound_rate']):.4g}: e_k ≤ ρ^k e_0 holds for every k at "
        f"{int(holds.sum())}/{int(ok.sum())} inputs; the printed form e_K ≤ ρ^K e_1 fails at K = 1 for "
        f"{int((printed[:, 1] == 0).sum())}/{int(ok.sum())}"
        + ("" if ok.all() else f" (of the {int(ok.sum())}/{n} inputs where scipy's reference converged)"),
    ])

"""Every equilibrium a multi-start search finds at one constant input, certified and linearised
(``fixed_points``): batched Levenberg–Marquardt on q(y) = ½‖F(y)‖² from many starts (random,
inside the reachable box, or drawn from the network's own trajectories), a second pass between
pairs of minima (where saddles lie), a Newton polish, deduplication, eigen-decomposition and the
unstable modes; the systems and solvers are ``dynlab.analysis.equilibria``'s.
"""
from __future__ import annotations

import numpy as np

from .._dataset import finish
from .._resources import check_fixed_points
from .._progress import progress
from ..backends import get_backend
from ..errors import ParameterError
from .equilibria import (STABILITY_ATTRS, STABLE, _check_tol, _inputs, _maxabs, fixed_point_map,
                         _part_coords, _solve_batched, eig_variables, newton_batched, stability_label)
from .reachable import state_box, task_states


# ------------------------------------------------------------------ multi-start search
def fixed_points(model, x=None, *, method: str = "search", n_starts: int = 64, trajectory_steps: int = 50,
                 spread: float = 2.0, starts=None, trajectories=None, start_noise: float = 0.0, n_components: int = 3,
                 seed: int = 0, tol: float = 1e-12, slow_tol: float = 1e-6, dedup_tol: float = 1e-6,
                 max_iter: int = 200, stability_tol: float = 1e-9, keep_unreachable: bool = False, cycles: int = 1,
                 max_regions: int | None = None, backend=None, command=None):
    """All the equilibria a multi-start search finds at one constant input, each certified and
    linearised (eigenvalues; eigenvectors of the unstable modes, so saddles are told apart).

    As the fixed-point finders for RNNs do (Sussillo & Barak 2013), starts are taken along
    trajectories of the system itself: either from ``trajectories`` (states the network visited,
    e.g. ``simulate(...)["h"]`` on the task's inputs: ``n_starts`` of them drawn uniformly, each
    plus N(0, start_noise²) noise — the FixedPointFinder workflow), or else ``n_starts`` random
    states y ~ N(0, spread²), each run up to ``trajectory_steps`` Euler steps of the natural step
    size (for the maps: steps of the map itself; start n is the point after
    ⌊trajectory_steps·u_n²⌋ steps, u_n uniform, so early points — far from the attractors, near
    saddles and slow regions — are favoured).  From each, batched damped Newton runs first
    (``NEWTON_FIRST_ITERS`` iterations: most starts converge to a root in a few) and
    q(y) = ½‖F(y)‖² is minimised by batched Levenberg–Marquardt for the rest.  Minima with ‖F‖∞ reachable to ``tol`` are polished by Newton and kept
    as roots, deduplicated (distance ≤ ``dedup_tol``·(1 + ‖y‖)), and certified by the
    Newton–Kantorovich test of the fixed-point map's ``certify``; minima that are no roots but have
    q ≤ ``slow_tol`` are kept as slow points (``kind`` 0).  A second pass starts halfway between
    every pair of distinct minima of the first, where saddles usually lie.

    Only points a trajectory can reach are answers: outside the box of states the dynamics keep a
    trajectory in (``dynlab.analysis.reachable.state_box``: |h| ≤ 1 for a tanh GRU's h, h = φ(·) for
    the Elman cells, …) the search finds "fixed points" where a gate has saturated in floating
    point and slow points on flat plateaus that no trajectory visits.  They are left out of the
    result (attr ``n_unreachable`` counts them) unless ``keep_unreachable``, which keeps them with
    ``reachable`` = 0.  Random starts are drawn inside the box.

    For the iRNN the roots are those of the step equation α s = φ(U s + W x + b) in s (with
    h_prev = 0, h_eq = s); for the CTRNN the zeros of the flow; for the cells the fixed points of
    the map; for gru, lstm and stack the fixed points s = step(s, x) of the whole state (an
    LSTM's [h; c]), stability from the step Jacobian against the unit circle.

    ``method="complete"`` (piecewise-affine φ: relu, leaky-relu, abs, identity; the models of the
    form β y = γ φ(R y + c): rnn, fastrnn, rin, irnn, ctrnn) finds *every* fixed point instead, by
    branch and bound over the activation regions with a linear-programming test
    (``dynlab.analysis.pwa``), and for the maps every cycle of period 2..``cycles``; the result
    states what was proven (attrs ``complete``, ``completeness``) or where a work limit
    (``max_regions``) stopped it.  The search options (``n_starts``, ``starts``, …) do not apply;
    ``trajectories`` still gives the projection.

    Parameters
    ----------
    model : dynlab model;  x : (d,) constant input, any value (zeros by default)
    method : "search" (the multi-start search; the default) or "complete" (above)
    cycles : with "complete": the longest cycle period k searched (1: fixed points only)
    max_regions : with "complete": the work limit, LP nodes plus regions solved
        (``dynlab.analysis.pwa.MAX_REGIONS`` by default)
    backend : where the step Jacobians of a gru, lstm or stack map run (a name or a Backend; None:
        the default backend), named by the ``backend`` attr; the closed-form maps of the other
        models are NumPy on the host (the reference's arithmetic) whatever is given
    starts : (n, D) array, optional — extra starting points (in the solve's variable y)
    trajectories : (B, T, D) or (N, D) states of the network's own trajectories, or a ``Task``
        (``dynlab.make_task``: the states the model visits on its test inputs), optional: the
        random starts are drawn from them, and the Dataset gets their top ``n_components``
        principal components with every point, unstable direction and trajectory projected
        (what ``dynlab.plot.plot_fixed_points`` draws)
    keep_unreachable : keep the points outside the reachable states (flagged), see above
    start_noise : standard deviation of the noise added to starts drawn from ``trajectories``

    Returns
    -------
    xarray.Dataset along ``point``: ``h_eq`` (point, unit), ``q``, ``residual``, ``iterations``,
    ``converged``, ``certified``, ``certified_radius``, ``kind`` (1 root, 0 slow point),
    ``eig_real``/``eig_imag`` (point, eig) of ∂F, ``max_real``, ``stability``, ``hits`` (how many
    starts ended there), ``n_unstable`` (unstable modes: step-Jacobian eigenvalues with
    |μ| > 1 + stability_tol for the maps, Re λ > stability_tol for the flows),
    ``unstable_eig_real``/``unstable_eig_imag`` (point, mode) and ``unstable_vectors`` /
    ``unstable_vectors_imag`` (point, mode, unit): their eigenvalues and unit eigenvectors, most
    unstable first, NaN beyond a point's ``n_unstable``; for the maps also ``step_eig_real`` /
    ``step_eig_imag`` (the step Jacobian's eigenvalues μ = λ + 1) and ``step_radius``; ``reachable``
    (1 inside the reachable box; 0 only with ``keep_unreachable``); ``x``; with
    ``trajectories`` also ``pc_axes`` (pc, unit), ``pc_mean``, ``pc_explained``, ``h_pc``
    (point, pc), ``unstable_pc`` (point, mode, pc), ``trajectory_pc`` (trajectory, time, pc).
    Roots come first, ordered by their first coordinate.  attrs ``n_roots``, ``n_slow``,
    ``n_stable`` (stable roots), ``n_saddles`` (roots with exactly one unstable mode),
    ``n_unreachable`` (points outside the reachable box: left out, or kept and flagged),
    ``state_box`` (the rule of that box), ``certificate`` (what certifies the roots, or why none
    is claimed), ``solve_method`` ("search" or "complete"; not ``method``, which is a CTRNN's own
    setting).  The counts are of the points in the result.  With ``method="complete"``: attrs
    ``complete`` (1 when every region was solved or pruned), ``completeness`` (the sentence saying
    what was proven, or "incomplete after N regions" and what was left), ``lp_nodes``,
    ``pruned_nodes``, ``regions_solved``, ``singular_regions``, ``unexamined_regions``,
    ``max_regions``, ``cycles``; every root has ``hits`` 1 and its region's code in ``region``
    (point, unit: the affine piece of each unit, 0 the lower); for ``cycles`` > 1 the cycles along
    ``cycle``: ``cycle_h`` (cycle, phase, unit; NaN past a cycle's period), ``cycle_period``,
    ``cycle_radius`` (spectral radius of the product of the step Jacobians around it),
    ``cycle_stability``, ``cycle_residual``.

    Example
    -------
    >>> fp = fixed_points(make_model("ctrnn", 2, 1, weight_scale=3, seed=1), [0.0])
    """
    be = get_backend(backend)      # resolved once: the step map's Jacobians run on it
    with be:
        system = fixed_point_map(model, be)
        tol = _check_tol(tol)
        xa, _ = _inputs(model, np.zeros(model.inputs) if x is None else x)
        if xa.shape[0] != 1:
            raise ParameterError("x", "fixed_points takes one constant input (d,)")
        if method not in FP_METHODS:
            raise ParameterError("method", f"must be one of {', '.join(FP_METHODS)}, got {method!r}")
        D = model.state_size
        box = state_box(model, xa[0])
        traj = _trajectories(model, trajectories, start_noise)
        if method == "complete":
            if starts is not None:
                raise ParameterError("starts", "method='complete' searches no starts: it enumerates every region")
            return _complete(model, system, xa, traj, box, tol=tol, stability_tol=stability_tol,
                             n_components=n_components, cycles=cycles, max_regions=max_regions, command=command)
        if int(n_starts) < 1 and starts is None:
            raise ParameterError("n_starts", f"must be ≥ 1, got {n_starts}")
        check_fixed_points(max(int(n_starts), 0) + (0 if starts is None else len(starts)), D)  # before allocating
        rng = np.random.default_rng(seed)
        Y = [np.empty((0, D))]
        if int(n_starts) > 0 and traj is not None:
            flat = traj.reshape(-1, D)
            y = flat[rng.integers(0, flat.shape[0], int(n_starts))]
            Y.append(y + float(start_noise) * rng.standard_normal(y.shape))
        elif int(n_starts) > 0:
            y = box.clip(rng.standard_normal((int(n_starts), D)) * float(spread))
            c = system.c_rows(xa, y.shape[0])
            # where along its trajectory each start is taken: early points (where the dynamics is
            # still far from the attractors, near saddles and slow regions) are favoured
            stop = np.floor(int(trajectory_steps) * rng.random(y.shape[0]) ** 2).astype(np.int64)
            with np.errstate(all="ignore"):
                for k in range(int(trajectory_steps)):
                    move = stop > k
                    y[move] += system.step_size * system.F(y[move], c[move])
            Y.append(y[np.all(np.isfinite(y), axis=1)])
        if starts is not None:
            s = np.asarray(starts, dtype=np.float64)
            if s.ndim != 2 or s.shape[1] != D or not np.all(np.isfinite(s)):
                raise ParameterError("starts", f"must be a finite (n, {D}) array, got shape {s.shape}")
            Y.append(s)
        Y = np.vstack(Y)
        c = system.c_rows(xa, Y.shape[0])
        Y, q, its = _search(system, c, Y, tol, max_iter)
        # second pass: saddles separate attractors, so start again halfway between every pair of
        # distinct minima found (a cheap way not to miss the unstable equilibria between them)
        good = Y[q <= max(slow_tol, tol)]
        uniq = []
        for yv in good:
            if all(np.linalg.norm(yv - u) > 1e-3 * (1.0 + np.linalg.norm(u)) for u in uniq):
                uniq.append(yv)
        mids = [0.5 * (a + b) for i, a in enumerate(uniq) for b in uniq[i + 1:]][:1000]
        if mids:
            M = np.array(mids)
            cM = system.c_rows(xa, M.shape[0])
            M, qM, itsM = _search(system, cM, M, tol, max_iter)
            Y, q, c, its = np.vstack([Y, M]), np.concatenate([q, qM]), np.vstack([c, cM]), np.concatenate([its, itsM])
        # polish every start whose q is small enough to be a root or a slow point
        cand = q <= max(slow_tol, tol)
        Yp, rp, itp, okp = newton_batched(system, c[cand], Y[cand], tol=tol, max_iter=50)
        itp = itp + its[cand]
        roots, slow = [], []
        for yv, r, it, ok, y_lm, q_lm in zip(Yp, rp, itp, okp, Y[cand], q[cand]):
            if ok:
                roots.append((yv, it))
            else:
                slow.append((y_lm, q_lm, it))
        pts, hits, kinds, iters = _dedup_roots(roots, dedup_tol)
        for yv, qv, it in sorted(slow, key=lambda t: t[1]):
            for i, p in enumerate(pts):
                if np.linalg.norm(yv - p) <= 1e-3 * (1.0 + np.linalg.norm(p)):
                    hits[i] += 1
                    break
            else:
                pts.append(yv)
                hits.append(1)
                kinds.append(0)
                iters.append(it)
        P = np.array(pts).reshape(-1, D)
        reach = box.contains(P)
        n_unreachable = int((~reach).sum())
        if not keep_unreachable:  # left out: an answer no trajectory can reach is no answer
            hits, kinds, iters = ([v for v, r in zip(lst, reach) if r] for lst in (hits, kinds, iters))
            P, reach = P[reach], reach[reach]
        attrs = {"tol": tol, "slow_tol": slow_tol,
                 "n_starts": int(Y.shape[0]), "trajectory_steps": int(trajectory_steps), "spread": float(spread),
                 "starts_from": "trajectories" if traj is not None else "random states run along the dynamics",
                 "start_noise": float(start_noise), "dedup_tol": float(dedup_tol),
                 "search_seed": int(seed), "n_unreachable": n_unreachable, "solve_method": "search"}
        return _assemble(model, system, xa, P, reach, hits, kinds, iters, traj, box, attrs, stability_tol,
                         n_components, command)


#: Methods of ``fixed_points``.
FP_METHODS = ("search", "complete")


def _trajectories(model, trajectories, start_noise):
    """The (B, T, D) states of ``trajectories`` (states or a Task), checked; None when not given."""
    D = model.state_size
    if trajectories is None:
        return None
    if hasattr(trajectories, "batch"):  # a Task: the states on its test inputs
        trajectories = task_states(model, trajectories)
    traj = np.asarray(trajectories, dtype=np.float64)
    if traj.ndim == 2:
        traj = traj[None]
    if traj.ndim != 3 or traj.shape[2] != D or traj.shape[1] < 1 or not np.all(np.isfinite(traj)):
        raise ParameterError("trajectories", f"must be finite states (B, T, {D}) or (N, {D}), "
                                             f"got shape {np.shape(trajectories)}")
    if not (np.isfinite(start_noise) and start_noise >= 0):
        raise ParameterError("start_noise", f"must be finite and ≥ 0, got {start_noise}")
    return traj


def _assemble(model, system, xa, P, reach, hits, kinds, iters, traj, box, extra, stability_tol, n_components,
              command, more=None):
    """The Dataset of ``fixed_points`` (either method) from its points P (n, D)."""
    import xarray as xr

    from .._dataset import base_attrs, model_attrs, model_variables

    D = model.state_size
    tol = extra["tol"]
    P = np.asarray(P, dtype=np.float64).reshape(-1, D)
    n = P.shape[0]
    cP = system.c_rows(xa, n)
    FP = system.F(P, cP) if n else np.empty((0, D))
    resP = _maxabs(FP) if n else np.empty(0)
    cert, radius = system.certify(P, cP, FP) if n else (np.zeros(0, bool), np.empty(0))
    eigs, vecs = _eig_with_vectors(system, P, cP)
    growth = eigs + 1.0 if system.discrete else eigs
    stab = stability_label(growth, discrete=system.discrete, tol=stability_tol)
    kinds = np.array(kinds, dtype=np.int8)
    lab = system.eig_label
    how = ("the region's linear solve and one Newton step" if extra.get("solve_method") == "complete" else
           "Newton iterations (search and polish) of the first start that ended here; Levenberg–Marquardt steps "
           "not counted")
    data = {
        "h_eq": xr.Variable(("point", "unit"), P, {"long_name": f"equilibrium ({system.variable})", "units": "1"}),
        "q": xr.Variable(("point",), 0.5 * np.sum(FP ** 2, axis=1), {"long_name": "q = ½‖F‖²", "units": "1"}),
        "residual": xr.Variable(("point",), resP, {"long_name": "max-abs residual ‖F‖∞", "units": "1"}),
        "converged": xr.Variable(("point",), (resP <= tol).astype(np.int8), {"long_name": f"residual ≤ {tol:g}",
                                                                            "units": "1"}),
        "iterations": xr.Variable(("point",), np.array(iters, dtype=np.int64), {"long_name": how, "units": "1"}),
        "certified": xr.Variable(("point",), cert.astype(np.int8),
                                 {"long_name": "a unique true root proven nearby (Newton–Kantorovich)", "units": "1"}),
        "certified_radius": xr.Variable(("point",), radius, {"long_name": "radius of the ball holding the true root",
                                                             "units": "1"}),
        "kind": xr.Variable(("point",), kinds, {"long_name": "1 root, 0 slow point", "units": "1",
                                                "flag_values": np.array([0, 1], dtype=np.int8),
                                                "flag_meanings": "slow_point root"}),
        "hits": xr.Variable(("point",), np.array(hits, dtype=np.int64),
                            {"long_name": "regions holding it" if extra.get("solve_method") == "complete"
                             else "starts that ended here", "units": "1"}),
        **eig_variables(eigs, ("point",), what=lab),
        "max_real": xr.Variable(("point",), eigs.real.max(axis=1) if n else np.empty(0),
                                {"long_name": "largest real part of the eigenvalues", "units": "1"}),
        "stability": xr.Variable(("point",), stab, dict(STABILITY_ATTRS)),
        "x": xr.Variable(("unit_in",), xa[0], {"long_name": "constant input x", "units": "1"}),
        "reachable": xr.Variable(("point",), np.asarray(reach).astype(np.int8),
                                 {"long_name": "inside the states a trajectory can reach", "units": "1"}),
        **_unstable_modes(eigs, vecs, growth, system.discrete, stability_tol, lab),
        **model_variables(model),
        **(more or {}),
    }
    if system.discrete:
        data.update(eig_variables(eigs + 1.0, ("point",), name="step_eig",
                                  what="eigenvalue of the step Jacobian ∂s_t/∂s_(t-1)"))
        data["step_radius"] = xr.Variable(("point",), np.abs(eigs + 1.0).max(axis=1) if n else np.empty(0),
                                          {"long_name": "spectral radius of the step Jacobian", "units": "1"})
    if traj is not None:
        data.update(_projection(traj, P, data, int(n_components)))
    n_unst = data["n_unstable"].values
    attrs = {**model_attrs(model), **base_attrs(system.backend.name, command), **extra,
             "n_roots": int((kinds == 1).sum()), "n_slow": int((kinds == 0).sum()),
             "n_stable": int(((kinds == 1) & (stab == STABLE)).sum()),
             "n_saddles": int(((kinds == 1) & (n_unst == 1)).sum()),
             "state_box": box.rule, "certificate": _certificate_note(model, system),
             "system": system.name, "equation": system.equation}
    ds = xr.Dataset(data, attrs=attrs)
    ds = ds.assign_coords(_part_coords(model))
    return finish(ds, "fixed_points")


def _complete(model, system, xa, traj, box, *, tol, stability_tol, n_components, cycles, max_regions, command):
    """``fixed_points(method="complete")``: ``dynlab.analysis.pwa.complete_points`` → the Dataset."""
    import xarray as xr

    from . import pwa

    max_regions = pwa.MAX_REGIONS if max_regions is None else int(max_regions)
    if max_regions < 1:
        raise ParameterError("max_regions", f"must be ≥ 1, got {max_regions}")
    c = system.c(xa)[0]
    out = pwa.complete_points(system, c, cycles=cycles, max_regions=max_regions, name=model.name)
    P = out["points"]
    n, D = P.shape
    complete, sentence = pwa.statement(out["proof"], out["pieces"], D, int(cycles))
    proofs = out["proof"]
    more = {"region": xr.Variable(("point", "unit"), out["patterns"].astype(np.int8),
                                  {"long_name": "affine piece of each unit (0 the lower: z < 0, 1 the upper)",
                                   "units": "1"})}
    if int(cycles) > 1:
        more.update(_cycle_variables(system, c, out["cycles"], int(cycles), stability_tol))
    extra = {"tol": tol, "solve_method": "complete", "complete": int(complete), "completeness": sentence,
             "lp_nodes": int(sum(p.nodes for p in proofs)), "pruned_nodes": int(sum(p.pruned for p in proofs)),
             "regions_solved": int(sum(p.regions for p in proofs)),
             "singular_regions": int(sum(p.singular for p in proofs)),
             "unexamined_regions": float(sum(p.open_patterns for p in proofs)),
             "max_regions": max_regions, "cycles": int(cycles), "n_cycles": len(out["cycles"]),
             "prune_tol": pwa.PRUNE_TOL, "n_unreachable": 0}
    return _assemble(model, system, xa, P, np.ones(n, dtype=bool), [1] * n, [1] * n, [1] * n, traj, box, extra,
                     stability_tol, n_components, command, more)


def _cycle_variables(system, c, cycles, k_max, stability_tol):
    """The cycles of ``complete_points`` as variables along ``cycle`` and ``phase``."""
    import xarray as xr

    D = system.R.shape[0]
    n = len(cycles)
    H = np.full((n, k_max, D), np.nan)
    period = np.array([k for k, _ in cycles], dtype=np.int64)
    radius, res = np.empty(n), np.empty(n)
    for i, (k, y) in enumerate(cycles):
        H[i, :k] = y
        C = np.broadcast_to(c, y.shape)
        nxt = system.F(y, C) + y  # the map's step: F = step − y
        res[i] = float(np.max(np.abs(nxt - np.roll(y, -1, axis=0))))
        J = system.jac(y, C) + np.eye(D)[None]
        mono = np.eye(D)
        for j in range(k):
            mono = J[j] @ mono
        radius[i] = float(np.max(np.abs(np.linalg.eigvals(mono))))
    stab = np.where(radius < 1 - stability_tol, 1, np.where(radius > 1 + stability_tol, -1, 0)).astype(np.int8)
    return {"cycle_h": xr.Variable(("cycle", "phase", "unit"), H, {"long_name": "state along the cycle (NaN past "
                                                                                 "its period)", "units": "1"}),
            "cycle_period": xr.Variable(("cycle",), period, {"long_name": "minimal period k", "units": "step"}),
            "cycle_radius": xr.Variable(("cycle",), radius, {"long_name": "spectral radius of the product of the step "
                                                                          "Jacobians around the cycle", "units": "1"}),
            "cycle_stability": xr.Variable(("cycle",), stab, dict(STABILITY_ATTRS)),
            "cycle_residual": xr.Variable(("cycle",), res, {"long_name": "max |step(h_j) − h_(j+1)| around the cycle",
                                                            "units": "1"})}


#: Newton iterations from every start before the rows that have not converged go on by
#: Levenberg–Marquardt (``_search``).
NEWTON_FIRST_ITERS = 20


def _search(system, c, Y, tol, max_iter):
    """Roots and minima of q = ½‖F‖² from every row: damped Newton (line search on ‖F‖₂, which
    only decreases ‖F‖) for ``NEWTON_FIRST_ITERS`` iterations — most starts near an attractor
    or a saddle converge in a few —, then batched Levenberg–Marquardt from where Newton stopped
    for the rows that did not converge.  Returns (y, q, Newton iterations)."""
    Yn, res, its, ok = newton_batched(system, c, Y, tol=tol, max_iter=NEWTON_FIRST_ITERS)
    F = system.F(Yn, c)
    with np.errstate(over="ignore", invalid="ignore"):
        q = 0.5 * np.sum(F * F, axis=1)
    rest = np.flatnonzero(~ok)
    if rest.size:  # from the start again: where Newton did not converge it may have wandered off
        Yn[rest], q[rest] = _levenberg_marquardt(system, c[rest], Y[rest], max_iter=max_iter)
        its[rest] = 0
    return Yn, np.where(np.isfinite(q), q, np.inf), its


def _dedup_roots(roots, dedup_tol):
    """Distinct roots (distance ≤ dedup_tol·(1 + ‖p‖) is the same point), ordered by their
    coordinates; returns lists (points, hits, kinds = 1, iterations)."""
    pts, hits, iters = [], [], []
    for yv, it in roots:
        for i, p in enumerate(pts):
            if np.linalg.norm(yv - p) <= dedup_tol * (1.0 + np.linalg.norm(p)):
                hits[i] += 1
                break
        else:
            pts.append(yv)
            hits.append(1)
            iters.append(it)
    order = sorted(range(len(pts)), key=lambda i: tuple(pts[i]))
    return ([pts[i] for i in order], [hits[i] for i in order], [1] * len(order), [iters[i] for i in order])


def _eig_with_vectors(system, P, cP):
    """Eigenvalues (n, D) of ∂F at every point, sorted by decreasing real part, and the matching
    unit eigenvectors (n, D, D) (columns)."""
    n, D = P.shape
    if n == 0:
        return np.empty((0, D), complex), np.empty((0, D, D), complex)
    w, V = np.linalg.eig(system.jac(P, cP))
    order = np.argsort(-w.real, axis=1, kind="stable")
    w = np.take_along_axis(w, order, axis=1)
    V = np.take_along_axis(V, order[:, None, :], axis=2)
    return w.astype(np.complex128), V.astype(np.complex128)


def _unstable_modes(eigs, vecs, growth, discrete, tol, what):
    """``n_unstable``, the unstable eigenvalues and their unit eigenvectors, most unstable first
    (NaN-padded to the largest count, at least one mode so the variables always exist)."""
    import xarray as xr

    n, D = eigs.shape
    size = np.abs(growth) if discrete else growth.real
    unstable = size > (1.0 + tol if discrete else tol)
    counts = unstable.sum(axis=1).astype(np.int64)
    K = max(1, int(counts.max()) if n else 1)
    ev = np.full((n, K), np.nan + 0j)
    vv = np.full((n, K, D), np.nan + 0j)
    for p in range(n):
        idx = np.flatnonzero(unstable[p])
        idx = idx[np.argsort(-size[p, idx], kind="stable")]
        for k, j in enumerate(idx):
            v = vecs[p, :, j]
            v = v / np.linalg.norm(v)
            big = np.argmax(np.abs(v))
            v = v * (np.abs(v[big]) / v[big])  # the largest component real and positive
            ev[p, k], vv[p, k] = eigs[p, j], v
    crit = "|μ| > 1 of the step Jacobian" if discrete else "Re λ > 0"
    return {
        "n_unstable": xr.Variable(("point",), counts, {"long_name": f"unstable modes ({crit})", "units": "1"}),
        "unstable_eig_real": xr.Variable(("point", "mode"), ev.real.copy(),
                                         {"long_name": f"real part of the unstable {what}", "units": "1"}),
        "unstable_eig_imag": xr.Variable(("point", "mode"), ev.imag.copy(),
                                         {"long_name": f"imaginary part of the unstable {what}", "units": "1"}),
        "unstable_vectors": xr.Variable(("point", "mode", "unit"), vv.real.copy(),
                                        {"long_name": "unit eigenvector of the unstable mode (real part)",
                                         "units": "1"}),
        "unstable_vectors_imag": xr.Variable(("point", "mode", "unit"), vv.imag.copy(),
                                             {"long_name": "unit eigenvector of the unstable mode (imaginary part)",
                                              "units": "1"}),
    }


def _projection(traj, P, data, n_components):
    """Top principal components of the trajectories' states and everything projected on them."""
    import xarray as xr

    flat = traj.reshape(-1, traj.shape[2])
    mean = flat.mean(axis=0)
    _, sv, Vt = np.linalg.svd(flat - mean, full_matrices=False)
    k = max(1, min(int(n_components), Vt.shape[0]))
    axes = Vt[:k]
    for i in range(k):  # a deterministic sign: the largest loading positive
        if axes[i, np.argmax(np.abs(axes[i]))] < 0:
            axes[i] = -axes[i]
    var = sv ** 2
    vec = data["unstable_vectors"].values
    return {
        "pc_axes": xr.Variable(("pc", "unit"), axes, {"long_name": "principal axes of the trajectories' states",
                                                      "units": "1"}),
        "pc_mean": xr.Variable(("unit",), mean, {"long_name": "mean state of the trajectories", "units": "1"}),
        "pc_explained": xr.Variable(("pc",), var[:k] / max(var.sum(), 1e-300),
                                    {"long_name": "fraction of the trajectories' variance explained", "units": "1"}),
        "h_pc": xr.Variable(("point", "pc"), (P - mean) @ axes.T, {"long_name": "fixed point in the principal "
                                                                                 "components", "units": "1"}),
        "unstable_pc": xr.Variable(("point", "mode", "pc"), vec @ axes.T,
                                   {"long_name": "unstable eigenvector (real part) in the principal components",
                                    "units": "1"}),
        "trajectory_pc": xr.Variable(("trajectory", "time", "pc"), (traj - mean) @ axes.T,
                                     {"long_name": "trajectory in the principal components", "units": "1"}),
    }


def _certificate_note(model, system) -> str:
    if system.residual_form:
        return "Newton–Kantorovich with L = γ·sup|φ''|·‖R‖₂² (smooth φ), the affine region (piecewise-affine φ)"
    from ..models.lipschitz import jacobian_lipschitz

    probe = jacobian_lipschitz(model, np.zeros((1, system.D)), np.zeros((1, model.inputs)), 0.1)
    if probe is None:
        return (f"not certified: no Lipschitz bound of the step Jacobian is derived for {model.name} "
                f"(activation {model.activation}); roots are checked by residual only")
    return (f"Newton–Kantorovich with the Lipschitz bound of dynlab.models.lipschitz on the ball of radius "
            f"{system.CERT_BALL} about each point")



#: Levenberg–Marquardt hands a row to the Newton polish once ‖F‖∞ ≤ this (deep inside Newton's
#: quadratic basin for every model dynlab has; the polish takes it to ``tol``).
LM_FTOL = 1e-9


def _levenberg_marquardt(system, c, y, *, max_iter=200, gtol=1e-15, ftol=LM_FTOL):
    """Minimise q(y) = ½‖F(y)‖² from every row at once (batched Levenberg–Marquardt:
    (JᵀJ + μI) δ = −JᵀF, μ shrunk on success and grown on failure); a row stops at a stationary
    point (‖JᵀF‖∞ ≤ gtol), at ‖F‖∞ ≤ ftol (a root for Newton to polish) or when μ > 1e12.
    Returns (y, q)."""
    y = y.copy()
    N, D = y.shape
    F = system.F(y, c)
    q = 0.5 * np.sum(F * F, axis=1)
    mu = np.full(N, 1e-3)
    eye = np.eye(D)
    active = np.isfinite(q) & (q > 0)
    stage, done = "fixed points (Levenberg–Marquardt iterations)", 0
    for i in range(max_iter):
        idx = np.flatnonzero(active)
        # how many iterations is not known ahead: a count and a rate, the rows done as the note
        progress(stage, i, None, note=f"{active.size - idx.size} of {active.size} rows done")
        if idx.size == 0:
            break
        done = i + 1
        J = system.jac(y[idx], c[idx])
        JT = np.swapaxes(J, 1, 2)
        g = np.einsum("nij,ni->nj", J, F[idx])
        A = JT @ J
        scale = np.maximum(np.einsum("nii->n", A) / D, 1e-300)
        step = _solve_batched(A + (mu[idx] * scale)[:, None, None] * eye, -g)
        y_new = y[idx] + step
        with np.errstate(all="ignore"):
            F_new = system.F(y_new, c[idx])
            q_new = 0.5 * np.sum(F_new * F_new, axis=1)
        better = np.isfinite(q_new) & (q_new < q[idx])
        b = idx[better]
        y[b], F[b], q[b] = y_new[better], F_new[better], q_new[better]
        mu[b] = np.maximum(mu[b] / 3.0, 1e-12)
        mu[idx[~better]] *= 4.0
        small = ((np.max(np.abs(g), axis=1) <= gtol) | (q[idx] <= 1e-30) | (mu[idx] > 1e12)
                 | (np.max(np.abs(F[idx]), axis=1) <= ftol))
        active[idx[small]] = False
    progress(stage, done, done)
    return y, q

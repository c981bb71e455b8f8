"""Sussillo & Barak 2013 (Fig. 2, the 3-bit flip-flop; the FixedPointFinder figure): a GRU
trained on the flip-flop stores its 2³ = 8 memories as stable fixed points, and the saddles
between them, each with one unstable mode, route the transitions.

Per seed: a GRU (PyTorch's initialisation, ``make_model("gru", D, 3, seed=s)``) is trained on
``make_task("flipflop", T, seed=s)`` (README: p = 0.05 pulses, MSE at every step) with dynlab's
exact BPTT (``dl.train_model``, Adam); ``dl.fixed_points`` at x = 0 starts from states of its own
trajectories on the test sequences (the FixedPointFinder workflow).  The claim, checked on every
seed's data:

1. exactly 8 stable fixed points, whose read-outs W_out h + b_out carry the 8 sign patterns
   (each a memory, every |output| > 0.5);
2. each of the 12 pairs of memories that differ in one bit is joined by a saddle: a fixed point
   with exactly one unstable mode (one step-Jacobian eigenvalue |μ| > 1) whose two unstable
   branches — the map run from s* ± 10⁻³ v, v the unit unstable eigenvector — end at those two
   memories: each branch is followed, ``BRANCH_STEPS`` steps at a time and for at most
   ``BRANCH_MAX_STEPS``, until it is within a quarter of the closest two memories' distance of
   a memory (a branch that never arrives counts as joining nothing).  Arrival can take
   thousands of steps: the trained memories have slow modes (step-Jacobian radius up to
   0.99999 in full mode), so a fixed 1000-step horizon left branches half-way on 2 of 5 seeds
   (measured: 8 and 11 of 12 pairs "joined" at 1000 steps, 12 of 12 once they arrive);
   ``branch_steps_max`` records the longest arrival per seed;
3. every fixed point counted is a root to ‖F‖∞ ≤ 1e-12 and certified (Newton–Kantorovich with
   the GRU's Lipschitz bound).

Higher-index points (2 or 3 unstable modes: the faces and the centre of the cube) are found too
and reported, not judged.  Negative control: the same check on the *untrained* GRU of each seed
(same architecture, same initialisation, same search) must fail — it has one stable point, not 8.
The claim passes only if it holds on every seed and the control fails on every seed.
"""
from __future__ import annotations

import numpy as np

from .._recipe import Recipe, Scale
from .._stats import effect, fact, level_test, record_fields
from . import _flipflop as ff
from ._flipflop import FULL, LEARNED_MSE, N_BITS, QUICK

NAME = "flipflop-fixed-points"
BRANCH_STEPS = 1000
BRANCH_MAX_STEPS = 50_000
BRANCH_EPS = 1e-3
ADJACENT = [(a, a ^ (1 << k)) for a in range(2 ** N_BITS) for k in range(N_BITS) if a < a ^ (1 << k)]


def _pattern(readout, P):
    """The sign pattern code Σ_k [y_k > 0] 2^k of each state's read-out, and min_k |y_k|."""
    Y = P @ np.asarray(readout["W_out"]).T + np.asarray(readout["b_out"])
    return (Y > 0).astype(int) @ (2 ** np.arange(Y.shape[1])), np.abs(Y).min(axis=1)


def _branch_ends(m, fp, memories, codes):
    """For every root with one unstable mode: the memory code each unstable branch arrives at
    and the step it arrived (module docstring; −1 for a branch that has not arrived within a
    quarter of the closest two memories' distance after ``BRANCH_MAX_STEPS`` steps)."""
    import dynlab as dl

    n = fp.sizes["point"]
    ends = np.full((n, 2), -1, dtype=np.int64)
    arrived_at = np.full((n, 2), -1, dtype=np.int64)
    saddles = np.flatnonzero((fp["kind"].values == 1) & (fp["n_unstable"].values == 1))
    if saddles.size == 0 or memories.shape[0] == 0:
        return ends, arrived_at
    v = fp["unstable_vectors"].values[saddles, 0]
    S = fp["h_eq"].values[saddles]
    h0 = np.concatenate([S + BRANCH_EPS * v, S - BRANCH_EPS * v])
    gap = min((np.linalg.norm(a - b) for i, a in enumerate(memories) for b in memories[i + 1:]), default=np.inf)
    code = np.full(h0.shape[0], -1, dtype=np.int64)
    when = np.full(h0.shape[0], -1, dtype=np.int64)
    state, going, steps = h0, np.arange(h0.shape[0]), 0
    while going.size and steps < BRANCH_MAX_STEPS:
        x = np.zeros((going.size, BRANCH_STEPS, m.inputs))
        state = dl.simulate(m, x, state, backend="reference")["h"].values[:, -1]
        steps += BRANCH_STEPS
        dist = np.linalg.norm(state[:, None, :] - memories[None], axis=2)
        near = np.argmin(dist, axis=1)
        there = dist[np.arange(near.size), near] < 0.25 * gap
        code[going[there]], when[going[there]] = codes[near[there]], steps
        going, state = going[~there], state[~there]
    k = saddles.size
    ends[saddles, 0], ends[saddles, 1] = code[:k], code[k:]
    arrived_at[saddles, 0], arrived_at[saddles, 1] = when[:k], when[k:]
    return ends, arrived_at


def _analyse(m, readout, x, n_starts, seed):
    """fixed_points on the trajectories of x, and per point: pattern code, |y| margin, branch ends."""
    import dynlab as dl

    H = dl.simulate(m, x, backend="reference")["h"].values
    fp = dl.fixed_points(m, np.zeros(m.inputs), n_starts=n_starts, trajectories=H, seed=seed, slow_tol=1e-10)
    roots = fp["kind"].values == 1
    stable = roots & (fp["n_unstable"].values == 0)
    code, margin = _pattern(readout, fp["h_eq"].values)
    code = np.where(stable, code, -1)
    ends, arrived_at = _branch_ends(m, fp, fp["h_eq"].values[stable], code[stable])
    return fp, code, margin, ends, arrived_at


def compute(scale):
    quick = Scale.of(scale).quick
    import xarray as xr

    import dynlab as dl
    from dynlab._dataset import finish
    from dynlab.train.backprop import init_readout

    D, T, its, batch, lr, n_traj, n_starts, seeds = QUICK if quick else FULL
    found = {k: [] for k in ("seed", "kind", "n_unstable", "residual", "certified", "code", "margin", "end_a",
                             "end_b", "arrived_at", "mu")}
    control = {k: [] for k in ("seed", "kind", "n_unstable", "residual", "certified", "code", "margin", "end_a",
                               "end_b", "arrived_at", "mu")}
    losses, base_losses = [], []
    pictures = {}
    for s in seeds:
        task, m0, res = ff.train_gru(NAME, s, D, T, its, batch, lr, n_traj)
        losses.append(float(res.history["val_loss"].values[-1]))
        x, _ = task.batch("test")
        for target, model, readout in ((found, res.model, res.readout),
                                       (control, m0, init_readout(D, N_BITS, seed=[s, 0]))):
            fp, code, margin, ends, arrived_at = _analyse(model, readout, x, n_starts, s)
            mu = np.abs(dl.eigenvalues_from(fp, "step_eig")).max(axis=1)
            for k, v in (("seed", np.full(fp.sizes["point"], s)), ("kind", fp["kind"].values),
                         ("n_unstable", fp["n_unstable"].values), ("residual", fp["residual"].values),
                         ("certified", fp["certified"].values), ("code", code), ("margin", margin),
                         ("end_a", ends[:, 0]), ("end_b", ends[:, 1]),
                         ("arrived_at", arrived_at.max(axis=1)), ("mu", mu)):
                target[k].append(v)
            if s == seeds[0]:
                pictures["trained" if target is found else "control"] = fp
        base_losses.append(task.baseline)
    ds = pictures["trained"].copy()
    ctl = pictures["control"]
    ctl_vars = ["h_pc", "n_unstable", "kind", "unstable_pc", "trajectory_pc", "pc_explained", "x", "step_eig_real",
                "step_eig_imag", "stability"]
    ren = {"point": "control_point", "mode": "control_mode", "pc": "control_pc", "trajectory": "control_trajectory",
           "time": "control_time", "eig": "control_eig"}
    sub = ctl[ctl_vars].drop_vars([c for c in ctl[ctl_vars].coords]).rename({k: v for k, v in ren.items()
                                                                              if k in ctl[ctl_vars].dims})
    for v in ctl_vars:
        ds["control_" + v] = sub[v]
    for prefix, table, dim in (("found_", found, "found"), ("control_found_", control, "control_found")):
        for k, parts in table.items():
            ds[prefix + k] = xr.Variable((dim,), np.concatenate(parts))
    ds["val_loss"] = xr.Variable(("seed",), np.array(losses), {"long_name": "validation MSE after training",
                                                                "units": "1"})
    ds = ds.assign_coords(seed=("seed", np.array(seeds), {"long_name": "training seed", "units": "1"}))
    ds = finish(ds, "fixed_points")
    words = ff.run_words(D, T, its, batch, lr)
    ds.attrs.update({
        "hidden": D, "task_steps": T, "iterations": its, "batch": batch, "lr": lr,
        "n_trajectories": n_traj, "search_starts": n_starts, "baseline": float(base_losses[0]),
        "branch_steps": BRANCH_STEPS, "branch_max_steps": BRANCH_MAX_STEPS, "branch_eps": BRANCH_EPS,
        "setting": words[0],
        "scaling": (words[1] + f"{n_starts} starts on {n_traj} test trajectories, seeds {list(seeds)}"
                    + (" (quick)" if quick else "") + "; the paper's network is a continuous-time tanh RNN, "
                    "FixedPointFinder's example a GRU"),
    })
    return ds


def _judge(ds, prefix, seed):
    """The claim's three parts on one seed's points (prefix "found_" or "control_found_")."""
    sel = ds[prefix + "seed"].values == seed

    def col(k):
        return ds[prefix + k].values[sel]

    roots = col("kind") == 1
    stable = roots & (col("n_unstable") == 0)
    codes = col("code")[stable]
    one = roots & (col("n_unstable") == 1)
    pairs = {tuple(sorted((int(a), int(b)))) for a, b in zip(col("end_a")[one], col("end_b")[one])
             if a >= 0 and b >= 0 and a != b}
    joined = sum(1 for p in ADJACENT if p in pairs)
    ok_roots = bool((col("residual")[roots] <= 1e-12).all() and (col("certified")[roots] == 1).all())
    n_stable = int(stable.sum())
    passed = (n_stable == 2 ** N_BITS and len(set(codes.tolist())) == 2 ** N_BITS
              and bool((col("margin")[stable] > 0.5).all()) and joined == len(ADJACENT) and ok_roots)
    counts = np.bincount(col("n_unstable")[roots], minlength=4)
    return {"passed": bool(passed), "stable": n_stable, "distinct_patterns": len(set(codes.tolist())),
            "min_output_margin": float(col("margin")[stable].min()) if n_stable else float("nan"),
            "adjacent_pairs_joined_by_a_saddle": int(joined), "saddles_one_mode": int(counts[1]),
            "points_two_modes": int(counts[2]), "points_three_plus_modes": int(counts[3:].sum()),
            "roots": int(roots.sum()), "max_residual": float(col("residual")[roots].max()) if roots.any() else 0.0,
            "all_certified": bool((col("certified")[roots] == 1).all()),
            "saddle_mu": [round(float(v), 4) for v in np.sort(col("mu")[one])],
            "branch_steps_max": int(col("arrived_at")[one].max()) if one.any() else 0}


def check(ds):
    seeds = [int(s) for s in ds["seed"].values]
    per_seed = {str(s): _judge(ds, "found_", s) for s in seeds}
    ctl = {str(s): _judge(ds, "control_found_", s) for s in seeds}
    passed = all(r["passed"] for r in per_seed.values())
    control_failed = not any(r["passed"] for r in ctl.values())
    finding = {}
    if not passed:
        bad = [s for s in seeds if not per_seed[str(s)]["passed"]]
        finding["finding"] = ("the claim fails on seed(s) " + ", ".join(
            f"{s} ({per_seed[str(s)]['stable']} stable points, {per_seed[str(s)]['distinct_patterns']} patterns, "
            f"{per_seed[str(s)]['adjacent_pairs_joined_by_a_saddle']}/12 pairs joined)" for s in bad))
    n_ok = sum(r["passed"] for r in per_seed.values())
    return {"passed": passed,
            **record_fields(effect=effect("seeds with 8 stable points and 12 joined pairs", n_ok, 0.0, n=len(seeds)),
                            gate_items=[level_test("validation MSE", ds["val_loss"].values, LEARNED_MSE,
                                                   direction="below")],
                            seeds=len(seeds),
                            parts=[fact("the structure on every seed", passed, n_ok, n=len(seeds))]),
            "stable_points_per_seed": [per_seed[str(s)]["stable"] for s in seeds],
            "adjacent_pairs_joined_per_seed": [per_seed[str(s)]["adjacent_pairs_joined_by_a_saddle"] for s in seeds],
            "max_residual": max(r["max_residual"] for r in per_seed.values()),
            "val_loss_per_seed": [round(float(v), 6) for v in ds["val_loss"].values],
            "per_seed": [{"seed": s, **per_seed[str(s)]} for s in seeds], **finding,
            "control": {"setting": "the untrained GRU of each seed (same initialisation and search)",
                        "measured": {"stable_points_per_seed": [ctl[str(s)]["stable"] for s in seeds],
                                     "roots_per_seed": [ctl[str(s)]["roots"] for s in seeds],
                                     "per_seed": [{"seed": s, **ctl[str(s)]} for s in seeds]},
                        "passed": not control_failed}}


def draw(ds):
    from ...plot.fixed_points import plot_fixed_points
    from ...plot.style import COLORS, new_figure

    fig, axes = new_figure(3, height=3.9)
    fig.set_size_inches(13.0, 3.9)
    for i in (0, 1):
        pos = axes[i].get_subplotspec()
        axes[i].remove()
        axes[i] = fig.add_subplot(pos, projection="3d")
    trained = ds[[v for v in ("h_pc", "n_unstable", "kind", "unstable_pc", "trajectory_pc", "pc_explained", "x",
                              "step_eig_real", "step_eig_imag", "stability") if v in ds]]
    trained.attrs.update(result="fixed_points", model="gru")
    plot_fixed_points(trained, ax=axes[0])
    axes[0].set_title(f"trained GRU (seed {int(ds['seed'].values[0])}): memories and saddles", fontsize=7)
    ren = {"control_point": "point", "control_mode": "mode", "control_pc": "pc", "control_trajectory": "trajectory",
           "control_time": "time", "control_eig": "eig"}
    ctl = ds[[v for v in ds.data_vars if v.startswith("control_") and not v.startswith("control_found_")]]
    ctl = ctl.rename({k: k[len("control_"):] for k in ctl.data_vars}).rename(
        {k: v for k, v in ren.items() if k in ctl.dims})
    ctl.attrs.update(result="fixed_points", model="gru")
    plot_fixed_points(ctl, ax=axes[1])
    axes[1].set_title("control: the same GRU untrained", fontsize=7)
    ax = axes[2]
    res = check(ds)
    seeds = [int(s) for s in ds["seed"].values]
    xs = np.arange(len(seeds))
    w = 0.27
    ax.bar(xs - w, res["stable_points_per_seed"], w, color=COLORS["black"], label="stable points (trained)")
    ax.bar(xs, res["adjacent_pairs_joined_per_seed"], w, color=COLORS["vermillion"],
           label="memory pairs joined by a 1-mode saddle")
    ax.bar(xs + w, res["control"]["measured"]["stable_points_per_seed"], w, color=COLORS["sky"],
           label="stable points (untrained control)")
    ax.axhline(8, color="0.5", lw=0.8, ls=":")
    ax.axhline(12, color="0.5", lw=0.8, ls=":")
    ax.set_xticks(xs, [str(s) for s in seeds])
    ax.set_xlabel("seed")
    ax.set_ylabel("count")
    ax.set_ylim(0, 15)
    ax.set_title("claim: 8 memories, 12 one-mode saddles between neighbours", fontsize=7)
    ax.legend(frameon=False, fontsize=6, loc="upper right")
    return fig


RECIPE = Recipe(name=NAME, source="Sussillo & Barak 2013, Fig. 2 (3-bit flip-flop)",
                claim=("a GRU trained on the 3-bit flip-flop has 8 stable fixed points (one per output pattern) and "
                       "each of the 12 pairs of memories differing in one bit is joined by a saddle with exactly "
                       "one unstable mode, on every seed; the untrained GRU does not have 8"),
                compute=compute, draw=draw, check=check,
                quote="(paraphrase; the paper is not among the project's four) Sussillo & Barak (2013), Fig. 2: the "
                      "network trained on the 3-bit flip-flop implements its 8 memories as stable fixed points, and "
                      "saddle points with one unstable mode mediate the transitions between neighbouring memories",
                **ff.RECIPE)

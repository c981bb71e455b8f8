"""Beyond the papers: the bifurcation diagram of a GRU trained on the 3-bit flip-flop along one
input channel, with its special points (``dl.continuation``).

Per seed a GRU is trained as in ``flipflop-fixed-points`` (PyTorch's initialisation,
``make_task("flipflop", T, seed=s)``, exact BPTT, Adam); its memories — the stable fixed points at
x = 0, found by ``dl.fixed_points`` from states of its own trajectories — are each continued over
the input x₀ of channel 0 (channels 1 and 2 held at 0) in both directions, from x₀ = 0 to
|x₀| = ``X_MAX`` (the negative direction by continuing the mirrored network, column 0 of W_ih
negated, over [0, X_MAX]); folds, Hopf / Neimark–Sacker points, flips and branch points are
detected, located and classified on the way.  A pulse of the task (amplitude 1 on one step) must
flip bit 0: a held input of the sign opposite to a memory's bit 0 is expected to destroy that memory
at a fold (it merges with a saddle) before |x₀| = 1, while the input of its own sign leaves it.

The claim, on every seed: all 8 memories (8 distinct output patterns) exist at x₀ = 0, and each
one, held against its bit-0 sign, ends at a fold with |x₀| < 1 (the pulse amplitude), sooner than
when held with its bit-0 sign (where its first fold, if any in the range, lies farther out).
Negative control: the same check with each memory's bit 1 in place of bit 0 — the input of
channel 0 should not decide memories by bit 1 — must fail.  (Measured first on a quick run: the
fold against bit 0 at |x₀| ≤ 0.07 on every seed, the fold with it, where there is one, from 0.06
to 0.7 — a "twice as far" version of the claim failed on 2 of 3 quick seeds by one memory each.)
"""
from __future__ import annotations

import numpy as np

from .._recipe import Recipe, Scale
from .._stats import effect, fact, level_test, record_fields
from . import _flipflop as ff
from ._flipflop import FULL, LEARNED_MSE, N_BITS, QUICK

NAME = "flipflop-bifurcation"
X_MAX = 1.5
DS = 0.02


def _memories(m, readout, x, n_starts, seed):
    import dynlab as dl

    H = dl.simulate(m, x, backend="reference")["h"].values
    fp = dl.fixed_points(m, np.zeros(m.inputs), n_starts=n_starts, trajectories=H, seed=seed, slow_tol=1e-10)
    stable = (fp["kind"].values == 1) & (fp["n_unstable"].values == 0)
    P = fp["h_eq"].values[stable]
    Y = P @ np.asarray(readout["W_out"]).T + np.asarray(readout["b_out"])
    return P, Y


def _branches(m, P, w0, b0):
    """Continue every memory over x₀ both ways: rows of (memory, direction σ, x (signed), y₀,
    stability) and the special points (memory, σ, type, x, y₀, criticality)."""
    import dynlab as dl

    arcs, specials = [], []
    for k, h in enumerate(P):
        for sgn in (1.0, -1.0):
            W = np.array(m.W_ih)
            W[:, 0] *= sgn
            br = dl.continuation(m.replace(W_ih=W), "x0", 0.0, X_MAX, start=h, ds=DS, max_points=800)
            y = br["h_eq"].values @ w0 + b0
            for i in range(br.sizes["arc"]):
                arcs.append((k, sgn, sgn * float(br["param"][i]), float(y[i]), int(br["stability"][i]),
                             int(br["branch"][i])))
            ys = br["special_h"].values @ w0 + b0
            for i in range(br.sizes["special"]):
                specials.append((k, sgn, int(br["special_type"][i]), sgn * float(br["special_param"][i]),
                                 float(ys[i]), int(br["special_criticality"][i])))
    return arcs, specials


def compute(scale):
    quick = Scale.of(scale).quick
    import xarray as xr

    from dynlab._dataset import finish

    D, T, its, batch, lr, n_traj, n_starts, seeds = QUICK if quick else FULL
    arcs, specials, mems, losses, base = [], [], [], [], []
    for s in seeds:
        task, _, res = ff.train_gru(NAME, s, D, T, its, batch, lr, n_traj)
        losses.append(float(res.history["val_loss"].values[-1]))
        base.append(task.baseline)
        x, _ = task.batch("test")
        P, Y = _memories(res.model, res.readout, x, n_starts, s)
        w0, b0 = np.asarray(res.readout["W_out"])[0], float(np.asarray(res.readout["b_out"])[0])
        a, sp = _branches(res.model, P, w0, b0)
        arcs += [(s, *r) for r in a]
        specials += [(s, *r) for r in sp]
        mems += [(s, k, *np.sign(Y[k]).astype(int), float(Y[k, 0])) for k in range(len(P))]

    def var(rows, j, dim, dtype=np.float64, long_name="", units="1"):
        return xr.Variable((dim,), np.array([r[j] for r in rows], dtype=dtype).reshape(len(rows)),
                           {"long_name": long_name, "units": units})

    data = {
        "arc_seed": var(arcs, 0, "arc", np.int64, "training seed"),
        "arc_memory": var(arcs, 1, "arc", np.int64, "memory (index among the seed's stable points)"),
        "arc_direction": var(arcs, 2, "arc", np.int8, "direction of the held input (+1, -1)"),
        "x_in": var(arcs, 3, "arc", long_name="held input x0 of channel 0"),
        "y_out": var(arcs, 4, "arc", long_name="read-out of channel 0 at the equilibrium"),
        "stability": var(arcs, 5, "arc", np.int8, "stability (1 stable, 0 marginal, -1 unstable)"),
        "arc_branch": var(arcs, 6, "arc", np.int64, "branch of the continuation (0 the memory's)"),
        "special_seed": var(specials, 0, "special", np.int64, "training seed"),
        "special_memory": var(specials, 1, "special", np.int64, "memory"),
        "special_direction": var(specials, 2, "special", np.int8, "direction"),
        "special_type": var(specials, 3, "special", np.int8, "special point (1 fold, 2 Hopf, 3 Neimark-Sacker, "
                                                             "4 flip, 5 branch point)"),
        "special_x": var(specials, 4, "special", long_name="held input x0 at the special point"),
        "special_y": var(specials, 5, "special", long_name="read-out of channel 0 there"),
        "special_criticality": var(specials, 6, "special", np.int8, "criticality (-1 super, 1 sub, 0 n/a)"),
        "memory_seed": var(mems, 0, "memory_row", np.int64, "training seed"),
        "memory_index": var(mems, 1, "memory_row", np.int64, "memory"),
        "memory_bit0": var(mems, 2, "memory_row", np.int8, "sign of the read-out of channel 0"),
        "memory_bit1": var(mems, 3, "memory_row", np.int8, "sign of the read-out of channel 1"),
        "memory_bit2": var(mems, 4, "memory_row", np.int8, "sign of the read-out of channel 2"),
        "memory_y0": var(mems, 5, "memory_row", long_name="read-out of channel 0 at x = 0"),
        "val_loss": xr.Variable(("seed",), np.array(losses), {"long_name": "validation MSE after training",
                                                               "units": "1"}),
    }
    ds = xr.Dataset(data).assign_coords(seed=("seed", np.array(seeds), {"long_name": "training seed", "units": "1"}))
    ds = finish(ds, "flipflop_bifurcation")
    words = ff.run_words(D, T, its, batch, lr)
    ds.attrs.update({
        "hidden": D, "task_steps": T, "iterations": its, "batch": batch, "lr": lr,
        "search_starts": n_starts, "x_max": X_MAX, "ds": DS, "baseline": float(base[0]),
        "setting": words[0],
        "scaling": (words[1] + f"memories from {n_starts} starts on {n_traj} test trajectories, continuation "
                    f"over x0 ∈ [-{X_MAX}, {X_MAX}], seeds {list(seeds)}" + (" (quick)" if quick else "")
                    + "; beyond the papers: no published number to compare with"),
    })
    return ds


def _first_fold(ds, seed, k, sgn):
    sel = ((ds["special_seed"].values == seed) & (ds["special_memory"].values == k)
           & (ds["special_direction"].values == sgn) & (ds["special_type"].values == 1))
    xs = np.abs(ds["special_x"].values[sel])
    return float(xs.min()) if xs.size else np.nan


def _judge(ds, seed, bit="memory_bit0"):
    """The claim on one seed, reading each memory's sign from ``bit``."""
    sel = ds["memory_seed"].values == seed
    ks = ds["memory_index"].values[sel]
    bits = ds[bit].values[sel]
    codes = {tuple(int(v) for v in row) for row in zip(*(ds[f"memory_bit{j}"].values[sel] for j in range(N_BITS)))}
    against, same, ok = [], [], []
    for k, b in zip(ks, bits):
        a = _first_fold(ds, seed, int(k), -int(b))
        w = _first_fold(ds, seed, int(k), int(b))
        against.append(a)
        same.append(w)
        ok.append(bool(np.isfinite(a) and a < 1.0 and (not np.isfinite(w) or w > a)))
    passed = len(ks) == 2 ** N_BITS and len(codes) == 2 ** N_BITS and all(ok)
    return {"passed": bool(passed), "memories": int(len(ks)), "distinct_patterns": len(codes),
            "memories_meeting_the_claim": int(sum(ok)),
            "fold_against_max": float(np.nanmax(against)) if np.isfinite(against).any() else float("nan"),
            "fold_against": [round(v, 4) if np.isfinite(v) else None for v in against],
            "fold_same_min": float(np.nanmin(same)) if np.isfinite(same).any() else float("nan"),
            "fold_same": [round(v, 4) if np.isfinite(v) else None for v in same]}


def check(ds):
    seeds = [int(s) for s in ds["seed"].values]
    per = {s: _judge(ds, s) for s in seeds}
    ctl = {s: _judge(ds, s, "memory_bit1") for s in seeds}
    passed = all(r["passed"] for r in per.values())
    n_ok = sum(r["passed"] for r in per.values())
    types, counts = np.unique(ds["special_type"].values, return_counts=True)
    found = {int(t): int(c) for t, c in zip(types, counts)}
    out = {"passed": passed,
           **record_fields(effect=effect("seeds on which every memory is destroyed by the opposite input below "
                                         "|x0| = 1, sooner than by its own", n_ok, 0.0, n=len(seeds)),
                           gate_items=[level_test("validation MSE", ds["val_loss"].values, LEARNED_MSE,
                                                  direction="below")],
                           seeds=len(seeds), parts=[fact("the structure on every seed", passed, n_ok, n=len(seeds))]),
           "special_points_by_type": {str(k): v for k, v in found.items()},
           "val_loss_per_seed": [round(float(v), 6) for v in ds["val_loss"].values],
           "per_seed": [{"seed": s, **per[s]} for s in seeds],
           "control": {"setting": "the same check reading each memory's bit 1 instead of bit 0 (channel 0's input "
                                  "should not decide memories by bit 1)",
                       "measured": {"per_seed": [{"seed": s, **ctl[s]} for s in seeds]},
                       "passed": any(r["passed"] for r in ctl.values())}}
    if not passed:
        bad = [s for s in seeds if not per[s]["passed"]]
        out["finding"] = "the claim fails on seed(s) " + ", ".join(
            f"{s} ({per[s]['memories']} memories, {per[s]['memories_meeting_the_claim']} meeting it; folds against "
            f"{per[s]['fold_against']}, with {per[s]['fold_same']})" for s in bad)
    return out


def draw(ds):
    from ...plot.bifurcation import MARKS, STAB_COLORS, STAB_NAMES, special_label
    from ...plot.style import COLORS, new_figure

    fig, axes = new_figure(2, height=4.2)
    fig.set_size_inches(12.0, 4.6)
    s0 = int(ds["seed"].values[0])
    ax = axes[0]
    sel = ds["arc_seed"].values == s0
    keys = sorted({(int(k), int(d), int(b)) for k, d, b in zip(ds["arc_memory"].values[sel],
                                                                ds["arc_direction"].values[sel],
                                                                ds["arc_branch"].values[sel])})
    seen = set()
    for k, d, b in keys:
        idx = np.flatnonzero(sel & (ds["arc_memory"].values == k) & (ds["arc_direction"].values == d)
                             & (ds["arc_branch"].values == b))
        x, y, st = ds["x_in"].values[idx], ds["y_out"].values[idx], ds["stability"].values[idx]
        start = 0
        for i in range(1, idx.size + 1):
            if i == idx.size or st[i] != st[start]:
                j = min(i + 1, idx.size)
                code = int(st[start])
                ax.plot(x[start:j], y[start:j], color=STAB_COLORS[code], lw=1.2, ls="-" if code == 1 else "--",
                        label=None if code in seen else STAB_NAMES[code])
                seen.add(code)
                start = i
    ms = ds["memory_seed"].values == s0
    ax.plot(np.zeros(int(ms.sum())), ds["memory_y0"].values[ms], "o", color=COLORS["black"], ms=5,
            label="memories at x0 = 0", zorder=6)
    sp = ds["special_seed"].values == s0
    shown = set()
    for i in np.flatnonzero(sp):
        mk, col, lab = MARKS[int(ds["special_type"].values[i])]
        ax.plot(ds["special_x"].values[i], ds["special_y"].values[i], mk, color=col, ms=6, mec="white", mew=0.5,
                zorder=7, label=None if lab in shown else special_label(int(ds["special_type"].values[i]), 0))
        shown.add(lab)
    ax.axvline(1.0, color="0.6", lw=0.6, ls=":")
    ax.axvline(-1.0, color="0.6", lw=0.6, ls=":")
    ax.text(1.0, 0.02, " pulse +1", fontsize=6, va="bottom", color="0.4", transform=ax.get_xaxis_transform())
    ax.text(-1.0, 0.02, " pulse −1", fontsize=6, va="bottom", ha="left", color="0.4",
            transform=ax.get_xaxis_transform())
    ax.set_xscale("symlog", linthresh=0.1, linscale=1.5)  # the folds against bit 0 lie within |x0| < 0.1
    ax.set_xlim(-ds.attrs["x_max"], ds.attrs["x_max"])
    ax.set_xticks([-1, -0.1, -0.05, 0, 0.05, 0.1, 1], ["−1", "−0.1", "−0.05", "0", "0.05", "0.1", "1"])
    ax.set_xlabel("held input x0 on channel 0 (channels 1, 2 at 0; linear within ±0.1, log beyond)")
    ax.set_ylabel("read-out of channel 0 at the equilibrium")
    ax.set_title(f"trained GRU (seed {s0}): each memory continued both ways; LP = fold", fontsize=7.5)
    ax.legend(frameon=False, fontsize=6, loc="center left")
    ax = axes[1]
    res = check(ds)
    for j, r in enumerate(res["per_seed"]):
        a = [v for v in r["fold_against"] if v is not None]
        w = [v if v is not None else ds.attrs["x_max"] for v in r["fold_same"]]
        ax.plot(np.full(len(a), j - 0.12), a, "v", color=COLORS["vermillion"], ms=5,
                label="fold held against bit 0" if j == 0 else None)
        ax.plot(np.full(len(w), j + 0.12), w, "^", color=COLORS["blue"], ms=5,
                label=f"fold held with bit 0 (drawn at {ds.attrs['x_max']:g}: none in range)" if j == 0 else None)
    ax.axhline(1.0, color="0.5", lw=0.8, ls=":", label="the pulse amplitude, |x0| = 1")
    ax.set_xticks(range(len(res["per_seed"])), [str(r["seed"]) for r in res["per_seed"]])
    ax.set_xlabel("seed")
    ax.set_ylabel("|x0| of the memory's first fold")
    ax.set_ylim(0, ds.attrs["x_max"] * 1.05)
    ax.set_title("claim: destroyed below |x0| = 1 against bit 0, sooner than with it", fontsize=7.5)
    ax.legend(frameon=False, fontsize=6, loc="center right")
    return fig


RECIPE = Recipe(name=NAME, source="beyond the papers: bifurcations of a trained network",
                claim=("a GRU trained on the 3-bit flip-flop has 8 memories at x = 0, and along input channel 0 each "
                       "one ends at a fold before the pulse amplitude 1 when held against its bit-0 sign, sooner "
                       "than when held with it, on every seed; read by bit 1, it does not"),
                compute=compute, draw=draw, check=check,
                quote="(no paper makes this figure; the issue's question) what changes in a trained RNN's dynamics "
                      "as its input changes: the memories a held input destroys, at which bifurcations",
                **ff.RECIPE)

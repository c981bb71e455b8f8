"""MASO Fig. 5 (App. D): nearest and farthest neighbours of query digits by partition-code distance.

Setting (scaled; printed on the figure).  The trained ReLU RNNs of ``maso-fig2-codes`` (one per
seed; ``dynlab.figures.maso._training.digit_networks``: scikit-learn's 8×8 digits read pixel by
pixel, T = 64, for pixel MNIST, T = 784; D = 64 for the paper's 128).  The partition code of a
held-out image is the paper's: every step's binarised hidden state, concatenated (T·D bits); the
distance between two images is the ℓ2 distance of their codes (for 0/1 codes, √Hamming; App. C:
"the ℓ2 distance of the partition codes").  For every held-out image as the query, its 5 nearest
and 5 farthest other held-out images by that distance (ties broken by index).  The picture is the
paper's: one query per class (its first held-out image), then its 5 nearest, then its 5 farthest,
for the first seed's network.

The claim (App. D: "the partition codes [of] the images are well clustered"; Fig. 5 shows the
nearest of the same digit, the farthest of others), per seed over all held-out queries: the
nearest-5 same-class rate above the farthest-5 rate and above chance (the probability that a random
other held-out image shares the query's class) — which on the digits stand-in any representation
passes, raw pixels (0.95) and untrained codes (0.70) included — and, what makes it a claim about
the trained RNN, above the nearest-5 rate of the same network's codes before training (U = I), each
paired over seeds beyond 2 SE (effect that matters, declared: 0.05).  The raw pixels' rates are
reported beside.  Competence gate (declared): the trained networks learned (validation accuracy
above chance beyond 2 SE).  Negative control: the untrained networks' codes in the trained
networks' place, and another draw of the untrained network (seed s + 100: other W, the same U = I)
in the untrained network's place as the reference — the clustering training builds vanishes; it must
fail (a first version shuffled the labels, which fails for any representation and so tested nothing
about the RNN; a second compared the untrained network with itself in the third part, 0 by
construction).  Minimum effect (declared from the task): the resolution of a rate over the held-out
queries, 0.5/√N (0.019 on 719).
"""
from __future__ import annotations

import numpy as np

from . import _training as mt
from .._recipe import Recipe
from .._stats import accuracy_resolution, comparison, effect, level_test, record_fields

NAME = "maso-fig5-neighbours"
K = 5
SPACES = ("trained", "init", "pixels", "init_other")
#: the control's second untrained network: seed + this offset
OTHER_OFFSET = 100
#: the difference in same-class rates that matters (declared)
INTEREST = 0.05
SPACE_LABEL = {"trained": "codes, trained RNN", "init": "control: codes, untrained (U = I)", "pixels": "raw pixels",
               "init_other": "control: codes, another untrained draw"}


def sq_distances(F) -> np.ndarray:
    """All pairwise squared Euclidean distances of the rows of F (N, P), exact for 0/1 codes."""
    F = np.asarray(F, dtype=np.float64)
    sq = np.sum(F ** 2, axis=1)
    return np.maximum(sq[:, None] + sq[None, :] - 2.0 * (F @ F.T), 0.0)


def neighbours(d2, k: int = K):
    """(nearest, farthest): the k nearest and k farthest *other* rows of each row of d2 (N, N),
    by distance, ties broken by index (stable sort; the query itself excluded)."""
    N = d2.shape[0]
    order = np.argsort(d2, axis=1, kind="stable")
    near = np.empty((N, k), dtype=np.int64)
    far = np.empty((N, k), dtype=np.int64)
    for i in range(N):
        o = order[i][order[i] != i]
        near[i] = o[:k]
        # farthest: largest distance first; among equal distances the smaller index first
        far[i] = o[np.lexsort((o, -d2[i, o]))[:k]]
    return near, far


def rates(near, far, y) -> tuple[float, float]:
    """Mean over queries of the fraction of the nearest / farthest that share the query's class."""
    y = np.asarray(y)
    return float(np.mean(y[near] == y[:, None])), float(np.mean(y[far] == y[:, None]))


def chance_rate(y) -> float:
    """Probability that a uniformly drawn other image shares the query's class, averaged over queries."""
    _, n = np.unique(np.asarray(y), return_counts=True)
    N = n.sum()
    return float(np.sum(n * (n - 1)) / (N * (N - 1)))


def compute(quick: bool):
    """The Dataset (module docstring)."""
    import xarray as xr

    import dynlab as dl
    from dynlab._dataset import base_attrs
    from dynlab.backends import resolve_backend

    from . import _training as mt

    nets = mt.digit_networks(quick)
    x, y = nets["task"].batch("test")
    N, T, d = x.shape
    seeds = nets["seeds"]
    near_rate = np.zeros((len(SPACES), len(seeds)))
    far_rate = np.zeros((len(SPACES), len(seeds)))
    pix = sq_distances(x.reshape(N, -1))
    pix_near, pix_far = neighbours(pix)
    queries = np.array([int(np.flatnonzero(y == c)[0]) for c in np.unique(y)])
    show_near = show_far = None
    for i, s in enumerate(seeds):
        found = {"pixels": (pix_near, pix_far)}
        other = dl.make_model("rnn", int(nets["hidden"]), x.shape[-1], activation="relu", identity_init=True,
                              seed=int(s) + OTHER_OFFSET)
        for space in ("trained", "init", "init_other"):
            m = nets["init"][i] if space == "init" else other if space == "init_other" else nets["trained"][i].model
            found[space] = neighbours(sq_distances(dl.partition_codes(m, x).reshape(N, -1)))
        for j, space in enumerate(SPACES):
            near_rate[j, i], far_rate[j, i] = rates(*found[space], y)
        if i == 0:
            show_near, show_far = found["trained"][0][queries], found["trained"][1][queries]
    img = x[..., 0] if d == 1 else x.reshape(N, -1)
    data = {
        "near_rate": xr.Variable(("space", "seed"), near_rate, {
            "long_name": f"fraction of the {K} nearest sharing the query's class", "units": "1"}),
        "far_rate": xr.Variable(("space", "seed"), far_rate, {
            "long_name": f"fraction of the {K} farthest sharing the query's class", "units": "1"}),
        "chance": xr.Variable((), chance_rate(y), {"long_name": "same-class probability of a random other image"}),
        "query": xr.Variable(("query",), queries, {"long_name": "held-out index of the pictured queries"}),
        "nearest": xr.Variable(("query", "rank"), show_near, {"long_name": "nearest by code (first seed)"}),
        "farthest": xr.Variable(("query", "rank"), show_far, {"long_name": "farthest by code (first seed)"}),
        "pixels": xr.Variable(("batch", "time"), img, {"long_name": "held-out inputs (standardised pixels)"}),
        "label": xr.Variable(("batch",), y, {"long_name": "class label"}),
        "val_accuracy": xr.Variable(("seed",), nets["val_accuracy"], {"long_name": "trained validation accuracy"}),
    }
    coords = {"space": ("space", list(SPACES)), "seed": ("seed", np.asarray(seeds), {"long_name": "training seed"}),
              "rank": ("rank", np.arange(1, K + 1))}
    attrs = base_attrs(resolve_backend(None), f"dynlab figures make {NAME}")
    kind = mt.dataset_name(nets["task"])
    attrs.update(dataset=kind, held_out=N, steps=T, hidden=int(nets["hidden"]), setting=mt.setting_json(quick, kind),
                 scaling=mt.describe(quick, kind) + f"; neighbours among the {N} held-out sequences by ℓ2 code "
                 "distance")
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _parts(near, far, chance, reference, name, interest=INTEREST):
    """The claim's parts on per-seed rates: nearest above farthest, above chance, and above the untrained
    network's nearest rate (``reference``: the clustering is the training's doing)."""
    near = np.asarray(near)
    return [comparison(f"{name}: nearest − farthest same-class rate", near - np.asarray(far), interest=interest),
            comparison(f"{name}: nearest rate − chance", near - chance, interest=interest),
            comparison(f"{name}: nearest rate − the untrained network's", near - np.asarray(reference),
                       interest=interest)]


def check(ds) -> dict:
    ch = float(ds["chance"])
    nr, fr = ds["near_rate"], ds["far_rate"]
    init = nr.sel(space="init").values
    res = accuracy_resolution(int(ds.attrs["held_out"]))
    parts = _parts(nr.sel(space="trained").values, fr.sel(space="trained").values, ch, init, "trained", res)
    out = {"passed": all(p["passed"] for p in parts)}
    out.update(record_fields(effect=effect("nearest-5 same-class rate, trained − untrained codes", parts[2]),
                             gate_items=[level_test("trained networks' validation accuracy", ds["val_accuracy"].values,
                                                    0.1)],
                             seeds=int(ds.sizes["seed"]), parts=parts))
    for p in parts:
        out[p["name"]] = [p["mean"], p["se"]]
    out.update({"near_rate": float(nr.sel(space="trained").mean()), "far_rate": float(fr.sel(space="trained").mean()),
                "chance": ch})
    for sp in ("init", "pixels"):
        out[f"{sp}_near_rate"] = float(nr.sel(space=sp).mean())
        out[f"{sp}_far_rate"] = float(fr.sel(space=sp).mean())
    out["trained_val_accuracy_mean"] = float(ds["val_accuracy"].mean())
    out["per_seed"] = [{"seed": int(s), "near_rate": float(nr.sel(space="trained").values[i]),
                        "far_rate": float(fr.sel(space="trained").values[i]),
                        "init_near_rate": float(init[i]),
                        "val_accuracy": float(ds["val_accuracy"].values[i])} for i, s in enumerate(ds["seed"].values)]
    c = _parts(init, fr.sel(space="init").values, ch, nr.sel(space="init_other").values, "untrained", res)
    out["control"] = {"setting": "the untrained networks (U = I, before training) in the trained networks' place, and "
                                 f"another untrained draw (seed + {OTHER_OFFSET}) as their reference: no training, so "
                                 "the clustering training builds vanishes",
                      "measured": {p["name"]: [p["mean"], p["se"]] for p in c},
                      "passed": all(p["passed"] for p in c)}
    if not out["passed"]:
        out["finding"] = "; ".join(f"{p['name']} {p['mean']:+.3f} ± {p['se']:.3f} ({p['verdict']})" for p in parts)
    return out


def draw(ds):
    from matplotlib.gridspec import GridSpec

    from ...plot.style import COLORS, PANEL_WIDTH
    from .._stats import mean_se

    import textwrap

    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    q = ds["query"].values
    nq = len(q)
    fig = Figure(figsize=(PANEL_WIDTH * 2.6, 0.42 * nq + 1.4))
    FigureCanvasAgg(fig)
    top = 1 - 1.0 / (0.42 * nq + 1.4)
    gs = GridSpec(nq, 2 * K + 3, figure=fig, left=0.03, right=0.66, top=top, bottom=0.08, wspace=0.08,
                  hspace=0.12)
    gs_bar = GridSpec(1, 1, figure=fig, left=0.80, right=0.98, top=top - 0.08, bottom=0.16)
    pix = ds["pixels"].values
    y = ds["label"].values
    T = pix.shape[1]
    side = int(round(np.sqrt(T)))
    shape = (side, side) if side * side == T else (1, T)
    cmap = matplotlib.colormaps["gray_r"]

    def show(ax, idx, frame=None):
        ax.imshow(pix[idx].reshape(shape), cmap=cmap, interpolation="nearest", aspect="auto" if shape[0] == 1 else 1)
        ax.set_xticks([])
        ax.set_yticks([])
        if frame is not None:
            for sp in ax.spines.values():
                sp.set_visible(True)
                sp.set_edgecolor(frame)
                sp.set_linewidth(1.5)

    for r, qi in enumerate(q):
        ax = fig.add_subplot(gs[r, 0])
        show(ax, qi)
        ax.set_ylabel(str(int(y[qi])), rotation=0, labelpad=6, fontsize=7, va="center")
        if r == 0:
            ax.set_title("query", fontsize=7)
        for j, idx in enumerate(ds["nearest"].values[r]):
            ax = fig.add_subplot(gs[r, 2 + j])
            show(ax, idx, COLORS["blue"] if y[idx] == y[qi] else COLORS["vermillion"])
            if r == 0 and j == 2:
                ax.set_title(f"{K} nearest by code", fontsize=7)
        for j, idx in enumerate(ds["farthest"].values[r]):
            ax = fig.add_subplot(gs[r, 3 + K + j])
            show(ax, idx, COLORS["blue"] if y[idx] == y[qi] else COLORS["vermillion"])
            if r == 0 and j == 2:
                ax.set_title(f"{K} farthest by code", fontsize=7)
    ax = fig.add_subplot(gs_bar[0, 0])
    spaces = list(ds["space"].values)
    pos = np.arange(len(spaces))
    for off, var, col, lab in ((-0.2, "near_rate", COLORS["blue"], f"{K} nearest"),
                               (0.2, "far_rate", COLORS["vermillion"], f"{K} farthest")):
        v = ds[var]
        m = [mean_se(v.sel(space=s).values)[0] for s in spaces]
        e = [2 * mean_se(v.sel(space=s).values)[1] for s in spaces]
        ax.barh(pos + off, m, 0.38, xerr=e, color=col, capsize=2, label=lab)
    ax.axvline(float(ds["chance"]), color="k", ls=":", lw=1, label="chance")
    ax.set_yticks(pos, [textwrap.fill(SPACE_LABEL[s], 18) for s in spaces], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("same-class rate (±2 SE)")
    ax.legend(frameon=False, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=1)
    return fig


RECIPE = Recipe(
    name=NAME,
    source="MASO Fig. 5",
    claim="by partition-code distance of a trained ReLU RNN, an image's 5 nearest held-out neighbours share its class "
          "more often than its 5 farthest, than chance and than under the same network's codes before training "
          "(paired over seeds, 2 SE)",
    compute=compute,
    draw=draw,
    check=check,
    trains=True,
    quote="“This figure shows that partition codes the images are well clustered.” (App. D, Fig. 5: the 5 nearest "
          "and 5 farthest neighbours by partition-code distance)",
    gate="the trained networks learned the digits: validation accuracy above chance 0.1 beyond 2 SE",
    paper=mt.paper_codes_setting(), paper_cost=mt.PAPER_COST,
    title="MASO Fig. 5 — nearest / farthest held-out neighbours by partition code (trained ReLU RNN, "
          "first seed; frame: blue same class, red other)\n{scaling}",
    title_wrap=150,
    title_size=7.5,
    one_blas_thread=True,
)

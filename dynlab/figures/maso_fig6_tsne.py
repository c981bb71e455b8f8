"""MASO Fig. 6 (App. D): t-SNE of the raw pixels vs the partition codes (the RNN's VQ representation).

Setting (scaled; printed on the figure).  The trained ReLU RNNs of ``maso-fig2-codes`` (one per
seed; ``dynlab.figures._maso_training.digit_networks``: scikit-learn's 8×8 digits read pixel by
pixel, T = 64, for pixel MNIST; D = 64 for the paper's 128).  Representations of the held-out
images: the raw (standardised) pixels, 64 numbers; the partition code, every step's binarised
hidden state concatenated (T·D bits), as in the paper ("VQ representation").  The picture: 2-D
t-SNE (scikit-learn's ``TSNE``, default settings as the paper's App. C, ``random_state=0``) of both,
for the first seed's network (in quick mode on a fixed subsample of 100 images, 500 iterations).

The claim (Fig. 6: "more distinct clusters in the t-SNE plot using RNN VQ representation of
images than the raw pixel representation") is checked in the original spaces, not on the
embedding: the mean silhouette coefficient of the ten classes under the Euclidean distance (for 0/1
codes, √Hamming), codes minus pixels, per seed, beyond 2 standard errors over seeds, computed on
all held-out images.  The silhouette measures exactly "distinct clusters by class": within-class
distance against the distance to the nearest other class, per image.  Negative control: the same
test on the codes of each seed's network before training (U = I, b = 0, the same initial weights —
training ablated); it must fail.  Reported beside: a Gaussian random ReLU RNN's codes (U ~ N(0,
1.2²/D)).  Without scikit-learn the embedding falls back to PCA (said on the figure); the
silhouette is computed here (``silhouette``, tested against scikit-learn's).
"""
from __future__ import annotations

import numpy as np

from ._maso_training import one_blas_thread
from ._recipe import Recipe
from ._stats import comparison, effect, level_test, record_fields

NAME = "maso-fig6-tsne"
CODES = ("trained", "init", "random")
#: the silhouette difference that matters (declared; the paper gives none)
INTEREST = 0.02
#: quick mode: t-SNE of a fixed subsample, and half the default iterations
QUICK_SUBSAMPLE = 100
QUICK_TSNE_ITER = 500


def silhouette(F, labels) -> float:
    """Mean silhouette coefficient of ``labels`` under the Euclidean distance between rows of F
    (s_i = (b_i − a_i) / max(a_i, b_i); a_i mean distance to the other members of i's class,
    b_i the smallest mean distance to another class; s_i = 0 for a class of one)."""
    F = np.asarray(F, dtype=np.float64)
    y = np.asarray(labels)
    sq = np.sum(F ** 2, axis=1)
    d = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * (F @ F.T), 0.0))
    classes = np.unique(y)
    onehot = (y[:, None] == classes[None, :]).astype(np.float64)
    sums = d @ onehot                                   # (N, C): summed distance to each class
    counts = onehot.sum(axis=0)
    own = np.searchsorted(classes, y)
    n_own = counts[own]
    a = np.where(n_own > 1, sums[np.arange(len(y)), own] / np.maximum(n_own - 1, 1), 0.0)
    mean_other = sums / counts[None, :]
    mean_other[np.arange(len(y)), own] = np.inf
    b = mean_other.min(axis=1)
    s = np.where(n_own > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-300), 0.0)
    return float(s.mean())


def embed(F, quick: bool) -> tuple[np.ndarray, str]:
    """2-D t-SNE of the rows of F (scikit-learn, random_state=0); PCA without scikit-learn."""
    F = np.asarray(F, dtype=np.float64)
    try:
        from sklearn.manifold import TSNE
    except ImportError:
        Fc = F - F.mean(axis=0)
        _, _, vt = np.linalg.svd(Fc, full_matrices=False)
        return Fc @ vt[:2].T, "PCA (scikit-learn missing)"
    kw = {"max_iter": QUICK_TSNE_ITER} if quick else {}
    return TSNE(n_components=2, random_state=0, **kw).fit_transform(F), "t-SNE"


def _compute(quick: bool):
    """The Dataset (module docstring)."""
    import xarray as xr

    import dynlab as dl
    from dynlab._dataset import base_attrs
    from dynlab.backends import resolve_backend

    from . import _maso_training as mt

    nets = mt.digit_networks(quick)
    x, y = nets["task"].batch("test")
    N, T, d = x.shape
    seeds = nets["seeds"]
    pixels = x.reshape(N, -1)
    sil_pix = silhouette(pixels, y)
    sil = np.zeros((len(CODES), len(seeds)))
    codes0 = None
    for i in range(len(seeds)):
        for j, kind in enumerate(CODES):
            m = nets["trained"][i].model if kind == "trained" else nets[kind][i]
            c = dl.partition_codes(m, x).reshape(N, -1)
            sil[j, i] = silhouette(c, y)
            if i == 0 and kind == "trained":
                codes0 = c
    sub = (np.sort(np.random.default_rng(0).choice(N, QUICK_SUBSAMPLE, replace=False)) if quick and N > QUICK_SUBSAMPLE
           else np.arange(N))
    e_pix, method = embed(pixels[sub], quick)
    e_codes, _ = embed(codes0[sub], quick)
    data = {
        "silhouette_codes": xr.Variable(("network", "seed"), sil, {
            "long_name": "class silhouette of the partition codes (Euclidean)", "units": "1"}),
        "silhouette_pixels": xr.Variable((), sil_pix, {"long_name": "class silhouette of the raw pixels (Euclidean)",
                                                       "units": "1"}),
        "embedding_pixels": xr.Variable(("shown", "coord"), e_pix, {"long_name": f"{method} of the raw pixels"}),
        "embedding_codes": xr.Variable(("shown", "coord"), e_codes, {
            "long_name": f"{method} of the partition codes (trained, first seed)"}),
        "shown_label": xr.Variable(("shown",), y[sub], {"long_name": "class label of the embedded images"}),
        "val_accuracy": xr.Variable(("seed",), nets["val_accuracy"], {"long_name": "trained validation accuracy"}),
    }
    coords = {"network": ("network", list(CODES)), "seed": ("seed", np.asarray(seeds), {"long_name": "training seed"})}
    attrs = base_attrs(resolve_backend(None), f"dynlab figures make {NAME}")
    kind = mt.dataset_name(nets["task"])
    attrs.update(dataset=kind, held_out=N, embedded=len(sub), method=method, hidden=int(nets["hidden"]),
                 scaling=mt.describe(quick, kind) + f"; silhouette on all {N} held-out sequences, {method} of "
                 f"{len(sub)}" + (f" ({QUICK_TSNE_ITER} iterations)" if quick else ""))
    return xr.Dataset(data, coords=coords, attrs=attrs)


def check(ds) -> dict:
    from ._stats import beyond_2se

    px = float(ds["silhouette_pixels"])
    res = {k: beyond_2se(ds["silhouette_codes"].sel(network=k).values - px) for k in CODES}
    r = res["trained"]
    out = {"codes_minus_pixels": r["mean"], "codes_minus_pixels_se": r["se"],
           "silhouette_codes": float(ds["silhouette_codes"].sel(network="trained").mean()),
           "silhouette_pixels": px,
           "random_codes_minus_pixels": res["random"]["mean"], "random_codes_minus_pixels_se": res["random"]["se"],
           "trained_val_accuracy_mean": float(ds["val_accuracy"].mean()), "passed": r["passed"]}
    part = comparison("class silhouette, codes − raw pixels", ds["silhouette_codes"].sel(network="trained").values - px,
                      interest=INTEREST)
    out.update(record_fields(effect=effect("class silhouette, codes − raw pixels", part),
                             gate_items=[level_test("trained networks' validation accuracy", ds["val_accuracy"].values,
                                                    0.1)],
                             seeds=int(ds.sizes["seed"]), parts=[part]))
    out["per_seed"] = [{"seed": int(s), "silhouette_codes": float(ds["silhouette_codes"].sel(network="trained")[i]),
                        "silhouette_init_codes": float(ds["silhouette_codes"].sel(network="init")[i]),
                        "val_accuracy": float(ds["val_accuracy"][i])} for i, s in enumerate(ds["seed"].values)]
    c = res["init"]
    out["control"] = {"setting": "the codes of each seed's network before training (U = I, same initial weights): "
                                 "silhouette of the codes minus of the pixels, the same test",
                      "measured": {"init_codes_minus_pixels": c["mean"], "init_codes_minus_pixels_se": c["se"],
                                   "silhouette_init_codes": float(ds["silhouette_codes"].sel(network="init").mean())},
                      "passed": c["passed"]}
    if not out["passed"]:
        out["finding"] = (f"class silhouette of the trained networks' codes {out['silhouette_codes']:.3f} vs the raw "
                          f"pixels' {px:.3f}: codes minus pixels {r['mean']:+.3f} ± {r['se']:.3f} (mean ± SE over "
                          f"seeds; untrained codes {c['mean']:+.3f} ± {c['se']:.3f})")
    return out


def draw(ds):
    from ..plot.partition import rows_figure
    from ..plot.style import COLORS, PANEL_WIDTH, styled
    from ._stats import mean_se

    @styled
    def _draw():
        import textwrap

        import matplotlib

        fig, rows = rows_figure((3,), 2.9, width=PANEL_WIDTH * 2.8)
        lab = ds["shown_label"].values
        cmap = matplotlib.colormaps["tab10"]
        method = ds.attrs.get("method", "t-SNE")
        for ax, var, title in ((rows[0][0], "embedding_pixels", "raw pixels"),
                               (rows[0][1], "embedding_codes", "partition codes (trained, first seed)")):
            e = ds[var].values
            for i, c in enumerate(np.unique(lab)):
                sel = lab == c
                ax.scatter(e[sel, 0], e[sel, 1], s=3, color=cmap(i % 10), lw=0, label=str(c))
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{method}: {title}")
        rows[0][1].legend(frameon=False, fontsize=7, markerscale=3, loc="center left", bbox_to_anchor=(1, 0.5),
                          title="digit", title_fontsize=7)
        ax = rows[0][2]
        vals = [float(ds["silhouette_pixels"])]
        errs = [0.0]
        for k in CODES:
            m, se, _ = mean_se(ds["silhouette_codes"].sel(network=k).values)
            vals.append(m)
            errs.append(2 * se)
        cols = [COLORS["vermillion"], COLORS["blue"], COLORS["green"], COLORS["orange"]]
        ax.bar(range(4), vals, yerr=errs, color=cols, capsize=2)
        ax.axhline(0, color="k", lw=0.6)
        ticks = {"trained": "codes,\ntrained RNN", "init": "codes,\nuntrained\n(U = I)",
                 "random": "codes,\nGaussian\nrandom RNN"}
        ax.set_xticks(range(4), ["raw pixels"] + [ticks[k] for k in CODES], fontsize=7)
        ax.set_ylabel("class silhouette (Euclidean, held-out)")
        ax.set_title("class clustering, original spaces (±2 SE)")
        fig.suptitle(f"MASO Fig. 6 — {method} of raw pixels vs partition codes (held-out digits)\n"
                     + textwrap.fill(ds.attrs.get("scaling", ""), 150), fontsize=7.5)
        return fig

    return _draw()


compute = one_blas_thread(_compute)

RECIPE = Recipe(
    name=NAME,
    source="MASO Fig. 6",
    claim="the partition codes of a trained ReLU RNN cluster the held-out digits by class better than the raw pixels "
          "(class silhouette in the original spaces, seeds, 2 SE)",
    compute=compute,
    draw=draw,
    check=check,
    trains=True,
    quote="“We clearly see a more distinct clustering using VQ representation of the data than using the raw pixel "
          "representation.” (App. D, Fig. 6)",
    gate="the trained networks learned the digits: validation accuracy above chance 0.1 beyond 2 SE",
)

"""MASO Fig. 6 (App. D): t-SNE of the raw pixels vs the partition codes (the RNN's VQ representation).

Setting (scaled; printed on the figure).  The trained ReLU RNNs of ``maso-fig2-codes`` (one per
seed; ``dynlab.figures.maso._training.digit_networks``: scikit-learn's 8×8 digits read pixel by
pixel, T = 64, for pixel MNIST; D = 64 for the paper's 128).  Representations of the held-out
images: the raw (standardised) pixels, 64 numbers; the partition code, every step's binarised
hidden state concatenated (T·D bits), as in the paper ("VQ representation").

The paper shows two pictures — 2-D t-SNE (scikit-learn's ``TSNE``, default settings, App. C) of
the pixels and of the codes — and says "we see more distinct clusters in the t-SNE plot using RNN
VQ representation of images than the raw pixel representation".  The claim is judged on what the
pictures show, in the one space where pixels and codes can be compared: the 2-D t-SNE embeddings
themselves (an earlier check compared silhouettes of 4096-dimensional 0/1 codes with those of
64-dimensional pixels, two spaces whose distances do not compare).  Per seed, t-SNE (``random_state``
= the seed) of the pixels and of that seed's codes, on all held-out images; the class silhouette
(``silhouette``: within-class distance against the distance to the nearest other class) of each
2-D embedding; the claim holds when codes minus pixels is > 0 beyond 2 SE over seeds and at least
the minimum effect ``INTEREST`` (declared: 0.02, a hundredth of the silhouette's range).  The
silhouettes in the original spaces are reported beside, not judged.

Competence gate (declared), the one maso-fig2 shares on the same networks and pixels
(``maso._training.shared_gate``): the networks learned (validation accuracy above chance beyond
2 SE); the room the pixels leave above them is reported (an earlier version gated maso-fig2 on the
room for the paper's MNIST gap and maso-fig6 on nothing of the kind).

Chance level.  A silhouette has no common zero: with labels that carry no class at all, its value
depends on the geometry of the points (≈ −0.3 for 100 points in ten classes; 0.07 apart between
the quick scale's code and pixel embeddings).  Each embedding's silhouette is therefore taken above
its own chance level, the mean silhouette of the same embedding under ``NULL_PERMUTATIONS`` label
permutations (the same permutations for every embedding of a seed), and the effect is codes minus
pixels of these corrected silhouettes.

Negative control: the same test with a permutation of the labels in place of the true ones (one
more permutation per seed, drawn before the run): no class structure is left for either embedding
to show, so it must fail.  (The codes of each seed's network before training — U = I, b = 0,
training ablated — were the control until they passed it at the quick scale: random codes do not
lack class structure by construction.  They are reported beside, with a Gaussian random ReLU RNN's
codes (U ~ N(0, 1.2²/D)) in the original space.)  Quick mode embeds a fixed subsample of 100 images
with 500 iterations.  Without scikit-learn the embedding falls back to PCA (said on the figure).
"""
from __future__ import annotations

import numpy as np

from . import _training as mt
from .._recipe import Recipe
from .._stats import comparison, effect, record_fields

NAME = "maso-fig6-tsne"
CODES = ("trained", "init", "random")
#: the silhouette difference that matters (declared; the paper gives none): a hundredth of its range [−1, 1]
INTEREST = 0.02
#: label permutations per seed for each embedding's chance level, and their seed (fixed in advance)
NULL_PERMUTATIONS = 20
NULL_SEED = 20231
#: quick mode: t-SNE of a fixed subsample, and half the default iterations
QUICK_SUBSAMPLE = 100
QUICK_TSNE_ITER = 250


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


#: the embeddings each seed draws, in the order of the ``embedding`` dimension
EMBEDDINGS = ("pixels", "trained", "init")


def chance_levels(emb: dict, labels, n_seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """(null, shuffled), each (embedding, seed): the mean silhouette of each embedding under
    ``NULL_PERMUTATIONS`` permutations of ``labels``, and its silhouette under one more permutation
    (the control's labels); the same permutations for every embedding of a seed."""
    null = np.zeros((len(EMBEDDINGS), n_seeds))
    fake = np.zeros_like(null)
    for i in range(n_seeds):
        rng = np.random.default_rng([NULL_SEED, i])
        perms = [rng.permutation(labels) for _ in range(NULL_PERMUTATIONS + 1)]
        for j, k in enumerate(EMBEDDINGS):
            vals = [silhouette(emb[k][i], p) for p in perms]
            null[j, i], fake[j, i] = np.mean(vals[:-1]), vals[-1]
    return null, fake


def embed(F, quick: bool, seed: int = 0) -> tuple[np.ndarray, str]:
    """2-D t-SNE of the rows of F (scikit-learn, ``random_state=seed``); PCA without scikit-learn."""
    F = np.asarray(F, dtype=np.float64)
    try:
        from sklearn.manifold import TSNE
    except ImportError:
        Fc = F - F.mean(axis=0)
        _, _, vt = np.linalg.svd(Fc, full_matrices=False)
        return Fc @ vt[:2].T, "PCA (scikit-learn missing)"
    kw = {"max_iter": QUICK_TSNE_ITER} if quick else {}
    return TSNE(n_components=2, random_state=int(seed), **kw).fit_transform(F), "t-SNE"


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
    pixels = x.reshape(N, -1)
    sil_pix = silhouette(pixels, y)
    sil = np.zeros((len(CODES), len(seeds)))
    sub = (np.sort(np.random.default_rng(0).choice(N, QUICK_SUBSAMPLE, replace=False)) if quick and N > QUICK_SUBSAMPLE
           else np.arange(N))
    emb = {k: np.zeros((len(seeds), len(sub), 2)) for k in ("pixels", "trained", "init")}
    method = "t-SNE"
    for i, sd in enumerate(seeds):
        emb["pixels"][i], method = embed(pixels[sub], quick, int(sd))
        for j, kind in enumerate(CODES):
            m = nets["trained"][i].model if kind == "trained" else nets[kind][i]
            c = dl.partition_codes(m, x).reshape(N, -1)
            sil[j, i] = silhouette(c, y)
            if kind in emb:
                emb[kind][i] = embed(c[sub], quick, int(sd))[0]
    tsne_sil = {k: np.array([silhouette(e, y[sub]) for e in v]) for k, v in emb.items()}
    null, fake = chance_levels(emb, y[sub], len(seeds))
    e_pix, e_codes = emb["pixels"][0], emb["trained"][0]
    data = {
        "tsne_silhouette_pixels": xr.Variable(("seed",), tsne_sil["pixels"], {
            "long_name": f"class silhouette of the raw pixels' 2-D {method}", "units": "1"}),
        "tsne_silhouette_codes": xr.Variable(("seed",), tsne_sil["trained"], {
            "long_name": f"class silhouette of the trained codes' 2-D {method}", "units": "1"}),
        "tsne_silhouette_init_codes": xr.Variable(("seed",), tsne_sil["init"], {
            "long_name": f"class silhouette of the untrained codes' 2-D {method}", "units": "1"}),
        "tsne_silhouette_null": xr.Variable(("embedding", "seed"), null, {
            "long_name": f"chance level: mean class silhouette of each 2-D {method} under {NULL_PERMUTATIONS} label "
                         "permutations", "units": "1"}),
        "tsne_silhouette_shuffled": xr.Variable(("embedding", "seed"), fake, {
            "long_name": f"class silhouette of each 2-D {method} under one more label permutation (the control's "
                         "labels)", "units": "1"}),
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
    coords = {"network": ("network", list(CODES)), "embedding": ("embedding", list(EMBEDDINGS)),
              "seed": ("seed", np.asarray(seeds), {"long_name": "training seed"})}
    attrs = base_attrs(resolve_backend(None), f"dynlab figures make {NAME}")
    kind = mt.dataset_name(nets["task"])
    attrs.update(dataset=kind, held_out=N, embedded=len(sub), method=method, hidden=int(nets["hidden"]),
                 setting=mt.setting_json(quick, kind),
                 scaling=mt.describe(quick, kind) + f"; {method} of {len(sub)} held-out sequences per seed"
                 + (f" ({QUICK_TSNE_ITER} iterations)" if quick else ""))
    return xr.Dataset(data, coords=coords, attrs=attrs)


def check(ds) -> dict:
    from . import _training as mt

    if "tsne_silhouette_null" not in ds:
        from ...errors import ParameterError
        raise ParameterError("redraw", f"{NAME}: this NAME.nc predates the chance-corrected silhouettes; make it again")
    null = ds["tsne_silhouette_null"]
    fake = ds["tsne_silhouette_shuffled"]
    raw = {"pixels": ds["tsne_silhouette_pixels"].values, "trained": ds["tsne_silhouette_codes"].values,
           "init": ds["tsne_silhouette_init_codes"].values}
    above = {k: raw[k] - null.sel(embedding=k).values for k in EMBEDDINGS}        # above each one's chance level
    codes, pix, init = raw["trained"], raw["pixels"], raw["init"]
    part = comparison(f"2-D {ds.attrs.get('method', 't-SNE')} class silhouette above chance, codes − raw pixels",
                      above["trained"] - above["pixels"], interest=INTEREST)
    upart = comparison("the same, untrained codes − raw pixels", above["init"] - above["pixels"], interest=INTEREST)
    ctrl = (fake.sel(embedding="trained") - null.sel(embedding="trained")
            - fake.sel(embedding="pixels") + null.sel(embedding="pixels")).values
    cpart = comparison("the same with permuted labels", ctrl, interest=INTEREST)
    px = float(ds["silhouette_pixels"])
    orig = ds["silhouette_codes"].sel(network="trained").values
    out = {"passed": part["passed"], "tsne_silhouette_codes": float(codes.mean()),
           "tsne_silhouette_pixels": float(pix.mean()),
           "chance level (label permutations), codes": float(null.sel(embedding="trained").mean()),
           "chance level (label permutations), pixels": float(null.sel(embedding="pixels").mean()),
           "tsne_codes_minus_pixels_above_chance": part["mean"], "tsne_codes_minus_pixels_above_chance_se": part["se"],
           "reported: untrained codes (U = I) − pixels, above chance": upart["mean"],
           "reported: untrained codes (U = I) − pixels, above chance, SE": upart["se"],
           "reported: silhouette in the original spaces, codes (4096-d) − pixels (64-d)": float(orig.mean() - px),
           "reported: random RNN codes − pixels, original spaces": float(
               ds["silhouette_codes"].sel(network="random").mean() - px),
           "trained_val_accuracy_mean": float(ds["val_accuracy"].mean()),
           "room above the raw pixels' t-SNE silhouette (1 − pixels)": mt.room(pix.mean())}
    out.update(record_fields(effect=effect(part["name"], part),
                             gate_items=mt.shared_gate(ds["val_accuracy"].values),
                             seeds=int(ds.sizes["seed"]), parts=[part]))
    out["per_seed"] = [{"seed": int(s), "tsne_silhouette_codes": float(codes[i]), "tsne_silhouette_pixels": float(pix[i]),
                        "tsne_silhouette_init_codes": float(init[i]),
                        "silhouette_codes_original_space": float(orig[i]), "val_accuracy": float(ds["val_accuracy"][i])}
                       for i, s in enumerate(ds["seed"].values)]
    out["control"] = {"setting": "the same test with one more permutation of the held-out labels in place of the "
                                 "true ones (per seed, drawn before the run): no class structure left to show",
                      "measured": {"permuted_codes_minus_pixels_above_chance": cpart["mean"],
                                   "permuted_codes_minus_pixels_above_chance_se": cpart["se"]},
                      "passed": cpart["passed"]}
    if not out["passed"]:
        out["finding"] = (f"class silhouette of the 2-D embeddings: trained codes {codes.mean():.3f}, raw pixels "
                          f"{pix.mean():.3f} (chance levels {null.sel(embedding='trained').mean():.3f}, "
                          f"{null.sel(embedding='pixels').mean():.3f}); codes minus pixels above chance "
                          f"{part['mean']:+.3f} ± {part['se']:.3f} ({part['verdict']}; untrained codes "
                          f"{upart['mean']:+.3f} ± {upart['se']:.3f})")
    return out


def draw(ds):
    from ...plot.partition import rows_figure
    from ...plot.style import COLORS, PANEL_WIDTH
    from .._stats import mean_se

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
    vals, errs, per_seed = [], [], []
    for var, k in (("tsne_silhouette_pixels", "pixels"), ("tsne_silhouette_codes", "trained"),
                   ("tsne_silhouette_init_codes", "init")):
        v = ds[var].values - ds["tsne_silhouette_null"].sel(embedding=k).values
        m, se, _ = mean_se(v)
        vals.append(m)
        errs.append(2 * se)
        per_seed.append(v)
    cols = [COLORS["vermillion"], COLORS["blue"], COLORS["green"]]
    ax.bar(range(3), vals, yerr=errs, color=cols, capsize=2)
    for j, v in enumerate(per_seed):
        ax.scatter(np.full(ds.sizes["seed"], j), v, s=8, color="k", zorder=3)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(3), ["raw pixels", "codes,\ntrained RNN", "codes,\nuntrained\n(U = I)"], fontsize=7)
    ax.set_ylabel(f"class silhouette of the 2-D {method}\nabove its label-permutation level")
    ax.set_title("the pictures' clusters (±2 SE; dots: seeds)", fontsize=7.5)
    return fig


RECIPE = Recipe(
    name=NAME,
    source="MASO Fig. 6",
    claim="in the 2-D t-SNE pictures the paper shows, the partition codes of a trained ReLU RNN cluster the held-out "
          "digits by class more distinctly than the raw pixels (class silhouette of the embeddings, codes − pixels, "
          "seeds, 2 SE, ≥ 0.02)",
    compute=compute,
    draw=draw,
    check=check,
    trains=True,
    quote="“We clearly see a more distinct clustering using VQ representation of the data than using the raw pixel "
          "representation.” (App. D, Fig. 6)",
    gate="the gate maso-fig2 shares on the same networks: the trained networks learned the digits (validation accuracy "
         "above chance 0.1 beyond 2 SE); the room the raw pixels leave is reported",
    paper=mt.paper_codes_setting(), paper_cost=mt.PAPER_COST,
    title="MASO Fig. 6 — {method} of raw pixels vs partition codes (held-out digits)\n{scaling}",
    title_wrap=150,
    title_size=7.5,
    one_blas_thread=True,
)

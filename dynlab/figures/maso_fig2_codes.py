"""MASO Fig. 2 and Table 3: partition codes through time on digit sequences; k-NN on codes vs pixels.

Setting (scaled for two CPU cores, printed on the figure).  scikit-learn's 8×8 digits (1797
images, read pixel by pixel: T = 64, d = 1) stand in for pixel-by-pixel MNIST; without
scikit-learn a synthetic labelled task (``dynlab.tasks.pattern_sequences``: 5 classes of noisy,
shifted sinusoid mixtures, T = 32) stands in so the recipe always runs.  The RNN is an
*untrained* random ReLU RNN (D = 64, U ~ N(0, 1/D), W ~ N(0, 1), no bias, h_0 = 0); the paper's
is trained (D = 128).  The 2-D embedding is PCA of the prefix codes c_1..c_t (the paper uses
t-SNE; ``dynlab partition --embed --tsne`` draws that, too slow for this recipe).

An honest note on "codes beat raw pixels".  With an untrained RNN, k-NN on the codes of the
plain digits is about as accurate as k-NN on the raw pixels (both ≈ 0.98; the numbers are in the
Dataset as ``knn_codes`` vs ``knn_raw_plain``): random codes preserve the pixel geometry but do
not improve it.  The claim is therefore checked in a setting where the codes honestly carry
an advantage: every image gets a random contrast g = e^u, u ~ U[−1.5, 1.5].  A bias-free ReLU
RNN from h_0 = 0 is positively homogeneous, so its codes are *exactly* invariant to g (checked:
``codes_gain_invariant``), while raw-pixel distances are not.  k-NN accuracies are means over
several random 80/20 splits (Table 3's protocol).
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe

KS = (1, 2, 5, 10)
HIDDEN = 64
GAIN_SPREAD = 1.5


def _data():
    """(x, labels, name): scikit-learn's digits as pixel sequences where installed, else the
    synthetic pattern sequences (shared by the MASO Fig. 2 and Fig. 3 recipes)."""
    from ..tasks.labelled import digit_sequences, have_digits, pattern_sequences

    if have_digits():
        x, y = digit_sequences()
        return x, y, "digits"
    x, y = pattern_sequences(n_per_class=120, classes=5, steps=32, noise=0.4, max_shift=4, seed=0)
    return x, y, "patterns"


def compute(quick: bool):
    import xarray as xr

    import dynlab as dl
    from dynlab._dataset import base_attrs, model_attrs, model_variables
    from dynlab.analysis.partition import embed_codes, prefix_features

    x_plain, y, kind = _data()
    N, T, d = x_plain.shape
    gain = np.exp(np.random.default_rng(0).uniform(-GAIN_SPREAD, GAIN_SPREAD, N))
    x = x_plain * gain[:, None, None]
    m = dl.make_model("rnn", HIDDEN, d, activation="relu", seed=0)
    m = m.replace(b=np.zeros(HIDDEN))
    codes = dl.partition_codes(m, x)
    invariant = bool(np.array_equal(codes, dl.partition_codes(m, x_plain)))
    splits = 2 if quick else 10
    times = np.arange(T // 4, T + 1, T // 4) if quick else np.arange(T // 8, T + 1, T // 8)

    def knn(features, ks=KS):
        return dl.knn_accuracy(features, y, ks, splits=splits, seed=0)

    acc_codes_t = [knn(prefix_features(codes, t), (1,))[1] for t in times]
    acc_raw_t = [knn(x[:, :t].reshape(N, -1), (1,))[1] for t in times]
    codes_table = knn(prefix_features(codes, T))
    raw_table = knn(x.reshape(N, -1))
    raw_plain = knn(x_plain.reshape(N, -1))
    slices = np.array([T // 4, T // 2, 3 * T // 4, T])
    emb = embed_codes(codes, slices, method="pca")
    examples = np.array([int(np.flatnonzero(y == c)[0]) for c in np.unique(y)])

    k_attrs = {"long_name": "k-NN test accuracy", "units": "1"}
    data = {
        "embedding_pca": xr.Variable(("slice", "batch", "coord"), emb,
                                     {"long_name": "PCA of the prefix codes c_1..c_t", "units": "1"}),
        "knn_codes": xr.Variable(("k",), [codes_table[k] for k in KS], dict(k_attrs, long_name="k-NN accuracy, codes")),
        "knn_raw": xr.Variable(("k",), [raw_table[k] for k in KS],
                               dict(k_attrs, long_name="k-NN accuracy, raw pixels (random contrast)")),
        "knn_raw_plain": xr.Variable(("k",), [raw_plain[k] for k in KS],
                                     dict(k_attrs, long_name="k-NN accuracy, raw pixels (no contrast)")),
        "knn_codes_time": xr.Variable(("eval_time",), acc_codes_t,
                                      dict(k_attrs, long_name="1-NN accuracy on codes c_1..c_t")),
        "knn_raw_time": xr.Variable(("eval_time",), acc_raw_t,
                                    dict(k_attrs, long_name="1-NN accuracy on pixels x_1..x_t")),
        "example_codes": xr.Variable(("example", "time", "unit"), codes[examples],
                                     {"long_name": "partition code of one sequence per class", "units": "1"}),
        "example_index": xr.Variable(("example",), examples, {"long_name": "sequence index", "units": "1"}),
        "label": xr.Variable(("batch",), y, {"long_name": "class label", "units": "1"}),
        "gain": xr.Variable(("batch",), gain, {"long_name": "random contrast g", "units": "1"}),
        "x": xr.Variable(("batch", "time", "unit_in"), x, {"long_name": "input x_t (with contrast)", "units": "1"}),
    }
    data.update(model_variables(m))
    coords = {"k": ("k", np.array(KS), {"long_name": "neighbours k", "units": "1"}),
              "slice_time": ("slice", slices, {"long_name": "time slice t", "units": "step"}),
              "eval_time": ("eval_time", times, {"long_name": "time step t", "units": "step"}),
              "time": ("time", np.arange(1, T + 1), {"long_name": "time step t", "units": "step"})}
    attrs = model_attrs(m)
    attrs.update(base_attrs("numba", "dynlab figures maso-fig2-codes"))
    attrs.update(dataset=kind, splits=splits, gain_spread=GAIN_SPREAD, codes_gain_invariant=int(invariant),
                 scaling=(f"{'8x8 digits (1797, T=64)' if kind == 'digits' else 'synthetic patterns (600, T=32)'} "
                          f"for MNIST (T=784); untrained bias-free ReLU RNN D={HIDDEN} (paper: trained, D=128); "
                          f"random contrast e^U[-{GAIN_SPREAD},{GAIN_SPREAD}]; PCA for t-SNE; "
                          f"k-NN mean of {splits} random 80/20 splits"))
    return xr.Dataset(data, coords=coords, attrs=attrs)


def draw(ds):
    from matplotlib.colors import ListedColormap

    from dynlab.plot.partition import rows_figure
    from dynlab.plot.style import COLORS, PANEL_WIDTH, styled

    @styled
    def _draw():
        fig, rows = rows_figure((4, 3), 2.3, width=PANEL_WIDTH * 0.85 * 4)
        labels = ds["label"].values
        emb = ds["embedding_pca"].values
        import matplotlib

        cmap = matplotlib.colormaps["tab10"]
        for j, ax in enumerate(rows[0]):
            for i, c in enumerate(np.unique(labels)):
                sel = labels == c
                ax.scatter(emb[j, sel, 0], emb[j, sel, 1], s=2, color=cmap(i % 10), lw=0, label=str(c))
            ax.set_title(f"codes c$_1$..c$_t$, t = {int(ds['slice_time'].values[j])} (PCA)")
            ax.set_xticks([])
            ax.set_yticks([])
        rows[0][-1].legend(frameon=False, fontsize=5, markerscale=3, loc="center left", bbox_to_anchor=(1, 0.5))

        ax = rows[1][0]
        ex = ds["example_codes"].values[0]
        ax.imshow(ex.T, aspect="auto", interpolation="nearest", cmap=ListedColormap(["#f2f2f2", COLORS["blue"]]),
                  extent=(0.5, ex.shape[0] + 0.5, ex.shape[1] - 0.5, -0.5))
        ax.set_xlabel("time step t" + (" (pixel)" if ds.attrs.get("dataset") == "digits" else ""))
        ax.set_ylabel("unit")
        ax.set_title(f"codes of a class-{int(labels[int(ds['example_index'].values[0])])} sequence (blue: ReLU on)")

        ax = rows[1][1]
        t = ds["eval_time"].values
        ax.plot(t, ds["knn_codes_time"].values, "o-", ms=3, color=COLORS["blue"], label="codes c$_1$..c$_t$")
        ax.plot(t, ds["knn_raw_time"].values, "s--", ms=3, color=COLORS["vermillion"], label="pixels x$_1$..x$_t$")
        ax.set_xlabel("time step t")
        ax.set_ylabel("1-NN test accuracy")
        ax.set_title("class separation through time")
        ax.legend(frameon=False, loc="lower right")

        ax = rows[1][2]
        k = ds["k"].values
        pos = np.arange(len(k))
        ax.bar(pos - 0.2, ds["knn_codes"].values, 0.4, color=COLORS["blue"], label="codes")
        ax.bar(pos + 0.2, ds["knn_raw"].values, 0.4, color=COLORS["vermillion"], label="pixels, random contrast")
        ax.plot(pos + 0.2, ds["knn_raw_plain"].values, "k_", ms=10, mew=1.2, label="pixels, no contrast")
        lo = float(min(ds["knn_codes"].min(), ds["knn_raw"].min(), ds["knn_raw_plain"].min()))
        ax.set_ylim(max(0.0, lo - 0.05), 1.0)
        ax.set_xticks(pos, [str(v) for v in k])
        ax.set_xlabel("k")
        ax.set_ylabel("k-NN test accuracy")
        ax.set_title("Table 3: k-NN on codes vs pixels")
        ax.legend(frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=5.5)
        fig.suptitle("MASO Fig. 2 / Table 3 — partition codes refine through time\n" + ds.attrs.get("scaling", ""),
                     fontsize=7)
        return fig

    return _draw()


def check(ds) -> dict:
    codes_t = ds["knn_codes_time"].values
    gain = codes_t[-1] - codes_t[0]
    worst_drop = float(np.max(np.maximum.accumulate(codes_t) - codes_t))
    margin = ds["knn_codes"].values - ds["knn_raw"].values
    passed = bool(gain >= 0.2 and worst_drop <= 0.02 and np.all(margin > 0)
                  and int(ds.attrs.get("codes_gain_invariant", 0)) == 1)
    out = {"passed": passed, "dataset": ds.attrs.get("dataset"),
           "knn1_codes_first_slice": float(codes_t[0]), "knn1_codes_final": float(codes_t[-1]),
           "separation_gain": float(gain), "worst_drop": worst_drop,
           "codes_gain_invariant": int(ds.attrs.get("codes_gain_invariant", 0))}
    for i, k in enumerate(ds["k"].values):
        out[f"knn{k}_codes"] = float(ds["knn_codes"].values[i])
        out[f"knn{k}_raw_contrast"] = float(ds["knn_raw"].values[i])
        out[f"knn{k}_raw_plain"] = float(ds["knn_raw_plain"].values[i])
    return out


RECIPE = Recipe(
    name="maso-fig2-codes",
    source="MASO Fig. 2, Table 3",
    claim="class separation of the partition codes grows with time; k-NN on codes beats raw pixels "
          "(random-contrast digits, untrained bias-free ReLU RNN)",
    compute=compute,
    draw=draw,
    check=check,
)

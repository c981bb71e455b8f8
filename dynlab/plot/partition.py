"""``dynlab partition``: the MASO partition codes of a piecewise-affine RNN, drawn from a Dataset.

``partition_dataset(spec)`` builds the Dataset (``dynlab.analysis.partition.partition`` plus,
with ``--embed``, 2-D embeddings of the prefix codes at four time slices); ``plot_partition``
draws codes over time (units × time), the ``regions`` curve, the reconstruction error and the
embeddings; ``partition_summary`` is the one-paragraph text the command prints.
"""
from __future__ import annotations

import numpy as np

from .style import COLORS, PANEL_WIDTH, RC, styled

#: Sequences drawn in the embedding panels are coloured by label (at most this many classes).
MAX_CLASSES = 10
#: Default number of labelled sequences taken by ``--dataset`` when ``--batch`` is not given.
DATASET_BATCH = 500


def rows_figure(ncols: tuple, height: float, width: float | None = None):
    """A constrained-layout Figure on the Agg canvas with one row of Axes per entry of ``ncols``
    (each row its own subfigure, so rows with different panel counts fill the width)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width = width if width is not None else PANEL_WIDTH * 0.85 * max(ncols)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width, height * len(ncols)), layout="constrained")
        FigureCanvasAgg(fig)
        subs = fig.subfigures(len(ncols), 1, squeeze=False)[:, 0]
        rows = [list(np.atleast_1d(sub.subplots(1, n))) for sub, n in zip(subs, ncols)]
    return fig, rows


def _build_model(spec, inputs: int):
    from ..errors import ParameterError
    from ..models.stacked import StackedRNN
    from ..spec import build_model

    run = spec.run
    if spec.layers < 1:
        raise ParameterError("layers", f"must be ≥ 1, got {spec.layers}")
    if spec.layers == 1:
        return build_model(run)
    if run.weights is not None:
        raise ParameterError("layers", "a weights file holds one layer; --layers needs random weights")
    if run.model not in (None, "rnn"):
        raise ParameterError("layers", f"stacked layers are rnn layers (--model rnn), got --model {run.model}")
    extra = dict(run.settings)
    bad = [k for k in extra if k not in ("identity_init", "leak")]
    if bad:
        raise ParameterError(bad[0], "is not a setting of stacked rnn layers (identity_init, leak)")
    for key in ("K", "eta", "alpha", "g0"):
        if getattr(run, key) is not None:
            raise ParameterError(key, "is not a setting of the rnn model")
    return StackedRNN.random(run.hidden or 2, inputs, layers=spec.layers, seed=run.seed,
                             weight_scale=run.weight_scale, activation=run.activation, **extra)


def partition_dataset(spec):
    """The Dataset of a ``PartitionSpec`` (``dynlab partition``).

    Model: ``rnn`` with ReLU unless asked otherwise (``--layers L`` stacks L rnn layers).
    Input: the spec's ``--input`` sequence(s), or ``--dataset`` labelled sequences (then a
    ``label`` variable).  Returns ``dynlab.partition``'s Dataset (``codes``, ``regions``,
    ``prefix_regions``, ``reconstruction_error``, ``h``, …) plus, with ``embed``,
    ``embedding_pca`` (and with ``tsne`` also ``embedding_tsne``) (slice, batch, coord) at
    ``slice_time`` = T/4, T/2, 3T/4, T.
    """
    import dataclasses

    import xarray as xr

    from ..analysis.partition import embed_codes, partition
    from ..errors import ParameterError
    from ..spec import build_input

    run = spec.run
    if run.weights is None:
        run = dataclasses.replace(run, model=run.model or "rnn", activation=run.activation or "relu")
    spec = dataclasses.replace(spec, run=run)
    labels = None
    if spec.dataset is not None:
        from ..tasks.labelled import labelled_sequences

        x, labels, name = labelled_sequences(spec.dataset, seed=run.seed)
        if run.inputs is not None and run.inputs != x.shape[2]:
            raise ParameterError("inputs", f"the {name} data have {x.shape[2]} input feature(s), got {run.inputs}")
        n = DATASET_BATCH if run.batch is None else run.batch
        if n < 1:
            raise ParameterError("batch", f"must be ≥ 1, got {n}")
        keep = np.sort(np.random.default_rng(run.seed).permutation(len(labels))[:n])
        x, labels = x[keep], labels[keep]
        model = _build_model(dataclasses.replace(spec, run=dataclasses.replace(run, inputs=x.shape[2])), x.shape[2])
    else:
        model = _build_model(spec, run.inputs or 1)
        x = build_input(run, model.inputs)
    ds = partition(model, x, backend=run.backend, command=run.command)
    if labels is not None:
        ds["label"] = xr.Variable(("batch",), labels, {"long_name": "class label", "units": "1"})
        ds.attrs["dataset"] = name
    if spec.tsne and not spec.embed:
        raise ParameterError("tsne", "goes with --embed (it adds t-SNE to the PCA embedding)")
    if spec.tsne:
        from ..tasks.labelled import have_digits

        if not have_digits():
            raise ParameterError("tsne", "needs scikit-learn (pip install 'dynlab[digits]')")
    if spec.embed:
        if "batch" not in ds["codes"].dims or ds.sizes["batch"] < 3:
            raise ParameterError("embed", "needs at least 3 sequences: give --batch B (B ≥ 3) or --dataset")
        T = ds.sizes["time"]
        times = np.unique(np.clip(np.round(np.array([0.25, 0.5, 0.75, 1.0]) * T).astype(int), 1, T))
        codes = ds["codes"].values
        ds = ds.assign_coords(slice_time=("slice", times, {"long_name": "time slice t", "units": "step"}))
        ds["embedding_pca"] = xr.Variable(("slice", "batch", "coord"), embed_codes(codes, times, method="pca"),
                                          {"long_name": "PCA of the prefix codes c_1..c_t", "units": "1"})
        if spec.tsne:
            ds["embedding_tsne"] = xr.Variable(("slice", "batch", "coord"),
                                               embed_codes(codes, times, method="tsne", seed=run.seed),
                                               {"long_name": "t-SNE of the prefix codes c_1..c_t", "units": "1"})
    return ds


def _codes_image(ds, ax, batch: int = 0):
    from matplotlib.colors import ListedColormap

    codes = ds["codes"]
    if "batch" in codes.dims:
        codes = codes.isel(batch=batch)
    c = codes.values
    if c.ndim == 3:  # (time, unit, layer): stack the layers' units
        L = c.shape[2]
        img = np.concatenate([c[:, :, ell].T for ell in range(L)], axis=0)
    else:
        L = 1
        img = c.T
    T = img.shape[1]
    ax.imshow(img, aspect="auto", interpolation="nearest", cmap=ListedColormap(["#f2f2f2", COLORS["blue"]]),
              vmin=0, vmax=1, extent=(0.5, T + 0.5, img.shape[0] - 0.5, -0.5))
    D = c.shape[1]
    for ell in range(1, L):
        ax.axhline(ell * D - 0.5, color=COLORS["vermillion"], lw=0.8)
    ax.set_xlabel("time step t")
    ax.set_ylabel("unit" + (" (layers stacked)" if L > 1 else ""))
    which = f", sequence {batch + 1}" if "batch" in ds["codes"].dims else ""
    ax.set_title(f"partition codes{which} (blue: piece 1)")


@styled
def plot_partition(ds):
    """Codes over time (units × time), regions over time, reconstruction error; embeddings.

    Parameters
    ----------
    ds : Dataset of ``partition_dataset`` / ``dynlab.partition``

    Returns a matplotlib Figure: one row of three panels, and with embeddings a second row
    with one panel per time slice (t-SNE when present, else PCA).
    """
    emb_name = "embedding_tsne" if "embedding_tsne" in ds else ("embedding_pca" if "embedding_pca" in ds else None)
    ncols = (3,) if emb_name is None else (3, ds.sizes["slice"])
    fig, axes = rows_figure(ncols, 2.6, width=PANEL_WIDTH * 0.85 * 4 if emb_name else None)
    _codes_image(ds, axes[0][0])

    ax = axes[0][1]
    t = ds["time"].values
    ax.step(t, ds["regions"].values, where="post", color=COLORS["blue"], label="distinct codes seen")
    if "batch" in ds["codes"].dims:
        ax.step(t, ds["prefix_regions"].values, where="post", color=COLORS["vermillion"],
                label="distinct prefix codes")
    ax.set_xlabel("time step t")
    ax.set_ylabel("regions")
    ax.set_title("regions so far")
    ax.legend(frameon=False, loc="lower right")

    ax = axes[0][2]
    err = np.atleast_1d(ds["reconstruction_error"].values)
    shown = np.maximum(err, 1e-18)
    ax.semilogy(np.arange(1, err.size + 1), shown, "o", ms=3, color=COLORS["green"])
    ax.axhline(1e-12, color=COLORS["black"], lw=0.6, ls="--")
    ax.text(0.02, 1.3e-12, "1e-12", transform=ax.get_yaxis_transform(), va="bottom", fontsize=6)
    ax.set_ylim(1e-18, max(1e-9, 10 * float(np.nanmax(shown))))
    ax.set_xlim(0.5, err.size + 0.5)
    if err.size <= 8:
        ax.set_xticks(np.arange(1, err.size + 1))
    else:
        ax.set_xticks(np.unique(np.linspace(1, err.size, 5).round().astype(int)))
    ax.set_xlabel("sequence")
    ax.set_ylabel("max |A x + B − h|")
    ax.set_title(f"exact affine form ({ds.attrs.get('reconstruction_method', '')})")

    if emb_name is not None:
        emb = ds[emb_name].values
        labels = ds["label"].values if "label" in ds else None
        for j in range(emb.shape[0]):
            ax = axes[1][j]
            if labels is not None and len(np.unique(labels)) <= MAX_CLASSES:
                for i, c in enumerate(np.unique(labels)):
                    sel = labels == c
                    ax.scatter(emb[j, sel, 0], emb[j, sel, 1], s=3, color=_class_color(i), label=str(c), lw=0)
            else:
                ax.scatter(emb[j, :, 0], emb[j, :, 1], s=4, color=COLORS["blue"], lw=0)
            ax.set_title(f"{'t-SNE' if emb_name.endswith('tsne') else 'PCA'} of codes, t ≤ "
                         f"{int(ds['slice_time'].values[j])}")
            ax.set_xticks([])
            ax.set_yticks([])
        if labels is not None and len(np.unique(labels)) <= MAX_CLASSES:
            axes[1][emb.shape[0] - 1].legend(frameon=False, fontsize=5, markerscale=2, loc="center left",
                                             bbox_to_anchor=(1.0, 0.5))
    from .style import PRETTY

    title = f"{PRETTY.get(ds.attrs.get('model'), ds.attrs.get('model', ''))} ({ds.attrs.get('activation', '')}"
    title += f", {ds.attrs.get('layers', 1)} layers)" if int(ds.attrs.get("layers", 1)) > 1 else ")"
    fig.suptitle(f"MASO partition of a {title}, D = {ds.sizes['unit']}", fontsize=8)
    return fig


def _class_color(i: int) -> str:
    import matplotlib

    return matplotlib.colormaps["tab10"](i % 10)


def partition_summary(ds) -> str:
    """One paragraph: codes shape, regions at the end, reconstruction error."""
    err = float(np.max(ds["reconstruction_error"].values))
    shape = " × ".join(f"{ds.sizes[d]} {d}" for d in ds["codes"].dims)
    text = (f"codes: {shape}; distinct codes seen by t = {ds.sizes['time']}: {int(ds['regions'].values[-1])}")
    if "batch" in ds["codes"].dims:
        text += f"; distinct prefix codes over the batch: {int(ds['prefix_regions'].values[-1])}"
    text += f"; max reconstruction error |A_RNN x + B_RNN − h| = {err:.2e} ({ds.attrs.get('reconstruction_method')})"
    return text

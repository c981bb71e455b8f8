"""MASO pictures of piecewise-affine RNNs, drawn from a Dataset alone.

``plot_partition`` draws ``dynlab.partition``'s result (and ``dynlab partition``'s): codes over
time (units × time), the ``regions`` curve, the reconstruction error and, when stored, the
embeddings of the prefix codes.  ``plot_templates`` draws ``dynlab.templates``'s result: the
templates dz_c/dx of one sequence and the split z_c = ⟨template_c, x⟩ + bias_c.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .style import COLORS, PANEL_WIDTH, RC, panel_axes, styled

#: Sequences drawn in the embedding panels are coloured by label (at most this many classes).
MAX_CLASSES = 10


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
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    D = c.shape[1]
    for ell in range(1, L):
        ax.axhline(ell * D - 0.5, color=COLORS["vermillion"], lw=0.8)
    ax.set_xlabel("time step t")
    ax.set_ylabel("unit" + (" (layers stacked)" if L > 1 else ""))
    which = f", sequence {batch + 1}" if "batch" in ds["codes"].dims else ""
    ax.set_title(f"partition codes{which} (blue: piece 1)")


@styled
def plot_partition(ds, ax=None):
    """Codes over time (units × time), regions over time, reconstruction error; embeddings.

    Parameters
    ----------
    ds : the result of ``dynlab.partition`` (or of ``dynlab partition``, with embeddings)
    ax : an Axes (the codes panel only), optional

    Returns a matplotlib Figure: one row of three panels, and with embeddings a second row
    with one panel per time slice (t-SNE when present, else PCA).
    """
    if "codes" not in ds:
        raise ParameterError("ds", "a partition picture draws codes; this result has none")
    if ax is not None:
        fig, (a0,) = panel_axes(ax, 1)
        _codes_image(ds, a0)
        return fig
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
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
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
    from .labels import PRETTY

    title = f"{PRETTY.get(ds.attrs.get('model'), ds.attrs.get('model', ''))} ({ds.attrs.get('activation', '')}"
    title += f", {ds.attrs.get('layers', 1)} layers)" if int(ds.attrs.get("layers", 1)) > 1 else ")"
    fig.suptitle(f"MASO partition of a {title}, D = {ds.sizes['unit']}", fontsize=8)
    return fig


def _class_color(i: int) -> str:
    import matplotlib

    return matplotlib.colormaps["tab10"](i % 10)




@styled
def plot_templates(ds, ax=None, *, batch: int = 0):
    """The templates dz_c/dx of one sequence (one row per class, shared colour scale centred on
    0, with a colour bar) and, per class, z_c split into ⟨template_c, x⟩ and bias_c.

    Parameters
    ----------
    ds : the result of ``dynlab.templates`` (``template`` (batch, class, time, unit_in),
        ``inner_product``, ``bias``, ``z``)
    ax : an Axes (the templates only) or a sequence of two, optional
    batch : which sequence to draw

    Returns a matplotlib Figure.
    """
    if "template" not in ds:
        raise ParameterError("ds", "a templates picture draws template; this result has none")
    tpl = ds["template"]
    pick = {"batch": batch} if "batch" in tpl.dims else {}
    tpl = tpl.isel(pick).transpose("class", "time", "unit_in").values
    C, T, d = tpl.shape
    img = tpl.reshape(C, T * d)
    fig, axes = panel_axes(ax, 2, height=3.0)
    lim = float(np.abs(img).max()) or 1.0
    a0 = axes[0]
    im = a0.imshow(img, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest",
                   extent=(0.5, T + 0.5, C - 0.5, -0.5))
    a0.set_xlabel("time step t" + (f" (× {d} input features)" if d > 1 else ""))
    a0.set_ylabel("class c")
    a0.set_yticks(np.arange(C))
    a0.set_title("templates dz_c/dx" + (f", sequence {batch + 1}" if "batch" in ds["template"].dims else ""))
    fig.colorbar(im, ax=a0, shrink=0.85, label="dz_c/dx")
    if axes[1] is not None:
        a1 = axes[1]
        inner = np.atleast_1d(ds["inner_product"].isel(pick).values)
        bias = np.atleast_1d(ds["bias"].isel(pick).values)
        z = np.atleast_1d(ds["z"].isel(pick).values)
        c = np.arange(C)
        a1.bar(c - 0.2, inner, width=0.4, color=COLORS["blue"], label=r"$\langle$template, x$\rangle$")
        a1.bar(c + 0.2, bias, width=0.4, color=COLORS["orange"], label="bias")
        a1.plot(c, z, "o", color=COLORS["black"], ms=4, label="z = sum")
        a1.axhline(0, color="0.6", lw=0.6)
        a1.set_xticks(c)
        a1.set_xlabel("class c")
        a1.set_ylabel("output z_c")
        a1.set_title(f"largest z: class {int(np.argmax(z))}")
        a1.legend(frameon=False)
    return fig

"""Shared figure styling: paper-sized panels, readable fonts, colour-blind-safe colours.

Figures are built as ``matplotlib.figure.Figure`` objects on the Agg canvas, never through
pyplot's global state, so drawing works headless (CLI, CI) and does not change the backend
of an interactive session that calls the library.
"""
from __future__ import annotations

import os

from .._palette import COLORS  # noqa: F401  (Okabe & Ito's palette; the help texts name its colours)
from ..errors import ParameterError
from .labels import PRETTY  # noqa: F401  (display names; kept importable from here)

#: Line colours in order, for series without a fixed meaning.
CYCLE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")

#: Width of one panel in inches (one column of a two-column paper page).
PANEL_WIDTH = 3.4
#: Picture formats chosen by the suffix of the output path.
FORMATS = (".png", ".pdf", ".svg")

RC = {
    "font.size": 8,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "axes.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "lines.linewidth": 1.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "savefig.dpi": 200,
    "mathtext.fontset": "dejavusans",
    "svg.fonttype": "none",
    "pdf.fonttype": 42,
}


def check_picture_path(path) -> str:
    """``path`` as a string if its suffix is a picture format, else a ParameterError on ``out``."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise ParameterError("out", f"must end in {', '.join(FORMATS)} (the format is read from the suffix), "
                                    f"got {path!r}")
    return path


def new_figure(ncols: int = 1, height: float = 3.0):
    """A Figure on the Agg canvas with ``ncols`` side-by-side panels of PANEL_WIDTH inches.

    Returns (fig, axes) with ``axes`` a list of length ``ncols``; the layout is constrained
    so labels never overlap.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(PANEL_WIDTH * ncols, height), layout="constrained")
        FigureCanvasAgg(fig)
        axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def panel_axes(ax, n: int, height: float = 3.0, width: float | None = None):
    """(fig, axes) for a picture of ``n`` panels.

    ``ax`` None: a new Figure of ``n`` panels side by side.  A sequence of ``n`` Axes: those.
    One Axes: the picture's first (main) panel is drawn into it and the other panels are
    skipped (their entries in ``axes`` are None).  Anything else is a ParameterError on ``ax``.
    """
    if ax is None:
        return new_figure(n, height=height) if width is None else _wide_figure(n, height, width)
    if hasattr(ax, "figure") and not isinstance(ax, (list, tuple)):
        return ax.figure, [ax] + [None] * (n - 1)
    axes = list(ax)
    if len(axes) != n:
        raise ParameterError("ax", f"this picture has {n} panel(s); give one Axes or {n}, got {len(axes)}")
    return axes[0].figure, axes


def _wide_figure(n: int, height: float, width: float):
    fig, axes = new_figure(n, height=height)
    fig.set_size_inches(width, height)
    return fig, axes


def styled(func):
    """Run a drawing function under the shared rc settings (fonts, line widths)."""
    import functools

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        import matplotlib
        with matplotlib.rc_context(RC):
            return func(*args, **kwargs)
    return wrapper


def save_figure(fig, path) -> str:
    """Write ``fig`` to ``path`` in the format its suffix names (png, pdf, svg); returns the path."""
    import matplotlib

    path = check_picture_path(path)
    with matplotlib.rc_context(RC):
        try:
            fig.savefig(path)
        except OSError as exc:
            raise ParameterError("out", f"cannot write {path} ({exc.strerror or exc})") from None
    return path

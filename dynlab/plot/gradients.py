"""Gradient flow pictures: ‖∂h_T/∂h_t‖₂ against T − t, one line per entry.

``plot_gradients`` draws ``dynlab.gradient_norms``'s result (one model) and ``dynlab
gradients``'s (one entry per model along ``model``, with a Lyapunov spectrum panel when the
spectrum was computed), from the Dataset alone.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .labels import entries, entry_data, entry_title
from .style import CYCLE, panel_axes, styled

#: Lowest value drawn on the log axis; vanishing curves continue below it (in the Dataset).
FLOOR = 1e-30


@styled
def plot_gradients(ds, ax=None):
    """‖∂h_T/∂h_t‖₂ against T − t (log y axis), one line per entry with its ratio in the legend;
    with a ``lyapunov`` spectrum of more than one exponent, a second panel draws λ_i against i.

    Parameters
    ----------
    ds : the result of ``dynlab.gradient_norms`` or of ``dynlab gradients`` (or its NetCDF file)
    ax : matplotlib Axes (the norm panel only) or a sequence of one or two, optional

    Returns
    -------
    matplotlib Figure.
    """
    if "jac_norm" not in ds:
        raise ParameterError("ds", "a gradient-flow picture draws jac_norm; this result has none")
    names = entries(ds)
    spectrum = "lyapunov" in ds and ds.sizes.get("exponent", 0) > 1
    fig, axes = panel_axes(ax, 2 if spectrum else 1, height=3.0)
    T = ds.sizes["time"]
    lag = T - ds["time"].values
    a0 = axes[0]
    for i, name in enumerate(names):
        y = entry_data(ds, name, "jac_norm").values
        if y.ndim > 1:  # a batched result: the first sequence
            y = y.reshape(-1, y.shape[-1])[0]
        keep = np.isfinite(y) & (y > 0)
        r = np.ravel(entry_data(ds, name, "ratio").values)[0]
        a0.plot(lag[keep], y[keep], color=CYCLE[i % len(CYCLE)], lw=1.0,
                label=f"{entry_title(ds, name)} (ratio {float(r):.3g})")
    a0.set_yscale("log")
    vals = ds["jac_norm"].values
    finite = vals[np.isfinite(vals) & (vals > 0)]
    if finite.size:  # a vanishing curve must not flatten the others: it leaves at FLOOR
        lo, hi = max(float(finite.min()) / 2, FLOOR), float(finite.max()) * 2
        if hi / lo < 100:  # at least two decades, so the axis reads in powers of ten
            mid = np.sqrt(lo * hi)
            lo, hi = mid / 10, mid * 10
        a0.set_ylim(lo, hi)
    a0.set_xlabel("T − t (steps back from the end)")
    a0.set_ylabel(r"$\|\partial h_T / \partial h_t\|_2$")
    a0.set_title(f"gradient flow, T={T}")
    a0.legend(frameon=False, loc="lower left")
    if spectrum and axes[1] is not None:
        a1 = axes[1]
        idx = ds["exponent"].values
        for i, name in enumerate(names):
            a1.plot(idx, entry_data(ds, name, "lyapunov").values, "o-", ms=3, color=CYCLE[i % len(CYCLE)],
                    label=entry_title(ds, name))
        a1.axhline(0.0, color="0.6", lw=0.6)
        a1.set_xlabel("exponent index i")
        a1.set_ylabel(r"Lyapunov exponent $\lambda_i$ (1/step)")
        a1.set_title("finite-time Lyapunov spectrum")
    return fig

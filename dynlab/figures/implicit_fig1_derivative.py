"""implicit Fig. 1: the derivative of a single implicit neuron y = f(w y + q x + t) with respect to w.

Eq. 2 as corrected (f'(x̃) in the numerator), dy/dw = f'(x̃) y / (1 − w f'(x̃)), against central
differences of the solved equilibrium, over a range of w; the printed form y / (1 − w f'(x̃))
is drawn too (the erratum).
"""
from __future__ import annotations

import numpy as np

from ._recipe import Recipe

Q, X, T = 1.0, 0.7, -0.3
EPS = 1e-6


def compute(quick: bool):
    import xarray as xr

    import dynlab as dl
    from dynlab._dataset import base_attrs

    ws = np.linspace(-6.0, 3.5, 40 if quick else 200)
    y, eq2, num, printed = (np.empty_like(ws) for _ in range(4))
    for i, w in enumerate(ws):
        y[i], eq2[i] = dl.implicit_neuron(w, Q, X, T)
        num[i] = (dl.implicit_neuron(w + EPS, Q, X, T)[0] - dl.implicit_neuron(w - EPS, Q, X, T)[0]) / (2 * EPS)
        s = 1.0 / (1.0 + np.exp(-(w * y[i] + Q * X + T)))
        printed[i] = y[i] / (1.0 - w * s * (1.0 - s))
    return xr.Dataset(
        {"y": ("w", y, {"long_name": "equilibrium y", "units": "1"}),
         "dydw_eq2": ("w", eq2, {"long_name": "eq. 2 (corrected): f' y / (1 − w f')", "units": "1"}),
         "dydw_numerical": ("w", num, {"long_name": f"central difference, ε = {EPS:g}", "units": "1"}),
         "dydw_printed": ("w", printed, {"long_name": "eq. 2 as printed: y / (1 − w f')", "units": "1"})},
        coords={"w": ("w", ws, {"long_name": "recurrent weight w", "units": "1"})},
        attrs={"model": "implicit", "activation": "sigmoid", "q": Q, "x": X, "t": T, "seed": -1,
               "scaling": "as the paper: one sigmoid neuron; w from −6 to 3.5 (unique equilibrium), q=1, x=0.7, t=−0.3",
               **base_attrs("numpy", "dynlab figures implicit-fig1-derivative")},
    )


def draw(ds):
    from dynlab.plot.style import COLORS, new_figure, styled

    @styled
    def _draw():
        fig, (a, b) = new_figure(2, height=2.8)
        w = ds.w.values
        a.plot(w, ds.y.values, color=COLORS["black"])
        a.set_xlabel("recurrent weight w")
        a.set_ylabel("equilibrium y = f(w y + q x + t)")
        a.set_title("(a) the implicit neuron")
        b.plot(w, ds.dydw_eq2.values, color=COLORS["blue"], label="eq. 2, f' in numerator")
        step = max(1, w.size // 25)
        b.plot(w[::step], ds.dydw_numerical.values[::step], "o", ms=3, color=COLORS["vermillion"], label="numerical")
        b.plot(w, ds.dydw_printed.values, "--", color=COLORS["sky"], label="eq. 2 as printed")
        b.set_xlabel("recurrent weight w")
        b.set_ylabel("dy/dw")
        b.set_title("(b) derivative")
        b.legend(frameon=False)
        fig.suptitle(ds.attrs["scaling"], fontsize=6)
        return fig

    return _draw()


def check(ds):
    num = ds.dydw_numerical.values
    err = np.abs(ds.dydw_eq2.values - num) / np.maximum(np.abs(num), 1e-12)
    err_printed = np.abs(ds.dydw_printed.values - num) / np.maximum(np.abs(num), 1e-12)
    # central differences of a solve to 1e-14 with ε = 1e-6: error ≲ 1e-8 relative
    return {"passed": bool(err.max() <= 1e-6), "max_rel_error_eq2": float(err.max()),
            "min_rel_error_printed_form": float(err_printed.min())}


RECIPE = Recipe("implicit-fig1-derivative", "implicit Fig. 1",
                "eq. 2 (with f'(x̃) in the numerator) agrees with the numerical derivative of y(w)",
                compute, draw, check)

"""implicit Fig. 1: the derivative of a single implicit sigmoid neuron y = f(w y + q x + t) with respect to w.

The equilibrium y(w) is solved over a range of recurrent weights w (to 1e-14) and its derivative is
taken by central differences (ε = 1e-6).  Two closed forms are compared with it:

- eq. 2 as it must read, dy/dw = f'(x̃) y / (1 − w f'(x̃)), with x̃ = w y + q x + t the neuron's total
  input — what solving the paper's own line above eq. 2, dy/dw = f'(x̃)(w dy/dw + y), gives;
- eq. 2 as printed, dy/dw = f'(x) y / (1 − w f'(x̃)): f' in the numerator is evaluated at the
  external input x instead of x̃ (only the tilde is missing).

The claim (the paper: eq. 2 "fits perfectly to numerical approximations") is checked as: the largest
relative difference between the closed form and the numerical derivative over the whole w range is
at most 1e-6 (central differences of a solve to 1e-14 are accurate to ≈ 1e-8 relative).  Negative
control: the same check on the form as printed must fail (it agrees only where f'(x) happens to
equal f'(x̃)).  The paper gives no values of q, x, t or the w range for Fig. 1; those used here are ours.
"""
from __future__ import annotations

import numpy as np

from .._recipe import Recipe, Scale, setting, setting_attr
from .._stats import effect, fact, record_fields

Q, X, T = 1.0, 0.7, -0.3
EPS = 1e-6
TOL = 1e-6  # relative agreement required of a closed form with the central difference


def compute(scale):
    quick = Scale.of(scale).quick
    import xarray as xr

    import dynlab as dl
    from dynlab._dataset import base_attrs
    from dynlab.activations import dphi
    from dynlab.backends import resolve_backend

    ws = np.linspace(-6.0, 3.5, 40 if quick else 200)
    y, eq2, num, printed = (np.empty_like(ws) for _ in range(4))
    for i, w in enumerate(ws):
        y[i], eq2[i] = dl.implicit_neuron(w, Q, X, T)
        num[i] = (dl.implicit_neuron(w + EPS, Q, X, T)[0] - dl.implicit_neuron(w - EPS, Q, X, T)[0]) / (2 * EPS)
        fp_tilde = dphi("sigmoid", w * y[i] + Q * X + T)
        printed[i] = dphi("sigmoid", X) * y[i] / (1.0 - w * fp_tilde)
    return xr.Dataset(
        {"y": ("w", y, {"long_name": "equilibrium y", "units": "1"}),
         "dydw_eq2": ("w", eq2, {"long_name": "eq. 2 corrected: f'(x̃) y / (1 − w f'(x̃))", "units": "1"}),
         "dydw_numerical": ("w", num, {"long_name": f"central difference, ε = {EPS:g}", "units": "1"}),
         "dydw_printed": ("w", printed, {"long_name": "eq. 2 as printed: f'(x) y / (1 − w f'(x̃))", "units": "1"})},
        coords={"w": ("w", ws, {"long_name": "recurrent weight w", "units": "1"})},
        attrs={"model": "implicit", "activation": "sigmoid", "q": Q, "x": X, "t": T, "seed": -1, "eps": EPS,
               "tolerance": TOL,
               "setting": setting_attr(data="one neuron, w ∈ [−6, 3.5]", D=1),
               "scaling": (f"one sigmoid neuron as the paper; {ws.size} values of w in [−6, 3.5] (unique equilibrium); "
                           f"q = {Q:g}, x = {X:g}, t = {T:g} are ours (the paper gives no values for Fig. 1)"),
               **base_attrs(resolve_backend(None), "dynlab figures implicit-fig1-derivative")},
    )


def _rel(ds, var):
    num = ds.dydw_numerical.values
    return np.abs(ds[var].values - num) / np.maximum(np.abs(num), 1e-12)


def draw(ds):
    from dynlab.plot.style import COLORS, new_figure

    fig, (a, b, c) = new_figure(3, height=2.8)
    w = ds.w.values
    a.plot(w, ds.y.values, color=COLORS["black"])
    a.set_xlabel("recurrent weight w")
    a.set_ylabel("equilibrium y = f(w y + q x + t)")
    a.set_title("(a) the implicit neuron")
    b.plot(w, ds.dydw_eq2.values, color=COLORS["blue"], label="eq. 2 with f'(x̃) (corrected)")
    step = max(1, w.size // 25)
    b.plot(w[::step], ds.dydw_numerical.values[::step], "o", ms=3, color=COLORS["vermillion"],
           label="numerical (central difference)")
    b.plot(w, ds.dydw_printed.values, "--", color=COLORS["sky"], label="eq. 2 as printed, f'(x)")
    b.set_xlabel("recurrent weight w")
    b.set_ylabel("dy/dw")
    b.set_title("(b) derivative")
    b.legend(frameon=False, fontsize=6)
    c.semilogy(w, np.maximum(_rel(ds, "dydw_eq2"), 1e-17), color=COLORS["blue"], label="corrected")
    c.semilogy(w, np.maximum(_rel(ds, "dydw_printed"), 1e-17), "--", color=COLORS["sky"], label="as printed")
    c.axhline(float(ds.attrs["tolerance"]), color=COLORS["black"], lw=0.6, ls=":")
    c.text(w[0], float(ds.attrs["tolerance"]) * 1.5, "check: ≤ 1e-6", fontsize=6, va="bottom")
    c.set_xlabel("recurrent weight w")
    c.set_ylabel("|closed form − numerical| / |numerical|")
    c.set_title("(c) relative difference")
    c.legend(frameon=False, fontsize=6, loc="center", bbox_to_anchor=(0.5, 0.6))
    return fig


def check(ds):
    tol = float(ds.attrs["tolerance"])
    err = _rel(ds, "dydw_eq2")
    err_printed = _rel(ds, "dydw_printed")
    ok = bool(err.max() <= tol)
    w, y = ds.w.values, ds.y.values
    from dynlab.activations import sigmoid

    resid = float(np.max(np.abs(y - sigmoid(w * y + ds.attrs["q"] * ds.attrs["x"] + ds.attrs["t"]))))
    out = {"passed": ok, "max_rel_error_eq2_corrected": float(err.max()), "tolerance": tol,
           **record_fields(effect=effect("max relative error of eq. 2 (corrected)", float(err.max()), 0.0),
                           gate_items=[{"name": "max residual of the solved equilibria", "met": resid <= 1e-12,
                                        "value": resid}], seeds=1,
                           parts=[fact(f"corrected eq. 2 within {tol:g} of the numerical derivative", ok,
                                       float(err.max()))]),
           "w_points": int(err.size),
           "control": {"setting": "eq. 2 as printed, f'(x) in the numerator, under the same check",
                       "measured": {"max_rel_error_printed": float(err_printed.max()),
                                    "median_rel_error_printed": float(np.median(err_printed)),
                                    "w_points_within_tolerance": int(np.sum(err_printed <= tol))},
                       "passed": bool(err_printed.max() <= tol)}}
    if not ok:
        out["finding"] = (f"the corrected eq. 2 differs from the numerical derivative by up to "
                          f"{err.max():.2e} relative (> {tol:g})")
    return out


RECIPE = Recipe("implicit-fig1-derivative", "implicit Fig. 1",
                "eq. 2 with f'(x̃) in the numerator agrees with the numerical derivative of y(w) to 1e-6 relative; "
                "the form as printed, f'(x), does not",
                compute, draw, check,
                quote="“[eq. 2] which fits perfectly to numerical approximations of this derivative, as can be seen "
                      "in figure 1.” (§2.2, Fig. 1)",
                gate="the equilibria the derivatives rest on are solved: residual |y − f(w y + q x + t)| ≤ 1e-12 at "
                     "every w",
                paper=setting(D=1),
                title="{scaling}", title_size=6)

"""iRNN paper Fig. 7: eigenvalues of ∇φ·U − I of *trained* iRNNs over every point of a dataset.

For each seed an iRNN is trained by dynlab on the stand-in data set (8×8 digits read pixel by
pixel, ``_irnn_digits``); then ``dynlab.spectrum`` takes the eigenvalues of ∇φ(U s_m + W x_m + b)·U
− αI at every point s_m = h_m + h_{m-1} of the trajectories of the whole validation split (the
paper: all points of the HAR-2 data set).  The claim checked: on every seed every eigenvalue
has a negative real part (the largest real part over all points is < 0 on each seed, and its
mean over seeds is below 0 by more than 2 SE), on networks that did learn the task (validation
accuracy above chance 0.1 by more than 2 SE).  The histogram pools every seed's real parts; the
complex plane shows seed 0's eigenvalues on the first validation sequences.

Negative control: the same spectral check on an iRNN whose spectrum is not stable — an untrained
iRNN at weight scale 2 (U ~ N(0, 4/D), spectral radius ≈ 2 > α) on the same inputs.
"""
from __future__ import annotations

import textwrap

import numpy as np

from . import _irnn_digits as tr
from ._recipe import Recipe
from ._stats import beyond_2se, mean_se, seeds_for

NAME = "irnn-fig7-eigenvalues"
BINS = np.linspace(-2.5, 1.5, 81)
CONTROL_SCALE = 2.0
PLANE_SEQ = 4          # validation sequences of seed 0 whose eigenvalues the complex plane shows


def _spectrum_summary(model, xv):
    import dynlab as dl

    sp = dl.spectrum(model, xv, step=False)
    re, im = sp["eig_real"].values, sp["eig_imag"].values          # (batch, time, eig)
    return re, im, sp["max_real"].values.ravel()


def compute(quick: bool):
    import xarray as xr

    import dynlab as dl

    seeds = seeds_for(quick)
    models, accs, hists, maxre = [], [], [], []
    plane = None
    for s in seeds:
        m, acc, xv = tr.trained(s, bool(quick))
        re, im, mx = _spectrum_summary(m, xv)
        models.append(m)
        accs.append(acc)
        hists.append(np.histogram(np.clip(re.ravel(), BINS[0], BINS[-1]), BINS)[0])
        maxre.append(mx)
        if plane is None:
            plane = (re[:PLANE_SEQ].reshape(-1), im[:PLANE_SEQ].reshape(-1))
    ctrl = dl.make_model("irnn", tr.D, 1, K=tr.K, eta=tr.ETA0, weight_scale=CONTROL_SCALE, seed=0)
    cre, cim, cmx = _spectrum_summary(ctrl, xv)
    ds = xr.Dataset(
        {"hist": (("seed", "bin"), np.array(hists), {"long_name": "eigenvalues per real-part bin", "units": "1"}),
         "max_real": (("seed", "point"), np.array(maxre),
                      {"long_name": "largest real part of ∇φU − I at each point", "units": "1"}),
         "val_accuracy": (("seed",), np.array(accs), {"long_name": "validation accuracy", "units": "1"}),
         "plane_real": (("plane",), plane[0], {"long_name": "Re λ (seed 0, first sequences)", "units": "1"}),
         "plane_imag": (("plane",), plane[1], {"long_name": "Im λ (seed 0, first sequences)", "units": "1"}),
         "control_hist": (("bin",), np.histogram(np.clip(cre.ravel(), BINS[0], BINS[-1]), BINS)[0],
                          {"long_name": "control: eigenvalues per real-part bin", "units": "1"}),
         "control_max_real": (("point",), cmx, {"long_name": "control: largest real part", "units": "1"}),
         **tr.params_vars(models, seeds)},
        coords={"seed": seeds, "bin_edge": ("bin_edge", BINS), "bin": 0.5 * (BINS[1:] + BINS[:-1])})
    ds.attrs.update({"figure": NAME, "points_per_seed": int(maxre[0].size), "eigenvalues_per_point": tr.D,
                     "control_weight_scale": CONTROL_SCALE, "dynlab_version": dl.__version__,
                     "command": f"dynlab figures make {NAME}" + (" --quick" if quick else ""),
                     "scaling": tr.setting(quick) + f"; {len(seeds)} seeds; spectra at the {xv.shape[0]}×64 points "
                                f"of the validation split (paper: HAR-2, D=128)" + (" (quick)" if quick else "")})
    return ds


def check(ds):
    per = ds["max_real"].max("point").values
    acc = ds["val_accuracy"].values
    neg = beyond_2se(per, direction="negative")
    learned = beyond_2se(acc - 0.1)
    out = {"passed": bool(np.all(per < 0) and neg["passed"] and learned["passed"]),
           "max_real_part": float(per.max()), "max_real_mean_se": [round(neg["mean"], 5), round(neg["se"], 5)],
           "val_accuracy_mean_se": [round(learned["mean"] + 0.1, 4), round(learned["se"], 4)],
           "points_per_seed": int(ds.attrs["points_per_seed"]),
           "per_seed": [{"seed": int(s), "max_real": float(p), "val_accuracy": float(a),
                         "frac_points_unstable": float(np.mean(ds["max_real"].sel(seed=s).values >= 0))}
                        for s, p, a in zip(ds["seed"].values, per, acc)]}
    cm = float(ds["control_max_real"].max())
    out["control"] = {"setting": f"untrained iRNN at weight scale {ds.attrs['control_weight_scale']:g} "
                                 "(spectral radius of U ≈ 2 > α), same inputs",
                      "measured": {"max_real_part": cm,
                                   "frac_points_unstable": float(np.mean(ds["control_max_real"].values >= 0))},
                      "passed": bool(cm < 0)}
    if not out["passed"]:
        unstable = [round(float(np.mean(ds["max_real"].sel(seed=s).values >= 0)), 4) for s in ds["seed"].values]
        out["finding"] = (f"fraction of points with an eigenvalue of non-negative real part per seed {unstable}; "
                          f"largest real part per seed {[round(float(p), 4) for p in per]} (mean {neg['mean']:.4g} ± "
                          f"{neg['se']:.2g} SE); validation accuracy {learned['mean'] + 0.1:.3f} ± {learned['se']:.2g}")
    return out


def draw(ds):
    from ..plot.style import COLORS, new_figure, styled

    @styled
    def _draw():
        fig, axes = new_figure(2, height=3.0)
        ax = axes[0]
        edges = ds["bin_edge"].values
        tot = ds["hist"].sum("seed").values
        ax.stairs(tot / tot.sum(), edges, fill=True, color=COLORS["blue"], alpha=0.6,
                  label=f"trained iRNNs ({ds.sizes['seed']} seeds)")
        c = ds["control_hist"].values
        ax.stairs(c / c.sum(), edges, color=COLORS["vermillion"], lw=1.0,
                  label=f"control: untrained, weight scale {ds.attrs['control_weight_scale']:g}")
        ax.axvline(0, color="k", lw=0.7)
        ax.set_yscale("log")
        ax.set_xlabel("Re λ of ∇φU − I (values beyond the axis are put in the end bins)")
        ax.set_ylabel("fraction of eigenvalues")
        m, se, _ = mean_se(ds["max_real"].max("point").values)
        ax.set_title(f"largest Re λ per seed: {m:.3g} ± {se:.2g} (mean ± SE)", fontsize=7.5)
        ax.legend(frameon=False, fontsize=6.5, loc="upper left")
        ax = axes[1]
        ax.scatter(ds["plane_real"].values, ds["plane_imag"].values, s=3, color=COLORS["blue"], alpha=0.5)
        ax.axvline(0, color="k", lw=0.7)
        ax.set_xlabel("Re λ")
        ax.set_ylabel("Im λ")
        ax.set_title(f"seed 0, every point of {PLANE_SEQ} validation sequences", fontsize=7.5)
        ax.set_aspect("equal", adjustable="datalim")
        fig.suptitle(textwrap.fill("iRNN Fig. 7 — " + ds.attrs.get("scaling", ""), 115), fontsize=6.5)
        return fig

    return _draw()


RECIPE = Recipe(name=NAME, source="iRNN Fig. 7",
                claim="every eigenvalue of ∇φU − I of a trained iRNN over the data set's points has a negative real part",
                compute=compute, draw=draw, check=check, trains=True)

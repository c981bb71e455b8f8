"""iRNN paper Fig. 7: eigenvalues of ∇φ·U − I of *trained* iRNNs over every point of a dataset.

For each seed the paper's iRNN (eq. 9, ReLU, K = 5; ``_irnn_training``) is trained on the HAR-2
stand-in (``_irnn_digits``: 8×8 digits read pixel by pixel, 0–4 vs 5–9); then ``dynlab.spectrum``
takes the eigenvalues of the equilibrium equation's Jacobian at every point s_m = h_m + h_{m-1} of
the trajectories of the whole validation split (the paper: all points of the HAR-2 data set).  For
eq. 9 the matrix is ∇φ(P[U s_m + W x_m + b])·P U − I — the paper's D = ∇φ(·)U − γI with the step's
P U in U's place (``dynlab.spectrum`` reads the model's step matrices).  The claim checked: on
every seed every eigenvalue has a negative real part — the largest real part over all points is
< 0 on each seed, and its mean over seeds is below 0 by more than 2 SE (the margin that matters:
0.01).  The histogram pools every seed's real parts; the complex plane shows seed 0's eigenvalues
on the first validation sequences.

Competence gate (declared): the networks learned the task — validation accuracy above the majority
class beyond 2 SE.  Negative control: the same spectral check on an iRNN whose spectrum is not
stable — an untrained eq. 9 iRNN at weight scale 2 (V ~ N(0, 4/D)) on the same inputs.
"""
from __future__ import annotations

import textwrap

import numpy as np

from . import _irnn_digits as hd
from ._irnn_training import rank_for
from ._recipe import Recipe
from ._stats import comparison, effect, fact, gate, level_test, mean_se, seeds_for

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
    from ..train.loop import evaluate

    xv = hd.validation_inputs()
    for s in seeds:
        res = hd.har2_run("irnn-K5", int(s), bool(quick))
        m = res.model
        acc = float(evaluate(m, res.readout, hd.binary_digits(), "val")["accuracy"])
        re, im, mx = _spectrum_summary(m, xv)
        models.append(m)
        accs.append(acc)
        hists.append(np.histogram(np.clip(re.ravel(), BINS[0], BINS[-1]), BINS)[0])
        maxre.append(mx)
        if plane is None:
            plane = (re[:PLANE_SEQ].reshape(-1), im[:PLANE_SEQ].reshape(-1))
    D = hd.D[bool(quick)]
    ctrl = dl.make_model("irnn", D, 1, K=5, eta=0.01, rank=rank_for(D), P="U", g0="previous", activation="relu",
                         weight_scale=CONTROL_SCALE, seed=0)
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
         **hd.params_vars(models, seeds)},
        coords={"seed": seeds, "bin_edge": ("bin_edge", BINS), "bin": 0.5 * (BINS[1:] + BINS[:-1])})
    ds.attrs.update({"figure": NAME, "points_per_seed": int(maxre[0].size), "eigenvalues_per_point": D,
                     "majority_accuracy": hd.majority("val"),
                     "control_weight_scale": CONTROL_SCALE, "dynlab_version": dl.__version__,
                     "command": f"dynlab figures make {NAME}" + (" --quick" if quick else ""),
                     "scaling": hd.setting(quick) + f"; {len(seeds)} seeds; spectra at the {xv.shape[0]}×64 points "
                                f"of the validation split (paper: HAR-2, D=80)"})
    return ds


MARGIN = 0.01


def check(ds):
    per = ds["max_real"].max("point").values
    acc = ds["val_accuracy"].values
    part = comparison("largest Re λ per seed below 0", per, interest=MARGIN, direction="negative")
    g = gate([level_test("validation accuracy", acc, float(ds.attrs["majority_accuracy"]))])
    every = fact("every seed has every Re λ < 0", bool(np.all(per < 0)), float(np.mean(per < 0)), n=per.size)
    passed = bool(every["passed"] and part["passed"])
    unstable = [float(np.mean(ds["max_real"].sel(seed=s).values >= 0)) for s in ds["seed"].values]
    out = {"passed": passed, "gate": g, "parts": [every, part], "seeds": int(ds.sizes["seed"]),
           "max_real_part": float(per.max()), "max_real_mean_se": [round(part["mean"], 5), round(part["se"], 5)],
           "val_accuracy_mean": float(acc.mean()), "majority_accuracy": float(ds.attrs["majority_accuracy"]),
           "points_per_seed": int(ds.attrs["points_per_seed"]),
           "fraction of points with Re λ ≥ 0 (mean over seeds)": float(np.mean(unstable)),
           "per_seed": [{"seed": int(s), "max_real": float(p), "val_accuracy": float(a), "frac_points_unstable": u}
                        for s, p, a, u in zip(ds["seed"].values, per, acc, unstable)]}
    out["effect"] = effect("largest Re λ of ∇φ P U − I (per seed)", part)
    cm = float(ds["control_max_real"].max())
    out["control"] = {"setting": f"untrained eq. 9 iRNN at weight scale {ds.attrs['control_weight_scale']:g}, "
                                 "same inputs",
                      "measured": {"max_real_part": cm,
                                   "frac_points_unstable": float(np.mean(ds["control_max_real"].values >= 0))},
                      "passed": bool(cm < 0)}
    if not passed:
        out["finding"] = (f"fraction of points with an eigenvalue of non-negative real part per seed "
                          f"{[round(u, 4) for u in unstable]}; largest real part per seed "
                          f"{[round(float(p), 4) for p in per]} (mean {part['mean']:.4g} ± {part['se']:.2g} SE, "
                          f"{part['verdict']}); validation accuracy {acc.mean():.3f}")
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
                compute=compute, draw=draw, check=check, trains=True,
                quote="“We plot a histogram of the eigenvalues of D for all the points in the HAR-2 dataset. As "
                      "illustrated in the figure 7, all the eigenvalues are negative.” (App. A.7.6)",
                gate="the trained iRNNs learned the HAR-2 stand-in: validation accuracy above the majority class "
                     "beyond 2 SE")

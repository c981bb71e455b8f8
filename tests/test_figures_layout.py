"""The recipes grouped by paper (dynlab/figures/irnn, maso, implicit, beyond): every figure is found in
its subpackage under its name, and the flat module paths of before still import, with a
DeprecationWarning naming the new path and the release that removes it."""
import importlib
import sys
import warnings

import pytest

import dynlab.figures as F


def test_every_recipe_lives_in_its_papers_subpackage_under_its_name():
    mods = F._modules()
    assert list(F.recipes()) == [n for n in F.ORDER if n in mods] + sorted(set(mods) - set(F.ORDER))
    for name, mod in mods.items():
        pkg, _, leaf = mod[len("dynlab.figures."):].partition(".")
        assert name == F.PACKAGES[pkg] + leaf.replace("_", "-")
        assert importlib.import_module(mod).RECIPE.name == name
    assert mods["irnn-fig7-eigenvalues"] == "dynlab.figures.irnn.fig7_eigenvalues"
    assert mods["rin-gradients"] == "dynlab.figures.beyond.rin_gradients"
    assert mods["flipflop-bifurcation"] == "dynlab.figures.beyond.flipflop_bifurcation"


@pytest.mark.parametrize("old, new", [("irnn_fig7_eigenvalues", "dynlab.figures.irnn.fig7_eigenvalues"),
                                      ("rin_gradients", "dynlab.figures.beyond.rin_gradients"),
                                      ("_maso_training", "dynlab.figures.maso._training")])
def test_the_flat_paths_warn_and_give_the_moved_module(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, f"dynlab.figures.{old}", raising=False)
    monkeypatch.delattr(F, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"dynlab\.figures\.{old} is now {new}.*removed in dynlab "
                                                 + F.REMOVED_IN.replace(".", r"\.")) as rec:
        mod = importlib.import_module(f"dynlab.figures.{old}")
    assert mod is importlib.import_module(new)
    monkeypatch.delitem(sys.modules, f"dynlab.figures.{old}")
    monkeypatch.delattr(F, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new) as rec:
        exec(compile(f"from dynlab.figures import {old} as m", "<the importer>", "exec"), {})
    assert rec[0].filename == "<the importer>"     # it points at the importing line, not at importlib


def test_the_new_paths_do_not_warn_and_unknown_names_stay_unknown():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.import_module("dynlab.figures.irnn.fig7_eigenvalues")
    with pytest.raises(ImportError):
        importlib.import_module("dynlab.figures.irnn_fig99_nothing")


# ------------------------------------------------------------------ the Recipe's common ending
def _ds(scaling="D=8, 3 seeds (quick)", **attrs):
    import numpy as np
    import xarray as xr

    return xr.Dataset({"y": (("time",), np.arange(5.0))}, attrs={"scaling": scaling, **attrs})


def test_title_text_fills_the_template_and_wraps_the_scaling_line_only():
    import textwrap

    from dynlab.figures._recipe import title_text

    long = "word " * 60
    ds = _ds(long.strip(), method="t-SNE")
    assert title_text("Fig. 1 — {scaling}", ds, 50) == textwrap.fill("Fig. 1 — " + long.strip(), 50)
    head = "A head line longer than fifty characters, never wrapped — {method}; T = {time}"
    got = title_text(head + "\n{scaling}", ds, 50)
    assert got.split("\n")[0] == "A head line longer than fifty characters, never wrapped — t-SNE; T = 5"
    assert got.split("\n", 1)[1] == textwrap.fill(long.strip(), 50)
    assert title_text("{scaling}", ds) == long.strip()            # no wrap: as it is


def test_the_recipe_styles_titles_and_threads_what_its_module_gives_it():
    import dataclasses

    import matplotlib
    from matplotlib.figure import Figure

    from dynlab.figures import Recipe
    from dynlab.plot.style import RC

    seen = {}

    def compute(quick):                     # the maso recipes' older signature: compute(quick)
        seen["quick"] = quick
        return _ds()

    def draw(ds):
        seen["font"] = matplotlib.rcParams["font.size"]
        fig = Figure()
        fig.add_subplot()
        return fig

    r = Recipe("toy-item", "Toy Fig. 1", "a claim", compute, draw, lambda ds: {"passed": True},
               title="Toy Fig. 1 — {scaling}", title_wrap=30, title_size=6.5, one_blas_thread=True)
    ds = r.compute("quick")
    assert seen["quick"] is True
    assert ds.attrs["figure"] == "toy-item" and ds.attrs["command"] == "dynlab figures make toy-item --scale quick"
    assert ds.attrs["dynlab_version"]
    fig = r.draw(ds)
    assert fig._suptitle.get_text() == "Toy Fig. 1 — D=8, 3 seeds\n(quick)"
    assert fig._suptitle.get_fontsize() == 6.5
    assert seen["font"] == RC["font.size"] != matplotlib.rcParamsDefault["font.size"]
    again = dataclasses.replace(r, claim="another")             # wraps the module's functions, not the wrappers
    assert again.draw._recipe_own is draw and again.compute._recipe_own is compute
    plain = dataclasses.replace(r, title=None, style=False)
    assert plain.draw(ds)._suptitle is None

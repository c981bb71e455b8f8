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

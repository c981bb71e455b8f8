"""Every deprecated path warns naming its new home and the release that removes it (issue 43)."""
import importlib

import pytest

from dynlab._deprecate import REMOVED_IN, moved


def test_the_removal_release_is_later_than_this_one():
    import dynlab

    now = tuple(int(p) for p in dynlab.__version__.split(".")[:2])
    assert tuple(int(p) for p in REMOVED_IN.split(".")) > now


@pytest.mark.parametrize("old, new", [
    ("dynlab.runs.phase_dataset", "dynlab.commands.phase_dataset"),
    ("dynlab.analysis.partition.knn_accuracy", "dynlab.analysis.partition_codes.knn_accuracy"),
    ("dynlab.analysis.partition.model_from_partition", "dynlab.io.model_from_partition"),
    ("dynlab.analysis.lipschitz.jacobian_lipschitz", "dynlab.models.lipschitz.jacobian_lipschitz"),
])
def test_a_moved_name_warns_with_its_new_home_and_removal_release(old, new):
    module, _, name = old.rpartition(".")
    with pytest.warns(DeprecationWarning) as rec:
        got = getattr(importlib.import_module(module), name)
    text = str(rec[0].message)
    assert new in text and f"removed in dynlab {REMOVED_IN}" in text
    nmod, _, nname = new.rpartition(".")
    assert got is getattr(importlib.import_module(nmod), nname)


def test_moved_returns_a_module_too():
    with pytest.warns(DeprecationWarning):
        mod = moved("dynlab.runs.stability", "dynlab.commands.stability")
    assert mod is importlib.import_module("dynlab.commands.stability")

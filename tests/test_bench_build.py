"""Every benchmark workload still builds against the package it measures.

``python -m benchmarks.run`` is run by hand, rarely, so a rename in dynlab can leave a workload
reaching for a name that has gone (it happened: two training workloads named a config setting and
a module constant that the backends redesign had moved, and a full run stopped there).  Building a
workload at its quick sizes (models, data, the implementations' closures, the peers where
installed) is where such names are read; nothing is timed here.  ``cli-first-run`` is left out: its
build runs whole dynlab processes on a cold Numba cache (half a minute), and ``cli``'s calls are
plain command lines.
"""
from __future__ import annotations

import pytest

from conftest import benchmarks_module

SKIP = {"cli-first-run"}


def _names():
    return [n for n in benchmarks_module("run").all_workloads() if n not in SKIP]


@pytest.mark.parametrize("name", _names())
def test_workload_builds(name):
    w = benchmarks_module("run").all_workloads()[name]
    impls, info = w.build(True)
    assert impls, f"{name}: no implementations"
    assert w.baseline in [i.name for i in impls], f"{name}: its baseline {w.baseline!r} is not among its rows"
    assert isinstance(info, dict)

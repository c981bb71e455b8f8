"""The pieces of ``python -m benchmarks.run --gpu`` (benchmarks/gpu.py) that run without a GPU:
the refusal, the workload builders, the agreement measure and the table.  The timings themselves
need a GPU and are never tested (docs/design.md: performance is measured by benchmarks)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import CHECKOUT
from conftest import benchmarks_module as _bench


def test_gpu_table_refuses_in_one_line_without_a_gpu():
    gpu = _bench("gpu")
    if gpu.gpu_problem() is None:
        pytest.skip("a GPU is present: the table would run")
    env = dict(os.environ, PYTHONPATH=CHECKOUT)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    for extra in ({}, {"NUMBA_ENABLE_CUDASIM": "1"}):   # no GPU; the simulator is nothing to time either
        proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--gpu", "--quick"], env={**env, **extra},
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("benchmarks --gpu: no GPU to benchmark here"), proc.stderr
        assert proc.stdout == ""
    assert "simulator" in lines[0]


def test_sweep_grid_is_the_issues_ten_thousand_settings():
    gpu = _bench("gpu")
    grid = gpu.sweep_grid()
    assert grid["K"] == list(range(1, 11)) and len(grid["eta"]) == 25 and len(grid["weight_scale"]) == 40
    assert np.prod([len(v) for v in grid.values()]) == 10_000
    small = gpu.sweep_grid(quick=True)
    models, xs = gpu.sweep_models(small, hidden=4, steps=7)
    assert len(models) == len(xs) == 10 * 25 * 4
    assert {m.K for m in models} == set(range(1, 11)) and xs[0].shape == (7, 1)
    assert models[1].weight_scale == small["weight_scale"][1] and models[4].eta == small["eta"][1]


def test_forward_inputs_have_the_workload_shapes():
    gpu = _bench("gpu")
    m, x, h0 = gpu.irnn_inputs(3, 5, 2, 4, 6)
    assert m.hidden == 5 and m.inputs == 2 and m.K == 4 and x.shape == (3, 6, 2) and h0.shape == (3, 5)
    for kind, n in (("gru", 5), ("lstm", 10)):
        m, x, h0 = gpu.gated_inputs(kind, 2, 5, 3, 4)
        assert m.name == kind and x.shape == (2, 4, 3) and h0.shape == (2, n)


def test_agreement_is_the_largest_relative_difference():
    gpu = _bench("gpu")
    ref = np.array([0.5, 100.0, -3.0])
    assert gpu.agreement(ref, ref) == 0.0
    assert gpu.agreement(ref + [1e-9, 1e-6, 0.0], ref) == pytest.approx(1e-8)   # 1e-9 / 1, 1e-6 / 100
    assert gpu.agreement([0.5, np.nan, -3.0], ref) == np.inf                      # a NaN where the reference has none
    assert gpu.agreement([0.5, np.nan], [0.5, np.nan]) == 0.0
    assert gpu.agreement(ref[:2], ref) == np.inf


def test_table_has_every_column_and_marks_what_did_not_run():
    gpu = _bench("gpu")
    rows = [{"workload": "sweep", "unit": "settings/s", "cupy": 123456.7, "numba": 1008.0, "numba2": 380.0,
             "peer": "JAX float64: 19,434 settings/s", "agrees": 1.1e-13},
            {"workload": "gru-forward", "unit": "s", "cupy": 0.0123456, "numba": 0.685, "numba2": None, "peer": None,
             "agrees": None}]
    text = gpu.format_table(rows, "GPU: test")
    lines = text.splitlines()
    assert lines[0] == "GPU: test" and lines[2].startswith("| workload | dynlab cupy |")
    assert "| `sweep` | 123,457 | 1,008 | 380 | JAX float64: 19,434 settings/s | 1.1e-13 |" in lines
    assert "| `gru-forward` | 0.01235 s | 0.685 s | — | — | — |" in lines
    assert all(line.count("|") == 7 for line in lines[2:])


def test_cores_holds_numba_to_two_threads_and_restores():
    import numba

    gpu = _bench("gpu")
    before = numba.get_num_threads()
    with gpu.cores(2):
        assert numba.get_num_threads() == min(2, numba.config.NUMBA_NUM_THREADS)
    assert numba.get_num_threads() == before

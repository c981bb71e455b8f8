"""The machinery of ``python -m benchmarks.run --gpu`` (benchmarks/gpu.py, gpu_rows.py), run without a
GPU: the refusal, the workload builders, the agreement measure, the row loop (a failing row reported,
the run going on, each row printed and written as it finishes), the table and its Markdown report,
the whole table at toy sizes under Numba's CUDA simulator (``--tiny``), and the JAX peers against the
NumPy reference on the CPU.  The timings themselves need a GPU and are never tested
(performance is measured by benchmarks, not by timed tests)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import CHECKOUT
from conftest import benchmarks_module as _bench


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=CHECKOUT, DYNLAB_QUIET="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.update(extra)
    return env


def test_gpu_table_refuses_in_one_line_without_a_gpu():
    gpu = _bench("gpu")
    if gpu.gpu_problem() is None:
        pytest.skip("a GPU is present: the table would run")
    for extra in ({}, {"NUMBA_ENABLE_CUDASIM": "1"}):   # no GPU; the simulator is nothing to time either
        proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--gpu", "--quick"], env=_env(**extra),
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("benchmarks --gpu: no GPU to benchmark here"), proc.stderr
        assert proc.stdout == ""
    assert "simulator" in lines[0] and "--tiny" in lines[0]


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
    assert gpu.SIZES["full"].gated_batch == 1024 and gpu.SIZES["full"].gated_hidden == 256     # the issue's goals
    assert gpu.SIZES["full"].fwd_big_batch == 4096 and gpu.SIZES["full"].flow_hidden == 128


def test_agreement_is_the_largest_relative_difference():
    gpu = _bench("gpu")
    ref = np.array([0.5, 100.0, -3.0])
    assert gpu.agreement(ref, ref) == 0.0
    assert gpu.agreement(ref + [1e-9, 1e-6, 0.0], ref) == pytest.approx(1e-8)   # 1e-9 / 1, 1e-6 / 100
    assert gpu.agreement([0.5, np.nan, -3.0], ref) == np.inf                      # a NaN where the reference has none
    assert gpu.agreement([0.5, np.nan], [0.5, np.nan]) == 0.0
    assert gpu.agreement(ref[:2], ref) == np.inf


def test_row_loop_reports_a_failing_row_and_goes_on(tmp_path):
    """Three rows, the second raising: every row is printed as it finishes (the failing one with its
    exception and where), the third still runs, the Markdown holds all three, a disagreement past the
    bound is a failure too, and the report says whether the run finished."""
    gpu = _bench("gpu")

    def good(ctx):
        return gpu.Row("good", size="B=1", times={"dynlab-host": 0.5, "dynlab-device": 0.25}, agrees={"dynlab-host": 1e-14})

    def broken(ctx):
        raise ValueError("no such kernel\nsecond line")

    def off(ctx):
        return gpu.Row("off", unit="settings/s", precision="float32", threshold=1e-3,
                       times={"dynlab-device": 123456.7}, agrees={"dynlab-device": 2e-3}, notes=["a note"])

    lines, md = [], tmp_path / "gpu.md"
    snapshots = []

    def log(line):
        lines.append(line)
        if md.exists():
            snapshots.append(md.read_text(encoding="utf-8"))

    rows = gpu.run_rows([("good", good), ("broken", broken), ("off", off)], None, log=log, markdown=str(md),
                        header="GPU: test", command="python -m benchmarks.run --gpu --quick")
    assert [r.workload for r in rows] == ["good", "broken", "off"]
    assert [r.ok for r in rows] == [True, False, False]
    assert rows[1].error.startswith("ValueError: no such kernel (at test_bench_gpu.py:")
    table = [line for line in lines if line.startswith("| `")]
    assert len(table) == 3 and "FAILED: ValueError: no such kernel" in table[1]
    assert "| `good` | B=1 | float64 | 0.5 s | 0.25 s | — |" in table[0] and table[0].endswith("| 1.0e-14 (≤ 1e-10) | ok |")
    assert "123,457" in table[2] and "DISAGREES: dynlab-device 2.0e-03" in table[2]
    assert any(line.strip() == "off: a note" for line in lines)
    assert any("in progress (1 rows so far)" in s for s in snapshots)        # written after the first row
    text = md.read_text(encoding="utf-8")
    assert "- **Run**: finished" in text and "GPU: test" in text and "--gpu --quick" in text
    assert all(f"| `{w}` |" in text for w in ("good", "broken", "off"))
    heads = gpu.table_head()[0]
    assert all(line.count("|") == heads.count("|") for line in table)


@pytest.mark.gpu
def test_the_whole_table_runs_under_the_simulator(tmp_path):
    """``--gpu --tiny``: every row at toy sizes on the GPU backend under Numba's CUDA simulator,
    each checked against the NumPy reference and within its bound, both dynlab columns filled."""
    gpu = _bench("gpu")
    rows_mod = _bench("gpu_rows")
    md = tmp_path / "tiny.md"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--gpu", "--tiny", "--markdown", str(md)],
                          env=_env(NUMBA_ENABLE_CUDASIM="1"), capture_output=True, text=True, timeout=600)
    if "numba.cuda cannot be imported" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, (proc.stdout[-4000:], proc.stderr[-4000:])
    table = [line for line in proc.stdout.splitlines() if line.startswith("| `")]
    names = [name for name, _ in rows_mod.ROWS]
    assert [line.split("`")[1] for line in table] == names
    assert all(line.endswith("| ok |") for line in table), table
    for line in table:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert cells[3] != "—" or cells[4] != "—", line          # a dynlab column ran
    text = md.read_text(encoding="utf-8")
    assert "- **Run**: finished" in text and all(f"| `{n}` |" in text for n in names)
    assert gpu.F64_AGREEMENT == 1e-10


def test_jax_peers_compute_what_dynlab_computes():
    """The JAX peers (sweep tangents, iRNN and LSTM forwards) on the CPU at toy sizes equal the NumPy
    reference to 1e-12 (float64; summation order only)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    gpu = _bench("gpu")
    rows_mod = _bench("gpu_rows")
    import dynlab as dl
    from dynlab.backends.reference import ReferenceBackend

    ctx = rows_mod.Context(gpu.SIZES["tiny"], 1, True, None, "numpy", jax=jax)
    grid = gpu.sweep_grid(scales=2, ks=3, etas=2)
    models, xs = gpu.sweep_models(grid, hidden=3, steps=5)
    ref = dl.sweep("gradient_norms", grid, fixed={"model": "irnn", "hidden": 3, "steps": 5, "input": "random-walk"},
                   backend="numpy")["log_jac_norm_1"].values.ravel()
    host, dev, fetch = rows_mod.jax_sweep(ctx, [m.form() for m in models], xs, np.float64)
    assert gpu.agreement(host(), ref) < 1e-12 and gpu.agreement(fetch(dev()), ref) < 1e-12
    m, x, h0 = gpu.irnn_inputs(2, 4, 3, 3, 5)
    ref = ReferenceBackend().simulate(m.form(), x, h0)[0]
    host, dev, fetch = rows_mod._jax_irnn(ctx, m.form(), x, h0, np.float64)
    assert gpu.agreement(host(), ref) < 1e-12 and gpu.agreement(fetch(dev()), ref) < 1e-12
    m, x, h0 = gpu.gated_inputs("lstm", 2, 3, 2, 4)
    ref = ReferenceBackend().simulate(m.form(), x, h0)[0][..., :3]         # an LSTM compared on h
    host, _, _ = rows_mod._jax_gated(ctx, m, x, h0, np.float64)
    assert gpu.agreement(host(), ref) < 1e-12


def test_cores_holds_numba_to_two_threads_and_restores():
    import numba

    gpu = _bench("gpu")
    before = numba.get_num_threads()
    with gpu.cores(2):
        assert numba.get_num_threads() == min(2, numba.config.NUMBA_NUM_THREADS)
    assert numba.get_num_threads() == before

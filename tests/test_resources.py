"""Resource guards (issue 19, item 2): sizes that cannot be allocated and work that cannot finish
are refused before anything is allocated, with one line naming the option and the estimate.

Every test here is fast: the huge cases are refused on the estimate alone (tracemalloc checks that
nothing big was allocated), and the borderline ones patch ``available_memory`` or the time limit.
"""
from __future__ import annotations

import os
import time
import tracemalloc

import numpy as np
import pytest

import dynlab as dl
from conftest import cli_run as run
from dynlab import _resources as res
from dynlab import _progress
from dynlab.errors import ParameterError

GiB = 1024 ** 3


def refused(args, option, *words, max_alloc=128 * 1024 ** 2):
    """``dynlab ARGS`` exits 2 with one line naming ``option`` and an estimate, fast, allocating
    nothing large."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        r = run(*args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - t0
    out = r.output.strip()
    assert r.exit_code == 2, (args, r.output, r.exception)
    assert "\n" not in out and "Traceback" not in out, out
    options = option if isinstance(option, tuple) else (option,)
    assert any(out.startswith(f"Error: {o}: ") for o in options), out
    assert "≈" in out, out
    for w in words:
        assert w in out, (w, out)
    assert peak < max_alloc, (args, peak)
    assert elapsed < 5.0, (args, elapsed)  # well under a second on an idle machine; slack for a shared one
    return out


# ----------------------------------------------------------------------------- the review's cases
@pytest.mark.parametrize("args, option, words", [
    (["simulate", "--hidden", 200000], "--hidden", ["298 GiB", "U 200000×200000"]),
    (["gradients", "--hidden", 200000], "--hidden", ["years", "limit"]),
    (["spectrum", "--hidden", 200000], "--hidden", ["years", "limit"]),
    (["partition", "--hidden", 200000], "--hidden", ["U 200000×200000"]),
    (["train", "--hidden", 200000, "--iterations", 1], "--hidden", ["U 200000×200000"]),
    (["simulate", "--model", "lstm", "--hidden", 100000], "--hidden", ["4×U 100000×100000"]),
    (["simulate", "--steps", 10 ** 12], "--steps", ["the input x", "TiB"]),
    (["gradients", "--steps", 10 ** 12], "--steps", ["the states h", "TiB"]),
    (["simulate", "--batch", 10 ** 9], "--batch", ["the input x", "1e+09×1000×1"]),
    (["spectrum", "--batch", 10 ** 9], "--batch", ["the spectra", "TiB"]),
    (["partition", "--batch", 10 ** 8], "--batch", ["the input x"]),
    (["train", "--batch", 10 ** 9, "--iterations", 1], "--batch", ["BPTT tapes"]),
    (["simulate", "--inputs", 10 ** 11], "--inputs", ["W 32×1e+11"]),
    (["simulate", "--hidden", 99999999999999999999999], "--hidden", ["1e+23×1e+23"]),
    (["gradients", "--hidden", 99999999999999999999999], "--hidden", ["1e+23", "EiB"]),
    (["simulate", "--K", 10 ** 9], "--K", ["h", "limit"]),
    (["gradients", "--K", 10 ** 9], "--K", ["limit"]),
    (["spectrum", "--K", 10 ** 11], "--K", ["limit"]),
    # "never finishes, no word": refused on the work estimate before the model is drawn
    (["gradients", "--hidden", 30000, "--steps", 10], "--hidden", ["45 h", "limit"]),
    (["spectrum", "--hidden", 30000, "--steps", 10], "--hidden", ["limit"]),
    (["gradients", "--K", "1,1000000000"], "--K", ["limit"]),
    (["equilibria", "--fixed-points", 10 ** 6, "--hidden", 2000], "--fixed-points", ["58.2 TiB"]),
])
def test_review_cases_refuse_instantly_naming_the_option(args, option, words):
    refused(args, option, *words)


def test_the_refusal_says_what_this_machine_has(monkeypatch):
    monkeypatch.setattr(res, "available_memory", lambda: 22 * GiB)
    out = refused(["simulate", "--hidden", 200000], "--hidden")
    assert out.endswith("this machine has 22 GiB available"), out


def test_fixed_points_borderline_refused_on_a_smaller_machine(monkeypatch):
    """``equilibria --fixed-points 200 --hidden 2000``: the review saw a MemoryError after 56 s at
    12.7 GB; the Jacobians of the search are 2 × 200×2000×2000 float64 = 11.9 GiB."""
    monkeypatch.setattr(res, "available_memory", lambda: 8 * GiB)
    out = refused(["equilibria", "--fixed-points", 200, "--hidden", 2000, "--model", "rnn"], "--fixed-points",
                  "11.9 GiB", "200×2000×2000", max_alloc=256 * 1024 ** 2)
    assert "this machine has 8 GiB available" in out


def test_fixed_points_work_limit(monkeypatch):
    monkeypatch.setenv("DYNLAB_MAX_HOURS", str(1e-13))
    refused(["equilibria", "--fixed-points", 100, "--hidden", 3, "--model", "rnn"], "--fixed-points", "limit")
    refused(["equilibria", "--fixed-points", 8, "--hidden", 3, "--model", "rnn"], "--hidden", "limit")


def test_borderline_sizes_follow_available_memory(monkeypatch):
    """The same request runs with enough memory and is refused with too little."""
    assert run("simulate", "--hidden", 50, "--steps", 20, "-q").exit_code == 0
    monkeypatch.setattr(res, "available_memory", lambda: 20_000)  # 50×50 weights: 2 × 20 KiB
    out = refused(["simulate", "--hidden", 50, "--steps", 20], "--hidden", "U 50×50")
    assert "19.5 KiB available" in out


@pytest.mark.parametrize("args, option", [
    (["simulate", "--steps", 2000], "--steps"),
    (["simulate", "--batch", 2000], "--batch"),
    (["spectrum", "--hidden", 300], "--hidden"),
    (["gradients", "--hidden", 300, "--steps", 500], "--hidden"),
    (["gradients", "--lyapunov", "--steps", 5000], "--steps"),
    (["partition", "--batch", 2000], "--batch"),
])
def test_work_limit_names_the_dominant_option(monkeypatch, args, option):
    monkeypatch.setenv("DYNLAB_MAX_HOURS", str(1e-13))  # 0.36 ns: every run above exceeds it
    out = refused(args, option, "limit")
    assert "DYNLAB_MAX_HOURS" in out


def test_work_limit_setting_is_checked(monkeypatch):
    monkeypatch.setenv("DYNLAB_MAX_HOURS", "soon")
    with pytest.raises(ParameterError, match="DYNLAB_MAX_HOURS"):
        res.max_seconds()
    monkeypatch.setenv("DYNLAB_MAX_HOURS", "2")
    assert res.max_seconds() == 7200.0


def test_sweep_grid_of_a_billion_points_refused_before_the_store(tmp_path):
    spec = tmp_path / "big.toml"
    axis = lambda lo: "[" + ", ".join(f"{lo + 0.001 * i:.3f}" for i in range(1000)) + "]"
    spec.write_text(f'analysis = "gradient_norms"\n[grid]\nK = {list(range(1, 1001))}\n'
                    f"eta = {axis(0.001)}\nalpha = {axis(0.5)}\n")
    store = tmp_path / "out.zarr"
    # "grid", or "SPEC.toml path: grid" where spec-file errors are prefixed with the file
    out = refused(["sweep", str(spec), "--out", str(store)], ("grid", f"{spec}: grid"), "1000×1000×1000",
                  max_alloc=256 * 1024 ** 2)
    assert "points" in out
    assert not store.exists() and not any(p.name.startswith("out.zarr") for p in tmp_path.iterdir())


# ----------------------------------------------------------------------------- the library
def test_library_refuses_before_allocating():
    with pytest.raises(ParameterError) as e:
        dl.make_model("rnn", 10 ** 6, 1)
    assert e.value.param == "hidden" and "≈" in e.value.message
    with pytest.raises(ParameterError) as e:
        dl.tasks.random_walk(10 ** 12, 1)
    assert e.value.param == "steps"
    with pytest.raises(ParameterError) as e:
        dl.make_model("irnn", 2, 1, K=10 ** 12)
    assert e.value.param == "K"
    m = dl.make_model("rnn", 4, 1, seed=0)
    with pytest.raises(ParameterError) as e:
        dl.fixed_points(m, np.zeros(1), n_starts=10 ** 12)
    assert e.value.param == "n_starts"


def test_affine_form_refuses_a_huge_materialisation(monkeypatch):
    m = dl.make_model("rnn", 4, 2, activation="relu", seed=0)
    x = np.random.default_rng(0).standard_normal((30, 2))
    assert dl.analysis.partition.affine_form(m, x)["error"] < 1e-10
    monkeypatch.setattr(res, "available_memory", lambda: 50_000)  # A is 120×60 float64 = 56 KiB
    with pytest.raises(ParameterError) as e:
        dl.analysis.partition.affine_form(m, x)
    assert e.value.param == "x" and "A_RNN" in e.value.message


# ----------------------------------------------------------------------------- the estimates
@pytest.mark.parametrize("name, settings", [("rnn", {}), ("irnn", {}), ("gru", {}), ("lstm", {}),
                                            ("ctrnn", {})])
def test_model_estimate_is_twice_the_weights(name, settings):
    """The estimate is the drawn temporary plus the kept weights: 2 × the model's float arrays
    (U, W, b and, for the gated cells, one block per gate)."""
    D, d = 7, 3
    m = dl.make_model(name, D, d, seed=0, **settings)
    arrays = sum(a.nbytes for a in vars(m).values() if isinstance(a, np.ndarray) and a.ndim >= 1 and a.size > 1)
    est, _ = res.model_bytes(name, D, d, settings, dl.models.gates_of(name, settings))
    assert est == 2 * arrays, (name, est, arrays)


@pytest.mark.parametrize("batch", [None, 3])
def test_input_and_state_estimates_match_the_arrays(batch, monkeypatch):
    x = dl.tasks.random_walk(17, 2, batch=batch, seed=0)
    assert res.nbytes(*x.shape) == x.nbytes
    seen = {}
    monkeypatch.setattr(res, "check_memory", lambda n, param, what: seen.setdefault(what.split(" (")[0], n))
    dl.tasks.noise(17, 2, batch=batch, seed=0)
    assert seen["the input x"] == 2 * x.nbytes  # the draw and its scaled copy
    m = dl.make_model("rnn", 5, 2, seed=0)
    ds = dl.simulate(m, x)
    assert seen["the states h"] == ds["h"].nbytes


def test_format_bytes_and_seconds():
    assert res.format_bytes(200000 ** 2 * 8) == "298 GiB"
    assert res.format_bytes(1023) == "1023 B" and res.format_bytes(1536) == "1.5 KiB"
    assert res.format_seconds(30) == "30 s" and res.format_seconds(5400) == "1.5 h"
    assert res.format_seconds(3 * 86400) == "3 days"


def test_available_memory_reads_meminfo():
    n = res.available_memory()
    if os.path.exists("/proc/meminfo"):
        line = next(l for l in open("/proc/meminfo") if l.startswith("MemAvailable:"))
        assert abs(n - int(line.split()[1]) * 1024) < 2 * GiB  # read twice; the machine is shared
    assert n is None or n > 0


# ----------------------------------------------------------------------------- progress
@pytest.mark.parametrize("args, stage, shown", [
    (["gradients", "--hidden", 4, "--steps", 50], "gradient flow", "ETA"),
    (["gradients", "--hidden", 4, "--steps", 50, "--lyapunov"], "Lyapunov spectrum", "ETA"),
    (["spectrum", "--hidden", 4, "--steps", 50], "eigenvalues", "ETA"),
    (["equilibria", "--fixed-points", 8, "--hidden", 3, "--model", "rnn"], "equilibria", "it/s"),
    (["partition", "--hidden", 4, "--steps", 20, "--batch", 4], "partition trace", "ETA"),
])
def test_progress_shown_for_long_runs_and_not_with_quiet(monkeypatch, args, stage, shown):
    """A patched delay (0 s instead of a few seconds) stands in for a long run; the tests' own
    quiet (DYNLAB_QUIET, tests/conftest.py) is lifted here.  A stage of known total shows its ETA;
    the equilibrium solvers' iterations (total unknown) a count and a rate, and no ETA."""
    from dynlab import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.delenv("DYNLAB_QUIET")
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert stage in r.stderr and shown in r.stderr, r.stderr
    if shown != "ETA":
        assert "ETA" not in r.stderr.split(stage)[1][:120] and "%" not in r.stderr.split(stage)[1][:120], r.stderr
    assert "\n" not in r.stderr.rstrip("\n").split("\r")[-1]  # one line, redrawn in place
    quiet = run(*args, "-q")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_no_progress_for_short_runs(monkeypatch):
    monkeypatch.delenv("DYNLAB_QUIET")
    r = run("gradients", "--hidden", 4, "--steps", 50)
    assert r.exit_code == 0 and "ETA" not in r.stderr


def test_library_is_quiet_without_a_reporter(capsys):
    m = dl.make_model("rnn", 4, 1, seed=0)
    dl.gradient_norms(m, dl.tasks.random_walk(30, 1, seed=0))
    seen = []
    with _progress.reporting(lambda *a: seen.append(a)):
        dl.gradient_norms(m, dl.tasks.random_walk(30, 1, seed=0))
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert seen and seen[-1][1] == seen[-1][2]  # the last report is the whole stage


# ----------------------------------------------------------------------------- confirmation, --force
def test_a_long_run_asks_for_force_on_the_command_line_and_runs_with_it(monkeypatch):
    """Past ``config.CLI_CONFIRM_SECONDS`` (an optimistic estimate) the command line refuses with
    the estimate and the way to go on; ``--force`` runs it; the library itself does not ask."""
    from dynlab import config

    out = refused(["simulate", "--K", 10 ** 9, "--steps", 10, "--hidden", 2], "--K", "--force", "112 s")
    assert "K×T×B = 1000000000×10×1" in out
    monkeypatch.setattr(config, "CLI_CONFIRM_SECONDS", 1e-9)  # every run is "long" now
    refused(["simulate", "--steps", 20], ("--steps", "--K", "--hidden"), "--force")
    r = run("simulate", "--steps", 20, "--force", "-q")
    assert r.exit_code == 0, r.output
    m = dl.make_model("irnn", 2, 1, K=3, seed=0)
    assert dl.simulate(m, np.zeros((20, 1)))["h"].shape == (20, 2)  # the library never asks


def test_force_does_not_lift_the_library_limit(monkeypatch):
    monkeypatch.setenv("DYNLAB_MAX_HOURS", str(1e-13))
    out = refused(["simulate", "--steps", 20, "--force"], ("--steps", "--K", "--hidden"), "DYNLAB_MAX_HOURS")
    assert "--force" not in out


# ----------------------------------------------------------------------------- simulate in chunks
def _chunk_models():
    return [
        ("irnn", dl.make_model("irnn", 3, 2, K=3, eta=0.4, seed=0)),
        ("irnn per-time eta", dl.make_model("irnn", 3, 2, K=2, seed=0).replace(
            eta=np.random.default_rng(1).uniform(0.1, 0.6, (23, 2)))),
        ("rnn", dl.make_model("rnn", 3, 2, seed=0)),
        ("ctrnn rk4", dl.make_model("ctrnn", 3, 2, method="rk4", seed=0)),
        ("gru", dl.make_model("gru", 3, 2, seed=0)),
        ("lstm", dl.make_model("lstm", 3, 2, seed=0)),
        ("stack", dl.make_model("stack", 3, 2, cell="lstm", layers=2, seed=0)),
    ]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_simulate_in_chunks_with_progress_equals_one_call(monkeypatch, backend):
    """With a reporter listening and the run 'long' (threshold patched to 0), ``simulate`` runs
    in chunks of steps, reporting after each, and gives the states of one call bit for bit."""
    from dynlab import simulation

    x = np.random.default_rng(0).standard_normal((4, 23, 2))
    for name, m in _chunk_models():
        whole = dl.simulate(m, x, backend=backend)["h"].values
        monkeypatch.setattr(simulation, "PROGRESS_MIN_SECONDS", 0.0)
        monkeypatch.setattr(simulation, "PROGRESS_CHUNKS", 5)
        seen = []
        with _progress.reporting(lambda *a: seen.append(a)):
            chunked = dl.simulate(m, x, backend=backend)["h"].values
        monkeypatch.undo()
        assert [d for _, d, _ in seen] == [4, 9, 13, 18, 23], (name, seen)  # five chunks, each reported
        np.testing.assert_array_equal(chunked, whole, err_msg=name)


def test_simulate_in_chunks_reports_divergence_where_it_happened(monkeypatch):
    """A sequence that blows up in a later chunk: the same first bad step as one call, with
    on_divergence='flag' and 'raise' (the partial result keeps the steps before it)."""
    from dynlab import simulation
    from dynlab.errors import DivergenceError

    m = dl.make_model("rnn", 2, 1, activation="identity", weight_scale=1000.0, seed=0)
    x = np.ones((3, 300, 1))
    flagged = dl.simulate(m, x, on_divergence="flag")
    with pytest.raises(DivergenceError) as one:
        dl.simulate(m, x)
    monkeypatch.setattr(simulation, "PROGRESS_MIN_SECONDS", 0.0)
    monkeypatch.setattr(simulation, "PROGRESS_CHUNKS", 7)
    with _progress.reporting(lambda *a: None):
        chunked = dl.simulate(m, x, on_divergence="flag")
        with pytest.raises(DivergenceError) as many:
            dl.simulate(m, x)
    assert 43 < int(flagged["diverged_at"].min()) < 300  # past the first chunk: the chunks are tested
    np.testing.assert_array_equal(chunked["diverged_at"].values, flagged["diverged_at"].values)
    np.testing.assert_array_equal(chunked["h"].values, flagged["h"].values)
    assert many.value.step == one.value.step
    np.testing.assert_array_equal(many.value.partial["h"].values, one.value.partial["h"].values)

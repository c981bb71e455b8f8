"""Sweeps: grids → Datasets, the batched gradient kernels, the Zarr store, resume, Dask, spec files.

Tolerances:
* batched gradient summaries vs one ``dynlab.gradient_norms(backend="numpy")`` call per point:
  the two build ∂h_T/∂h_1 in different orders (forward tangent vs backward products) and both
  take LAPACK's SVD, so they differ by rounding only: ≈ T·D·2⁻⁵³ relative per factor at
  worst, observed ≤ 1e-13 in ln‖·‖ for T ≤ 60, D ≤ 4; we ask 1e-12 (absolute in the log =
  relative in the norm);
* the numba backend's sweep takes σ₁ by the certified power iteration (``config.NORM_RTOL`` = 1e-12
  relative, one-sided) or the Gram matrix's top eigenvalue, so its logs are asked to
  NORM_RTOL + 1e-13 (``NUMBA_ATOL``) where the NumPy backend's are asked to 1e-12;
* the NumPy run of the batched kernel vs the numba prange kernel: same algorithm, summation
  order differs (BLAS vs loops), σ₁ as above: NUMBA_ATOL;
* vs central differences of tests/naive.py: O(eps²) + O(2⁻⁵³/eps) ≈ 1e-9 relative, we ask 1e-7;
* targets without a batched kernel call the public analysis per point: exactly equal.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

import dynlab as dl
from dynlab import config
from dynlab.cli import main
from dynlab.spec import DEFAULT_INPUT
from dynlab.errors import DivergenceError, ParameterError
from dynlab.sweep import Target, Var, register_target
from dynlab.sweep.grid import region_chunks, regions

import naive

FIXED = {"model": "irnn", "hidden": 4, "steps": 40}
NUMBA_ATOL = config.NORM_RTOL + 1e-13


def _run(settings):
    """The point's model and input, built exactly as a user would, one by one."""
    s = dict(settings)
    name = s.pop("model", "irnn")
    hidden, steps, seed = s.pop("hidden", 2), s.pop("steps", 1000), s.pop("seed", 0)
    kind, variance = s.pop("input", DEFAULT_INPUT), s.pop("variance", None)
    m = dl.make_model(name, hidden, 1, seed=seed, **s)
    opts = {} if variance is None else {"variance": variance}
    x = dl.tasks.make_input(kind, steps, 1, seed=seed, **opts)
    return m, x


def _points(ds):
    """(settings given by the coordinates, position) of every point of a result."""
    dims = list(ds["done"].dims)
    for idx in np.ndindex(*ds["done"].shape):
        settings = {}
        for d, i in zip(dims, idx):
            along = [n for n, c in ds.coords.items() if c.dims == (d,) and n != d]  # a zipped dimension
            for n in (along or [d]):
                settings[n] = ds.coords[n].values[i].item()
        yield settings, idx


def _close(a, b, atol=1e-12):
    """Equal within atol, or the same infinity (ln 0 = −inf when a ReLU product is exactly singular)."""
    return a == b or abs(a - b) <= atol


def _public_grad(m, x, backend="numpy"):
    try:
        g = dl.gradient_norms(m, x, backend=backend)
    except DivergenceError as err:
        return None, err.step
    lj = g["log_jac_norm"].values
    return (lj[0], lj[-2], float(g["ratio"])), 0


# ================================================================= sweep = points one by one
@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_gradient_sweep_equals_points_one_by_one(backend):
    res = dl.sweep("gradient_norms", {"K": [1, 3], "eta": [0.3, 1.0]},
                   fixed={**FIXED, "g0": "previous"}, seeds=2, backend=backend)
    assert res["ratio"].dims == ("K", "eta", "seed") and res["done"].all()
    assert res.attrs["model"] == "irnn" and res.attrs["hidden"] == 4 and res.attrs["analysis"] == "gradient_norms"
    n = 0
    for settings, idx in _points(res):
        m, x = _run({**FIXED, "g0": "previous", **settings})
        (l1, lT, ratio), bad = _public_grad(m, x)
        assert bad == 0
        tol = NUMBA_ATOL if backend == "numba" else 1e-12
        assert abs(res["log_jac_norm_1"].values[idx] - l1) <= tol
        assert abs(res["log_step_norm_T"].values[idx] - lT) <= tol
        assert abs(res["ratio"].values[idx] / ratio - 1) <= 2 * tol
        n += 1
    assert n == 8


def test_gradient_sweep_gated_models_and_divergence():
    """Every gated cell, and a run that overflows: diverged_at equals the public call's step."""
    grid = {"model": ["rnn", "fastrnn", "antisymmetric", "rin"]}
    res = dl.sweep("gradient_norms", grid, fixed={"hidden": 3, "steps": 30}, seeds=[1, 4])
    for settings, idx in _points(res):
        m, x = _run({"hidden": 3, "steps": 30, **settings})
        (l1, lT, _), bad = _public_grad(m, x)
        assert _close(res["log_jac_norm_1"].values[idx], l1, NUMBA_ATOL)
        assert _close(res["log_step_norm_T"].values[idx], lT, NUMBA_ATOL)
    # identity activation, U ~ N(0, 3²/D): |h| grows ≈ 3^t and overflows near t ≈ 650
    fixed = {"model": "rnn", "hidden": 3, "steps": 900, "activation": "identity", "weight_scale": 3.0}
    res = dl.sweep("gradient_norms", {"seed": [0, 1]}, fixed=fixed)
    for settings, idx in _points(res):
        m, x = _run({**fixed, **settings})
        _, step = _public_grad(m, x)
        assert step > 0 and res["diverged_at"].values[idx] == step
        assert np.isnan(res["ratio"].values[idx])


def test_batched_equals_per_point_path_and_finite_differences():
    grid = {"K": [1, 4]}
    fixed = {**FIXED, "eta": 0.5, "steps": 25}
    a = dl.sweep("gradient_norms", grid, fixed=fixed, seeds=2)
    b = dl.sweep("gradient_norms", grid, fixed=fixed, seeds=2, batched=False, backend="numpy")
    for v in ("log_jac_norm_1", "log_step_norm_T", "log_ratio"):
        np.testing.assert_allclose(a[v].values, b[v].values, rtol=0, atol=2 * NUMBA_ATOL)
    # independent: ∂h_T/∂h_1 by central differences of the slow reference simulation
    m, x = _run({**fixed, "K": 4, "seed": 1})
    h = naive.simulate(m, x)
    P = naive.fd_final_state_jacobian(m, x[1:], h[0])
    want = np.log(naive.norm2(P[None])[0])
    assert abs(a["log_jac_norm_1"].sel(K=4, seed=1).item() - want) <= 1e-7


def test_numpy_batched_kernel_matches_numba_kernel():
    """The reference's batched matmuls vs the numba prange kernel and its certified σ₁."""
    from dynlab.sweep import batched_gradient_summaries

    models = [dl.make_model("irnn", 5, 1, seed=s, K=k, eta=0.4, sign=sg) for s, k, sg in
              [(0, 1, 1), (1, 3, -1), (2, 5, 1)]]
    xs = [dl.tasks.random_walk(30, 1, seed=s) for s in range(3)]
    a = batched_gradient_summaries(models, xs, "numba")
    b = batched_gradient_summaries(models, xs, "numpy")
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=0, atol=NUMBA_ATOL)


def test_cupy_kernel_matches_numpy():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
    except Exception:
        pytest.skip("no GPU")
    from dynlab.sweep import batched_gradient_summaries

    models = [dl.make_model("irnn", 6, 1, seed=s, K=k, eta=0.4) for s, k in [(0, 1), (1, 3), (2, 5)]]
    xs = [dl.tasks.random_walk(40, 1, seed=s) for s in range(3)]
    a = batched_gradient_summaries(models, xs, "numpy")
    b = batched_gradient_summaries(models, xs, "cupy")
    for u, v in zip(a, b):  # float64 on both; cuBLAS vs BLAS summation order
        np.testing.assert_allclose(u, v, rtol=0, atol=1e-10)


def test_cupy_backend_fails_clearly_without_cupy_or_gpu():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("under Numba's CUDA simulator the GPU backend runs, by design")
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a GPU is present")
    except Exception:
        pass
    with pytest.raises(ParameterError, match="cupy") as err:
        dl.sweep("gradient_norms", {"K": [1, 2]}, fixed=FIXED, backend="cupy")
    assert err.value.param == "backend"


@pytest.mark.parametrize("analysis,fixed", [
    ("simulate", {**FIXED, "K": 2}),
    ("lyapunov", {**FIXED, "k": 2, "transient": 5}),
    ("irnn_equilibrium", {**FIXED, "steps": 8, "K": 2}),
])
def test_per_point_targets_equal_public_calls(analysis, fixed):
    res = dl.sweep(analysis, {"eta": [0.5, 1.0]}, fixed=fixed, seeds=2)
    for settings, idx in _points(res):
        run = {k: v for k, v in {**fixed, **settings}.items() if k not in ("k", "transient")}
        m, x = _run(run)
        if analysis == "simulate":
            h = dl.simulate(m, x)["h"].values
            assert res["final_norm"].values[idx] == np.linalg.norm(h[-1])
            assert abs(res["mean_abs_h"].values[idx] / np.abs(h).mean() - 1) <= 1e-14  # scaled mean: rounding
            assert res["max_abs_h"].values[idx] == np.abs(h).max()
        elif analysis == "lyapunov":
            lam = dl.lyapunov(m, x, k=2, transient=5)["lyapunov"].values
            np.testing.assert_array_equal(res["lyapunov"].values[idx], lam)
            assert list(res["exponent"].values) == [1, 2]
        else:
            h = dl.simulate(m, x)["h"].values
            eq = dl.irnn_equilibrium(m, x, np.vstack([np.zeros((1, 4)), h[:-1]]))
            assert res["residual"].values[idx] == float(eq["residual"].max())
            assert res["converged"].values[idx] == int(eq["converged"].values.all()) == 1
            assert res["residual"].values[idx] <= 1e-12
            # h_gap: the K-step state against the equilibrium, independently via the residual form
            s = eq["s_eq"].values
            np.testing.assert_allclose(m.equilibrium_residual(s, x), 0, atol=1e-12)
            assert res["h_gap"].values[idx] == np.abs(h - eq["h_eq"].values).max()


# ================================================================= grid layout
def test_zipped_axes_and_region_chunks():
    res = dl.sweep("gradient_norms", {"K": [1, 2, 3]}, zipped={"sched": {"eta": [0.2, 0.9], "alpha": [1.0, 0.5]}},
                   fixed=FIXED, seeds=3, region_size=4)
    assert res["ratio"].dims == ("K", "sched", "seed")
    assert list(res["eta"].values) == [0.2, 0.9] and res["eta"].dims == ("sched",)
    m, x = _run({**FIXED, "K": 2, "eta": 0.9, "alpha": 0.5, "seed": 2})
    (l1, _, _), _ = _public_grad(m, x)
    assert abs(res["log_jac_norm_1"].isel(K=1, sched=1, seed=2).item() - l1) <= 1e-12
    for shape, size in [((3, 2, 3), 4), ((7, 5), 64), ((2, 2, 2), 1), ((5,), 3)]:
        chunks = region_chunks(shape, size)
        assert int(np.prod(chunks)) <= size
        hits = np.zeros(shape, dtype=int)
        for r in regions(shape, chunks):
            hits[r] += 1
        assert (hits == 1).all()


# ================================================================= store, resume, errors
def _files(path):
    out = {}
    for root, _, names in os.walk(path):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, path)] = f.read()
    return out


def test_store_equals_memory_and_is_never_overwritten(tmp_path):
    path = str(tmp_path / "s.zarr")
    grid = {"K": [1, 3], "eta": [0.3, 1.0]}
    mem = dl.sweep("gradient_norms", grid, fixed=FIXED, seeds=2)
    ds = dl.sweep("gradient_norms", grid, fixed=FIXED, seeds=2, store=path, region_size=3)
    for v in ("ratio", "log_jac_norm_1", "diverged_at", "done"):
        np.testing.assert_array_equal(ds[v].values, mem[v].values)
    assert ds.attrs["points_computed"] == 8
    before = _files(path)
    with pytest.raises(ParameterError, match="already exists") as err:
        dl.sweep("gradient_norms", grid, fixed=FIXED, seeds=2, store=path)
    assert err.value.param == "store"
    with pytest.raises(ParameterError, match="another sweep spec.*eta") as err:
        dl.sweep("gradient_norms", {"K": [1, 3], "eta": [0.3, 0.9]}, fixed=FIXED, seeds=2, store=path, resume=True)
    with pytest.raises(ParameterError, match="hidden: 4 in the store vs 5"):
        dl.sweep("gradient_norms", grid, fixed={**FIXED, "hidden": 5}, seeds=2, store=path, resume=True)
    assert _files(path) == before
    again = dl.sweep("gradient_norms", grid, fixed=FIXED, seeds=2, store=path, resume=True)
    assert again.attrs["points_computed"] == 0
    np.testing.assert_array_equal(again["computed_at"].values, ds["computed_at"].values)
    # NetCDF export round-trips
    nc = str(tmp_path / "s.nc")
    dl.write_dataset(ds, nc)
    back = dl.read_dataset(nc)
    np.testing.assert_array_equal(back["ratio"].values, ds["ratio"].values)
    assert back.attrs["sweep_spec"] == ds.attrs["sweep_spec"]


@pytest.mark.parametrize("kwargs,param,match", [
    (dict(grid={"bogus": [1, 2]}), "grid.bogus", "unknown setting"),
    (dict(grid={}), "grid", "empty"),
    (dict(grid={"K": []}), "grid.K", "no values"),
    (dict(grid={"K": 5}), "grid.K", "list of values"),
    (dict(grid={"K": [1, 1.5]}), "grid.K", "integer"),
    (dict(grid={"eta": [0.5, "fast"]}), "grid.eta", "number"),
    (dict(grid={"K": [1, 2, 1]}), "grid.K", "more than once"),
    (dict(grid={"K": [1, 2]}, fixed={"K": 3}), "fixed.K", "given twice"),
    (dict(grid={"K": [1, 2]}, fixed={"hidden": "32"}), "fixed.hidden", "integer"),
    (dict(grid={"eta": [0.5, -1.0]}), "grid.eta", "> 0"),
    (dict(grid={"K": [1, 2]}, analysis="nope"), "analysis", "unknown analysis"),
    (dict(grid={"K": [1, 2]}, fixed={"beta": 1.0}), "fixed.beta", "unknown setting"),
    (dict(grid={"k": [1, 2]}, analysis="lyapunov"), "grid.k", "cannot be swept"),
    (dict(grid={"K": [1, 2]}, fixed={"k": 9}, analysis="lyapunov"), "fixed.k", "between 1 and hidden"),
    (dict(zipped={"z": {"K": [1, 2], "eta": [0.5]}}), "zip.z", "one length"),
    (dict(grid={"K": [1, 2]}, progress="yes"), "progress", "callable"),
])
def test_bad_specs_name_the_setting(kwargs, param, match):
    kw = dict(kwargs)
    analysis = kw.pop("analysis", "gradient_norms")
    grid = kw.pop("grid", None)
    fixed = {**FIXED, **kw.pop("fixed", {})}
    with pytest.raises(ParameterError, match=match) as err:
        dl.sweep(analysis, grid, fixed=fixed, **kw)
    assert err.value.param == param


def test_custom_target_in_a_few_lines():
    """Registering a target: spectral radius of U against numpy.linalg.eigvals directly."""
    def radius(run, opts, backend):
        model, _ = dl.sweep.model_and_input(run)
        return {"radius": float(np.abs(np.linalg.eigvals(model.U)).max())}

    name = "test_spectral_radius"
    register_target(Target(name, radius, {"radius": Var("spectral radius of U")}), replace=True)
    with pytest.raises(ValueError, match="already registered"):
        register_target(Target(name, radius, {"radius": Var("r")}))
    res = dl.sweep(name, {"weight_scale": [0.5, 2.0]}, fixed={"hidden": 6, "steps": 3})
    for ws in (0.5, 2.0):
        m = dl.make_model("irnn", 6, 1, seed=0, weight_scale=ws)
        assert res["radius"].sel(weight_scale=ws).item() == np.abs(np.linalg.eigvals(m.U)).max()
    dl.sweep.TARGETS.pop(name)


# ================================================================= Dask
def test_dask_local_cluster_equals_in_process(tmp_path):
    pytest.importorskip("distributed")
    grid = {"K": [1, 3], "eta": [0.3, 1.0]}
    opts = {"processes": False, "n_workers": 1, "threads_per_worker": 1}
    mem = dl.sweep("gradient_norms", grid, fixed=FIXED, seeds=2, region_size=2)
    dsk = dl.sweep("gradient_norms", grid, fixed=FIXED, seeds=2, region_size=2, scheduler="local", dask_options=opts)
    path = str(tmp_path / "d.zarr")
    dst = dl.sweep("gradient_norms", grid, fixed=FIXED, seeds=2, region_size=2, scheduler="local",
                   dask_options=opts, store=path)
    for v in ("ratio", "log_jac_norm_1", "log_step_norm_T", "diverged_at", "done"):
        np.testing.assert_array_equal(dsk[v].values, mem[v].values)
        np.testing.assert_array_equal(dst[v].values, mem[v].values)
    assert dst.attrs["points_computed"] == 8


# ================================================================= spec files and the CLI
SPEC = """
analysis = "gradient_norms"
region_size = 1
[model]
name = "irnn"
hidden = 3
[input]
kind = "random-walk"
steps = {steps}
[grid]
K = [1, 5, 10]
eta = [0.1, 0.5, 1.0]
weight_scale = [0.5, 1.0]
[repeat]
seeds = {seeds}
"""


def test_spec_file_equals_python_call(tmp_path, monkeypatch):
    from dynlab import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)   # the bar at once, and the tests' quiet lifted
    monkeypatch.delenv("DYNLAB_QUIET")
    spec = tmp_path / "g.toml"
    spec.write_text(SPEC.format(steps=20, seeds=2))
    out = str(tmp_path / "g.zarr")
    nc = str(tmp_path / "g.nc")
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", out, "--data", nc])
    assert r.exit_code == 0, r.output
    assert "points/s" in r.output and "ETA" in r.output and "36 computed now" in r.output
    ref = dl.sweep("gradient_norms", {"K": [1, 5, 10], "eta": [0.1, 0.5, 1.0], "weight_scale": [0.5, 1.0]},
                   fixed={"model": "irnn", "hidden": 3, "input": "random-walk", "steps": 20}, seeds=2)
    got = dl.read_dataset(nc)
    assert got["ratio"].dims == ("K", "eta", "weight_scale", "seed")
    np.testing.assert_array_equal(got["log_jac_norm_1"].values, ref["log_jac_norm_1"].values)
    assert got.attrs["command"].startswith("dynlab sweep")


@pytest.mark.parametrize("text,match", [
    ("analysis = 'gradient_norms'\n[grid]\nK = [1, 2]\n[modle]\nhidden = 3\n", "unknown key"),
    ("analysis = 'gradient_norms'\n[grid]\n", "grid: is empty"),
    ("analysis = 'gradient_norms'\n[model]\nhidden = '32'\n[grid]\nK = [1, 2]\n", "bad.toml: model.hidden: must be an integer"),
    ("analysis = 'gradient_norms'\n[grid]\nK = [1, 2]\nfoo = [1]\n", "grid.foo: unknown setting"),
    ("analysis = 'gradient_norms'\n[grid\nK = [1, 2]\n", "not valid TOML"),
    ("[grid]\nK = [1, 2]\n", "names no analysis"),
])
def test_bad_spec_files_exit_2_with_one_line(tmp_path, text, match):
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(tmp_path / "x.zarr")])
    assert r.exit_code == 2
    err = r.stderr if hasattr(r, "stderr") else r.output
    lines = [ln for ln in err.splitlines() if ln.startswith("Error")]
    assert len(lines) == 1 and match in lines[0], err
    assert not os.path.exists(tmp_path / "x.zarr")


def test_cli_refuses_to_overwrite_and_resume_needs_out(tmp_path):
    spec = tmp_path / "g.toml"
    spec.write_text(SPEC.format(steps=10, seeds=1))
    out = str(tmp_path / "g.zarr")
    assert CliRunner().invoke(main, ["sweep", str(spec), "--out", out]).exit_code == 0
    before = _files(out)
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", out])
    assert r.exit_code == 2 and "--out" in r.output and "already exists" in r.output
    spec.write_text(SPEC.format(steps=11, seeds=1))
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", out, "--resume"])
    assert r.exit_code == 2 and "another sweep spec" in r.output and "steps: 10 in the store vs 11" in r.output
    assert _files(out) == before
    r = CliRunner().invoke(main, ["sweep", str(spec), "--resume"])
    assert r.exit_code == 2 and r.output.startswith("Error: --resume: needs the store")


def test_sigkill_then_resume_recomputes_only_missing_points(tmp_path):
    """SIGKILL a CLI sweep midway; --resume finishes it: the store equals an uninterrupted
    run, and the points done before the kill keep their computed_at (never recomputed)."""
    import zarr

    spec = tmp_path / "g.toml"
    spec.write_text(SPEC.format(steps=200, seeds=4))  # 72 points, one region each
    out = str(tmp_path / "k.zarr")
    cmd = [sys.executable, "-m", "dynlab.cli", "sweep", str(spec), "--out", out]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    done_at_kill = None
    try:
        # count the ``done`` chunk files (one per region, written only when the region is
        # done): cheap enough to poll every few ms, unlike decoding the array, so the kill
        # lands a few points after the 10th whatever the machine's speed.
        chunk_dir = os.path.join(out, "done", "c")
        while time.time() < deadline:
            n = sum(len(files) for _, _, files in os.walk(chunk_dir))
            if n >= 10 or proc.poll() is not None:
                break
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before it could be killed"
    g = zarr.open_group(out, mode="r")
    done_at_kill = np.asarray(g["done"][...]).astype(bool)
    stamps_at_kill = np.asarray(g["computed_at"][...])
    # the kill may land between a chunk file's creation and its write: that region reads as
    # not done (and is recomputed below), so at least 9 of the 10 counted regions are done
    assert 9 <= done_at_kill.sum() < done_at_kill.size
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", out, "--resume"])
    assert r.exit_code == 0, r.output
    missing = int(done_at_kill.size - done_at_kill.sum())
    assert f"{missing} computed now" in r.output
    final = dl.sweep.store.load(out)
    assert final["done"].all()
    # finished points were not recomputed: their timestamps are untouched
    np.testing.assert_array_equal(final["computed_at"].values[done_at_kill], stamps_at_kill[done_at_kill])
    assert (final["computed_at"].values[~done_at_kill] > np.nanmax(stamps_at_kill)).all()
    ref = dl.sweep("gradient_norms", {"K": [1, 5, 10], "eta": [0.1, 0.5, 1.0], "weight_scale": [0.5, 1.0]},
                   fixed={"model": "irnn", "hidden": 3, "input": "random-walk", "steps": 200}, seeds=4)
    for v in ("ratio", "log_ratio", "log_jac_norm_1", "log_step_norm_T", "diverged_at"):
        np.testing.assert_array_equal(final[v].values, ref[v].values)
    assert json.loads(final.attrs["sweep_spec"]) == json.loads(ref.attrs["sweep_spec"])


def test_resume_on_a_missing_store_starts_it_and_cli_help(tmp_path):
    path = str(tmp_path / "new.zarr")
    ds = dl.sweep("simulate", {"K": [1, 2]}, fixed=FIXED, store=path, resume=True)
    assert ds.attrs["points_computed"] == 2 and ds["done"].all()
    r = CliRunner().invoke(main, ["sweep", "--help"])
    assert r.exit_code == 0 and "--resume" in r.output and "--scheduler" in r.output


def test_cli_cupy_backend_fails_with_one_line_without_cupy(tmp_path):
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a GPU is present")
    except Exception:
        pass
    spec = tmp_path / "g.toml"
    spec.write_text(SPEC.format(steps=10, seeds=1))
    r = CliRunner().invoke(main, ["sweep", str(spec), "--backend", "cupy", "--out", str(tmp_path / "c.zarr")])
    assert r.exit_code == 2 and "--backend" in r.output and "cupy" in r.output
    assert not os.path.exists(tmp_path / "c.zarr")


def test_xarray_region_writes_equal_the_direct_zarr_writes(tmp_path):
    """zarr 3 + xarray's to_zarr(region=…) on the same template gives the same store contents
    as the direct chunk writes the sweep uses (the pinned versions work together)."""
    import xarray as xr

    from dynlab.sweep import compute_region, make_sweep_spec
    from dynlab.sweep import store as st
    from dynlab.sweep.driver import _attrs
    from dynlab.sweep.targets import get_target

    grid = {"K": [1, 2, 3]}
    direct = dl.sweep("lyapunov", grid, fixed={**FIXED, "k": 2}, seeds=2, store=str(tmp_path / "a.zarr"),
                      region_size=2)
    spec = make_sweep_spec("lyapunov", grid, fixed={**FIXED, "k": 2}, seeds=2)
    target = get_target("lyapunov")
    chunks = region_chunks(spec.shape, 2)
    tmpl, var_chunks = st.template(spec, target, chunks, _attrs(spec, "numba", None, chunks))
    path = str(tmp_path / "b.zarr")
    st.create(path, tmpl, var_chunks, chunks)
    for region in regions(spec.shape, chunks):
        values = compute_region(spec, region, "numba")
        reg = dict(zip(spec.dims, region))
        data = {n: ((spec.dims + ("exponent",)) if n == "lyapunov" else spec.dims, v) for n, v in values.items()}
        xr.Dataset(data).to_zarr(path, region={**reg, "exponent": slice(None)}, mode="r+", consolidated=False)
        xr.Dataset({"done": (spec.dims, np.ones(values["computed_at"].shape, np.int8))}).to_zarr(
            path, region=reg, mode="r+", consolidated=False)
    via_xr = st.load(path)
    for v in ("lyapunov", "diverged_at", "done"):
        np.testing.assert_array_equal(via_xr[v].values, direct[v].values)
        assert via_xr[v].dtype == direct[v].dtype


def test_simulate_target_reports_divergence_like_simulate():
    fixed = {"model": "rnn", "hidden": 3, "steps": 900, "activation": "identity", "weight_scale": 3.0}
    res = dl.sweep("simulate", {"seed": [0, 2]}, fixed=fixed)
    assert res.attrs["input"] == DEFAULT_INPUT == "noise" and res.attrs["inputs"] == 1
    for settings, idx in _points(res):
        m, x = _run({**fixed, **settings})
        with pytest.raises(DivergenceError) as err:
            dl.simulate(m, x)
        assert res["diverged_at"].values[idx] == err.value.step > 0
        h = err.value.partial["h"].values  # the finite steps before it
        # |h| reaches ≈ 1e308 here: the plain mean overflows; scaled by 2^-1000 it does not
        want = np.abs(h * 2.0 ** -1000).mean() * 2.0 ** 1000
        assert np.isfinite(want) and abs(res["mean_abs_h"].values[idx] / want - 1) <= 1e-12
        assert res["max_abs_h"].values[idx] == np.abs(h).max()
        assert np.isnan(res["final_norm"].values[idx])


def test_spec_file_zip_and_seed_list(tmp_path):
    spec = tmp_path / "z.toml"
    spec.write_text('analysis = "lyapunov"\n[model]\nname = "irnn"\nhidden = 3\n[input]\nsteps = 30\n'
                    '[options]\nk = 2\n[grid]\nK = [1, 3]\n[zip.sched]\neta = [0.2, 0.9]\nalpha = [1.0, 0.5]\n'
                    '[repeat]\nseeds = [3, 7]\n')
    from dynlab.sweep import sweep_from_file

    got = sweep_from_file(spec)
    ref = dl.sweep("lyapunov", {"K": [1, 3]}, zipped={"sched": {"eta": [0.2, 0.9], "alpha": [1.0, 0.5]}},
                   fixed={"model": "irnn", "hidden": 3, "steps": 30, "k": 2}, seeds=[3, 7])
    assert got["lyapunov"].dims == ("K", "sched", "seed", "exponent")
    assert list(got["seed"].values) == [3, 7]
    np.testing.assert_array_equal(got["lyapunov"].values, ref["lyapunov"].values)
    m, x = _run({"hidden": 3, "steps": 30, "K": 3, "eta": 0.9, "alpha": 0.5, "seed": 7})
    np.testing.assert_array_equal(got["lyapunov"].sel(K=3, sched=1, seed=7).values,
                                  dl.lyapunov(m, x, k=2)["lyapunov"].values)

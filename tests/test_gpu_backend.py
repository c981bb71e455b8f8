"""The GPU backend (``dynlab.backends.gpu``): every operation × every kernel form against the
NumPy reference, on a GPU where one is present and under Numba's CUDA simulator where not.

How it runs (``gpu_cases`` has the cases): the GPU side runs in this process when the ``cupy``
backend can run here (a GPU with CuPy, or a session started with ``NUMBA_ENABLE_CUDASIM=1``), else
in ONE child process with ``NUMBA_ENABLE_CUDASIM=1`` — Numba reads the variable when it is first
imported, so the simulator is never switched on for the rest of the session (where ``cupy`` must
keep refusing to run without a GPU).  The reference side runs here.  The module skips only where
``numba.cuda`` cannot be imported at all (the reason names the NumPy).

Tolerances, per quantity:

* float64 states, Jacobians, log-norms, Lyapunov logs, tangents: |Δ| ≤ 1e-12·max(1, |ref|).  Both
  sides evaluate the same formulas and differ in summation order only (≈ 1e-16 per operation over
  a few dozen operations); σ₁ by Jacobi on the Gram matrix vs LAPACK's SVD differ by ≈ n·ε
  relative (``kernels.top_sv``).
* float32 states and tangents: |Δ| ≤ 3e-5·max(1, |ref|) against the float64 reference.  Each step
  rounds the D-term products, the activation and the update at the float32 unit roundoff
  u = 6·10⁻⁸, a few u per step; the test models contract (weight scale ≤ 0.5), so the errors add
  over the T = 5 (sweeps: 6, with K ≤ 3 inner steps) steps rather than grow: ≲ T·K·(D + 10)·u ≈
  3·10⁻⁵, the bound asserted.  The float32 run must also differ from the float64 one (it did not
  compute in float64).
* integers, flags, partition codes and divergence steps: exactly.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import gpu_cases

pytestmark = pytest.mark.gpu

F64_RTOL = 1e-12
F32_RTOL = 3e-5


def _in_process():
    """The cupy backend object when it can run in this process, else None."""
    from dynlab.backends import get_backend
    from dynlab.errors import ParameterError

    try:
        return get_backend("cupy")
    except ParameterError:
        return None


@pytest.fixture(scope="module")
def gpu_side(tmp_path_factory):
    """{'results': {case: arrays or traceback}, 'launches': [...], 'shapes': [...], 'device': str}."""
    be = _in_process()
    if be is not None:
        launches, shapes = set(), set()
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-4)
        try:
            results = gpu_cases.run_all(be, gpu_cases.case_ids(), launches, shapes)
        finally:
            sys.setswitchinterval(old)
        return {"results": results, "launches": sorted(launches), "shapes": sorted(shapes), "device": be.device}
    out = tmp_path_factory.mktemp("gpu") / "gpu.pkl"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, gpu_cases.__file__, str(out)], env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"the simulator child failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    with open(out, "rb") as fh:
        data = pickle.load(fh)
    if "unavailable" in data:
        if "numba.cuda cannot be imported" in data["unavailable"]:
            pytest.skip(data["unavailable"])
        pytest.fail(f"the cupy backend does not run under the simulator: {data['unavailable']}")
    return data


def _reference(case):
    from dynlab.backends.reference import ReferenceBackend

    with np.errstate(all="ignore"):
        return gpu_cases.run(ReferenceBackend(), case)


_float32, _close, _as_float64_case = gpu_cases.float32_case, gpu_cases.close, gpu_cases.as_float64_case


REFERENCE_CASES = [c for c in gpu_cases.case_ids() if c not in gpu_cases.GPU_ONLY]


@pytest.mark.parametrize("case", REFERENCE_CASES)
def test_gpu_case_equals_the_reference(gpu_side, case):
    got = gpu_side["results"][case]
    if isinstance(got, str):
        pytest.fail(f"{case} raised on the GPU backend:\n{got}")
    case = gpu_cases.base_case(case)       # a variant of the backend computes what the reference does
    if _float32(case):
        want = _reference(case if case.startswith("api-") else _as_float64_case(case))
        for k, g in got.items():
            g, w = np.asarray(g), want[k]
            if np.asarray(w).dtype.kind == "f" and k not in ("bad",):
                assert g.dtype == np.float32, (k, g.dtype)     # float32 stays float32 on the device
            _close(g, np.asarray(w, dtype=np.float64) if np.asarray(w).dtype.kind == "f" else w, F32_RTOL,
                   f"{case}: {k}")
        if not case.startswith("api-"):
            f64 = gpu_side["results"][_as_float64_case(case)]
            diff = [k for k in got if np.asarray(got[k]).dtype.kind == "f"
                    and np.any(np.asarray(got[k], dtype=np.float64) != np.asarray(f64[k]))]
            assert diff, f"{case}: the float32 run equals the float64 one bit for bit (did it run in float32?)"
        return
    want = _reference(case)
    assert set(got) == set(want), (sorted(got), sorted(want))
    for k in want:
        if case.startswith("implicit") and k == "residual":  # both below tol: compare against it, not relatively
            assert np.all(np.asarray(got[k]) <= 1e-12) and np.all(np.asarray(want[k]) <= 1e-12), (got[k], want[k])
            continue
        _close(got[k], want[k], F64_RTOL, f"{case}: {k}")


def test_partition_codes_are_not_all_one_piece(gpu_side):
    """The partition case compares codes that vary (so an error in a sign would show)."""
    got = gpu_side["results"]["partition-2layers"]
    assert not isinstance(got, str), got
    assert 0 < got["codes0"].mean() < 1 and 0 < got["codes1"].mean() < 1


def test_divergence_is_reported_as_on_the_cpu(gpu_side):
    """The divergent cases do diverge, at different steps per sequence/setting."""
    for case in ("simulate-diverge-stop", "simulate-diverge-flag"):
        got = gpu_side["results"][case]
        assert not isinstance(got, str), got
        assert np.all(got["bad"] < 40) and got["bad"][0] != got["bad"][1], got["bad"]
    sweep = gpu_side["results"]["sweep-diverge"]
    assert not isinstance(sweep, str), sweep
    assert sweep["bad"][1] > 0 and sweep["bad"][0] == 0 and np.isnan(sweep["log1"][1]), sweep


def test_scipy_ctrnn_and_training_are_refused_naming_backend(gpu_side):
    got = gpu_side["results"]["refuse-scipy-ctrnn"]
    assert not isinstance(got, str), got
    for name in ("simulate", "gradient_norms", "jacobians"):
        param, message = got[name]
        assert param == "backend" and "ctrnn" in message and "numpy" in message, (name, message)
    assert not got["supports_train"][0]


def test_a_launch_past_the_limits_is_refused_before_it_runs(gpu_side):
    """A launch that asks for more shared memory than a block may have (the CTRNN Jacobian's 7
    vectors at D = 900: 50,400 bytes) raises LaunchError naming the kernel and the limit — under
    the simulator too, which would have run it."""
    got = gpu_side["results"]["refuse-launch"]
    assert not isinstance(got, str), got
    msg = str(got["error"][0])
    assert "jac_ctrnn" in msg and "50,400" in msg and "49,152" in msg, msg


def test_every_launch_fits_a_real_gpu(gpu_side):
    """Every launch the cases made (the simulator's thread counts, ≤ 16 per block) passed the launch
    check against an H100's limits; here again, on the records: ≤ 1024 threads, ≤ 48 KiB shared."""
    from dynlab.backends.gpu.limits import SIMULATED

    shapes = gpu_side["shapes"]
    assert shapes, "no launch was recorded"
    for name, blocks, threads, shared in shapes:
        assert 1 <= threads <= SIMULATED.max_threads_per_block, (name, threads)
        assert 0 <= shared <= SIMULATED.max_shared_per_block, (name, shared)
        assert 1 <= blocks <= SIMULATED.max_grid_x, (name, blocks)


def test_the_large_cases_take_the_global_paths(gpu_side):
    """The D = 64/128 cases ran kernels whose D² parts do not fit 48 KiB: their launches asked for
    little shared memory (the vectors) although the matrices they walk are 32–128 KiB."""
    shapes = {(name, shared) for name, _, _, shared in gpu_side["shapes"]}
    small = {name for name, shared in shapes if shared < 8 * 64 * 64}
    for kernel in ("jac_irnn", "qr_steps", "products", "sim_cell", "sim_irnn", "top_sv_power"):
        assert kernel in small, (kernel, sorted(s for s in shapes if s[0] == kernel))


def test_every_kernel_is_exercised(gpu_side):
    """Every kernel of ``kernels`` ran in the cases above (with the types the compile test uses)."""
    from dynlab.backends.gpu import kernels as gpu_kernels

    launched = {name for name, _, _ in gpu_side["launches"]}
    assert launched == set(gpu_kernels.KERNEL_NAMES), sorted(set(gpu_kernels.KERNEL_NAMES) ^ launched)


_COMPILE = """
import pickle, sys
import numba
from numba import cuda, types
from dynlab.backends.gpu.device import numpy_row_stack_shim
from dynlab.backends.gpu.kernels import kernels
import numpy as np
numpy_row_stack_shim()
launches = pickle.load(open(sys.argv[1], "rb"))
def nb(desc):
    if desc[0] == "array":
        return types.Array(numba.from_dtype(np.dtype(desc[1])), desc[2], "C")
    return types.boolean if desc[1] == "bool" else numba.from_dtype(np.dtype(desc[1]))
out = {}
for name, dt, args in launches:
    fn = getattr(kernels(np.dtype(dt)), name).py_func
    ptx, _ = cuda.compile_ptx(fn, tuple(nb(a) for a in args), cc=(8, 0))
    out[(name, dt, args)] = ptx
pickle.dump(out, open(sys.argv[2], "wb"))
"""


def test_every_kernel_compiles_for_a_device(gpu_side, tmp_path):
    """The simulator runs kernels as Python; a real device compiles them.  Every launch the cases
    made is compiled to PTX with its own argument types (``numba.cuda.compile_ptx``), and a
    float32 launch must compile to float32 arithmetic (no ``.f64`` multiply-adds: the point of
    the float32 path).  numba-cuda compiles the cells' ``register_jitable`` functions as device
    functions for the current device, so this needs NVVM and a CUDA driver: where the cases ran on
    a GPU it runs, elsewhere it skips."""
    probe = subprocess.run([sys.executable, "-c", "from dynlab.backends.gpu.device import numpy_row_stack_shim\n"
                            "numpy_row_stack_shim()\nfrom numba import cuda\nfrom dynlab.backends import cells\n"
                            "def k(a):\n    a[0] = cells.one(a[0])\n"
                            "cuda.compile_ptx(k, 'void(float64[::1])', cc=(8, 0))"],
                           env={k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"},
                           capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        why = [line for line in probe.stderr.splitlines() if "Error" in line or "cannot" in line] or ["?"]
        pytest.skip(f"cannot compile CUDA kernels here (needs NVVM and a CUDA driver): {why[-1].strip()[:200]}")
    src, dst = tmp_path / "launches.pkl", tmp_path / "ptx.pkl"
    with open(src, "wb") as fh:
        pickle.dump(gpu_side["launches"], fh)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-c", _COMPILE, str(src), str(dst)], env=env, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(dst, "rb") as fh:
        ptx = pickle.load(fh)
    for (name, dt, _), text in ptx.items():
        assert ".entry" in text, name
        if dt == "<f4":
            assert "fma.rn.f64" not in text and "mul.rn.f64" not in text, f"{name} (float32) computes in float64"


def test_check_available_names_backend_without_a_gpu():
    """Here (no simulator in this process) without a GPU the backend refuses before any work,
    naming ``backend`` and saying why."""
    from dynlab.backends import get_backend
    from dynlab.errors import ParameterError

    if _in_process() is not None:
        pytest.skip("the cupy backend runs in this process (a GPU, or the simulator)")
    with pytest.raises(ParameterError) as err:
        get_backend("gpu")
    assert err.value.param == "backend" and "cupy" in str(err.value)
    assert any(w in str(err.value) for w in ("GPU", "numba.cuda", "CuPy"))


def test_region_size_from_device_memory():
    """A sweep region fills SWEEP_MEMORY_FRACTION of the free memory: 80 GB free, D = 32,
    T = 200, float64 → 0.5·80e9 / (2·8·(6400 + 4·1024 + 1 + 16)) ≈ 238 000 settings (the whole
    10⁴-setting benchmark sweep in one region), capped at SWEEP_MAX_REGION, at least 1."""
    from dynlab.backends.gpu import GPUBackend

    n = GPUBackend.region_from_memory(80e9, 32, 200, 1)
    assert n == int(0.5 * 80e9 // (16 * (32 * 200 + 4 * 32 * 32 + 1 + 16)))
    assert 200_000 < n < 300_000
    assert GPUBackend.region_from_memory(float("inf"), 32, 200) == GPUBackend.SWEEP_MAX_REGION
    assert GPUBackend.region_from_memory(1.0, 32, 200) == 1


def test_sweep_driver_asks_the_backend_for_its_region_size(monkeypatch):
    """``sweep`` without ``region_size`` chunks a batched target's grid by the backend's answer
    (None: REGION_SIZE_BATCHED), for the grid's largest setting; per-point targets keep
    REGION_SIZE."""
    import dynlab as dl
    from dynlab.backends import get_backend
    from dynlab.sweep import driver

    be = get_backend("numba")
    asked = []

    def answer(hidden, steps, inner=1):
        asked.append((hidden, steps, inner))
        return 3

    monkeypatch.setattr(be, "sweep_region_size", answer, raising=False)
    res = dl.sweep("gradient_norms", {"K": [1, 2], "eta": [0.3, 0.5, 0.7], "hidden": [2, 3]},
                   fixed={"model": "irnn", "steps": 4}, backend="numba")
    assert asked == [(3, 4, 2)]
    assert res.attrs["sweep_chunks"] != ",".join(map(str, res["done"].shape))  # cut into regions of ≤ 3 points
    assert int(np.prod([int(c) for c in res.attrs["sweep_chunks"].split(",")])) <= 3
    monkeypatch.setattr(be, "sweep_region_size", lambda *a, **k: None, raising=False)
    spec = driver.make_sweep_spec("gradient_norms", {"K": [1, 2]}, fixed={"model": "irnn"})
    assert driver.default_region_size(spec, driver.get_target("gradient_norms"), "numba") == \
        driver.REGION_SIZE_BATCHED
    spec = driver.make_sweep_spec("lyapunov", {"K": [1, 2]}, fixed={"model": "irnn"})
    assert driver.default_region_size(spec, driver.get_target("lyapunov"), "numba") == driver.REGION_SIZE


def test_row_stack_shim_restores_vstack_only_where_missing():
    code = ("import numpy as np\n"
            "from dynlab.backends.gpu.device import numpy_row_stack_shim\n"
            "had = hasattr(np, 'row_stack')\n"
            "orig = getattr(np, 'row_stack', None)\n"
            "assert numpy_row_stack_shim() is (not had)\n"
            "assert np.row_stack is (orig if had else np.vstack)\n"
            "if had:\n"
            "    del np.row_stack\n"
            "    assert numpy_row_stack_shim() and np.row_stack is np.vstack\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr

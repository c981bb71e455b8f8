"""The GPU sweep kernel (``dynlab.backends.gpu.kernels_tangent``) at sizes that take each of its
memory paths, against the NumPy reference, and its launch shapes against a real GPU's limits.

The kernel keeps a setting's D × D iterates (and Rᵀ) in shared memory while they fit the 48 KB a
block may have, else in a global scratch: ``msh`` = 2 (iterates and Rᵀ), 1 (iterates), 0
(neither).  The cases run under Numba's CUDA simulator (in one child process with
``NUMBA_ENABLE_CUDASIM=1``, as ``test_gpu_backend.py`` does, or in this process where the ``cupy``
backend runs) at D = 5 and D = 32 float64 (msh 2: D = 32 is the size whose iterates used to spill
to a 491 MB global scratch), D = 40 (msh 1, T = 2: one pass gives M_T and J_T) and D = 46 (msh 0,
four settings on two blocks: the grid-stride loop reuses a block's scratch slot), short T; and
the one-line cells in float32.  Every batch has four settings in three groups (two share their
matrices and input).  The simulator checks
no limit, so every launch's shared bytes and threads are asserted here, and the shape a device
would get (``GPUBackend.tangent_launch(simulator=False)``) for every D ≤ 128.

Tolerances: float64 logs, M̃_T, J_T: |Δ| ≤ 1e-12·max(1, |ref|) — the same formulas in other
summation orders (a 2 × 2 register tile sums the same products in the same order per output as
the reference's matmul up to BLAS's blocking), ≈ D·T·K·2⁻⁵³; float32: 3e-5·max(1, |ref|) against
the float64 reference (``test_gpu_backend``'s bound: ≲ T·K·(D + 10)·u for contracting models);
divergence steps exactly.  ``sweep_gradients`` (σ₁ by ``top_singular``, whose method is the GPU
backend's ``norm_method``) against the reference's LAPACK SVD: 1e-10.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SHARED_LIMIT = 48 * 1024     # what a CUDA block may have without opting in
THREAD_LIMIT = 1024
#: case → (kind, D, T, dtype, the msh the simulator's launch must take, the settings' K)
CASES = {
    "irnn-D5-f64": ("irnn", 5, 4, "float64", 2, (1, 3, 2)),
    "irnn-D32-f64": ("irnn", 32, 3, "float64", 2, (1, 3, 2)),
    "irnn-D40-T2-f64": ("irnn", 40, 2, "float64", 1, (1, 2, 1)),
    "irnn-D46-f64": ("irnn", 46, 3, "float64", 0, (1, 2, 1)),
    "cell-D6-f32": ("cell", 6, 4, "float32", 2, (1, 1, 1)),
}
#: the case whose ``sweep_gradients`` (the tangents, then ``top_singular``) is compared too (σ₁ at
#: large D under the simulator takes minutes; the tangents are the kernel of this file)
NORM_CASE = "irnn-D5-f64"


def _batch(case):
    import dynlab as dl
    from dynlab.backends.base import stack_tangent

    kind, D, T, dtype, _, Ks = CASES[case]
    rng = np.random.default_rng(D * 100 + T)
    forms, xs = [], []
    for s, K in enumerate(Ks):
        if kind == "irnn":
            m = dl.make_model("irnn", D, 2, seed=s, K=K, eta=0.4, g0="previous" if s == 1 else "zero",
                              sign=-1 if s == 2 else 1, weight_scale=0.5)
        else:
            m = dl.make_model("fastrnn" if s == 1 else "rnn", D, 2, seed=s, weight_scale=0.6)
        forms.append(m.form())
        xs.append(rng.standard_normal((T, 2)))
    forms.append(forms[0])           # a fourth setting sharing the first one's group
    xs.append(xs[0])
    tb = stack_tangent(forms, xs)
    assert tb.R.shape[0] == 3 and tb.size == 4
    return tb.astype(np.float32) if dtype == "float32" else tb


def run_cases(be) -> dict:
    """{case: arrays or a traceback, "launches": [(case, blocks, threads, shared, msh)]}."""
    import traceback

    out, launches = {}, []
    real = be._launch
    case = [None]

    def recording(kernel, blocks, threads, shared, *args):
        if getattr(kernel, "py_func", kernel).__name__ == "tangent":
            launches.append((case[0], int(blocks), int(threads), int(shared), int(args[14])))
        return real(kernel, blocks, threads, shared, *args)

    be._launch = recording
    try:
        for name in CASES:
            case[0] = name
            try:
                tb = _batch(name)
                logs, M, J, bad = be.forward_tangent(tb)
                res = {"logs": logs, "M": M, "J": J, "bad": bad}
                if name == NORM_CASE:
                    res.update(zip(("log1", "logT", "bad1"), be.sweep_gradients(tb)))
                out[name] = res
            except Exception:
                out[name] = traceback.format_exc()
    finally:
        del be._launch
    out["launches"] = launches
    return out


def _in_process():
    from dynlab.backends import get_backend
    from dynlab.errors import ParameterError

    try:
        return get_backend("cupy")
    except ParameterError:
        return None


@pytest.fixture(scope="module")
def gpu_side(tmp_path_factory):
    be = _in_process()
    if be is not None:
        return run_cases(be)
    out = tmp_path_factory.mktemp("gpu-sweep") / "out.pkl"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, __file__, str(out)], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"the simulator child failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    with open(out, "rb") as fh:
        data = pickle.load(fh)
    if "unavailable" in data:
        pytest.skip(data["unavailable"])
    return data


def _close(got, want, rtol, where):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, where
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=where)
    ok = np.isfinite(want)
    err = np.abs(got[ok] - want[ok]) / np.maximum(1.0, np.abs(want[ok]))
    assert err.size == 0 or err.max() <= rtol, f"{where}: relative error {err.max():.3g} > {rtol:g}"


@pytest.mark.parametrize("case", list(CASES))
def test_sweep_kernel_equals_the_reference(gpu_side, case):
    from dynlab.backends.reference import ReferenceBackend

    got = gpu_side[case]
    if isinstance(got, str):
        pytest.fail(f"{case} raised on the GPU backend:\n{got}")
    ref = ReferenceBackend()
    tb = _batch(case)
    f32 = CASES[case][3] == "float32"
    want = dict(zip(("logs", "M", "J", "bad"), ref.forward_tangent(tb.astype(np.float64))))
    for k in ("logs", "M", "J"):
        if f32:
            assert np.asarray(got[k]).dtype == np.float32, k
        _close(got[k], want[k], 3e-5 if f32 else 1e-12, f"{case}: {k}")
    np.testing.assert_array_equal(got["bad"], want["bad"])
    if case == NORM_CASE:
        for k, w in zip(("log1", "logT", "bad1"), ref.sweep_gradients(tb)):
            _close(got[k], w, 1e-10, f"{case}: {k}")


def test_every_memory_path_ran_within_a_gpus_limits(gpu_side):
    """Each case's launch took the path it was sized for, and no launch asked for more shared
    memory or threads than a real GPU gives."""
    seen = {}
    for case, blocks, threads, shared, msh in gpu_side["launches"]:
        assert shared <= SHARED_LIMIT and 1 <= threads <= THREAD_LIMIT and blocks >= 1, (case, threads, shared)
        seen.setdefault(case, set()).add(msh)
    assert seen == {case: {c[4]} for case, c in CASES.items()}, seen


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("gated", [False, True])
def test_device_launch_shapes_fit_a_real_gpu(dtype, gated):
    """On a device (``simulator=False``): every D ≤ 128 launches within 48 KB and 1024 threads; the
    sweep workload's D = 32 float64 keeps its iterates and Rᵀ in shared memory (36 KB with 256
    threads), and a global scratch is bounded by ``SCRATCH_BLOCKS`` blocks however many settings."""
    from dynlab.backends.gpu import GPUBackend

    be = GPUBackend()
    for D in range(1, 129):
        shape = be.tangent_launch(10 ** 6, D, dtype, gated, simulator=False)
        assert shape["shared"] <= SHARED_LIMIT and 1 <= shape["threads"] <= THREAD_LIMIT, (D, shape)
        assert shape["threads"] >= min(be.MAX_THREADS, ((D + 1) // 2) ** 2)     # a thread per 2 × 2 tile
        if shape["msh"] == 0:
            assert shape["scratch_shape"] == (shape["blocks"], 3, D * D) and shape["blocks"] <= be.SCRATCH_BLOCKS
    d32 = be.tangent_launch(10 ** 4, 32, dtype, gated, simulator=False)
    assert d32["msh"] == 2 and d32["threads"] == min(256, be.MAX_THREADS)
    if dtype == np.float64 and not gated:
        assert d32["shared"] == 8 * (6 * 32 + max(32, d32["threads"]) + 4 * 32 * 32)
        if be.MAX_THREADS == 256:    # 8·(6D + 256 + 4D²) ≤ 48 KB up to D = 37; 8·(6D + 256 + 3D²) up to 43
            assert [be.tangent_launch(1, D, dtype, False, simulator=False)["msh"]
                    for D in (37, 38, 43, 44)] == [2, 1, 1, 0]


def child(path: str) -> None:
    """The simulator child: the cases on the GPU backend, pickled to ``path``."""
    sys.setswitchinterval(1e-4)  # the simulator's barriers hand the GIL round its threads
    try:
        from dynlab.backends import get_backend

        be = get_backend("cupy")
    except Exception as exc:
        with open(path, "wb") as fh:
            pickle.dump({"unavailable": f"{type(exc).__name__}: {exc}"}, fh)
        return
    with np.errstate(all="ignore"):
        data = run_cases(be)
    with open(path, "wb") as fh:
        pickle.dump(data, fh)


if __name__ == "__main__":
    child(sys.argv[1])

"""The same numbers on an older x86 CPU: dynlab's jitted kernels compiled for AVX2 (x86-64-v3)
and for SSE4.2 (x86-64-v2) on this machine, against its native code.

Numba generates each kernel for the CPU it runs on, so the code the other tests check is this
machine's (AVX-512 on the development machine).  A CPU with narrower vectors or without fused
multiply-adds runs different code: other vector widths, other remainder loops, and without FMA
every ``a * b + c`` rounded twice.  Here a child process (tests/isa_child.py) targets the older
level, the way ``python -m benchmarks.run --isa LEVEL`` does (benchmarks/isa.py: Numba's CPU
name and features, OpenBLAS's core type), and its numbers are compared with this process's:

- tanh and σ of the fused kernels, on the grids of the native ulp tests, against 80-bit
  (long double) references, i.e. correctly rounded: tanh ≤ 2.5 ulp (Cephes documents a peak
  relative error of 2.5e-16 for the rational approximation; measured 2.25 ulp on every level
  and natively) and σ ≤ 3 ulp (the native test's bound; measured 1.96).  Not against float64
  np.tanh, as the native test is: NumPy has its own SIMD tanh per x86 level (up to 1.16 ulp
  from the 80-bit value on this machine's AVX-512), so the float64 reference moves with the level;
- ``dl.simulate`` of an iRNN (K = 3), a GRU and an LSTM, each through the jitted loops and the
  vectorised BLAS kernel, and the exact training gradients of each (loss, every parameter,
  the read-out, h_0): ≤ 1e-12 relative to the largest entry.  The kernels differ between
  levels only by rounding (≤ 2–3 ulp per transcendental, a different summation order in BLAS)
  over 30 steps of cells whose Jacobians have norm ≈ 1, so the differences are ≈ 1e-15
  (measured: 6.7e-16 with AVX2, 1.2e-15 with SSE4.2); a kernel that vectorised wrongly or lost
  a remainder loop on one level differs at O(1).  They must also not all be 0: bitwise equal
  numbers would mean the child ran this machine's code, and the check compared it with itself.

A level is skipped where this CPU does not have it, and where it has nothing above it (an
AVX2 CPU's native code is already AVX2 code).  Each child compiles every kernel it uses once,
into its own empty Numba cache; the two children run at the same time, one per core (≈ 45 s
on two cores), hence ``slow``.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import isa_child
from conftest import benchmarks_module

pytestmark = pytest.mark.slow


def _isa_module():
    return benchmarks_module("isa")


def _ulps80(got, x, f):
    """|got − f(x)| in float64 ulps of f(x), f evaluated in long double."""
    ref = f(x.astype(np.longdouble))
    spacing = np.spacing(np.abs(ref.astype(np.float64))).astype(np.longdouble)
    return np.where(got == ref, 0.0, (np.abs(got.astype(np.longdouble) - ref) / spacing).astype(np.float64))


def _sigmoid80(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _activation_ulps(res):
    return (np.max(_ulps80(res["tanh"], res["tanh_x"], np.tanh)),
            np.max(_ulps80(res["sigmoid"], res["sigmoid_x"], _sigmoid80)))


#: each level, and the first host feature above it
LEVELS = {"avx2": "avx512f", "sse4.2": "avx"}


@pytest.fixture(scope="module")
def native():
    return isa_child.results()


@pytest.fixture(scope="module")
def older(tmp_path_factory):
    """{level: (exit status, stderr, results file, Numba's CPU name, its feature set)} or
    {level: why it is skipped}; the children run at the same time, one per core."""
    isa = _isa_module()
    script = os.path.join(os.path.dirname(__file__), "isa_child.py")
    probe = "import numba.core.config as c; print(c.CPU_NAME, c.CPU_FEATURES)"
    import llvmlite.binding as ll

    host = dict(ll.get_host_cpu_features())
    started = {}
    for level, above in LEVELS.items():
        try:
            env = isa.environment(level)
        except ValueError as e:  # this CPU does not have the level
            started[level] = str(e)
            continue
        if not host.get(above, False):
            started[level] = f"this CPU has no {above}: its own code is {level} code, tested everywhere else"
            continue
        folder = tmp_path_factory.mktemp(level)
        env = {**os.environ, **env, "NUMBA_CACHE_DIR": str(folder / "numba-cache")}
        seen = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
        name, features = seen.stdout.split()
        out = folder / "older.npz"
        child = subprocess.Popen([sys.executable, script, str(out)], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        started[level] = (child, out, name, set(features.split(",")))
    done = {}
    for level, run in started.items():
        if isinstance(run, str):
            done[level] = run
            continue
        child, out, name, features = run
        _, err = child.communicate(timeout=900)
        done[level] = (child.returncode, err, out, name, features)
    return done


@pytest.mark.parametrize("level", list(LEVELS))
def test_an_older_x86_level_computes_the_same_numbers(level, native, older):
    run = older[level]
    if isinstance(run, str):
        pytest.skip(run)
    code, err, out, name, features = run
    assert name == _isa_module().LEVELS[level]["cpu"] and "+avx512f" not in features   # the level is in force
    assert ("+fma" in features) == (level == "avx2") and ("+avx" in features) == (level == "avx2")
    assert code == 0, err[-3000:]
    older = dict(np.load(out))
    assert sorted(older) == sorted(native)

    if np.finfo(np.longdouble).nmant >= 63:                     # x87 extended or quad precision
        for res in (native, older):
            tanh_ulps, sigmoid_ulps = _activation_ulps(res)
            assert tanh_ulps <= 2.5 and sigmoid_ulps <= 3.0, (tanh_ulps, sigmoid_ulps)
    worst = {}
    for key, ref in native.items():
        if key in ("tanh", "sigmoid", "tanh_x", "sigmoid_x"):
            continue
        got = older[key]
        assert got.shape == ref.shape and np.all(np.isfinite(got)), key
        worst[key] = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-300))
    assert max(worst.values()) <= 1e-12, {k: v for k, v in worst.items() if v > 1e-12}
    assert max(worst.values()) > 0.0     # other code did run: a native-against-native check passes vacuously

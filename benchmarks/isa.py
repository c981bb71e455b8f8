"""``python -m benchmarks.run --isa LEVEL``: the benchmarks as an older x86 CPU would run them.

dynlab's kernels are Numba's LLVM code for whatever CPU runs them, and its products are BLAS's
(NumPy's and SciPy's OpenBLAS pick their kernels when they load).  A result measured on one
machine says little about a CPU with narrower vectors, so this re-runs the benchmarks on the
same machine with every library held to an x86 level:

``avx2``    x86-64-v3 (AVX2 + FMA, no AVX-512): most x86 CPUs of the last ten years.
``sse4.2``  x86-64-v2 (SSE4.2, no AVX): the oldest 64-bit CPUs still in use.

How each library is held there (environment variables, set before any of them loads; the
process re-executes itself with them):

- Numba: ``NUMBA_CPU_NAME`` (haswell / nehalem) and ``NUMBA_CPU_FEATURES``, the host's features
  with every extension above the level turned off (the CPU name alone keeps the host's
  features).  Numba keys its on-disk cache by CPU name and features, so the native entries stay.
- OpenBLAS (NumPy's and SciPy's): ``OPENBLAS_CORETYPE`` = Haswell / Nehalem.
- NumPy's own SIMD loops: ``NPY_DISABLE_CPU_FEATURES``, the dispatched targets above the level.
- PyTorch: ``ATEN_CPU_CAPABILITY`` (avx2 / default), MKL: ``MKL_ENABLE_INSTRUCTIONS``.
- JAX: ``XLA_FLAGS=--xla_cpu_max_isa=…``.  This holds XLA's generated code (element-wise work)
  but not its matrix products: a (256 × 128)·(128 × 128) float64 product took 198 µs natively
  and 211 µs at ``sse4.2`` on the 2-core AMD EPYC, where OpenBLAS held to Nehalem took 479 µs
  (BENCHMARKS.md, issue 20, sixth session).  JAX's products-heavy rows are therefore faster
  than the level allows, most of all at ``sse4.2`` (where jaxlib's wheels would not run at
  all: they need AVX).

The level must be one the host has: held to a level above it, the code would not run.
"""
from __future__ import annotations

import os
import sys

#: level → (Numba CPU name, host-feature prefixes and names kept, OpenBLAS core, ATen, MKL, XLA,
#: NumPy dispatch targets turned off)
LEVELS = {
    "avx2": dict(cpu="haswell", keep=("avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe"),
                 openblas="Haswell", aten="avx2", mkl="AVX2", xla="AVX2",
                 numpy_off=("X86_V4", "AVX512F", "AVX512CD", "AVX512_SKX", "AVX512_CLX", "AVX512_CNL",
                            "AVX512_ICL", "AVX512_SPR")),
    "sse4.2": dict(cpu="nehalem", keep=(), openblas="Nehalem", aten="default", mkl="SSE4_2", xla="SSE4_2",
                   numpy_off=("X86_V3", "AVX", "F16C", "FMA3", "AVX2", "X86_V4", "AVX512F", "AVX512CD",
                              "AVX512_SKX", "AVX512_CLX", "AVX512_CNL", "AVX512_ICL", "AVX512_SPR")),
}
#: the x86-64-v2 features every level keeps
_BASE = ("64bit", "cmov", "cx8", "cx16", "fxsr", "mmx", "sahf", "popcnt", "crc32", "sse", "sse2", "sse3",
         "ssse3", "sse4.1", "sse4.2")
#: set in the re-executed process, so that it does not re-execute again
MARK = "DYNLAB_BENCH_ISA"


def numba_features(host: dict, level: str) -> str:
    """``NUMBA_CPU_FEATURES`` for ``level``: each of the host's features on if the level has it
    and the host does, off otherwise.  Raises ValueError if the host lacks one the level needs."""
    need = set(_BASE) | set(LEVELS[level]["keep"])
    missing = sorted(f for f in need if f in host and not host[f])
    if missing:
        raise ValueError(f"--isa {level}: this CPU lacks {', '.join(missing)}")
    return ",".join(("+" if (on and name in need) else "-") + name for name, on in sorted(host.items()))


def environment(level: str) -> dict:
    """The environment variables that hold every library to ``level`` (module docstring)."""
    import llvmlite.binding as ll

    spec = LEVELS[level]
    dispatched = numpy_dispatch_targets()
    off = [t for t in spec["numpy_off"] if dispatched is None or t in dispatched]
    xla = (os.environ.get("XLA_FLAGS", "") + f" --xla_cpu_max_isa={spec['xla']}").strip()
    env = {
        MARK: level,
        "NUMBA_CPU_NAME": spec["cpu"],
        "NUMBA_CPU_FEATURES": numba_features(dict(ll.get_host_cpu_features()), level),
        "OPENBLAS_CORETYPE": spec["openblas"],
        "ATEN_CPU_CAPABILITY": spec["aten"],
        "MKL_ENABLE_INSTRUCTIONS": spec["mkl"],
        "XLA_FLAGS": xla,
    }
    if off:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(off)
    return env


def numpy_dispatch_targets() -> set | None:
    """The SIMD targets NumPy dispatches at run time (its ``found`` and ``not_found``), read from
    ``numpy.show_runtime()`` (public, NumPy ≥ 1.24); None when that report has no such entry."""
    import contextlib
    import io
    import re

    import numpy as np

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        np.show_runtime()
    names = set()
    for key in ("found", "not_found"):
        m = re.search(rf"'{key}':\s*\[([^\]]*)\]", text.getvalue())
        if m:
            names.update(re.findall(r"'([A-Z0-9_]+)'", m.group(1)))
    return names or None


def reexec(level: str, argv: list) -> None:
    """Run ``python -m benchmarks.run ARGV`` again with the environment of ``level`` (no return)."""
    env = dict(os.environ)
    env.update(environment(level))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "benchmarks.run", *argv], env)


def describe(level: str) -> str:
    """A line for the results' header."""
    spec = LEVELS[level]
    return (f"held to {level}: Numba code for {spec['cpu']} (host features above it off), "
            f"OpenBLAS {spec['openblas']}, torch {spec['aten']}, XLA max ISA {spec['xla']} (not its products)")

#!/usr/bin/env bash
# The one script a session with a GPU runs (docs/howto/gpu.md, "One GPU run"): the GPU tests, then the
# quick GPU table, everything it prints kept under $OUT.  Made for the lent machines (an H100 or H200
# with PyTorch, JAX, CuPy and numba-cuda installed, nothing reachable outside): from the repository
# root,
#
#     bash benchmarks/gpu_session.sh            # run tool: timeout_s=590, carry [".gpu-wheels"]
#
# .gpu-wheels/ (git-ignored; made beforehand with `pip download platformdirs --no-deps -d .gpu-wheels`)
# holds the wheels of what dynlab imports that the machine's image lacks: only platformdirs there.
# Budget (the device time of a session is 15 minutes, the machine's start included): the tests at most
# 300 s (most of it is compiling every kernel for the device), the table at most 270 s (--quick: every
# row at reduced sizes).  What it writes under $OUT: versions.txt, pytest-gpu.txt, bench.txt and
# BENCHMARKS-gpu.md (the table, rewritten after every row, so a run cut short keeps its rows).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" DYNLAB_QUIET=1 DYNLAB_COMPILE_NOTICE=0
export XLA_PYTHON_CLIENT_PREALLOCATE=false

if ! "$PY" -c "import platformdirs" 2>/dev/null && [ -d .gpu-wheels ]; then
  "$PY" -m pip install -q --no-index --find-links .gpu-wheels platformdirs
fi
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  "$PY" --version
  "$PY" -m pip list 2>/dev/null | grep -iE '^(numpy|numba|numba-cuda|cupy|cupy-cuda1[23]x|jax|jaxlib|torch|xarray|scipy|platformdirs) '
  "$PY" -c "import dynlab; from dynlab.backends.gpu.device import runtime; print('dynlab', dynlab.__file__, '|', runtime())"
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

timeout 300 "$PY" -m pytest -q -m gpu --import-mode=importlib -p no:cacheprovider \
  tests/test_gpu_backend.py tests/test_gpu_limits.py tests/test_gpu_flow.py > "$OUT/pytest-gpu.txt" 2>&1
echo "pytest -m gpu: exit $? (tail of $OUT/pytest-gpu.txt:)"
tail -n 25 "$OUT/pytest-gpu.txt"

timeout 270 "$PY" -m benchmarks.run --gpu --quick --markdown "$OUT/BENCHMARKS-gpu.md" 2>&1 | tee "$OUT/bench.txt"
echo "benchmarks --gpu --quick: exit ${PIPESTATUS[0]}"

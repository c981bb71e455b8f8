"""The GPU backend's launch limits (``dynlab.backends.gpu.limits``) and the launch shapes it plans
for a real GPU, checked without one.

Numba's simulator runs any launch; a GPU refuses a block of more than 1024 threads, more than
48 KiB of shared memory (numba-cuda exposes no opt-in), or more registers than the block shape
allows.  These tests need no simulator and no GPU: ``check_launch`` is arithmetic on the launch
shape, and the backend's ``_plan_*`` methods — which its operations call to shape every launch —
are asked for the shapes a real device gets (256 threads per block, 8192 grid-stride blocks) at
D = 16, 64, 128 and 256, the sizes of the issue's goals.  The sweep's tangent kernel plans its
launch inline: its launch is taken, checked and recorded without running.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")

from dynlab.backends.gpu import GPUBackend  # noqa: E402
from dynlab.backends.gpu.limits import (KERNEL_MAX_REGISTERS, SIMULATED, Launch, LaunchError,  # noqa: E402
                                        check_launch)

pytestmark = pytest.mark.gpu

SIZES = (16, 64, 128, 256)


def _device_backend():
    """A GPUBackend that plans as on a real device (its thread and block caps), with an H100's limits."""
    be = GPUBackend()
    be.simulated = False
    be.limits = SIMULATED
    return be


def test_limits_of_every_kind():
    check_launch(Launch("k", 1, 1024 // 4, 48 * 1024), SIMULATED)          # at the limits: fine
    for bad, what in ((Launch("k", 1, 1025, 0), "1025 threads"), (Launch("k", 1, 0, 0), "0 threads"),
                      (Launch("k", 0, 32, 0), "0 blocks"), (Launch("k", 2 ** 31, 32, 0), "blocks"),
                      (Launch("k", 1, 32, 48 * 1024 + 1), "shared memory")):
        with pytest.raises(LaunchError, match=what) as err:
            check_launch(bad, SIMULATED)
        assert "'k'" in str(err.value) and "\n" not in str(err.value)


def test_registers_need_a_cap_past_256_threads():
    """255 registers per thread (uncapped), allocated per warp in units of 256: 8 warps × 8192 =
    65536 registers fill a block at 256 threads; 512 threads need a cap; a 32×32 block needs
    max_registers ≤ 64 (a real GPU answers CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES without it)."""
    check_launch(Launch("uncapped", 1, 256, 0), SIMULATED)
    with pytest.raises(LaunchError, match="registers"):
        check_launch(Launch("uncapped", 1, 512, 0), SIMULATED)
    try:
        KERNEL_MAX_REGISTERS["capped64"] = 64
        KERNEL_MAX_REGISTERS["capped65"] = 65
        check_launch(Launch("capped64", 1, 1024, 0), SIMULATED)           # 32 warps × 2048 = 65536
        with pytest.raises(LaunchError, match="max_registers"):
            check_launch(Launch("capped65", 1, 1024, 0), SIMULATED)       # 32 × 2304 > 65536
    finally:
        del KERNEL_MAX_REGISTERS["capped64"], KERNEL_MAX_REGISTERS["capped65"]


def launch_table(be, D: int) -> list:
    """Every kernel family's planned launch at hidden size D on ``be``: [(what, Launch, in shared)]."""
    out = []
    for kind, G, B in (("cell", 1, 256), ("irnn", 1, 256), ("ctrnn", 1, 256), ("gru", 3, 1024), ("lstm", 4, 1024)):
        for dt in (8, 4):
            launch, per, wsh = be._plan_simulate(kind, B, D, G, dt)
            out.append((f"simulate {kind} B={B} float{8 * dt}", launch, wsh))
    out.append((f"gate_step B=1024", be._plan_gate_step(1024, D), True))
    for kind in ("cell", "irnn", "ctrnn", "gru", "lstm"):
        for want_x in (False, True):
            launch, msh, _ = be._plan_jacobians(kind, 1000, D, 8, want_x)
            out.append((f"jacobians {kind}{' +x' if want_x else ''}", launch, msh))
    for B in (1, 256):
        launch, psh = be._plan_products(B, D)
        out.append((f"products B={B}", launch, psh))
    for n in (D, 2 * D):            # an LSTM's state is 2D
        for dt in (8, 4):
            launch, msh = be._plan_power(1000, n, dt)
            out.append((f"top_sv_power n={n} float{8 * dt}", launch, msh))
            launch, gsh = be._plan_jacobi(1000, n, dt)
            out.append((f"top_sv (Jacobi) n={n} float{8 * dt}", launch, gsh))
    for k in (2, D):
        launch, qsh = be._plan_qr(1, D, k)
        out.append((f"qr_steps k={k}", launch, qsh))
    out.append(("reverse", be._plan_reverse(256, D, 8), True))
    out.append(("picard", be._plan_implicit("picard", 1000, D), True))
    out.append(("flow_rk4", be._plan_implicit("flow_rk4", 1000, D), True))
    return out


@pytest.mark.parametrize("D", SIZES)
def test_every_planned_launch_fits_a_real_gpu(D):
    """Every kernel family's launch at D = 16 … 256 as a real device gets it passes the launch
    check, and the D² parts go to global memory exactly where they would not fit."""
    be = _device_backend()
    for what, launch, _ in launch_table(be, D):
        check_launch(launch, SIMULATED)
        assert launch.threads <= 256, (what, launch)
    shapes = {what: (launch, flag) for what, launch, flag in launch_table(be, D)}
    # the fallbacks: the working sets of the issue (8·(2n² + n + threads) > 48 KiB from n = 55 on)
    assert shapes["products B=1"][1] == (8 * (2 * D * D + D + 256) <= 48 * 1024)
    assert shapes[f"qr_steps k={D}"][1] == (8 * (2 * D * D + D + 256) <= 48 * 1024)
    assert shapes[f"top_sv (Jacobi) n={D} float64"][1] == (8 * (D * D + D + 256) <= 48 * 1024)
    if D >= 64:
        assert not shapes["products B=1"][1] and not shapes[f"qr_steps k={D}"][1]
        assert not shapes["jacobians irnn"][1]                  # two D×D iterates: 64 KiB at D = 64
    if D >= 128:
        assert not shapes["simulate irnn B=256 float64"][1]     # U: 128 KiB at D = 128


@pytest.mark.parametrize("D", SIZES)
def test_the_sweep_tangent_launch_fits_a_real_gpu(D):
    """The sweep's forward-tangent kernel (planned inside ``_tangent_dev``): its launch as a real
    device gets it, taken by a recorder that checks it and does not run it."""
    import dynlab as dl
    from dynlab.backends.base import stack_tangent

    be = _device_backend()
    seen = []

    def record(kernel, blocks, threads, shared, *args):
        launch = Launch(getattr(kernel, "py_func", kernel).__name__, int(blocks), int(threads), int(shared))
        check_launch(launch, be.limits)
        seen.append(launch)

    be._launch = record
    forms = [dl.make_model("irnn", D, 1, seed=s, K=2).form() for s in range(2)]
    be.forward_tangent(stack_tangent(forms, [np.zeros((2, 1))] * 2))
    assert [s.kernel for s in seen] == ["tangent"], seen


def test_a_launch_past_the_limits_raises_before_running():
    """The CTRNN's Jacobian kernel keeps 7 vectors of D float64 in shared memory whatever the budget:
    at D = 900 that is 50,400 bytes, past the 49,152 a block may have, and ``_launch`` refuses in one
    line naming the kernel — before any kernel runs (here there is neither a GPU nor the simulator)."""
    import dynlab as dl

    be = _device_backend()
    m = dl.make_model("ctrnn", 900, 1, seed=0, method="euler")
    with pytest.raises(LaunchError, match=r"'jac_ctrnn'.*50,400 bytes.*49,152.*backend='numba'"):
        be.jacobians(m.form(), np.zeros((1, 1)), np.zeros((1, 900)))


def test_kernels_declare_no_static_shared_memory():
    """The launch check counts the dynamic shared memory as the block's whole: every shared array
    in the kernel modules is the dynamic one, ``cuda.shared.array(0, FT)``."""
    folder = Path(__file__).resolve().parents[1] / "dynlab" / "backends" / "gpu"
    if not folder.is_dir():
        import dynlab.backends.gpu as pkg

        folder = Path(pkg.__file__).parent
    calls = []
    for path in sorted(folder.glob("kernels*.py")):
        calls += re.findall(r"cuda\.shared\.array\(([^)]*)\)", path.read_text(encoding="utf-8"))
    assert calls and all(c.replace(" ", "") == "0,FT" for c in calls), calls

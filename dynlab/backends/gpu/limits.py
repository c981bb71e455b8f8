"""What a GPU accepts in one launch, checked before every launch — on a GPU and under the simulator.

Numba's CUDA simulator runs any launch shape: a block of 4096 threads, a megabyte of dynamic
shared memory.  A GPU refuses them (``CUDA_ERROR_INVALID_VALUE``, ``…_LAUNCH_OUT_OF_RESOURCES``).
So every launch of the GPU backend goes through ``check_launch`` with the limits of the device it
runs on (``device_limits``): the real device's attributes on a GPU, an H100's under the simulator
(``SIMULATED``: the limits of every current NVIDIA GPU but the SM count, not "unlimited"), and a
launch that a GPU would refuse raises ``LaunchError`` in both — one line naming the kernel, what it
asked for and the limit.

The limits checked:

* threads per block ≤ ``MAX_THREADS_PER_BLOCK`` (1024), and ≥ 1; blocks in [1, ``MAX_GRID_DIM_X``];
* static + dynamic shared memory per block ≤ ``MAX_SHARED_MEMORY_PER_BLOCK`` (48 KiB: more needs an
  opt-in, ``cudaFuncSetAttribute``, which numba-cuda does not expose).  The backend's kernels
  declare no static shared arrays (only ``cuda.shared.array(0, …)``, a test reads their sources),
  so the dynamic bytes are the whole;
* registers: a block's warps × the registers of a warp ≤ ``MAX_REGISTERS_PER_BLOCK`` (65536).  A
  kernel may use up to 255 registers per thread unless compiled with ``max_registers``
  (``KERNEL_MAX_REGISTERS``), and registers are allocated per warp in units of 256, so without a
  cap at most 256 threads per block always launch — a 32×32 block needs ``max_registers=64``
  (seen on an H200: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES without it).  The backend's own kernels use ≤ 256 threads.
"""
from __future__ import annotations

import dataclasses
import functools

from ...errors import DynlabError

#: Registers per thread a kernel is compiled with, for kernels compiled with a cap
#: (``cuda.jit(max_registers=…)``); the others may use up to ``REGISTERS_UNCAPPED``.
KERNEL_MAX_REGISTERS: dict = {}
#: The most registers a thread of an uncapped kernel may use (every NVIDIA GPU since Kepler).
REGISTERS_UNCAPPED = 255
#: Registers are allocated per warp in units of this many.
REGISTER_UNIT = 256


class LaunchError(DynlabError, RuntimeError):
    """A kernel launch that the GPU would refuse (module docstring): raised before the launch, on a
    GPU and under the simulator alike."""


@dataclasses.dataclass(frozen=True)
class DeviceLimits:
    """The launch limits of one device (``device_limits``)."""

    name: str
    max_threads_per_block: int = 1024
    max_shared_per_block: int = 48 * 1024
    max_grid_x: int = 2 ** 31 - 1
    max_registers_per_block: int = 65536
    multiprocessors: int = 132
    warp_size: int = 32


#: The simulator's stand-in: an H100 SXM's limits (the same as every NVIDIA GPU since Volta but
#: the 132 SMs).
SIMULATED = DeviceLimits("an H100's limits (Numba's CUDA simulator enforces none of its own)")


@dataclasses.dataclass(frozen=True)
class Launch:
    """One launch's shape: ``kernel`` (its name), ``blocks``, ``threads`` per block, ``shared``
    bytes of dynamic shared memory per block."""

    kernel: str
    blocks: int
    threads: int
    shared: int

    def registers(self, warp_size: int = 32) -> int:
        """Registers the block needs at most: its warps × the per-warp allocation of the kernel's
        per-thread cap (``KERNEL_MAX_REGISTERS``, else 255), rounded up to ``REGISTER_UNIT``."""
        per_thread = KERNEL_MAX_REGISTERS.get(self.kernel, REGISTERS_UNCAPPED)
        per_warp = -(-per_thread * warp_size // REGISTER_UNIT) * REGISTER_UNIT
        return -(-self.threads // warp_size) * per_warp


def check_launch(launch: Launch, limits: DeviceLimits) -> None:
    """Raise ``LaunchError`` (one line) when ``launch`` exceeds ``limits`` (module docstring)."""
    where = f"GPU launch of kernel {launch.kernel!r} ({launch.blocks} blocks × {launch.threads} threads, " \
            f"{launch.shared:,} bytes of shared memory per block) on {limits.name}"
    if not 1 <= launch.threads <= limits.max_threads_per_block:
        raise LaunchError(f"{where}: {launch.threads} threads per block, the device allows 1 to "
                          f"{limits.max_threads_per_block}")
    if not 1 <= launch.blocks <= limits.max_grid_x:
        raise LaunchError(f"{where}: {launch.blocks} blocks, the device allows 1 to {limits.max_grid_x:,}")
    if not 0 <= launch.shared <= limits.max_shared_per_block:
        raise LaunchError(f"{where}: more shared memory than the {limits.max_shared_per_block:,} bytes a block may "
                          f"have without an opt-in (numba-cuda has none); the sizes are past this kernel's "
                          f"shared-memory layout — use backend='numba'")
    regs = launch.registers(limits.warp_size)
    if regs > limits.max_registers_per_block:
        raise LaunchError(f"{where}: up to {regs:,} registers per block "
                          f"({KERNEL_MAX_REGISTERS.get(launch.kernel, REGISTERS_UNCAPPED)} per thread), the device has "
                          f"{limits.max_registers_per_block:,}: compile the kernel with max_registers "
                          f"(KERNEL_MAX_REGISTERS) or launch fewer threads")


def limits_of(device) -> DeviceLimits:
    """The ``DeviceLimits`` of a ``numba.cuda`` device (its driver attributes)."""
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    return DeviceLimits(name=name, max_threads_per_block=int(device.MAX_THREADS_PER_BLOCK),
                        max_shared_per_block=int(device.MAX_SHARED_MEMORY_PER_BLOCK),
                        max_grid_x=int(device.MAX_GRID_DIM_X),
                        max_registers_per_block=int(device.MAX_REGISTERS_PER_BLOCK),
                        multiprocessors=int(device.MULTIPROCESSOR_COUNT), warp_size=int(device.WARP_SIZE))


@functools.lru_cache(maxsize=1)
def device_limits() -> DeviceLimits:
    """The limits launches are checked against here: the current device's on a GPU, ``SIMULATED``
    under the simulator or where no device can run (nothing launches then)."""
    from .device import runtime

    rt = runtime()
    if rt.simulator or rt.problem is not None:
        return SIMULATED
    return limits_of(rt.cuda.get_current_device())


__all__ = ["LaunchError", "DeviceLimits", "SIMULATED", "Launch", "check_launch", "limits_of", "device_limits",
           "KERNEL_MAX_REGISTERS", "REGISTERS_UNCAPPED"]

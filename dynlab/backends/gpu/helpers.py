"""Device helpers the GPU kernels share (``block_sum``, ``block_sum2``, ``block_max``), handed to each kernel
module with that module's globals (``device_functions``)."""
from __future__ import annotations

import types

from numba import cuda  # a module global: the simulator swaps it for its own in the kernels' globals
from numba.extending import register_jitable  # device helpers: compiled into each kernel, no device query


def _block_sum(red, v):
    """Σ of v over the block's threads (blockDim a power of two); every thread gets it."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    red[tid] = v
    cuda.syncthreads()
    s = nt // 2
    while s > 0:
        if tid < s:
            red[tid] += red[tid + s]
        cuda.syncthreads()
        s //= 2
    out = red[0]
    cuda.syncthreads()
    return out


def _block_sum2(red, red2, a, b):
    """(Σ a, Σ b) over the block's threads in one tree (blockDim a power of two; ``red``, ``red2``
    blockDim long each); every thread gets both."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    red[tid] = a
    red2[tid] = b
    cuda.syncthreads()
    s = nt // 2
    while s > 0:
        if tid < s:
            red[tid] += red[tid + s]
            red2[tid] += red2[tid + s]
        cuda.syncthreads()
        s //= 2
    out = red[0]
    out2 = red2[0]
    cuda.syncthreads()
    return out, out2


def _block_max(red, v):
    """max of v over the block's threads (``max``'s order: a NaN after the first value is skipped);
    every thread gets it."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    red[tid] = v
    cuda.syncthreads()
    if tid == 0:
        for k in range(1, nt):
            v = max(v, red[k])
        red[0] = v
    cuda.syncthreads()
    out = red[0]
    cuda.syncthreads()
    return out


def device_functions(module_globals) -> types.SimpleNamespace:
    """The device helpers (``block_sum``, ``block_sum2``, ``block_max``) bound to the globals of the kernel
    module that calls them: the same code, but its ``cuda`` is that module's, which Numba's simulator
    swaps for its own while one of that module's kernels runs (a helper with this module's globals
    would see the real ``numba.cuda`` there)."""
    fn = types.FunctionType(_block_sum.__code__, module_globals, "block_sum")
    fn2 = types.FunctionType(_block_sum2.__code__, module_globals, "block_sum2")
    fnm = types.FunctionType(_block_max.__code__, module_globals, "block_max")
    return types.SimpleNamespace(block_sum=register_jitable(fn), block_sum2=register_jitable(fn2),
                                 block_max=register_jitable(fnm))

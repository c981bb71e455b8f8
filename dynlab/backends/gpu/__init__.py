"""The GPU backend (``cupy``, alias ``gpu``): fused CUDA kernels that keep the time loop on the
device, CuPy arrays on a real GPU, and the very same kernels under Numba's CUDA simulator.

How arrays are chosen (``device.runtime``, decided once per process):

* a real GPU — ``numba.cuda`` sees a device and CuPy imports: every array is a CuPy array (its
  memory pool), the input drives and gate pre-activations of all steps are one cuBLAS GEMM
  each (CuPy's ``matmul``), and the kernels (``numba.cuda``) read and write those arrays through
  ``__cuda_array_interface__``; only the results a Dataset needs come back to the host;
* ``NUMBA_ENABLE_CUDASIM=1`` (no GPU, no CuPy needed): every array is a NumPy array and the
  same kernels run under Numba's simulator (one Python thread per CUDA thread, slowly) — how CI
  and ``pytest -m gpu`` without a GPU exercise every kernel;
* anything else: ``check_available`` raises ``ParameterError`` naming ``backend`` with the
  reason (no numba-cuda, no CuPy, no device) before any work.

NumPy 2.5 and numba-cuda 0.30.4: the CUDA target registers an overload of ``np.row_stack``,
which NumPy 2.5 removed, so it fails on first use; the backend restores the alias
(``numpy.row_stack = numpy.vstack``, what it was until 2.5) just before a real device is used
(``device.numpy_row_stack_shim``).  The simulator never loads the CUDA target and needs nothing.

=================  =========================================================================
operation          kernel (``kernels``) and host side (``backend``, ``flow``)
=================  =========================================================================
simulate           ``sim_cell``, ``sim_irnn`` (K inner steps), ``sim_ctrnn`` (Euler/RK4
                   substeps): a slice of sequences per block, all T steps in one launch;
                   W x_t + b for all steps first as one GEMM.  GRU/LSTM: ``sim_gated`` (one
                   launch) below ``GATED_GEMM_MIN_BATCH`` sequences, else per step one GEMM
                   h_{t−1} W_hhᵀ over the batch (cuBLAS) and the ``gate_step`` kernel; stacks
                   layer by layer, the states staying on the device
jacobians          ``jac_cell``, ``jac_irnn`` (the K-step product), ``jac_ctrnn`` (exact
                   derivative of the Euler/RK4 scheme), ``jac_gated``: one point per block
                   (grid-stride); stacks composed from the layers' (``reference.jacobians.stack``)
backward_norms     the products P_t = P_{t+1} J_{t+1}: below ``PRODUCTS_KERNEL_MIN_BATCH``
                   sequences (the SM count) a blocked scan of batched GEMMs (``flow``), else the
                   fused ``products`` (one sequence per block); σ₁ of every P̃_t and J_t by the
                   certified power iteration ``top_sv_power``, Jacobi (``top_sv``) where it
                   cannot certify (``flow.top_singular``)
gradient_flow      the J_t of a chunk of steps, the products and the norms all on the device
tangent_qr,        ``qr_steps`` (J_t Q and classical Gram–Schmidt twice): fused, one sequence per
lyapunov_logr      block, from ``QR_FUSED_MIN_BATCH`` sequences on, else step by step (J_t Q one
                   batched GEMM, the Gram–Schmidt the same kernel); the frames stay on the device
forward_tangent,   ``tangent``: one sweep setting per block, state and tangent through all T·K
sweep_gradients    inner steps, then σ₁ of M̃_T and J_T as above
partition_trace    ``sim_cell`` writing its own pre-activations z_t (the codes' signs)
reverse_cotangents ``reverse``: one cotangent row per block, t = T … 1 inside
implicit_solve     ``picard`` and ``flow_rk4`` (one point per block); Newton for the points
                   Picard leaves on the host (the reference's batched LAPACK Newton)
=================  =========================================================================

Launch limits (``limits``): every launch is checked before it runs against the device's limits —
threads per block, blocks, static + dynamic shared memory (48 KiB: numba-cuda has no opt-in),
registers for the block shape — on a GPU its own, under the simulator an H100's, and a launch a GPU
would refuse raises ``LaunchError`` in one line.  Each kernel keeps its vectors in shared memory and
its D² parts (weights, iterates, products, frames, Gram matrices) there only while they fit, else in
global memory or a per-block global scratch (``GPUBackend``'s docstring).

Results: NumPy arrays on the host, copied back through pinned memory (``device.to_host``); inside
``GPUBackend.results_on_device()`` the operations return CuPy arrays instead.

Speed: **unmeasured** — the backend was built and tested under the simulator; no timing on a GPU
exists yet (``python -m benchmarks.run --gpu``; ``benchmarks/gpu_session.sh``).

Falls back / refuses: a CTRNN with a scipy method (``supports`` is False for every operation:
scipy's adaptive solvers run on the host — use numpy or numba), the training passes
(``train_forward``/``train_backward``: not on this backend).

Precision: the kernels are precision-generic (``dynlab.backends.cells``); ``simulate`` and
``forward_tangent`` run in the dtype asked for (float32 stays float32 on the device), every other
operation in float64.

Tests: ``pytest -m gpu`` runs every operation × every kernel form against the NumPy reference
(``tests/test_gpu_backend.py``), on the GPU where one is present and under the simulator (in a
child process with ``NUMBA_ENABLE_CUDASIM=1``) where not.
"""
from __future__ import annotations

from .backend import GPUBackend

__all__ = ["GPUBackend"]

"""The numba backend, the CPU default: jitted loops, BLAS products, and the CPU-specific paths.

Which kernel serves which kind is ``NumbaBackend.KERNELS`` (operation → {kind: kernel}, read by
``Backend.kernel`` and ``supports``); where one kind has several kernels, the size thresholds
between them are ``backend.PATHS`` (operation → {kind: path chooser}).  The paths and thresholds
(tunables in ``dynlab.config``):

=================  =========================================================================
operation          paths
=================  =========================================================================
simulate           ``loops``: one jitted scalar loop per form (small per-step work: B·D² <
                   ``VECTORISE_MIN_WORK``); ``batched``: one BLAS product over the batch and a
                   jitted element-wise pass per inner step, the batch split into blocks of
                   sequences on dynlab's threads; a CTRNN with a scipy method: the reference
jacobians          ``loops``: jitted per-point kernels; ``batched``: the reference's closed
                   form as BLAS products over the points (D past ``JACOBIAN_VECTORISE_MIN_HIDDEN``,
                   the iRNN's from ``JACOBIAN_IRNN_BLAS_MIN_HIDDEN``: one jitted call per block
                   of points, the blocks on threads)
backward_norms     one jitted loop for the whole pass (D ≤ ``GRADIENT_NUMBA_MAX_HIDDEN``), else
                   the products in one jitted BLAS chain and σ₁ by certified power iteration
                   with a Gram-matrix fallback (``norms``, ``lapack``)
tangent_qr         jitted Gram–Schmidt (small D), LAPACK's QR past it
gradient_flow      iRNN without step norms, D past ``GRADIENT_NUMBA_MAX_HIDDEN``: reverse-mode
                   pullback through the K inner steps, no J_t formed (``reverse``)
lyapunov_logr      iRNN, D past that, k ≤ ``LYAPUNOV_TANGENT_MAX_K``: k tangent vectors through
                   the K inner steps (``irnn_tangent``)
=================  =========================================================================

Thread policy: a public call runs inside ``with backend:``, BLAS on
``config.NUMBA_BLAS_THREADS`` threads (``threads.limit_blas_threads``: a loop of small products
stalls on BLAS's own threads); independent work (blocks of sequences or points) is split over
dynlab's own threads instead (``threads.in_threads``), one per CPU.
"""
from __future__ import annotations

from .backend import NumbaBackend

__all__ = ["NumbaBackend"]

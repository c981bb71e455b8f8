"""Tunables in one place (thresholds, flags) so kernels stay free of magic numbers."""

#: Backend used when a public function is called with ``backend=None``.
DEFAULT_BACKEND = "numba"

#: The numba backend runs jitted scalar loops when the per-step work is small, and the
#: vectorised BLAS kernel (one matrix product + one ufunc pass per inner step over the whole
#: batch) when B·D² reaches this size: past it a scalar ``tanh`` inside a loop (≈15 ns) and a
#: non-BLAS matrix-vector loop cost more than the Python overhead of the vectorised kernel
#: (≈10 µs per inner step).  Measured on 2 cores, see BENCHMARKS.md.
VECTORISE_MIN_WORK = 1 << 16

#: ``cache=True`` for every @njit kernel, so the compiled code survives the process.
NUMBA_CACHE = True

#: Jacobians (dynlab.analysis.jacobians) under the numba backend: the jitted per-point loops
#: do the D×D·D×D products of the iRNN's inner steps and the CTRNN's stages as plain loops,
#: the batched NumPy/BLAS form does them as einsum/matmul over all N points plus several
#: (N, D, D) element-wise passes.  The NumPy form is used when D reaches this size *and*
#: N·D² reaches ``VECTORISE_MIN_WORK``.  Measured on the 2 cores (shared, loaded; iRNN K=5,
#: J only, best of 3, loops vs NumPy form): D=2, N=2·10⁴: 22 vs 30 ms; D=64, N=100: 34 vs
#: 56 ms; D=128, N=50: 164 vs 404 ms; D=256, N=10: 195 vs 406 ms.  The loops won at every D
#: tried, so the switch sits past that range; re-measure on a quiet machine before lowering it.
JACOBIAN_VECTORISE_MIN_HIDDEN = 512
#: The iRNN's Jacobian has its own switch: its NumPy form (``irnn_xp``) does each inner step as
#: ONE BLAS product U·Π over a chunk of points, Π stored (D, n, D), and beats the scalar loops
#: from D = 32 (measured on 2 quiet cores, K = 5, J and Jx, N·D² ≈ 2·10⁵: D=32 0.24 vs 0.53 s,
#: D=64 0.32 vs 0.44 s, D=128 0.44 vs 1.34 s, D=256 0.40 vs 1.12 s).
JACOBIAN_IRNN_BLAS_MIN_HIDDEN = 32
#: Points per chunk of ``irnn_xp`` (Π of a chunk, D·n·D floats, stays in cache for D ≤ 256).
JACOBIAN_IRNN_CHUNK = 32

#: Gradient flow (dynlab.analysis.gradients) under the numba backend: up to this D the whole
#: backward pass (products P_t = P_{t+1} J_{t+1}, norms) runs in one jitted loop; past it the
#: products are batched BLAS matmuls and only the norms are jitted.
GRADIENT_NUMBA_MAX_HIDDEN = 32

#: The curve without step norms (``gradient_norms(..., step_norms=False)``) of an iRNN with
#: D > GRADIENT_NUMBA_MAX_HIDDEN under the numba backend runs in reverse mode: the rows of
#: P_t are pulled back through the K inner steps (K products P·U per step, J_t never formed),
#: this many time steps per chunk, in parallel over row blocks (dynlab.kernels.grad_numba).
GRADIENT_REVERSE_CHUNK = 64

#: ``dl.lyapunov`` of an iRNN with D > GRADIENT_NUMBA_MAX_HIDDEN under the numba backend carries
#: up to this many tangent vectors through the K inner steps instead of forming every J_t
#: (dynlab.analysis.lyapunov); past it (k near D) forming J_t and LAPACK's QR cost the same or less.
LYAPUNOV_TANGENT_MAX_K = 16

#: Relative accuracy to which the numba backend certifies ‖P‖₂ by warm-started power iteration
#: (Kato–Temple bound, see dynlab.kernels.grad_numba); an uncertified norm falls back to
#: LAPACK's SVD, so every reported 2-norm is within this of the exact one (plus rounding).
NORM_RTOL = 1e-12
#: Power iterations tried per matrix before falling back to the SVD.
NORM_MAXIT = 12
#: BLAS threads for the backward pass of ``gradient_norms`` (a loop of D×D products and one
#: LAPACK call per uncertified norm; None: BLAS's own choice).  Threaded BLAS synchronises at
#: every call: measured on 2 cores, iRNN D=128, T=1000, the whole curve 1.12 s with 1 thread
#: against 12.8 s with 2 (the per-matrix ``syevr`` of the Gram fallback suffers most).
GRADIENT_BLAS_THREADS = 1

#: Where ``top_sv`` cannot certify (clustered top singular values), the numba backend forms the
#: Gram matrix G = P Pᵀ and runs up to this many Lanczos steps on it, certifying the top Ritz
#: value θ by a Cholesky factorisation of θ(1 + 2·NORM_RTOL)·I − G, before falling back to
#: LAPACK's ``dsyevr`` (``dynlab.kernels.lapack_numba.gram_top``; 0: ``dsyevr`` always).
GRAM_LANCZOS_MAXIT = 40

#: Memory budget of one time chunk of Jacobians in the gradient and Lyapunov analyses
#: (float64 entries: chunk · B · D² ≤ this), so T = 10⁵ never holds all J_t at once.
JACOBIAN_CHUNK_ENTRIES = 1 << 21

#: Implicit networks (dynlab.analysis.implicit): ``method="auto"`` runs the jitted per-point
#: Picard→Newton loop up to this many stacked units, and the batched NumPy form (one BLAS
#: product per Picard step over all N inputs, batched LAPACK for Newton) past it.  For a few
#: units the batched form is all call overhead (tens of µs per step); at D = 64 the batched
#: GEMM wins (BENCHMARKS.md, workload ``equilibria``).
IMPLICIT_NUMBA_MAX_UNITS = 16

#: BLAS threads for the implicit-network solvers' iterated small products (None: BLAS's own
#: choice).  Threaded BLAS synchronises at every call; on a loaded machine each synchronisation
#: can wait for a time slice (2 shared cores: 170 ms vs 8 ms for the ``equilibria`` workload).
#: Applied through threadpoolctl when it is installed.
IMPLICIT_BLAS_THREADS = 1

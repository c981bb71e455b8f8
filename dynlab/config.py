"""Tunables in one place (thresholds, flags) so kernels stay free of magic numbers."""

#: Backend used when a public function is called with ``backend=None``.
DEFAULT_BACKEND = "numba"

#: The numba backend runs jitted scalar loops when the per-step work is small, and the
#: vectorised BLAS kernel (one matrix product + one ufunc pass per inner step over the whole
#: batch) when B·D² reaches this size: past it a scalar ``tanh`` inside a loop (≈15 ns) and a
#: non-BLAS matrix-vector loop cost more than the Python overhead of the vectorised kernel
#: (≈10 µs per inner step).  Measured on 2 cores, see BENCHMARKS.md.
VECTORISE_MIN_WORK = 1 << 16

#: GRU/LSTM under the vectorised kernel: the input drive W_ih x_t + b_ih of a chunk of time
#: steps is one GEMM, the chunk holding at most this many entries (n steps · B · G·D), so the
#: drive of a long sequence is never held whole and each step's block is still in cache.
GATED_DRIVE_CHUNK_ENTRIES = 1 << 19

#: GRU/LSTM under the vectorised kernel on the CPU: the batch is split into this many blocks
#: of sequences, each run by its own thread with BLAS on one thread (None: one block per CPU
#: this process may use), so that no product is split between threads and the threads never
#: wait for each other (sequences are independent; ``dynlab.simulation._split_batch``).
GATED_SIMULATION_THREADS = None
#: … but never fewer than this many sequences per block (smaller products lose BLAS efficiency).
GATED_MIN_ROWS_PER_THREAD = 32

#: The same for the other cells under the vectorised kernel on the CPU (iRNN, the one-line
#: cells, the CTRNN): blocks of sequences, one thread each with BLAS on one thread (None: as
#: many as BLAS would use threads).  The element-wise passes (φ and the update, one fused numba
#: pass per inner step) are then split between the cores too, which BLAS's own threads never
#: do.  Measured (issue 20, 2-core AMD EPYC, B=256, D=128, K=5, T=1000): see BENCHMARKS.md.
VECTORISED_SIMULATION_THREADS = None
#: … but never fewer than this many sequences per block.
VECTORISED_MIN_ROWS_PER_THREAD = 32

#: The command line asks for ``--force`` before a computation whose (optimistic) work estimate
#: exceeds this many seconds (``dynlab._resources.check_work``); the library itself refuses only
#: past ``DYNLAB_MAX_HOURS`` (1 hour by default).
CLI_CONFIRM_SECONDS = 60.0

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
#: GRU/LSTM Jacobians under the numba backend: the jitted per-point kernels (the gates from
#: two BLAS products over all points, then one pass that writes each row of J as a combination
#: of three or four weight rows) up to this hidden size, the batched NumPy form past it.  The
#: jitted kernels won at every size measured (J and Jx, 2 loaded cores, load ≈ 4, medians of 5:
#: GRU D=16/64/128/256, N=2000/500/200/50: 8.2/14/4.4/12 ms vs 10.7/26/25/39 ms; LSTM 13/27/36/25
#: vs 10/56/64/42 ms), so the switch is off (2³⁰) until a machine shows otherwise.
JACOBIAN_GATED_VECTORISE_MIN_HIDDEN = 1 << 30
#: Points per chunk of ``irnn_xp`` (Π of a chunk, D·n·D floats, stays in cache for D ≤ 256).
JACOBIAN_IRNN_CHUNK = 32
#: … which, on the CPU without the input Jacobian, is one numba call per block of points
#: (``dynlab.kernels.jac_numba.irnn_jacobians``), the blocks on this many threads (None: one per
#: CPU this process may use), BLAS on one thread in each …
JACOBIAN_THREADS = None
#: … with at least this many points per thread.
JACOBIAN_MIN_POINTS_PER_THREAD = 16

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

# ============================================================================ BLAS threads
#: The numba backend runs every public call with BLAS on this many threads (None: BLAS's own
#: choice): its loops of small and medium products stall on BLAS's thread synchronisation,
#: most of all when a core is busy elsewhere, and independent work is split over dynlab's own
#: threads instead (BENCHMARKS.md, ``blas-threads``).
NUMBA_BLAS_THREADS = 1

#: ``loss_and_grads`` (so ``train_model``): the batch is split into this many blocks of
#: sequences, one thread each with BLAS on one thread (None: one block per CPU this process
#: may use): each block's forward and backward passes run on their own, with no
#: synchronisation until the gradients are summed, so a busy core slows its block instead of
#: stalling every product, as BLAS's own threads would.  Set 1 where several trainings share
#: the machine.  Measured (issue 20; 2-core AMD EPYC; split / one block, T=200, B=128, medians
#: of 5–7): iRNN K=5 D=128 0.56, D=32 0.51, D=8 0.63; GRU D=128 0.56, LSTM D=128 0.58, RNN
#: D=128 0.73; but RNN D=64 1.07, D=32 1.48 (the Python loop).  GRU/LSTM with their jitted loops
#: (later in issue 20): D=32, B=32 0.64 / 0.62; D=16, B=32 0.83 / 0.74.
TRAIN_THREADS = None
#: … but no block with less work per step than this (its rows × hidden × state size) for the
#: cells whose time loop runs in Python (one-line cells, and stacks with one of them): below it
#: the Python work of a step, which holds the GIL, outweighs what another core gains …
TRAIN_MIN_WORK_PER_THREAD = 1 << 19
#: … and than this for the iRNN, the GRU and the LSTM (and stacks of them), whose whole forward
#: and backward loops are numba calls that release the GIL (``dynlab.train._fused``; GRU/LSTM,
#: T = 200: two blocks break even at 8192, e.g. D = 32, B = 8, and are 1.5–2× faster from
#: 32 768 up).
TRAIN_MIN_WORK_PER_THREAD_JITTED = 1 << 12

#: ``loss_and_grads``/``forward`` without a workspace (``dynlab.train.backprop``): tape arrays
#: whose last user has let go of them — no tape, view or result refers to them any more — are
#: kept, at most this many bytes in all, and handed out again for the next tape of the same
#: shapes, instead of fresh memory from the OS, zeroed and page-faulted in at every call (issue
#: 20, iRNN step D=128, K=5, T=200, B=128: medians 200–330 ms and single calls up to 515 ms
#: that way; 189–206 ms, up to 278, with the arrays kept).  0: never keep any.
#: ``backprop.release_tape_memory()`` lets them go.
TAPE_POOL_BYTES = 1 << 29

#: The per-step products of the jitted loops (``dl.simulate``'s vectorised and gated kernels,
#: the taped forward and backward passes of ``dynlab.train``), (M × K)·(K × N) with M the rows
#: of a block: OpenBLAS's AVX-512 (SkylakeX) DGEMM takes a product of at most 10⁶ multiply-adds
#: (M·K·N) by its small-matrix path, unpacked, at the core's FMA peak (57 GFLOP/s on the 2-core
#: AMD EPYC against 45–49 by its packed path for 64 rows of D = 128: issue 20, BENCHMARKS.md,
#: ninth session), but its Haswell kernels (every AVX2 CPU) have no such path, where splitting
#: the rows only costs (35 against 47 GFLOP/s at four calls).  None: split each product into
#: calls of at most ``SMALL_GEMM_MNK`` multiply-adds where every BLAS loaded is OpenBLAS with
#: one of ``SMALL_GEMM_ARCHITECTURES`` (threadpoolctl's report), never below
#: ``SMALL_GEMM_MIN_ROWS`` rows a call; True / False: always / never.
BLAS_SMALL_GEMM = None
SMALL_GEMM_MNK = 10 ** 6
SMALL_GEMM_MIN_ROWS = 8
SMALL_GEMM_ARCHITECTURES = ("skylakex", "cooperlake", "sapphirerapids")


#: ``templates`` and the other reverse passes of the partition analysis: blocks of sequences
#: run on this many threads at once (None: one per CPU this process may use), each a numba
#: call per layer with BLAS on one thread (``dynlab.analysis.partition._reverse_chunked``) …
PARTITION_THREADS = None
#: … when each block has at least this many flops (2·D² per read-out row and step).
PARTITION_MIN_WORK_PER_THREAD = 1 << 23



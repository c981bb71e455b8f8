"""Tunables in one place (thresholds, flags) so kernels stay free of magic numbers.

Nearly all are the numba backend's (``dynlab.backends.numba``): where its paths switch, how it
splits work between threads, which CPU-specific paths it takes.  Each threshold states the
decision; the measurements behind it are BENCHMARKS.md's (``python -m benchmarks.run`` and
``python -m benchmarks.ab``, which switches the CPU-specific paths off one at a time).
"""

#: Backend used when a public function is called with ``backend=None``.
DEFAULT_BACKEND = "numba"

#: The command line asks for ``--force`` before a computation whose (optimistic) work estimate
#: exceeds this many seconds (``dynlab._resources.check_work``); the library itself refuses only
#: past ``DYNLAB_MAX_HOURS`` (1 hour by default).
CLI_CONFIRM_SECONDS = 60.0

#: ``cache=True`` for every @njit kernel, so the compiled code survives the process.
NUMBA_CACHE = True

# ============================================================================ numba: simulate
#: ``simulate`` runs jitted scalar loops while the per-step work is small, and the batched path
#: (one BLAS product and one fused element-wise pass per inner step over the whole batch) once
#: B·D² reaches this: past it a scalar loop's matrix-vector products and libm tanh cost more than
#: the batched path's per-step overhead.
VECTORISE_MIN_WORK = 1 << 16

#: GRU/LSTM on the batched path: the input drive W_ih x_t + b_ih of a chunk of time steps is one
#: GEMM, the chunk holding at most this many entries (n steps · B · G·D), so the drive of a long
#: sequence is never held whole and each step's block is still in cache.
GATED_DRIVE_CHUNK_ENTRIES = 1 << 19

#: The batched path splits the batch into this many blocks of sequences, one thread each with
#: BLAS on one thread (None: one per CPU this process may use), so that no product is split
#: between threads and the threads never wait for each other (sequences are independent), and
#: the element-wise passes, which BLAS's threads never share, are split too: GRU/LSTM …
GATED_SIMULATION_THREADS = None
#: … (never fewer than this many sequences per block: smaller products lose BLAS efficiency) …
GATED_MIN_ROWS_PER_THREAD = 32
#: … and the other cells (iRNN, one-line cells, CTRNN) …
VECTORISED_SIMULATION_THREADS = None
#: … never fewer than this many sequences per block.
VECTORISED_MIN_ROWS_PER_THREAD = 32

# ============================================================================ numba: Jacobians
#: Step Jacobians: the jitted per-point loops do the D×D·D×D products of the iRNN's inner steps
#: and the CTRNN's stages as plain loops; the batched form (the reference's closed forms over all
#: N points, einsum/matmul) is used when D reaches this *and* N·D² reaches ``VECTORISE_MIN_WORK``.
#: The loops won at every D measured, so the switch sits past that range.
JACOBIAN_VECTORISE_MIN_HIDDEN = 512
#: The iRNN's Jacobian has its own switch: its product form does each inner step as ONE BLAS
#: product U·Π over a chunk of points and beats the scalar loops from this D.
JACOBIAN_IRNN_BLAS_MIN_HIDDEN = 32
#: GRU/LSTM Jacobians: the jitted per-point kernels (the gates from two BLAS products over all
#: points, then one pass writing each row of J as a combination of weight rows) up to this hidden
#: size, the batched form past it; the jitted kernels won at every size measured (off: 2³⁰).
JACOBIAN_GATED_VECTORISE_MIN_HIDDEN = 1 << 30
#: Points per chunk of the iRNN's product form (Π of a chunk, D·n·D floats, stays in cache).
JACOBIAN_IRNN_CHUNK = 32
#: The product form without the input Jacobian is one jitted call per block of points, the
#: blocks on this many threads (None: one per CPU), BLAS on one thread in each …
JACOBIAN_THREADS = None
#: … with at least this many points per thread.
JACOBIAN_MIN_POINTS_PER_THREAD = 16
#: Memory budget of one time chunk of Jacobians in the gradient and Lyapunov analyses (float64
#: entries: chunk · B · D² ≤ this), so T = 10⁵ never holds all J_t at once.
JACOBIAN_CHUNK_ENTRIES = 1 << 21

# ============================================================================ numba: gradient flow
#: Up to this D the whole backward pass (products P_t = P_{t+1} J_{t+1}, norms) runs in one
#: jitted loop; past it the products are one jitted BLAS chain and only the norms are jitted.
GRADIENT_NUMBA_MAX_HIDDEN = 32
#: The curve without step norms of an iRNN with D > GRADIENT_NUMBA_MAX_HIDDEN runs in reverse
#: mode (the rows of P_t pulled back through the K inner steps, J_t never formed), this many time
#: steps per chunk, in parallel over row blocks.
GRADIENT_REVERSE_CHUNK = 64
#: ``lyapunov`` of an iRNN with D > GRADIENT_NUMBA_MAX_HIDDEN carries up to this many tangent
#: vectors through the K inner steps instead of forming every J_t; past it (k near D) forming
#: J_t and LAPACK's QR cost the same or less.
LYAPUNOV_TANGENT_MAX_K = 16
#: Relative accuracy to which σ₁ is certified by warm-started power iteration (the Kato–Temple
#: bound); an uncertified norm falls back to the Gram matrix, so every reported 2-norm is within
#: this of the exact one (plus rounding).
NORM_RTOL = 1e-12
#: Power iterations tried per matrix before the fallback.
NORM_MAXIT = 12
#: The fallback: up to this many Lanczos steps on G = P Pᵀ, the top Ritz value θ certified by a
#: Cholesky factorisation of θ(1 + 2·NORM_RTOL)·I − G, before LAPACK's ``dsyevr`` (0: always it).
GRAM_LANCZOS_MAXIT = 40
#: A batched sweep region on this backend holds about this much forward-tangent work (flops,
#: ≈ 2·D³·(T·K + 4) a setting: a fraction of a second of one core), between these many settings:
#: a region's fixed cost (its table, batch, launch, summaries; ≈ 1 ms) stays small beside its
#: kernels, while a region is still a unit small enough to be durable (written as it finishes).
SWEEP_REGION_FLOPS = 2e9
SWEEP_REGION_RANGE = (64, 4096)

# ============================================================================ numba: implicit networks
#: ``method="auto"`` runs the jitted per-point Picard→Newton loop up to this many stacked units,
#: and the reference's batched form (one BLAS product per Picard step over all N inputs, batched
#: LAPACK for Newton) past it: for a few units the batched form is all call overhead.
IMPLICIT_NUMBA_MAX_UNITS = 16

# ============================================================================ numba: threads
#: Every public call runs with BLAS on this many threads (None: BLAS's own choice): the loops of
#: small and medium products stall on BLAS's thread synchronisation, most of all when a core is
#: busy elsewhere; independent work is split over dynlab's own threads instead.
NUMBA_BLAS_THREADS = 1

#: ``loss_and_grads`` (so ``train_model``) splits the batch into this many blocks of sequences,
#: one thread each with BLAS on one thread (None: one per CPU): each block's forward and
#: backward passes run on their own until the gradients are summed, so a busy core slows its
#: block instead of stalling every product.  Set 1 where several trainings share the machine …
TRAIN_THREADS = None
#: … but no block with less work per step than this (rows × hidden × state size) for the cells
#: whose time loop runs in Python (one-line cells, and stacks with one): below it the Python work
#: of a step, which holds the GIL, outweighs what another core gains …
TRAIN_MIN_WORK_PER_THREAD = 1 << 19
#: … and than this for the iRNN, the GRU and the LSTM (and stacks of them), whose whole forward
#: and backward loops are jitted calls that release the GIL.
TRAIN_MIN_WORK_PER_THREAD_JITTED = 1 << 12

#: ``templates`` and the other MASO reverse passes: blocks of sequences on this many threads at
#: once (None: one per CPU), each a jitted call per layer with BLAS on one thread …
PARTITION_THREADS = None
#: … when each block has at least this many flops (2·D² per read-out row and step).
PARTITION_MIN_WORK_PER_THREAD = 1 << 23

# ============================================================================ numba: memory, BLAS
#: ``loss_and_grads``/``forward`` without a workspace: tape arrays whose last user has let go of
#: them — no tape, view or result refers to them any more — are kept, at most this many bytes in
#: all, and handed out again for the next tape of the same shapes, instead of fresh memory from
#: the OS, zeroed and page-faulted in at every call.  0: never keep any;
#: ``dynlab.train.backprop.release_tape_memory()`` lets them go.
TAPE_POOL_BYTES = 1 << 29

#: The per-step products of the jitted loops, (M × K)·(K × N) with M the rows of a block:
#: OpenBLAS's AVX-512 kernels (SkylakeX and later) take a product of at most ``SMALL_GEMM_MNK``
#: multiply-adds by a small-matrix path, unpacked, faster than their packed path for the blocks
#: dynlab multiplies; the Haswell kernels (AVX2) have no such path, where cutting the rows only
#: costs.  None: cut each product into calls of at most ``SMALL_GEMM_MNK`` multiply-adds where
#: every BLAS loaded is OpenBLAS with one of ``SMALL_GEMM_ARCHITECTURES`` (threadpoolctl's
#: report), never below ``SMALL_GEMM_MIN_ROWS`` rows a call; True / False: always / never.
BLAS_SMALL_GEMM = None
SMALL_GEMM_MNK = 10 ** 6
SMALL_GEMM_MIN_ROWS = 8
SMALL_GEMM_ARCHITECTURES = ("skylakex", "cooperlake", "sapphirerapids")

#: Threads of PyTorch's CPU kernels during the torch engine's calls (``train_model(...,
#: engine="torch", device="cpu")``), restored after each call; None: torch's own setting.  One, because
#: the engine's per-step operations are small: on two shared cores a 100-iteration ReLU RIN run (D = 16,
#: T = 30, batch 64) took 0.55 s on one torch thread and 26.6 s on two (OpenMP's threads waiting on a
#: core another process held); the ``train-torch`` rows time both at the iRNN's D = 128.
TORCH_CPU_THREADS = 1

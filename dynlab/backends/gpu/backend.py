"""``GPUBackend``: the host side of the GPU backend — which kernel runs, on which arrays, with
which launch shape (the kernels are in ``kernels``; the runtime in ``device``; the gradient flow's
host side in ``flow``; the launch limits in ``limits``).

Launch shapes come from one ``_plan_*`` method per kernel family, which the operations and the
tests both call: a block has a power of two of threads, at most ``MAX_THREADS`` (256 on a device,
``SIM_MAX_THREADS`` under the simulator, where every CUDA thread is a Python thread), enough for
one item each where there are fewer items; a simulation block takes as many sequences as fill its
threads with (sequence, unit) pairs.  Shared memory: the kernels' vectors always; the weights and
the D×D iterates while the block's total stays within ``SHARED_BYTES`` (48 KiB, the most a block
may have without an opt-in), else they are read from global memory (weights) or a per-block global
scratch (iterates, products, frames, Gram matrices).  Every launch then goes through ``_launch``,
which checks its shape against the device's limits (``limits.check_launch``; an H100's under the
simulator) and raises ``LaunchError`` before a launch a GPU would refuse.

The vectors alone outgrow 48 KiB only past D = 877 (``jac_ctrnn``: 7 vectors of D float64), 1024
(``jac_gated``), 1228 (``jac_irnn``) or about 1500 (the others): there the launch check refuses in
one line (use the numba backend).
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from ...errors import ParameterError
from ..base import Backend, as_tangent_batch, previous_states, step_eta
from .device import free_bytes, runtime, to_device, to_host
from .limits import Launch, check_launch, device_limits


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


#: Vectors of a simulation block per sequence (``_plan_simulate``): h, h' (cells), h, g, s (iRNN),
#: g and three stage vectors (CTRNN), h, h', c (GRU/LSTM).
_SIM_VECTORS = {"cell": 2, "irnn": 3, "ctrnn": 4, "gru": 3, "lstm": 3}
_SIM_KERNEL = {"cell": "sim_cell", "irnn": "sim_irnn", "ctrnn": "sim_ctrnn", "gru": "sim_gated", "lstm": "sim_gated"}
#: The Jacobian kernels by kind (``_plan_jacobians``): (kernel, state size in units of D, vectors
#: of D in shared memory, tangent iterates D × w — in shared memory when they fit, else scratch).
_JAC_SHAPE = {"cell": ("jac_cell", 1, 2, 0), "gru": ("jac_gated", 1, 6, 0), "lstm": ("jac_gated", 2, 6, 0),
              "irnn": ("jac_irnn", 1, 5, 2), "ctrnn": ("jac_ctrnn", 1, 7, 4)}


class GPUBackend(Backend):
    """The GPU backend (``dynlab.backends.gpu``'s docstring: arrays, kernels, launch limits, fallbacks).

    Its thresholds are class attributes, which an instance may override (the tests do, to run every
    path at small sizes); an instance may also set ``limits`` (the ``limits.DeviceLimits`` its
    launches are checked against) and ``simulated`` (True/False: plan launch shapes as under the
    simulator or as on a device — how the tests ask for a real GPU's shapes without one)."""

    name = "cupy"
    description = "a GPU: CuPy arrays and fused CUDA kernels (Numba), the time loop on the device"
    #: threads per block on a device, and under the simulator
    MAX_THREADS = 256
    SIM_MAX_THREADS = 16
    #: shared memory a block may use (bytes): the static limit of every CUDA GPU (the launch check
    #: uses the device's own; this is the budget the kernels' optional parts are fitted into)
    SHARED_BYTES = 48 * 1024
    #: blocks of a grid-stride launch (Jacobians, σ₁, implicit points, gates) on a device / the simulator
    MAX_BLOCKS = 8192
    SIM_MAX_BLOCKS = 2
    #: GRU/LSTM forward: from this many sequences on, one GEMM per step over the batch (cuBLAS) and
    #: the ``gate_step`` kernel; below, the fused ``sim_gated`` (one launch, W_hh streamed per block)
    GATED_GEMM_MIN_BATCH = 8
    #: the fused ``products`` kernel from this many sequences on (None: the device's SM count),
    #: the blocked scan of batched GEMMs below (``flow``)
    PRODUCTS_KERNEL_MIN_BATCH = None
    #: the fused ``qr_steps`` from this many sequences on (None: the SM count), step by step below
    QR_FUSED_MIN_BATCH = None
    #: iterations of the power iteration before Jacobi takes over (``flow.top_singular``)
    POWER_MAXIT = 100
    #: float64 entries of the Jacobians of one chunk of the gradient flow and the QR steps (the
    #: numba backend's ``config.JACOBIAN_CHUNK_ENTRIES`` is 2²¹; a GPU's memory takes 2²⁴ = 128 MiB,
    #: so that T = 1000 at D = 128 is one chunk)
    FLOW_CHUNK_ENTRIES = 1 << 24
    #: the fraction of free device memory a sweep region may fill (``sweep_region_size``)
    SWEEP_MEMORY_FRACTION = 0.5
    #: the most settings in one sweep region
    SWEEP_MAX_REGION = 1 << 20

    @property
    def norm_method(self):
        from .flow import POWER_RTOL

        return (f"σ₁ by power iteration on the device, certified by the Kato–Temple bound to relative "
                f"{POWER_RTOL:g}; by the cyclic Jacobi method on the Gram matrix (exact to rounding) where it "
                f"cannot certify", POWER_RTOL)

    # ------------------------------------------------------------------ policy
    def check_available(self) -> None:
        problem = runtime().problem
        if problem is not None:
            raise ParameterError("backend", f"cupy (the GPU backend) cannot run here: {problem}")

    @property
    def device(self) -> str:
        """What the kernels run on, in words."""
        return runtime().device

    @property
    def limits(self):
        """The launch limits every launch is checked against (``limits.device_limits``)."""
        return self.__dict__.get("_limits") or device_limits()

    @limits.setter
    def limits(self, value):
        self.__dict__["_limits"] = value

    def refuses(self, form):
        """A form that steps by scipy's adaptive solvers (a CTRNN's ``fixed_step`` False): they run
        on the host only, so no operation takes it here."""
        return None if getattr(form, "fixed_step", True) else f"scipy's {form.method} runs on the host only"

    def _simulated(self) -> bool:
        return self.__dict__.get("simulated", runtime().simulator)

    def _threads(self, work: int) -> int:
        cap = self.SIM_MAX_THREADS if self._simulated() else self.MAX_THREADS
        return int(min(cap, _pow2(max(1, work))))

    def _blocks(self, n: int) -> int:
        cap = self.SIM_MAX_BLOCKS if self._simulated() else self.MAX_BLOCKS
        return int(max(1, min(cap, n)))

    def _fits(self, nbytes: int) -> bool:
        return nbytes <= min(self.SHARED_BYTES, self.limits.max_shared_per_block)

    def _launch(self, kernel, blocks, threads, shared_bytes, *args):
        """Launch ``kernel`` after checking its shape against the device's limits (``LaunchError``)."""
        name = getattr(kernel, "py_func", kernel).__name__
        check_launch(Launch(name, int(blocks), int(threads), int(shared_bytes)), self.limits)
        kernel[int(blocks), int(threads), 0, int(shared_bytes)](*args)

    def flow_chunk_steps(self, B: int, n: int, T: int) -> int:
        return int(max(1, min(T, self.FLOW_CHUNK_ENTRIES // max(1, B * n * n))))

    def _products_fused(self, B: int) -> bool:
        least = self.PRODUCTS_KERNEL_MIN_BATCH
        return B >= (self.limits.multiprocessors if least is None else least)

    def _qr_fused(self, B: int) -> bool:
        least = self.QR_FUSED_MIN_BATCH
        return B >= (self.limits.multiprocessors if least is None else least)

    # ---------------------------------------------------------- launch plans
    def _plan_simulate(self, kind: str, B: int, D: int, G: int, itemsize: int):
        """(Launch, per, wsh) of a simulation: ``per`` sequences per block, the weights (G·D²) in
        shared memory when ``wsh``."""
        cap = self.SIM_MAX_THREADS if self._simulated() else self.MAX_THREADS
        per = max(1, min(B, cap // D))
        threads = self._threads(per * D)
        vec = itemsize * (_SIM_VECTORS[kind] * per * D + 2 * per)
        w = itemsize * G * D * D
        wsh = self._fits(vec + w)
        return Launch(_SIM_KERNEL[kind], -(-B // per), threads, vec + (w if wsh else 0)), per, wsh

    def _plan_gate_step(self, B: int, D: int):
        threads = self._threads(B * D)
        return Launch("gate_step", self._blocks(-(-B * D // threads)), threads, 0)

    def _plan_jacobians(self, kind: str, N: int, D: int, d: int, want_x: bool):
        """(Launch, msh, nmat): the iRNN's and CTRNN's nmat tangent iterates (D × w) in shared memory
        when ``msh``, else in a per-block global scratch."""
        name, width, nvec, nmat = _JAC_SHAPE[kind]
        blocks = self._blocks(N)
        threads = self._threads((width * D) ** 2)
        if not nmat:
            return Launch(name, blocks, threads, 8 * nvec * D), True, 0
        w = D + d if want_x else D
        msh = self._fits(8 * (nvec * D + nmat * D * w))
        return Launch(name, blocks, threads, 8 * (nvec * D + (nmat * D * w if msh else 0))), msh, nmat

    def _plan_products(self, B: int, n: int):
        """(Launch, psh): P, P' (n² each) in shared memory when ``psh``, else global scratch."""
        threads = self._threads(n * n)
        vec = 8 * (threads + n)
        psh = self._fits(vec + 8 * 2 * n * n)
        return Launch("products", B, threads, vec + (8 * 2 * n * n if psh else 0)), psh

    def _plan_power(self, N: int, n: int, itemsize: int):
        """(Launch, msh): the matrix (n²) in shared memory when ``msh``."""
        threads = self._threads(n)
        vec = itemsize * (2 * threads + 3 * n)
        msh = self._fits(vec + itemsize * n * n)
        return Launch("top_sv_power", self._blocks(N), threads, vec + (itemsize * n * n if msh else 0)), msh

    def _plan_jacobi(self, N: int, n: int, itemsize: int):
        """(Launch, gsh): the Gram matrix (n²) in shared memory when ``gsh``."""
        threads = self._threads(n * n)
        half = (n + n % 2) // 2
        vec = itemsize * (2 * half + threads)
        gsh = self._fits(vec + itemsize * n * n)
        return Launch("top_sv", self._blocks(N), threads, vec + (itemsize * n * n if gsh else 0)), gsh

    def _plan_qr(self, B: int, n: int, k: int):
        """(Launch, qsh): the step's A and the frame Q (n·k each) in shared memory when ``qsh``."""
        threads = self._threads(max(n * k, n))
        vec = 8 * (threads + k)
        qsh = self._fits(vec + 8 * 2 * n * k)
        return Launch("qr_steps", B, threads, vec + (8 * 2 * n * k if qsh else 0)), qsh

    def _plan_reverse(self, rows: int, D: int, din: int):
        threads = self._threads(max(D, din))
        return Launch("reverse", rows, threads, 8 * (3 * D + threads))

    def _plan_implicit(self, kernel: str, N: int, U: int):
        threads = self._threads(U)
        shared = 8 * (2 * U + threads) if kernel == "picard" else 8 * 4 * U
        return Launch(kernel, self._blocks(N), threads, shared)

    # --------------------------------------------------------- device results
    _local = threading.local()

    @contextlib.contextmanager
    def results_on_device(self):
        """A context in which ``simulate``, ``jacobians`` and ``forward_tangent`` return their
        arrays where the kernels ran (CuPy arrays on a GPU) instead of copying them to the host
        (through pinned memory, ``device.to_host``)::

            be = dl.get_backend("cupy")
            with be.results_on_device():
                H, bad, _ = be.simulate(m.form(), x, h0)     # cupy.ndarray on a GPU
        """
        old = getattr(self._local, "keep", False)
        self._local.keep = True
        try:
            yield self
        finally:
            self._local.keep = old

    def _result(self, a):
        return a if getattr(self._local, "keep", False) else to_host(a)

    # --------------------------------------------------------------- simulate
    def simulate(self, form, x, h0, *, stop: bool = True, dtype=np.float64):
        H, bad, _, path = self._simulate_dev(form, to_device(x), to_device(h0), stop, np.dtype(dtype), False)
        return self._result(H), self._result(bad), path

    def _simulate_dev(self, form, x, h0, stop, dt, want_z):
        """States of a form on the device: (H (B, T, n), bad (B,), Z or None, path) (``KERNELS``)."""
        return self.kernel("simulate", form)(self, form, x, h0, stop, dt, want_z)

    def _gated_steps(self, form, lstm, GI, h0c, stop, dt, H, bad):
        """GRU/LSTM forward for a large batch: per step one GEMM Q = h_{t−1} W_hhᵀ over the batch
        (cuBLAS through CuPy's ``matmul``; NumPy's under the simulator) and one ``gate_step`` launch."""
        xp = runtime().xp
        from .kernels import kernels

        B, T, _ = H.shape
        D = form.hidden
        WT = to_device(np.ascontiguousarray(form.W_hh.T), dt)               # (D, G·D)
        bhh = to_device(form.b_hh, dt)
        hc = h0c[:, :D].copy()          # the state buffers are written: never the caller's h0
        cc = h0c[:, D:].copy() if lstm else xp.zeros((B, D), dtype=dt)
        hn, cn = xp.empty_like(hc), xp.empty_like(cc)
        Q = xp.empty((B, WT.shape[1]), dtype=dt)
        bad[...] = T
        launch = self._plan_gate_step(B, D)
        kernel = kernels(dt).gate_step
        for t in range(T):
            xp.matmul(hc, WT, out=Q)
            self._launch(kernel, launch.blocks, launch.threads, launch.shared, GI, Q, bhh, t, lstm, form.act_id,
                         dt.type(form.leak), bool(stop), hc, cc, hn, cn, H, bad)
            hc, hn = hn, hc
            cc, cn = cn, cc

    # -------------------------------------------------------------- jacobians
    def jacobians(self, form, x, hprev, *, eta=None, inputs: bool = False):
        J, Jx, _ = self.kernel("jacobians", form)(self, form, x, hprev, eta, inputs)
        return self._result(J), (self._result(Jx) if inputs else None), "fused"

    def _layer_host(self, form, x, s, eta, want_x):
        """(J, Jx or None, s') of a form at N points as NumPy arrays."""
        J, Jx, snew = self.kernel("jacobians", form)(self, form, x, s, eta, want_x)
        return to_host(J), (to_host(Jx) if want_x else None), (None if snew is None else to_host(snew))

    def flow_jacobians(self, form, x, h0, H, lo, hi):
        """J_t for t = lo+1 … hi along a trajectory, left on the device for this backend's own
        accumulators (``flow.Backward``, ``flow.QR``): the base class's ``gradient_flow`` and
        ``lyapunov_logr`` then make, multiply and measure every J_t there; only the per-time logs
        come back.  (B, hi − lo, n, n)."""
        B, _, d = x.shape
        n = form.state_size
        m = hi - lo
        hprev = previous_states(h0, H, lo, hi).reshape(B * m, n)
        X = np.ascontiguousarray(x[:, lo:hi]).reshape(B * m, d)
        J = self.kernel("jacobians", form)(self, form, X, hprev, step_eta(form, B, lo, hi), False)[0]
        return to_device(J).reshape(B, m, n, n)

    # ------------------------------------------------------- norms, QR steps
    def top_singular(self, M):
        """σ₁ of every matrix of a device stack M (N, n, n): certified power iteration, Jacobi where
        it cannot certify (``flow.top_singular``); a device array."""
        from .flow import top_singular

        return top_singular(self, M)

    def backward_norms(self, batch: int, size: int, *, dL_dhT=None, step_norms: bool = True):
        from .flow import Backward

        return Backward(self, batch, size, dL_dhT, step_norms)

    def tangent_qr(self, batch: int, size: int, Q):
        from .flow import QR

        return QR(self, Q)

    # ------------------------------------------------------------- sweeps
    def forward_tangent(self, batch):
        logs, M, J, bad = self._tangent_dev(batch)
        return self._result(logs), self._result(M), self._result(J), self._result(bad)

    #: blocks of a sweep launch whose iterates spill to the global scratch (one D² triple each)
    SCRATCH_BLOCKS = 1024

    def tangent_launch(self, S: int, D: int, dtype=np.float64, gated: bool = False, *, simulator=None) -> dict:
        """The launch shape of the sweep kernel (``kernels_tangent``) for S settings of D units:
        ``threads`` (a power of two ≥ the ⌈D/2⌉² register tiles, at most ``MAX_THREADS``), ``blocks``
        (a grid-stride loop over the settings), ``shared`` bytes and ``msh`` — 2: the iterates
        (2 or 3 D × D) and Rᵀ in shared memory, 1: the iterates only, 0: neither (the iterates in
        ``scratch`` of ``scratch_shape`` in global memory) — the most that fits ``SHARED_BYTES``.
        ``simulator`` (default: where this process runs) picks the simulator's thread and block
        caps; the bytes are the device's either way."""
        sim = runtime().simulator if simulator is None else bool(simulator)
        it = np.dtype(dtype).itemsize
        tiles = ((D + 1) // 2) ** 2
        threads = int(min(self.SIM_MAX_THREADS if sim else self.MAX_THREADS, _pow2(max(tiles, D))))
        vec = it * (6 * D + max(32, threads))
        mats = it * (2 if gated else 3) * D * D
        weights = it * D * D
        msh = 2 if self._fits(vec + mats + weights) else (1 if self._fits(vec + mats) else 0)
        shared = vec + (mats if msh >= 1 else 0) + (weights if msh >= 2 else 0)
        cap = self.SIM_MAX_BLOCKS if sim else (self.MAX_BLOCKS if msh else self.SCRATCH_BLOCKS)
        blocks = int(max(1, min(cap, S)))
        return {"threads": threads, "blocks": blocks, "shared": int(shared), "msh": msh,
                "scratch_shape": (1, 3, 1) if msh else (blocks, 3, D * D)}

    def _tangent_dev(self, batch):
        """The forward tangents of a ``TangentBatch`` on the device: (logs, M̃_T, J_T, diverged),
        device arrays.  The groups' arrays are uploaded once each (R, W, b, X: G of them), the
        settings' scalars once per setting; the drives are computed in the kernel."""
        xp = runtime().xp
        from .kernels import kernels

        dt = np.dtype(batch.dtype)
        S, D = batch.size, batch.hidden
        G = batch.R.shape[0]
        shape = self.tangent_launch(S, D, dt, bool(batch.gated))
        logs = xp.empty(S, dtype=dt)
        M = xp.empty((S, D, D), dtype=dt)
        J = xp.empty((S, D, D), dtype=dt)
        bad = xp.empty(S, dtype=np.int64)
        scratch = xp.empty(shape["scratch_shape"], dtype=dt)
        RT = to_device(np.ascontiguousarray(np.swapaxes(batch.R, 1, 2)).reshape(G, D * D), dt)
        self._launch(kernels(dt).tangent, shape["blocks"], shape["threads"], shape["shared"], bool(batch.gated), RT,
                     to_device(batch.W, dt), to_device(batch.b, dt), to_device(batch.X, dt),
                     to_device(batch.group, np.int64), to_device(batch.eta, dt), to_device(batch.K, np.int64),
                     to_device(batch.alpha, dt), to_device(batch.sign, dt), to_device(batch.g0prev, np.bool_),
                     to_device(batch.act, np.int64), to_device(batch.leak, dt), scratch, int(shape["msh"]), logs, M, J,
                     bad)
        return logs, M, J, bad

    def sweep_gradients(self, forms, xs=None):
        """``forward_tangent`` and σ₁ of M̃_T and J_T on the device (``top_singular``): forms and
        their inputs, or a ``TangentBatch``."""
        xp = runtime().xp
        batch = as_tangent_batch(forms, xs)
        logs, M, J, bad = self._tangent_dev(batch.astype(np.float64) if batch.dtype != np.float64 else batch)
        with np.errstate(divide="ignore", invalid="ignore"):
            log1 = to_host(logs + xp.log(self.top_singular(M)))
            logT = to_host(xp.log(self.top_singular(J)))
        return log1, logT, to_host(bad)

    def sweep_region_size(self, hidden: int, steps: int, inner: int = 1):
        """Settings per sweep region from the device's free memory (``region_from_memory``); None
        under the simulator (the driver's default then: it runs on the CPU, slowly)."""
        if runtime().simulator:
            return None
        return self.region_from_memory(free_bytes(), hidden, steps, inner)

    @classmethod
    def region_from_memory(cls, free: float, hidden: int, steps: int, inner: int = 1) -> int:
        """Each setting of a batched sweep holds on the device its results M̃_T and J_T (2·D²),
        its η row (K) and a dozen scalars, and — at worst, when no two settings share them — a
        group's R, W, b and input (D², D·d + D, T·d: within 2·D² + T·D for d ≤ D), float64; about
        as much again on the host while the batch is built: ``SWEEP_MEMORY_FRACTION`` of ``free``
        bytes over 2·8·(T·D + 4·D² + K + 16), between 1 and ``SWEEP_MAX_REGION``.  (The
        tangents' iterates live in shared memory, or in a global scratch of at most
        ``SCRATCH_BLOCKS`` blocks, whatever the region.)"""
        per_point = 2 * 8 * (steps * hidden + 4 * hidden * hidden + inner + 16)
        return int(max(1, min(cls.SWEEP_MAX_REGION, free * cls.SWEEP_MEMORY_FRACTION // per_point)))

    # ---------------------------------------------------------- partition
    def partition_trace(self, forms, x, h0s):
        """Layer by layer on the device; the pre-activations Z are the kernel's own z_t (the
        values whose signs are the partition codes)."""
        for f in forms:
            self.require("partition_trace", f)       # the layers: one-line cells (``KERNELS``)
        out = []
        inp = to_device(x)
        for f, h0 in zip(forms, h0s):
            H, bad, Z, _ = self._simulate_dev(f, inp, to_device(h0), True, np.dtype(np.float64), True)
            Hh, bh = to_host(H), to_host(bad)
            out.append((Hh, bh, to_host(Z)))
            if int(bh.min()) < Hh.shape[1]:
                break
            inp = H
        return out

    def reverse_cotangents(self, form, S, lam, incoming):
        self.require("reverse_cotangents", form)
        xp = runtime().xp
        from .kernels import kernels

        B, T, D = S.shape
        C = lam.shape[0] // B
        din = form.inputs
        out = xp.empty((B, C, T, din))
        offset = xp.empty(B * C)
        lam_d = to_device(lam)
        has = incoming is not None
        inc = to_device(incoming) if has else xp.empty((1, 1, 1, 1))
        launch = self._plan_reverse(B * C, D, din)
        self._launch(kernels(np.float64).reverse, launch.blocks, launch.threads, launch.shared, to_device(form.R),
                     to_device(form.W), to_device(form.b), to_device(S), np.float64(form.a), np.float64(form.gain),
                     lam_d, inc, has, C, out, offset)
        lam[...] = to_host(lam_d)
        return to_host(out), to_host(offset)

    # ---------------------------------------------------------- implicit
    def implicit_solve(self, A, C, act: str, leak: float, *, method: str = "auto", tol: float, max_iter=None,
                       Z0=None, steps: int = 30, dt: float = 1.0):
        """``auto`` as the reference's (Picard while it contracts, then Newton) with the Picard
        iterations and the RK4 flow as device kernels (one block per point); Newton for the
        points Picard leaves runs on the host (``reference.implicit.solve_newton``: batched
        LAPACK solves with a per-point line search).  The other methods are the reference's."""
        from ...activations import ACTIVATION_IDS
        from ..reference.implicit import auto_newton, auto_solve, solve_method

        if method != "auto":
            return solve_method(A, C, act, leak, method=method, tol=tol, max_iter=max_iter, Z0=Z0, steps=steps, dt=dt)
        max_iter = max_iter or 200
        if act not in ACTIVATION_IDS:
            return auto_solve(A, C, act, leak, tol, max_iter, steps, dt, Z0)
        xp = runtime().xp
        from .kernels import kernels

        kn = kernels(np.float64)
        N, U = C.shape
        Ad = to_device(A)
        Zd = to_device(np.zeros((N, U)) if Z0 is None else Z0).copy()
        res, its, rate = xp.empty(N), xp.empty(N, dtype=np.int64), xp.empty(N)
        pic = self._plan_implicit("picard", N, U)
        self._launch(kn.picard, pic.blocks, pic.threads, pic.shared, Ad, to_device(C), ACTIVATION_IDS[act],
                     float(leak), float(tol), int(max_iter), 0.9, Zd, res, its, rate)

        def flow(C_rows, Z0_rows):
            Zf = to_device(np.zeros(C_rows.shape) if Z0_rows is None else Z0_rows).copy()
            fl = self._plan_implicit("flow_rk4", C_rows.shape[0], U)
            self._launch(kn.flow_rk4, fl.blocks, fl.threads, fl.shared, Ad, to_device(C_rows),
                         ACTIVATION_IDS[act], float(leak), int(steps), float(dt), Zf)
            return to_host(Zf)

        res = to_host(res)
        return auto_newton(A, C, act, leak, tol, steps, dt, Z0, to_host(Zd), res, to_host(its), res <= tol,
                           to_host(rate), flow=flow)



# ================================================================== the kernel tables' adapters
def _on_device(launch):
    """The ``simulate`` adapter of a one-layer kind: the state arrays on the device, then
    ``launch(be, form, x, h0, stop, dt, H, bad, Z)`` → path (the kind's kernels), then the rows from
    a sequence's failure on NaN, as the reference leaves them."""
    def simulate(be, form, x, h0, stop, dt, want_z):
        xp = runtime().xp
        B, T, _ = x.shape
        H = xp.empty((B, T, form.state_size), dtype=dt)
        bad = xp.empty(B, dtype=np.int64)
        Z = xp.full((B, T, form.hidden), np.nan, dtype=dt) if want_z else xp.empty((1, 1, 1), dtype=dt)
        path = launch(be, form, x, xp.ascontiguousarray(h0, dtype=dt), stop, dt, H, bad, Z)
        if stop:
            H[xp.arange(T)[None, :] >= bad[:, None]] = np.nan
        return H, bad, (Z if want_z else None), path
    return simulate


def _drive(form, x, dt):
    """The drives C = x Wᵀ + b of a one-line kind on the device, in ``dt``."""
    xp = runtime().xp
    return xp.ascontiguousarray((xp.matmul(x, to_device(form.W).T) + to_device(form.b)).astype(dt))


def _flat_T(a, dt):
    """aᵀ raveled, on the device in ``dt`` (the simulation kernels' weight layout)."""
    return to_device(np.ascontiguousarray(a.T).ravel(), dt)


def _sim_cell(be, form, x, h0c, stop, dt, H, bad, Z):
    from .kernels import kernels

    ft = dt.type
    launch, per, wsh = be._plan_simulate(form.kind, x.shape[0], form.hidden, 1, dt.itemsize)
    be._launch(kernels(dt).sim_cell, launch.blocks, launch.threads, launch.shared, _flat_T(form.R, dt),
               _drive(form, x, dt), h0c, ft(form.a), ft(form.gain), form.act_id, ft(form.leak), bool(stop), per, wsh,
               H, Z, bad)
    return "fused"


def _sim_irnn(be, form, x, h0c, stop, dt, H, bad, Z):
    from .kernels import kernels

    ft = dt.type
    launch, per, wsh = be._plan_simulate(form.kind, x.shape[0], form.hidden, 1, dt.itemsize)
    be._launch(kernels(dt).sim_irnn, launch.blocks, launch.threads, launch.shared, _flat_T(form.U, dt),
               _drive(form, x, dt), h0c, to_device(form.eta, dt), ft(form.alpha), int(form.K), bool(form.g0prev),
               ft(form.sign), form.act_id, ft(form.leak), bool(stop), per, wsh, H, bad)
    return "fused"


def _sim_ctrnn(be, form, x, h0c, stop, dt, H, bad, Z):
    from .kernels import kernels

    ft = dt.type
    launch, per, wsh = be._plan_simulate(form.kind, x.shape[0], form.hidden, 1, dt.itemsize)
    be._launch(kernels(dt).sim_ctrnn, launch.blocks, launch.threads, launch.shared, _flat_T(form.U, dt),
               _drive(form, x, dt), h0c, ft(form.tau), ft(form.alpha), ft(form.dt / form.substeps),
               int(form.substeps), form.method == "rk4", form.act_id, ft(form.leak), bool(stop), per, wsh, H, bad)
    return "fused"


def _sim_gated(lstm: bool):
    """GRU (``lstm`` False) / LSTM: from ``GATED_GEMM_MIN_BATCH`` sequences on a GEMM and a
    ``gate_step`` launch per step (``_gated_steps``), below the fused ``sim_gated``."""
    def launch_(be, form, x, h0c, stop, dt, H, bad, Z):
        xp = runtime().xp
        from .kernels import kernels

        B = x.shape[0]
        GI = xp.ascontiguousarray(xp.matmul(x.astype(dt), to_device(form.W_ih, dt).T) + to_device(form.b_ih, dt))
        if B >= be.GATED_GEMM_MIN_BATCH:
            be._gated_steps(form, lstm, GI, h0c, stop, dt, H, bad)
            return "gemm+gates"
        launch, per, wsh = be._plan_simulate(form.kind, B, form.hidden, form.gates, dt.itemsize)
        be._launch(kernels(dt).sim_gated, launch.blocks, launch.threads, launch.shared, _flat_T(form.W_hh, dt), GI,
                   to_device(form.b_hh, dt), h0c, lstm, form.act_id, dt.type(form.leak), bool(stop), per, wsh, H,
                   bad)
        return "fused"
    return launch_


def _sim_stack(be, form, x, h0, stop, dt, want_z):
    """A stack layer by layer (``Backend.simulate_layers``), every layer's states on the device."""
    xp = runtime().xp
    o = form.offsets
    inp = x
    Hs, bad, path = [], None, None
    for ell, layer in enumerate(form.layers):
        H, b, _, path = be._simulate_dev(layer, inp, xp.ascontiguousarray(h0[:, int(o[ell]):int(o[ell + 1])]),
                                         stop, dt, False)
        Hs.append(H)
        bad = b if bad is None else xp.minimum(bad, b)
        inp = xp.ascontiguousarray(H[:, :, layer.output], dtype=np.float64)
    return xp.concatenate(Hs, axis=2), bad, None, path


def _jac_device(launch):
    """The ``jacobians`` adapter of a one-layer kind: (J, Jx or None, s' or None) on the device at
    the N points (x (N, d), s (N, n), host or device arrays); ``launch(be, form, X, Hp, eta, want_x,
    J, Jx, plan)`` the kind's kernel, → s' or None."""
    def jac(be, form, x, s, eta, want_x):
        xp = runtime().xp
        X, Hp = to_device(x), to_device(s)
        N, n = Hp.shape
        J = xp.empty((N, n, n))
        Jx = xp.empty((N, n, form.inputs)) if want_x else xp.empty((1, 1, 1))
        snew = launch(be, form, X, Hp, eta, want_x, J, Jx, be._plan_jacobians(form.kind, N, form.hidden, form.inputs,
                                                                             want_x))
        return J, (Jx if want_x else None), snew
    return jac


def _scratch(plan, D, w):
    """The tangent iterates' per-block global scratch (a dummy when they are in shared memory)."""
    launch, msh, nmat = plan
    return runtime().xp.empty((1, nmat, 1)) if msh else runtime().xp.empty((launch.blocks, nmat, D * w))


def _jac_cell(be, form, X, Hp, eta, want_x, J, Jx, plan):
    from .kernels import kernels

    f64 = np.float64
    launch = plan[0]
    snew = runtime().xp.empty((Hp.shape[0], form.hidden))
    be._launch(kernels(f64).jac_cell, launch.blocks, launch.threads, launch.shared, to_device(form.R), to_device(form.W),
               to_device(form.b), f64(form.a), f64(form.gain), form.act_id, f64(form.leak), X, Hp, bool(want_x), J,
               Jx, snew)
    return snew


def _jac_gated(lstm: bool):
    def launch_(be, form, X, Hp, eta, want_x, J, Jx, plan):
        xp = runtime().xp
        from .kernels import kernels

        launch = plan[0]
        snew = xp.empty(Hp.shape)
        GI = xp.ascontiguousarray(xp.matmul(X, to_device(form.W_ih).T) + to_device(form.b_ih))
        if lstm:
            J[...] = 0.0
        be._launch(kernels(np.float64).jac_gated, launch.blocks, launch.threads, launch.shared, to_device(form.W_ih),
                   to_device(form.W_hh), GI, to_device(form.b_hh), lstm, form.act_id, np.float64(form.leak), Hp,
                   bool(want_x), J, Jx, snew)
        return snew
    return launch_


def _jac_irnn(be, form, X, Hp, eta, want_x, J, Jx, plan):
    from .kernels import kernels

    f64 = np.float64
    launch, msh, _ = plan
    D = form.hidden
    E = to_device(np.broadcast_to(form.eta[0], (Hp.shape[0], form.K)) if eta is None else eta)
    be._launch(kernels(f64).jac_irnn, launch.blocks, launch.threads, launch.shared, to_device(form.U),
               to_device(form.W), to_device(form.b), E, f64(form.alpha), int(form.K), bool(form.g0prev),
               f64(form.sign), form.act_id, f64(form.leak), X, Hp, bool(want_x),
               _scratch(plan, D, D + form.inputs if want_x else D), bool(msh), J, Jx)
    return None


def _jac_ctrnn(be, form, X, Hp, eta, want_x, J, Jx, plan):
    from .kernels import kernels

    f64 = np.float64
    launch, msh, _ = plan
    D = form.hidden
    be._launch(kernels(f64).jac_ctrnn, launch.blocks, launch.threads, launch.shared, to_device(form.U),
               to_device(form.W), to_device(form.b), f64(form.tau), f64(form.alpha), f64(form.dt / form.substeps),
               int(form.substeps), form.method == "rk4", form.act_id, f64(form.leak), X, Hp, bool(want_x),
               _scratch(plan, D, D + form.inputs if want_x else D), bool(msh), J, Jx)
    return None


def _jac_stack(be, form, x, s, eta, want_x):
    """A stack composed from its layers' kernels (``reference.jacobians.stack``), as NumPy arrays."""
    from ..reference.jacobians import stack

    return stack(form, x, s, want_x, lambda f, xx, ss, e, w: be._layer_host(f, xx, ss, e, w))


#: operation → {kind: kernel} (``Backend.kernel``; ``refuses`` names scipy's CTRNNs, for every
#: operation).  ``sweep_gradients`` and ``partition_trace`` take S forms (or a ``TangentBatch``),
#: not one: one implementation each, their tables saying which kinds they serve (``supports``);
#: no training passes here (empty tables).  The operations without a table (the flow's and
#: Lyapunov's composites, the accumulators, ``forward_tangent``, ``implicit_solve``) take every form.
GPUBackend.KERNELS = {
    "simulate": {"cell": _on_device(_sim_cell), "irnn": _on_device(_sim_irnn), "ctrnn": _on_device(_sim_ctrnn),
                 "gru": _on_device(_sim_gated(False)), "lstm": _on_device(_sim_gated(True)), "stack": _sim_stack},
    "jacobians": {"cell": _jac_device(_jac_cell), "irnn": _jac_device(_jac_irnn), "ctrnn": _jac_device(_jac_ctrnn),
                  "gru": _jac_device(_jac_gated(False)), "lstm": _jac_device(_jac_gated(True)), "stack": _jac_stack},
    "reverse_cotangents": {"cell": GPUBackend.reverse_cotangents},
    "partition_trace": {"cell": GPUBackend.partition_trace, "stack": GPUBackend.partition_trace},
    "sweep_gradients": {"cell": GPUBackend.sweep_gradients, "irnn": GPUBackend.sweep_gradients},
    "train_forward": {},
    "train_backward": {},
}

__all__ = ["GPUBackend"]

"""``simulate``: run a model over input sequences and return the states as a Dataset.

Two layers (docs/design.md, *Architecture*): ``simulate`` validates once, picks the backend once and wraps
the result; ``run_states`` is the lower layer on prepared arrays that analyses loop over.
"""
from __future__ import annotations

import numpy as np

from . import config
from ._blas import blas_threads, small_gemm
from ._resources import check_simulation
from ._dataset import finish
from .activations import ACTIVATION_IDS
from .backends import namespace, resolve_backend, to_numpy
from .errors import DivergenceError, ParameterError
from .kernels import readonly
from .models import CTRNN, GRU, IRNN, LSTM, Model, Stack
from .models.ctrnn import FIXED_STEP

ON_DIVERGENCE = ("raise", "flag")


def check_model(model) -> Model:
    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model (see dynlab.make_model), got {type(model).__name__}")
    if not getattr(model, "SEQUENCE", True):
        raise ParameterError("model", f"{model.name} is a static equilibrium model, not a sequence model; "
                                      f"use dynlab.implicit_equilibrium")
    return model


def check_input(x, inputs: int, param: str = "x") -> tuple[np.ndarray, bool]:
    """x as a (B, T, d) float64 array, and whether it came batched.

    Accepts (T, d) for one sequence or (B, T, d); a 1-D x is read as (T,) with d = 1.
    """
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(param, f"must be a numeric array ({exc})") from None
    if arr.ndim == 1 and inputs == 1:
        arr = arr[:, None]
    if arr.ndim not in (2, 3):
        raise ParameterError(param, f"must have shape (T, d) or (B, T, d), got {arr.shape}")
    batched = arr.ndim == 3
    if not batched:
        arr = arr[None]
    if arr.shape[2] != inputs:
        raise ParameterError(param, f"has {arr.shape[2]} input features per step but the model takes inputs={inputs}")
    if arr.shape[1] < 1 or arr.shape[0] < 1:
        raise ParameterError(param, f"must have at least one step and one sequence, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        b, t, i = np.argwhere(~np.isfinite(arr))[0]
        where = f"step t={t + 1}, feature {i}" + (f", batch {b}" if batched else "")
        raise ParameterError(param, f"contains a non-finite value ({arr[b, t, i]}) at {where}")
    return np.ascontiguousarray(arr), batched


def check_h0(h0, batch: int, hidden: int, param: str = "h0") -> np.ndarray:
    if h0 is None:
        return np.zeros((batch, hidden))
    arr = np.asarray(h0, dtype=np.float64)
    if arr.ndim == 1:
        arr = np.broadcast_to(arr, (batch, arr.shape[0]))
    if arr.shape != (batch, hidden):
        raise ParameterError(param, f"must have shape ({hidden},) or ({batch}, {hidden}), got {np.shape(h0)}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(param, "contains a non-finite value")
    return np.ascontiguousarray(arr, dtype=np.float64)


def kernel_path(model: Model, batch: int, backend: str) -> str:
    """Which kernel family runs: 'numpy_ref', 'numba_cpu', 'vectorised' or 'scipy'.

    A map model without kernels of its own (``has_kernels``) runs the NumPy reference loop
    over ``model.step`` under every backend.  A stack runs layer by layer, each layer on the
    path its own size picks (every layer has the same hidden size, so they all agree)."""
    if isinstance(model, CTRNN) and model.method not in FIXED_STEP:
        return "scipy"
    if is_map(model) and not has_kernels(model):
        return "numpy_ref"
    if isinstance(model, Stack):
        return kernel_path(model.layers[0], batch, backend)
    if backend == "numpy":
        return "numpy_ref"
    if backend == "cupy":
        return "vectorised"
    return "vectorised" if batch * model.hidden ** 2 >= config.VECTORISE_MIN_WORK else "numba_cpu"


def has_kernels(model) -> bool:
    """Whether ``model`` runs on the simulation kernels: every model but a map model (GRU,
    LSTM, stack) whose kind has none — GRU and LSTM do, and so does a stack of GRU, LSTM or
    one-line (``gated_form``) layers."""
    if isinstance(model, (GRU, LSTM)):
        return True
    if isinstance(model, Stack):
        return all(isinstance(m, (GRU, LSTM)) or (hasattr(m, "gated_form") and not is_map(m))
                   for m in model.layers)
    return not is_map(model)


def _map_states(model, x, h0, stop, dtype):
    """The reference loop of a map model: s_t = model.step(s_{t-1}, x_t), batched over B, with the
    bookkeeping of the kernels (``bad``: first non-finite 0-based step, T if none)."""
    from .kernels.numpy_ref import _record

    B, T, _ = x.shape
    H = np.full((B, T, model.state_size), np.nan, dtype=dtype)
    bad = np.full(B, T, dtype=np.int64)
    alive = np.ones(B, dtype=bool)
    s = h0.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(T):
            s = np.where(alive[:, None], model.step(s, x[:, t]), s).astype(dtype).astype(np.float64)
            alive = _record(H, bad, t, s.astype(dtype), stop, alive)
            if stop and not alive.any():
                break
    return H, bad


def run_states(model: Model, x: np.ndarray, h0: np.ndarray, backend: str, *, stop: bool = True,
               dtype=np.float64) -> tuple[np.ndarray, np.ndarray, str]:
    """States h_1..h_T for prepared inputs: x (B, T, d), h0 (B, D).  Returns (H, bad, path)."""
    B, T, _ = x.shape
    D = model.state_size
    path = kernel_path(model, B, backend)
    dtype = np.dtype(dtype)
    if is_map(model) and not has_kernels(model):
        return (*_map_states(model, x, h0, stop, dtype), path)
    if isinstance(model, Stack):
        return (*_stack_states(model, x, h0, backend, stop, dtype), path)
    if isinstance(model, (GRU, LSTM)):
        return (*_torch_cell_states(model, x, h0, path, backend, stop, dtype), path)
    act = ACTIVATION_IDS[model.activation]
    leak = float(model.leak)
    if path == "scipy":
        from .kernels import numpy_ref
        c = x @ model.W.T + model.b
        H, bad = numpy_ref.ctrnn_scipy(model.U, c, h0, model.tau, model.alpha, model.dt, model.method,
                                       model.rtol, model.atol, model.activation, leak, stop)
        return H, bad, path

    if path == "numpy_ref":
        from .kernels import numpy_ref
        c = (x @ model.W.T + model.b).astype(dtype)
        h0c = h0.astype(dtype)
        if isinstance(model, IRNN):
            H, bad = numpy_ref.irnn(model.U.astype(dtype), c, h0c, model.eta_table(T), model.alpha, model.K,
                                    model.g0 == "previous", model.sign, model.activation, leak, stop)
        elif isinstance(model, CTRNN):
            H, bad = numpy_ref.ctrnn(model.U.astype(dtype), c, h0c, model.tau, model.alpha, model.dt,
                                     model.substeps, model.method, model.activation, leak, stop)
        else:
            a, gain, R = model.gated_form()
            H, bad = numpy_ref.gated(R.astype(dtype), c, h0c, a, gain, model.activation, leak, stop)
        return H, bad, path

    if path == "numba_cpu":
        from .kernels import numba_cpu
        c = readonly(x @ model.W.T + model.b, dtype)
        h0c = readonly(h0, dtype)
        H = np.empty((B, T, D), dtype=dtype)
        bad = np.empty(B, dtype=np.int64)
        if isinstance(model, IRNN):
            numba_cpu.irnn(readonly(model.U, dtype), c, h0c, readonly(model.eta_table(T), np.float64),
                           float(model.alpha), model.K, model.g0 == "previous", float(model.sign), act, leak,
                           stop, H, bad)
        elif isinstance(model, CTRNN):
            numba_cpu.ctrnn(readonly(model.U, dtype), c, h0c, float(model.tau),
                            float(model.alpha), float(model.dt), model.substeps, model.method == "rk4", act,
                            leak, stop, H, bad)
        else:
            a, gain, R = model.gated_form()
            numba_cpu.gated(readonly(R, dtype), c, h0c, float(a), float(gain), act, leak,
                            stop, H, bad)
        if stop:  # rows past a sequence's failure were never written
            for i in np.flatnonzero(bad < T):
                H[i, bad[i] + 1:] = np.nan
        return H, bad, path

    # vectorised: NumPy (numba backend, large work) or CuPy
    from .kernels import vectorised
    xp = namespace(backend)
    check_every = 1 if xp is np else 64
    xs = xp.asarray(x, dtype=dtype)
    h0x = xp.asarray(h0, dtype=dtype)
    W = xp.asarray(model.W, dtype=dtype)
    b = xp.asarray(model.b, dtype=dtype)
    common = dict(stop=stop, check_every=check_every, xp=xp)
    small = xp is np and small_gemm()               # products by rows for OpenBLAS's small-matrix path
    if isinstance(model, IRNN):
        U, eta = xp.asarray(model.U, dtype=dtype), model.eta_table(T)

        def kernel(lo, hi, Hb):
            return vectorised.irnn(U, W, b, _rows(xs, lo, hi, B), _rows(h0x, lo, hi, B), eta, float(model.alpha),
                                   model.K, model.g0 == "previous", model.sign, act, leak, H=Hb, small=small, **common)
    elif isinstance(model, CTRNN):
        U = xp.asarray(model.U, dtype=dtype)

        def kernel(lo, hi, Hb):
            return vectorised.ctrnn(U, W, b, _rows(xs, lo, hi, B), _rows(h0x, lo, hi, B), float(model.tau),
                                    float(model.alpha), float(model.dt), model.substeps, model.method == "rk4",
                                    act, leak, H=Hb, **common)
    else:
        a, gain, R = model.gated_form()
        R = xp.asarray(R, dtype=dtype)

        def kernel(lo, hi, Hb):
            return vectorised.gated(R, W, b, _rows(xs, lo, hi, B), _rows(h0x, lo, hi, B), float(a), float(gain),
                                    act, leak, H=Hb, small=small, **common)
    parts = _batch_parts(B, config.VECTORISED_SIMULATION_THREADS, config.VECTORISED_MIN_ROWS_PER_THREAD) \
        if xp is np else 1
    H, bad = _run_blocks(kernel, B, T, D, xs.dtype, parts)
    H = to_numpy(H)
    if stop and bad.min() < T:
        H[:, int(bad.min()) + 1:] = np.nan  # not computed
    return H, bad, path


#: ``simulate`` reports its progress (``dynlab._resources.progress``) where a reporter listens and
#: the run is estimated to take at least this many seconds: it then runs in ``PROGRESS_CHUNKS``
#: chunks of time steps, each continuing from the last state of the one before (the same states,
#: bit for bit, as one call).
PROGRESS_MIN_SECONDS = 1.0
PROGRESS_CHUNKS = 100


def run_states_reporting(model: Model, x: np.ndarray, h0: np.ndarray, backend: str, *, stop: bool = True,
                         dtype=np.float64) -> tuple[np.ndarray, np.ndarray, str]:
    """``run_states``, in chunks of time steps with a progress report after each where someone
    listens (the command line's bar) and the run is long; one call otherwise."""
    from ._resources import listening, progress, simulation_work

    B, T, _ = x.shape
    if T < 2 or not listening() or simulation_work(model, B, T)[0] < PROGRESS_MIN_SECONDS:
        return run_states(model, x, h0, backend, stop=stop, dtype=dtype)
    edges = np.unique(np.linspace(0, T, min(T, PROGRESS_CHUNKS) + 1).astype(int))
    eta = np.asarray(getattr(model, "eta", 0.0))
    per_time = isinstance(model, IRNN) and eta.ndim == 2 and eta.shape[0] > 1
    H = np.full((B, T, model.state_size), np.nan, dtype=dtype)
    bad = np.full(B, T, dtype=np.int64)
    s, path = h0, None
    for lo, hi in zip(edges[:-1], edges[1:]):
        part = model.replace(eta=eta[lo:hi]) if per_time else model
        Hc, bc, path = run_states(part, np.ascontiguousarray(x[:, lo:hi]), s, backend, stop=stop, dtype=dtype)
        H[:, lo:hi] = Hc
        bad = np.where(bad < T, bad, np.where(bc < hi - lo, lo + bc, T))
        progress("simulation (steps)", int(hi), T)
        if stop and bad.min() < T and np.all(bad < T):
            break
        s = np.ascontiguousarray(Hc[:, -1], dtype=np.float64)
    return H, bad, path


def _stack_states(model, x, h0, backend, stop, dtype):
    """A stack layer by layer, each over the whole sequence on its own kernel: layer ℓ reads
    layer ℓ − 1's output at every step (PyTorch's semantics), so running layer 1 over all T
    steps, then layer 2 on its outputs, … gives the same states as stepping the whole stack,
    with one kernel call per layer instead of one NumPy step per time step.  A layer that
    fails at step t hands non-finite inputs to the layers above from t on, so ``bad`` (the
    minimum over the layers) is the first step at which the concatenated state is non-finite."""
    o = model.offsets
    inp = x
    Hs, bad = [], None
    for ell, layer in enumerate(model.layers):
        s0 = np.ascontiguousarray(h0[:, o[ell]:o[ell + 1]])
        H, b, _ = run_states(layer, inp, s0, backend, stop=stop, dtype=dtype)
        Hs.append(H)
        bad = b if bad is None else np.minimum(bad, b)
        inp = np.ascontiguousarray(H[:, :, layer.output_slice], dtype=np.float64)
    return np.concatenate(Hs, axis=2), bad


def _torch_cell_states(model, x, h0, path, backend, stop, dtype):
    """A GRU or an LSTM (PyTorch's equations, ``dynlab.models.gru_lstm``) on ``path``; the
    kernels take the raw parameters (numpy_ref, vectorised) or, for the scalar loops, the
    transposed matrices and the hidden biases folded into the input drive where they can be
    (the GRU's b_hn cannot: it sits inside r ⊙ (…))."""
    lstm = isinstance(model, LSTM)
    B, T, _ = x.shape
    D = model.hidden
    act = ACTIVATION_IDS[model.activation]
    leak = float(model.leak)
    if path == "numpy_ref":
        from .kernels import numpy_ref
        fn = numpy_ref.lstm if lstm else numpy_ref.gru
        W_ih, W_hh, b_ih, b_hh = (np.asarray(a, dtype=dtype) for a in (model.W_ih, model.W_hh, model.b_ih,
                                                                        model.b_hh))
        return fn(W_ih, W_hh, b_ih, b_hh, x.astype(dtype), h0.astype(dtype), model.activation, leak, stop)
    if path == "numba_cpu":
        from .kernels import numba_cpu
        W_ihT, W_hhT = readonly(model.W_ih.T, dtype), readonly(model.W_hh.T, dtype)
        xc, h0c = readonly(x, dtype), readonly(h0, dtype)
        H = np.empty((B, T, model.state_size), dtype=dtype)
        bad = np.empty(B, dtype=np.int64)
        if lstm:
            numba_cpu.lstm(W_ihT, W_hhT, readonly(model.b_ih + model.b_hh, dtype), xc, h0c, act, leak, stop, H, bad)
        else:
            bi = model.b_ih.copy()
            bi[:2 * D] += model.b_hh[:2 * D]
            numba_cpu.gru(W_ihT, W_hhT, readonly(bi, dtype), readonly(model.b_hh[2 * D:], dtype),
                          xc, h0c, act, leak, stop, H, bad)
        if stop:  # rows past a sequence's failure were never written
            for i in np.flatnonzero(bad < T):
                H[i, bad[i] + 1:] = np.nan
        return H, bad
    from .kernels import vectorised
    xp = namespace(backend)
    fn = vectorised.lstm if lstm else vectorised.gru
    W_ih, W_hh, b_ih, b_hh = (xp.asarray(a, dtype=dtype) for a in (model.W_ih, model.W_hh, model.b_ih, model.b_hh))
    xs, s0 = xp.asarray(x, dtype=dtype), xp.asarray(h0, dtype=dtype)
    common = dict(stop=stop, check_every=1 if xp is np else 64, xp=xp, small=xp is np and small_gemm())
    parts = _batch_parts(B, config.GATED_SIMULATION_THREADS, config.GATED_MIN_ROWS_PER_THREAD) if xp is np else 1

    def kernel(lo, hi, Hb):
        return fn(W_ih, W_hh, b_ih, b_hh, _rows(xs, lo, hi, B), _rows(s0, lo, hi, B), act, leak, H=Hb, **common)

    H, bad = _run_blocks(kernel, B, T, model.state_size, xs.dtype, parts)
    H = to_numpy(H)
    if stop and bad.min() < T:
        H[:, int(bad.min()) + 1:] = np.nan  # not computed
    return H, bad


def _batch_parts(B: int, threads: int | None, min_rows: int) -> int:
    """Into how many blocks of sequences a vectorised CPU kernel splits a batch of B:
    ``threads`` (``config.VECTORISED_SIMULATION_THREADS`` or ``config.GATED_SIMULATION_THREADS``),
    or (None) as many as BLAS would use threads now — the CPUs under ``simulate``'s own
    setting, 1 inside a family limited to one thread (training, gradients, sweeps) or where the
    user set OPENBLAS_NUM_THREADS=1 — and never fewer than ``min_rows`` sequences per block."""
    from ._blas import blas_thread_count, cpu_count, work_threads

    n = work_threads(threads)
    if threads is None:
        n = min(n, blas_thread_count() or cpu_count())
    return int(max(1, min(n, B // max(1, min_rows))))


def _rows(a, lo, hi, B):
    """Rows lo:hi of a (B, …) array, C-contiguous (the array itself, of any namespace, when whole)."""
    return a if (lo, hi) == (0, B) else np.ascontiguousarray(a[lo:hi])


def _split_batch(run, parts, B, T, size, dtype):
    """``run(lo, hi, H_block) -> bad_block`` (a vectorised kernel on the sequences lo:hi) on
    ``parts`` blocks of sequences at once, one Python thread each, each with BLAS on one
    thread.  Sequences are independent, so each block runs its whole time loop on its own — no
    synchronisation between threads until the end — unlike BLAS's own threads, which split
    every (B×D)·(D×·) product and wait for each other once per step (with a core busy
    elsewhere, every such wait costs a scheduler time slice); and the element-wise passes,
    which BLAS's threads do not share, are split too.  The numba passes release the GIL, and
    so does NumPy's matmul.  Returns (H (B, T, size), bad (B,))."""
    from ._blas import in_threads

    H = np.empty((B, T, size), dtype=dtype)
    bad = np.empty(B, dtype=np.int64)
    edges = np.linspace(0, B, parts + 1).astype(int)

    def work(i):
        lo, hi = int(edges[i]), int(edges[i + 1])
        bad[lo:hi] = run(lo, hi, H[lo:hi])

    in_threads(work, parts)
    return H, bad


def _run_blocks(kernel, B, T, size, dtype, parts):
    """``kernel(lo, hi, H_block)`` -> (H_block, bad_block) over the whole batch: in one call
    (parts = 1) or split between threads (``_split_batch``)."""
    if parts == 1:
        return kernel(0, B, None)
    return _split_batch(lambda lo, hi, Hb: kernel(lo, hi, Hb)[1], parts, B, T, size, dtype)


@blas_threads("SIMULATION_BLAS_THREADS")
def simulate(model: Model, x, h0=None, *, backend: str | None = None, dtype=np.float64,
             on_divergence: str = "raise", command: str | None = None):
    """Run ``model`` over the input sequence(s) ``x`` and return the states as a Dataset.

    Parameters
    ----------
    model : dynlab model (``make_model`` / ``load_model``)
    x : (T, d) or (B, T, d) array
        Inputs x_1..x_T; (T,) is accepted when d = 1.
    h0 : (D,) or (B, D) array, optional
        Initial state h_0 (zeros by default).
    backend : "numpy" | "numba" | "cupy", optional
        numba (default) runs jitted loops for small per-step work and the vectorised BLAS
        kernel for large batches; numpy is the plain reference; cupy runs the vectorised
        kernel on a GPU.
    dtype : float64 (default) or float32
    on_divergence : "raise" (default) or "flag"
        "raise": a non-finite state raises ``DivergenceError`` naming the step and batch,
        with the finite steps before it in ``err.partial``.  "flag": the run completes and
        the Dataset gets ``diverged_at`` (per sequence: first non-finite step, 0 if none).

    Returns
    -------
    xarray.Dataset with ``h`` (batch, time, unit) — (time, unit) for an unbatched x — the
    input ``x``, the initial state ``h0``, the model's parameters, and attrs with every
    setting (docs/design.md, *Data contract*).

    Example
    -------
    >>> m = make_model("irnn", hidden=2, inputs=1, K=5, seed=0)
    >>> ds = simulate(m, random_walk(steps=1000, inputs=1, variance=10.0, seed=0))
    """
    model = check_model(model)
    backend = resolve_backend(backend)
    if on_divergence not in ON_DIVERGENCE:
        raise ParameterError("on_divergence", f"must be 'raise' or 'flag', got {on_divergence!r}")
    if np.dtype(dtype) not in (np.float64, np.float32):
        raise ParameterError("dtype", f"must be float64 or float32, got {dtype}")
    xa, batched = check_input(x, model.inputs)
    h0a = check_h0(h0, xa.shape[0], model.state_size)
    B, T, _ = xa.shape
    check_simulation(model, B, T)  # before allocating the states: refuses what cannot run here
    if isinstance(model, IRNN):
        model.eta_table(T)  # shape check of a per-time η before any work
    H, bad, path = run_states_reporting(model, xa, h0a, backend, stop=on_divergence == "raise", dtype=dtype)
    used = "scipy" if path == "scipy" else backend
    ds = wrap_states(model, xa, h0a, H, batched=batched, backend=used, command=command, path=path)
    first = int(bad.min())
    if first < T:
        if on_divergence == "raise":
            which = int(np.argmin(bad))
            raise DivergenceError(step=first + 1, batch=which, model=model.name,
                                  partial=finish(ds.isel(time=slice(0, first)), "simulate"))
    if on_divergence == "flag":
        import xarray as xr
        at = np.where(bad < T, bad + 1, 0)
        ds["diverged_at"] = xr.Variable(("batch",) if batched else (), at if batched else at[0],
                                        {"long_name": "first step with a non-finite state (0: none)",
                                         "units": "step"})
    return finish(ds, "simulate")


def is_map(model) -> bool:
    """A model given by its ``step``/``step_jacobian`` map (GRU, LSTM, a stack of layers)."""
    return bool(getattr(model, "MAP", False))


def state_coords(model) -> dict:
    """Coordinates of the state dimension ``unit`` (size ``state_size``; with ``part`` naming what
    each entry is, "h"/"c" for an LSTM, "h1", "c1", "h2", … for a stack) and of ``unit_from``."""
    n = model.state_size
    coords = {"unit": ("unit", np.arange(n), {"long_name": "state unit", "units": "1"}),
              "unit_from": ("unit_from", np.arange(n), {"long_name": "presynaptic unit", "units": "1"})}
    labels = model.state_labels()
    if labels is not None:
        coords["part"] = ("unit", np.array(labels, dtype=object),
                          {"long_name": "part of the state (h: hidden output, c: LSTM cell)", "units": "1"})
    return coords


def wrap_states(model: Model, x: np.ndarray, h0: np.ndarray, H: np.ndarray, *, batched: bool,
                backend: str, command: str | None, path: str = "", prefix: str = ""):
    """The Dataset of a simulation (docs/design.md, *Data contract*)."""
    import xarray as xr

    from ._dataset import base_attrs, model_attrs, model_variables

    T = H.shape[1]
    lead = ("batch",) if batched else ()
    sel = slice(None) if batched else 0
    data_vars = {
        "h": xr.Variable(lead + ("time", "unit"), H[sel], {"long_name": "hidden state h_t", "units": "1"}),
        "x": xr.Variable(lead + ("time", "unit_in"), x[sel], {"long_name": "input x_t", "units": "1"}),
        "h0": xr.Variable(lead + ("unit",), h0[sel], {"long_name": "initial state h_0", "units": "1"}),
    }
    data_vars.update(model_variables(model, prefix))
    coords = {"time": ("time", np.arange(1, T + 1), {"long_name": "time step t", "units": "step"}),
              **state_coords(model),
              "unit_in": ("unit_in", np.arange(model.inputs), {"long_name": "input feature", "units": "1"})}
    if batched:
        coords["batch"] = ("batch", np.arange(H.shape[0]), {"long_name": "sequence", "units": "1"})
    if isinstance(model, CTRNN):
        coords["t"] = ("time", np.arange(1, T + 1) * model.dt, {"long_name": "continuous time", "units": "time"})
    attrs = model_attrs(model)
    attrs.update(base_attrs(backend, command))
    attrs["kernel"] = path
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)

"""``simulate``: run a model over input sequences and return the states as a Dataset.

Two layers (docs/design.md, *Architecture*): ``simulate`` validates once, picks the backend once and wraps
the result; ``run_states`` is the lower layer on prepared arrays that analyses loop over.
"""
from __future__ import annotations

import numpy as np

from ._resources import check_simulation
from ._dataset import finish
from .backends import get_backend
from .errors import DivergenceError, ParameterError
from .models import Model

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


def run_states(model: Model, x: np.ndarray, h0: np.ndarray, backend=None, *, stop: bool = True,
               dtype=np.float64) -> tuple[np.ndarray, np.ndarray, str]:
    """States h_1..h_T for prepared inputs: x (B, T, d), h0 (B, n).  Returns (H, bad, path):
    the backend's ``simulate`` on the model's form (``dynlab.backends``)."""
    return get_backend(backend).simulate(model.form(), x, h0, stop=stop, dtype=dtype)


#: ``simulate`` reports its progress (``dynlab._progress.progress``) where a reporter listens and
#: the run is estimated to take at least this many seconds: it then runs in ``PROGRESS_CHUNKS``
#: chunks of time steps, each continuing from the last state of the one before (the same states,
#: bit for bit, as one call).
PROGRESS_MIN_SECONDS = 1.0
PROGRESS_CHUNKS = 100


def run_states_reporting(model: Model, x: np.ndarray, h0: np.ndarray, backend: str, *, stop: bool = True,
                         dtype=np.float64) -> tuple[np.ndarray, np.ndarray, str]:
    """``run_states``, in chunks of time steps with a progress report after each where someone
    listens (the command line's bar) and the run is long; one call otherwise."""
    from ._resources import simulation_work
    from ._progress import listening, progress

    B, T, _ = x.shape
    if T < 2 or not listening() or simulation_work(model, B, T)[0] < PROGRESS_MIN_SECONDS:
        return run_states(model, x, h0, backend, stop=stop, dtype=dtype)
    edges = np.unique(np.linspace(0, T, min(T, PROGRESS_CHUNKS) + 1).astype(int))
    H = np.full((B, T, model.state_size), np.nan, dtype=dtype)
    bad = np.full(B, T, dtype=np.int64)
    s, path = h0, None
    for lo, hi in zip(edges[:-1], edges[1:]):
        part = model.for_steps(lo, hi)
        Hc, bc, path = run_states(part, np.ascontiguousarray(x[:, lo:hi]), s, backend, stop=stop, dtype=dtype)
        H[:, lo:hi] = Hc
        bad = np.where(bad < T, bad, np.where(bc < hi - lo, lo + bc, T))
        progress("simulation (steps)", int(hi), T)
        if stop and bad.min() < T and np.all(bad < T):
            break
        s = np.ascontiguousarray(Hc[:, -1], dtype=np.float64)
    return H, bad, path


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
        numba (default) runs jitted loops for small per-step work and its batched BLAS
        kernels for large batches; numpy is the plain reference; cupy runs the whole time loop
        as one fused kernel on a GPU (``dynlab.backends.gpu``).
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
    be = get_backend(backend)
    if on_divergence not in ON_DIVERGENCE:
        raise ParameterError("on_divergence", f"must be 'raise' or 'flag', got {on_divergence!r}")
    if np.dtype(dtype) not in (np.float64, np.float32):
        raise ParameterError("dtype", f"must be float64 or float32, got {dtype}")
    xa, batched = check_input(x, model.inputs)
    h0a = check_h0(h0, xa.shape[0], model.state_size)
    B, T, _ = xa.shape
    check_simulation(model, B, T)  # before allocating the states: refuses what cannot run here
    model.check_steps(T)  # e.g. the rows of a per-time η, before any work
    with be:
        H, bad, path = run_states_reporting(model, xa, h0a, be, stop=on_divergence == "raise", dtype=dtype)
    used = "scipy" if path == "scipy" else be.name
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
    if model.time_step is not None:
        coords["t"] = ("time", np.arange(1, T + 1) * model.time_step, {"long_name": "continuous time",
                                                                       "units": "time"})
    attrs = model_attrs(model)
    attrs.update(base_attrs(backend, command))
    attrs["kernel"] = path
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)

"""Closed-form one-step Jacobians J_t = ∂h_t/∂h_{t-1} (and ∂h_t/∂x_t) for every model.

Two layers, as everywhere in dynlab: ``jacobians`` simulates and wraps J_1..J_T into a
Dataset; ``jacobian_at`` is the lower layer that evaluates the Jacobians at N prepared
points (x_n, h_{n,prev}) — the products, norms and Lyapunov analyses loop over it.

The closed forms (one-line cells: J = a I + c diag(φ'(z)) R; the iRNN's product through its K
inner steps; the derivative of a CTRNN's Euler/RK4 scheme, or of its flow for a scipy method;
PyTorch's GRU and LSTM gates; a stack's block lower triangular composition) are written out in
``dynlab.backends.reference.jacobians``.

Every Jacobian is a backend operation on the model's form (``dynlab.backends``): the closed
forms are in ``dynlab.backends.reference.jacobians`` (the reference) and compiled in each
backend's own kernels; which kernel runs is the backend's choice (``jacobian_kernel`` attr).
"""
from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..backends.base import previous_states
from .._validate import as_points as _check_points
from ..errors import DivergenceError, ParameterError
from ..models import Model


# ============================================================================ validation
def _check_model(model) -> Model:
    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model (see dynlab.make_model), got {type(model).__name__}")
    return model


def _eta_rows(form, N: int, t):
    """η for each point as an (N, K) table of an iRNN form whose η varies over time (None when it
    is shared: the kernels use the form's own row); ``t`` the 0-based time index of each point."""
    if form.time_rows == 1:
        return None
    if t is None:
        raise ParameterError("t", f"the model's η varies over {form.time_rows} time steps; give the 0-based "
                                  "time index of every point")
    return form.eta_rows(_check_t(t, N, form.time_rows))


def _check_t(t, N: int, rows: int) -> np.ndarray:
    arr = np.asarray(t)
    if arr.ndim == 0:
        arr = np.broadcast_to(arr, (N,))
    if arr.shape != (N,) or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ParameterError("t", f"must be an integer array of shape ({N},), got {arr.dtype} {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= rows):
        raise ParameterError("t", f"time indices must lie in [0, {rows}) (rows of the η table), "
                                  f"got [{int(arr.min())}, {int(arr.max())}]")
    return np.ascontiguousarray(arr, dtype=np.int64)


def jacobian_path(model: Model, n_points: int, backend=None) -> str:
    """Which kernel the backend runs for the step Jacobians of ``model`` at ``n_points`` points
    (the backend's own choice: 'numpy', 'scipy', 'loops', 'batched', …)."""
    be = get_backend(backend)
    be.require("jacobians", model.form())
    path = getattr(be, "jacobian_path", None)
    return path(model.form(), int(n_points)) if path is not None else be.name


# ============================================================================ public
def jacobian_at(model, x, hprev, *, backend=None, inputs=False, t=None):
    """Closed-form one-step Jacobians at N points.

    J[n] = ∂h_t/∂h_{t-1} at (x_t, h_{t-1}) = (x[n], hprev[n]); the closed forms are in the
    module docstring (gated cells: J = a I + c diag(φ'(z)) R; iRNN: the product through the K
    inner steps; CTRNN: the derivative of the Euler/RK4 scheme or of the flow).

    Parameters
    ----------
    model : dynlab model
    x : (N, d) array — inputs x_t
    hprev : (N, D) array — states h_{t-1}
    backend : "numpy" | "numba" (default) | "cupy"
    inputs : bool — also return Jx = ∂h_t/∂x_t
    t : (N,) int array, optional — 0-based time index of every point; used only by an iRNN
        whose η is a per-time (T, K) table (then it is required), to pick the row η_t.

    Returns
    -------
    J : (N, D, D) float64 NumPy array, J[n, i, j] = ∂h_{t,i}/∂h_{t-1,j};
    with ``inputs=True`` the pair (J, Jx), Jx : (N, D, d), Jx[n, i, j] = ∂h_{t,i}/∂x_{t,j}.

    Example
    -------
    >>> m = make_model("irnn", hidden=2, inputs=1, K=5, seed=0)
    >>> J = jacobian_at(m, np.zeros((1, 1)), np.zeros((1, 2)))     # (1, 2, 2)
    """
    model = _check_model(model)
    be = get_backend(backend)
    form = model.form()
    be.require("jacobians", form)
    hprev = _check_points(hprev, model.state_size, "hprev")
    N = hprev.shape[0]
    x = _check_points(x, model.inputs, "x", N)
    eta = _eta_rows(form, N, t)
    with be:
        J, Jx, _ = be.jacobians(form, x, hprev, eta=eta, inputs=bool(inputs))
    return (J, Jx) if inputs else J


def flow_jacobian(model, x, g, interval, *, inputs=False):
    """Jacobian of the CTRNN flow over an interval of length ``interval`` with x held constant.

    dg/dt = (1/τ)(−α g + φ(U g + W x + b)),  dΦ/dt = (1/τ)(diag(φ'(U g + W x + b)) U − α I) Φ,
    Φ(0) = I;  with ``inputs`` also dΦx/dt = (1/τ)(diag(φ')(U Φx + W) − α Φx), Φx(0) = 0.
    Integrated together by ``scipy.integrate.solve_ivp`` with the model's method (DOP853 when
    the model uses a fixed-step method) at the model's rtol/atol.

    Parameters
    ----------
    model : CTRNN;  x : (N, d) inputs;  g : (N, D) initial states;  interval : float > 0

    Returns
    -------
    Φ : (N, D, D) = ∂g(interval)/∂g(0); with ``inputs=True`` (Φ, Φx), Φx : (N, D, d).
    """
    model = _check_model(model)
    form = model.form() if model.time_step is not None else None
    if form is None or form.kind != "ctrnn":
        raise ParameterError("model", f"flow_jacobian needs a ctrnn model, got {model.name}")
    g = _check_points(g, model.hidden, "g")
    x = _check_points(x, model.inputs, "x", g.shape[0])
    try:
        interval = float(interval)
    except (TypeError, ValueError):
        raise ParameterError("interval", f"must be a number, got {interval!r}") from None
    if not (np.isfinite(interval) and interval > 0):
        raise ParameterError("interval", f"must be finite and > 0, got {interval}")
    import dataclasses

    flow = dataclasses.replace(form, dt=interval, method="DOP853" if form.fixed_step else form.method)
    # the reference, deliberately: this Jacobian is integrated by scipy's solve_ivp, which runs on
    # host NumPy arrays (an adaptive-step flow is no compiled or GPU backend's operation)
    J, Jx, _ = get_backend("reference").jacobians(flow, x, g, inputs=bool(inputs))
    return (J, Jx) if inputs else J


def jacobians(model, x, h0=None, *, backend=None, inputs=True, command=None):
    """Simulate, then the one-step Jacobians J_t = ∂h_t/∂h_{t-1} for t = 1..T.

    J_t = jacobian_at(model, x_t, h_{t-1}) along the simulated trajectory (closed forms in
    the module docstring).

    Parameters
    ----------
    model : dynlab model
    x : (T, d) or (B, T, d) array — inputs ((T,) when d = 1)
    h0 : (D,) or (B, D) array, optional — initial state (zeros)
    backend : "numpy" | "numba" (default) | "cupy"
    inputs : bool — also compute ``jac_x`` (default True)
    command : str, optional — recorded in the attrs

    Returns
    -------
    xarray.Dataset: ``jac`` ((batch,) time, unit, unit_from) = ∂h_t/∂h_{t-1};
    ``jac_x`` ((batch,) time, unit, unit_in) = ∂h_t/∂x_t; ``h``, ``x``, ``h0``, the model's
    parameters and the attrs of docs/design.md, *Data contract*.  A non-finite state raises ``DivergenceError``.

    Example
    -------
    >>> ds = jacobians(make_model("irnn", 2, 1, K=5, seed=0), np.zeros((100, 1)))
    >>> ds.jac.shape     # (100, 2, 2)
    """
    be = get_backend(backend)
    form = _check_model(model).form()
    be.require("jacobians", form)
    with be:
        xa, batched, h0a, H, ds = prepared_states(model, x, h0, be, command=command)
        B, T, d = xa.shape
        D = model.state_size
        hprev = np.concatenate([h0a[:, None, :], H[:, :-1]], axis=1).reshape(B * T, D)
        eta = _eta_rows(form, B * T, np.tile(np.arange(T, dtype=np.int64), B))
        J, Jx, path = be.jacobians(form, xa.reshape(B * T, d), hprev, eta=eta, inputs=bool(inputs))
    lead = ("batch",) if batched else ()
    sel = slice(None) if batched else 0
    import xarray as xr

    ds["jac"] = xr.Variable(lead + ("time", "unit", "unit_from"), J.reshape(B, T, D, D)[sel],
                            {"long_name": "one-step Jacobian ∂h_t/∂h_{t-1}", "units": "1"})
    if inputs:
        ds["jac_x"] = xr.Variable(lead + ("time", "unit", "unit_in"), Jx.reshape(B, T, D, d)[sel],
                                  {"long_name": "input Jacobian ∂h_t/∂x_t", "units": "1"})
    ds.attrs["jacobian_kernel"] = path
    from .._dataset import finish

    return finish(ds, "jacobians")


# ============================================================================ model layer
def prepared_states(model, x, h0, backend, command=None):
    """Validate, simulate; (xa, batched, h0a, H, ds) or a DivergenceError naming the step
    (shared by ``gradient_norms``, ``lyapunov`` and ``jacobians``)."""
    from ..simulation import check_h0, check_input, check_model, run_states, wrap_states

    model = check_model(model)
    xa, batched = check_input(x, model.inputs)
    h0a = check_h0(h0, xa.shape[0], model.state_size)
    B, T, _ = xa.shape
    model.check_steps(T)  # e.g. a per-time η must have T rows
    be = get_backend(backend)
    H, bad, sim_path = run_states(model, xa, h0a, be, stop=True)
    used = "scipy" if sim_path == "scipy" else be.name
    ds = wrap_states(model, xa, h0a, H, batched=batched, backend=used, command=command, path=sim_path)
    first = int(bad.min())
    if first < T:
        raise DivergenceError(step=first + 1, batch=int(np.argmin(bad)), model=model.name,
                              partial=ds.isel(time=slice(0, first)))
    return xa, batched, h0a, H, ds


def jacobian_blocks(model, xa, h0a, H, backend=None):
    """A function (lo, hi) → J (B, hi−lo, n, n) of J_t for t = lo+1 … hi along a simulated
    trajectory (the backend's ``trajectory_jacobians``)."""
    be = get_backend(backend)
    form = model.form()
    return lambda lo, hi: be.trajectory_jacobians(form, xa, h0a, H, lo, hi)


__all__ = ["jacobian_at", "jacobians", "flow_jacobian", "jacobian_path", "previous_states"]

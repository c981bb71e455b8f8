"""Closed-form one-step Jacobians J_t = ∂h_t/∂h_{t-1} (and ∂h_t/∂x_t) for every model.

Two layers, as everywhere in dynlab: ``jacobians`` simulates and wraps J_1..J_T into a
Dataset; ``jacobian_at`` is the lower layer that evaluates the Jacobians at N prepared
points (x_n, h_{n,prev}) — the products, norms and Lyapunov analyses loop over it.

The closed forms (derived from each model's update, see the model docstrings):

* gated cells  h_t = a h_{t-1} + c φ(R h_{t-1} + W x_t + b)   (RNN, FastRNN, Antisymmetric, RIN):
      J = a I + c diag(φ'(z)) R,   Jx = c diag(φ'(z)) W,   z = R h_{t-1} + W x_t + b.
* iRNN (eq. 5), s_k = g_k + σ h_{m-1} (σ = ``sign``), carried through the K inner steps:
      G_0 = ∂g_0/∂h = I (g0 = "previous") or 0 (g0 = "zero"),   Gx_0 = 0,
      G_k  = G_{k-1}  + η_k ( diag(φ'(z_k)) U − α I ) (G_{k-1} + σ I),
      Gx_k = Gx_{k-1} + η_k ( diag(φ'(z_k)) (U Gx_{k-1} + W) − α Gx_{k-1} ),
      z_k = U s_{k-1} + W x_m + b;   J = G_K,  Jx = Gx_K.
* CTRNN, fixed-step Euler / RK4: the exact derivative of the discrete scheme — every stage
  y_i = g + h Σ a_ij k_j carries its tangent Y_i = G + h Σ a_ij K_j with
  K_j = (1/τ)(diag(φ'(U y_j + c)) U Y_j − α Y_j)  (input: + diag(φ') W inside).
* CTRNN, scipy method: the Jacobian of the flow over the interval Δt, from the variational
  equation dΦ/dt = (1/τ)(diag(φ'(U g + c)) U − α I) Φ, Φ(0) = I, integrated together with g
  by ``solve_ivp`` at the model's rtol/atol (``flow_jacobian``).
* GRU, LSTM (PyTorch's equations; the formulas are in ``dynlab.models.gru_lstm``): each row of
  J is a combination of the rows of the gate blocks of W_hh (of W_ih for Jx) with per-unit
  coefficients from the gates; an LSTM's J is on s = [h; c] (2D × 2D).  A stack's J is
  composed from its layers' (block lower triangular, ``Stack.step_jacobian``).  Paths: the
  jitted per-point kernels of ``dynlab.kernels.jac_numba`` (gates from two BLAS products over
  all points first) under numba, the batched form ``gru_xp``/``lstm_xp`` under numpy and cupy;
  ``model.step_jacobian`` (path "step_map") only for map models without kernels.

Backends: ``numpy`` (the reference: the formulas above, vectorised over N with batched
matmuls), ``numba`` (default: @njit loops in ``dynlab.kernels.jac_numba`` for small D, the
NumPy form past ``config.JACOBIAN_VECTORISE_MIN_HIDDEN``), ``cupy`` (the NumPy form on the
``cupy`` namespace; not for a scipy-integrated CTRNN).
"""
from __future__ import annotations

import numpy as np

from .. import config
from .._blas import blas_threads
from ..activations import ACTIVATION_IDS, dphi, phi
from ..backends import namespace, resolve_backend, to_numpy
from ..errors import ConvergenceError, DivergenceError, ParameterError
from ..models import CTRNN, GRU, IRNN, LSTM, Model, Stack
from ..models.ctrnn import FIXED_STEP

IMPLICIT_METHODS = ("Radau", "BDF", "LSODA")


# ============================================================================ validation
def _check_model(model) -> Model:
    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model (see dynlab.make_model), got {type(model).__name__}")
    return model


def _check_points(x, n_cols: int, param: str, N: int | None = None) -> np.ndarray:
    """A (N, n_cols) float64 C-contiguous array with finite entries, or a ParameterError."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(param, f"must be a numeric array ({exc})") from None
    if arr.ndim != 2 or arr.shape[1] != n_cols or (N is not None and arr.shape[0] != N):
        want = f"({'N' if N is None else N}, {n_cols})"
        raise ParameterError(param, f"must have shape {want}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        n, i = np.argwhere(~np.isfinite(arr))[0]
        raise ParameterError(param, f"contains a non-finite value ({arr[n, i]}) at point {n}, entry {i}")
    return np.ascontiguousarray(arr)


def _eta_rows(model: IRNN, N: int, t) -> np.ndarray:
    """η for each point as an (N, K) table; a per-time η is indexed by the 0-based ``t``."""
    eta = np.asarray(model.eta, dtype=np.float64)
    table = model.eta_table(eta.shape[0] if eta.ndim == 2 else 1)
    if table.shape[0] == 1:
        return np.ascontiguousarray(np.broadcast_to(table, (N, model.K)))
    if t is None:
        raise ParameterError("t", f"the model's η varies over {table.shape[0]} time steps; give the 0-based "
                                  "time index of every point")
    ti = _check_t(t, N, table.shape[0])
    return np.ascontiguousarray(table[ti])


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


def jacobian_path(model: Model, n_points: int, backend: str) -> str:
    """Which implementation runs: 'scipy', 'numpy', 'numba_cpu', 'vectorised' (NumPy form under
    the numba backend) or 'cupy'."""
    if isinstance(model, CTRNN) and model.method not in FIXED_STEP:
        if backend == "cupy":
            raise ParameterError("backend", f"cupy has no Jacobian for a CTRNN integrated by scipy "
                                            f"(method={model.method!r}); use backend='numpy' or 'numba', "
                                            "or method='euler'/'rk4'")
        return "scipy"
    if getattr(model, "MAP", False):
        if not _has_jacobian_kernels(model):
            return "step_map"  # the model's closed-form step_jacobian, batched NumPy
        if backend in ("numpy", "cupy"):
            return backend
        layer = model.layers[0] if isinstance(model, Stack) else model
        if not isinstance(layer, (GRU, LSTM)):
            return jacobian_path(layer, n_points, backend)
        return "vectorised" if layer.hidden >= config.JACOBIAN_GATED_VECTORISE_MIN_HIDDEN else "numba_cpu"
    if backend == "numpy":
        return "numpy"
    if backend == "cupy":
        return "cupy"
    D = model.hidden
    least = config.JACOBIAN_IRNN_BLAS_MIN_HIDDEN if isinstance(model, IRNN) else config.JACOBIAN_VECTORISE_MIN_HIDDEN
    if D >= least and n_points * D * D >= config.VECTORISE_MIN_WORK:
        return "vectorised"
    return "numba_cpu"


# ============================================================================ public
@blas_threads("GRADIENT_BLAS_THREADS")
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
    backend = resolve_backend(backend)
    hprev = _check_points(hprev, model.state_size, "hprev")
    N = hprev.shape[0]
    x = _check_points(x, model.inputs, "x", N)
    path = jacobian_path(model, N, backend)
    eta = _eta_rows(model, N, t) if isinstance(model, IRNN) else None
    J, Jx = _dispatch(model, x, hprev, eta, bool(inputs), path, backend)
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
    if not isinstance(model, CTRNN):
        raise ParameterError("model", f"flow_jacobian needs a ctrnn model, got {model.name}")
    g = _check_points(g, model.hidden, "g")
    x = _check_points(x, model.inputs, "x", g.shape[0])
    try:
        interval = float(interval)
    except (TypeError, ValueError):
        raise ParameterError("interval", f"must be a number, got {interval!r}") from None
    if not (np.isfinite(interval) and interval > 0):
        raise ParameterError("interval", f"must be finite and > 0, got {interval}")
    method = model.method if model.method not in FIXED_STEP else "DOP853"
    J, Jx = _ctrnn_flow(model, x, g, interval, method, bool(inputs))
    return (J, Jx) if inputs else J


@blas_threads("GRADIENT_BLAS_THREADS")
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
    backend = resolve_backend(backend)
    xa, batched, h0a, H, ds = prepared_states(model, x, h0, backend, command=command)
    B, T, d = xa.shape
    D = model.state_size
    hprev = np.concatenate([h0a[:, None, :], H[:, :-1]], axis=1).reshape(B * T, D)
    tidx = np.tile(np.arange(T, dtype=np.int64), B)
    J = jacobian_at(model, xa.reshape(B * T, d), hprev, backend=backend, inputs=inputs, t=tidx)
    J, Jx = J if inputs else (J, None)
    lead = ("batch",) if batched else ()
    sel = slice(None) if batched else 0
    import xarray as xr

    ds["jac"] = xr.Variable(lead + ("time", "unit", "unit_from"), J.reshape(B, T, D, D)[sel],
                            {"long_name": "one-step Jacobian ∂h_t/∂h_{t-1}", "units": "1"})
    if inputs:
        ds["jac_x"] = xr.Variable(lead + ("time", "unit", "unit_in"), Jx.reshape(B, T, D, d)[sel],
                                  {"long_name": "input Jacobian ∂h_t/∂x_t", "units": "1"})
    ds.attrs["jacobian_kernel"] = jacobian_path(model, B * T, backend)
    from .._dataset import finish

    return finish(ds, "jacobians")


# ============================================================================ model layer
def previous_states(h0, H, lo: int, hi: int) -> np.ndarray:
    """h_{t−1} for the times t = lo+1 … hi (1-based): H[..., t−2, :], h0 for t = 1.

    h0 (…, D), H (…, T, D) with the same leading axes; returns (…, hi − lo, D)."""
    out = np.empty(H.shape[:-2] + (hi - lo, H.shape[-1]))
    if lo == 0:
        out[..., 0, :] = h0
        out[..., 1:, :] = H[..., :hi - 1, :]
    else:
        out[...] = H[..., lo - 1:hi - 1, :]
    return out


def prepared_states(model, x, h0, backend, command=None):
    """Validate, simulate; (xa, batched, h0a, H, ds) or a DivergenceError naming the step
    (shared by ``gradient_norms``, ``lyapunov`` and ``jacobians``)."""
    from ..simulation import check_h0, check_input, check_model, run_states, wrap_states

    model = check_model(model)
    xa, batched = check_input(x, model.inputs)
    h0a = check_h0(h0, xa.shape[0], model.state_size)
    B, T, _ = xa.shape
    if isinstance(model, IRNN):
        model.eta_table(T)  # a per-time η must have T rows
    H, bad, sim_path = run_states(model, xa, h0a, backend, stop=True)
    used = "scipy" if sim_path == "scipy" else backend
    ds = wrap_states(model, xa, h0a, H, batched=batched, backend=used, command=command, path=sim_path)
    first = int(bad.min())
    if first < T:
        raise DivergenceError(step=first + 1, batch=int(np.argmin(bad)), model=model.name,
                              partial=ds.isel(time=slice(0, first)))
    return xa, batched, h0a, H, ds


def jacobian_blocks(model, xa, h0a, H, backend):
    """A function (lo, hi) → J (B, hi−lo, D, D) of J_t for t = lo+1 … hi, from ``jacobian_at``."""
    B, T, d = xa.shape
    D = model.state_size

    def get(lo, hi):
        n = hi - lo
        hprev = previous_states(h0a, H, lo, hi)
        t = np.tile(np.arange(lo, hi, dtype=np.int64), B)
        J = jacobian_at(model, xa[:, lo:hi].reshape(B * n, d), hprev.reshape(B * n, D), backend=backend, t=t)
        return J.reshape(B, n, D, D)

    return get


# ============================================================================ dispatch
def _dispatch(model, x, hprev, eta, want_x, path, backend):
    act = model.activation
    leak = float(model.leak)
    if path == "scipy":
        return _ctrnn_flow(model, x, hprev, model.dt, model.method, want_x)
    if path == "step_map":
        J = model.step_jacobian(hprev, x, inputs=want_x)
        return J if want_x else (J, None)
    if getattr(model, "MAP", False):
        J, Jx, _ = _map_jacobian(model, x, hprev, want_x, path)
        return to_numpy(J), (to_numpy(Jx) if want_x else None)
    if path == "numba_cpu":
        return _numba_jacobian(model, x, hprev, eta, want_x)
    xp = namespace("cupy" if path == "cupy" else "numpy")
    X, Hp = xp.asarray(x), xp.asarray(hprev)
    Wm, b = xp.asarray(model.W), xp.asarray(model.b)
    if isinstance(model, IRNN):
        J, Jx = irnn_xp(xp.asarray(model.U), Wm, b, xp.asarray(eta), float(model.alpha), model.K,
                        model.g0 == "previous", float(model.sign), act, leak, X, Hp, want_x, xp,
                        jit=path == "vectorised")
    elif isinstance(model, CTRNN):
        J, Jx = ctrnn_fixed_xp(xp.asarray(model.U), Wm, b, float(model.tau), float(model.alpha), float(model.dt),
                               model.substeps, model.method == "rk4", act, leak, X, Hp, want_x, xp)
    else:
        a, gain, R = model.gated_form()
        J, Jx = gated_xp(xp.asarray(R), Wm, b, float(a), float(gain), act, leak, X, Hp, want_x, xp)
    return to_numpy(J), (to_numpy(Jx) if want_x else None)


def _plain(a):
    """A writable C-contiguous float64 array: model arrays are read-only, and numba types a
    read-only array differently, so without this each kernel would compile twice."""
    a = np.asarray(a, dtype=np.float64)
    return a if (a.flags.c_contiguous and a.flags.writeable) else np.array(a, dtype=np.float64, order="C")


def _numba_jacobian(model, x, hprev, eta, want_x):
    """The ``dynlab.kernels.jac_numba`` kernel of ``model``'s family on plain arrays and ids;
    returns (J, Jx or None).

    x (N, d), hprev (N, D) float64 C-contiguous (validated by the caller); eta the (N, K)
    per-point η table for an iRNN (None otherwise).
    """
    from ..kernels import jac_numba

    N, D = hprev.shape
    d = model.inputs
    act = ACTIVATION_IDS[model.activation]
    leak = float(model.leak)
    J = np.empty((N, D, D))
    Jx = np.empty((N, D, d if want_x else 0))
    x, hprev, W, b = _plain(x), _plain(hprev), _plain(model.W), _plain(model.b)
    if isinstance(model, IRNN):
        jac_numba.irnn(_plain(model.U), W, b, _plain(eta), float(model.alpha), model.K, model.g0 == "previous",
                       float(model.sign), act, leak, x, hprev, J, Jx)
    elif isinstance(model, CTRNN):
        jac_numba.ctrnn(_plain(model.U), W, b, float(model.tau), float(model.alpha), float(model.dt),
                        model.substeps, model.method == "rk4", act, leak, x, hprev, J, Jx)
    else:
        a, gain, R = model.gated_form()
        jac_numba.gated(_plain(R), W, b, float(a), float(gain), act, leak, x, hprev, J, Jx)
    return J, (Jx if want_x else None)


# ============================================================================ GRU, LSTM, stacks
def _has_jacobian_kernels(model) -> bool:
    """GRU, LSTM, and stacks of GRU, LSTM or one-line (``gated_form``) layers."""
    if isinstance(model, (GRU, LSTM)):
        return True
    if isinstance(model, Stack):
        return all(isinstance(m, (GRU, LSTM)) or (hasattr(m, "gated_form") and not getattr(m, "MAP", False))
                   for m in model.layers)
    return False


def _map_jacobian(model, x, hprev, want_x, path):
    """(J, Jx or None, s') of a GRU, an LSTM or a stack at N points on ``path`` ('numba_cpu':
    the jitted per-point kernels; 'vectorised'/'numpy'/'cupy': the batched form on NumPy or
    CuPy), s' the next state (the layer above reads it).  A stack's Jacobian is composed from
    its layers' (``Stack.step_jacobian``): block lower triangular,

        ∂s^(ℓ)/∂s = [0 … J_ℓ … 0] + Jx_ℓ · ∂out^(ℓ−1)/∂s,   ∂s^(ℓ)/∂x = Jx_ℓ · ∂out^(ℓ−1)/∂x,

    where ∂out^(ℓ−1)/∂s is the output rows of the layer below (nonzero in the columns of the
    layers up to ℓ − 1 only)."""
    xp = namespace("cupy") if path == "cupy" else np
    if not isinstance(model, Stack):
        return _layer_jacobian(model, x, hprev, want_x, path, xp)
    N = hprev.shape[0]
    n = model.state_size
    o = model.offsets
    J = xp.zeros((N, n, n))
    Jx = xp.zeros((N, n, model.inputs)) if want_x else None
    inp = x
    S = None
    for ell, m in enumerate(model.layers):
        rows = slice(int(o[ell]), int(o[ell + 1]))
        Jl, Jxl, snew = _layer_jacobian(m, inp, hprev[:, rows], want_x or ell > 0, path, xp)
        J[:, rows, rows] = Jl
        if ell == 0:
            if want_x:
                Jx[:, rows] = Jxl
        else:
            below = model.layers[ell - 1].output_slice
            out = slice(int(o[ell - 1]) + below.start, int(o[ell - 1]) + below.stop)
            J[:, rows, :rows.start] = xp.matmul(Jxl, J[:, out, :rows.start])
            if want_x:
                Jx[:, rows] = xp.matmul(Jxl, Jx[:, out])
        inp = xp.ascontiguousarray(snew[:, m.output_slice])
        S = snew if S is None else xp.concatenate([S, snew], axis=1)
    return J, Jx, S


def _layer_jacobian(m, x, s, want_x, path, xp):
    """(J, Jx or None, s') of one GRU, LSTM or one-line layer ``m`` at N points (see above)."""
    leak = float(m.leak)
    if not isinstance(m, (GRU, LSTM)):  # a one-line cell: its own kernel, and s' = a s + c φ(z)
        a, gain, R = m.gated_form()
        if path == "numba_cpu":
            J, Jx = _numba_jacobian(m, x, _plain(s), None, want_x)
        else:
            J, Jx = gated_xp(xp.asarray(R), xp.asarray(m.W), xp.asarray(m.b), float(a), float(gain), m.activation,
                             leak, xp.asarray(x), xp.asarray(s), want_x, xp)
        s = xp.asarray(s)
        z = s @ xp.asarray(R).T + xp.asarray(x) @ xp.asarray(m.W).T + xp.asarray(m.b)
        return J, Jx, a * s + gain * phi(m.activation, z, leak, xp)
    lstm = isinstance(m, LSTM)
    D = m.hidden
    if path == "numba_cpu":
        from ..kernels import jac_numba

        x, s = _plain(x), _plain(s)
        N, S = s.shape
        gi = x @ m.W_ih.T + m.b_ih
        gh = s[:, :D] @ m.W_hh.T + m.b_hh
        J = np.empty((N, S, S))
        Jx = np.empty((N, S, m.inputs if want_x else 0))
        snew = np.empty((N, S))
        (jac_numba.lstm if lstm else jac_numba.gru)(_plain(m.W_ih), _plain(m.W_hh), gi, gh,
                                                      ACTIVATION_IDS[m.activation], leak, s, J, Jx, snew)
        return J, (Jx if want_x else None), snew
    fn = lstm_xp if lstm else gru_xp
    return fn(xp.asarray(m.W_ih), xp.asarray(m.W_hh), xp.asarray(m.b_ih), xp.asarray(m.b_hh), m.activation, leak,
              xp.asarray(x), xp.asarray(s), want_x, xp)


def gru_xp(W_ih, W_hh, b_ih, b_hh, act, leak, x, hprev, want_x, xp=np):
    """PyTorch's GRU at N points (module docstring of ``dynlab.models.gru_lstm``): with
    A = (1 − z) φ'(a_n), q = W_hn h + b_hn, r' = r(1 − r), z' = z(1 − z),

        J = diag(z) + diag(A r) W_hn + diag(A q r') W_hr + diag((h − n) z') W_hz,
        Jx = diag(A) W_in + diag(A q r') W_ir + diag((h − n) z') W_iz.

    Returns (J (N, D, D), Jx (N, D, d) or None, h' (N, D))."""
    D = W_hh.shape[1]
    gi = x @ W_ih.T + b_ih
    gh = hprev @ W_hh.T + b_hh
    r = phi("sigmoid", gi[:, :D] + gh[:, :D], xp=xp)
    z = phi("sigmoid", gi[:, D:2 * D] + gh[:, D:2 * D], xp=xp)
    q = gh[:, 2 * D:]
    a = gi[:, 2 * D:] + r * q
    n = phi(act, a, leak, xp)
    A = (1.0 - z) * dphi(act, a, leak, xp)
    cr = A * q * (r * (1.0 - r))
    cz = (hprev - n) * (z * (1.0 - z))

    def rows(Wm):
        return ((A * r)[:, :, None] if Wm is W_hh else A[:, :, None]) * Wm[None, 2 * D:] \
            + cr[:, :, None] * Wm[None, :D] + cz[:, :, None] * Wm[None, D:2 * D]

    J = rows(W_hh)
    idx = xp.arange(D)
    J[:, idx, idx] += z
    return J, (rows(W_ih) if want_x else None), (1.0 - z) * n + z * hprev


def lstm_xp(W_ih, W_hh, b_ih, b_hh, act, leak, x, hprev, want_x, xp=np):
    """PyTorch's LSTM at N points on s = [h; c] (module docstring of ``dynlab.models.gru_lstm``):

        ∂c'/∂h = diag(c f') W_hf + diag(g i') W_hi + diag(i φ'(a_g)) W_hg,   ∂c'/∂c = diag(f),
        ∂h'/∂h = diag(φ(c') o') W_ho + diag(o φ'(c')) ∂c'/∂h,   ∂h'/∂c = diag(o φ'(c') f),

    and ∂/∂x alike with the W_i· blocks.  Returns (J (N, 2D, 2D), Jx (N, 2D, d) or None, s')."""
    D = W_hh.shape[1]
    N = hprev.shape[0]
    h, c = hprev[:, :D], hprev[:, D:]
    pre = x @ W_ih.T + b_ih + h @ W_hh.T + b_hh
    i = phi("sigmoid", pre[:, :D], xp=xp)
    f = phi("sigmoid", pre[:, D:2 * D], xp=xp)
    ag = pre[:, 2 * D:3 * D]
    g = phi(act, ag, leak, xp)
    o = phi("sigmoid", pre[:, 3 * D:], xp=xp)
    c2 = f * c + i * g
    t = phi(act, c2, leak, xp)
    ci, cf, cg = g * (i * (1.0 - i)), c * (f * (1.0 - f)), i * dphi(act, ag, leak, xp)
    ho, hc = t * (o * (1.0 - o)), o * dphi(act, c2, leak, xp)

    def rows(Wm, out):
        dc = cf[:, :, None] * Wm[None, D:2 * D] + ci[:, :, None] * Wm[None, :D] + cg[:, :, None] * Wm[None, 2 * D:3 * D]
        m = Wm.shape[1]  # the columns of h (J) or of x (Jx)
        out[:, D:2 * D, :m] = dc
        dc *= hc[:, :, None]
        dc += ho[:, :, None] * Wm[None, 3 * D:]
        out[:, :D, :m] = dc
        return out

    J = rows(W_hh, xp.zeros((N, 2 * D, 2 * D)))
    idx = xp.arange(D)
    J[:, D + idx, D + idx] = f
    J[:, idx, D + idx] = hc * f
    Jx = rows(W_ih, xp.empty((N, 2 * D, W_ih.shape[1]))) if want_x else None
    return J, Jx, xp.concatenate([o * t, c2], axis=1)


# ============================================================================ NumPy form
# Written once against the array namespace ``xp`` (NumPy or CuPy); batched over the N points.

def _lmul(U, S, xp):
    """U @ S[n] for every n: U (D, D), S (N, D, m) → (N, D, m).

    NumPy's broadcasting matmul of a shared U against a stack is quick for small D but falls
    far behind BLAS for large D (≈3× at D = 128 on 2 cores); einsum's tensordot path is one
    BLAS product over the whole stack.
    """
    if xp is np and U.shape[0] > 64:
        return np.einsum("ij,njk->nik", U, S, optimize=True)
    return U @ S

def gated_xp(R, W, b, a, gain, act, leak, x, hprev, want_x, xp=np):
    """J = a I + gain·diag(φ'(z)) R,  Jx = gain·diag(φ'(z)) W,  z = R h + W x + b.

    R (D, D), W (D, d), b (D,), x (N, d), hprev (N, D) → J (N, D, D), Jx (N, D, d) or None.
    """
    D = R.shape[0]
    z = hprev @ R.T + x @ W.T + b
    dp = gain * dphi(act, z, leak, xp)                      # (N, D)
    J = dp[:, :, None] * R[None]
    idx = xp.arange(D)
    J[:, idx, idx] += a
    Jx = dp[:, :, None] * W[None] if want_x else None
    return J, Jx


def _irnn_numba(U, c, eta, alpha, K, g0prev, sign, act, leak, hprev, chunk):
    """``irnn_xp``'s product form as one numba call per block of points
    (``jac_numba.irnn_jacobians``), the blocks on ``config.JACOBIAN_THREADS`` threads (None: one
    per CPU this process may use; 1 in a sweep region; at least ``config.JACOBIAN_MIN_POINTS_PER_THREAD`` points
    each), BLAS on one thread in each."""
    from .._blas import in_threads, work_threads
    from ..activations import ACTIVATION_IDS
    from ..kernels import jac_numba

    N, D = hprev.shape
    U = np.ascontiguousarray(U, dtype=np.float64)
    UT = np.ascontiguousarray(U.T)
    c = np.ascontiguousarray(c, dtype=np.float64)
    hprev = np.ascontiguousarray(hprev, dtype=np.float64)
    eta = np.ascontiguousarray(np.broadcast_to(eta, (N, K)), dtype=np.float64)
    J = np.empty((N, D, D))
    n = int(max(1, min(work_threads(config.JACOBIAN_THREADS), N // max(1, config.JACOBIAN_MIN_POINTS_PER_THREAD))))
    edges = np.linspace(0, N, n + 1).astype(int)
    q = max(1, min(chunk, N))
    act_id = ACTIVATION_IDS[act]

    def run(i):
        lo, hi = int(edges[i]), int(edges[i + 1])
        jac_numba.irnn_jacobians(U, UT, c[lo:hi], hprev[lo:hi], eta[lo:hi], float(alpha), int(K), bool(g0prev),
                                 float(sign), act_id, float(leak), J[lo:hi], np.empty(D * q * D),
                                 np.empty(D * q * D), np.empty((q, D)), np.empty((q, D)), np.empty((q, D)),
                                 np.empty((q, D)))

    in_threads(run, n)
    return J


def irnn_xp(U, W, b, eta, alpha, K, g0prev, sign, act, leak, x, hprev, want_x, xp=np,
            chunk: int | None = None, jit: bool = False):
    """iRNN: J = Π (G_0 + σI) − σI with Π = A_K ⋯ A_1, A_k = (1 − η_k α) I + η_k diag(φ'(z_k)) U.

    (From G_k = G_{k-1} + η_k (diag(φ'(z_k)) U − α I)(G_{k-1} + σI): S_k = G_k + σI obeys
    S_k = A_k S_{k-1}; G_0 = 0 or I.)  Jx obeys Gx_k = A_k Gx_{k-1} + η_k diag(φ'(z_k)) W, Gx_0 = 0.
    The products run for a chunk of points at a time with Π stored as (D, n, D), so that every
    inner step is ONE BLAS product U · Π (D × D times D × n·D) plus three in-place passes that
    stay in cache — 2–4× faster than scalar loops from D = 32 up (``config``).

    eta (N, K) per-point step sizes, x (N, d), hprev (N, D) → J (N, D, D), Jx (N, D, d) or None.
    ``jit`` (the numba backend's vectorised path, without Jx): the same product form as one numba
    call per block of points, the blocks on threads (``_irnn_numba``); the NumPy reference and
    CuPy keep the form below.
    """
    N, D = hprev.shape
    d = W.shape[1]
    chunk = chunk or config.JACOBIAN_IRNN_CHUNK
    c = x @ W.T + b
    if jit and xp is np and not want_x:
        return _irnn_numba(U, c, eta, alpha, K, g0prev, sign, act, leak, hprev, chunk), None
    J = xp.empty((N, D, D))
    Jx = xp.empty((N, D, d)) if want_x else None
    eye = xp.eye(D)
    diag = xp.arange(D)
    for lo in range(0, N, chunk):
        hi = min(N, lo + chunk)
        n = hi - lo
        hp, cc, e = hprev[lo:hi], c[lo:hi], eta[lo:hi]
        g = hp.copy() if g0prev else xp.zeros_like(hp)
        P = xp.empty((D, n, D))
        P[...] = eye[:, None, :]                              # Π[i, t, j], Π_0 = I
        Gx = xp.zeros((D, n, d)) if want_x else None
        for k in range(K):
            ek = e[:, k]
            s = g + sign * hp
            z = s @ U.T + cc
            scale = (ek[:, None] * dphi(act, z, leak, xp)).T[:, :, None]   # η_k φ'(z) as (D, n, 1)
            keep = (1.0 - ek * alpha)[None, :, None]
            if want_x:
                t = (U @ Gx.reshape(D, n * d)).reshape(D, n, d)
                t += W[:, None, :]
                t *= scale
                Gx *= keep
                Gx += t
            t = (U @ P.reshape(D, n * D)).reshape(D, n, D)
            t *= scale
            P *= keep
            P += t
            g = g + ek[:, None] * (phi(act, z, leak, xp) - alpha * s)
        Jc = J[lo:hi]
        Jc[...] = P.transpose(1, 0, 2)
        Jc *= (1.0 + sign) if g0prev else sign
        Jc[:, diag, diag] -= sign
        if want_x:
            Jx[lo:hi] = Gx.transpose(1, 0, 2)
    return J, Jx


def ctrnn_fixed_xp(U, W, b, tau, alpha, dt, substeps, rk4, act, leak, x, hprev, want_x, xp=np):
    """Derivative of ``substeps`` Euler or RK4 steps of τ ġ = −α g + φ(U g + c), c = W x + b.

    Each stage value y carries its tangents Y = ∂y/∂h, Yx = ∂y/∂x; the stage slope's are
    F = (diag(φ'(U y + c)) U Y − α Y)/τ and Fx = (diag(φ')(U Yx + W) − α Yx)/τ.
    x (N, d), hprev (N, D) → J (N, D, D), Jx (N, D, d) or None.
    """
    N, D = hprev.shape
    d = W.shape[1]
    c = x @ W.T + b
    hs = dt / substeps

    def f(y, Y, Yx):
        z = y @ U.T + c
        dp = dphi(act, z, leak, xp)[:, :, None]
        fy = (phi(act, z, leak, xp) - alpha * y) / tau
        FY = (dp * _lmul(U, Y, xp) - alpha * Y) / tau
        FX = (dp * (_lmul(U, Yx, xp) + W) - alpha * Yx) / tau if want_x else None
        return fy, FY, FX

    def axpy(a, u, v):  # v + a·u on each of the triple (None stays None)
        return tuple(None if vi is None else vi + a * ui for ui, vi in zip(u, v))

    state = (hprev.copy(), xp.broadcast_to(xp.eye(D), (N, D, D)).copy(),
             xp.zeros((N, D, d)) if want_x else None)
    for _ in range(substeps):
        k1 = f(*state)
        if not rk4:
            state = axpy(hs, k1, state)
            continue
        k2 = f(*axpy(0.5 * hs, k1, state))
        k3 = f(*axpy(0.5 * hs, k2, state))
        k4 = f(*axpy(hs, k3, state))
        incr = tuple(None if a is None else a + 2.0 * b2 + 2.0 * b3 + b4 for a, b2, b3, b4 in zip(k1, k2, k3, k4))
        state = axpy(hs / 6.0, incr, state)
    return state[1], state[2]


# ============================================================================ scipy (variational equation)
def _ctrnn_flow(model, x, g, interval, method, want_x):
    """Integrate [g, Φ, Φx] over [0, interval] with solve_ivp.

    Explicit methods integrate all N points in one call (the error norm then spans all of
    them, as in the simulation's scipy path); implicit ones one point at a time, with the
    block Jacobian (A, A ⊗ I, A ⊗ I), A = (diag(φ') U − α I)/τ, for their Newton iterations
    (the second-derivative coupling of Φ to g is left out: it only slows Newton, never the
    accuracy, which is set by rtol/atol).
    """
    from scipy.integrate import solve_ivp

    N, D = g.shape
    d = model.inputs
    U, W, tau, alpha = model.U, model.W, float(model.tau), float(model.alpha)
    act, leak = model.activation, float(model.leak)
    c_all = x @ W.T + model.b
    nx = D * d if want_x else 0
    width = D + D * D + nx

    def rhs_block(Y, c):  # Y (n, width) → (n, width)
        gg = Y[:, :D]
        Phi = Y[:, D:D + D * D].reshape(-1, D, D)
        z = gg @ U.T + c
        dp = dphi(act, z, leak)[:, :, None]
        out = np.empty_like(Y)
        out[:, :D] = (phi(act, z, leak) - alpha * gg) / tau
        out[:, D:D + D * D] = ((dp * _lmul(U, Phi, np) - alpha * Phi) / tau).reshape(-1, D * D)
        if want_x:
            Px = Y[:, D + D * D:].reshape(-1, D, d)
            out[:, D + D * D:] = ((dp * (_lmul(U, Px, np) + W) - alpha * Px) / tau).reshape(-1, D * d)
        return out

    y0 = np.zeros((N, width))
    y0[:, :D] = g
    y0[:, D:D + D * D] = np.eye(D).ravel()
    J = np.empty((N, D, D))
    Jx = np.empty((N, D, d)) if want_x else None

    def fail(n, sol):
        raise ConvergenceError(f"{model.name}: solve_ivp ({method}) failed on the variational equation "
                               f"at point {n}: {sol.message}")

    with np.errstate(all="ignore"):
        if method not in IMPLICIT_METHODS:
            sol = solve_ivp(lambda _t, y: rhs_block(y.reshape(N, width), c_all).ravel(), (0.0, interval),
                            y0.ravel(), method=method, rtol=model.rtol, atol=model.atol)
            if not sol.success:
                fail(0, sol)
            Y = sol.y[:, -1].reshape(N, width)
            J[:] = Y[:, D:D + D * D].reshape(N, D, D)
            if want_x:
                Jx[:] = Y[:, D + D * D:].reshape(N, D, d)
        else:
            from scipy.linalg import block_diag

            for n in range(N):
                c = c_all[n:n + 1]

                def jac(_t, y, c=c):
                    A = (dphi(act, y[:D] @ U.T + c[0], leak)[:, None] * U - alpha * np.eye(D)) / tau
                    blocks = [A, np.kron(A, np.eye(D))] + ([np.kron(A, np.eye(d))] if want_x else [])
                    return block_diag(*blocks)

                sol = solve_ivp(lambda _t, y, c=c: rhs_block(y[None], c)[0], (0.0, interval), y0[n],
                                method=method, rtol=model.rtol, atol=model.atol, jac=jac)
                if not sol.success:
                    fail(n, sol)
                yn = sol.y[:, -1]
                J[n] = yn[D:D + D * D].reshape(D, D)
                if want_x:
                    Jx[n] = yn[D + D * D:].reshape(D, d)
    return J, Jx


__all__ = ["jacobian_at", "jacobians", "flow_jacobian", "jacobian_path"]

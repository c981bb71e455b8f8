"""Finite-time Lyapunov exponents of a driven recurrent network (Benettin's QR method).

The tangent dynamics δh_t = J_t δh_{t-1} (J_t = ∂h_t/∂h_{t-1}) carry k orthonormal
deviation vectors Q_0 (D × k); each step re-orthonormalises them,

    Q_t R_t = J_t Q_{t-1}   (QR, R_t upper triangular),

and the i-th exponent is the mean growth rate of the i-th direction over the kept steps,

    λ_i = (1/(T − transient)) Σ_{t > transient} ln |R_t[i, i]|      (per step).

Nothing overflows at any horizon (only logs are summed).  With k = D, Σ_i λ_i is the mean of
ln|det J_t| over the kept steps, exactly (|det J_t| = Π_i |R_t[i, i]|).

The starting frame Q_0 is, unless given (``Q0=``), the first k columns of a fixed random
orthogonal matrix (``initial_frame(D, k)``: QR of a seed-0 Gaussian), so that it is in general
position: the directions then converge to the Oseledets directions in descending order.  Over a
finite horizon two nearly equal exponents can still come out swapped, so the results are
*sorted*: λ_1 ≥ λ_2 ≥ … ≥ λ_k, and the columns of the running estimates follow the same order
(column i is the tangent direction whose final estimate is λ_i).  A Q_0 aligned with an
invariant subspace (I for a diagonal map) keeps its directions in that subspace; with k < D it
then measures that subspace's exponents, not the top k.

Two layers: ``lyapunov(model, x, …)`` simulates and runs the backend's ``lyapunov_logr`` (the
closed-form J_t a chunk of steps at a time, fed to its QR steps; the numba backend carries the
tangent vectors of a large iRNN through its K inner steps instead, ``dynlab.backends.numba.flow``);
``TangentQR`` / ``lyapunov_spectrum(J)`` work on J stacks (the backend's ``tangent_qr``).
"""
from __future__ import annotations

import numpy as np

from .._validate import as_int
from ..backends import get_backend
from ..errors import ParameterError
from .gradients import jacobian_stack


def initial_frame(D: int, k: int, seed: int = 0) -> np.ndarray:
    """The first k columns of a random orthogonal D × D matrix (QR of a Gaussian, seeded)."""
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((D, D)))
    return np.ascontiguousarray(q[:, :k] * np.sign(np.diag(r))[:k])


def check_frame(Q0, batch: int, hidden: int, k) -> np.ndarray:
    """The starting frame as (B, D, k): ``Q0`` (D, k) or (B, D, k) with orthonormal columns
    (QᵀQ = I to 1e-8), or ``initial_frame(D, k)`` when None.  ``k`` None means D (or Q0's k)."""
    if Q0 is None:
        k = _check_k(k, hidden)
        return np.broadcast_to(initial_frame(hidden, k), (batch, hidden, k)).copy()
    try:
        Q = np.asarray(Q0, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError("Q0", f"must be a real array ({exc})") from None
    if Q.ndim == 2:
        Q = np.broadcast_to(Q, (batch,) + Q.shape)
    if Q.ndim != 3 or Q.shape[0] != batch or Q.shape[1] != hidden or not 1 <= Q.shape[2] <= hidden:
        raise ParameterError("Q0", f"must have shape (D, k) or (B, D, k) with D={hidden}, B={batch}, "
                                   f"1 ≤ k ≤ D; got {np.shape(Q0)}")
    if k is not None and int(k) != Q.shape[2]:
        raise ParameterError("k", f"is {k} but Q0 has {Q.shape[2]} columns")
    if not np.all(np.isfinite(Q)):
        raise ParameterError("Q0", "contains a non-finite value")
    gram = np.einsum("bdi,bdj->bij", Q, Q)
    err = float(np.abs(gram - np.eye(Q.shape[2])).max())
    if err > 1e-8:
        raise ParameterError("Q0", f"must have orthonormal columns (max |QᵀQ − I| = {err:.3g} > 1e-8)")
    return np.array(Q, dtype=np.float64, order="C")  # a copy: the frame is updated in place


class TangentQR:
    """Benettin's QR on J stacks fed in time order, in chunks; the lower layer (the backend's
    ``tangent_qr`` operation).

    Parameters
    ----------
    batch, hidden, k : int — B, D and the number of exponents (1 ≤ k ≤ D)
    backend : "numpy" | "numba" (default) | a backend
    Q0 : (D, k) or (B, D, k) starting frame, optional (``check_frame``)

    ``feed(J)`` with J (B, n, D, D) returns ln|R_t[i, i]| (B, n, k) for those n steps and
    carries Q on.

    Example
    -------
    >>> qr = TangentQR(1, 2, 2)
    >>> logr = qr.feed(J[None])            # (1, T, 2); λ = logr.mean(axis=1)
    """

    def __init__(self, batch: int, hidden: int, k: int, *, backend=None, Q0=None):
        self.B, self.D, self.k = int(batch), int(hidden), int(k)
        self.backend = get_backend(backend)
        self._steps = self.backend.tangent_qr(self.B, self.D, check_frame(Q0, self.B, self.D, self.k))
        self.path = self._steps.path

    @property
    def Q(self) -> np.ndarray:
        """The current frames (B, D, k)."""
        return self._steps.Q

    def feed(self, J) -> np.ndarray:
        with self.backend:
            return self._steps.feed(J)


def _check_k(k, D: int) -> int:
    if k is None:
        return D
    k = as_int(k, "k", low=1)
    if k > D:
        raise ParameterError("k", f"must be ≤ the hidden size D={D}, got {k}")
    return k


def _check_transient(transient, T: int) -> int:
    transient = as_int(transient, "transient", low=0)
    if transient >= T:
        raise ParameterError("transient", f"must leave at least one step: transient < T={T}, got {transient}")
    return transient


def _summarise(logr: np.ndarray, transient: int):
    """(exponents (B, k) in decreasing order, running means (B, T, k) with their columns in the
    same order, NaN for the discarded steps; the order (B, k) applied to the columns of logr)."""
    B, T, k = logr.shape
    kept = logr[:, transient:]
    with np.errstate(invalid="ignore"):
        running = np.full((B, T, k), np.nan)
        running[:, transient:] = np.cumsum(kept, axis=1) / np.arange(1, T - transient + 1)[None, :, None]
    lam = running[:, -1]
    # decreasing, stable (NaN, from a non-finite R, sorts last); each sequence its own order
    order = np.argsort(np.where(np.isnan(lam), np.inf, -lam), axis=1, kind="stable")
    lam = np.take_along_axis(lam, order, axis=1)
    running = np.take_along_axis(running, order[:, None, :], axis=2)
    return lam, running, order


def lyapunov_spectrum(J, *, k=None, transient=0, backend=None, Q0=None) -> dict:
    """Finite-time Lyapunov exponents of a given Jacobian stack (the array-level layer).

    Q_t R_t = J_t Q_{t-1};  λ_i = mean_{t > transient} ln|R_t[i, i]|  (module docstring).

    Parameters
    ----------
    J : (T, D, D) or (B, T, D, D) array — J[..., t−1, :, :] = ∂h_t/∂h_{t-1}
    k : int, optional — number of exponents (default D, or Q0's k)
    transient : int — steps discarded before averaging (default 0)
    backend : "numpy" | "numba" (default)
    Q0 : (D, k) or (B, D, k) starting frame with orthonormal columns, optional (default
        ``initial_frame(D, k)``, module docstring)

    Returns
    -------
    dict: ``lyapunov`` (…, k) per step, in decreasing order; ``lyapunov_running`` (…, T, k), the
    running mean (NaN for t ≤ transient), columns in the same order; ``log_r`` (…, T, k) the
    ln|R_t[i, i]| in the frame's own column order.

    Example
    -------
    >>> J = np.tile(np.diag([0.5, 0.25]), (1000, 1, 1))
    >>> lyapunov_spectrum(J)["lyapunov"]       # ≈ [ln 0.5, ln 0.25]
    """
    backend = get_backend(backend)
    arr, batched = jacobian_stack(J)
    B, T, D, _ = arr.shape
    Q = check_frame(Q0, B, D, k)
    k = Q.shape[2]
    transient = _check_transient(transient, T)
    logr = TangentQR(B, D, k, backend=backend, Q0=Q).feed(arr)
    lam, running, _ = _summarise(logr, transient)
    res = {"lyapunov": lam, "lyapunov_running": running, "log_r": logr}
    return res if batched else {k_: v[0] for k_, v in res.items()}


def lyapunov(model, x, h0=None, *, k=None, transient=0, backend=None, Q0=None, command=None):
    """Finite-time Lyapunov exponents of ``model`` driven by ``x`` (Benettin's QR method).

    Q_t R_t = J_t Q_{t-1},  λ_i = mean over t > ``transient`` of ln|R_t[i, i]|, with the
    closed-form J_t = ∂h_t/∂h_{t-1} along the simulated trajectory (module docstring).

    Parameters
    ----------
    model : dynlab model
    x : (T, d) or (B, T, d) array ((T,) when d = 1)
    h0 : (D,) or (B, D) array, optional (zeros)
    k : int, optional — the first k ≤ D exponents (default all D, or Q0's k)
    transient : int — initial steps discarded (default 0); must be < T
    backend : "numpy" | "numba" (default) | "cupy" (Jacobians and QR steps on the GPU)
    Q0 : (D, k) or (B, D, k) array with orthonormal columns, optional — the starting frame of
        the k tangent vectors (default: the first k columns of a seed-0 random orthogonal
        matrix, ``initial_frame(D, k)``; module docstring)
    command : str, optional — recorded in the attrs

    Returns
    -------
    xarray.Dataset (``attrs["result"] = "lyapunov"``): ``lyapunov`` ((batch,) exponent), per
    step, sorted λ_1 ≥ … ≥ λ_k; ``lyapunov_running`` ((batch,) time, exponent), the mean over the
    kept steps up to t (NaN for t ≤ transient), columns in the same order, to judge convergence;
    for a CTRNN also ``lyapunov_rate`` = λ / dt per unit of time; plus ``h``, ``x``, ``h0``, the
    parameters and the attrs (``transient``, ``k``, ``lyapunov_method`` naming the frame).

    Example
    -------
    >>> m = make_model("rnn", hidden=2, inputs=1, seed=0)
    >>> float(lyapunov(m, random_walk(2000, 1, seed=0), transient=100).lyapunov[0])
    """
    import xarray as xr

    from .._dataset import base_attrs, finish
    from ..simulation import check_input, check_model
    from .jacobians import prepared_states

    be = get_backend(backend)
    model = check_model(model)
    xa, _ = check_input(x, model.inputs)
    B, T, _ = xa.shape
    D = model.state_size
    from .._resources import check_gradients
    check_gradients(model, B, T, lyapunov=True)  # before simulating: refuses what cannot fit or finish
    be.require("lyapunov_logr", model.form())  # after: an absurd K would build an absurd η table
    Q = check_frame(Q0, B, D, k)
    k = Q.shape[2]
    transient = _check_transient(transient, T)
    with be:
        xa, batched, h0a, H, ds = prepared_states(model, x, h0, be)
        logr, kernel = be.lyapunov_logr(model.form(), xa, h0a, H, Q)
    lam, running, _ = _summarise(logr, transient)

    lead = ("batch",) if batched else ()
    sel = slice(None) if batched else 0
    ds = ds.assign_coords(exponent=("exponent", np.arange(1, k + 1), {"long_name": "exponent index i", "units": "1"}))
    ds["lyapunov"] = xr.Variable(lead + ("exponent",), lam[sel],
                                 {"long_name": "finite-time Lyapunov exponent λ_i", "units": "1/step"})
    ds["lyapunov_running"] = xr.Variable(lead + ("time", "exponent"), running[sel],
                                         {"long_name": "running mean of ln|R_t[i,i]| (λ_i up to t)",
                                          "units": "1/step"})
    if model.time_step is not None:
        ds["lyapunov_rate"] = xr.Variable(lead + ("exponent",), lam[sel] / model.time_step,
                                          {"long_name": "Lyapunov exponent per unit time λ_i/Δt",
                                           "units": "1/time"})
    ds.attrs.update(base_attrs(be.name, command))
    frame = "random orthogonal Q_0 (seed 0)" if Q0 is None else "Q_0 given by the caller"
    ds.attrs.update({"transient": transient, "k": k, "lyapunov_kernel": kernel,
                     "lyapunov_method": f"Benettin QR re-orthonormalisation, {frame}; exponents sorted "
                                        f"in decreasing order"})
    return finish(ds, "lyapunov")


__all__ = ["lyapunov", "lyapunov_spectrum", "TangentQR", "initial_frame"]

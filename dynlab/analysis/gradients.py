"""Gradient flow through time: ‖∂h_T/∂h_t‖₂ for every t, in one backward pass.

By the chain rule the product of one-step Jacobians J_t = ∂h_t/∂h_{t-1},

    P_t = ∂h_T/∂h_t = J_T J_{T-1} ⋯ J_{t+1},      P_T = I,   P_t = P_{t+1} J_{t+1},

is built for every t = T … 1 in ONE backward pass (never T separate products).  To stay
finite at any horizon, the running product is kept Frobenius-normalised, P_t = e^{ℓ_t} P̃_t
with ‖P̃_t‖_F = 1, and its log scale ℓ_t accumulated; then ln‖P_t‖₂ = ℓ_t + ln‖P̃_t‖₂ is finite
even where ‖P_t‖₂ itself under- or overflows float64.  With a loss gradient g = ∂L/∂h_T,
∂L/∂h_t = g P_t (a row vector), computed from the same products.

Two layers (docs/design.md, *Architecture*):

* ``gradient_norms(model, x, …)`` simulates, evaluates the closed-form J_t
  (``dynlab.analysis.jacobians.jacobian_at``) a chunk of time steps at a time, runs the backward
  pass and wraps a Dataset;
* ``BackwardNorms`` / ``jacobian_norms(J)`` work on J stacks alone, for sweeps and for code
  that has its own Jacobians.

The backward pass is a backend operation (``dynlab.backends``: ``backward_norms``,
``gradient_flow``): the reference takes every σ₁ by LAPACK's SVD; the numba backend certifies
each σ₁ to relative ``config.NORM_RTOL`` by power iteration (with a Gram-matrix fallback) and,
for the curve alone of an iRNN, pulls the rows of P_t back through the K inner Euler steps
without forming any J_t (``dynlab.backends.numba.flow``).  The method is recorded in the
Dataset (``norm_method``, ``norm_rtol``, ``gradient_kernel``).

Memory: the J_t are evaluated for blocks of time steps (≤ ``config.JACOBIAN_CHUNK_ENTRIES``
float64 entries per block), from the end backwards, so T = 10⁵ needs O(T·D) memory for the
states, not O(T·D²).
"""
from __future__ import annotations


import numpy as np

from .._progress import progress
from ..backends import get_backend
from ..backends.base import chunk_steps
from ..errors import ParameterError
from .jacobians import prepared_states


# ============================================================================ lower layer
def jacobian_stack(J):
    """A (T, D, D) or (B, T, D, D) Jacobian stack as float64 (B, T, D, D) and whether it was
    batched; a ParameterError on ``J`` for any other shape."""
    arr = np.asarray(J, dtype=np.float64)
    if arr.ndim not in (3, 4) or arr.shape[-1] != arr.shape[-2]:
        raise ParameterError("J", f"must have shape (T, D, D) or (B, T, D, D), got {arr.shape}")
    batched = arr.ndim == 4
    return (arr if batched else arr[None]), batched


def _log(v):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(v)


class BackwardNorms:
    """The backward pass on J stacks, fed in chunks from the end of the sequence backwards.

    P_T = I; for each fed chunk of times t_lo … t_hi (J given in ascending time order) it
    reports, for every t in the chunk, ln‖P_t‖₂ (P_t = ∂h_T/∂h_t), ‖J_t‖₂ and, with a
    cotangent, ln‖g P_t‖₂; then it carries P_{t_lo−1} = P_{t_lo} J_{t_lo} on to the next chunk.
    The backend's ``backward_norms`` operation (module docstring).

    Parameters
    ----------
    batch, hidden : int — B and D
    backend : "numpy" | "numba" (default) | a backend
    dL_dhT : (B, D) array, optional — the cotangent g = ∂L/∂h_T of each sequence
    step_norms : bool — also ‖J_t‖₂ for every t (default); False skips those T norms

    Example
    -------
    >>> acc = BackwardNorms(1, 2, backend="numba")
    >>> out = acc.feed(J[None, 500:])      # times 501..T first,
    >>> out2 = acc.feed(J[None, :500])     # then 1..500
    """

    def __init__(self, batch: int, hidden: int, *, backend=None, dL_dhT=None, step_norms: bool = True):
        self.backend = get_backend(backend)
        self._pass = self.backend.backward_norms(int(batch), int(hidden), dL_dhT=dL_dhT, step_norms=step_norms)
        self.path = self._pass.path

    def feed(self, J) -> dict:
        """Process J (B, n, D, D) for times t_lo … t_hi; returns per-time arrays (B, n):
        ``log_jac_norm`` ln‖∂h_T/∂h_t‖₂, ``step_norm`` ‖J_t‖₂ (only with ``step_norms``) and,
        with a cotangent, ``log_dL_dh_norm`` ln‖∂L/∂h_t‖₂."""
        with self.backend:
            return self._pass.feed(J)


def log_ratio(log1, logT, T: int):
    """ln(‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T−1)‖) = log1 − logT, with the limit −∞ where ∂h_T/∂h_1 = 0.

    ∂h_T/∂h_1 = J_T ⋯ J_2 contains ∂h_T/∂h_(T−1) = J_T, so the denominator vanishes only with the
    numerator; the quotient 0/0 is then defined by its limit along U → εU, ε → 0: the numerator
    is O(ε^(T−1)), the denominator O(ε), so the ratio → 0 (ln → −∞) for T > 2.  (For T = 2 the
    two are the same matrix and the ratio is 1.)"""
    log1 = np.asarray(log1, dtype=float)
    logT = np.asarray(logT, dtype=float)
    if T == 2:
        return np.zeros(np.broadcast(log1, logT).shape)
    with np.errstate(invalid="ignore"):
        lr = log1 - logT
    return np.where(np.isneginf(log1) & np.isneginf(logT), -np.inf, lr)


def _finish(out: dict, B: int, T: int) -> dict:
    """Derived quantities from the per-time logs: norms, the ratio, ∂L/∂h_1."""
    log_jac = out["log_jac_norm"]
    with np.errstate(over="ignore", invalid="ignore"):
        res = {"log_jac_norm": log_jac, "jac_norm": np.exp(log_jac),
               "ratio": np.exp(log_ratio(log_jac[:, 0], log_jac[:, T - 2], T))}
        if "step_norm" in out:
            res["step_norm"] = out["step_norm"]
        if "log_dL_dh_norm" in out:
            res["log_dL_dh_norm"] = out["log_dL_dh_norm"]
            res["dL_dh_norm"] = np.exp(out["log_dL_dh_norm"])
            res["dL_dh1_norm"] = res["dL_dh_norm"][:, 0]
    return res


def jacobian_norms(J, *, dL_dhT=None, backend=None) -> dict:
    """Norms of the backward products of a given Jacobian stack (the array-level layer).

    P_t = J_T ⋯ J_{t+1} (P_T = I) for t = 1..T in one backward pass; see the module docstring
    for the scaling and the 2-norm methods.

    Parameters
    ----------
    J : (T, D, D) or (B, T, D, D) array — J[..., t−1, :, :] = ∂h_t/∂h_{t-1}, T ≥ 2
    dL_dhT : (D,) or (B, D) array, optional — ∂L/∂h_T
    backend : "numpy" | "numba" (default)

    Returns
    -------
    dict of NumPy arrays with a leading (B,) axis only when J has one:
    ``jac_norm``, ``log_jac_norm``, ``step_norm`` (…, T); ``ratio`` (…) =
    ‖∂h_T/∂h_1‖₂/‖∂h_T/∂h_{T−1}‖₂; with ``dL_dhT`` also ``dL_dh_norm``, ``log_dL_dh_norm``
    (…, T) and ``dL_dh1_norm`` (…).

    Example
    -------
    >>> J = np.tile(0.9 * np.eye(2), (50, 1, 1))
    >>> jacobian_norms(J)["jac_norm"][0]         # 0.9**49
    """
    be = get_backend(backend)
    arr, batched = jacobian_stack(J)
    B, T, D, _ = arr.shape
    if T < 2:
        raise ParameterError("J", f"needs at least 2 time steps for ∂h_T/∂h_(T-1), got {T}")
    g = _check_cotangent(dL_dhT, B, D, batched)
    acc = BackwardNorms(B, D, backend=be, dL_dhT=g)
    out = _run_chunks(acc, lambda lo, hi: arr[:, lo:hi], B, D, T)
    res = _finish(out, B, T)
    return res if batched else {k: v[0] for k, v in res.items()}


def _run_chunks(acc: BackwardNorms, get_J, B: int, D: int, T: int) -> dict:
    """Feed J for blocks of times from the end backwards; stitch the per-time outputs."""
    n = chunk_steps(B, D, T)
    out = {}
    hi = T
    while hi > 0:
        lo = max(0, hi - n)
        part = acc.feed(get_J(lo, hi))
        for k, v in part.items():
            out.setdefault(k, np.empty((B, T)))[:, lo:hi] = v
        hi = lo
        progress("gradient flow (steps)", T - lo, T)
    return out


def _check_flag(value, name: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ParameterError(name, f"must be True or False, got {value!r}")


def _check_cotangent(dL_dhT, B: int, D: int, batched: bool):
    if dL_dhT is None:
        return None
    try:
        g = np.asarray(dL_dhT, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError("dL_dhT", f"must be a numeric array ({exc})") from None
    if g.ndim == 1 and g.shape == (D,):
        g = np.broadcast_to(g, (B, D))
    if g.shape != (B, D):
        want = f"({D},) or ({B}, {D})" if batched else f"({D},)"
        raise ParameterError("dL_dhT", f"must have shape {want}, got {np.shape(dL_dhT)}")
    if not np.all(np.isfinite(g)):
        raise ParameterError("dL_dhT", "contains a non-finite value")
    return np.ascontiguousarray(g)


def gradient_norms(model, x, h0=None, *, backend=None, dL_dhT=None, step_norms=True, command=None):
    """‖∂h_T/∂h_t‖₂ for every t = 1..T, the step norms and the iRNN paper's ratio, as a Dataset.

    P_t = ∂h_T/∂h_t = J_T ⋯ J_{t+1}, J_t = ∂h_t/∂h_{t-1} (closed form, ``jacobian_at``), all
    t in one backward pass P_t = P_{t+1} J_{t+1} from P_T = I (module docstring: scaling,
    2-norm methods and their accuracy, memory).

    Parameters
    ----------
    model : dynlab model
    x : (T, d) or (B, T, d) array, T ≥ 2 ((T,) when d = 1)
    h0 : (D,) or (B, D) array, optional (zeros)
    backend : "numpy" | "numba" (default) | "cupy" (Jacobians, products and norms on the GPU)
    dL_dhT : (D,) or (B, D) array, optional — a loss gradient ∂L/∂h_T; adds ‖∂L/∂h_t‖
    step_norms : bool — also ‖∂h_t/∂h_{t-1}‖₂ for every t (default).  False leaves
        ``step_norm`` out and, for an iRNN with D > ``config.GRADIENT_NUMBA_MAX_HIDDEN`` under
        the numba backend, runs the curve in reverse mode without forming any J_t
        (``irnn_reverse_norms``: K products per step instead of K + 1, parallel over row
        blocks; ≈ 3× faster at D = 128, K = 5, BENCHMARKS.md ``gradnorm``)
    command : str, optional — recorded in the attrs

    Returns
    -------
    xarray.Dataset (leading ``batch`` only for a batched x):
    ``jac_norm`` ((batch,) time) ‖∂h_T/∂h_t‖₂ (t = T gives 1), ``log_jac_norm`` its natural
    log (finite where jac_norm under/overflows), ``step_norm`` ((batch,) time) ‖∂h_t/∂h_{t-1}‖₂,
    ``ratio`` ((batch,)) ‖∂h_T/∂h_1‖₂/‖∂h_T/∂h_{T−1}‖₂ (iRNN paper Fig. 3b); with ``dL_dhT``:
    ``dL_dhT``, ``dL_dh_norm`` ((batch,) time) ‖∂L/∂h_t‖₂ and ``dL_dh1_norm`` ((batch,)); plus
    ``h``, ``x``, ``h0``, the parameters and the attrs of docs/design.md, *Data contract* (``norm_method``,
    ``norm_rtol``, ``gradient_kernel``).  Raises ParameterError naming ``x`` when T < 2,
    DivergenceError when the state becomes non-finite.

    Example
    -------
    >>> m = make_model("irnn", hidden=2, inputs=1, K=5, eta=0.5, seed=0)
    >>> g = gradient_norms(m, random_walk(steps=1000, inputs=1, variance=10.0, seed=0))
    >>> float(g.ratio)
    """
    import xarray as xr

    from .._dataset import base_attrs, finish

    be = get_backend(backend)
    from ..simulation import check_input, check_model
    model = check_model(model)
    xa, batched = check_input(x, model.inputs)
    B, T, _ = xa.shape
    if T < 2:
        raise ParameterError("x", f"needs at least 2 time steps (T ≥ 2) for ∂h_T/∂h_(T-1), got T={T}")
    D = model.state_size
    from .._resources import check_gradients
    check_gradients(model, B, T)  # before simulating: refuses what cannot fit or finish
    be.require("gradient_flow", model.form())  # after: an absurd K would build an absurd η table
    g = _check_cotangent(dL_dhT, B, D, batched)
    step_norms = _check_flag(step_norms, "step_norms")
    with be:
        xa, batched, h0a, H, ds = prepared_states(model, x, h0, be)
        flow, kernel = be.gradient_flow(model.form(), xa, h0a, H, dL_dhT=g, step_norms=step_norms)
    out = _finish(flow, B, T)
    method, rtol = be.norm_method

    lead = ("batch",) if batched else ()
    sel = slice(None) if batched else 0
    ds["jac_norm"] = xr.Variable(lead + ("time",), out["jac_norm"][sel],
                                 {"long_name": "‖∂h_T/∂h_t‖₂", "units": "1"})
    ds["log_jac_norm"] = xr.Variable(lead + ("time",), out["log_jac_norm"][sel],
                                     {"long_name": "ln ‖∂h_T/∂h_t‖₂", "units": "1"})
    if step_norms:
        ds["step_norm"] = xr.Variable(lead + ("time",), out["step_norm"][sel],
                                      {"long_name": "‖∂h_t/∂h_(t-1)‖₂", "units": "1"})
    ds["ratio"] = xr.Variable(lead, out["ratio"][sel],
                              {"long_name": "‖∂h_T/∂h_1‖₂ / ‖∂h_T/∂h_(T-1)‖₂", "units": "1"})
    if g is not None:
        ds["dL_dhT"] = xr.Variable(lead + ("unit",), g[sel], {"long_name": "loss gradient ∂L/∂h_T", "units": "1"})
        ds["dL_dh_norm"] = xr.Variable(lead + ("time",), out["dL_dh_norm"][sel],
                                       {"long_name": "‖∂L/∂h_t‖₂", "units": "1"})
        ds["dL_dh1_norm"] = xr.Variable(lead, out["dL_dh1_norm"][sel], {"long_name": "‖∂L/∂h_1‖₂", "units": "1"})
    ds.attrs.update(base_attrs(be.name, command))
    ds.attrs["norm_method"] = method
    ds.attrs["norm_rtol"] = float(rtol)
    ds.attrs["gradient_kernel"] = kernel
    ds.attrs["step_norms"] = int(step_norms)
    ds.attrs["steps"] = T
    return finish(ds, "gradient_norms")


__all__ = ["gradient_norms", "jacobian_norms", "BackwardNorms", "jacobian_stack", "log_ratio"]

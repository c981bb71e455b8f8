"""Equilibria and implicit derivatives of implicit recurrent networks (Sanokowski 2022).

Every network — one layer, or two with feedback — is solved as ONE fixed point of its stacked
state (``Implicit.stacked``)::

    Z = f(A Z + c),      G(Z) = Z − f(A Z + c) = 0,      ∂G/∂Z = I − D A,   D = diag f'(A Z + c)

batched over N inputs as rows (Z is (N, U), c is (N, U), U = n + n2).  The residual of a point
is ‖G(Z)‖∞.

Solvers (``method``)
--------------------
rk4           the paper's method (§3.4): fixed-step classical RK4 on dZ/dt = f(A Z + c) − Z from
              Z = 0, ``steps`` steps of size ``dt`` (30 × 1.0 by default); no tolerance loop.
fixed-point   Picard iteration Z ← f(A Z + c) (a contraction when ‖D A‖ < 1).
anderson      Picard accelerated by Anderson mixing of depth 5 (type II, Walker & Ni 2011),
              a point falling back to a plain Picard step whenever mixing does not lower its
              residual.
newton        Newton's method with the analytic Jacobian I − D A and a backtracking line
              search on ‖G‖₂ (Armijo, halving), per point.
auto          (default) Picard for every point while its residual shrinks by at least 0.9 per
              iteration; the points it does not bring to ``tol`` go to Newton — from the last
              Picard iterate where Picard still contracted (slowly), from the paper's RK4 flow
              from 0 where it did not (so that Newton lands on the equilibrium the flow from 0
              selects).  Points where Newton stalls (a flow that lingers near a vanished
              equilibrium — a fold's "ghost" — is a local minimum of ‖G‖, not a root) get a
              longer flow, Newton from 64 seeded random starts, a much longer flow, and
              finally scipy's hybrid method (``_rescue``).
scipy         ``scipy.optimize.root`` (hybr, analytic Jacobian), one point at a time: the
              independent reference.
solve_ivp     ``scipy.integrate.solve_ivp`` (RK45, rtol 1e-8, atol 1e-10) from 0 up to
              t = ``t_max``, one point at a time — how the paper computes its references.

Implicit derivatives (paper eqs. 4–6, appendix B), by the implicit function theorem on G::

    ∂Z/∂θ = (I − D A)⁻¹ D ∂(A Z + c)/∂θ        (forward form, ``implicit_jacobian``)
    λ = (I − D A)⁻ᵀ δ_Z,   ∂L/∂A = (D λ) Zᵀ,  ∂L/∂c = D λ        (reverse form, ``implicit_vjp``)

always through linear solves, never an explicit inverse.  The semi-gradient (§3.3) treats the
recurrent inputs of every layer as constants: λ = (I − D A_ff)⁻ᵀ δ_Z with A_ff the
feed-forward block Q2 only (λ = δ_Z for one layer), i.e. the gradient of one feed-forward
pass evaluated at the equilibrium.
"""
from __future__ import annotations

import numpy as np

from ..activations import dphi
from ..backends import get_backend
#: integer codes of the per-point ``solver`` variable
SOLVER_CODES = {"rk4": 0, "fixed-point": 1, "anderson": 2, "newton": 3, "scipy": 4, "solve_ivp": 5}
from ..errors import ParameterError
from ..models import Model
from ..models.implicit import Implicit

METHODS = ("auto", "anderson", "fixed-point", "newton", "rk4", "scipy", "solve_ivp")


# ============================================================================ plain-array kernels
def _take(idx, Zn, rn, cn, Z, res, conv, code, which):
    better = rn < res[idx]
    pick = idx[better]
    Z[pick], res[pick], conv[pick] = Zn[better], rn[better], cn[better]
    code[pick] = SOLVER_CODES[which]


def _rescue(be, A, C, act, leak, tol, steps, dt, Z, res, conv, code, left):
    """Fallbacks for the points ``left`` that Picard and Newton did not solve (see solve_stacked),
    each a method of the backend's ``implicit_solve``."""
    def run(method, Cs, Z0, **kw):
        return be.implicit_solve(A, Cs, act, leak, method=method, tol=tol, Z0=Z0, dt=dt, **kw)

    stuck = left[~conv[left]]
    if stuck.size:
        longer = run("rk4", C[stuck], Z[stuck], steps=10 * int(steps))[0]
        _take(stuck, *_pick3(run("newton", C[stuck], longer)), Z, res, conv, code, "newton")
        stuck = stuck[~conv[stuck]]
    if stuck.size:
        lo, hi = (0.0, 1.0) if act == "sigmoid" else (-1.0, 1.0)
        starts = np.random.default_rng(12345).uniform(lo, hi, (64, stuck.size, C.shape[1]))
        Cs = np.broadcast_to(C[stuck], starts.shape).reshape(-1, C.shape[1])
        Zn, rn, _, cn, _ = run("newton", Cs, starts.reshape(-1, C.shape[1]))
        rn = rn.reshape(64, stuck.size)
        best = np.argmin(rn, axis=0)
        cols = np.arange(stuck.size)
        Zb = Zn.reshape(64, stuck.size, -1)[best, cols]
        _take(stuck, Zb, rn[best, cols], rn[best, cols] <= tol, Z, res, conv, code, "newton")
        stuck = stuck[~conv[stuck]]
    if stuck.size:
        longer = run("rk4", C[stuck], Z[stuck], steps=100 * int(steps))[0]
        _take(stuck, *_pick3(run("newton", C[stuck], longer)), Z, res, conv, code, "newton")
        stuck = stuck[~conv[stuck]]
        if stuck.size:
            _take(stuck, *_pick3(run("scipy", C[stuck], Z[stuck])), Z, res, conv, code, "scipy")


def _pick3(out):
    Z, res, _, conv = out[:4]
    return Z, res, conv


def solve_stacked(A, C, act, leak=0.01, *, method="auto", tol=1e-12, max_iter=None, Z0=None,
                  steps=30, dt=1.0, backend=None):
    """The backend's ``implicit_solve`` for plain arrays; returns (Z, residual, iterations,
    converged, solver).  After ``auto``, ``_rescue`` for the points it left."""
    be = get_backend(backend)
    with be:
        Z, res, its, conv, code = be.implicit_solve(A, C, act, leak, method=method, tol=tol, max_iter=max_iter,
                                                    Z0=Z0, steps=steps, dt=dt)
        left = np.nonzero(~conv)[0]
        if method == "auto" and left.size:
            # Newton can stall in a local minimum of ‖G‖ far from a root: where the flow from 0
            # lingers near an equilibrium that vanished in a fold (its "ghost"; met in training).
            # Fallbacks, each for the points still left: (1) a longer flow, then Newton; (2) Newton
            # from 64 seeded random starts in f's range at once, keeping the best; (3) a much
            # longer flow, then Newton and scipy's hybrid method.
            _rescue(be, A, C, act, leak, tol, steps, dt, Z, res, conv, code, left)
    return Z, res, its, conv, code


# ============================================================================ public: equilibria
def _check_model(model):
    if not (isinstance(model, Model) and model.form().kind == "implicit"):
        raise ParameterError("model", f"needs an implicit model, got {getattr(model, 'name', type(model).__name__)}")


def _check_X(model, X, param="X"):
    Xa = np.asarray(X, dtype=np.float64) if not isinstance(X, np.ndarray) or X.dtype != np.float64 else X
    single = Xa.ndim == 1
    Xa = np.atleast_2d(Xa)
    if Xa.ndim != 2 or Xa.shape[1] != model.inputs:
        raise ParameterError(param, f"must have shape ({model.inputs},) or (N, {model.inputs}), got {np.shape(X)}")
    if not np.all(np.isfinite(Xa)):
        raise ParameterError(param, "must be finite")
    return Xa, single


def solve(model: Implicit, X, *, method: str = "auto", tol: float = 1e-12, max_iter: int | None = None,
          Z0=None, steps: int = 30, dt: float = 1.0, backend=None):
    """The stacked equilibrium Z (N, U) for row inputs X (N, m), as plain arrays.

    Returns (Z, residual, iterations, converged, solver) — the array layer under
    ``implicit_equilibrium``.
    """
    _check_model(model)
    if method not in METHODS:
        raise ParameterError("method", f"must be one of {', '.join(METHODS)}, got {method!r}")
    if not (np.isfinite(tol) and tol > 0):
        raise ParameterError("tol", f"must be a positive number, got {tol}")
    Xa, _ = _check_X(model, X)
    if Z0 is not None:
        Z0 = np.broadcast_to(np.asarray(Z0, dtype=np.float64), (Xa.shape[0], model.units))
    A, _ = model.stacked()
    C = model.drive(Xa)
    return solve_stacked(A, C, model.activation, model.leak, method=method, tol=tol, max_iter=max_iter,
                         Z0=Z0, steps=steps, dt=dt, backend=backend)


def implicit_equilibrium(model: Implicit, X, *, method: str = "auto", tol: float = 1e-12,
                         max_iter: int | None = None, steps: int = 30, dt: float = 1.0, backend=None,
                         command: str | None = None):
    """Equilibria Y = f(W Y + Q X + T) (and the two-layer joint fixed point) for inputs X, as a Dataset.

    Parameters
    ----------
    model : an ``implicit`` model (``make_model("implicit", hidden=n, inputs=m[, hidden2=n2])``)
    X : (m,) one input or (N, m) inputs as rows
    method : "auto" (default), "anderson", "fixed-point", "newton", "rk4" (the paper's 30 steps
        of RK4 from 0; ``steps``, ``dt``), "scipy" (root, reference) or "solve_ivp" (reference)
    tol : the max-abs residual ‖Z − f(A Z + c)‖∞ a point must reach to count as converged
    backend : "numpy" | "numba" (default) | "cupy": where the ``auto`` method's solver runs

    Returns
    -------
    xarray.Dataset with ``h_eq`` ([batch,] unit_z): the stacked equilibrium Z = [Y1; Y2] with a
    ``layer`` coordinate (1 or 2) on ``unit_z``; ``Y`` ([batch,] unit_y): the network's output (all
    of Y for one layer, Y2 for two); ``residual``, ``iterations``, ``converged`` and ``solver``
    ([batch]); the input ``x`` and the model's parameters.  Non-convergence is reported in
    ``converged`` with the residual reached, never hidden.

    Example
    -------
    >>> m = make_model("implicit", hidden=64, inputs=16, seed=0)
    >>> eq = implicit_equilibrium(m, np.random.default_rng(0).standard_normal((1000, 16)))
    """
    import xarray as xr

    from .._dataset import base_attrs, finish, model_attrs, model_variables

    Xa, single = _check_X(model, X)
    be = get_backend(backend)
    Z, res, its, conv, code = solve(model, Xa, method=method, tol=tol, max_iter=max_iter, steps=steps, dt=dt,
                                    backend=be)
    lead = () if single else ("batch",)
    sel = 0 if single else slice(None)
    out = model.outputs
    layer = np.r_[np.ones(model.hidden, dtype=np.int64), np.full(model.hidden2, 2, dtype=np.int64)]
    ds = xr.Dataset(
        {
            "h_eq": xr.Variable(lead + ("unit_z",), Z[sel], {"long_name": "equilibrium Z = [Y1; Y2]", "units": "1"}),
            "Y": xr.Variable(lead + ("unit_y",), Z[..., out][sel], {"long_name": "network output Y", "units": "1"}),
            "residual": xr.Variable(lead, res[sel], {"long_name": "max-abs residual ‖Z − f(A Z + c)‖∞", "units": "1"}),
            "iterations": xr.Variable(lead, its[sel], {"long_name": "iterations", "units": "1"}),
            "converged": xr.Variable(lead, conv[sel].astype(np.int8), {"long_name": f"residual ≤ {tol:g}", "units": "1"}),
            "solver": xr.Variable(lead, code[sel], {
                "long_name": "solver that produced the point", "units": "1",
                "flag_values": list(SOLVER_CODES.values()), "flag_meanings": " ".join(SOLVER_CODES)}),
            "x": xr.Variable(lead + ("unit_in",), Xa[sel], {"long_name": "input X", "units": "1"}),
            **model_variables(model),
        },
        coords={"layer": ("unit_z", layer, {"long_name": "layer of the unit", "units": "1"})},
        attrs={**model_attrs(model), **base_attrs(be.name, command), "method": method, "tol": tol,
               "hidden2": model.hidden2, "layers": model.layers},
    )
    return finish(ds, "implicit_equilibrium")


# ============================================================================ implicit derivatives
def _lhs(model, Z, X, mode):
    """(A, D, M) with M = I − D A (exact) or I − D A_ff (semi) per point, (N, U, U)."""
    A, A_ff = model.stacked()
    zt = Z @ A.T + model.drive(X)
    D = dphi(model.activation, zt, model.leak)
    B = A if mode == "exact" else A_ff
    return A, D, np.eye(A.shape[0])[None] - D[:, :, None] * B[None]


def _check_mode(mode):
    if mode not in ("exact", "semi"):
        raise ParameterError("gradient", f"must be 'exact' or 'semi', got {mode!r}")


def _grads_from(model, X, Z, P):
    """Parameter gradients from P = D λ (N, U) rows: ∂L/∂A = Σ P Zᵀ, ∂L/∂c = P."""
    n = model.hidden
    gA = P.T @ Z
    P1 = P[:, :n]
    out = {"W": gA[:n, :n], "Q": P1.T @ X, "T": P1.sum(axis=0)}
    if model.layers == 2:
        out.update(W2=gA[n:, n:], Q2=gA[n:, :n], R=gA[:n, n:], T2=P[:, n:].sum(axis=0))
    return out


def implicit_vjp(model: Implicit, X, Z, dL_dZ, *, gradient: str = "exact") -> dict:
    """∂L/∂θ for every parameter, summed over the batch, given δ_Z = ∂L/∂Z at the equilibrium Z.

    exact: λ = (I − D A)⁻ᵀ δ_Z (one batched linear solve);  semi: λ = (I − D A_ff)⁻ᵀ δ_Z.
    Then ∂L/∂W = Σ_n (D λ)_n Y_nᵀ, ∂L/∂Q = Σ_n (D λ)_n X_nᵀ, ∂L/∂T = Σ_n (D λ)_n (paper eqs. 4–6
    contracted with δ), and the blocks R, Q2, W2, T2 of the joint matrix for two layers.

    Parameters: X (N, m), Z (N, U) equilibria, dL_dZ (N, U).  Returns {name: array like the parameter}.
    """
    _check_mode(gradient)
    X, _ = _check_X(model, X)
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
    dZ = np.atleast_2d(np.asarray(dL_dZ, dtype=np.float64))
    if Z.shape != (X.shape[0], model.units) or dZ.shape != Z.shape:
        raise ParameterError("Z", f"Z and dL_dZ must have shape ({X.shape[0]}, {model.units})")
    A, D, M = _lhs(model, Z, X, gradient)
    if gradient == "semi" and model.layers == 1:
        lam = dZ
    else:
        lam = np.linalg.solve(np.swapaxes(M, 1, 2), dZ[..., None])[..., 0]
    return _grads_from(model, X, Z, D * lam)


def implicit_jacobian(model: Implicit, x, Z=None, *, gradient: str = "exact") -> dict:
    """Forward form of paper eqs. 4–6 for ONE input x: J_θ[i, ...] = ∂Z_i/∂θ[...].

    J_W = (I − D A)⁻¹ D δ_Y with (δ_Y)_{ijm} = δ_ij Y_m (and likewise Q with X, T with 1), solved
    for all right-hand sides at once.  Returns {name: array of shape (U,) + θ.shape}.
    """
    _check_mode(gradient)
    xa, single = _check_X(model, x, "x")
    if not single:
        raise ParameterError("x", "implicit_jacobian takes one input of shape (m,)")
    if Z is None:
        Z = solve(model, xa)[0]
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
    A, D, M = _lhs(model, Z, xa, gradient)
    M, d, z, xv = M[0], D[0], Z[0], xa[0]
    U, n = model.units, model.hidden
    # ∂(A z + c)_i/∂A_{jm} = δ_ij z_m ;  ∂c_i/∂Q_{jm} = δ_ij x_m (i, j < n) ;  ∂c_i/∂T_j = δ_ij
    rhs_A = np.einsum("ij,m->ijm", np.diag(d), z)
    JA = np.linalg.solve(M, rhs_A.reshape(U, -1)).reshape(U, U, U)
    E1 = np.diag(d)[:, :n]
    JT = np.linalg.solve(M, E1)
    JQ = np.linalg.solve(M, np.einsum("ij,m->ijm", E1, xv).reshape(U, -1)).reshape(U, n, model.inputs)
    out = {"W": JA[:, :n, :n], "Q": JQ, "T": JT}
    if model.layers == 2:
        out.update(W2=JA[:, n:, n:], Q2=JA[:, n:, :n], R=JA[:, :n, n:],
                   T2=np.linalg.solve(M, np.diag(d)[:, n:]))
    return out


def implicit_neuron(w: float, q: float, x: float, t: float, activation: str = "sigmoid", *, tol: float = 1e-14):
    """The scalar implicit neuron y = f(w y + q x + t): returns (y, dy/dw) with paper eq. 2 corrected,

        dy/dw = f'(x̃) y / (1 − w f'(x̃)),   x̃ = w y + q x + t

    (the printed eq. 2 omits f'(x̃) in the numerator — an erratum).  y is found by Newton from
    the RK4 flow from 0, to ``tol``; a ConvergenceError if that fails.
    """
    from ..errors import ConvergenceError

    m = Implicit(W=[[w]], Q=[[q]], T=[t], activation=activation)
    Z, res, _, conv, _ = solve(m, [[x]], tol=tol)
    if not conv[0]:
        raise ConvergenceError(f"single neuron w={w:g}: residual {res[0]:.2e} > {tol:g}")
    y = float(Z[0, 0])
    fp = float(dphi(m.activation, np.array([w * y + q * x + t]), m.leak)[0])
    return y, fp * y / (1.0 - w * fp)

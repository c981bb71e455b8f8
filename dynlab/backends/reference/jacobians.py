"""The reference Jacobians: each form's closed-form one-step Jacobian, batched over N points.

    J = ∂s_t/∂s_{t−1},  Jx = ∂s_t/∂x_t  at (x_t, s_{t−1}) = (x[n], hprev[n]).

* one-line cells  h_t = a h_{t-1} + c φ(R h_{t-1} + W x_t + b):
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
  by ``solve_ivp`` at the form's rtol/atol (``ctrnn_flow``).
* GRU, LSTM (PyTorch's equations, ``dynlab.models.gru_lstm``): each row of J is a combination
  of the rows of the gate blocks of W_hh (of W_ih for Jx) with per-unit coefficients from the
  gates; an LSTM's J is on s = [h; c] (2D × 2D).
* stacks: block lower triangular, composed from the layers' (``stack``).
"""
from __future__ import annotations

import numpy as np

from ... import config
from ...activations import dphi
from ...errors import ConvergenceError
from . import cells
from .simulate import gru_step, irnn_step, lstm_step

#: scipy's implicit methods (they get the block Jacobian of the variational system).
IMPLICIT_METHODS = ("Radau", "BDF", "LSODA")


def jacobians_form(form, x, hprev, *, eta=None, inputs: bool = False):
    """(J (N, n, n), Jx (N, n, d) or None) of ``form`` at the N points (x, hprev); ``eta`` the
    (N, K) per-point η of an iRNN whose η varies over time (None: the form's shared row)."""
    J, Jx, _ = layer(form, x, hprev, eta, inputs)
    return J, Jx


def layer(form, x, s, eta, want_x):
    """(J, Jx or None, s') of one form at N points; s' the next state (a stack's layer above
    reads it).  The closed form of its kind (``LAYER``)."""
    return LAYER[form.kind](form, x, s, eta, want_x)


def _layer_stack(form, x, s, eta, want_x):
    return stack(form, x, s, want_x, layer)


def _layer_gru(form, x, s, eta, want_x):
    return gru(form.W_ih, form.W_hh, form.b_ih, form.b_hh, form.act, form.leak, x, s, want_x)


def _layer_lstm(form, x, s, eta, want_x):
    return lstm(form.W_ih, form.W_hh, form.b_ih, form.b_hh, form.act, form.leak, x, s, want_x)


def _layer_irnn(form, x, s, eta, want_x):
    e = np.broadcast_to(form.eta[0], (s.shape[0], form.K)) if eta is None else eta
    J, Jx = irnn(form.U, form.W, form.b, e, form.alpha, form.K, form.g0prev, form.sign, form.act,
                 form.leak, x, s, want_x)
    return J, Jx, None


def _layer_ctrnn(form, x, s, eta, want_x):
    """Fixed steps in closed form; scipy's adaptive solvers by the variational equation."""
    if form.fixed_step:
        J, Jx = ctrnn_fixed(form.U, form.W, form.b, form.tau, form.alpha, form.dt, form.substeps,
                            form.method == "rk4", form.act, form.leak, x, s, want_x)
    else:
        J, Jx = ctrnn_flow(form, x, s, form.dt, form.method, want_x)
    return J, Jx, None


def _layer_cell(form, x, s, eta, want_x):
    return cell(form.R, form.W, form.b, form.a, form.gain, form.act, form.leak, x, s, want_x)


def stack(form, x, s, want_x, layer_fn):
    """A stack's J at N points, composed from its layers' (block lower triangular):

        ∂s^(ℓ)/∂s = [0 … J_ℓ … 0] + Jx_ℓ · ∂out^(ℓ−1)/∂s,   ∂s^(ℓ)/∂x = Jx_ℓ · ∂out^(ℓ−1)/∂x,

    ∂out^(ℓ−1)/∂s the output rows of the layer below (nonzero in the columns of the layers up to
    ℓ − 1 only).  ``layer_fn(form, x, s, eta, want_x)`` → (J, Jx, s') of one layer (a backend's
    own kernels).  Returns (J, Jx or None, s')."""
    N = s.shape[0]
    n = form.state_size
    o = form.offsets
    J = np.zeros((N, n, n))
    Jx = np.zeros((N, n, form.inputs)) if want_x else None
    inp = x
    S = []
    for ell, f in enumerate(form.layers):
        rows = slice(int(o[ell]), int(o[ell + 1]))
        Jl, Jxl, snew = layer_fn(f, inp, np.ascontiguousarray(s[:, rows]), None, want_x or ell > 0)
        J[:, rows, rows] = Jl
        if ell == 0:
            if want_x:
                Jx[:, rows] = Jxl
        else:
            below = form.layers[ell - 1].output
            out = slice(int(o[ell - 1]) + below.start, int(o[ell - 1]) + below.stop)
            J[:, rows, :rows.start] = np.matmul(Jxl, J[:, out, :rows.start])
            if want_x:
                Jx[:, rows] = np.matmul(Jxl, Jx[:, out])
        inp = np.ascontiguousarray(snew[:, f.output])
        S.append(snew)
    return J, Jx, np.concatenate(S, axis=1)


def gru(W_ih, W_hh, b_ih, b_hh, act, leak, x, hprev, want_x):
    """PyTorch's GRU at N points (module docstring of ``dynlab.models.gru_lstm``): the step's
    gates (``simulate.gru_step``) give the coefficients (``cells.gru_slopes``) of

        J = diag(z) + diag(A r) W_hn + diag(A q r') W_hr + diag((h − n) z') W_hz,
        Jx = diag(A) W_in + diag(A q r') W_ir + diag((h − n) z') W_iz,

    A = (1 − z) φ'(a_n), q = W_hn h + b_hn, r' = r(1 − r), z' = z(1 − z).
    Returns (J (N, D, D), Jx (N, D, d) or None, h' (N, D))."""
    D = W_hh.shape[1]
    h2, gates = gru_step(W_hh, b_hh, x @ W_ih.T + b_ih, hprev, act, leak)
    cn, A, cr, cz, z = cells.gru_slopes(hprev, gates, act, leak)

    def rows(Wm, cn_):
        return cn_[:, :, None] * Wm[None, 2 * D:] + cr[:, :, None] * Wm[None, :D] + cz[:, :, None] * Wm[None, D:2 * D]

    J = rows(W_hh, cn)
    idx = np.arange(D)
    J[:, idx, idx] += z
    return J, (rows(W_ih, A) if want_x else None), h2


def lstm(W_ih, W_hh, b_ih, b_hh, act, leak, x, hprev, want_x):
    """PyTorch's LSTM at N points on s = [h; c] (module docstring of ``dynlab.models.gru_lstm``):
    the step's gates (``simulate.lstm_step``) give the coefficients (``cells.lstm_slopes``) of

        ∂c'/∂h = diag(c f') W_hf + diag(g i') W_hi + diag(i φ'(a_g)) W_hg,   ∂c'/∂c = diag(f),
        ∂h'/∂h = diag(φ(c') o') W_ho + diag(o φ'(c')) ∂c'/∂h,   ∂h'/∂c = diag(o φ'(c') f),

    and ∂/∂x alike with the W_i· blocks.  Returns (J (N, 2D, 2D), Jx (N, 2D, d) or None, s')."""
    D = W_hh.shape[1]
    N = hprev.shape[0]
    h, c = hprev[:, :D], hprev[:, D:]
    h2, c2, gates = lstm_step(x @ W_ih.T + b_ih + h @ W_hh.T + b_hh, c, act, leak)
    ci, cf, cg, ho, hc = cells.lstm_slopes(c, c2, gates, act, leak)

    def rows(Wm, out):
        dc = cf[:, :, None] * Wm[None, D:2 * D] + ci[:, :, None] * Wm[None, :D] + cg[:, :, None] * Wm[None, 2 * D:3 * D]
        m = Wm.shape[1]  # the columns of h (J) or of x (Jx)
        out[:, D:2 * D, :m] = dc
        dc *= hc[:, :, None]
        dc += ho[:, :, None] * Wm[None, 3 * D:]
        out[:, :D, :m] = dc
        return out

    J = rows(W_hh, np.zeros((N, 2 * D, 2 * D)))
    idx = np.arange(D)
    J[:, D + idx, D + idx] = gates.f
    J[:, idx, D + idx] = hc * gates.f
    Jx = rows(W_ih, np.empty((N, 2 * D, W_ih.shape[1]))) if want_x else None
    return J, Jx, np.concatenate([h2, c2], axis=1)


def _lmul(U, S):
    """U @ S[n] for every n: U (D, D), S (N, D, m) → (N, D, m).

    NumPy's broadcasting matmul of a shared U against a stack is quick for small D but falls
    far behind BLAS for large D (≈3× at D = 128 on 2 cores); einsum's tensordot path is one
    BLAS product over the whole stack.
    """
    if U.shape[0] > 64:
        return np.einsum("ij,njk->nik", U, S, optimize=True)
    return U @ S


def cell(R, W, b, a, gain, act, leak, x, hprev, want_x):
    """J = a I + gain·diag(φ'(z)) R,  Jx = gain·diag(φ'(z)) W,  z = R h + W x + b (``cells.cell_slope``).

    R (D, D), W (D, d), b (D,), x (N, d), hprev (N, D) → J (N, D, D), Jx (N, D, d) or None,
    h' (N, D).
    """
    D = R.shape[0]
    z = hprev @ R.T + x @ W.T + b
    dp = cells.cell_slope(gain, z, act, leak)           # (N, D)
    J = dp[:, :, None] * R[None]
    idx = np.arange(D)
    J[:, idx, idx] += a
    Jx = dp[:, :, None] * W[None] if want_x else None
    return J, Jx, cells.cell_update(a, gain, hprev, z, act, leak)


def irnn(U, W, b, eta, alpha, K, g0prev, sign, act, leak, x, hprev, want_x,
            chunk: int | None = None):
    """iRNN: J = Π (G_0 + σI) − σI with Π = A_K ⋯ A_1, A_k = (1 − η_k α) I + η_k diag(φ'(z_k)) U.

    (From G_k = G_{k-1} + η_k (diag(φ'(z_k)) U − α I)(G_{k-1} + σI): S_k = G_k + σI obeys
    S_k = A_k S_{k-1}; G_0 = 0 or I.)  Jx obeys Gx_k = A_k Gx_{k-1} + η_k diag(φ'(z_k)) W, Gx_0 = 0.
    The products run for a chunk of points at a time with Π stored as (D, n, D), so that every
    inner step is ONE BLAS product U · Π (D × D times D × n·D) plus three in-place passes that
    stay in cache — 2–4× faster than scalar loops from D = 32 up (``config``).

    eta (N, K) per-point step sizes, x (N, d), hprev (N, D) → J (N, D, D), Jx (N, D, d) or None.
    """
    N, D = hprev.shape
    d = W.shape[1]
    chunk = chunk or config.JACOBIAN_IRNN_CHUNK
    c = x @ W.T + b
    J = np.empty((N, D, D))
    Jx = np.empty((N, D, d)) if want_x else None
    eye = np.eye(D)
    diag = np.arange(D)
    for lo in range(0, N, chunk):
        hi = min(N, lo + chunk)
        n = hi - lo
        hp, cc, e = hprev[lo:hi], c[lo:hi], eta[lo:hi]
        Z = np.empty((K, n, D))
        irnn_step(U, hp, cc, e, alpha, K, g0prev, sign, act, leak, Z=Z)     # the pre-activations z_k
        P = np.empty((D, n, D))
        P[...] = eye[:, None, :]                              # Π[i, t, j], Π_0 = I
        Gx = np.zeros((D, n, d)) if want_x else None
        for k in range(K):
            ek = e[:, k]
            scale = cells.irnn_slope(Z[k], ek[:, None], act, leak).T[:, :, None]   # η_k φ'(z_k) as (D, n, 1)
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
        Jc = J[lo:hi]
        Jc[...] = P.transpose(1, 0, 2)
        Jc *= (1.0 + sign) if g0prev else sign
        Jc[:, diag, diag] -= sign
        if want_x:
            Jx[lo:hi] = Gx.transpose(1, 0, 2)
    return J, Jx


def ctrnn_fixed(U, W, b, tau, alpha, dt, substeps, rk4, act, leak, x, hprev, want_x):
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
        dp = dphi(act, z, leak)[:, :, None]
        fy = cells.ctrnn_rate(y, z, tau, alpha, act, leak)
        FY = cells.ctrnn_out(Y, dp * _lmul(U, Y), tau, alpha)
        FX = cells.ctrnn_out(Yx, dp * (_lmul(U, Yx) + W), tau, alpha) if want_x else None
        return fy, FY, FX

    def axpy(a, u, v):  # v + a·u on each of the triple (None stays None)
        return tuple(None if vi is None else vi + a * ui for ui, vi in zip(u, v))

    state = (hprev.copy(), np.broadcast_to(np.eye(D), (N, D, D)).copy(),
             np.zeros((N, D, d)) if want_x else None)
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


def ctrnn_flow(form, x, g, interval, method, want_x):
    """Integrate [g, Φ, Φx] over [0, interval] with solve_ivp.

    Explicit methods integrate all N points in one call (the error norm then spans all of
    them, as in the simulation's scipy path); implicit ones one point at a time, with the
    block Jacobian (A, A ⊗ I, A ⊗ I), A = (diag(φ') U − α I)/τ, for their Newton iterations
    (the second-derivative coupling of Φ to g is left out: it only slows Newton, never the
    accuracy, which is set by rtol/atol).
    """
    from scipy.integrate import solve_ivp

    N, D = g.shape
    d = form.inputs
    U, W, tau, alpha = form.U, form.W, float(form.tau), float(form.alpha)
    act, leak = form.act, float(form.leak)
    c_all = x @ W.T + form.b
    nx = D * d if want_x else 0
    width = D + D * D + nx

    def rhs_block(Y, c):  # Y (n, width) → (n, width)
        gg = Y[:, :D]
        Phi = Y[:, D:D + D * D].reshape(-1, D, D)
        z = gg @ U.T + c
        dp = dphi(act, z, leak)[:, :, None]
        out = np.empty_like(Y)
        out[:, :D] = cells.ctrnn_rate(gg, z, tau, alpha, act, leak)
        out[:, D:D + D * D] = cells.ctrnn_out(Phi, dp * _lmul(U, Phi), tau, alpha).reshape(-1, D * D)
        if want_x:
            Px = Y[:, D + D * D:].reshape(-1, D, d)
            out[:, D + D * D:] = cells.ctrnn_out(Px, dp * (_lmul(U, Px) + W), tau, alpha).reshape(-1, D * d)
        return out

    y0 = np.zeros((N, width))
    y0[:, :D] = g
    y0[:, D:D + D * D] = np.eye(D).ravel()
    J = np.empty((N, D, D))
    Jx = np.empty((N, D, d)) if want_x else None

    def fail(n, sol):
        raise ConvergenceError(f"ctrnn: solve_ivp ({method}) failed on the variational equation "
                               f"at point {n}: {sol.message}")

    with np.errstate(all="ignore"):
        if method not in IMPLICIT_METHODS:
            sol = solve_ivp(lambda _t, y: rhs_block(y.reshape(N, width), c_all).ravel(), (0.0, interval),
                            y0.ravel(), method=method, rtol=form.rtol, atol=form.atol)
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
                    A = cells.ctrnn_out(np.eye(D), dphi(act, y[:D] @ U.T + c[0], leak)[:, None] * U, tau, alpha)
                    blocks = [A, np.kron(A, np.eye(D))] + ([np.kron(A, np.eye(d))] if want_x else [])
                    return block_diag(*blocks)

                sol = solve_ivp(lambda _t, y, c=c: rhs_block(y[None], c)[0], (0.0, interval), y0[n],
                                method=method, rtol=form.rtol, atol=form.atol, jac=jac)
                if not sol.success:
                    fail(n, sol)
                yn = sol.y[:, -1]
                J[n] = yn[D:D + D * D].reshape(D, D)
                if want_x:
                    Jx[n] = yn[D + D * D:].reshape(D, d)
    return J, Jx


#: The closed form of each kind: (form, x, s, eta, want_x) → (J, Jx or None, s' or None).
LAYER = {"cell": _layer_cell, "irnn": _layer_irnn, "ctrnn": _layer_ctrnn, "gru": _layer_gru, "lstm": _layer_lstm,
         "stack": _layer_stack}

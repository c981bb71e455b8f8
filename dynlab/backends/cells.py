"""Each cell's per-element arithmetic, written once for every compiled target.

Every function here is a scalar ``numba.extending.register_jitable`` function: Numba compiles
it into whatever calls it — the numba backend's ``@njit`` CPU kernels and the GPU backend's
``@cuda.jit`` kernels alike — so a cell's update and its derivatives are written in this one
place for both; the NumPy reference (``dynlab.backends.reference``) is the second, independent
definition the tests compare them with.  Only ``math`` and arithmetic: no arrays, no NumPy.

Precision-generic: a float literal would make Numba compute a float32 kernel in float64, so the
constants are made in the argument's own type (``one(z)`` = z⁰ = 1, ``zero(z)``); a float32
kernel stays float32 throughout (the GPU's fast path), a float64 one float64.

Activations by id (``dynlab.activations.ACTIVATION_IDS``): 0 tanh, 1 relu, 2 sigmoid,
3 identity, 4 leaky-relu (slope ``leak`` below 0), 5 abs; derivatives from the right at kinks.

Each update comes twice: ``*_out`` from the activated values (p = φ(z), the gates), and the same
from the pre-activations with φ = ``phi`` (``cell_update``, ``irnn_inner``, …).  A kernel that
evaluates φ faster its own way (the numba backend's vectorisable tanh and sigmoid, kept where
an A/B benchmark shows they earn it) calls the ``*_out`` form, so the cell's arithmetic is still
this module's.

The cells, per unit i (z the pre-activation; the products R h, U s, W x are the kernels'):

one-line cells      h' = a h + γ φ(z),                     ∂h'/∂h = a I + diag(γ φ'(z)) R
iRNN inner step     g' = g + η (φ(z) − α s),  s = g + σ h_{m−1},  ∂g'/∂s = (1 − ηα) I + diag(η φ'(z)) U
CTRNN rate          f = (φ(z) − α y) / τ,                  ∂f/∂y = (diag(φ'(z)) U − α I) / τ
GRU                 r = σ(a_r), z = σ(a_z), n = φ(a_n^x + r q), h' = (1 − z) n + z h,
                    q = W_hn h + b_hn; ∂h'/∂h rows: A r (W_hn), A q r(1 − r) (W_hr),
                    (h − n) z(1 − z) (W_hz), + z on the diagonal, A = (1 − z) φ'(a_n)
LSTM                i, f, o = σ(·), g = φ(a_g), c' = f c + i g, h' = o φ(c');
                    ∂c'/∂h rows: c f(1 − f) (W_hf), g i(1 − i) (W_hi), i φ'(a_g) (W_hg);
                    ∂h'/∂h = φ(c') o(1 − o) (W_ho) + o φ'(c') ∂c'/∂h;  ∂c'/∂c = f,  ∂h'/∂c = o φ'(c') f
"""
from __future__ import annotations

import math

from numba.extending import register_jitable

TANH, RELU, SIGMOID, IDENTITY, LEAKY_RELU, ABS = 0, 1, 2, 3, 4, 5


# ============================================================================ constants
@register_jitable
def one(x):
    """1 in the type of x (x⁰ is 1 for every x, inf and NaN included)."""
    return x ** 0


@register_jitable
def zero(x):
    """0 in the type of x."""
    return one(x) - one(x)


# ============================================================================ activations
@register_jitable
def sigmoid_from(z, e):
    """σ(z) from e = e^{−|z|} (0 ≤ e ≤ 1: never the exponential of a large positive number):
    1/(1 + e) for z ≥ 0, e/(1 + e) below (NaN stays NaN).  A target with a faster exponential
    of its own (the numba backend's vectorisable one) supplies e and keeps this formula."""
    o = one(z)
    return (o if z >= zero(z) else e) / (o + e)


@register_jitable
def sigmoid(z):
    """σ(z), two-sided (``sigmoid_from`` with libm's exponential)."""
    return sigmoid_from(z, math.exp(-abs(z)))


@register_jitable
def phi(act, z, leak):
    """φ(z) for the activation id ``act``."""
    if act == TANH:
        return math.tanh(z)
    if act == RELU:
        return zero(z) if z < zero(z) else z          # NaN passes through, as in np.maximum
    if act == SIGMOID:
        return sigmoid(z)
    if act == LEAKY_RELU:
        return leak * z if z < zero(z) else z
    if act == ABS:
        return abs(z)
    return z


@register_jitable
def dphi(act, z, leak):
    """φ'(z) (from the right at the kinks: relu'(0) = 1, abs'(0) = +1)."""
    o = one(z)
    if act == TANH:
        t = math.tanh(z)
        return o - t * t
    if act == RELU:
        return o if z >= zero(z) else zero(z)
    if act == SIGMOID:
        s = sigmoid(z)
        return s * (o - s)
    if act == LEAKY_RELU:
        return o if z >= zero(z) else leak * o
    if act == ABS:
        return o if z >= zero(z) else -o
    return o


@register_jitable
def dphi_at(act, z, a, leak):
    """φ'(z) given a = φ(z) already computed (tanh: 1 − a², sigmoid: a(1 − a), no second
    transcendental); the piecewise ones from z."""
    if act == TANH:
        return one(a) - a * a
    if act == SIGMOID:
        return a * (one(a) - a)
    return dphi(act, z, leak)


# ============================================================================ one-line cells
@register_jitable
def cell_out(a, gain, h, p):
    """h' = a h + γ p, p = φ(z)."""
    return a * h + gain * p


@register_jitable
def cell_update(a, gain, h, z, act, leak):
    """h' = a h + γ φ(z)."""
    return cell_out(a, gain, h, phi(act, z, leak))


@register_jitable
def cell_slope(gain, z, act, leak):
    """γ φ'(z): row i of ∂h'/∂h is a e_i + slope_i R_i (and slope_i W_i of ∂h'/∂x)."""
    return gain * dphi(act, z, leak)


# ============================================================================ iRNN, CTRNN
@register_jitable
def drift(y, p, alpha):
    """F = p − α y from p = φ(z): the right-hand side shared by the iRNN and the CTRNN."""
    return p - alpha * y


@register_jitable
def rhs(y, z, alpha, act, leak):
    """F(y) = φ(z) − α y, z = (U y + W x + b)_i: the iRNN's equilibrium equation is F = 0
    (α s = φ(U s + W x + b)), a CTRNN's rate is F/τ; ∂F/∂y = diag(φ'(z)) U − α I."""
    return drift(y, phi(act, z, leak), alpha)


@register_jitable
def irnn_out(g, s, p, eta, alpha):
    """One inner Euler step from p = φ(z): g' = g + η (p − α s)."""
    return g + eta * drift(s, p, alpha)


@register_jitable
def irnn_inner(g, s, z, eta, alpha, act, leak):
    """One inner Euler step, g' = g + η (φ(z) − α s), z = (U s + W x + b)_i."""
    return irnn_out(g, s, phi(act, z, leak), eta, alpha)


@register_jitable
def irnn_keep(eta, alpha):
    """1 − η α: ∂g'/∂s = keep I + diag(η φ'(z)) U, and on s = g + σ h_{m−1} (h_{m−1} held) the
    inner step is s' = keep·s + η φ(z) — ``cell_out(keep, η, s, φ(z))``, a one-line cell."""
    return one(eta) - eta * alpha


@register_jitable
def irnn_slope(z, eta, act, leak):
    """η φ'(z): ∂g'/∂s = keep I + diag(slope) U with keep = 1 − η α."""
    return eta * dphi(act, z, leak)


@register_jitable
def ctrnn_out(y, p, tau, alpha):
    """f = (p − α y) / τ from p = φ(z); with p = φ'(z)·(U Y)_ij and y = Y_ij, the same line is the
    rate's tangent (∂f/∂y) Y."""
    return drift(y, p, alpha) / tau


@register_jitable
def ctrnn_rate(y, z, tau, alpha, act, leak):
    """f = (φ(z) − α y) / τ, z = (U y + W x + b)_i."""
    return ctrnn_out(y, phi(act, z, leak), tau, alpha)


@register_jitable
def ctrnn_slope(z, tau, act, leak):
    """φ'(z) / τ: ∂f/∂y = diag(slope) U − (α/τ) I."""
    return dphi(act, z, leak) / tau


# ============================================================================ GRU
@register_jitable
def gru_out(z, n, h):
    """h' = (1 − z) n + z h from the update gate z and the candidate n."""
    return (one(z) - z) * n + z * h


@register_jitable
def gru_slopes_at(h, r, z, n, q, dn):
    """The coefficients of row i of ∂h'/∂h (and ∂h'/∂x) from the gates and dn = φ'(a_n):
    (c_n, c_nx, c_r, c_z, z) with ∂h'/∂h = c_n W_hn + c_r W_hr + c_z W_hz + z e_i and
    ∂h'/∂x = c_nx W_in + c_r W_ir + c_z W_iz:  A = (1 − z) φ'(a_n), c_nx = A, c_n = A r,
    c_r = A q r(1 − r), c_z = (h − n) z(1 − z).  Their transposes carry the cotangents back:
    ā_n = h̄ A, ā_r = h̄ c_r, ā_z = h̄ c_z, ā_n r = h̄ c_n, and h̄ z directly."""
    o = one(z)
    A = (o - z) * dn
    return A * r, A, A * q * (r * (o - r)), (h - n) * (z * (o - z)), z


@register_jitable
def gru_slopes(h, r, z, n, a_n, q, act, leak):
    """``gru_slopes_at`` with φ'(a_n) from a_n."""
    return gru_slopes_at(h, r, z, n, q, dphi(act, a_n, leak))


# ============================================================================ LSTM
@register_jitable
def lstm_cell(f, c, i, g):
    """c' = f c + i g."""
    return f * c + i * g


@register_jitable
def lstm_out(o, t):
    """h' = o t, t = φ(c')."""
    return o * t


@register_jitable
def lstm_slopes_at(c, i, f, g, o, t, dg, dt):
    """The coefficients of row i of the LSTM's Jacobian on s = [h; c] from the gates, t = φ(c'),
    dg = φ'(a_g) and dt = φ'(c'): (c_i, c_f, c_g, h_o, h_c) with ∂c'/∂h = c_i W_hi + c_f W_hf +
    c_g W_hg, ∂c'/∂c = f e_i, ∂h'/∂h = h_o W_ho + h_c ∂c'/∂h, ∂h'/∂c = h_c f e_i:  c_i = g i(1 − i),
    c_f = c f(1 − f), c_g = i φ'(a_g), h_o = t o(1 − o), h_c = o φ'(c').  Backwards:
    c̄' = c̄ + h̄ h_c, ā_i = c̄' c_i, ā_f = c̄' c_f, ā_g = c̄' c_g, ā_o = h̄ h_o, c̄_prev = c̄' f."""
    u = one(c)
    return g * (i * (u - i)), c * (f * (u - f)), i * dg, t * (o * (u - o)), o * dt


@register_jitable
def lstm_slopes(c, c2, i, f, g, o, t, a_g, act, leak):
    """``lstm_slopes_at`` with φ'(a_g) and φ'(c') from a_g, c' and t = φ(c') (``lstm_unit``'s)."""
    return lstm_slopes_at(c, i, f, g, o, t, dphi(act, a_g, leak), dphi_at(act, c2, t, leak))


# ============================================================================ the gated units
def gated_units(sig, act_phi, jit=register_jitable):
    """The GRU's and the LSTM's unit (the gate wiring), written once, with σ = ``sig(z)`` and
    φ = ``act_phi(act, z, leak)`` supplied by the target: (``gru_unit``, ``lstm_unit``).

    The module's own pair is ``gated_units(sigmoid, phi)``; the numba backend's batched and
    training passes make theirs from its vectorisable σ and tanh (one pair with φ = tanh for the
    unit loops written out for tanh, one with its other activations), so that their loops still
    vectorise while the wiring stays this module's.  ``sig`` and ``act_phi`` are jitted functions
    (``register_jitable`` or ``njit``); the two returned are closures over them made by ``jit``
    (``register_jitable`` by default; the numba backend's are ``njit(inline="always")``: a unit
    inlined by Numba, not left to LLVM's inliner, which kept a separate call — and a scalar
    loop — for a unit of two exponentials and a tanh, 1.3–1.8× slower).

    ``gru_unit(a_r, a_z, a_nx, q, h, act, leak)``: PyTorch's GRU for one unit from the gate
    pre-activations a_r, a_z (input and hidden parts summed, biases included), a_nx =
    (W_in x + b_in)_i and q = (W_hn h + b_hn)_i; returns (h', r, z, n, a_n), a_n = a_nx + r q.

    ``lstm_unit(a_i, a_f, a_g, a_o, c, act, leak)``: PyTorch's LSTM for one unit from the
    pre-activations (both biases included) and the cell c; returns (h', c', i, f, g, o, t),
    t = φ(c')."""

    @jit
    def gru_unit(a_r, a_z, a_nx, q, h, act, leak):
        r = sig(a_r)
        z = sig(a_z)
        a_n = a_nx + r * q
        n = act_phi(act, a_n, leak)
        return gru_out(z, n, h), r, z, n, a_n

    @jit
    def lstm_unit(a_i, a_f, a_g, a_o, c, act, leak):
        i = sig(a_i)
        f = sig(a_f)
        g = act_phi(act, a_g, leak)
        o = sig(a_o)
        c2 = lstm_cell(f, c, i, g)
        t = act_phi(act, c2, leak)
        return lstm_out(o, t), c2, i, f, g, o, t

    return gru_unit, lstm_unit


#: PyTorch's GRU and LSTM for one unit with this module's σ and φ (``gated_units``).
gru_unit, lstm_unit = gated_units(sigmoid, phi)


__all__ = ["one", "zero", "sigmoid_from", "sigmoid", "phi", "dphi", "dphi_at", "cell_out", "cell_update", "cell_slope",
           "drift", "rhs", "irnn_out", "irnn_inner", "irnn_keep", "irnn_slope", "ctrnn_out", "ctrnn_rate", "ctrnn_slope",
           "gru_out", "gru_slopes_at", "gru_slopes", "lstm_cell", "lstm_out", "lstm_slopes_at", "lstm_slopes",
           "gated_units", "gru_unit", "lstm_unit"]

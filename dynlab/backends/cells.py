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
def sigmoid(z):
    """σ(z), two-sided: never the exponential of a large positive number."""
    o = one(z)
    if z >= zero(z):
        return o / (o + math.exp(-z))
    e = math.exp(z)
    return e / (o + e)


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


# ============================================================================ iRNN
@register_jitable
def irnn_out(g, s, p, eta, alpha):
    """One inner Euler step from p = φ(z): g' = g + η (p − α s)."""
    return g + eta * (p - alpha * s)


@register_jitable
def irnn_inner(g, s, z, eta, alpha, act, leak):
    """One inner Euler step, g' = g + η (φ(z) − α s), z = (U s + W x + b)_i."""
    return irnn_out(g, s, phi(act, z, leak), eta, alpha)


@register_jitable
def irnn_slope(z, eta, act, leak):
    """η φ'(z): ∂g'/∂s = keep I + diag(slope) U with keep = 1 − η α."""
    return eta * dphi(act, z, leak)


# ============================================================================ CTRNN
@register_jitable
def ctrnn_out(y, p, tau, alpha):
    """f = (p − α y) / τ from p = φ(z)."""
    return (p - alpha * y) / tau


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
def gru_unit(a_r, a_z, a_nx, q, h, act, leak):
    """PyTorch's GRU for one unit: a_r, a_z the gate pre-activations (input and hidden parts
    summed, biases included), a_nx = (W_in x + b_in)_i, q = (W_hn h + b_hn)_i.  Returns
    (h', r, z, n, a_n) with a_n = a_nx + r q."""
    r = sigmoid(a_r)
    z = sigmoid(a_z)
    a_n = a_nx + r * q
    n = phi(act, a_n, leak)
    return gru_out(z, n, h), r, z, n, a_n


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
def lstm_unit(a_i, a_f, a_g, a_o, c, act, leak):
    """PyTorch's LSTM for one unit (pre-activations with both biases).  Returns
    (h', c', i, f, g, o)."""
    i = sigmoid(a_i)
    f = sigmoid(a_f)
    g = phi(act, a_g, leak)
    o = sigmoid(a_o)
    c2 = lstm_cell(f, c, i, g)
    return lstm_out(o, phi(act, c2, leak)), c2, i, f, g, o


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
def lstm_slopes(c, c2, i, f, g, o, a_g, act, leak):
    """``lstm_slopes_at`` with t, φ'(a_g) and φ'(c') from a_g and c'."""
    t = phi(act, c2, leak)
    return lstm_slopes_at(c, i, f, g, o, t, dphi(act, a_g, leak), dphi_at(act, c2, t, leak))


__all__ = ["one", "zero", "sigmoid", "phi", "dphi", "dphi_at", "cell_out", "cell_update", "cell_slope", "irnn_out",
           "irnn_inner", "irnn_slope", "ctrnn_out", "ctrnn_rate", "ctrnn_slope", "gru_out", "gru_unit", "gru_slopes_at", "gru_slopes",
           "lstm_cell", "lstm_out", "lstm_unit", "lstm_slopes_at", "lstm_slopes"]

"""The reference's per-element arithmetic of every cell, in NumPy, written once.

The NumPy twin of ``dynlab.backends.cells`` (which serves the compiled targets), written
independently of it: the tests compare the two.  Everything here is elementwise on arrays (or
scalars) that broadcast — the products R h, U s, W x and the gate blocks' matrices are the
callers' — with φ and φ' from ``dynlab.activations``.  The reference backend's steps
(``simulate``), closed-form Jacobians (``jacobians``), backward pass (``bptt``) and forward
tangents (``tangent``) all go through these functions; so do the layers above that need a
cell's values rather than a backend operation (a model's equilibrium residual or vector field,
the forms' fixed-point maps, the Lipschitz bounds of the gated cells).

The cells, per unit (z the pre-activation):

=================  ===========================================================================
one-line cells     h' = a h + γ φ(z);  ∂h'/∂h = a I + diag(γ φ'(z)) R
right-hand side    F(y) = φ(z) − α y, z = U y + c: the iRNN's equilibrium equation (F = 0 is
                   α s = φ(U s + W x + b)) and, divided by τ, the CTRNN's rate;
                   ∂F/∂y = diag(φ'(z)) U − α I
iRNN inner step    g' = g + η F(s), s = g + σ h_{m−1};  ∂g'/∂s = (1 − ηα) I + diag(η φ'(z)) U
CTRNN rate         f = F(y)/τ;  ∂f/∂y = (diag(φ'(z)) U − α I)/τ
GRU                r = σ(a_r), z = σ(a_z), n = φ(a_n), a_n = a_n^x + r q, h' = (1 − z) n + z h
LSTM               i, f, o = σ(·), g = φ(a_g), c' = f c + i g, t = φ(c'), h' = o t
=================  ===========================================================================

The GRU's and LSTM's units return their gates with the new state (``GRUGates``, ``LSTMGates``),
so the Jacobian and the backward pass read them (``gru_slopes``, ``lstm_slopes``) instead of
forming them again.
"""
from __future__ import annotations

from typing import NamedTuple

from ...activations import dphi, dphi_at, phi, sigmoid


# ============================================================================ one-line cells
def cell_out(a, gain, h, p):
    """h' = a h + γ p, p = φ(z)."""
    return a * h + gain * p


def cell_update(a, gain, h, z, act, leak):
    """h' = a h + γ φ(z)."""
    return cell_out(a, gain, h, phi(act, z, leak))


def cell_slope(gain, z, act, leak):
    """γ φ'(z): row i of ∂h'/∂h is a e_i + slope_i R_i (and slope_i W_i of ∂h'/∂x)."""
    return gain * dphi(act, z, leak)


# ============================================================================ iRNN, CTRNN
def drift(y, p, alpha):
    """F = p − α y from p = φ(z): the right-hand side of the iRNN and the CTRNN."""
    return p - alpha * y


def rhs(y, z, alpha, act, leak):
    """F(y) = φ(z) − α y, z = (U y + W x + b): zero at an iRNN equilibrium α s = φ(U s + W x + b);
    τ times a CTRNN's rate.  Its Jacobian is diag(``dphi``(z)) U − α I."""
    return drift(y, phi(act, z, leak), alpha)


def irnn_out(g, s, p, eta, alpha):
    """One inner Euler step from p = φ(z): g' = g + η (p − α s)."""
    return g + eta * drift(s, p, alpha)


def irnn_inner(g, s, z, eta, alpha, act, leak):
    """One inner Euler step, g' = g + η (φ(z) − α s), z = U s + W x + b (s = g + σ h_{m−1})."""
    return irnn_out(g, s, phi(act, z, leak), eta, alpha)


def irnn_slope(z, eta, act, leak):
    """η φ'(z): ∂g'/∂s = (1 − η α) I + diag(slope) U."""
    return eta * dphi(act, z, leak)


def ctrnn_out(y, p, tau, alpha):
    """f = (p − α y)/τ from p = φ(z) (also the stage tangent: p = φ'(z) ⊙ (U Y), y = Y)."""
    return drift(y, p, alpha) / tau


def ctrnn_rate(y, z, tau, alpha, act, leak):
    """f = (φ(z) − α y)/τ, z = U y + W x + b."""
    return ctrnn_out(y, phi(act, z, leak), tau, alpha)


# ============================================================================ GRU
class GRUGates(NamedTuple):
    """What a GRU step keeps of one unit: r, z the gates, q = W_hn h + b_hn, a_n the candidate's
    pre-activation and n = φ(a_n)."""

    r: object
    z: object
    q: object
    a_n: object
    n: object


def gru_unit(a_r, a_z, a_nx, q, h, act, leak):
    """PyTorch's GRU from the gate pre-activations (input and hidden parts summed, biases
    included), a_nx = W_in x + b_in and q = W_hn h + b_hn: (h', ``GRUGates``)."""
    r = sigmoid(a_r)
    z = sigmoid(a_z)
    a_n = a_nx + r * q
    n = phi(act, a_n, leak)
    return (1.0 - z) * n + z * h, GRUGates(r, z, q, a_n, n)


def gru_slopes(h, gates: GRUGates, act, leak):
    """The coefficients of ∂h'/∂h = diag(c_n) W_hn + diag(c_r) W_hr + diag(c_z) W_hz + diag(z) and
    ∂h'/∂x = diag(c_nx) W_in + diag(c_r) W_ir + diag(c_z) W_iz at the previous state h:
    A = (1 − z) φ'(a_n), c_nx = A, c_n = A r, c_r = A q r(1 − r), c_z = (h − n) z(1 − z).
    Returns (c_n, c_nx, c_r, c_z, z); backwards ā_n = h̄ c_nx, ā_r = h̄ c_r, ā_z = h̄ c_z and
    h̄ c_n, h̄ z carry the cotangent to W_hn h and to h."""
    r, z, q, a_n, n = gates
    A = (1.0 - z) * dphi(act, a_n, leak)
    return A * r, A, A * q * (r * (1.0 - r)), (h - n) * (z * (1.0 - z)), z


# ============================================================================ LSTM
class LSTMGates(NamedTuple):
    """What an LSTM step keeps of one unit: the gates i, f, g, o, the pre-activation a_g of g and
    t = φ(c')."""

    i: object
    f: object
    g: object
    o: object
    a_g: object
    t: object


def lstm_unit(a_i, a_f, a_g, a_o, c, act, leak):
    """PyTorch's LSTM from the gates' pre-activations (both biases included) and the cell c:
    (h', c', ``LSTMGates``)."""
    i, f = sigmoid(a_i), sigmoid(a_f)
    g, o = phi(act, a_g, leak), sigmoid(a_o)
    c2 = f * c + i * g
    t = phi(act, c2, leak)
    return o * t, c2, LSTMGates(i, f, g, o, a_g, t)


def lstm_slopes(c, c2, gates: LSTMGates, act, leak):
    """The coefficients of the LSTM's Jacobian on s = [h; c] at the previous cell c (c2 = c'):
    ∂c'/∂h = diag(c_i) W_hi + diag(c_f) W_hf + diag(c_g) W_hg, ∂c'/∂c = diag(f),
    ∂h'/∂h = diag(h_o) W_ho + diag(h_c) ∂c'/∂h, ∂h'/∂c = diag(h_c f), with c_i = g i(1 − i),
    c_f = c f(1 − f), c_g = i φ'(a_g), h_o = t o(1 − o), h_c = o φ'(c').  Returns
    (c_i, c_f, c_g, h_o, h_c); backwards c̄' = c̄ + h̄ h_c, ā_i = c̄' c_i, ā_f = c̄' c_f,
    ā_g = c̄' c_g, ā_o = h̄ h_o, c̄_prev = c̄' f."""
    i, f, g, o, a_g, t = gates
    return (g * (i * (1.0 - i)), c * (f * (1.0 - f)), i * dphi(act, a_g, leak), t * (o * (1.0 - o)),
            o * dphi_at(act, c2, t, leak))


__all__ = ["cell_out", "cell_update", "cell_slope", "drift", "rhs", "irnn_out", "irnn_inner", "irnn_slope", "ctrnn_out",
           "ctrnn_rate", "GRUGates", "gru_unit", "gru_slopes", "LSTMGates", "lstm_unit", "lstm_slopes"]

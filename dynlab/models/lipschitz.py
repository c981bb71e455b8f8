"""Lipschitz bounds of the step Jacobian of the gated maps (GRU, LSTM), for the Newton–Kantorovich
certificate of their fixed points (``StepMap.certify`` of ``dynlab.models.fixed_point``, beside it).

The certificate needs L with ‖J(s) − J(s')‖₂ ≤ L ‖s − s'‖₂ for s, s' in a ball B(y, ρ) about the
candidate y, J = ∂step/∂s (∂F = J − I has the same L).  The step Jacobians are sums of terms
diag(u(s)) W with W a constant weight block and u a vector of scalar functions of s, so

    ‖diag(u(s)) W − diag(u(s')) W‖₂ ≤ max_i |u_i(s) − u_i(s')| ‖W‖₂ ≤ max_i G_i ‖W‖₂ ‖s − s'‖₂,

with G_i ≥ sup_B ‖∇u_i‖₂.  Each G_i is bounded by the product rule from

* the gates σ: |σ| ≤ 1, |σ'| ≤ ¼, |σ''| ≤ 1/(6√3);
* the activation φ (tanh: sup|φ| = 1, sup|φ'| = 1, sup|φ''| = 4/(3√3); sigmoid: 1, ¼, 1/(6√3);
  identity: ∞, 1, 0 — the piecewise-affine ones have no Lipschitz φ' and get no bound);
* ‖∇a_i‖₂ = ‖w_i‖₂ (the row norm) for a pre-activation a_i = w_i·h + const;
* values on the ball: |v_i(s)| ≤ |v_i(y)| + ρ G^v_i for every v used as a factor (capped by
  sup|v| where that is finite).

GRU (module ``dynlab.models.gru_lstm``; r' = r(1 − r), p = (1 − z) φ'(a_n), m = q r',
g = (h − n) z'):  J = diag(p r) W_hn + diag(p m) W_hr + diag(z) + diag(g) W_hz, so

    L = max G(pr) ‖W_hn‖ + max G(pm) ‖W_hr‖ + max G(z) + max G(g) ‖W_hz‖,

with G(z) = ¼ω_z, G(a_n) = ω_n + ¼ Q ω_r (Q ≥ |q| on the ball), G(p) = ¼ω_z sup φ' + sup|φ''| G(a_n),
G(pr) = G(p) + ¼ω_r sup φ', G(m) = ¼ω_n + Q sup|σ''| ω_r, G(pm) = ¼Q G(p) + sup φ' G(m),
G(g) = ¼(1 + sup φ' G(a_n)) + (|h| + |n|) sup|σ''| ω_z  (ω_· the row norms of W_h·).

LSTM on s = [h; c]: the four blocks of J are bounded separately (‖J‖ ≤ Σ‖blocks‖):
∂c'/∂c = diag(f); ∂c'/∂h = diag(c f') W_hf + diag(g i') W_hi + diag(i φ'(a_g)) W_hg;
∂h'/∂c = diag(o φ'(c') f); ∂h'/∂h = diag(t o') W_ho + diag(o φ'(c')) ∂c'/∂h — the last by
Lip(A B) ≤ Lip(A) sup‖B‖ + sup‖A‖ Lip(B) (the derivation is spelled out in ``_lstm``).

A stack of one layer uses its layer's bound; deeper stacks have none derived here (their
fixed points are then reported "not certified", never claimed).  The bounds are tested in
tests/test_fixed_points.py against ‖J(s) − J(s')‖₂/‖s − s'‖₂ on random pairs in the ball.
"""
from __future__ import annotations

import numpy as np

from ..activations import BOUNDS
from ..backends.reference.cells import gru_unit, lstm_unit

#: sup|σ'|, sup|σ''| of the logistic gate
SIG1, SIG2 = BOUNDS["sigmoid"][1:]
#: activation → (sup|φ|, sup|φ'|, sup|φ''|) for the smooth activations (``dynlab.activations.BOUNDS``)
ACT_BOUNDS = {name: b for name, b in BOUNDS.items() if b[2] is not None}


def jacobian_lipschitz(model, S, X, radius: float):
    """L (N,) bounding the Lipschitz constant of the step Jacobian on the ball B(s_n, radius)
    about each row s_n of S (N, state_size) at the inputs X (N, d); None when no bound is derived
    for this model (module docstring)."""
    return form_lipschitz(model.form(), S, X, radius)


def form_lipschitz(form, S, X, radius: float):
    """``jacobian_lipschitz`` of a kernel form (what a step map's certificate asks)."""
    if form.kind == "stack":
        if len(form.layers) != 1:
            return None
        form = form.layers[0]
    if form.kind not in ("gru", "lstm") or form.act not in ACT_BOUNDS:
        return None
    S = np.atleast_2d(np.asarray(S, dtype=np.float64))
    X = np.broadcast_to(np.atleast_2d(np.asarray(X, dtype=np.float64)), (S.shape[0], form.inputs))
    rho = float(radius)
    return (_gru if form.kind == "gru" else _lstm)(_Gated(form), S, X, rho, *ACT_BOUNDS[form.act])


class _Gated:
    """A GRU or LSTM form with its gate blocks by name (PyTorch's order: r, z, n / i, f, g, o)."""

    def __init__(self, form):
        self.form = form
        self.hidden, self.W_hh, self.b_hh = form.hidden, form.W_hh, form.b_hh
        self.gates = "rzn" if form.kind == "gru" else "ifgo"

    def block(self, name: str, gate: str) -> np.ndarray:
        k, D = self.gates.index(gate), self.hidden
        return getattr(self.form, name)[k * D:(k + 1) * D]

    def drive(self, X) -> np.ndarray:
        return X @ self.form.W_ih.T + self.form.b_ih

    def gru_gates(self, S, X):
        """The GRU's gates at (S, X): the reference's unit (``reference.cells.gru_unit``)."""
        D = self.hidden
        gi, gh = self.drive(X), S @ self.W_hh.T + self.b_hh
        return gru_unit(gi[:, :D] + gh[:, :D], gi[:, D:2 * D] + gh[:, D:2 * D], gi[:, 2 * D:], gh[:, 2 * D:], S,
                        self.form.act, self.form.leak)[1]

    def lstm_gates(self, S, X):
        """The LSTM's gates at (S, X), t = φ(c') among them (``reference.cells.lstm_unit``)."""
        D = self.hidden
        a = self.drive(X) + S[:, :D] @ self.W_hh.T + self.b_hh
        return lstm_unit(a[:, :D], a[:, D:2 * D], a[:, 2 * D:3 * D], a[:, 3 * D:], S[:, D:], self.form.act,
                         self.form.leak)[2]


def _rows(W):
    return np.linalg.norm(W, axis=1)


def _gru(m, S, X, rho, sup_phi, d1, d2):
    D = m.hidden
    W_hr, W_hz, W_hn = (m.block("W_hh", g) for g in "rzn")
    wr, wz, wn = _rows(W_hr), _rows(W_hz), _rows(W_hn)
    nr, nz, nn = (np.linalg.norm(W, 2) for W in (W_hr, W_hz, W_hn))
    gates = m.gru_gates(S, X)
    q0, n0 = gates.q, gates.n
    Q = np.abs(q0) + rho * wn                       # |q| on the ball
    G_an = wn + 0.25 * Q * wr                       # ‖∇a_n‖
    Nb = np.minimum(sup_phi, np.abs(n0) + rho * d1 * G_an)   # |n| on the ball
    Hb = np.abs(S) + rho                            # |h| on the ball
    G_p = 0.25 * wz * d1 + d2 * G_an
    G_pr = G_p + 0.25 * wr * d1
    G_m = 0.25 * wn + Q * SIG2 * wr
    G_pm = 0.25 * Q * G_p + d1 * G_m
    G_g = 0.25 * (1.0 + d1 * G_an) + (Hb + Nb) * SIG2 * wz
    return (G_pr.max(axis=1) * nn + G_pm.max(axis=1) * nr + 0.25 * wz.max() + G_g.max(axis=1) * nz)


def _lstm(m, S, X, rho, sup_phi, d1, d2):
    """Blocks of J on s = [h; c] (G(·) bounds ‖∇·‖₂ w.r.t. s on the ball; |i|, |f|, |o| ≤ 1):

    c' = f c + i g:   G(c') = ¼ω_f C + 1 + ¼ω_i Gb + sup φ' ω_g       (C ≥ |c|, Gb ≥ |g|)
    ∂c'/∂c = diag(f):                       Lip ≤ max ¼ω_f
    ∂c'/∂h = Σ diag(u_k) W_k,  u = (c f', g i', i φ'(a_g)):
        |u| ≤ (¼C, ¼Gb, sup φ'),  G(u) ≤ (¼ + C sup|σ''| ω_f, ¼ sup φ' ω_g + Gb sup|σ''| ω_i,
                                            ¼ω_i sup φ' + sup|φ''| ω_g)
        sup‖∂c'/∂h‖ ≤ M_c = Σ max|u_k| ‖W_k‖,  Lip ≤ L_c = Σ max G(u_k) ‖W_k‖
    ∂h'/∂c = diag(o φ'(c') f):             Lip ≤ max(¼ω_o sup φ' + sup|φ''| G(c') + ¼ω_f sup φ')
    ∂h'/∂h = diag(t o') W_ho + diag(v) ∂c'/∂h,  v = o φ'(c'), t = φ(c') (Tb ≥ |t|):
        Lip ≤ max(¼ sup φ' G(c') + Tb sup|σ''| ω_o) ‖W_ho‖ + max G(v) M_c + sup φ' L_c,
        G(v) = ¼ω_o sup φ' + sup|φ''| G(c')
    """
    D = m.hidden
    Wi, Wf, Wg, Wo = (m.block("W_hh", k) for k in "ifgo")
    wi, wf, wg, wo = _rows(Wi), _rows(Wf), _rows(Wg), _rows(Wo)
    ni, nf, ng, no = (np.linalg.norm(W, 2) for W in (Wi, Wf, Wg, Wo))
    c0 = S[:, D:]
    gates = m.lstm_gates(S, X)
    C = np.abs(c0) + rho
    Gb = np.minimum(sup_phi, np.abs(gates.g) + rho * d1 * wg)
    G_c2 = 0.25 * wf * C + 1.0 + 0.25 * wi * Gb + d1 * wg
    Tb = np.minimum(sup_phi, np.abs(gates.t) + rho * d1 * G_c2)
    M_c = (0.25 * C).max(axis=1) * nf + (0.25 * Gb).max(axis=1) * ni + d1 * ng
    L_c = ((0.25 + C * SIG2 * wf).max(axis=1) * nf + (0.25 * d1 * wg + Gb * SIG2 * wi).max(axis=1) * ni
           + (0.25 * wi * d1 + d2 * wg).max() * ng)
    L_cc = 0.25 * wf.max()
    L_hc = (0.25 * wo * d1 + d2 * G_c2 + 0.25 * wf * d1).max(axis=1)
    G_v = 0.25 * wo * d1 + d2 * G_c2
    L_hh = (0.25 * d1 * G_c2 + Tb * SIG2 * wo).max(axis=1) * no + G_v.max(axis=1) * M_c + d1 * L_c
    return L_hh + L_hc + L_c + L_cc

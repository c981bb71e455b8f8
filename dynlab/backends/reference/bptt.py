"""The reference backpropagation through time: each form's forward pass with a tape, and the
vector–Jacobian products back through it, in plain NumPy (batched over the B sequences).

Inputs are time-major: x (T, B, d); h0 (B, n).  ``forward`` returns a ``Tape`` whose ``H`` holds
the states s_0..s_T (T+1, B, n) and whose ``outputs`` the read-out's h (T+1, B, hidden);
``backward(tape, ext)`` takes the explicit cotangents ∂L/∂h_t of the last T' steps (T', B, w),
w the output width or, for an LSTM or a stack, the whole state's, and returns the cotangents of
the form's arrays (by the form's field names: cells R, W, b, a, gain; iRNN U, W, b, eta, alpha;
GRU/LSTM W_ih, W_hh, b_ih, b_hh; a stack's ``layer{ℓ}_<name>``), ∂L/∂s_0 and ∂L/∂s_1.

The rules, with ā = ∂L/∂a for every a (row vectors, summed over the batch for the arrays):

one-line cell   z_t = R h_{t−1} + W x_t + b,  h_t = a h_{t−1} + γ φ(z_t):
                z̄_t = γ h̄_t ⊙ φ'(z_t);  h̄_{t−1} += a h̄_t + z̄_t R;  R̄ += z̄_tᵀ h_{t−1};
                W̄ += z̄_tᵀ x_t;  b̄ += z̄_t;  ā += ⟨h̄_t, h_{t−1}⟩;  γ̄ += ⟨h̄_t, φ(z_t)⟩
iRNN            s_k = g_{k−1} + σ h_{m−1},  z_k = U s_k + W x_m + b,  g_k = g_{k−1} + η_k(φ(z_k) − α s_k),
                h_m = g_K; from ḡ_K = h̄_m, k = K … 1:  η̄_k += ⟨ḡ_k, φ(z_k) − α s_k⟩,
                ᾱ −= η_k ⟨ḡ_k, s_k⟩,  z̄_k = η_k ḡ_k ⊙ φ'(z_k),  s̄_k = z̄_k U − α η_k ḡ_k,
                Ū += z̄_kᵀ s_k,  c̄ += z̄_k,  ḡ_{k−1} = ḡ_k + s̄_k,  h̄_{m−1} += σ s̄_k;
                then h̄_{m−1} += ḡ_0 when g_0 = h_{m−1};  W̄ += c̄ᵀ x_m,  b̄ += c̄
GRU             ā_n = h̄ (1 − z) φ'(a_n),  ā_z = h̄ (h − n) z(1 − z),  ā_r = ā_n q r(1 − r)  (q = W_hn h + b_hn);
                ḡ^x = [ā_r | ā_z | ā_n],  ḡ^h = [ā_r | ā_z | ā_n r];  h̄_{t−1} += h̄ z + ḡ^h W_hh;
                W̄_ih += ḡ^xᵀ x,  b̄_ih += ḡ^x,  W̄_hh += ḡ^hᵀ h_{t−1},  b̄_hh += ḡ^h
LSTM            ā_o = h̄ φ(c') o(1 − o),  c̄ = c̄' + h̄ o φ'(c'),  ā_i = c̄ g i(1 − i),  ā_f = c̄ c f(1 − f),
                ā_g = c̄ i φ'(a_g);  ḡ = [ā_i | ā_f | ā_g | ā_o];  c̄_{t−1} = c̄ f,  h̄_{t−1} += ḡ W_hh;
                W̄_ih += ḡᵀ x,  W̄_hh += ḡᵀ h_{t−1},  b̄_ih = b̄_hh += ḡ
stack           layer ℓ's input cotangents x̄ (z̄ W, ḡ^x W_ih, ḡ W_ih) are added to h̄ of layer ℓ − 1's
                outputs (but not to its ∂L/∂s_1: that path is inside step 1's Jacobian)
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...errors import DivergenceError
from . import cells
from .simulate import cell_step, gru_step, irnn_step, lstm_step


@dataclasses.dataclass
class Tape:
    """A form's forward pass: ``H`` (T+1, B, n) the states, ``x`` (T, B, d) the inputs, ``layers``
    the per-layer records (one for a one-layer form)."""

    form: object
    x: np.ndarray
    H: np.ndarray
    layers: list

    @property
    def outputs(self) -> np.ndarray:
        """What a read-out reads: the (top layer's) output h, (T+1, B, hidden)."""
        return self.layers[-1]["out"]

    @property
    def states(self) -> np.ndarray:
        """s_1..s_T as (B, T, n)."""
        return np.swapaxes(self.H[1:], 0, 1)


def _finite(S, t):
    ok = np.isfinite(S).all(axis=1)
    if not ok.all():
        raise DivergenceError(step=t + 1, batch=int(np.argmin(ok)), model="")


# ============================================================================ forward
def _forward_layer(f, x, s0) -> dict:
    """One layer over x (T, B, d) from s0 (B, n): its record (states, what its backward reads)."""
    T, B, _ = x.shape
    D = f.hidden
    act, leak = f.act, f.leak
    rec = {"x": x}
    with np.errstate(all="ignore"):
        if f.kind == "cell":
            H = np.empty((T + 1, B, D))
            H[0] = s0
            Z = np.empty((T, B, D))
            P = np.empty((T, B, D))
            for t in range(T):
                H[t + 1], Z[t], P[t] = cell_step(f.R, f.a, f.gain, H[t], x[t] @ f.W.T + f.b, act, leak)
                _finite(H[t + 1], t)
            rec.update(S=H, out=H, Z=Z, P=P)
        elif f.kind == "irnn":
            H = np.empty((T + 1, B, D))
            H[0] = s0
            Ss = np.empty((T, f.K, B, D))
            Z = np.empty((T, f.K, B, D))
            P = np.empty((T, f.K, B, D))
            for t in range(T):
                e = f.eta[t] if f.eta.shape[0] > 1 else f.eta[0]
                H[t + 1] = irnn_step(f.U, H[t], x[t] @ f.W.T + f.b, e, f.alpha, f.K, f.g0prev, f.sign, act, leak,
                                     S=Ss[t], Z=Z[t], P=P[t])
                _finite(H[t + 1], t)
            rec.update(S=H, out=H, Ss=Ss, Z=Z, P=P)
        elif f.kind == "gru":
            H = np.empty((T + 1, B, D))
            H[0] = s0
            GI = x @ f.W_ih.T + f.b_ih
            gates = []
            for t in range(T):
                H[t + 1], g = gru_step(f.W_hh, f.b_hh, GI[t], H[t], act, leak)
                gates.append(g)
                _finite(H[t + 1], t)
            rec.update(S=H, out=H, gates=gates)
        else:  # lstm
            Hh = np.empty((T + 1, B, D))
            C = np.empty((T + 1, B, D))
            Hh[0], C[0] = s0[:, :D], s0[:, D:]
            gates = []
            for t in range(T):
                a = x[t] @ f.W_ih.T + f.b_ih + Hh[t] @ f.W_hh.T + f.b_hh
                Hh[t + 1], C[t + 1], g = lstm_step(a, C[t], act, leak)
                gates.append(g)
                _finite(np.concatenate([Hh[t + 1], C[t + 1]], axis=1), t)
            rec.update(S=np.concatenate([Hh, C], axis=2), out=Hh, C=C, gates=gates)
    return rec


def forward(form, x, h0) -> Tape:
    """The taped forward pass of ``form`` over x (T, B, d) from h0 (B, n); a non-finite state
    raises ``DivergenceError`` (the 1-based step, the batch row)."""
    layers = form.layers if form.kind == "stack" else (form,)
    offs = np.concatenate([[0], np.cumsum([f.state_size for f in layers])])
    recs, inp = [], x
    for ell, f in enumerate(layers):
        rec = _forward_layer(f, inp, np.ascontiguousarray(h0[:, offs[ell]:offs[ell + 1]]))
        recs.append(rec)
        inp = rec["out"][1:]
    H = recs[0]["S"] if len(recs) == 1 else np.concatenate([r["S"] for r in recs], axis=2)
    return Tape(form, x, H, recs)


# ============================================================================ backward
def _cot(ext, t, T):
    """The explicit cotangent of step t (0-based) from the last-T' array ``ext``, or None."""
    if ext is None:
        return None
    t0 = T - ext.shape[0]
    return ext[t - t0] if t >= t0 else None


def _arrive(sb, ext, above, t, T):
    """∂L/∂s_t at step t (0-based) once the explicit cotangent of that step (of the outputs, the
    first columns, or of the whole state) and the cotangent through the layer above (outputs) are
    added to the one carried back from step t + 1; and at t = 0 the carried-plus-explicit part
    before the layer above's (∂L/∂s_1 as the caller reports it), else None."""
    e = _cot(ext, t, T)
    if e is not None:
        sb = sb.copy()
        sb[:, :e.shape[1]] += e
    first = sb.copy() if t == 0 else None
    if above is not None:
        sb = sb.copy()
        sb[:, :above.shape[2]] += above[t]
    return sb, first


def _backward_layer(f, rec, ext, above, need_x):
    """One layer backwards; ext (T', B, w) explicit cotangents of its outputs (w = hidden) or of
    its state (w = n), or None; above (T, B, hidden) cotangents through the layer above, or None.
    Returns (grads of the form's arrays, ∂L/∂s_0, ∂L/∂s_1, x̄ or None)."""
    x = rec["x"]
    T, B, d = x.shape
    D = f.hidden
    act, leak = f.act, f.leak
    S = rec["S"]
    n = S.shape[2]
    xbar = np.zeros((T, B, d)) if need_x else None
    sb = np.zeros((B, n))          # ∂L/∂s_t, carried backwards
    dh1 = None
    with np.errstate(all="ignore"):
        if f.kind == "cell":
            g = {"R": np.zeros((D, D)), "W": np.zeros((D, d)), "b": np.zeros(D), "a": 0.0, "gain": 0.0}
            for t in range(T - 1, -1, -1):
                sb, first = _arrive(sb, ext, above, t, T)
                dh1 = dh1 if first is None else first
                hp = S[t]
                z = rec["Z"][t]
                g["a"] += float(np.sum(sb * hp))
                g["gain"] += float(np.sum(sb * rec["P"][t]))
                zb = sb * cells.cell_slope(f.gain, z, act, leak)
                g["R"] += zb.T @ hp
                g["W"] += zb.T @ x[t]
                g["b"] += zb.sum(axis=0)
                if need_x:
                    xbar[t] = zb @ f.W
                sb = f.a * sb + zb @ f.R
            return g, sb, dh1, xbar
        if f.kind == "irnn":
            g = {"U": np.zeros((D, D)), "W": np.zeros((D, d)), "b": np.zeros(D), "eta": np.zeros_like(f.eta),
                 "alpha": 0.0}
            for t in range(T - 1, -1, -1):
                sb, first = _arrive(sb, ext, above, t, T)
                dh1 = dh1 if first is None else first
                row = t if f.eta.shape[0] > 1 else 0
                eta = f.eta[row]
                gb = sb
                hb = np.zeros((B, D))
                cb = np.zeros((B, D))
                for k in range(f.K - 1, -1, -1):
                    s, z = rec["Ss"][t, k], rec["Z"][t, k]
                    g["eta"][row, k] += float(np.sum(gb * cells.drift(s, rec["P"][t, k], f.alpha)))
                    g["alpha"] -= eta[k] * float(np.sum(gb * s))
                    zb = gb * cells.irnn_slope(z, eta[k], act, leak)
                    sbar = zb @ f.U - f.alpha * eta[k] * gb
                    g["U"] += zb.T @ s
                    cb += zb
                    gb = gb + sbar
                    hb += f.sign * sbar
                if f.g0prev:
                    hb += gb
                g["W"] += cb.T @ x[t]
                g["b"] += cb.sum(axis=0)
                if need_x:
                    xbar[t] = cb @ f.W
                sb = hb
            return g, sb, dh1, xbar
        if f.kind == "gru":
            g = {"W_ih": np.zeros_like(f.W_ih), "W_hh": np.zeros_like(f.W_hh), "b_ih": np.zeros_like(f.b_ih),
                 "b_hh": np.zeros_like(f.b_hh)}
            for t in range(T - 1, -1, -1):
                sb, first = _arrive(sb, ext, above, t, T)
                dh1 = dh1 if first is None else first
                hp = S[t]
                gates = rec["gates"][t]
                cn, cnx, cr, cz, z = cells.gru_slopes(hp, gates, act, leak)
                an, az, ar = sb * cnx, sb * cz, sb * cr
                gx = np.concatenate([ar, az, an], axis=1)
                gh = np.concatenate([ar, az, sb * cn], axis=1)
                g["W_ih"] += gx.T @ x[t]
                g["b_ih"] += gx.sum(axis=0)
                g["W_hh"] += gh.T @ hp
                g["b_hh"] += gh.sum(axis=0)
                if need_x:
                    xbar[t] = gx @ f.W_ih
                sb = sb * z + gh @ f.W_hh
            return g, sb, dh1, xbar
        # lstm: s = [h; c]
        g = {"W_ih": np.zeros_like(f.W_ih), "W_hh": np.zeros_like(f.W_hh), "b_ih": np.zeros_like(f.b_ih),
             "b_hh": np.zeros_like(f.b_hh)}
        C = rec["C"]
        for t in range(T - 1, -1, -1):
            sb, first = _arrive(sb, ext, above, t, T)
            dh1 = dh1 if first is None else first
            hbar, cbar = sb[:, :D], sb[:, D:]
            gates = rec["gates"][t]
            ci, cf, cg, ho, hc = cells.lstm_slopes(C[t], C[t + 1], gates, act, leak)
            ao = hbar * ho
            cb = cbar + hbar * hc
            ai, af, ag = cb * ci, cb * cf, cb * cg
            ga = np.concatenate([ai, af, ag, ao], axis=1)
            g["W_ih"] += ga.T @ x[t]
            g["W_hh"] += ga.T @ S[t, :, :D]
            g["b_ih"] += ga.sum(axis=0)
            if need_x:
                xbar[t] = ga @ f.W_ih
            sb = np.concatenate([ga @ f.W_hh, cb * gates.f], axis=1)
        g["b_hh"] = g["b_ih"].copy()
        return g, sb, dh1, xbar


def backward(tape: Tape, ext):
    """Cotangents of the form's arrays, ∂L/∂s_0 and ∂L/∂s_1 from the explicit cotangents ``ext``
    (T', B, w) of the last T' steps (module docstring)."""
    form = tape.form
    layers = form.layers if form.kind == "stack" else (form,)
    L = len(layers)
    offs = np.concatenate([[0], np.cumsum([f.state_size for f in layers])])
    on_state = ext.shape[2] == form.state_size and form.state_size != form.hidden
    grads, dh0, dh1 = {}, [None] * L, [None] * L
    above = None
    for ell in range(L - 1, -1, -1):
        own = ext[:, :, offs[ell]:offs[ell + 1]] if on_state else (ext if ell == L - 1 else None)
        g, dh0[ell], dh1[ell], above = _backward_layer(layers[ell], tape.layers[ell], own, above, ell > 0)
        grads.update({f"layer{ell + 1}_{k}": v for k, v in g.items()} if form.kind == "stack" else g)
    cat = (lambda parts: parts[0]) if L == 1 else (lambda parts: np.concatenate(parts, axis=1))
    return grads, cat(dh0), cat(dh1)

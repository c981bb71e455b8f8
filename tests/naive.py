"""Slow, obviously-correct references for the dynlab kernels.

Everything here is written with Python floats and ``math``: explicit loops over units, no
matrix products, no NumPy ufuncs in the updates.  NumPy appears only to turn arrays into
nested lists on the way in (``.tolist()``) and back into an array on the way out.  The
equations are typed in straight from the papers / model docstrings, reading the model's own
fields (``M`` for the AntisymmetricRNN, ``alpha``/``beta`` for FastRNN, ``U`` for the RIN, the
factors ``V``/``H`` for a low-rank iRNN, the paper's parameters ``params()`` of an eq. 9 iRNN)
— never the derived matrices the kernels use (``gated_form()``, ``recurrent``, ``IRNN.U`` of a
low-rank or eq. 9 model), so a mistake in those derivations shows up as a mismatch.

Each ``simulate_*`` function runs ONE sequence: x is (T, d), h0 is (D,) (zeros if None), and
the result is a (T, D) NumPy array of h_1..h_T.
"""
from __future__ import annotations

import math

import numpy as np


# --------------------------------------------------------------------------- activations
def phi(name: str, z: float, leak: float = 0.01) -> float:
    """φ(z) for one Python float."""
    if name == "tanh":
        return math.tanh(z)
    if name == "relu":
        return z if z > 0.0 else 0.0
    if name == "sigmoid":
        # 1/(1+e^{-z}); written with e^{-|z|} so math.exp never overflows
        if z >= 0.0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)
    if name == "identity":
        return z
    if name == "leaky-relu":
        return z if z >= 0.0 else leak * z
    if name == "abs":
        return math.fabs(z)
    raise ValueError(name)


def dphi(name: str, z: float, leak: float = 0.01) -> float:
    """φ'(z) for one Python float (right derivative at kinks)."""
    if name == "tanh":
        t = math.tanh(z)
        return 1.0 - t * t
    if name == "relu":
        return 1.0 if z >= 0.0 else 0.0
    if name == "sigmoid":
        s = phi("sigmoid", z)
        return s * (1.0 - s)
    if name == "identity":
        return 1.0
    if name == "leaky-relu":
        return 1.0 if z >= 0.0 else leak
    if name == "abs":
        return 1.0 if z >= 0.0 else -1.0
    raise ValueError(name)


def sigmoid(v: float) -> float:
    return phi("sigmoid", v)


# --------------------------------------------------------------------------- helpers
def _lists(x, h0, D):
    xs = np.asarray(x, dtype=np.float64).tolist()
    h = [0.0] * D if h0 is None else [float(v) for v in np.asarray(h0, dtype=np.float64).tolist()]
    return xs, h


def _drive(W, b, xt):
    """c_i = Σ_j W_ij x_j + b_i, one unit at a time."""
    D, d = len(W), len(xt)
    out = []
    for i in range(D):
        acc = b[i]
        for j in range(d):
            acc += W[i][j] * xt[j]
        out.append(acc)
    return out


def _matvec(R, v):
    D = len(v)
    out = []
    for i in range(D):
        acc = 0.0
        for j in range(D):
            acc += R[i][j] * v[j]
        out.append(acc)
    return out


def _gated(R, W, b, a, gain, act, leak, x, h0):
    """h_t = a h_{t-1} + gain φ(R h_{t-1} + W x_t + b)."""
    D = len(R)
    xs, h = _lists(x, h0, D)
    out = []
    for xt in xs:
        c = _drive(W, b, xt)
        Rh = _matvec(R, h)
        h = [a * h[i] + gain * phi(act, Rh[i] + c[i], leak) for i in range(D)]
        out.append(h)
    return np.array(out, dtype=np.float64).reshape(len(xs), D)


# --------------------------------------------------------------------------- models
def simulate_rnn(m, x, h0=None):
    """Elman RNN: h_t = φ(U h_{t-1} + W x_t + b)."""
    return _gated(m.U.tolist(), m.W.tolist(), m.b.tolist(), 0.0, 1.0, m.activation, m.leak, x, h0)


def simulate_fastrnn(m, x, h0=None):
    """FastRNN: h_t = σ(β) h_{t-1} + σ(α) φ(U h_{t-1} + W x_t + b)."""
    return _gated(m.U.tolist(), m.W.tolist(), m.b.tolist(), sigmoid(m.beta), sigmoid(m.alpha),
                  m.activation, m.leak, x, h0)


def simulate_antisymmetric(m, x, h0=None):
    """AntisymmetricRNN: h_t = h_{t-1} + ε φ((M − Mᵀ − γI) h_{t-1} + W x_t + b), A built entrywise."""
    M = m.M.tolist()
    D = len(M)
    A = [[M[i][j] - M[j][i] - (m.gamma if i == j else 0.0) for j in range(D)] for i in range(D)]
    return _gated(A, m.W.tolist(), m.b.tolist(), 1.0, m.eps, m.activation, m.leak, x, h0)


def simulate_rin(m, x, h0=None):
    """RIN: h_t = φ(W x_t + (U + I) h_{t-1} + b), U + I built entrywise."""
    U = m.U.tolist()
    D = len(U)
    R = [[U[i][j] + (1.0 if i == j else 0.0) for j in range(D)] for i in range(D)]
    return _gated(R, m.W.tolist(), m.b.tolist(), 0.0, 1.0, m.activation, m.leak, x, h0)


def irnn_matrix(m):
    """The iRNN's U parameter as nested lists: the dense U, or I + V H summed entrywise from the
    factors (for eq. 9 this is the paper's U = P, not the step's P U)."""
    if m.V is None:
        return np.asarray(m.params()["U"]).tolist()
    V, H = m.V.tolist(), m.H.tolist()
    D, r = len(V), len(H)
    U = []
    for i in range(D):
        row = []
        for j in range(D):
            acc = 1.0 if i == j else 0.0
            for q in range(r):
                acc += V[i][q] * H[q][j]
            row.append(acc)
        U.append(row)
    return U


def _irnn_arguments(m, U, c, s):
    """What φ sees in one inner step, typed from the paper: U s + c (eq. 5), or P[U s + c] with
    P = U (eq. 9, ``m.P == "U"``); c = W x + b from the model's parameters."""
    D = len(U)
    Us = _matvec(U, s)
    z = [Us[i] + c[i] for i in range(D)]
    return _matvec(U, z) if getattr(m, "P", "I") == "U" else z


def _irnn_drive(m, xt):
    p = m.params()
    return _drive(np.asarray(p["W"]).tolist(), np.asarray(p["b"]).tolist(), xt)


def _eta(m, t, k):
    """η_t^k from a scalar, a (K,) or a (T, K) table (0-based t and k)."""
    eta = m.eta
    if isinstance(eta, float):
        return eta
    e = np.asarray(eta)
    if e.ndim == 1:
        return float(e[k])
    return float(e[t if e.shape[0] > 1 else 0, k])


def simulate_irnn(m, x, h0=None):
    """iRNN eq. 5: g_0 = 0 or h_{m-1};
    g_k = g_{k-1} + η_m^k (φ(U(g_{k-1} ± h_{m-1}) + W x_m + b) − α(g_{k-1} ± h_{m-1})), h_m = g_K;
    eq. 9 (``P="U"``): φ(P[U(g_{k-1} ± h_{m-1}) + W x_m + b]) with P = U in its place."""
    U = irnn_matrix(m)
    D = len(U)
    sgn = float(m.sign)
    xs, h = _lists(x, h0, D)
    out = []
    for t, xt in enumerate(xs):
        c = _irnn_drive(m, xt)
        g = list(h) if m.g0 == "previous" else [0.0] * D
        for k in range(m.K):
            e = _eta(m, t, k)
            s = [g[i] + sgn * h[i] for i in range(D)]
            z = _irnn_arguments(m, U, c, s)
            g = [g[i] + e * (phi(m.activation, z[i], m.leak) - m.alpha * s[i]) for i in range(D)]
        h = g
        out.append(h)
    return np.array(out, dtype=np.float64).reshape(len(xs), D)


def _ctrnn_f(U, c, y, tau, alpha, act, leak):
    Uy = _matvec(U, y)
    return [(-alpha * y[i] + phi(act, Uy[i] + c[i], leak)) / tau for i in range(len(y))]


def simulate_ctrnn(m, x, h0=None):
    """CTRNN τ ġ = −α g + φ(U g + W x_m + b), x held constant over each interval of length dt,
    integrated with ``substeps`` fixed steps of explicit Euler or classical RK4 per interval."""
    if m.method not in ("euler", "rk4"):
        raise ValueError("naive CTRNN covers the fixed-step methods only")
    U, W, b = m.U.tolist(), m.W.tolist(), m.b.tolist()
    D = len(U)
    xs, g = _lists(x, h0, D)
    hs = m.dt / m.substeps
    out = []

    def f(y, c):
        return _ctrnn_f(U, c, y, m.tau, m.alpha, m.activation, m.leak)

    for xt in xs:
        c = _drive(W, b, xt)
        for _ in range(m.substeps):
            k1 = f(g, c)
            if m.method == "euler":
                g = [g[i] + hs * k1[i] for i in range(D)]
                continue
            k2 = f([g[i] + 0.5 * hs * k1[i] for i in range(D)], c)
            k3 = f([g[i] + 0.5 * hs * k2[i] for i in range(D)], c)
            k4 = f([g[i] + hs * k3[i] for i in range(D)], c)
            g = [g[i] + hs / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]) for i in range(D)]
        out.append(g)
    return np.array(out, dtype=np.float64).reshape(len(xs), D)


def _gate_rows(M, k, D):
    """Rows k·D … (k+1)·D − 1 of a gate-stacked matrix or vector given as nested lists."""
    return M[k * D:(k + 1) * D]


def step_gru(m, xt, h):
    """One step of PyTorch's GRU for one sequence (lists in, list out), gates r, z, n typed in
    from torch.nn.GRU's documentation, reading the stacked W_ih, W_hh, b_ih, b_hh by blocks:

        r = σ(W_ir x + b_ir + W_hr h + b_hr),   z = σ(W_iz x + b_iz + W_hz h + b_hz),
        n = φ(W_in x + b_in + r (W_hn h + b_hn)),   h' = (1 − z) n + z h."""
    D = len(h)
    Wi, Wh, bi, bh = m.W_ih.tolist(), m.W_hh.tolist(), m.b_ih.tolist(), m.b_hh.tolist()
    ir, iz, in_ = (_drive(_gate_rows(Wi, k, D), _gate_rows(bi, k, D), xt) for k in range(3))
    hr, hz, hn = (_drive(_gate_rows(Wh, k, D), _gate_rows(bh, k, D), h) for k in range(3))
    out = []
    for i in range(D):
        r = sigmoid(ir[i] + hr[i])
        z = sigmoid(iz[i] + hz[i])
        n = phi(m.activation, in_[i] + r * hn[i], m.leak)
        out.append((1.0 - z) * n + z * h[i])
    return out


def step_lstm(m, xt, s):
    """One step of PyTorch's LSTM on s = [h; c] (lists), gates i, f, g, o from torch.nn.LSTM's
    documentation:  c' = f c + i g,  h' = o φ(c');  returns [h'; c']."""
    D = len(s) // 2
    h, c = s[:D], s[D:]
    Wi, Wh, bi, bh = m.W_ih.tolist(), m.W_hh.tolist(), m.b_ih.tolist(), m.b_hh.tolist()
    pre = [[a + b for a, b in zip(_drive(_gate_rows(Wi, k, D), _gate_rows(bi, k, D), xt),
                                  _drive(_gate_rows(Wh, k, D), _gate_rows(bh, k, D), h))] for k in range(4)]
    hs, cs = [], []
    for k in range(D):
        ig, fg, og = sigmoid(pre[0][k]), sigmoid(pre[1][k]), sigmoid(pre[3][k])
        g = phi(m.activation, pre[2][k], m.leak)
        c2 = fg * c[k] + ig * g
        cs.append(c2)
        hs.append(og * phi(m.activation, c2, m.leak))
    return hs + cs


def _step_cell(m, xt, s):
    if m.name == "gru":
        return step_gru(m, xt, s)
    if m.name == "lstm":
        return step_lstm(m, xt, s)
    a, gain, R = _gated_matrix(m)
    c = _drive(m.W.tolist(), m.b.tolist(), xt)
    Rs = _matvec(R, s)
    return [a * s[i] + gain * phi(m.activation, Rs[i] + c[i], m.leak) for i in range(len(s))]


def _output(m, s):
    """The part of a layer's state the layer above reads: h (the first D entries of an LSTM's)."""
    return s[:m.hidden]


def simulate_map(m, x, h0=None):
    """A GRU, an LSTM or a stack of layers, stepped one time step at a time (a stack: every
    layer at step t, bottom to top, each reading the output of the layer below at t — the
    definition, not the layer-by-layer order of the kernels).  h0 (state_size,) or None."""
    layers = list(m.layers) if m.name == "stack" else [m]
    sizes = [lay.state_size for lay in layers]
    xs, s = _lists(x, h0, sum(sizes))
    parts, o = [], 0
    for n in sizes:
        parts.append(s[o:o + n])
        o += n
    out = []
    for xt in xs:
        inp = xt
        for ell, lay in enumerate(layers):
            parts[ell] = _step_cell(lay, inp, parts[ell])
            inp = _output(lay, parts[ell])
        out.append([v for p in parts for v in p])
    return np.array(out, dtype=np.float64).reshape(len(xs), sum(sizes))


SIMULATE = {
    "gru": simulate_map,
    "lstm": simulate_map,
    "stack": simulate_map,
    "rnn": simulate_rnn,
    "fastrnn": simulate_fastrnn,
    "antisymmetric": simulate_antisymmetric,
    "rin": simulate_rin,
    "irnn": simulate_irnn,
    "ctrnn": simulate_ctrnn,
}


def simulate(m, x, h0=None):
    """Naive simulation of one sequence (x (T, d)) or a batch (x (B, T, d), h0 (B, D) or None)."""
    x = np.asarray(x, dtype=np.float64)
    fn = SIMULATE[m.name]
    if x.ndim == 2:
        return fn(m, x, h0)
    h0s = [None] * x.shape[0] if h0 is None else np.asarray(h0, dtype=np.float64)
    return np.stack([fn(m, x[i], h0s[i]) for i in range(x.shape[0])])


# =========================================================================================
# One-step pre-activations (for tests/test_jacobians.py)
# =========================================================================================
def _gated_matrix(m):
    """(a, gain, R) from the model's own fields, R as nested lists (as ``simulate_*`` above)."""
    if m.name in ("rnn", "fastrnn"):
        a, gain = (0.0, 1.0) if m.name == "rnn" else (sigmoid(m.beta), sigmoid(m.alpha))
        return a, gain, m.U.tolist()
    if m.name == "antisymmetric":
        M = m.M.tolist()
        D = len(M)
        return 1.0, m.eps, [[M[i][j] - M[j][i] - (m.gamma if i == j else 0.0) for j in range(D)] for i in range(D)]
    if m.name == "rin":
        U = m.U.tolist()
        D = len(U)
        return 0.0, 1.0, [[U[i][j] + (1.0 if i == j else 0.0) for j in range(D)] for i in range(D)]
    raise ValueError(m.name)


def step_preactivations(m, x, h, t=0, ctrnn_substeps=64):
    """Every argument z that φ sees in one step h_{t-1} → h_t, as a list of per-stage lists.

    x (d,), h (D,); ``t`` is the 0-based time index (for a per-time η).  Gated cells: the one
    z = R h + W x + b; iRNN: z_1..z_K of the inner steps; CTRNN (Euler/RK4): every stage of
    every substep, in order.  A CTRNN integrated by scipy has no fixed stages: its trajectory
    is sampled by RK4 with ``ctrnn_substeps`` substeps instead.  The Jacobian tests use these
    to keep the points away from the kinks of relu, leaky-relu and abs.
    """
    xt = [float(v) for v in np.asarray(x, dtype=np.float64).tolist()]
    hv = [float(v) for v in np.asarray(h, dtype=np.float64).tolist()]
    D = len(hv)
    c = _drive(m.W.tolist(), m.b.tolist(), xt)
    out = []
    if m.name == "irnn":
        U = irnn_matrix(m)
        c = _irnn_drive(m, xt)
        g = list(hv) if m.g0 == "previous" else [0.0] * D
        sgn = float(m.sign)
        for k in range(m.K):
            e = _eta(m, t, k)
            s = [g[i] + sgn * hv[i] for i in range(D)]
            z = _irnn_arguments(m, U, c, s)
            out.append(z)
            g = [g[i] + e * (phi(m.activation, z[i], m.leak) - m.alpha * s[i]) for i in range(D)]
        return out
    if m.name == "ctrnn":
        U = m.U.tolist()
        rk4 = m.method != "euler"
        n = m.substeps if m.method in ("euler", "rk4") else ctrnn_substeps
        hs = m.dt / n
        g = list(hv)

        def f(y):
            Uy = _matvec(U, y)
            z = [Uy[i] + c[i] for i in range(D)]
            out.append(z)
            return [(-m.alpha * y[i] + phi(m.activation, z[i], m.leak)) / m.tau for i in range(D)]

        for _ in range(n):
            k1 = f(g)
            if not rk4:
                g = [g[i] + hs * k1[i] for i in range(D)]
                continue
            k2 = f([g[i] + 0.5 * hs * k1[i] for i in range(D)])
            k3 = f([g[i] + 0.5 * hs * k2[i] for i in range(D)])
            k4 = f([g[i] + hs * k3[i] for i in range(D)])
            g = [g[i] + hs / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]) for i in range(D)]
        return out
    _, _, R = _gated_matrix(m)
    Rh = _matvec(R, hv)
    return [[Rh[i] + c[i] for i in range(D)]]


# =========================================================================================
# Gradient flow (for tests/test_gradients.py and tests/test_lyapunov.py)
# =========================================================================================
def backward_products(J):
    """P_t = ∂h_T/∂h_t = J_T ⋯ J_{t+1} for t = 1..T (P_T = I), each built from scratch.

    J (T, D, D), J[t-1] = ∂h_t/∂h_{t-1}.  O(T²) matrix products, no reuse between t, no
    scaling: the obviously-correct twin of the one-pass backward recursion.  Returns (T, D, D).
    """
    T, D, _ = J.shape
    out = np.empty((T, D, D))
    for t in range(1, T + 1):
        P = np.eye(D)
        for s in range(T, t, -1):
            P = P @ J[s - 1]
        out[t - 1] = P
    return out


def norm2(M):
    """The spectral norm by np.linalg.norm(ord=2) (LAPACK SVD), one matrix at a time."""
    return np.array([np.linalg.norm(m, ord=2) for m in M])


def fd_final_state_jacobian(m, x, h, eps=1e-6):
    """∂h_T/∂h by central differences of ``simulate`` (the slow reference above) started at h.

    x (n, d) the inputs after the state h; returns the (D, D) matrix ∂h_n/∂h.  Error
    O(eps²) truncation + O(2⁻⁵³/eps) rounding, ≈ 1e-9 relative for eps = 1e-6.
    """
    h = np.asarray(h, dtype=np.float64)
    D = h.shape[0]
    out = np.empty((D, D))
    for j in range(D):
        e = np.zeros(D)
        e[j] = eps
        out[:, j] = (simulate(m, x, h + e)[-1] - simulate(m, x, h - e)[-1]) / (2 * eps)
    return out


# --------------------------------------------------------------------------- implicit networks
def implicit_unrolled_grads(m, x, weights, K):
    """Backprop through K Jacobi iterations of an implicit net from Z = 0, written per layer.

    Layer 1: y1 ← f(W y1 + Q x + R y2 + T); layer 2: y2 ← f(W2 y2 + Q2 y1 + T2) (both from the
    previous iterate).  The loss is L = Σ_i weights_i z_i(K) for the stacked z = [y1; y2].
    Returns (z_K as a list, {param: gradient as nested lists}).  Reads the model's own fields,
    never ``stacked()``.
    """
    act, leak = m.activation, m.leak
    n, nin = m.hidden, m.inputs
    two = m.T2 is not None
    n2 = len(m.T2) if two else 0
    W, Q, T = m.W.tolist(), m.Q.tolist(), m.T.tolist()
    if two:
        W2, Q2, R, T2 = m.W2.tolist(), m.Q2.tolist(), m.R.tolist(), m.T2.tolist()
    xs = [float(v) for v in x]
    y1, y2 = [0.0] * n, [0.0] * n2
    hist = []  # (y1_prev, y2_prev, a1, a2)
    for _ in range(K):
        a1 = []
        for i in range(n):
            s = T[i] + sum(W[i][j] * y1[j] for j in range(n)) + sum(Q[i][j] * xs[j] for j in range(nin))
            if two:
                s += sum(R[i][j] * y2[j] for j in range(n2))
            a1.append(s)
        a2 = []
        for i in range(n2):
            a2.append(T2[i] + sum(W2[i][j] * y2[j] for j in range(n2)) + sum(Q2[i][j] * y1[j] for j in range(n)))
        hist.append((y1, y2, a1, a2))
        y1 = [phi(act, a, leak) for a in a1]
        y2 = [phi(act, a, leak) for a in a2]
    g = {"W": [[0.0] * n for _ in range(n)], "Q": [[0.0] * nin for _ in range(n)], "T": [0.0] * n}
    if two:
        g.update(W2=[[0.0] * n2 for _ in range(n2)], Q2=[[0.0] * n for _ in range(n2)],
                 R=[[0.0] * n2 for _ in range(n)], T2=[0.0] * n2)
    b1 = [float(v) for v in weights[:n]]
    b2 = [float(v) for v in weights[n:]]
    for y1p, y2p, a1, a2 in reversed(hist):
        p1 = [dphi(act, a1[i], leak) * b1[i] for i in range(n)]
        p2 = [dphi(act, a2[i], leak) * b2[i] for i in range(n2)]
        for i in range(n):
            g["T"][i] += p1[i]
            for j in range(n):
                g["W"][i][j] += p1[i] * y1p[j]
            for j in range(nin):
                g["Q"][i][j] += p1[i] * xs[j]
            for j in range(n2):
                g["R"][i][j] += p1[i] * y2p[j]
        for i in range(n2):
            g["T2"][i] += p2[i]
            for j in range(n2):
                g["W2"][i][j] += p2[i] * y2p[j]
            for j in range(n):
                g["Q2"][i][j] += p2[i] * y1p[j]
        nb1 = [sum(W[i][j] * p1[i] for i in range(n)) + sum(Q2[i][j] * p2[i] for i in range(n2)) if two
               else sum(W[i][j] * p1[i] for i in range(n)) for j in range(n)]
        nb2 = [sum(R[i][j] * p1[i] for i in range(n)) + sum(W2[i][j] * p2[i] for i in range(n2)) for j in range(n2)]
        b1, b2 = nb1, nb2
    return y1 + y2, g

"""The BPTT tape's jitted loops (``dynlab.train.backprop``): the iRNN's, the GRU's and the LSTM's
taped forward and backward passes, each ONE numba call over the whole sequence with the GIL
released — per step the product (BLAS, through ``np.dot``; in calls of ``rows`` rows each,
``loops.dot_rows`` / ``_arrays.gemm_rows``) and one fused element-wise pass, no Python
between the steps.  Arrays only (no models); each kernel reads and writes the arrays as
documented; the rules are those of ``dynlab.backends.reference.bptt`` and the per-element
arithmetic (the updates, the Jacobian coefficients whose transposes carry the cotangents back)
the cells' (``dynlab.backends.cells``).  φ is ``loops``'s vectorised tanh/sigmoid (≤ 2–3 ulp),
dispatched once per row.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...config import NUMBA_CACHE
from .. import cells
from .loops import _VEC, dot_rows, dphi_given, gru_other, gru_tanh, lstm_other, lstm_tanh, phi_other, tanh_f64

_INF = float("inf")


# The step kernels below, like the forward loops further down, address each gate block through
# its own 1-D row view: with the blocks indexed in one array at a run-time offset D the unit
# loop does not vectorise (LLVM cannot rule out that the stores at j and D + j overlap the loads
# at 2D + j, and the pass runs several times slower).

@njit(nogil=True, **_VEC)
def lstm_backward(a, tc, c_prev, hb, cb, dg, dt, tanh, out):
    """One LSTM step backwards.  a (B, 4D): the gates [i | f | o | g] (read); out (B, 4D) ← their
    pre-activations' cotangents [ā_i | ā_f | ā_o | ā_g]; tc = φ(c_t); hb = h̄_t (read); cb:
    c̄_t → c̄_{t-1}.  φ'(a_g), φ'(c_t) are 1 − g², 1 − tc² when ``tanh``, else dg, dt."""
    B, D = tc.shape
    for b in range(B):
        ai, af, ao, ag = a[b, :D], a[b, D:2 * D], a[b, 2 * D:3 * D], a[b, 3 * D:]
        oi, of, oo, og = out[b, :D], out[b, D:2 * D], out[b, 2 * D:3 * D], out[b, 3 * D:]
        tr, cpr, hr, cr = tc[b], c_prev[b], hb[b], cb[b]
        dgr = dg[0] if tanh else dg[b]
        dtr = dt[0] if tanh else dt[b]
        for j in range(D):
            i = ai[j]
            f = af[j]
            o = ao[j]
            g = ag[j]
            h = hr[j]
            t = tr[j]
            dtj = cells.dphi_at(cells.TANH, t, t, 0.0) if tanh else dtr[j]
            dgj = cells.dphi_at(cells.TANH, g, g, 0.0) if tanh else dgr[j]
            ci, cf, cg, ho, hc = cells.lstm_slopes_at(cpr[j], i, f, g, o, t, dgj, dtj)
            ct = cr[j] + h * hc
            oi[j] = ct * ci
            of[j] = ct * cf
            oo[j] = h * ho
            og[j] = ct * cg
            cr[j] = ct * f


@njit(nogil=True, **_VEC)
def gru_backward(g, n, h_prev, hb, dn, tanh, out, an):
    """One GRU step backwards.  g (B, 3D): [r | z | q] and n, the candidate (read); out (B, 3D) ←
    the cotangents of [a_r | a_z | q], [ā_r | ā_z | ā_n ⊙ r]; an ← ā_n; hb: h̄_t → h̄_t ⊙ z (the
    direct part of h̄_{t-1}; the caller adds out W_hh).  φ'(a_n) is 1 − n² when ``tanh``, else dn."""
    B, D = n.shape
    for b in range(B):
        gr, gz, gq = g[b, :D], g[b, D:2 * D], g[b, 2 * D:]
        orr, oz, oq = out[b, :D], out[b, D:2 * D], out[b, 2 * D:]
        nr, hpr, hr, anr = n[b], h_prev[b], hb[b], an[b]
        dnr = dn[0] if tanh else dn[b]
        for j in range(D):
            r = gr[j]
            z = gz[j]
            q = gq[j]
            nn = nr[j]
            h = hr[j]
            dnj = cells.dphi_at(cells.TANH, nn, nn, 0.0) if tanh else dnr[j]
            cn, cnx, cr, cz, zz = cells.gru_slopes_at(hpr[j], r, z, nn, q, dnj)
            anr[j] = h * cnx
            orr[j] = h * cr
            oz[j] = h * cz
            oq[j] = h * cn
            hr[j] = h * zz


# ----------------------------------------------------------------------------------------
# GRU and LSTM layers: the whole taped loop in one call.  Forward, per step: the augmented rows
# [h_{t−1} | x_t | 1] (the tape's Ha[t]) times Wa (input weights and biases folded in) → the
# gates' pre-activations, then one pass per row that forms the gates, the state and its tape
# entries.  Backward, per step: the step kernel above and the product that carries h̄ back; the
# weight-gradient product Σ_t [h_{t−1} | x_t | 1]ᵀ ḡ_t is taken over chunks of ``chunk`` steps
# as soon as their cotangents are written, while the rows are still in cache (faster than one
# product over the whole sequence at once).


@njit(nogil=True, **_VEC)
def gru_forward(Ha, Wa, X, W_inT, b_in, RZQ, N, DN, has_dn, act, leak, CN, rows):
    """The GRU layer's taped forward pass: per step RZQ[t] = Ha[t] Wa = [a_r | a_z | q] (q =
    W_hn h + b_hn) and the candidate's input part c_n = X[t] W_inT (+ b_in, added below; CN
    (B, D) scratch: c_n is not kept on the tape), then r = σ(a_r), z = σ(a_z) over them,
    n = φ(r q + c_n) → N[t], φ'(a_n) → DN[t] when ``has_dn``, h_t = n + z (h_{t−1} − n) →
    Ha[t+1, :, :D].  Returns the first step t (0-based) whose h_{t+1} is not finite, or −1."""
    T, B, D = N.shape
    for t in range(T):
        dot_rows(Ha[t], Wa, RZQ[t], rows)
        np.dot(X[t], W_inT, CN)
        nb = 0
        for b in range(B):
            gr, gz, gq = RZQ[t, b, :D], RZQ[t, b, D:2 * D], RZQ[t, b, 2 * D:]
            cn, nt, hp, hn = CN[b], N[t, b], Ha[t, b, :D], Ha[t + 1, b, :D]
            if act == 0:
                for j in range(D):
                    v, r, z, n, _a = gru_tanh(gr[j], gz[j], cn[j] + b_in[j], gq[j], hp[j], act, leak)
                    gr[j] = r
                    gz[j] = z
                    nt[j] = n
                    hn[j] = v
                    nb += 0 if abs(v) < _INF else 1
            else:
                dn = DN[t, b] if has_dn else DN[0, 0]
                for j in range(D):
                    v, r, z, n, a = gru_other(gr[j], gz[j], cn[j] + b_in[j], gq[j], hp[j], act, leak)
                    gr[j] = r
                    gz[j] = z
                    nt[j] = n
                    if has_dn:
                        dn[j] = dphi_given(act, a, n, leak)
                    hn[j] = v
                    nb += 0 if abs(v) < _INF else 1
        if nb:
            return t
    return -1


@njit(nogil=True, **_VEC)
def lstm_forward(Ha, Wa, C, A, TC, DG, DT, has_d, act, leak, rows):
    """The LSTM layer's taped forward pass: per step A[t] = Ha[t] Wa = [a_i | a_f | a_o | a_g] →
    [i | f | o | g] = [σ | σ | σ | φ](…) in place, c_t = f c_{t−1} + i g → C[t+1], φ(c_t) → TC[t],
    h_t = o φ(c_t) → Ha[t+1, :, :D], and φ'(a_g) → DG[t], φ'(c_t) → DT[t] when ``has_d``.
    Returns the first step t (0-based) whose c_{t+1} is not finite (h is finite when c is), or −1."""
    T, B, D = TC.shape
    for t in range(T):
        dot_rows(Ha[t], Wa, A[t], rows)
        nb = 0
        for b in range(B):
            ai, af, ao, ag = A[t, b, :D], A[t, b, D:2 * D], A[t, b, 2 * D:3 * D], A[t, b, 3 * D:]
            cp, cn, tc, hn = C[t, b], C[t + 1, b], TC[t, b], Ha[t + 1, b, :D]
            if act == 0:
                for j in range(D):
                    h, c, i, f, g, o, u = lstm_tanh(ai[j], af[j], ag[j], ao[j], cp[j], act, leak)
                    ai[j] = i
                    af[j] = f
                    ao[j] = o
                    ag[j] = g
                    cn[j] = c
                    tc[j] = u
                    hn[j] = h
                    nb += 0 if abs(c) < _INF else 1
            else:
                dg = DG[t, b] if has_d else DG[0, 0]
                dt = DT[t, b] if has_d else DT[0, 0]
                for j in range(D):
                    pre = ag[j]
                    h, c, i, f, g, o, u = lstm_other(ai[j], af[j], pre, ao[j], cp[j], act, leak)
                    ai[j] = i
                    af[j] = f
                    ao[j] = o
                    ag[j] = g
                    cn[j] = c
                    tc[j] = u
                    hn[j] = h
                    if has_d:
                        dg[j] = dphi_given(act, pre, g, leak)
                        dt[j] = dphi_given(act, c, u, leak)
                    nb += 0 if abs(c) < _INF else 1
        if nb:
            return t
    return -1


@njit(inline="always", **_VEC)
def _add_rows(out, v):
    """out += v over (B, D) arrays (inlined: v is read-only or not, one compile either way)."""
    for b in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[b, j] += v[b, j]


@njit(nogil=True, **_VEC)
def _add_into(P, part):
    for i in range(P.shape[0]):
        for j in range(P.shape[1]):
            P[i, j] += part[i, j]


@njit(nogil=True, **_VEC)
def _rows(a, n):
    """The first n (B, m) blocks of a (·, B, m) as one (n·B, m) matrix."""
    return a[:n].reshape(n * a.shape[1], a.shape[2])


@njit(nogil=True, **_VEC)
def _weight_chunk(Ha, lo, hi, Gr, P, part):
    """P += Σ_{t=lo}^{hi−1} Ha[t]ᵀ ḡ_t: one product of the chunk's augmented rows with its
    cotangents Gr ((hi − lo)·B rows, in the chunk buffer)."""
    n = hi - lo
    np.dot(Ha[lo:hi].reshape(n * Ha.shape[1], Ha.shape[2]).T, Gr, part)
    _add_into(P, part)


@njit(nogil=True, **_VEC)
def gru_backward_all(Ha, RZQ, N, DN, has_dn, W, X, Wx, ext, has_ext, above, has_above, need_x, hb, dh1, G, AN,
                     P, W_in_bar, b_n, xbar, work, rows):
    """The GRU layer's backward pass (the tape is only read): per step t = T … 1, h̄_t += ext[t]
    (when ``has_ext``; ext (T', B, D) holds the last T' steps' only), a copy to dh1 at t = 1
    (∂L/∂h_1, before the layer above's part), += above[t] (when ``has_above``), then
    ``gru_backward`` and h̄_{t−1} = h̄_t z + ḡ_t W_hh with ḡ_t = [ā_r | ā_z | ā_n r].  hb: zeros
    on entry, ∂L/∂h_0 on exit.  The cotangents of a chunk of steps (G (chunk, B, 3D), AN (chunk,
    B, D)) are summed into the parameter gradients while in cache: P (D+d+1, 3D) += Σ_t Ha[t]ᵀ ḡ_t,
    W_in_bar (D, d) += Σ_t ā_nᵀ x_t, b_n += Σ ā_n and, when ``need_x``, xbar[t] = ḡ_t[:, :2D]
    W_ih[:2D] + ā_n W_in (the layer's input cotangents; Wx (4D, d) = [W_ir; W_iz; 0; W_in]).
    work: a tuple of scratch arrays (tmp (B, D), part (D+d+1, 3D), part_in (D, d), xtmp
    (chunk·B, d))."""
    T, B, D = N.shape
    chunk = G.shape[0]
    d = X.shape[2]
    tmp, part, part_in, xtmp = work
    tanh = not has_dn
    hi = T
    lo = max(0, T - chunk)
    t0 = T - ext.shape[0]              # ext holds the last T − t0 steps' cotangents
    for t in range(T - 1, -1, -1):
        if has_ext and t >= t0:
            _add_rows(hb, ext[t - t0])
        if t == 0:
            dh1[...] = hb
        if has_above:
            _add_rows(hb, above[t])
        k = t - lo
        gru_backward(RZQ[t], N[t], Ha[t, :, :D], hb, DN[t] if has_dn else DN[0], tanh, G[k], AN[k])
        dot_rows(G[k], W, tmp, rows)
        _add_rows(hb, tmp)
        if t == lo:
            n = hi - lo
            Gr, Ar = _rows(G, n), _rows(AN, n)
            _weight_chunk(Ha, lo, hi, Gr, P, part)
            Xr = X[lo:hi].reshape(n * B, d)
            np.dot(Ar.T, Xr, part_in)
            _add_into(W_in_bar, part_in)
            for i in range(n * B):
                for j in range(D):
                    b_n[j] += Ar[i, j]
            if need_x:
                xb = xbar[lo:hi].reshape(n * B, d)
                np.dot(Gr, Wx[:3 * D], xb)
                np.dot(Ar, Wx[3 * D:], xtmp[:n * B])
                _add_into(xb, xtmp[:n * B])
            hi = lo
            lo = max(0, hi - chunk)


@njit(nogil=True, **_VEC)
def lstm_backward_all(Ha, C, A, TC, DG, DT, has_d, W, W_ih, eh, has_eh, ec, has_ec, above, has_above, need_x,
                      hb, cb, dh1, G, P, part, xbar, rows):
    """The LSTM layer's backward pass (the tape is only read): per step t = T … 1, h̄_t += eh[t],
    c̄_t += ec[t] (when given; (T', B, D) each, the last T' steps' only), [h̄ | c̄] copied to dh1
    at t = 1, h̄_t += above[t] (when ``has_above``), then ``lstm_backward`` (the gates'
    cotangents ḡ_t into the chunk buffer G (chunk, B, 4D), c̄_{t−1} in cb) and
    h̄_{t−1} = ḡ_t W_hh.  hb, cb: zeros on entry, ∂L/∂h_0, ∂L/∂c_0 on exit.  Per chunk of steps,
    in cache: P (D+d+1, 4D) += Σ_t Ha[t]ᵀ ḡ_t and, when ``need_x``, xbar[t] = ḡ_t W_ih (the
    layer's input cotangents)."""
    T, B, D = TC.shape
    chunk = G.shape[0]
    d = xbar.shape[2]
    tanh = not has_d
    hi = T
    lo = max(0, T - chunk)
    t0 = T - eh.shape[0] if has_eh else T - ec.shape[0]    # eh, ec: the last T − t0 steps
    for t in range(T - 1, -1, -1):
        if has_eh and t >= t0:
            _add_rows(hb, eh[t - t0])
        if has_ec and t >= t0:
            _add_rows(cb, ec[t - t0])
        if t == 0:
            dh1[:, :D] = hb
            dh1[:, D:] = cb
        if has_above:
            _add_rows(hb, above[t])
        k = t - lo
        lstm_backward(A[t], TC[t], C[t], hb, cb, DG[t] if has_d else DG[0], DT[t] if has_d else DT[0], tanh, G[k])
        dot_rows(G[k], W, hb, rows)
        if t == lo:
            n = hi - lo
            Gr = _rows(G, n)
            _weight_chunk(Ha, lo, hi, Gr, P, part)
            if need_x:
                np.dot(Gr, W_ih, xbar[lo:hi].reshape(n * B, d))
            hi = lo
            lo = max(0, hi - chunk)


# ----------------------------------------------------------------------------------------
# The iRNN's taped forward and backward inner steps (eq. 5; the backprop module docstring):
# after each product z = s_{k-1} Uᵀ (BLAS), ONE pass does the rest of the inner step — the
# input drive c = W x_m + b added, a = φ(z + c) and φ' stored on the tape, g updated, and the
# next step's s written straight into its tape slot — and backwards two passes bracket the
# product z̄ U: one forms z̄ and the two inner products η̄, ⟨ḡ, s⟩ need, one updates ḡ and h̄.
# φ is loops.py's vectorised tanh/sigmoid (≤ 2–3 ulp), dispatched once per call, outside the
# loops.


# The two kernels below repeat their unit loop, once with tanh written out and once per the
# other activations, and the last inner step is a kernel of its own, on purpose: with the
# activation dispatched inside a shared inline helper the taped forward pass (B = 64, D = 128,
# K = 5, T = 200, one thread) took 0.129 s instead of 0.062 s (the loop no longer vectorised),
# and closing the time step in a second pass took 0.065 s.

@njit(nogil=True, **_VEC)
def irnn_tape_inner(z, c, s, g, hp, A, Dp, s_next, e, alpha, sign, act, leak):
    """An inner step k < K of the taped forward pass: a = φ(z + c) → A, φ' → Dp (not for tanh
    and sigmoid, whose φ' the backward pass takes from a), g ← g + e (a − α s),
    s_next ← g + sign·h_{m−1} (hp)."""
    B, D = z.shape
    for b in range(B):
        if act == 0:
            for j in range(D):
                a = tanh_f64(z[b, j] + c[b, j])
                A[b, j] = a
                gv = cells.irnn_out(g[b, j], s[b, j], a, e, alpha)
                g[b, j] = gv
                s_next[b, j] = gv + sign * hp[b, j]
        else:
            for j in range(D):
                zz = z[b, j] + c[b, j]
                a = phi_other(act, zz, leak)
                A[b, j] = a
                if act != 2:
                    Dp[b, j] = dphi_given(act, zz, a, leak)
                gv = cells.irnn_out(g[b, j], s[b, j], a, e, alpha)
                g[b, j] = gv
                s_next[b, j] = gv + sign * hp[b, j]


@njit(nogil=True, **_VEC)
def irnn_tape_last(z, c, s, g, A, Dp, h, s_next, e, alpha, sign, prev, act, leak):
    """The inner step that ends time step m: as ``irnn_tape_inner``, then h_m = g → h, the next
    time step's g_0 (h_m when ``prev``, else 0) → g and s_0 = g_0 + sign·h_m → s_next.
    Returns the number of non-finite entries of h_m."""
    B, D = z.shape
    keep = 1.0 if prev else 0.0
    nb = 0
    for b in range(B):
        if act == 0:
            for j in range(D):
                a = tanh_f64(z[b, j] + c[b, j])
                A[b, j] = a
                hv = cells.irnn_out(g[b, j], s[b, j], a, e, alpha)
                h[b, j] = hv
                g[b, j] = keep * hv
                s_next[b, j] = keep * hv + sign * hv
                nb += 0 if abs(hv) < _INF else 1
        else:
            for j in range(D):
                zz = z[b, j] + c[b, j]
                a = phi_other(act, zz, leak)
                A[b, j] = a
                if act != 2:
                    Dp[b, j] = dphi_given(act, zz, a, leak)
                hv = cells.irnn_out(g[b, j], s[b, j], a, e, alpha)
                h[b, j] = hv
                g[b, j] = keep * hv
                s_next[b, j] = keep * hv + sign * hv
                nb += 0 if abs(hv) < _INF else 1
    return nb


@njit(nogil=True, cache=NUMBA_CACHE, error_model="numpy", fastmath={"contract", "reassoc"})
def irnn_back_pre(gb, S, A, Dp, e, zb, act):
    """Before the product: z̄ = e ḡ ⊙ φ' → zb (φ' = 1 − a² for tanh, a(1 − a) for sigmoid,
    else read from Dp); returns (⟨ḡ, s⟩, ⟨ḡ, a⟩).  (The two sums may be reassociated, so that
    they vectorise: any order is as accurate.)"""
    B, D = gb.shape
    gs = 0.0
    ga = 0.0
    for b in range(B):
        if act == 0:
            for j in range(D):
                v = gb[b, j]
                a = A[b, j]
                gs += v * S[b, j]
                ga += v * a
                zb[b, j] = e * v * cells.dphi_at(cells.TANH, a, a, 0.0)
        elif act == 2:
            for j in range(D):
                v = gb[b, j]
                a = A[b, j]
                gs += v * S[b, j]
                ga += v * a
                zb[b, j] = e * v * cells.dphi_at(cells.SIGMOID, a, a, 0.0)
        else:
            for j in range(D):
                v = gb[b, j]
                gs += v * S[b, j]
                ga += v * A[b, j]
                zb[b, j] = e * v * Dp[b, j]
    return gs, ga


@njit(nogil=True, **_VEC)
def irnn_back_post(sb, gb, hpb, ae, sign):
    """After the product sb = z̄ U: s̄ = sb − α e ḡ, ḡ ← ḡ + s̄, h̄_{m−1} += sign·s̄ (hpb)."""
    B, D = gb.shape
    for b in range(B):
        for j in range(D):
            v = sb[b, j] - ae * gb[b, j]
            gb[b, j] += v
            hpb[b, j] += sign * v


@njit(nogil=True, **_VEC)
def irnn_forward(UT, cin, H, A, Dp, has_dp, eta, alpha, sign, prev, act, leak, z, g, s, rows):
    """The iRNN's whole taped forward pass in one call (no Python between the steps, the GIL
    released): per inner step the product s_{k-1} Uᵀ (BLAS, through ``np.dot``) and one fused
    pass.  H[0] holds h_0 on entry; fills H[1:], A and, when ``has_dp`` (φ' not a function of
    φ), Dp (else a (1, 1, B, D) scratch).  The inner states s are not kept: the backward pass
    recomputes them from h_{m−1} and A (``irnn_inner_states``), in the same operations, so
    bitwise equal; s (2, B, D) is scratch.  Returns the first time step m (0-based) whose
    h_{m+1} is not finite, or −1."""
    T, K = A.shape[0], A.shape[1]
    keep = 1.0 if prev else 0.0
    h0 = H[0]
    B, D = h0.shape
    for b in range(B):
        for j in range(D):
            g[b, j] = keep * h0[b, j]
            s[0, b, j] = keep * h0[b, j] + sign * h0[b, j]
    cur = 0
    for m in range(T):
        for k in range(K):
            dot_rows(s[cur], UT, z, rows)
            dp = Dp[m, k] if has_dp else Dp[0, 0]
            if k < K - 1:
                irnn_tape_inner(z, cin[m], s[cur], g, H[m], A[m, k], dp, s[1 - cur], eta[m, k], alpha, sign,
                                act, leak)
            elif irnn_tape_last(z, cin[m], s[cur], g, A[m, k], dp, H[m + 1], s[1 - cur], eta[m, k], alpha, sign,
                                prev, act, leak):
                return m
            cur = 1 - cur
    return -1


@njit(nogil=True, **_VEC)
def irnn_inner_states(hp, A, eta_m, alpha, sign, prev, Sm, g):
    """s_0 … s_{K−1} of one time step (Sm (K, B, D)) from h_{m−1} (hp) and the tape's
    a_1 … a_K, by the forward pass's own operations (g (B, D) scratch): g_0 = h_{m−1} or 0,
    s_k = g_k + sign·h_{m−1}, g_{k+1} = g_k + η_k (a_k − α s_k)."""
    K, B, D = Sm.shape
    keep = 1.0 if prev else 0.0
    for b in range(B):
        for j in range(D):
            g[b, j] = keep * hp[b, j]
            Sm[0, b, j] = keep * hp[b, j] + sign * hp[b, j]
    for k in range(K - 1):
        e = eta_m[k]
        for b in range(B):
            for j in range(D):
                gv = cells.irnn_out(g[b, j], Sm[k, b, j], A[k, b, j], e, alpha)
                g[b, j] = gv
                Sm[k + 1, b, j] = gv + sign * hp[b, j]


@njit(nogil=True, **_VEC)
def irnn_backward(U, H, A, Dp, has_dp, eta, ext, X, alpha, sign, prev, act, Zm, Sm, Cc, Ubar, Wbar, bbar, work,
                  gs, etab, hb, gb, hpb, sb, dh1, rows):
    """The iRNN's whole backward pass in one call: per time step the inner states s_k
    recomputed (``irnn_inner_states``, into Sm (K, B, D)), then per inner step
    ``irnn_back_pre``, the product z̄ U (BLAS) and ``irnn_back_post``; per time step
    Ū += Σ_k z̄_kᵀ s_{k−1} (one product over the step's K inner steps, in cache) and the input
    drive's cotangent c̄_m = Σ_k z̄_k, which goes to a chunk buffer Cc (chunk, B, D): b̄ += Σ_b c̄_m
    at once and, per chunk of steps while in cache, W̄ += Σ_m c̄_mᵀ x_m (X (T, B, d)), so no
    (T, B, D) array of them is ever written.  ext (T', B, D): ∂L/∂h_t of the last T' ≤ T steps
    (T' = 1 for a loss at the end).  hb: zeros on entry, ∂L/∂h_0 on exit; dh1 ← ∂L/∂h_1.
    work: scratch (part (D, D), part_w (D, d))."""
    T, K, B, D = A.shape
    d = X.shape[2]
    part, part_w = work
    chunk = Cc.shape[0]
    t0 = T - ext.shape[0]
    hi = T
    lo = max(0, T - chunk)
    for m in range(T - 1, -1, -1):
        if m >= t0:
            e_m = ext[m - t0]
            for b in range(B):
                for j in range(D):
                    v = hb[b, j] + e_m[b, j]
                    hb[b, j] = v
                    gb[b, j] = v
                    hpb[b, j] = 0.0
        else:
            for b in range(B):
                for j in range(D):
                    gb[b, j] = hb[b, j]
                    hpb[b, j] = 0.0
        if m == 0:
            dh1[...] = hb
        irnn_inner_states(H[m], A[m], eta[m], alpha, sign, prev, Sm, sb)
        for k in range(K - 1, -1, -1):
            e = eta[m, k]
            gsv, gav = irnn_back_pre(gb, Sm[k], A[m, k], Dp[m, k] if has_dp else A[m, k], e, Zm[k], act)
            gs[m, k] = gsv
            etab[m, k] = gav - alpha * gsv
            dot_rows(Zm[k], U, sb, rows)
            irnn_back_post(sb, gb, hpb, alpha * e, sign)
        np.dot(Zm.reshape(K * B, D).T, Sm.reshape(K * B, D), part)
        _add_into(Ubar, part)
        for b in range(B):              # row by row, k outside j: the row stays in cache
            cr, z0 = Cc[m - lo, b], Zm[0, b]
            for j in range(D):
                cr[j] = z0[j]
            for k in range(1, K):
                zk = Zm[k, b]
                for j in range(D):
                    cr[j] += zk[j]
            hr, hpr, gr = hb[b], hpb[b], gb[b]
            for j in range(D):
                bbar[j] += cr[j]
                hr[j] = hpr[j] + (gr[j] if prev else 0.0)
        if m == lo:
            n = hi - lo
            np.dot(_rows(Cc, n).T, X[lo:hi].reshape(n * B, d), part_w)
            _add_into(Wbar, part_w)
            hi = lo
            lo = max(0, hi - chunk)

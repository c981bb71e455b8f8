"""Slow, obviously-correct references for the MASO analysis (dynlab.analysis.partition).

Python floats and explicit loops, typed in from the MASO paper for the Elman RNN
h^(ℓ,t) = φ(W^(ℓ) h^(ℓ−1,t) + W_r^(ℓ) h^(ℓ,t−1) + b^(ℓ)):

* ``stack_forward`` runs the layers with ``naive.phi`` and records A_σ^(ℓ,t) = diag(φ'(z));
* ``theorem1_matrix`` builds A_RNN^(ℓ), B_RNN^(ℓ) block by block from eq. (8) — block (t, s)
  = 𝒜_{s:t} A_σ^(s) W with 𝒜_{s:t} = ∏_{k=t}^{s+1} A_σ^(k) W_r — and composes the layers as
  Theorem 2 writes it, with list-of-lists products (no NumPy linear algebra);
* ``product_A_h`` is 𝒜_h = ∏_{s=T}^{1} A_σ^(s) W_r by explicit matrix products.
"""
from __future__ import annotations

import numpy as np

import naive


def _mm(A, B):
    return [[sum(A[i][k] * B[k][j] for k in range(len(B))) for j in range(len(B[0]))] for i in range(len(A))]


def _eye(n):
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


def _diag_times(s, M):
    return [[s[i] * M[i][j] for j in range(len(M[0]))] for i in range(len(M))]


def stack_forward(layers, x, h0s):
    """One sequence x (T, d) through RNN layers; returns per layer (states [T][D], slopes [T][D], z [T][D])."""
    out = []
    inp = np.asarray(x, dtype=float).tolist()
    for m, h0 in zip(layers, h0s):
        U, W, b = m.U.tolist(), m.W.tolist(), m.b.tolist()
        D = len(b)
        h = [float(v) for v in h0]
        H, S, Z = [], [], []
        for u in inp:
            z = [sum(W[i][j] * u[j] for j in range(len(u))) + sum(U[i][j] * h[j] for j in range(D)) + b[i]
                 for i in range(D)]
            h = [naive.phi(m.activation, zi, m.leak) for zi in z]
            H.append(h)
            S.append([naive.dphi(m.activation, zi, m.leak) for zi in z])
            Z.append(z)
        out.append((H, S, Z))
        inp = H
    return out


def theorem1_matrix(layers, x, h0s):
    """(A_RNN, B_RNN, h) of one sequence, time stacked in increasing order (dynlab's convention)."""
    fw = stack_forward(layers, x, h0s)
    T = len(x)
    A_tot = None
    B_tot = None
    for ell, (m, h0, (H, S, Z)) in enumerate(zip(layers, h0s, fw)):
        D = m.hidden
        din = m.inputs
        Ur, W, b = m.U.tolist(), m.W.tolist(), m.b.tolist()

        def calA(s, t):  # 𝒜_{s:t} = A_σ^(t) W_r ⋯ A_σ^(s+1) W_r (identity for s = t); 1-based times
            P = _eye(D)
            for k in range(t, s, -1):
                P = _mm(P, _diag_times(S[k - 1], Ur))
            return P

        A = [[0.0] * (T * din) for _ in range(T * D)]
        Bv = [0.0] * (T * D)
        for t in range(1, T + 1):
            for s in range(1, t + 1):
                blk = _mm(calA(s, t), _diag_times(S[s - 1], W))
                for i in range(D):
                    for j in range(din):
                        A[(t - 1) * D + i][(s - 1) * din + j] = blk[i][j]
            acc = [0.0] * D
            for s in range(1, t + 1):
                Bs = [S[s - 1][i] * b[i] for i in range(D)]
                P = calA(s, t)
                for i in range(D):
                    acc[i] += sum(P[i][j] * Bs[j] for j in range(D))
            P0 = calA(0, t)
            for i in range(D):
                acc[i] += sum(P0[i][j] * float(h0[j]) for j in range(D))
                Bv[(t - 1) * D + i] = acc[i]
        if A_tot is None:
            A_tot, B_tot = A, Bv
        else:
            A_tot = _mm(A, A_tot)
            B_tot = [sum(A[i][j] * B_tot[j] for j in range(len(B_tot))) + Bv[i] for i in range(len(Bv))]
    h = [v for row in fw[-1][0] for v in row]
    return np.array(A_tot), np.array(B_tot), np.array(h)


def product_A_h(m, x, h0):
    """𝒜_h = ∏_{s=T}^{1} A_σ^(s) W_r for a one-layer RNN and one sequence."""
    (H, S, Z), = stack_forward([m], x, [h0])
    P = _eye(m.hidden)
    for s in range(len(x), 0, -1):
        P = _mm(P, _diag_times(S[s - 1], m.U.tolist()))
    return np.array(P)


def knn_predict(train_X, train_y, test_X, k):
    """k-NN by brute force: sort (distance², index), count votes, tie → class of the nearest tied neighbour."""
    out = []
    for q in np.asarray(test_X, dtype=float).tolist():
        d = []
        for i, a in enumerate(np.asarray(train_X, dtype=float).tolist()):
            d.append((sum((qi - ai) ** 2 for qi, ai in zip(q, a)), i))
        d.sort()
        labs = [train_y[i] for _, i in d[:k]]
        counts = {}
        for v in labs:
            counts[v] = counts.get(v, 0) + 1
        best = max(counts.values())
        out.append(next(v for v in labs if counts[v] == best))
    return np.array(out)


def hamming(a, b):
    a = np.asarray(a).reshape(len(a), -1).tolist()
    b = np.asarray(b).reshape(len(b), -1).tolist()
    return np.array([[sum(1 for u, v in zip(r, s) if u != v) for s in b] for r in a])

"""Erratum (docs/design.md, *Figures*; the gallery's errata): "SiRNN run over K steps equals iRNN(K)" is not an identity.

With φ = identity, g_0 = 0, b = 0 and x = 0 both maps are linear in closed form:
iRNN(K) one step: s_k = g_k + h_{m-1} obeys s_k = A s_{k-1}, s_0 = h_{m-1}, so
h_m = (A^K − I) h_{m-1}, A = I + η(U − αI);  SiRNN (K = 1) one step: h_m = M h_{m-1},
M = η(U − αI), so K steps give M^K h_0.  The simulations match each closed form to
rounding (1e-12, products of K ≤ 5 matrices of norm ≈ 1), and the two differ at O(1).
"""
import numpy as np

import dynlab as dl


def test_sirnn_over_K_steps_is_not_irnn_K():
    D, K, eta, alpha = 4, 5, 0.3, 1.0
    rng = np.random.default_rng(3)
    U = rng.normal(scale=0.4 / np.sqrt(D), size=(D, D))
    W = np.zeros((D, 1))
    b = np.zeros(D)
    h0 = rng.normal(size=D)
    A = np.eye(D) + eta * (U - alpha * np.eye(D))
    M = eta * (U - alpha * np.eye(D))
    irnn = dl.IRNN(U, W, b, eta=eta, alpha=alpha, K=K, activation="identity")
    sirnn = dl.IRNN(U, W, b, eta=eta, alpha=alpha, K=1, activation="identity")
    h_irnn = dl.simulate(irnn, np.zeros((1, 1)), h0=h0, backend="numpy")["h"].values[-1]
    h_sirnn = dl.simulate(sirnn, np.zeros((K, 1)), h0=h0, backend="numpy")["h"].values[-1]
    assert np.allclose(h_irnn, (np.linalg.matrix_power(A, K) - np.eye(D)) @ h0, rtol=0, atol=1e-12)
    assert np.allclose(h_sirnn, np.linalg.matrix_power(M, K) @ h0, rtol=0, atol=1e-12)
    assert np.linalg.norm(h_irnn - h_sirnn) > 0.1 * np.linalg.norm(h0)

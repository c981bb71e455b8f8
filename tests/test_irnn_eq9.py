"""The iRNN paper's experimental form, eq. 9 (``make_model("irnn", …, P="U")``), against the paper's
own statements, typed in independently of the model's derived matrices:

- the step is K Euler steps of φ(P[U s + W x + b]) − s with P = U (= I + V H), s = g + h_{m-1}
  (tests/naive.py types this in; here, the equilibrium the iteration reaches solves eq. 9 as
  printed, to the solver's tolerance);
- Theorem 1 holds for it: at the equilibrium ∂h_m/∂h_{m-1} = −I (sign +), since eq. 9 is eq. 7's
  argument with U' = P U, W' = P W, b' = P b;
- the parameters saved, loaded, put in Datasets and trained are the paper's V, H, W, b, η, α,
  while ``model.U/W/b`` are the products the kernels use; ``replace`` rebuilds from the
  parameters, so a changed η or V never mixes the two;
- training moves V, H, W, b, η (not P U, P W): the loss falls on a small adding task.

The common battery (tests/battery.py: irnn-K3-eq9-lowrank2, irnn-K3-eq9-dense) runs eq. 9 through
every analysis on every backend, and through the files whose cases come from it (every kernel path
against tests/naive.py, Jacobians and BPTT against finite differences, NetCDF and .npz round trips).
"""
import numpy as np
import pytest

import dynlab as dl
from dynlab.errors import ParameterError
from dynlab.models import IRNN


def _paper_residual(m, x, s):
    """φ(P[U s + W x + b]) − α s with the paper's P = U, W, b (``params()``), typed from eq. 9."""
    from dynlab.activations import phi

    p = m.params()
    U = np.eye(m.hidden) + p["V"] @ p["H"] if "V" in p else p["U"]
    return phi(m.activation, U @ (U @ s + p["W"] @ x + p["b"]), m.leak) - m.alpha * s


def test_step_matrices_are_the_products_and_the_parameters_the_papers():
    m = dl.make_model("irnn", 6, 3, rank=2, P="U", seed=1)
    P = np.eye(6) + m.V @ m.H
    p = m.params()
    assert set(p) == {"V", "H", "W", "b", "eta", "alpha"}
    np.testing.assert_allclose(m.U, P @ P, rtol=0, atol=1e-15)
    np.testing.assert_allclose(m.W, P @ p["W"], rtol=0, atol=1e-15)
    np.testing.assert_allclose(m.b, P @ p["b"], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(m.P_matrix, P)
    # the same random draws as the eq. 5 model: P = "U" changes the form, not the parameters
    m5 = dl.make_model("irnn", 6, 3, rank=2, seed=1)
    for k, v in m5.params().items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(p[k]))
    np.testing.assert_array_equal(m5.P_matrix, np.eye(6))
    assert m.settings()["P"] == "U" and m5.settings()["P"] == "I"
    assert "P='U'" in repr(m) and "P='I'" in repr(m5)


def test_replace_rebuilds_from_the_parameters():
    m = dl.make_model("irnn", 5, 2, rank=1, P="U", seed=0, K=2, eta=0.01)
    r = m.replace(eta=np.array([0.02, 0.03]))
    np.testing.assert_array_equal(r.U, m.U)                 # not P applied twice
    np.testing.assert_array_equal(r.params()["W"], m.params()["W"])
    V2 = 2 * m.V
    r2 = m.replace(V=V2)
    P2 = np.eye(5) + V2 @ m.H
    np.testing.assert_allclose(r2.U, P2 @ P2, atol=1e-15)
    dense = IRNN(np.eye(3) * 0.9, np.ones((3, 1)), np.zeros(3), P="U")
    np.testing.assert_allclose(dense.U, 0.81 * np.eye(3), atol=1e-15)
    np.testing.assert_allclose(dense.replace(U=np.eye(3) * 0.5).U, 0.25 * np.eye(3), atol=1e-15)
    # a low-rank eq. 5 model's replace keeps the factors (it refused before: U and V, H both given)
    low = dl.make_model("irnn", 4, 1, rank=2, seed=0)
    np.testing.assert_array_equal(low.replace(eta=0.3).U, low.U)


def test_bad_form_names_the_parameter():
    with pytest.raises(ParameterError) as info:
        dl.make_model("irnn", 3, 1, P="V", seed=0)
    assert info.value.param == "P"
    with pytest.raises(ParameterError) as info:
        IRNN(np.full((2, 2), 1e200), np.ones((2, 1)), np.zeros(2), P="U")
    assert info.value.param == "U"


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_equilibrium_solves_eq9_as_printed_and_theorem_1_holds(activation):
    """The iteration run to convergence (η = 1 on a contracting P U, K = 200) reaches s with
    φ(P[U s + W x + b]) = s to 1e-12 (‖P U‖₂ ≤ 0.6, so 200 steps leave < 1e-40 of the start);
    there the closed-form step Jacobian ∂h_m/∂h_{m-1} is −I to 1e-10 (Theorem 1, + sign)."""
    rng = np.random.default_rng(0)
    V = -0.3 * np.eye(4) + 0.05 * rng.standard_normal((4, 4))      # rank 4: P = U = I + V H ≈ 0.7 I
    m = IRNN(None, rng.standard_normal((4, 2)), 0.1 * rng.standard_normal(4), V=V, H=np.eye(4), P="U", K=200,
             eta=1.0, activation=activation)
    assert np.linalg.norm(m.U, 2) <= 0.6
    x, hp = rng.standard_normal(2), 0.3 * rng.standard_normal(4)
    h = dl.simulate(m, x[None, :], h0=hp)["h"].values[0]
    s = h + hp
    assert np.max(np.abs(_paper_residual(m, x, s))) <= 1e-12
    eq = dl.irnn_equilibrium(m, x, hp)
    np.testing.assert_allclose(eq["h_eq"].values, h, atol=1e-10)
    J = dl.jacobian_at(m, x[None], hp[None], backend="numpy")[0]
    np.testing.assert_allclose(J, -np.eye(4), atol=1e-10)


def test_every_analysis_runs_on_the_eq9_form():
    m = dl.make_model("irnn", 8, 2, K=3, rank=2, P="U", g0="previous", eta=0.01, activation="relu", seed=0)
    x = dl.tasks.random_walk(steps=30, inputs=2, variance=1.0, seed=0)
    g = dl.gradient_norms(m, x)
    assert np.all(np.isfinite(g["jac_norm"].values)) and g.attrs["P"] == "U"
    sp = dl.spectrum(m, x[None])
    assert np.all(np.isfinite(sp["eig_real"].values))
    ly = dl.lyapunov(m, x, k=2)
    assert np.all(np.isfinite(ly["exponent"].values)) if "exponent" in ly else True
    back = dl.model_from_dataset(g)
    np.testing.assert_array_equal(back.U, m.U)
    assert back.P == "U"


def test_training_moves_the_papers_parameters():
    """Adam on eq. 9's V, H, W, b, η (α held): the step's matrices follow from the new parameters
    and the adding-task loss falls."""
    task = dl.make_task("adding", 10, seed=0, n_train=512, n_val=64, n_test=8)
    m = dl.make_model("irnn", 16, 2, K=2, rank=2, P="U", g0="previous", eta=0.01, activation="relu", seed=0)
    r = dl.train_model(m, task, iterations=120, lr=1e-2, batch=32, record_every=20, progress=False)
    t = r.model
    assert t.P == "U" and t.alpha == m.alpha
    for k in ("V", "H", "W", "b", "eta"):
        assert np.max(np.abs(np.asarray(t.params()[k]) - np.asarray(m.params()[k]))) > 0, k
    P = np.eye(16) + t.V @ t.H
    np.testing.assert_allclose(t.U, P @ P, atol=1e-13)
    loss = r.history["val_loss"].values
    assert loss[-1] < 0.85 * loss[0]        # measured: 0.135 → 0.105

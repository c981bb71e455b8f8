"""The training loop: resume bit-for-bit, diagnostics against independent computations,
the σ_ε effect on ‖𝒜_h‖, and the adding-task demonstration (iRNN beats the baseline, a tanh
RNN of the same size does not)."""
import numpy as np
import pytest

import dynlab
from dynlab.errors import DivergenceError, ParameterError
from dynlab.train import backprop as bp
from dynlab.train.loop import (jacobian_diagnostics, load_checkpoint, resume_training, save_checkpoint,
                               train_model)


def _small_task(name="adding", T=12, **kw):
    return dynlab.tasks.make_task(name, T, seed=1, n_train=256, n_val=64, n_test=64, **kw)


def _irnn(D=6, d=2, **kw):
    kw = {"K": 3, "eta": np.array([0.3, 0.5, 0.7]), "g0": "previous", **kw}
    return dynlab.make_model("irnn", D, d, seed=2, **kw)


def test_resume_continues_bit_for_bit(tmp_path):
    task = _small_task("adding-ternary")
    kw = dict(optimiser="adam", lr=1e-2, batch=16, sigma_eps=0.3, record_every=3, seed=5, learn_h0=True,
              clip=1.0, plateau=2)
    full = train_model(_irnn(), task, iterations=12, **kw)
    half = train_model(_irnn(), task, iterations=7, **kw)
    path = save_checkpoint(tmp_path / "ckpt.npz", half)
    rest = resume_training(path, 5)
    assert rest.iteration == full.iteration == 12
    for k, v in full.model.params().items():
        assert np.array_equal(np.asarray(v), np.asarray(rest.model.params()[k])), k
    for k in bp.READOUT:
        assert np.array_equal(full.readout[k], rest.readout[k]), k
    assert np.array_equal(full.h0, rest.h0)
    # the interrupted run made one extra record at its last iteration (7); everything else is identical
    assert list(rest.history["iteration"].values) == [3, 6, 7, 9, 12]
    shared = rest.history.sel(iteration=full.history["iteration"].values)
    for k in ("loss", "val_loss", "val_accuracy", "jac_norm", "A_h_norm", "dL_dh1_norm", "grad_norm", "lr"):
        np.testing.assert_array_equal(full.history[k].values, shared[k].values, err_msg=k)
    # the checkpoint is also an ordinary weights file
    m = dynlab.load_model(path)
    assert np.array_equal(m.V if m.V is not None else m.U, half.model.U)


def test_checkpoint_state_roundtrips(tmp_path):
    res = train_model(_irnn(), _small_task(), iterations=4, lr=1e-2, batch=8, record_every=2)
    st = load_checkpoint(save_checkpoint(tmp_path / "c.npz", res))
    assert st["start"] == 4 and st["optimiser"].t == 4
    for slot, d in res.optimiser.slots.items():
        for key, arr in d.items():
            assert np.array_equal(st["optimiser"].slots[slot][key], arr)
    with pytest.raises(ParameterError, match="resume"):
        dynlab.save_model(res.model, tmp_path / "plain.npz")
        load_checkpoint(tmp_path / "plain.npz")


@pytest.mark.parametrize("name,kw", [("irnn", dict(K=3, eta=0.4, g0="previous")),
                                     ("rnn", dict(activation="leaky-relu", weight_scale=1.1)),
                                     ("fastrnn", dict())])
def test_jacobian_diagnostics_match_finite_difference_jacobians(name, kw):
    """‖∂h_T/∂h_0‖, ‖∂h_T/∂h_1‖, ‖∂h_T/∂h_{T-1}‖ against the SVD of central-difference Jacobians of
    the forward map (δ = 1e-6: truncation ~1e-12, rounding ~1e-10 relative; tolerance 1e-6)."""
    D, T = 4, 9
    m = dynlab.make_model(name, D, 2, seed=3, **kw)
    x = np.random.default_rng(0).standard_normal((1, T, 2))
    h0 = 0.3 * np.random.default_rng(1).standard_normal((1, D))
    dg = jacobian_diagnostics(m, x, h0)

    def hT_from(t, h):  # h_T as a function of h_t
        if t == 0:
            return bp.forward(m, x, h[None]).H[-1, 0]
        return bp.forward(m, x[:, t:], h[None]).H[-1, 0]

    H = bp.forward(m, x, h0).H[:, 0]
    norms = {}
    for t in (0, 1, T - 1):
        J = np.empty((D, D))
        for j in range(D):
            e = np.zeros(D)
            e[j] = 1e-6
            J[:, j] = (hT_from(t, H[t] + e) - hT_from(t, H[t] - e)) / 2e-6
        norms[t] = np.linalg.svd(J, compute_uv=False)[0]
    assert dg["A_h_norm"][0] == pytest.approx(norms[0], rel=1e-6)
    assert dg["jac_norm"][0] == pytest.approx(norms[1], rel=1e-6)
    assert dg["step_norm"][0] == pytest.approx(norms[T - 1], rel=1e-6)
    assert dg["ratio"][0] == pytest.approx(norms[1] / norms[T - 1], rel=1e-6)


def test_history_dataset_follows_the_data_contract():
    task = _small_task("copy", T=5)
    res = train_model(dynlab.make_model("rnn", 8, task.inputs, seed=0), task, iterations=6, batch=8,
                      record_every=3, lr=1e-2)
    h = res.history
    assert list(h["iteration"].values) == [3, 6]
    for k in ("loss", "val_loss", "val_accuracy", "jac_norm", "step_norm", "ratio", "A_h_norm", "dL_dh1_norm",
              "dL_dWr_norm", "grad_norm", "lr"):
        assert h[k].dims == ("iteration",) and "long_name" in h[k].attrs and "units" in h[k].attrs
    for k in ("model", "seed", "backend", "dynlab_version", "command", "task", "baseline"):
        assert k in h.attrs
    assert h.attrs["baseline"] == pytest.approx(10 * np.log(8) / 25)
    # the recorded ‖∂L/∂W_r‖ is the Frobenius norm of the U gradient at that iteration's batch
    assert np.all(h["dL_dWr_norm"].values > 0)
    again = dynlab.model_from_dataset(h)
    assert np.array_equal(again.U, res.model.U)


def test_divergence_names_the_iteration_and_keeps_the_history():
    task = _small_task(T=30)
    m = dynlab.make_model("rnn", 6, 2, seed=0, activation="identity", weight_scale=1.0)
    with pytest.raises(DivergenceError, match="training iteration") as err:
        train_model(m, task, iterations=50, lr=50.0, optimiser="sgd", batch=8, record_every=1)
    assert err.value.partial is not None and err.value.partial.sizes["iteration"] >= 1


def test_bad_settings_name_the_parameter():
    task = _small_task()
    with pytest.raises(ParameterError, match="inputs"):
        train_model(dynlab.make_model("rnn", 4, 3, seed=0), task, iterations=1)
    with pytest.raises(ParameterError, match="freeze"):
        train_model(_irnn(), task, iterations=1, freeze=("Q",))
    with pytest.raises(ParameterError, match="sigma_eps"):
        train_model(_irnn(), task, iterations=1, sigma_eps=-1)
    with pytest.raises(ParameterError, match="model"):
        train_model(dynlab.make_model("ctrnn", 4, 2, seed=0), task, iterations=1)

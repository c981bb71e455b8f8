"""train_model's L2 weight penalty (``penalty={name: λ | (λ, c)}``): the penalised loss's gradient
against central finite differences, the optimiser step it takes, validation, and that the
setting is recorded and survives a checkpoint/resume."""
import json

import numpy as np
import pytest

import dynlab
from dynlab.errors import ParameterError
from dynlab.train import backprop as bp
from dynlab.train.loop import penalty_terms, resume_training, save_checkpoint, train_model


def _task():
    return dynlab.tasks.make_task("adding", 10, seed=1, n_train=128, n_val=32, n_test=32)


def _rin(D=5):
    return dynlab.make_model("rin", D, 2, seed=3, weight_scale=0.5)


def _penalised(model, readout, x, y, penalty):
    L, grads, _ = bp.loss_and_grads(model, readout, x, y, loss="mse")
    pv, pg = penalty_terms(model, penalty)
    return L + pv, {k: grads[k] + pg.get(k, 0.0) for k in model.params()}


@pytest.mark.parametrize("penalty", [{"U": 0.3}, {"U": (0.3, -1.0)}, {"U": (0.2, -1.0), "W": 0.5, "b": 1.0}])
def test_penalised_gradient_matches_finite_differences(penalty):
    m = _rin()
    task = _task()
    x, y = task.sample(np.random.default_rng(0), 8)
    readout = bp.init_readout(m.hidden, 1, seed=[0, 0])
    _, g = _penalised(m, readout, x, y, penalty)
    rng = np.random.default_rng(1)
    for name in ("U", "W", "b"):
        theta = np.asarray(m.params()[name], dtype=np.float64)
        for _ in range(4):
            idx = tuple(rng.integers(0, s) for s in theta.shape)
            h = 1e-6
            vals = []
            for sgn in (1, -1):
                t = theta.copy()
                t[idx] += sgn * h
                mm = bp.with_params(m, {name: t})
                vals.append(_penalised(mm, readout, x, y, penalty)[0])
            fd = (vals[0] - vals[1]) / (2 * h)
            assert abs(fd - g[name][idx]) <= 1e-6 * max(1.0, abs(fd)), (name, idx, fd, g[name][idx])


def test_penalty_value_and_centre():
    m = _rin(4)
    U = np.asarray(m.U)
    v, g = penalty_terms(m, {"U": (0.5, -1.0)})
    V = U + np.eye(4)                       # centre −I: the penalty on V = U + I
    assert v == pytest.approx(0.5 * np.sum(V ** 2), rel=1e-14)
    np.testing.assert_allclose(g["U"], 2 * 0.5 * V, rtol=1e-14)
    v0, g0 = penalty_terms(m, {"U": 0.5})
    assert v0 == pytest.approx(0.5 * np.sum(U ** 2), rel=1e-14)


def test_one_sgd_step_uses_the_penalised_gradient():
    task = _task()
    m = _rin()
    lam = 0.7
    res = train_model(m, task, iterations=1, optimiser="sgd", lr=0.1, batch=8, seed=4, record_every=1,
                      penalty={"U": (lam, -1.0)})
    x, y = task.sample(np.random.default_rng([4, 1, 1]), 8)
    readout = bp.init_readout(m.hidden, task.outputs, seed=[4, 0])
    _, grads, _ = bp.loss_and_grads(m, readout, x, y, loss=task.loss, h0=np.zeros((8, m.state_size)))
    expect = m.U - 0.1 * (grads["U"] + 2 * lam * (m.U + np.eye(m.hidden)))
    np.testing.assert_allclose(res.model.U, expect, rtol=1e-12, atol=1e-14)
    # without the penalty the step differs by exactly the penalty's gradient
    res0 = train_model(m, task, iterations=1, optimiser="sgd", lr=0.1, batch=8, seed=4, record_every=1)
    np.testing.assert_allclose(res0.model.U - res.model.U, 0.1 * 2 * lam * (m.U + np.eye(m.hidden)),
                               rtol=1e-10, atol=1e-14)


def test_penalty_is_recorded_and_resumed(tmp_path):
    task = _task()
    kw = dict(lr=1e-2, batch=8, seed=2, record_every=2, penalty={"U": 0.05, "W": (0.01, 0.0)})
    full = train_model(_rin(), task, iterations=6, **kw)
    assert json.loads(full.history.attrs["penalty"]) == {"U": [0.05, 0.0], "W": [0.01, 0.0]}
    half = train_model(_rin(), task, iterations=3, **kw)
    rest = resume_training(save_checkpoint(tmp_path / "c.npz", half), 3)
    np.testing.assert_array_equal(rest.model.U, full.model.U)
    assert "penalty" not in train_model(_rin(), task, iterations=1, batch=4).history.attrs


@pytest.mark.parametrize("bad", [{"Q": 1.0}, {"U": -1.0}, {"U": (1.0, 2.0, 3.0)}, {"U": "big"}, {"b": (1.0, 1.0)},
                                 ["U"], {"U": float("nan")}])
def test_bad_penalty_is_one_parameter_error(bad):
    with pytest.raises(ParameterError, match="penalty"):
        train_model(_rin(), _task(), iterations=1, batch=4, penalty=bad)

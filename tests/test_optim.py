"""Optimisers against the textbook updates written out by hand, and exact state round trips."""
import math

import numpy as np
import pytest

from dynlab.errors import ParameterError
from dynlab.train import Plateau, clip_by_global_norm, make_optimiser


def _adam_by_hand(theta, grads, lr, b1=0.9, b2=0.999, eps=1e-8):
    m = v = 0.0
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        theta = theta - lr * (m / (1 - b1 ** t)) / (math.sqrt(v / (1 - b2 ** t)) + eps)
    return theta


@pytest.mark.parametrize("name", ["sgd", "rmsprop", "adam"])
def test_updates_match_the_formulas_elementwise(name):
    rng = np.random.default_rng(0)
    gs = rng.normal(size=(6, 3))
    opt = make_optimiser(name, lr=0.1, **({"momentum": 0.5} if name == "sgd" else {}))
    p = {"w": np.zeros(3)}
    for g in gs:
        p = opt.step(p, {"w": g})
    for i in range(3):
        if name == "adam":
            ref = _adam_by_hand(0.0, gs[:, i], 0.1)
        elif name == "sgd":
            v, ref = 0.0, 0.0
            for g in gs[:, i]:
                v = 0.5 * v + g
                ref -= 0.1 * v
        else:
            r, ref = 0.0, 0.0
            for g in gs[:, i]:
                r = 0.9 * r + 0.1 * g * g
                ref -= 0.1 * g / (math.sqrt(r) + 1e-8)
        assert p["w"][i] == pytest.approx(ref, rel=1e-14, abs=1e-15)


def test_adam_minimises_a_quadratic():
    opt = make_optimiser("adam", lr=0.05)
    p = {"x": np.array([3.0, -2.0])}
    for _ in range(2000):
        p = opt.step(p, {"x": 2 * p["x"]})
    assert np.abs(p["x"]).max() < 1e-3


def test_state_round_trip_continues_bit_for_bit(tmp_path):
    rng = np.random.default_rng(1)
    gs = rng.normal(size=(10, 4))
    a = make_optimiser("adam", lr=0.01)
    p = {"w": np.ones(4)}
    for g in gs[:5]:
        p = a.step(p, {"w": g})
    np.savez(tmp_path / "s.npz", **a.state_dict())
    b = make_optimiser("adam", lr=123.0)
    b.load_state_dict(dict(np.load(tmp_path / "s.npz")))
    pa, pb = dict(p), dict(p)
    for g in gs[5:]:
        pa = a.step(pa, {"w": g})
        pb = b.step(pb, {"w": g})
    assert np.array_equal(pa["w"], pb["w"])


def test_clipping_and_plateau():
    g = {"a": np.array([3.0]), "b": np.array([4.0])}
    c, n = clip_by_global_norm(g, 1.0)
    assert n == 5.0 and math.isclose(math.hypot(c["a"][0], c["b"][0]), 1.0)
    opt = make_optimiser("sgd", lr=1.0)
    sched = Plateau(opt, factor=0.5, patience=2)
    for v in (1.0, 1.0, 1.0, 1.0, 1.0):
        sched.update(v)
    assert opt.lr == 0.25


def test_bad_settings_name_the_parameter():
    with pytest.raises(ParameterError, match="optimiser"):
        make_optimiser("lbfgs")
    with pytest.raises(ParameterError, match="lr"):
        make_optimiser("adam", lr=-1)
    with pytest.raises(ParameterError, match="beta1"):
        make_optimiser("adam", beta1=1.0)

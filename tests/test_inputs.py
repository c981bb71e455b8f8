"""Input generators: seeded, shaped (T, d) or (B, T, d), with the requested statistics."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dynlab.errors import ParameterError
from dynlab.tasks import INPUTS, constant, make_input, noise, random_walk, sine

KINDS = ("random-walk", "constant", "sine", "noise")


@pytest.mark.parametrize("kind", KINDS)
def test_shapes(kind):
    assert make_input(kind, 7, 3).shape == (7, 3)
    assert make_input(kind, 7, 3, batch=4, seed=0).shape == (4, 7, 3)
    assert make_input(kind, 1, 1, batch=1, seed=0).shape == (1, 1, 1)
    assert make_input(kind, 7, 3, seed=0).dtype == np.float64


@pytest.mark.parametrize("kind", ["random-walk", "noise", "sine"])
def test_seeded_determinism(kind):
    a = make_input(kind, 50, 2, batch=3, seed=5)
    b = make_input(kind, 50, 2, batch=3, seed=5)
    c = make_input(kind, 50, 2, batch=3, seed=6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # the sequences of a batch are different draws
    assert not np.array_equal(a[0], a[1])


def test_make_input_dispatch_and_names():
    assert set(INPUTS) == set(KINDS)
    np.testing.assert_array_equal(make_input("Random_Walk", 9, 2, seed=1), random_walk(9, 2, seed=1))
    with pytest.raises(ParameterError) as info:
        make_input("square", 5)
    assert info.value.param == "input"


def test_random_walk_increments_have_the_requested_variance():
    """Increments ε_t ~ N(0, v): the sample variance of n = 200 000 of them has standard error
    v·√(2/(n−1)) ≈ 0.32 % of v; accept 5 standard errors.  The first increment is x_1 − start."""
    v, start = 10.0, 2.5
    x = random_walk(20_000, 2, variance=v, batch=5, seed=0, start=start)
    inc = np.diff(x, axis=1, prepend=start)
    n = inc.size
    se = v * math.sqrt(2.0 / (n - 1))
    assert abs(inc.var(ddof=1) - v) < 5 * se
    assert abs(inc.mean()) < 5 * math.sqrt(v / n)
    # x is the running sum: Var x_t = t·v, checked across 4000 independent walks at t = 100
    w = random_walk(100, 1, variance=v, batch=4000, seed=1)[:, -1, 0]
    se_w = 100 * v * math.sqrt(2.0 / (w.size - 1))
    assert abs(w.var(ddof=1) - 100 * v) < 5 * se_w


def test_noise_has_the_requested_variance():
    v = 0.3
    x = noise(50_000, 4, variance=v, seed=2)
    n = x.size
    assert abs(x.var(ddof=1) - v) < 5 * v * math.sqrt(2.0 / (n - 1))
    assert abs(x.mean()) < 5 * math.sqrt(v / n)
    # independent in time: lag-1 correlation within 5/√n of 0
    r = np.corrcoef(x[1:, 0], x[:-1, 0])[0, 1]
    assert abs(r) < 5 / math.sqrt(x.shape[0])
    np.testing.assert_array_equal(noise(10, 2, variance=0.0, seed=1), np.zeros((10, 2)))


def test_constant():
    np.testing.assert_array_equal(constant(4, 2, value=1.5), np.full((4, 2), 1.5))
    np.testing.assert_array_equal(constant(3, 2, value=[1.0, -2.0], batch=2), np.tile([1.0, -2.0], (2, 3, 1)))
    x = constant(3, 1)
    x[0, 0] = 9.0  # a writable copy, not a broadcast view
    assert constant(3, 1)[0, 0] == 1.0
    for value in ([1.0, 2.0, 3.0], np.nan, [[1.0]]):
        with pytest.raises(ParameterError) as info:
            constant(3, 2, value=value)
        assert info.value.param == "value"


def test_sine_period_and_amplitude():
    """x_t = A sin(2π t / P + φ): exactly periodic with period P (integer P here), with
    values A sin(2πt/P) for the unseeded (zero-phase) form."""
    P, A = 12.0, 2.0
    x = sine(60, 1, amplitude=A, period=P)
    t = np.arange(1, 61)
    np.testing.assert_allclose(x[:, 0], A * np.sin(2 * np.pi * t / P), rtol=0, atol=1e-15 * A)
    np.testing.assert_allclose(x[12:], x[:-12], rtol=0, atol=1e-13)  # one period later: same
    assert np.max(np.abs(x)) == pytest.approx(A, rel=1e-15)  # t = 3 hits the crest exactly
    # seeded phases: still period P and amplitude A in every feature
    xs = sine(120, 3, amplitude=A, period=P, batch=2, seed=4)
    np.testing.assert_allclose(xs[:, int(P):], xs[:, :-int(P)], rtol=0, atol=1e-13)
    assert np.all(np.abs(xs) <= A * (1 + 1e-15))
    # the dominant frequency of a long non-integer-period sine is 1/P
    P2 = 37.5
    y = sine(3000, 1, period=P2)[:, 0]
    f = np.fft.rfftfreq(y.size)[np.argmax(np.abs(np.fft.rfft(y)))]
    assert abs(f - 1 / P2) <= 1 / y.size


@pytest.mark.parametrize("fn", [random_walk, constant, sine, noise])
def test_bad_sizes_name_the_parameter(fn):
    for kwargs, param in [({"steps": 0}, "steps"), ({"steps": -3}, "steps"), ({"steps": 2.5}, "steps"),
                          ({"steps": 5, "inputs": 0}, "inputs"), ({"steps": 5, "batch": 0}, "batch")]:
        with pytest.raises(ParameterError) as info:
            fn(**kwargs)
        assert info.value.param == param, (kwargs, info.value)


def test_bad_options_name_the_parameter():
    for fn, kwargs, param in [(random_walk, {"variance": -1.0}, "variance"),
                              (noise, {"variance": -0.1}, "variance"),
                              (noise, {"variance": np.nan}, "variance"),
                              (sine, {"period": 0.0}, "period"),
                              (sine, {"amplitude": np.inf}, "amplitude")]:
        with pytest.raises(ParameterError) as info:
            fn(10, **kwargs)
        assert info.value.param == param
    with pytest.raises(ParameterError) as info:
        make_input("noise", 10, variance=-2.0)
    assert info.value.param == "variance"

"""Short reprs: models, tasks and training results print a few lines, never their arrays.

``print(model)`` used to print every weight (the dataclass-generated repr: ≈ 2 300 lines for a
trained D = 512 model).  Each repr here must stay under 15 lines and 1000 characters at the
largest sizes the tests build (D = 512, T = 1000), name the key settings, and leave the
classes' equality and hashing as they were.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dynlab as dl
from dynlab.models.base import Model
from dynlab.tasks import StaticTask, Task
from dynlab.train.loop import TrainResult
from dynlab.train.spec import ImplicitTrainResult


def short(text: str, lines: int = 15, chars: int = 1000) -> str:
    assert text.count("\n") < lines, text
    assert len(text) < chars, text
    assert "array([" not in text and "..." not in text, text
    return text


@pytest.mark.parametrize("name", list(dl.MODELS))
def test_model_repr_is_one_line_with_shapes(name):
    m = dl.make_model(name, 512, 3, seed=0)
    text = short(repr(m), lines=1, chars=400)
    assert text.startswith(f"{type(m).__name__}(hidden=512, ")
    assert "inputs=3" in text and "seed=0" in text and f"activation={m.activation!r}" in text
    for k, v in m.params().items():   # every parameter: arrays by shape, scalars by value
        if isinstance(v, np.ndarray) and v.ndim:
            assert f"{k}=<array {'×'.join(map(str, v.shape))}>" in text
        else:
            assert f"{k}=" in text
    # the dataclass decorator generated no repr of its own (it would print every weight); a
    # stack writes the same style itself, its layers' arrays under layer{ℓ}_
    assert type(m).__repr__ is (dl.Stack.__repr__ if name == "stack" else Model.__repr__)


def test_irnn_repr_names_the_settings():
    m = dl.make_model("irnn", 128, 2, K=5, eta=0.1, seed=0)
    assert repr(m) == ("IRNN(hidden=128, inputs=2, eta=0.1, alpha=1.0, K=5, g0='zero', sign=1, activation='tanh', "
                       "seed=0, weight_scale=0.5, P='I', U=<array 128×128>, W=<array 128×2>, b=<array 128>)")
    low = dl.make_model("irnn", 16, 2, K=3, eta=np.full(3, 0.2), rank=2, activation="leaky-relu", seed=1)
    text = repr(low)
    assert "eta=<array 3>" in text and "V=<array 16×2>" in text and "H=<array 2×16>" in text
    assert "leak=0.01" in text          # shown only where it matters
    assert "leak=" not in repr(m)


def test_explicit_arrays_and_two_layer_implicit():
    m = dl.make_model("rnn", 4, 2, seed=0)
    text = repr(dl.RNN(m.U, m.W, m.b))
    assert "seed=None" in text and "weight_scale=None" in text
    two = repr(dl.make_model("implicit", 5, 20, hidden2=2, seed=0))
    assert two.startswith("Implicit(hidden=5, hidden2=2, inputs=20, ")
    assert "R=<array 5×2>" in two and "T2=<array 2>" in two


def test_stacked_repr():
    s = dl.Stack.random(512, 3, cell="rnn", layers=3, activation="relu", seed=4)
    assert short(repr(s), lines=1).startswith("Stack(hidden=512, inputs=3, state_size=1536, cell='rnn', n_layers=3, "
                                              "activation='relu', seed=4, weight_scale=1.0, layer1_U=<array 512×512>")


def test_model_equality_and_hash_unchanged():
    """Models compare by identity (eq=False) and hash by id, as before the repr change."""
    a, b = dl.make_model("irnn", 4, 2, seed=0), dl.make_model("irnn", 4, 2, seed=0)
    assert a == a and a != b
    assert len({a, b, a}) == 2
    s = dl.Stack.random(4, 1, cell="rnn", layers=2, seed=0)
    assert s == s and s != dl.Stack.random(4, 1, cell="rnn", layers=2, seed=0) and hash(s) == hash(s)


def test_task_repr():
    task = dl.make_task("adding", 1000, n_train=50, n_val=10, n_test=10)
    text = short(repr(task), lines=4)
    assert text.startswith("Task('adding', loss='mse', steps=1000, inputs=2, outputs=1, seed=0")
    assert "baseline=0.1667" in text and "train: x 50×1000×2, target 50×1" in text and "test: x 10×1000×2" in text
    copy = short(repr(dl.make_task("copy", 30, n_train=20, n_val=5, n_test=5)), lines=4)
    assert "loss='ce-seq'" in copy and "train: x 20×50×10, target 20×50" in copy   # one-hot shape, as batch() gives
    padded = repr(dl.make_task("adding-ternary", 10, n_train=20, n_val=5, n_test=5, pad=5))
    assert "pad=5" in padded and "steps=15" in padded
    assert Task.__eq__ is object.__eq__          # eq=False: identity, as before


def test_static_task_repr():
    text = short(repr(dl.tasks.xor("or")), lines=3)
    assert text.startswith("StaticTask('xor', inputs=2, targets=2, train: X 4×2, Y 4×2;")
    assert "second='or'" in text
    osc = short(repr(dl.tasks.damped_oscillator(400)), lines=3)
    assert "inputs=20" in osc and "window=20" in osc
    # the dataclass still generates __eq__ and (frozen) __hash__ over the fields, as before
    t = dl.tasks.xor()
    assert t == t and "__eq__" in StaticTask.__dict__ and "__hash__" in StaticTask.__dict__


@pytest.fixture(scope="module")
def trained():
    task = dl.make_task("adding-ternary", 10, n_train=40, n_val=10, n_test=10)
    return dl.train_model(dl.make_model("rnn", 8, 2, seed=0), task, iterations=4, batch=8, record_every=2)


def test_train_result_repr(trained):
    text = short(repr(trained), lines=6)
    assert text.startswith("TrainResult(RNN(hidden=8, inputs=2, ")
    assert "task='adding-ternary' (steps=10, loss='ce', baseline=1.099)" in text
    assert "iteration=4, optimiser='adam', lr=0.001, batch=8" in text
    last = trained.history.sel(iteration=4)
    assert f"at iteration 4: loss={float(last.loss):.4g}, val_loss={float(last.val_loss):.4g}" in text
    assert "val_accuracy=" in text and "history: 2 records over iteration 2..4" in text
    # the same few lines for a D = 512 model (the history is not printed)
    big = dataclasses.replace(trained, model=dl.make_model("irnn", 512, 2, K=5, seed=0))
    short(repr(big), lines=6)
    assert TrainResult.__hash__ is None and "__eq__" in TrainResult.__dict__   # dataclass eq, as before


def test_implicit_train_result_repr():
    model, history = dl.train_implicit("xor", hidden=2, iterations=20, seed=0)
    text = short(repr(ImplicitTrainResult(model, history)), lines=4)
    assert text.startswith("ImplicitTrainResult(Implicit(hidden=2, hidden2=0, inputs=2, ")
    assert "task='xor', gradient='exact', iterations=20" in text
    assert f"test_loss={float(history.test_loss):.4g}" in text

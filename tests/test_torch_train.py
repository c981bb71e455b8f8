"""Training through PyTorch (``dl.train_model(..., engine="torch")``) against dynlab's exact-gradient
trainer, and checkpoints a killed run resumes from.

* The engine's loss and gradients (``TorchEngine.loss_and_grads``: autograd through the model's
  ``dl.to_torch`` module) against ``dynlab.train.backprop.loss_and_grads`` for every trainable model
  and every loss, float64: every gradient, ∂L/∂h_0, ∂L/∂h_1 and ∂L/∂W_r to 1e-10 relative (the
  issue's bound; seen ≈ 1e-15).
* Whole runs, float64 on the CPU: the two engines share the loop, the batches, ε, the optimiser and
  the diagnostics, so their histories differ by rounding only (1e-15 per step, grown by training's
  sensitivity over 20 Adam steps; bound 1e-8 relative, seen ≈ 1e-14); float32 runs follow within
  float32's rounding (1e-4 relative on the validation loss over 20 steps).
* A run killed mid-way (SIGKILL from its own progress callback, in a child process; or an exception
  raised in the callback) continues from its last checkpoint with ``resume_training`` bit for bit
  equal to the run that never stopped (the CPU's float64 arithmetic is deterministic for the same
  shapes and threads).

Every test here needs torch (marker ``torch``).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynlab as dl  # noqa: E402
from dynlab.errors import ParameterError  # noqa: E402
from dynlab.train import backprop as bp  # noqa: E402
from dynlab.train.loop import STAGE, evaluate, resume_training, train_model  # noqa: E402
from dynlab.train.torch_engine import TorchEngine  # noqa: E402

pytestmark = pytest.mark.torch

TRAINABLE = {
    "rnn-identity-relu": ("rnn", {"identity_init": True, "weight_scale": 1.0}),
    "fastrnn": ("fastrnn", {}),
    "antisymmetric": ("antisymmetric", {"eps": 0.3}),
    "rin": ("rin", {}),
    "irnn-eq5": ("irnn", {"K": 3, "eta": np.array([0.2, 0.4, 0.6]), "g0": "previous", "sign": -1}),
    "irnn-eq9-per-time": ("irnn", {"K": 2, "rank": 2, "P": "U", "g0": "previous", "activation": "relu",
                                   "eta": np.full((6, 2), 0.1)}),
    "gru": ("gru", {}),
    "lstm-sigmoid": ("lstm", {"activation": "sigmoid"}),
    "stack-lstm": ("stack", {"cell": "lstm", "layers": 2}),
    "stack-rnn-abs": ("stack", {"cell": "rnn", "layers": 2, "activation": "abs"}),
}


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))


@pytest.mark.parametrize("case", TRAINABLE)
def test_engine_gradients_equal_exact_bptt(case):
    name, kw = TRAINABLE[case]
    m = dl.make_model(name, 4, 2, seed=3, **kw)
    rng = np.random.default_rng(0)
    B, T, C = 3, 6, 3
    x, h0 = rng.standard_normal((B, T, 2)), 0.3 * rng.standard_normal((B, m.state_size))
    readout = {"W_out": rng.standard_normal((C, m.hidden)), "b_out": rng.standard_normal(C)}
    eng = TorchEngine(m, device="cpu")
    targets = {"mse": rng.standard_normal((B, C)), "mse-seq": rng.standard_normal((B, T, C)),
               "ce": rng.integers(0, C, B), "ce-seq": rng.integers(0, C, (B, T))}
    for loss, y in targets.items():
        L, g, info = bp.loss_and_grads(m, readout, x, y, loss=loss, h0=h0)
        Lt, gt, it = eng.loss_and_grads(m, readout, x, y, loss=loss, h0=h0)
        assert abs(L - Lt) <= 1e-12 * abs(L) and set(gt) == set(g)
        for k in g:
            assert _rel(gt[k], g[k]) <= 1e-10, (loss, k)
        for k in ("dL_dh1", "dL_dWr"):
            assert _rel(it[k], info[k]) <= 1e-10, (loss, k)
        if loss.startswith("ce"):
            assert it["accuracy"] == info["accuracy"]


def _task():
    return dl.make_task("adding-ternary", 10, seed=1, n_train=200, n_val=40, n_test=10)


def _model():
    return dl.make_model("irnn", 6, 2, K=2, rank=2, P="U", g0="previous", activation="relu",
                         eta=np.full((10, 2), 0.05), seed=2)


KW = dict(optimiser="adam", lr=1e-2, batch=16, sigma_eps=0.2, record_every=5, seed=5, learn_h0=True, clip=1.0,
          plateau=2, penalty={"W": 1e-3}, progress=False)


def test_torch_engine_history_equals_the_exact_trainer():
    task = _task()
    a = train_model(_model(), task, iterations=20, **KW)
    b = train_model(_model(), task, iterations=20, engine="torch", device="cpu", **KW)
    assert set(a.history.data_vars) == set(b.history.data_vars)
    for k, v in a.history.data_vars.items():
        if "iteration" in v.dims:
            assert _rel(b.history[k].values, v.values) <= 1e-8, k
    for k, v in a.model.params().items():
        assert _rel(b.model.params()[k], v) <= 1e-8, k
    assert b.history.attrs["engine"] == "torch" and b.history.attrs["device"] == "cpu"
    assert b.history.attrs["torch_dtype"] == "float64" and "engine" not in a.history.attrs
    f32 = train_model(_model(), task, iterations=20, engine="torch", device="cpu", dtype="float32", **KW)
    assert f32.history.attrs["torch_dtype"] == "float32"
    err = _rel(f32.history["val_loss"].values, a.history["val_loss"].values)
    assert 1e-10 < err <= 1e-4


def test_torch_engine_evaluation_equals_dynlabs():
    task = dl.make_task("copy", 5, seed=0, n_train=20, n_val=30, n_test=5)     # ce-seq, 10 classes
    m = dl.make_model("lstm", 5, task.inputs, seed=0)
    readout = bp.init_readout(m.hidden, task.outputs, seed=1)
    want = evaluate(m, readout, task)
    got = TorchEngine(m, device="cpu").evaluate(m, readout, task)
    assert abs(got["loss"] - want["loss"]) <= 1e-12 * want["loss"] and got["accuracy"] == want["accuracy"]


_CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    import dynlab as dl
    from dynlab.train.loop import STAGE
    task = dl.make_task("adding-ternary", 10, seed=1, n_train=200, n_val=40, n_test=10)
    m = dl.make_model("irnn", 6, 2, K=2, rank=2, P="U", g0="previous", activation="relu",
                      eta=np.full((10, 2), 0.05), seed=2)

    def killer(stage, done, total):
        if stage == STAGE and done == 25:
            os.kill(os.getpid(), 9)                # no cleanup, no exception: the process is gone

    dl.train_model(m, task, iterations=40, engine="torch", device="cpu", checkpoint=sys.argv[1],
                   checkpoint_every=10, progress=killer, optimiser="adam", lr=1e-2, batch=16, sigma_eps=0.2,
                   record_every=5, seed=5, learn_h0=True, clip=1.0, plateau=2, penalty={"W": 1e-3})
""")


def _same_run(a, b):
    assert a.iteration == b.iteration
    for k, v in a.model.params().items():
        np.testing.assert_array_equal(np.asarray(b.model.params()[k]), np.asarray(v), err_msg=k)
    for k in bp.READOUT:
        np.testing.assert_array_equal(b.readout[k], a.readout[k])
    np.testing.assert_array_equal(b.h0, a.h0)
    np.testing.assert_array_equal(b.history["iteration"].values, a.history["iteration"].values)
    for k, v in a.history.data_vars.items():
        if "iteration" in v.dims:
            np.testing.assert_array_equal(b.history[k].values, v.values, err_msg=k)
    for slot, d in a.optimiser.slots.items():
        for key, arr in d.items():
            np.testing.assert_array_equal(b.optimiser.slots[slot][key], arr)


def test_killed_torch_run_resumes_bit_for_bit(tmp_path):
    ckpt = tmp_path / "run.npz"
    r = subprocess.run([sys.executable, "-c", _CHILD, str(ckpt)], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, DYNLAB_QUIET="1"))
    assert r.returncode == -9, r.stderr[-2000:]                      # killed, at iteration 25
    assert ckpt.exists() and not (tmp_path / "run.writing.npz").exists()
    state = dl.train.loop.load_checkpoint(ckpt)
    assert state["start"] == 20 and state["config"]["engine"] == "torch"
    rest = resume_training(ckpt, 20)
    full = train_model(_model(), _task(), iterations=40, engine="torch", device="cpu", **KW)
    _same_run(full, rest)
    assert rest.history.attrs["engine"] == "torch"


def test_interrupted_exact_trainer_resumes_bit_for_bit(tmp_path):
    """The checkpoint is the loop's, whichever engine: dynlab's own, stopped by an exception raised
    in the progress callback at iteration 13, resumes from its checkpoint at 10."""
    ckpt = tmp_path / "run.npz"

    def stop(stage, done, total):
        if stage == STAGE and done == 13:
            raise KeyboardInterrupt

    kw = {k: v for k, v in KW.items() if k != "progress"}
    with pytest.raises(KeyboardInterrupt):
        train_model(_model(), _task(), iterations=20, checkpoint=ckpt, checkpoint_every=5, progress=stop, **kw)
    rest = resume_training(ckpt, 10, checkpoint=ckpt)
    _same_run(train_model(_model(), _task(), iterations=20, progress=False, **kw), rest)
    assert dl.train.loop.load_checkpoint(ckpt)["start"] == 20      # the resumed run kept writing it


def test_engine_options_are_checked():
    task, m = _task(), _model()
    for kwargs, param in (({"engine": "jax"}, "engine"), ({"dtype": "float32"}, "dtype"),
                          ({"device": "cuda"}, "device"), ({"engine": "torch", "dtype": "float16"}, "dtype"),
                          ({"engine": "torch", "device": "nonsense"}, "device"),
                          ({"checkpoint": "x.npz", "checkpoint_every": 0}, "checkpoint_every")):
        with pytest.raises(ParameterError) as info:
            train_model(m, task, iterations=1, progress=False, **kwargs)
        assert info.value.param == param and "\n" not in str(info.value), kwargs
    if not torch.cuda.is_available():
        with pytest.raises(ParameterError, match="^device: cuda:0 cannot be used here"):
            train_model(m, task, iterations=1, engine="torch", device="cuda:0", progress=False)


@pytest.mark.slow
def test_a_gallery_item_gives_the_same_verdict_through_the_torch_engine():
    """The rin-gradients recipe (quick: 4 arms × 3 seeds × 100 iterations) computed by its own code on
    both engines (benchmarks/torch_standin.py): the same verdict of every part, and each paired
    effect within the exact trainer's SE of it.  (Float64 on the CPU: the runs start equal to
    rounding and drift apart at training's own sensitivity — ≈ 1e-5 in a final validation MSE after
    100 Adam steps of a ReLU RIN, far inside the effects' SE ≈ 0.1.)"""
    from conftest import benchmarks_module

    standin = benchmarks_module("torch_standin")
    results = standin.run(quick=True)
    c = standin.compare(results)
    assert c["agree"], c
    assert c["passed"][0] == c["passed"][1] and c["gate"][0] == c["gate"][1] and c["control"][0] == c["control"][1]


def test_the_guide_example_runs():
    """docs/guide/torch.md's first example, run as a script (its own assert checks the round trip)."""
    import re

    from conftest import CHECKOUT

    with open(os.path.join(CHECKOUT, "docs", "guide", "torch.md"), encoding="utf-8") as f:
        code = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)[0]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, DYNLAB_QUIET="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "training MSE" in r.stdout and "largest state difference" in r.stdout

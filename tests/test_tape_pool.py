"""The tape-array pool of ``loss_and_grads``/``forward`` without a workspace
(``backprop._Pool``, ``config.TAPE_POOL_BYTES``).

* **Reuse.** Once a caller has let go of a tape, the next tape of the same shapes is written
  into its arrays (their memory addresses recur), in one block and in two.
* **Never what a caller holds** (the negative controls of the reuse): a tape still held, or
  only a view of it (its states), is neither shared with the next tape nor changed by it.
* **The numbers do not depend on it.** A reused array holds the previous call's values, not
  fresh zero pages: every cell kind's gradients after a call on other inputs are bitwise those
  of fresh memory (budget 0), which also catches a kernel that would rely on zeroed memory.
* **Budget and release.** An array larger than the budget is never kept, the bytes kept never
  exceed it, and ``release_tape_memory`` lets every one go.
"""
from __future__ import annotations

import numpy as np
import pytest

from dynlab.backends.numba import bptt as nb_bptt

import dynlab as dl
from dynlab import config
from dynlab.train import backprop as bp


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(config, "TAPE_POOL_BYTES", 1 << 26)
    bp.release_tape_memory()
    yield nb_bptt._POOL
    bp.release_tape_memory()


def _model(kind):
    kw = {"K": 3, "eta": 0.5} if kind == "irnn" else {}
    if kind == "stack":
        return dl.make_model("stack", 6, 2, cell="lstm", layers=2, seed=1)
    return dl.make_model(kind, 6, 2, seed=0, **kw)


def _data(seed, B=4, T=7):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((B, T, 2)), rng.standard_normal((B, 1))


def _arrays(tape):
    """The tape's own arrays (every block's, every layer's): not the inputs, the η table or
    ∂L/∂R, which ``backward`` makes."""
    out = []
    for t in getattr(tape, "blocks", [tape]):
        t = t.inner  # the backend's own tape
        for lt in getattr(t, "layers", [t]):
            out += [v for k, v in vars(lt).items() if isinstance(v, np.ndarray) and k not in ("x", "eta", "dL_dWr")]
    return out


def _share(us, vs) -> bool:
    return any(np.shares_memory(u, v) for u in us for v in vs)


def _step(m, x, y):
    return bp.loss_and_grads(m, bp.init_readout(m.hidden, 1, seed=0), x, y, loss="mse")


@pytest.mark.parametrize("blocks", [1, 2])
def test_a_released_tape_is_reused(pool, monkeypatch, blocks):
    monkeypatch.setattr(config, "TRAIN_THREADS", blocks)
    monkeypatch.setattr(config, "TRAIN_MIN_WORK_PER_THREAD_JITTED", 1)
    m = _model("irnn")
    x, y = _data(0)
    _, _, info = _step(m, x, y)
    first = _arrays(info["tape"])
    assert len(first) >= 2 * blocks
    if blocks == 2:                                            # the blocks' tapes are distinct
        assert not _share(*(_arrays(t) for t in info["tape"].blocks))
    where = {(a.ctypes.data, a.shape) for a in first}
    del info, first
    _, _, info = _step(m, *_data(1))
    again = {(a.ctypes.data, a.shape) for a in _arrays(info["tape"])}
    assert again == where


@pytest.mark.parametrize("keep", ["tape", "states"])
def test_what_a_caller_holds_is_never_reused(pool, keep):
    m = _model("gru")
    x, y = _data(0)
    _, _, info = _step(m, x, y)
    held = info["tape"] if keep == "tape" else info["tape"].states
    before = [a.copy() for a in (_arrays(held) if keep == "tape" else [held])]
    del info
    _, _, info2 = _step(m, *_data(1))
    now = _arrays(info2["tape"])
    kept = _arrays(held) if keep == "tape" else [held]
    assert not _share(kept, now)
    assert all(np.array_equal(u, v) for u, v in zip(kept, before))


@pytest.mark.parametrize("kind", ["irnn", "rnn", "fastrnn", "gru", "lstm", "stack"])
def test_gradients_do_not_depend_on_the_pool(monkeypatch, kind):
    m = _model(kind)
    (x1, y1), (x2, y2) = _data(0), _data(1)

    def second_call():
        bp.release_tape_memory()
        _step(m, x1, y1)                                      # leaves its arrays (values) behind
        L, g, info = _step(m, x2, y2)
        return L, g, _arrays(info["tape"])

    monkeypatch.setattr(config, "TAPE_POOL_BYTES", 0)
    L0, g0, t0 = second_call()
    monkeypatch.setattr(config, "TAPE_POOL_BYTES", 1 << 26)
    L1, g1, t1 = second_call()
    assert nb_bptt._POOL.nbytes() > 0
    bp.release_tape_memory()
    assert L0 == L1 and g0.keys() == g1.keys()
    for k in g0:
        assert np.array_equal(g0[k], g1[k]), k
    assert all(np.array_equal(u, v) for u, v in zip(t0, t1))


def test_budget_and_release(pool, monkeypatch):
    m = _model("lstm")
    x, y = _data(0, B=8, T=20)
    _step(m, x, y)
    kept = pool.nbytes()
    assert 0 < kept <= 1 << 26
    bp.release_tape_memory()
    assert pool.nbytes() == 0
    biggest = 20 * 8 * 4 * m.hidden * 8                       # the gates' array A (T, B, 4D)
    monkeypatch.setattr(config, "TAPE_POOL_BYTES", biggest - 1)
    _, _, info = _step(m, x, y)
    assert max(a.nbytes for a in _arrays(info["tape"])) == biggest
    assert 0 < pool.nbytes() <= biggest - 1                   # the largest array not kept
    assert not any(a.nbytes == biggest for a in pool.arrays)
    bp.release_tape_memory()
    total = sum(a.nbytes for a in _arrays(info["tape"]))
    monkeypatch.setattr(config, "TAPE_POOL_BYTES", biggest)     # each array fits, not all of them
    assert total > biggest
    _step(m, x, y)
    assert 0 < pool.nbytes() <= biggest
    monkeypatch.setattr(config, "TAPE_POOL_BYTES", 0)
    bp.release_tape_memory()
    _step(m, x, y)
    assert pool.nbytes() == 0

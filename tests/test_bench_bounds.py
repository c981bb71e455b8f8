"""The training benchmarks' lower-bound rows (benchmarks/train.py) and the harness's summed
ratios: what they compute, not how fast (timings are never tested).

* ``_skeleton`` runs the products it names: its last outputs are the products of the operands
  it was given (to 1e-13 of NumPy's, both BLAS), with the weight gradient's chunks ending where
  the docstring says, and the tape read back as often as it was written;
* ``_tape_doubles`` counts the doubles the real taped forward pass keeps, against the tape
  layouts written out by hand (``GRUTape``/``LSTMTape``/``Tape`` docstrings), and counts
  the extra φ' array a GRU keeps for an activation other than tanh (the negative control: a
  hard-coded count would not change);
* ``ratio_term`` sums and subtracts medians as its label says;
* ``_forward_reused`` (the forward term of the bound ``BOUND_OWN``) runs the taped forward
  pass on the step's blocks with its tape in a kept workspace (two mutations caught: the
  workspace not used, the inputs reversed in time).

The checkout's ``benchmarks`` package is loaded by path (``conftest.benchmarks_module``).
"""
from __future__ import annotations

import numpy as np
import pytest

import dynlab as dl
from conftest import benchmarks_module as _bench

@pytest.mark.parametrize("steps, chunk", [(6, 4), (6, 3), (5, 8)])
def test_skeleton_runs_the_products_it_names(steps, chunk):
    train = _bench("train")
    rng = np.random.default_rng(steps * 10 + chunk)
    B, D, G, a, r = 3, 4, 12, 7, 5
    X, Wf = rng.standard_normal((B, a)), rng.standard_normal((a, G))
    Z, W, S = rng.standard_normal((chunk, B, G)), rng.standard_normal((G, D)), rng.standard_normal((chunk, B, a))
    row = rng.standard_normal((B, r))
    zf, out, part = np.zeros((B, G)), np.zeros((B, D)), np.zeros((a, G))
    tape, acc = np.zeros((steps, B, r)), np.zeros((B, r))
    train._skeleton(steps, chunk, True, True, X, Wf, zf, tape, row, acc, Z, W, S, out, part, 2, 1)  # calls of 2, 1 rows
    np.testing.assert_allclose(zf, X @ Wf, rtol=1e-13, atol=1e-13)
    # backwards from t = steps − 1, chunk index k = 0, 1, …: the last step (t = 0) used
    # k = (steps − 1) mod chunk, and the last weight-gradient product took k + 1 slots
    k = (steps - 1) % chunk
    np.testing.assert_allclose(out, Z[k] @ W, rtol=1e-13, atol=1e-13)
    n = k + 1
    np.testing.assert_allclose(part, S[:n].reshape(n * B, a).T @ Z[:n].reshape(n * B, G), rtol=1e-13, atol=1e-13)
    assert np.array_equal(tape, np.broadcast_to(row, tape.shape))          # every step's rows written
    np.testing.assert_allclose(acc, steps * row, rtol=1e-13)              # and every one read back


def test_skeleton_without_a_tape_moves_none():
    train = _bench("train")
    rng = np.random.default_rng(1)
    B, D, G, a, r = 2, 3, 6, 3, 4
    acc = np.zeros((B, r))
    train._skeleton(4, 2, True, True, rng.standard_normal((B, a)), rng.standard_normal((a, G)), np.zeros((B, G)),
                    np.empty((1, 1, 1)), rng.standard_normal((B, r)), acc, rng.standard_normal((2, B, G)),
                    rng.standard_normal((G, D)), rng.standard_normal((2, B, a)), np.zeros((B, D)), np.zeros((a, G)), B, B)
    assert not acc.any()


def test_tape_doubles_are_the_tapes_own():
    train = _bench("train")
    T, K, D, d = 20, 3, 8, 2
    x = np.random.default_rng(0).standard_normal((2, T, d))
    # iRNN (Tape): H (T+1, D) and act (T, K, D) per sequence, over K·T inner steps
    assert train._tape_doubles(dl.make_model("irnn", D, d, K=K, eta=0.5, seed=0), x, T * K) == \
        round(((T + 1) * D + T * K * D) / (T * K))
    # GRU: Ha (T+1, D+d+1), RZQ (T, 3D), N (T, D); LSTM: Ha, C (T+1, D), A (T, 4D), TC (T, D)
    gru = ((T + 1) * (D + d + 1) + T * 3 * D + T * D) / T
    assert train._tape_doubles(dl.make_model("gru", D, d, seed=0), x, T) == round(gru)
    assert train._tape_doubles(dl.make_model("lstm", D, d, seed=0), x, T) == \
        round(((T + 1) * (D + d + 1) + (T + 1) * D + T * 4 * D + T * D) / T)
    # negative control: a GRU whose φ' is not a function of φ keeps DN (T, D) as well
    relu = train._tape_doubles(dl.make_model("gru", D, d, seed=0, activation="relu"), x, T)
    assert relu == round(gru + D) != round(gru)


def test_ratio_terms_sum_and_subtract_medians():
    harness = _bench("harness")
    times = {"a": [2.0, 9.0, 1.5], "b": [0.5], "c": [1.0, 3.0]}
    assert harness.ratio_term("a", times) == (2.0, "median of `a`")
    assert harness.ratio_term(("a", "c"), times) == (4.0, "(median of `a` + median of `c`)")
    assert harness.ratio_term(("a", "-b"), times) == (1.5, "(median of `a` − median of `b`)")
    assert harness.ratio_term(0.25, times)[0] == 0.25
    assert harness.ratio_term_known(("a", "-b"), times) and harness.ratio_term_known(0.1, times)
    assert not harness.ratio_term_known(("a", "-absent"), times)
    assert not harness.ratio_term_known("absent", times)


@pytest.mark.parametrize("kind", ["irnn", "gru", "lstm"])
def test_forward_reused_row_runs_the_steps_own_forward(kind, monkeypatch):
    """``FWD_REUSED`` (the forward term of the bound ``BOUND_OWN``) is the taped forward pass on
    ``loss_and_grads``'s blocks, its tape in a kept workspace: the states of every block are the
    whole batch's, and the second call writes over the first call's memory (the negative
    control: two plain ``forward`` calls do not share it)."""
    train = _bench("train")
    from dynlab import config
    from dynlab.train import backprop as bp

    monkeypatch.setattr(config, "TRAIN_THREADS", 2)
    kw = {"K": 3, "eta": 0.5} if kind == "irnn" else {}
    m = dl.make_model(kind, 32, 2, seed=0, **kw)
    x = np.random.default_rng(0).standard_normal((32, 12, 2))
    assert len(bp._train_blocks(m, 32)) == 3                      # two blocks, so the split is exercised
    impl = train._forward_reused(m, x)
    assert impl.name == train.FWD_REUSED and not impl.check
    first = impl.fn()
    assert len(first) == 2
    np.testing.assert_allclose(np.concatenate([t.H for t in first], axis=1), bp.forward(m, x).H,
                               rtol=1e-13, atol=1e-14)

    def arrays(tape):
        tape = tape.inner                                             # the backend's own tape
        return [v for lt in getattr(tape, "layers", [tape]) for k, v in vars(lt).items()
                if isinstance(v, np.ndarray) and k not in ("x", "eta")]         # the tape arrays, as _tape_doubles

    kept = [a.copy() for t in first for a in arrays(t)]
    second = impl.fn()
    now = [a for t in second for a in arrays(t)]
    assert len(now) == len(kept) >= 4                             # two blocks, two or more arrays each
    assert all(np.shares_memory(a, b) for a, b in zip([a for t in first for a in arrays(t)], now))
    assert all(np.array_equal(a, b) for a, b in zip(kept, now))
    fresh = [arrays(bp.forward(m, x)) for _ in range(2)]
    assert not any(np.shares_memory(a, b) for a, b in zip(*fresh))
    assert any(train.FWD_REUSED in term for _, num, _ in train.BOUND_RATIOS for term in num
               if isinstance(num, tuple))

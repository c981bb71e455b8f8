"""The iRNN paper's training figures (irnn-fig3-add, irnn-fig4-copy, irnn-fig8-gradnorm): the facts
their checks rest on, checked independently — the order-blind copy predictor in closed form
against enumeration and against the task's own data, the Jacobian of the eq. 5 cell in the two
settings of the adding figure, and that each check can both pass and fail on data built for it."""
import itertools
import json
import math

import numpy as np
import pytest
import xarray as xr

import dynlab as dl
from dynlab.analysis.jacobians import jacobian_at
from dynlab.figures import irnn_fig3_add as fig3
from dynlab.figures import irnn_fig4_copy as fig4
from dynlab.figures import irnn_fig8_gradnorm as fig8
from dynlab.figures._irnn_training import entry, label


# ------------------------------------------------------------------ the order-blind copy predictor
@pytest.mark.parametrize("S,n", [(3, 4), (2, 5), (4, 3)])
def test_order_blind_closed_form_matches_enumeration(S, n):
    """E[max count]/n and E[−ln(c/n)] (c the count of a position's own symbol) by enumerating every
    sequence of n draws from S symbols."""
    acc, ce = 0.0, 0.0
    for seq in itertools.product(range(S), repeat=n):
        counts = np.bincount(seq, minlength=S)
        acc += counts.max() / n
        ce += np.mean([-math.log(counts[s] / n) for s in seq])
    N = S ** n
    ob = fig4.order_blind(S, n)
    assert ob["acc"] == pytest.approx(acc / N, rel=1e-12)
    assert ob["ce"] == pytest.approx(ce / N, rel=1e-12)
    assert ob["acc_memoryless"] == 1 / S and ob["ce_memoryless"] == pytest.approx(math.log(S))


def test_order_blind_closed_form_matches_the_copy_training_data():
    """The closed form against the 10 symbols of the copy task's own training sequences (4 SE)."""
    task = dl.make_task("copy", 10, seed=0, n_train=4000, n_val=10, n_test=10)
    codes, target = task.data["train"]
    data = codes[:, :10]
    assert np.array_equal(target[:, -10:], data)            # the recall targets are the 10 symbols, in order
    counts = np.stack([np.bincount(row, minlength=9)[1:] for row in data])      # symbols 1..8
    acc = counts.max(axis=1) / 10
    own = np.take_along_axis(counts, data - 1, axis=1)
    ce = (-np.log(own / 10)).mean(axis=1)
    ob = fig4.order_blind()
    for emp, exact in ((acc, ob["acc"]), (ce, ob["ce"])):
        assert abs(emp.mean() - exact) < 4 * emp.std(ddof=1) / math.sqrt(emp.size)
    # beating the memoryless baseline needs only the counts: the order-blind CE is below ln 8
    assert ob["ce"] < ob["ce_memoryless"] - 0.3 and ob["acc"] > 2 * ob["acc_memoryless"]


def test_the_memory_cut_removes_every_trace_of_the_symbols():
    """The control restarts the network from h = 0 at the delimiter: its recall outputs do not
    change when the 10 symbols are replaced, while those of the uncut run do."""
    from dynlab.train.backprop import init_readout, predict

    T = 6
    task = dl.make_task("copy", T, seed=0, n_train=20, n_val=20, n_test=10)
    x, y = task.batch("val")
    delim = T + 10 - 1
    assert np.all(x[:, delim, 9] == 1) and np.all(x[:, delim + 1:, 0] == 1)    # delimiter, then blanks
    other = x.copy()
    other[:, :10] = 0.0
    other[:, np.arange(10), 1 + (np.arange(10) % 8)] = 1.0                               # different symbols
    m = dl.make_model("irnn", 8, task.inputs, seed=0, **entry("eq5", 5)[2])
    ro = init_readout(8, task.outputs, seed=[0, 0])
    cut = [predict(m, ro, v[:, delim:], loss="ce-seq")[-10:] for v in (x, other)]
    full = [predict(m, ro, v, loss="ce-seq")[-10:] for v in (x, other)]
    assert np.array_equal(cut[0], cut[1])
    assert np.abs(full[0] - full[1]).max() > 1e-6
    ce, acc = fig4._recall(m, ro, x, y, cut_at=delim)
    Y = cut[0] - cut[0].max(axis=-1, keepdims=True)
    logp = Y - np.log(np.exp(Y).sum(axis=-1, keepdims=True))
    assert ce == pytest.approx(-np.take_along_axis(logp, y[:, -10:].T[..., None], axis=-1).mean())


# ------------------------------------------------------------------ the eq. 5 cell's Jacobian
def _points(m, n=6, seed=1):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, m.inputs)), rng.normal(0, 0.5, (n, m.hidden))


@pytest.mark.parametrize("K", [1, 5, 10])
def test_g0_previous_has_the_identity_jacobian_for_every_K(K):
    m = dl.make_model("irnn", 12, 2, seed=3, **entry("g0prev", K)[2])
    x, h = _points(m)
    J = jacobian_at(m, x, h)
    assert np.abs(J - np.eye(12)).max() < 1e-12


def test_eq5_jacobian_is_eta_times_I_minus_phiU_at_K1_and_approaches_I_with_K():
    """K = 1: ∂h_m/∂h_(m−1) = η(I − φ′U) (ReLU, g₀ = 0, −h); larger K: ‖J − I‖ falls toward 0."""
    m = dl.make_model("irnn", 12, 2, seed=3, **entry("eq5", 1)[2])
    x, h = _points(m)
    J = jacobian_at(m, x, h)
    z = -h @ m.U.T + x @ m.W.T + m.b                    # φ's argument at g₀ = 0: U(0 − h) + W x + b
    for n in range(len(x)):
        expect = m.eta * (np.eye(12) - (z[n] > 0)[:, None] * m.U)
        assert np.abs(J[n] - expect).max() < 1e-12
    dist = []
    for K in (1, 5, 10, 40):
        mk = dl.make_model("irnn", 12, 2, seed=3, **entry("eq5", K)[2])
        dist.append(np.linalg.norm(jacobian_at(mk, x, h) - np.eye(12), ord=2, axis=(1, 2)).max())
    assert all(a > b for a, b in zip(dist[:-1], dist[1:])) and dist[-1] < 1e-3


def test_one_label_per_setting():
    keys = [entry("eq5", K)[0] for K in (1, 5, 10)] + [entry("g0prev", K)[0] for K in (1, 10)] + [entry("rnn")[0]]
    labels = [label(k) for k in keys]
    assert len(set(labels)) == len(labels)
    assert fig8.IRNN_KEY == entry("eq5", 5)[0]        # fig 8's iRNN is fig 3's K = 5, under the same name


# ------------------------------------------------------------------ the checks can pass and can fail
def _fake_runs(values: dict, seeds=(0, 1, 2, 3, 4), n_it=8, attrs=None):
    """A seed_runs-shaped Dataset: values[key] = {var: (seed, iteration) array}."""
    runs = []
    for key, vs in values.items():
        runs.append(xr.Dataset({k: (("seed", "iteration")[:np.ndim(v)], np.asarray(v, float)) for k, v in vs.items()},
                               coords={"seed": list(seeds), "iteration": np.arange(1, n_it + 1) * 10})
                    .expand_dims(run=[key]))
    ds = xr.concat(runs, dim="run")
    ds.attrs.update({"labels": json.dumps({k: label(k) for k in values}), "params": json.dumps({k: 1 for k in values}),
                     "baseline": 1 / 6, "scaling": "fake", **(attrs or {})})
    return ds


def _fig3_fake(ratio_by_K, mse_by_K, noise=0.01):
    rng = np.random.default_rng(0)
    vals = {}
    for K in fig3.KS:
        vals[f"irnn-eq5-K{K}"] = {"ratio": np.exp(-ratio_by_K[K] * (1 + noise * rng.standard_normal((5, 8)))),
                                  "val_loss": mse_by_K[K] * (1 + noise * rng.standard_normal((5, 8))),
                                  "step_norm": np.ones((5, 8))}
    for K in fig3.CONTROL_KS:
        vals[f"irnn-g0prev-K{K}"] = {"ratio": np.ones((5, 8)), "val_loss": 0.01 + 0.001 * rng.random((5, 8)),
                                     "step_norm": np.ones((5, 8))}
    return _fake_runs(vals)


def test_fig3_check_passes_only_when_both_orderings_hold():
    good = fig3.check(_fig3_fake({1: 10, 5: 2, 10: 0.2}, {1: 0.16, 5: 0.05, 10: 0.01}))
    assert good["passed"] and not good["control"]["passed"]
    ratio_only = fig3.check(_fig3_fake({1: 10, 5: 2, 10: 0.2}, {1: 0.16, 5: 0.01, 10: 0.05}))
    assert not ratio_only["passed"] and ratio_only["finding"]
    flat = fig3.check(_fig3_fake({1: 1, 5: 1, 10: 1}, {1: 0.16, 5: 0.05, 10: 0.01}))
    assert not flat["passed"]


def test_fig8_check_within_a_decade():
    rng = np.random.default_rng(0)
    near = np.exp(rng.normal(0, 0.5, (5, 8)))            # |log10| well within 1
    far = 10 ** rng.uniform(-6, -2, (5, 8))
    acc = {"val_accuracy": np.full((5, 8), 0.5)}
    ok = fig8.check(_fake_runs({fig8.IRNN_KEY: {"jac_norm": near, **acc}, fig8.RNN_KEY: {"jac_norm": far, **acc}}))
    assert ok["passed"] and not ok["control"]["passed"]
    early = near.copy()
    early[:, 0] = 1e-4                                   # one record per seed out of the decade
    bad = fig8.check(_fake_runs({fig8.IRNN_KEY: {"jac_norm": early, **acc}, fig8.RNN_KEY: {"jac_norm": far, **acc}}))
    assert not bad["passed"] and "stays there from iterations 20, 20, 20, 20, 20" in bad["finding"]


def test_fig4_check_against_the_order_blind_predictor():
    ob = fig4.order_blind()
    attrs = {f"order_blind_{k}": v for k, v in ob.items()}
    attrs["delay"] = 10

    def fake(acc, ce):
        n = np.ones(5)
        return _fake_runs({fig4.ENTRIES[0][0]: {
            "val_loss": np.ones((5, 4)), "recall_acc": n * acc, "recall_ce": n * ce,
            "cut_recall_acc": n * 0.1, "cut_recall_ce": n * 2.5}}, n_it=4, attrs=attrs)

    ds = fake(ob["acc"] + 0.1, ob["ce"] - 0.3)
    for v in ("recall_acc", "recall_ce"):
        ds[v] = ds[v] + 0.01 * np.random.default_rng(1).standard_normal(ds[v].shape)
    assert fig4.check(ds)["passed"]
    assert not fig4.check(ds)["control"]["passed"]
    counts_only = fake(ob["acc"], ob["ce"])              # exactly the order-blind predictor: no memory shown
    assert not fig4.check(counts_only)["passed"]

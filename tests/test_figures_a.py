"""The iRNN recipes irnn-fig5-add-length, irnn-ablation-baselines and irnn-table11-activation: the
settings and data they rest on, checked independently — the FastRNN η and Antisymmetric γ/ε settings
as built and as trained, the binary digits stand-in for HAR-2 against scikit-learn's labels — and
that each check both passes and fails (and its control fails) on Datasets built for it, with the
verdict its gate gives."""
import json

import numpy as np
import pytest
import xarray as xr

import dynlab as dl
from dynlab.figures.irnn import _digits as hd
from dynlab.figures.irnn import ablation_baselines as abl
from dynlab.figures.irnn import fig5_add_length as fig5
from dynlab.figures.irnn import table11_activation as t11
from dynlab.figures.irnn._parta import add_T, final
from dynlab.figures.irnn._training import build, setting, short_label, train
from dynlab.figures._recipe import check_record, record_of, setting_attr


# ------------------------------------------------------------------ the baseline settings
@pytest.mark.parametrize("eta", [0.001, 0.01, 0.1])
def test_fastrnn_eta_setting_starts_at_step_eta(eta):
    """FastRNN(η): h = σ(β)h + σ(α)φ(…) built with σ(α) = η and σ(β) = 1 − η."""
    m = build(f"fastrnn-eta{eta}", 4, 2, 10, 0)[0]
    a, c, R = m.gated_form()
    assert c == pytest.approx(eta, rel=1e-12) and a == pytest.approx(1 - eta, rel=1e-12)
    np.testing.assert_array_equal(R, m.U)


def test_antisymmetric_gamma_eps_are_held_fixed_in_training():
    """γ and ε are hyper-parameters: built as named, unchanged by training while M moves."""
    key = "antisym-g0.01-e0.1"
    m, freeze = build(key, 4, 2, 10, 0)
    assert (m.gamma, m.eps) == (0.01, 0.1) and freeze == ("gamma", "eps")
    np.testing.assert_allclose(m.U + m.U.T, -2 * 0.01 * np.eye(4), atol=1e-15)   # skew part + (−γ I)
    task = dl.make_task("adding", 10, seed=0, n_train=64, n_val=8, n_test=4)
    r = train(key, task, hidden=4, iterations=3, seed=0, batch=8)
    assert (r.model.gamma, r.model.eps) == (0.01, 0.1)
    assert np.abs(r.model.M - m.M).max() > 0


def test_quick_lengths_are_a_tenth():
    assert [add_T(T, True) for T in fig5.TS] == [10, 20, 40, 75]
    assert [add_T(T, False) for T in fig5.TS] == list(fig5.TS)


def test_final_takes_each_runs_last_record():
    da = xr.DataArray([[1.0, 2.0, np.nan], [3.0, np.nan, np.nan], [np.nan, np.nan, np.nan]], dims=("run", "iteration"))
    np.testing.assert_array_equal(final(da).values, [2.0, 3.0, np.nan])


# ------------------------------------------------------------------ the HAR-2 stand-in
def test_binary_digits_labels_and_standardisation():
    """Labels are scikit-learn's digit ≥ 5 (recovered through the pixel values); the training split
    is standardised."""
    sk = pytest.importorskip("sklearn.datasets")
    d = sk.load_digits()
    flat = (d.images.reshape(len(d.images), 64) / 16.0)
    lookup = {row.tobytes(): int(y) for row, y in zip(flat, d.target)}
    task = hd.binary_digits()
    mu, sd = task.settings["standardised"]
    for split, (x, y) in task.data.items():
        raw = x[:, :, 0] * sd + mu
        digits = np.array([lookup.get((np.round(r * 16) / 16.0).tobytes(), -1) for r in raw])
        assert (digits >= 0).all(), split
        np.testing.assert_array_equal(y, (digits >= 5).astype(int))
    xtr = task.data["train"][0]
    assert abs(xtr.mean()) < 1e-12 and xtr.std() == pytest.approx(1.0, rel=1e-12)
    assert task.outputs == 2 and task.steps == 64
    y = task.data["test"][1]
    assert hd.majority("test") == pytest.approx(max(np.mean(y), 1 - np.mean(y)))


# ------------------------------------------------------------------ the checks on built Datasets
def _fig5_ds(irnn, rnn, lstm, seeds=5, noise=0.005):
    rng = np.random.default_rng(0)
    Ts = list(fig5.TS)
    vals = np.array([[[v + noise * rng.standard_normal() for _ in range(seeds)]
                      for v in (irnn(T), rnn(T), lstm(T), 0.16, 0.16)] for T in Ts])   # + FastRNN, Antisymmetric
    vals[-1, 3:] = np.nan                                      # the reported-only cells are not run at T = 750
    ds = xr.Dataset({"final_mse": (("T", "run", "seed"), vals),
                     "val_loss": (("T", "run", "seed", "iteration"), np.repeat(vals[..., None], 2, axis=-1)),
                     "params": (("run",), [98, 97, 393, 99, 99]), "T_run": (("T",), Ts)},
                    coords={"T": Ts, "run": list(fig5.KEYS), "seed": list(range(seeds)), "iteration": [0, 1]})
    ds.attrs.update({"baseline": 1 / 6, "scaling": "built for the test",
                     "short": json.dumps({k: short_label(k) for k in fig5.KEYS}),
                     "labels": json.dumps({k: setting(k)[3] for k in fig5.KEYS})})
    return ds


def test_fig5_check_passes_fails_and_control():
    """Mutation test of the restated claim: the iRNN learns at every T (gated on its own competence,
    MSE < 1/6 − 1/60, at each T) and beats the RNN and LSTM at T = 750."""
    good = fig5.check(_fig5_ds(lambda T: 0.01, lambda T: 0.17, lambda T: 0.16 + T / 1e4))
    assert good["passed"] and not good["control"]["passed"] and len(good["per_seed"]) == 5
    assert record_of(fig5.RECIPE, good)["verdict"] == "holds"
    # the iRNN learned something at T = 750 (MSE 0.12 < 0.15) but not the task (≥ 1/12): does not hold
    bad = fig5.check(_fig5_ds(lambda T: 0.01 if T < 750 else 0.12, lambda T: 0.17, lambda T: 0.17))
    assert not bad["passed"] and "[750]" in bad["finding"]
    assert record_of(fig5.RECIPE, bad)["verdict"] == "does not hold"
    # the iRNN at the baseline at T = 400 and 750 (the earlier record): nothing learned there, so the
    # comparisons at those T are inconclusive at this scale — not failures of the paper's claim
    long = fig5.check(_fig5_ds(lambda T: 0.01 if T <= 200 else 0.17, lambda T: 0.17, lambda T: 0.17))
    assert record_of(fig5.RECIPE, long)["verdict"] == "inconclusive"
    # nothing learns anywhere: inconclusive
    idle = fig5.check(_fig5_ds(lambda T: 0.16, lambda T: 0.17, lambda T: 0.17))
    assert record_of(fig5.RECIPE, idle)["verdict"] == "inconclusive"
    # the RNN learning everywhere makes the control pass: the record becomes an error
    ctrl = fig5.check(_fig5_ds(lambda T: 0.01, lambda T: 0.01, lambda T: 0.17))
    assert ctrl["control"]["passed"] and not ctrl["passed"]


def _abl_ds(mse, ratio, seeds=5):
    rng = np.random.default_rng(1)
    keys = list(abl.KEYS)
    m = np.array([[mse[k] + 0.002 * rng.standard_normal() for _ in range(seeds)] for k in keys])
    r = np.array([[ratio[k] * (1 + 0.01 * rng.standard_normal()) for _ in range(seeds)] for k in keys])
    ds = xr.Dataset({"final_mse": (("run", "seed"), m), "abs_ln_ratio": (("run", "seed"), r),
                     "params": (("run",), [99] * len(keys)),
                     "null_final_mse": (("seed",), m[keys.index("fastrnn-eta0.01")] + 0.002 * rng.standard_normal(seeds)),
                     "null_abs_ln_ratio": (("seed",), r[keys.index("fastrnn-eta0.01")] * (1 + 0.01 * rng.standard_normal(seeds)))},
                    coords={"run": keys, "seed": list(range(seeds))})
    ds.attrs.update({"baseline": 1 / 6, "short": json.dumps({k: short_label(k) for k in keys})})
    return ds


def test_ablation_check_passes_fails_gate_and_control():
    ratio = {k: 1.0 for k in abl.KEYS}
    ratio.update({"fastrnn-eta0.001": 0.01, "antisym-g0.01-e0.001": 0.01})
    mse = {k: 0.15 for k in abl.KEYS}
    mse.update({"fastrnn-eta0.001": 0.14, "antisym-g0.01-e0.001": 0.14, "fastrnn-eta0.01": 0.05,
                "antisym-g0.01-e0.1": 0.06})
    out = abl.check(_abl_ds(mse, ratio))
    assert out["passed"] and not out["control"]["passed"] and record_of(abl.RECIPE, out)["verdict"] == "holds"
    # no trade-off: the small step is as accurate as the large one
    out = abl.check(_abl_ds(dict(mse, **{"fastrnn-eta0.001": 0.05}), ratio))
    assert not out["passed"] and record_of(abl.RECIPE, out)["verdict"] == "does not hold"
    # the accurate settings at the baseline: nothing to compare, inconclusive
    idle = dict(mse, **{"fastrnn-eta0.01": 0.17, "antisym-g0.01-e0.1": 0.17})
    assert record_of(abl.RECIPE, abl.check(_abl_ds(idle, ratio)))["verdict"] == "inconclusive"
    # the earlier record: every cell a hair below 1/6 (0.153–0.156) passed the old gate; no arm has learned
    # a tenth of the baseline, so the comparison is inconclusive at this scale
    hair = {k: 0.1535 for k in abl.KEYS}
    assert record_of(abl.RECIPE, abl.check(_abl_ds(hair, ratio)))["verdict"] == "inconclusive"


def _t11_ds(acc, null, seeds=5):
    rng = np.random.default_rng(2)
    a = np.array([[[acc(act, K) + 0.005 * rng.standard_normal() for _ in range(seeds)] for K in t11.KS]
                  for act in t11.ACTS])
    ds = xr.Dataset({"accuracy": (("activation", "K", "seed"), a),
                     "train_seconds": (("activation", "K", "seed"), np.ones_like(a)),
                     "params": (("activation", "K"), np.full((2, 3), 323)),
                     "paper_accuracy": (("activation", "K"), np.array([t11.PAPER[x] for x in t11.ACTS])),
                     "paper_train_hours": (("activation", "K"), np.array([t11.PAPER_TRAIN_HR[x] for x in t11.ACTS])),
                     "null_accuracy": (("seed",), null + 0.005 * rng.standard_normal(seeds))},
                    coords={"activation": list(t11.ACTS), "K": list(t11.KS), "seed": list(range(seeds))})
    ds.attrs.update({"majority_accuracy": 0.55, "n_test": 150, "hidden": 16, "iterations": 200,
                     "scaling": "built for the test"})
    return ds


def test_table11_check_table_gate_and_control():
    ds = _t11_ds(lambda act, K: 0.8 + 0.02 * K, null=0.82)
    out = t11.check(ds)
    assert out["passed"] and not out["control"]["passed"]
    rows = out["table"]["rows"]
    assert [r[3] for r in rows] == [95.32, 95.52, 96.30, 92.16, 93.35, 95.30]   # Table 11 as printed
    rec = record_of(t11.RECIPE, out, "x", setting_json=setting_attr(data="built", D=16))
    check_record(t11.RECIPE, rec, quick=False)
    assert rec["verdict"] == "holds"
    # flat in K: the claim fails
    flat = t11.check(_t11_ds(lambda act, K: 0.8, null=0.8))
    assert not flat["passed"]
    # a rise beyond 2 SE but below the test split's resolution (4.1 points on 150 test sequences; the
    # earlier check used the paper's 0.98 points on HAR-2): not a "holds"
    small = t11.check(_t11_ds(lambda act, K: 0.8 + 0.003 * K, null=0.8))
    assert not small["passed"] and record_of(t11.RECIPE, small)["verdict"] != "holds"
    # sigmoid at the majority class: the gate is not met
    idle = t11.check(_t11_ds(lambda act, K: 0.55 if act == "sigmoid" else 0.8 + 0.02 * K, null=0.82))
    assert record_of(t11.RECIPE, idle)["verdict"] == "inconclusive"
    # a fresh-seed K = 1 far above K = 1 makes the null control pass
    assert t11.check(_t11_ds(lambda act, K: 0.8 + 0.02 * K, null=0.95))["control"]["passed"]

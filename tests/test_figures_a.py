"""The iRNN recipes of issue 18 part a (irnn-fig5-add-length, irnn-ablation-baselines,
irnn-table11-activation): the settings and data they rest on, checked independently — the FastRNN
η and Antisymmetric γ/ε settings as built and as trained, the binary digits stand-in for HAR-2
against scikit-learn's labels, the shuffled-label control keeps the labels' counts — and that each
check both passes and fails (and its control fails) on Datasets built for it."""
import json

import numpy as np
import pytest
import xarray as xr

import dynlab as dl
from dynlab.figures import irnn_ablation_baselines as abl
from dynlab.figures import irnn_fig5_add_length as fig5
from dynlab.figures import irnn_table11_activation as t11
from dynlab.figures._irnn_parta import add_T, freeze_of, setting
from dynlab.figures._recipe import check_record


# ------------------------------------------------------------------ the baseline settings
@pytest.mark.parametrize("eta", [0.001, 0.01, 0.1])
def test_fastrnn_eta_setting_starts_at_step_eta(eta):
    """FastRNN(η): h = σ(β)h + σ(α)φ(…) built with σ(α) = η and σ(β) = 1 − η."""
    name, kw, _, _ = setting(f"fastrnn-eta{eta}")
    m = dl.make_model(name, 4, 2, seed=0, **kw)
    a, c, R = m.gated_form()
    assert c == pytest.approx(eta, rel=1e-12) and a == pytest.approx(1 - eta, rel=1e-12)
    np.testing.assert_array_equal(R, m.U)


def test_antisymmetric_gamma_eps_are_held_fixed_in_training():
    """γ and ε are hyper-parameters: built as named, unchanged by training while M moves."""
    key = "antisym-g0.01-e0.1"
    name, kw, _, _ = setting(key)
    m = dl.make_model(name, 4, 2, seed=0, **kw)
    assert (m.gamma, m.eps) == (0.01, 0.1)
    U = m.U
    np.testing.assert_allclose(U + U.T, -2 * 0.01 * np.eye(4), atol=1e-15)   # skew part + (−γ I)
    task = dl.make_task("adding", 10, seed=0, n_train=64, n_val=8, n_test=4)
    r = dl.train_model(m, task, iterations=3, lr=1e-2, batch=8, record_every=3, freeze=freeze_of(key),
                       progress=False)
    assert (r.model.gamma, r.model.eps) == (0.01, 0.1)
    assert np.abs(r.model.M - m.M).max() > 0


def test_quick_lengths_are_a_tenth():
    assert [add_T(T, True) for T in fig5.TS] == [10, 20, 40, 75]
    assert [add_T(T, False) for T in fig5.TS] == list(fig5.TS)


# ------------------------------------------------------------------ the HAR-2 stand-in
def test_binary_digits_labels_and_standardisation():
    """Labels are scikit-learn's digit ≥ 5 (recovered through the pixel values); the training split
    is standardised; the shuffled control keeps the training inputs and label counts and leaves the
    validation and test splits untouched."""
    sk = pytest.importorskip("sklearn.datasets")
    d = sk.load_digits()
    flat = (d.images.reshape(len(d.images), 64) / 16.0)
    lookup = {row.tobytes(): int(y) for row, y in zip(flat, d.target)}
    task = t11.binary_digits()
    mu, sd = task.settings["standardised"]
    for split, (x, y) in task.data.items():
        raw = x[:, :, 0] * sd + mu
        digits = np.array([lookup.get((np.round(r * 16) / 16.0).tobytes(), -1) for r in raw])
        assert (digits >= 0).all(), split
        np.testing.assert_array_equal(y, (digits >= 5).astype(int))
    xtr = task.data["train"][0]
    assert abs(xtr.mean()) < 1e-12 and xtr.std() == pytest.approx(1.0, rel=1e-12)
    assert task.outputs == 2 and task.steps == 64
    sh = t11.binary_digits(shuffled=True)
    np.testing.assert_array_equal(sh.data["train"][0], xtr)
    np.testing.assert_array_equal(np.bincount(sh.data["train"][1]), np.bincount(task.data["train"][1]))
    assert (sh.data["train"][1] != task.data["train"][1]).mean() > 0.3
    for split in ("val", "test"):
        np.testing.assert_array_equal(sh.data[split][1], task.data[split][1])


# ------------------------------------------------------------------ the checks on built Datasets
def _fig5_ds(irnn, rnn, lstm, seeds=5, noise=0.005):
    rng = np.random.default_rng(0)
    Ts = list(fig5.TS)
    vals = np.array([[[v + noise * rng.standard_normal() for _ in range(seeds)]
                      for v in (irnn(T), rnn(T), lstm(T), 0.16, 0.16)] for T in Ts])   # + FastRNN, Antisymmetric
    ds = xr.Dataset({"final_mse": (("T", "run", "seed"), vals),
                     "val_loss": (("T", "run", "seed", "iteration"), np.repeat(vals[..., None], 2, axis=-1)),
                     "params": (("run",), [98, 97, 393, 99, 99]), "T_run": (("T",), Ts)},
                    coords={"T": Ts, "run": list(fig5.KEYS), "seed": list(range(seeds)), "iteration": [0, 1]})
    ds.attrs.update({"baseline": 1 / 6, "iterations": 150, "scaling": "built for the test",
                     "short": json.dumps({k: setting(k)[3] for k in fig5.KEYS}),
                     "labels": json.dumps({k: setting(k)[2] for k in fig5.KEYS})})
    return ds


def test_fig5_check_passes_fails_and_control():
    good = fig5.check(_fig5_ds(lambda T: 0.01, lambda T: 0.17, lambda T: 0.16 + T / 1e4))
    assert good["passed"] and not good["control"]["passed"] and len(good["per_seed"]) == 5
    # the iRNN fails at the longest T: no claim
    bad = fig5.check(_fig5_ds(lambda T: 0.01 if T < 750 else 0.15, lambda T: 0.17, lambda T: 0.17))
    assert not bad["passed"] and "T = [750]" in bad["finding"]
    # the RNN learning everywhere makes the control pass: the record becomes an error
    ctrl = fig5.check(_fig5_ds(lambda T: 0.01, lambda T: 0.01, lambda T: 0.17))
    assert ctrl["control"]["passed"] and not ctrl["passed"]


def _abl_ds(mse, ratio, seeds=5):
    rng = np.random.default_rng(1)
    keys = list(abl.KEYS)
    m = np.array([[mse[k] + 0.002 * rng.standard_normal() for _ in range(seeds)] for k in keys])
    r = np.array([[ratio[k] * (1 + 0.01 * rng.standard_normal()) for _ in range(seeds)] for k in keys])
    ds = xr.Dataset({"final_mse": (("run", "seed"), m), "abs_ln_ratio": (("run", "seed"), r),
                     "params": (("run",), [99] * len(keys))},
                    coords={"run": keys, "seed": list(range(seeds))})
    ds.attrs.update({"baseline": 1 / 6, "iterations": 150, "short": json.dumps({k: setting(k)[3] for k in keys})})
    return ds


def test_ablation_check_passes_fails_and_control():
    ratio = {k: 1.0 for k in abl.KEYS}
    ratio.update({"fastrnn-eta0.001": 0.01, "antisym-g0.01-e0.001": 0.01, "irnn-K5": 0.1, "rnn": 30.0})
    mse = {k: 0.15 for k in abl.KEYS}
    mse.update({"fastrnn-eta0.001": 0.4, "antisym-g0.01-e0.001": 0.4, "irnn-K5": 0.02, "rnn": 0.17})
    out = abl.check(_abl_ds(mse, ratio))
    assert out["passed"] and not out["control"]["passed"]
    # no trade-off: the small step is as accurate as the large one
    out = abl.check(_abl_ds(dict(mse, **{"fastrnn-eta0.001": 0.15}), ratio))
    assert not out["passed"] and "not beyond 2 SE" in out["finding"]
    # an RNN that beats every tuned baseline passes the control
    out = abl.check(_abl_ds(dict(mse, rnn=0.02), ratio))
    assert out["control"]["passed"]


def _t11_ds(acc, control, seeds=5):
    rng = np.random.default_rng(2)
    a = np.array([[[acc(act, K) + 0.005 * rng.standard_normal() for _ in range(seeds)] for K in t11.KS]
                  for act in t11.ACTS])
    c = np.array([[control + 0.005 * rng.standard_normal() for _ in range(seeds)] for _ in t11.CONTROL_KS])
    ds = xr.Dataset({"accuracy": (("activation", "K", "seed"), a),
                     "train_seconds": (("activation", "K", "seed"), np.ones_like(a)),
                     "params": (("activation", "K"), np.full((2, 3), 323)),
                     "paper_accuracy": (("activation", "K"), np.array([t11.PAPER[x] for x in t11.ACTS])),
                     "paper_train_hours": (("activation", "K"), np.array([t11.PAPER_TRAIN_HR[x] for x in t11.ACTS])),
                     "control_accuracy": (("control_K", "seed"), c)},
                    coords={"activation": list(t11.ACTS), "K": list(t11.KS), "seed": list(range(seeds)),
                            "control_K": list(t11.CONTROL_KS)})
    ds.attrs.update({"majority_accuracy": 0.55, "n_test": 150, "hidden": 16, "iterations": 200,
                     "scaling": "built for the test"})
    return ds


def test_table11_check_table_and_control():
    ds = _t11_ds(lambda act, K: 0.8 + 0.02 * K, control=0.55)
    out = t11.check(ds)
    assert out["passed"] and not out["control"]["passed"]
    rows = out["table"]["rows"]
    assert [r[3] for r in rows] == [95.32, 95.52, 96.30, 92.16, 93.35, 95.30]   # Table 11 as printed
    assert rows[0][2] == f"{100 * ds['accuracy'].sel(activation='relu', K=1).mean().item():.1f} ± " \
                         f"{100 * ds['accuracy'].sel(activation='relu', K=1).std(ddof=1).item() / np.sqrt(5):.1f}"
    rec = {"passed": out["passed"], "control": out["control"], "per_seed": out["per_seed"], "table": out["table"],
           "scaling": "x"}
    check_record(t11.RECIPE, rec, quick=False)
    # flat in K: the claim fails with a finding
    flat = t11.check(_t11_ds(lambda act, K: 0.8, control=0.55))
    assert not flat["passed"] and "not beyond 2 SE" in flat["finding"]
    # a control network that learned (above the majority, K=5 above K=1) passes the control
    learn = _t11_ds(lambda act, K: 0.8 + 0.02 * K, control=0.8)
    learn["control_accuracy"].loc[{"control_K": 5}] += 0.1
    assert t11.check(learn)["control"]["passed"]

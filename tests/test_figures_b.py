"""Recipe-specific checks of irnn-table1-pixel-digits and irnn-table2-noisy-digits (issue 18, part b).

The quick runs of both recipes (and the record contract) are in test_figures.py; here: the data
they train on (standardisation, the fixed permutation, the noise padding, the pure-noise control
inputs), the parameter counts against closed forms, that the read-out-only control really trains
nothing but the read-out, and the claim decisions on Datasets with known numbers.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")
xr = pytest.importorskip("xarray")

import dynlab as dl  # noqa: E402
from dynlab.figures.irnn import _tables as tb  # noqa: E402
from dynlab.figures.irnn import table1_pixel_digits as t1  # noqa: E402
from dynlab.figures.irnn import table2_noisy_digits as t2  # noqa: E402


def test_standardised_digits_have_zero_mean_unit_variance_on_the_training_split():
    task = tb.standardised("pixels")
    x = task.data["train"][0]
    assert abs(x.mean()) < 1e-12 and abs(x.std() - 1.0) < 1e-12
    assert task.size("test") == 719 and task.steps == 64          # 40 % of 1797 images


def test_permuted_task_is_one_fixed_permutation_of_the_natural_steps():
    nat, per = tb.standardised("pixels"), tb.standardised("pixels", permute=t1.PERMUTE)
    perm = np.random.default_rng(t1.PERMUTE).permutation(64)
    for split in ("train", "test"):
        np.testing.assert_array_equal(per.data[split][0], nat.data[split][0][:, perm])
        np.testing.assert_array_equal(per.data[split][1], nat.data[split][1])


def test_noise_padding_keeps_the_rows_and_appends_standard_normal_noise():
    pad = 40
    plain, noisy = tb.standardised("rows"), tb.standardised("rows", pad=pad)
    assert noisy.steps == 8 + pad and noisy.inputs == 8
    x0, x = plain.data["train"][0], noisy.data["train"][0]
    np.testing.assert_array_equal(x[:, :8], x0)
    z = x[:, 8:].ravel()
    n = z.size                                        # ≈ 900·40·8 draws: mean within 5 SE, var within 5 SE
    assert abs(z.mean()) < 5 / np.sqrt(n) and abs(z.var() - 1.0) < 5 * np.sqrt(2.0 / n)
    assert not np.allclose(noisy.data["train"][0][:5, 8:], noisy.data["test"][0][:5, 8:])


def test_pure_noise_control_replaces_only_the_informative_test_rows():
    task = tb.standardised("rows", pad=16)
    ctrl = t2.pure_noise(task)
    x, y = task.data["test"]
    xc, yc = ctrl.data["test"]
    np.testing.assert_array_equal(yc, y)
    np.testing.assert_array_equal(xc[:, 8:], x[:, 8:])
    assert not np.any(np.isclose(xc[:, :8], x[:, :8]).all(axis=(1, 2)))
    np.testing.assert_array_equal(ctrl.data["train"][0], task.data["train"][0])
    assert abs(xc[:, :8].std() - 1.0) < 0.05


def test_chance_is_the_most_frequent_test_class():
    task = tb.standardised("rows", pad=4)
    y = task.data["test"][1]
    rate = t2.majority_rate(task)
    assert rate == max(np.mean(y == c) for c in range(10)) and 0.1 <= rate < 0.15


@pytest.mark.parametrize("key,closed", [
    ("rnn", lambda D, d: D * D + D * d + D),
    ("fastrnn", lambda D, d: D * D + D * d + D + 2),                  # + α, β
    ("antisymmetric", lambda D, d: D * D + D * d + D),                # ε, γ fixed
    ("lstm", lambda D, d: 4 * D * (D + d) + 8 * D),                   # b_ih and b_hh
    ("irnn-K1", lambda D, d: 2 * D * (D // 8) + D * d + D + 8),       # eq. 9: V, H of rank D/8, W, b, η (T = 8, K = 1)
    ("irnn-K3", lambda D, d: 2 * D * (D // 8) + D * d + D + 24),      # η_m^k: T·K = 8·3
    ("irnn-K1-readout", lambda D, d: 0),
])
def test_parameter_counts_match_closed_forms(key, closed):
    from dynlab.figures.irnn._training import build

    D, d, C = 16, 8, 10
    setting_key, freeze, _ = tb.ROWS[key]
    m, own = build(setting_key, D, d, 8, 0)
    assert tb.n_params(m, freeze or own, C) == closed(D, d) + D * C + C
    assert tb.n_params(m, freeze or own) == closed(D, d)


def test_the_read_out_only_control_trains_nothing_but_the_read_out():
    from dynlab.figures.irnn._training import build

    task = tb.standardised("pixels")
    setting_key, freeze, _ = tb.ROWS[t1.CONTROL]
    m = build(setting_key, 8, 1, task.steps, 3)[0]
    r = dl.train_model(m, task, iterations=5, lr=1e-2, batch=16, record_every=5, seed=3, progress=False,
                       freeze=freeze)
    for k, v in m.params().items():
        np.testing.assert_array_equal(r.model.params()[k], v)
    r2 = dl.train_model(m, task, iterations=5, lr=1e-2, batch=16, record_every=5, seed=3, progress=False)
    assert not np.allclose(r2.model.params()["V"], m.params()["V"])


def _table1_ds(acc: dict, cell_params=None):
    """A Dataset shaped like irnn-table1-pixel-digits' with the given per-seed accuracies."""
    runs, data_set, cell = [], [], []
    for d, (rows, _) in t1.DATA.items():
        for k in list(rows) + [t1.CONTROL]:
            runs.append(f"{d}:{k}")
            data_set.append(d)
            cell.append(k)
    a = np.array([acc[c] for c in cell], dtype=float)
    n = len(runs)
    cp = cell_params or {}
    ds = xr.Dataset({"accuracy": (("run", "seed"), a), "train_seconds": (("run", "seed"), np.ones_like(a)),
                     "params": (("run",), np.arange(n) + 100),
                     "cell_params": (("run",), [cp.get(c, 1000 if not c.startswith("irnn") else 300) for c in cell]),
                     "cell_weights": (("run",), [cp.get(c, 1000 if not c.startswith("irnn") else 300) for c in cell]),
                     "paper_accuracy": (("run",), np.full(n, 97.0))},
                    coords={"run": runs, "seed": np.arange(a.shape[1]), "data_set": ("run", data_set),
                            "cell": ("run", cell)})
    ds.attrs.update(hidden=32, iterations=300, majority_accuracy=0.11, n_test=719)
    return ds


def test_table1_check_matches_antisymmetric_and_beats_the_permuted_baselines():
    from dynlab.figures._recipe import record_of

    noise = np.array([0.0, 0.01, -0.01, 0.005, -0.005])
    acc = {"fastrnn": 0.80 + noise, "rnn": 0.78 + noise[::-1], "lstm": 0.82 + noise, "antisymmetric": 0.90 + noise,
           "irnn-K1": 0.95 + noise, "irnn-K2": 0.90 + noise, "irnn-K3": 0.91 + noise, t1.CONTROL: 0.30 + noise}
    out = t1.check(_table1_ds(acc))
    assert out["passed"] and not out["control"]["passed"] and "finding" not in out
    assert len(out["per_seed"]) == 5 and len(out["table"]["rows"]) == 11        # the controls are not table rows
    assert record_of(t1.RECIPE, out)["verdict"] == "holds"
    # 5 points below Antisymmetric: does not match
    out = t1.check(_table1_ds(dict(acc, **{"irnn-K3": 0.85 + noise})))
    assert not out["passed"] and "Antisymmetric" in out["finding"]
    assert record_of(t1.RECIPE, out)["verdict"] == "does not hold"
    # 8 points above Antisymmetric (the earlier record, failed by a two-sided check): "matches" is one-sided
    out = t1.check(_table1_ds(dict(acc, **{"irnn-K3": 0.98 + noise})))
    assert out["passed"] and record_of(t1.RECIPE, out)["verdict"] == "holds"
    # a permuted baseline that never learned (at the majority class): its comparison is inconclusive
    out = t1.check(_table1_ds(dict(acc, lstm=0.11 + noise)))
    assert record_of(t1.RECIPE, out)["verdict"] == "inconclusive"
    # fewer than 3× fewer parameters: the count part fails
    out = t1.check(_table1_ds(acc, cell_params={"antisymmetric": 500}))
    assert not out["passed"] and "cell weights" in out["finding"]


def test_table2_check_needs_every_baseline_beaten_and_its_gate():
    from dynlab.figures._recipe import record_of

    noise = np.array([0.0, 0.01, -0.01, 0.005, -0.005])
    acc = np.array([0.5 + noise, 0.10 + noise, 0.45 + noise, 0.7 + noise])            # FastRNN, LSTM, Anti, iRNN
    chance = 0.1 + noise
    ds = xr.Dataset({"accuracy": (("run", "seed"), acc), "noise_only_accuracy": (("run", "seed"), np.tile(chance, (4, 1))),
                     "train_seconds": (("run", "seed"), np.ones_like(acc)), "params": (("run",), np.arange(4)),
                     "paper_accuracy": (("run",), np.ones(4))},
                    coords={"run": list(t2.ROWS), "seed": np.arange(5)})
    ds.attrs.update(hidden=32, iterations=300, pad=120, steps=128, informative_steps=8, chance=0.1, n_test=719)
    out = t2.check(ds)
    assert out["passed"] and not out["control"]["passed"] and record_of(t2.RECIPE, out)["verdict"] == "holds"
    ds["accuracy"].loc[dict(run="irnn-K1")] = 0.46 + noise                               # beats LSTM, not FastRNN
    out = t2.check(ds)
    assert not out["passed"] and "iRNN (K=1) − FastRNN -4.0" in out["finding"]
    assert record_of(t2.RECIPE, out)["verdict"] == "does not hold"
    ds["accuracy"].loc[dict(run="irnn-K1")] = 0.7 + noise
    ds["accuracy"].loc[dict(run="antisymmetric")] = 0.1 + noise                          # a gated baseline at chance
    assert record_of(t2.RECIPE, t2.check(ds))["verdict"] == "inconclusive"
    # the control of the earlier record: the iRNN's noise-only guess half a point above the LSTM's beyond 2 SE
    # passed the paper's 0.36-point effect; under the test split's resolution (1.9 points) it fails, as it must
    ds["accuracy"].loc[dict(run="antisymmetric")] = 0.45 + noise
    ds["noise_only_accuracy"].loc[dict(run="irnn-K1")] = chance + 0.005 + 0.0002 * np.arange(5)
    out = t2.check(ds)
    assert out["passed"] and not out["control"]["passed"]

"""The sweep's vectorised host path (``dynlab.sweep.columns``), the ``TangentBatch`` layout and the
numba backend's σ₁ for sweeps.

The reference every result is held to is the per-point path: ``dl.sweep(..., batched=False,
backend="numpy")`` builds each point's model with ``make_model`` and runs the public
``dl.gradient_norms`` (backward products, LAPACK's SVD).  Tolerances, in ln‖·‖ (absolute in the
log = relative in the norm):

* ``numpy`` batched: the forward tangent and the backward products multiply the same Jacobians in
  other orders, both take LAPACK's SVD: rounding only, ≈ T·D·2⁻⁵³; 1e-12 asked (observed ≤ 1e-14
  at T ≤ 20, D ≤ 4);
* ``numba``: σ₁ by the certified power iteration (``config.NORM_RTOL`` = 1e-12 relative, one-sided:
  the certificate bounds σ₁/√ρ − 1 in [0, tol]) or the Gram matrix's top eigenvalue (exact to
  rounding), so 1e-12 + 1e-13 of rounding;
* the matrices the columns build are the models' own, bit for bit (checked with ``==``).
"""
from __future__ import annotations

import numpy as np
import pytest

import dynlab as dl
from dynlab import config
from dynlab.backends import get_backend
from dynlab.backends.base import TangentBatch, stack_tangent
from dynlab.sweep import model_and_input

VARS = ("log_jac_norm_1", "log_step_norm_T", "log_ratio", "ratio", "diverged_at")
TOL = {"numpy": 1e-12, "numba": config.NORM_RTOL + 1e-13}


def _agree(got, want, atol):
    for v in VARS:
        g, w = got[v].values, want[v].values
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=v)
        ok = np.isfinite(w)
        np.testing.assert_array_equal(g[~ok & ~np.isnan(w)], w[~ok & ~np.isnan(w)], err_msg=v)   # ±inf alike
        if v == "diverged_at":
            np.testing.assert_array_equal(g, w, err_msg=v)
        elif v == "ratio":
            np.testing.assert_allclose(g[ok], w[ok], rtol=3 * atol, atol=0, err_msg=v)
        else:
            np.testing.assert_allclose(g[ok], w[ok], rtol=0, atol=atol, err_msg=v)


GRIDS = [
    # every iRNN scalar and the weight scale vectorised, over two seeds (two structures)
    ("irnn-scalars", {"K": [1, 3], "eta": [0.3, 1.0], "weight_scale": [0.4, 0.9], "g0": ["zero", "previous"]},
     {"model": "irnn", "hidden": 3, "steps": 12}, 2),
    ("irnn-alpha-sign", {"alpha": [0.5, 1.0], "sign": [1, -1], "weight_scale": [0.3, 0.8]},
     {"model": "irnn", "hidden": 4, "steps": 9, "K": 2, "eta": 0.6}, None),
    # weight scale that does not scale the recurrent matrix: low rank, eq. 9, RIN, antisymmetric
    ("irnn-lowrank", {"K": [1, 2], "weight_scale": [0.4, 0.9]}, {"model": "irnn", "hidden": 3, "steps": 8, "rank": 2},
     None),
    ("irnn-eq9", {"eta": [0.5, 1.0], "weight_scale": [0.4, 0.9]}, {"model": "irnn", "hidden": 3, "steps": 8, "P": "U"},
     None),
    ("cells", {"model": ["rnn", "fastrnn", "rin", "antisymmetric"], "weight_scale": [0.4, 0.9]},
     {"hidden": 3, "steps": 10}, None),
    ("fastrnn-alpha", {"alpha": [-3.0, 0.5], "weight_scale": [0.4, 0.9]}, {"model": "fastrnn", "hidden": 3, "steps": 7},
     None),
    # several shapes in one region (steps, hidden), T = 2, and a model without forward tangents
    ("shapes", {"steps": [2, 5], "hidden": [2, 3], "weight_scale": [0.4, 1.7]}, {"model": "irnn", "K": 2}, None),
    ("gru-and-irnn", {"model": ["irnn", "gru"], "weight_scale": [0.4, 0.9]}, {"hidden": 2, "steps": 6}, None),
]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("name,grid,fixed,seeds", GRIDS, ids=[g[0] for g in GRIDS])
def test_columns_equal_the_per_point_path(name, grid, fixed, seeds, backend):
    got = dl.sweep("gradient_norms", grid, fixed=fixed, seeds=seeds, backend=backend, progress=False)
    want = dl.sweep("gradient_norms", grid, fixed=fixed, seeds=seeds, backend="numpy", batched=False, progress=False)
    assert got["done"].all()
    _agree(got, want, TOL[backend])


def test_divergence_is_reported_per_setting():
    """A weight scale that overflows the identity RNN at some seeds: the step, NaN summaries, and
    the others untouched (as the per-point path)."""
    fixed = {"model": "rnn", "hidden": 3, "steps": 300, "activation": "identity"}
    grid = {"weight_scale": [0.5, 40.0]}     # ρ(U) ≈ 40: |h| overflows near step 190
    got = dl.sweep("gradient_norms", grid, fixed=fixed, seeds=2, progress=False)
    want = dl.sweep("gradient_norms", grid, fixed=fixed, seeds=2, backend="numpy", batched=False, progress=False)
    assert (got["diverged_at"].values[1] > 0).all() and (got["diverged_at"].values[0] == 0).all()
    _agree(got, want, TOL["numba"])


def _built_by_columns(grid, fixed):
    """(models the columns path builds for one region holding the whole grid, the region)."""
    from dynlab.sweep import columns

    built = []
    spec = dl.sweep.make_sweep_spec("gradient_norms", grid, fixed=fixed)
    memo = columns.Memo(lambda run: built.append(dict(run)) or model_and_input(run))
    table = dl.sweep.grid.region_table(spec, tuple(slice(0, n) for n in spec.shape), memo)
    region = columns._Region(table, get_backend("numba"), "numba", dl.sweep.get_target("gradient_norms"), table.memo)
    for rows in table.groups(set(grid) - {"weight_scale", "K", "eta"}):
        region.group(rows)
    return built, table, region


def test_one_model_per_structure_not_per_setting():
    """A grid of K, η and weight scale builds the same few models in the columns path — the
    structure's (at the first K and η), the one at s = √D whose matrix is the Gaussian draw Z,
    and a probe checking U(s) = Z·(s/√D) — for 6 settings or 60; the batch's matrices and η rows
    are the models' own, bit for bit."""
    fixed = {"model": "irnn", "hidden": 4, "steps": 6}
    small, _, _ = _built_by_columns({"K": [1, 2], "eta": [0.2], "weight_scale": [0.3, 0.6, 0.9]}, fixed)
    grid = {"K": [1, 2, 3], "eta": [0.2, 0.5, 0.8, 1.0], "weight_scale": [0.3, 0.6, 0.9, 1.2, 1.5]}
    built, table, region = _built_by_columns(grid, fixed)
    assert 0 < len(built) == len(small) <= 3       # as many models for 60 settings as for 6
    assert 2.0 in {b["weight_scale"] for b in built}             # √D = 2: the draw Z itself
    (parts,) = region.batches.values()
    (rows, rec, inverse, form, x, scalars), = parts
    assert rows.shape[0] == 60 and rec.shape[0] == 5              # one matrix per weight scale
    for i in range(60):
        p = table.point(int(rows[i]))
        m = dl.make_model("irnn", 4, 1, seed=0, K=p["K"], eta=p["eta"], weight_scale=p["weight_scale"])
        assert np.array_equal(rec[inverse[i]], m.form().U)
        assert np.array_equal(scalars[0][i, :m.K], m.form().eta[0]) and not scalars[0][i, m.K:].any()


def test_settings_table_columns_and_groups():
    spec = dl.sweep.make_sweep_spec("gradient_norms", {"K": [1, 2, 3], "eta": [0.1, 0.2]},
                                    zipped={"sched": {"alpha": [0.5, 1.0], "g0": ["zero", "previous"]}},
                                    fixed={"model": "irnn"}, seeds=2)
    region = (slice(1, 3), slice(0, 2), slice(0, 2), slice(1, 2))
    table = dl.sweep.grid.region_table(spec, region)
    points = dl.sweep.grid.region_points(spec, region)
    assert table.n == len(points)
    for name in ("K", "eta", "alpha", "g0", "seed", "model", "hidden"):
        assert list(table.column(name)) == [p.get(name) for _, p in points], name
    groups = table.groups(["g0", "K"])
    assert sorted(np.concatenate(groups).tolist()) == list(range(table.n))
    for rows in groups:
        keys = {(points[i][1]["g0"], points[i][1]["K"]) for i in rows}
        assert len(keys) == 1
    assert len(groups) == 4


def test_tangent_batch_shares_forms_and_inputs_and_checks_its_shapes():
    m1 = dl.make_model("irnn", 3, 2, seed=0, K=2, eta=0.5)
    m2 = dl.make_model("irnn", 3, 2, seed=1, K=1, eta=0.5)
    x1, x2 = dl.tasks.random_walk(7, 2, seed=0), dl.tasks.random_walk(7, 2, seed=1)
    tb = stack_tangent([m1.form(), m2.form(), m1.form(), m1.form()], [x1, x1, x1, x2])
    assert tb.R.shape[0] == 3 and list(tb.group) == [0, 1, 0, 2]          # (m1, x1) stored once
    C = tb.drive()
    for n, (m, x) in enumerate([(m1, x1), (m2, x1), (m1, x1), (m1, x2)]):
        np.testing.assert_allclose(C[n], x @ m.W.T + m.b, rtol=1e-15, atol=1e-15)
    assert tb.astype(np.float32).X.dtype == np.float32 and tb.astype(np.float32).group.dtype == np.int64
    with pytest.raises(ValueError, match="group indices"):
        TangentBatch(tb.gated, tb.R, tb.W, tb.b, tb.X, tb.group + 1, tb.eta, tb.K, tb.alpha, tb.sign, tb.g0prev,
                     tb.act, tb.leak)
    with pytest.raises(ValueError, match="rows"):
        TangentBatch(tb.gated, tb.R, tb.W, tb.b, tb.X, tb.group, tb.eta[:2], tb.K, tb.alpha, tb.sign, tb.g0prev,
                     tb.act, tb.leak)


@pytest.mark.parametrize("D", [1, 2, 5])
@pytest.mark.parametrize("T", [2, 9])
def test_numba_sweep_norms_equal_lapack(D, T):
    """The numba sweep's σ₁ (closed forms at D ≤ 2, the certified power iteration, its Gram
    fallback; at T = 2 one σ₁ for both norms) against the reference's SVD, on settings whose top
    singular values are clustered (small η: J_T ≈ (1 − ηα) I) and well separated."""
    forms, xs = [], []
    for s, (K, eta, ws) in enumerate([(1, 0.05, 0.1), (3, 0.9, 1.5), (2, 0.5, 0.6), (4, 1.0, 2.0)]):
        forms.append(dl.make_model("irnn", D, 1, seed=s, K=K, eta=eta, weight_scale=ws).form())
        xs.append(dl.tasks.random_walk(T, 1, seed=s))
    tb = stack_tangent(forms, xs)
    got = get_backend("numba").sweep_gradients(tb)
    want = get_backend("numpy").sweep_gradients(forms, xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=TOL["numba"])


def test_numba_region_size_holds_a_fraction_of_a_second_of_work():
    be = get_backend("numba")
    lo, hi = config.SWEEP_REGION_RANGE
    assert be.sweep_region_size(32, 200, 10) == lo               # the sweep workload: as before
    n = be.sweep_region_size(32, 2, 10)                          # T = 2: ≈ 2e9 / (2·32³·24) ≈ 1270
    assert n == int(config.SWEEP_REGION_FLOPS // (2 * 32 ** 3 * 24)) and lo < n < hi
    assert be.sweep_region_size(2, 2, 1) == hi


def test_a_batch_of_several_activations_on_every_cpu_backend():
    """A ``TangentBatch`` carries an activation per setting: the reference runs one batched pass per
    activation and must equal each setting run alone (exactly: the same operations); numba runs
    them together (to its σ₁ tolerance)."""
    ms = [dl.make_model("irnn", 3, 1, seed=s, K=2, eta=0.5, activation=a)
          for s, a in enumerate(["tanh", "relu", "tanh", "leaky-relu"])]
    xs = [dl.tasks.random_walk(6, 1, seed=s) for s in range(4)]
    tb = stack_tangent([m.form() for m in ms], xs)
    ref, nb = get_backend("numpy"), get_backend("numba")
    together = ref.sweep_gradients(tb)
    for i in range(4):
        alone = ref.sweep_gradients([ms[i].form()], [xs[i]])
        assert [a[i] for a in together] == [a[0] for a in alone]
    for g, w in zip(nb.sweep_gradients(tb), together):
        np.testing.assert_allclose(g, w, rtol=0, atol=TOL["numba"])

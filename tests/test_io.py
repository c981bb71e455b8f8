"""Weights (.npz) and Datasets (NetCDF): exact round trips, no pickles, clear errors."""
from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

import battery
import dynlab
from conftest import MODEL_CASES, inputs
from dynlab.errors import ParameterError
from dynlab.io import load_model, model_from_dataset, read_dataset, save_model, write_dataset
from dynlab.models import IRNN, RNN

T_IO = 15

EXTRA_CASES = {
    # explicit arrays: seed and weight_scale are None and must come back as None
    "rnn-explicit": lambda: RNN(np.eye(3) * 0.5, np.ones((3, 1)), np.zeros(3), activation="abs"),
    "irnn-lowrank3-etaTK": lambda: dynlab.make_model("irnn", 4, 2, K=3, rank=3, eta=np.full((T_IO, 3), 0.3),
                                                     sign=-1, g0="previous", seed=9),
    # eq. 9 with a dense U = P given as arrays: the file holds the paper's U, W, b, not P U, P W, P b
    "irnn-eq9-dense-explicit": lambda: IRNN(np.eye(3) + 0.1 * np.arange(9.0).reshape(3, 3) / 9, np.ones((3, 2)),
                                            np.arange(3.0), P="U", K=2, eta=np.array([0.2, 0.4]), g0="previous"),
    "ctrnn-radau": lambda: dynlab.make_model("ctrnn", 3, 2, method="Radau", rtol=1e-9, atol=1e-11, tau=0.7,
                                             seed=1),
}


def _cases():
    out = {k: (lambda k=k: MODEL_CASES[k]("leaky-relu", T_IO)) for k in MODEL_CASES}
    out.update(EXTRA_CASES)
    return out


CASES = _cases()


def _same_model(a, b):
    assert type(a) is type(b)
    pa, pb = a.params(), b.params()
    assert set(pa) == set(pb)
    for k in pa:
        va, vb = np.asarray(pa[k]), np.asarray(pb[k])
        assert va.dtype == vb.dtype and va.shape == vb.shape, k
        assert va.tobytes() == vb.tobytes(), f"{k} differs"  # bitwise
    assert a.settings() == b.settings()
    assert a.seed == b.seed and a.weight_scale == b.weight_scale
    np.testing.assert_array_equal(a.U, b.U)


@pytest.mark.parametrize("case", list(CASES))
def test_weights_round_trip_exactly(case, tmp_path):
    m = CASES[case]()
    path = save_model(m, tmp_path / "w.npz")
    m2 = load_model(path)
    _same_model(m, m2)
    x = inputs(2, T_IO, d=m.inputs, seed=3)
    h0 = 0.3 * np.ones((2, m.hidden))
    np.testing.assert_array_equal(dynlab.simulate(m2, x, h0).h.values, dynlab.simulate(m, x, h0).h.values)


def test_save_appends_suffix(tmp_path):
    m = dynlab.make_model("rnn", 2, 1, seed=0)
    path = save_model(m, tmp_path / "weights")
    assert path.endswith(".npz")
    _same_model(m, load_model(path))


@pytest.mark.parametrize("case", ["irnn-K5-lowrank1", "irnn-lowrank3-etaTK", "ctrnn-rk4", "fastrnn"])
def test_npz_holds_no_object_arrays(case, tmp_path):
    m = CASES[case]()
    path = save_model(m, tmp_path / "w.npz")
    with np.load(path, allow_pickle=False) as f:
        for k in f.files:
            arr = f[k]  # would raise ValueError for an object array
            assert arr.dtype.kind != "O", k
        assert str(f["__model__"]) == m.name
        if isinstance(m, IRNN) and m.lowrank:
            assert "V" in f.files and "H" in f.files and "U" not in f.files


def test_load_errors_name_weights(tmp_path):
    with pytest.raises(ParameterError) as info:
        load_model(tmp_path / "missing.npz")
    assert info.value.param == "weights"
    other = tmp_path / "other.npz"
    np.savez(other, a=np.zeros(3))
    with pytest.raises(ParameterError) as info:
        load_model(other)
    assert info.value.param == "weights" and "__model__" in info.value.message
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip file")
    with pytest.raises(ParameterError) as info:
        load_model(junk)
    assert info.value.param == "weights"
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, __model__=np.array("rnn"), U=np.array([object()], dtype=object))
    with pytest.raises(ParameterError) as info:
        load_model(pickled)
    assert info.value.param == "weights"
    # a dynlab file whose arrays do not make a valid model: still a ParameterError
    bad = tmp_path / "bad.npz"
    np.savez(bad, __model__=np.array("rnn"), U=np.zeros((2, 2)), W=np.zeros((3, 1)), b=np.zeros(3))
    with pytest.raises(ParameterError):
        load_model(bad)
    unknown = tmp_path / "unknown.npz"
    np.savez(unknown, __model__=np.array("lstm"), U=np.zeros((2, 2)))
    with pytest.raises(ParameterError) as info:
        load_model(unknown)
    assert info.value.param == "weights"
    with pytest.raises(ParameterError) as info:
        save_model("rnn", tmp_path / "x.npz")
    assert info.value.param == "model"


def _clean(attrs):
    """What write_dataset promises to store: NetCDF-safe attrs (None → 'none', bool → int)."""
    from dynlab._dataset import clean_attr
    return {k: clean_attr(v) for k, v in attrs.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_dataset_round_trip(case, tmp_path):
    m = CASES[case]()
    x = inputs(2, T_IO, d=m.inputs, seed=4)
    ds = dynlab.simulate(m, x, 0.2 * np.ones((2, m.hidden)), command="dynlab simulate --roundtrip")
    path = write_dataset(ds, tmp_path / "run.nc")
    back = read_dataset(path)
    expected = ds.copy()
    expected.attrs = _clean(ds.attrs)
    for name in expected.variables:
        expected[name].attrs = _clean(expected[name].attrs)
    xr.testing.assert_identical(back, expected)  # values, dims, coords and attrs, exactly
    for name in ds.data_vars:
        assert back[name].values.tobytes() == ds[name].values.tobytes(), name
    # the file alone recomputes the run
    m2 = model_from_dataset(back)
    _same_model(m, m2)
    again = dynlab.simulate(m2, back.x.values, back.h0.values)
    np.testing.assert_array_equal(again.h.values, ds.h.values)


def test_dataset_round_trip_unbatched_with_flag(tmp_path):
    m = RNN(3.0 * np.eye(2), np.zeros((2, 1)), np.zeros(2), activation="identity")
    ds = dynlab.simulate(m, np.zeros((700, 1)), [1.0, 0.0], on_divergence="flag")
    back = read_dataset(write_dataset(ds, tmp_path / "flag.nc"))
    assert int(back.diverged_at) == 647
    np.testing.assert_array_equal(back.h.values, ds.h.values)  # inf and nan survive too


def test_read_dataset_errors(tmp_path):
    with pytest.raises(ParameterError) as info:
        read_dataset(tmp_path / "none.nc")
    assert info.value.param == "data"
    with pytest.raises(ParameterError) as info:
        model_from_dataset(xr.Dataset())
    assert info.value.param == "data"


def test_read_dataset_closes_the_file(tmp_path):
    m = dynlab.make_model("rnn", 2, 1, seed=0)
    path = write_dataset(dynlab.simulate(m, np.zeros((4, 1))), tmp_path / "a.nc")
    read_dataset(path)
    # overwriting works only if the file was closed
    write_dataset(dynlab.simulate(m, np.ones((4, 1))), path)
    np.testing.assert_array_equal(read_dataset(path).x.values, np.ones((4, 1)))


# ============================================== gated models and stacks (and PyTorch-made ones)
TORCH_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "torch")
#: The battery's gated cells and stacks (tests/battery.py), a single gated cell with another
#: activation (its setting must come back), and a file PyTorch made.  (Not the battery's stack of
#: layers made one by one: a Dataset records the stack's seed only, so its layers' own seeds come
#: back from the .npz alone — test_a_stack_of_given_layers_keeps_their_seeds_in_npz.)
GATED = {**battery.builders(battery.names("gated", "stack-gated", "stack-cell", exclude=("stack-lstm-mixed",)), 3, 2),
         "lstm-relu": lambda: battery.build("lstm", 3, 2, activation="relu"),
         "torch-lstm-2layer": lambda: dynlab.load_model(os.path.join(TORCH_FIXTURES, "lstm-2layer.safetensors"))}


def _layers(m):
    return list(m.layers) if isinstance(m, dynlab.Stack) else [m]


def _same_gated(a, b):
    """Bitwise parameters, settings, seeds and weight scales (a stack's: of every layer too)."""
    assert type(a) is type(b)
    pa, pb = a.params(), b.params()
    assert pa.keys() == pb.keys()
    for k in pa:
        assert np.asarray(pa[k]).tobytes() == np.asarray(pb[k]).tobytes(), k
    assert a.settings() == b.settings() and (a.seed, a.weight_scale) == (b.seed, b.weight_scale)
    for la, lb in zip(_layers(a), _layers(b)):
        assert (la.seed, la.weight_scale, la.settings()) == (lb.seed, lb.weight_scale, lb.settings())


@pytest.mark.parametrize("case", list(GATED))
def test_gated_models_round_trip_through_npz_and_datasets(case, tmp_path):
    """save_model/load_model and a simulate Dataset written to NetCDF rebuild the model bit for
    bit (a stack's layers under ``layer{ℓ}_``), and the rebuilt model reruns the same states."""
    m = GATED[case]()
    back = dynlab.load_model(dynlab.save_model(m, tmp_path / "w.npz"))
    _same_gated(m, back)
    rng = np.random.default_rng(5)
    x, h0 = rng.standard_normal((2, 6, m.inputs)), 0.3 * rng.standard_normal((2, m.state_size))
    ds = dynlab.simulate(m, x, h0)
    read = dynlab.read_dataset(dynlab.write_dataset(ds, tmp_path / "run.nc"))
    again = dynlab.model_from_dataset(read)
    _same_gated(m, again)
    np.testing.assert_array_equal(dynlab.simulate(again, read.x.values, read.h0.values).h.values, ds.h.values)
    np.testing.assert_array_equal(dynlab.simulate(back, x, h0).h.values, ds.h.values)


def test_load_model_checks_the_kind_of_a_dynlab_file(tmp_path):
    """``model=`` of a dynlab file must be what it holds; a stack counts as its layers' kind."""
    path = dynlab.save_model(dynlab.make_model("stack", 3, 2, cell="gru", layers=2, seed=0), tmp_path / "s.npz")
    assert dynlab.load_model(path, "gru").name == "stack" and dynlab.load_model(path, "stack").name == "stack"
    with pytest.raises(ParameterError) as info:
        dynlab.load_model(path, "lstm")
    assert info.value.param == "model" and "holds a 'stack' model" in info.value.message
    with pytest.raises(ParameterError) as info:
        dynlab.load_model(path, activation="relu")
    assert info.value.param == "activation" and "dynlab weights file" in info.value.message


def test_a_stack_of_given_layers_keeps_their_seeds_in_npz(tmp_path):
    """Layers built on their own keep their seeds through save_model (a Dataset records only the
    stack's seed, from which model_from_dataset derives Stack.random's seed + ℓ − 1)."""
    layers = (dynlab.make_model("gru", 3, 2, seed=7), dynlab.make_model("gru", 3, 3, seed=1, weight_scale=0.5))
    m = dynlab.Stack(layers)
    back = dynlab.load_model(dynlab.save_model(m, tmp_path / "w.npz"))
    assert [(la.seed, la.weight_scale) for la in back.layers] == [(7, 1.0), (1, 0.5)]
    _same_gated(m, back)

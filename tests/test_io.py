"""Weights (.npz) and Datasets (NetCDF): exact round trips, no pickles, clear errors."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

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

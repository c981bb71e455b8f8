"""Networks trained in PyTorch: conversions checked against PyTorch's own forward pass and autograd.

The references are PyTorch's alone: ``tests/fixtures/torch/make_fixtures.py`` (which never
imports dynlab) built every module with PyTorch's initialisation, saved its parameters
(float32, as trained networks are stored) as ``.safetensors`` and as ``.npz`` under PyTorch's
names, and recorded the float64 module's forward pass, its states at every step and
``torch.func.jacrev`` of one module call along them.  These fixture tests run always (CI has
no torch); the live tests rebuild the modules with that script and compare ``dl.from_torch``
whenever torch is importable.

Tolerances: trajectories to 1e-12 and Jacobians to 1e-10 absolute (the issue's bounds; the
states are O(1), so these are also relative bounds).  Both computations are float64 over T = 5
steps of the same formulas, so the differences seen are summation-order rounding, ≈ 1e-16.
Parameters read from the two file formats, and from a live module, agree bit for bit.
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import pytest

import dynlab as dl
from dynlab.errors import ParameterError
from dynlab.torch_import import read_safetensors

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "torch")
#: The cases of make_fixtures.CASES (checked against it when torch is importable).
CASES = ("rnn-tanh", "rnn-relu", "rnn-nobias", "rnn-relu-2layer-batchfirst", "gru", "gru-2layer",
         "gru-nobias-batchfirst", "gru-in-net", "lstm", "lstm-2layer", "lstm-2layer-nobias-batchfirst",
         "rnncell-tanh", "rnncell-relu-nobias", "grucell", "lstmcell")
KIND = {"RNN": "rnn", "RNNCell": "rnn", "GRU": "gru", "GRUCell": "gru", "LSTM": "lstm", "LSTMCell": "lstm"}
TRAJ_TOL, JAC_TOL = 1e-12, 1e-10


def _expected(case):
    with np.load(os.path.join(FIX, f"{case}.expected.npz"), allow_pickle=False) as f:
        return {k: (f[k].item() if f[k].ndim == 0 else f[k]) for k in f.files}


def _load(case, fmt, ref, *, give_kind):
    """The fixture's model read from its file; ``give_kind`` names the kind, else it is inferred."""
    kwargs = {"activation": "relu"} if ref["nonlinearity"] == "relu" else {}
    if give_kind:
        kwargs["model"] = KIND[ref["module"]]
    return dl.load_model(os.path.join(FIX, f"{case}.{fmt}"), **kwargs)


def _layers(m):
    return list(m.layers) if isinstance(m, dl.Stack) else [m]


def _compare_run(m, ref, *, is_cell, lstm):
    """dynlab's jacobians (which simulates) against PyTorch's results, on the NumPy reference and
    the default backend; returns the largest absolute differences of the two."""
    runs = [_compare_one(m, ref, is_cell=is_cell, lstm=lstm, backend=b) for b in ("numpy", "numba")]
    return {k: max(r[k] for r in runs) for k in runs[0]}


def _compare_one(m, ref, *, is_cell, lstm, backend):
    ds = dl.jacobians(m, ref["x"], ref["s0"], backend=backend)
    H = ds.h.values
    diffs = {"states": np.abs(H - ref["states"]).max()}
    out = H[..., m.output_slice]
    torch_out = ref["output"] if (is_cell or ref["batch_first"]) else ref["output"].transpose(1, 0, 2)
    diffs["output"] = np.abs(out - torch_out).max()
    # the module's final (h_n, c_n), layer by layer, from the final state s_T
    o, D = 0, m.hidden
    h_n, c_n = ref["h_n"], ref.get("c_n")
    if not is_cell:
        worst = 0.0
        for k, layer in enumerate(_layers(m)):
            worst = max(worst, np.abs(H[:, -1, o:o + D] - h_n[k]).max())
            if lstm:
                worst = max(worst, np.abs(H[:, -1, o + D:o + 2 * D] - c_n[k]).max())
            o += layer.state_size
        diffs["final"] = worst
    else:
        diffs["final"] = np.abs(H[:, -1, :D] - h_n).max()
        if lstm:
            diffs["final"] = max(diffs["final"], np.abs(H[:, -1, D:] - c_n).max())
    diffs["jac"] = np.abs(ds.jac.values - ref["jac"]).max()
    diffs["jac_x"] = np.abs(ds.jac_x.values - ref["jac_x"]).max()
    return diffs


def _same(a, b):
    assert type(a) is type(b)
    pa, pb = a.params(), b.params()
    assert pa.keys() == pb.keys()
    for k in pa:
        assert np.asarray(pa[k]).tobytes() == np.asarray(pb[k]).tobytes(), k
    assert a.settings() == b.settings() and (a.seed, a.weight_scale) == (b.seed, b.weight_scale)
    for la, lb in zip(_layers(a), _layers(b)):
        assert (la.seed, la.weight_scale, la.settings()) == (lb.seed, lb.weight_scale, lb.settings())


def _check(diffs):
    for key in ("states", "output", "final"):
        assert diffs[key] <= TRAJ_TOL, (key, diffs)
    for key in ("jac", "jac_x"):
        assert diffs[key] <= JAC_TOL, (key, diffs)


# ====================================================================== fixtures (no torch)
@pytest.mark.parametrize("fmt", ["safetensors", "npz"])
@pytest.mark.parametrize("case", CASES)
def test_fixture_trajectories_and_jacobians_equal_pytorch(case, fmt):
    """Every class and option: states at every step, the module's output and (h_n, c_n) to
    1e-12, J = ∂s_t/∂s_{t-1} and ∂s_t/∂x_t to 1e-10 (a 2-layer net: on the concatenated state).
    .safetensors is read with the kind named, .npz with the kind inferred from the shapes."""
    ref = _expected(case)
    m = _load(case, fmt, ref, give_kind=fmt == "safetensors")
    kind = KIND[ref["module"]]
    assert all(layer.name == kind for layer in _layers(m))
    assert isinstance(m, dl.Stack) == ("2layer" in case)
    assert m.state_size == ref["s0"].shape[1] and m.inputs == ref["x"].shape[2]
    if kind == "rnn":
        assert m.activation == ref["nonlinearity"]
    diffs = _compare_run(m, ref, is_cell=ref["module"].endswith("Cell"), lstm=kind == "lstm")
    _check(diffs)


@pytest.mark.parametrize("case", CASES)
def test_fixture_formats_give_the_same_model_bit_for_bit(case):
    """.safetensors (the reader here, on files the safetensors library wrote) and .npz (NumPy's
    own reader) hold the same float32 tensors: the models agree bit for bit; bias=False gives
    zero biases; an rnn's b is bias_ih + bias_hh."""
    ref = _expected(case)
    a = _load(case, "safetensors", ref, give_kind=True)
    b = _load(case, "npz", ref, give_kind=False)
    assert type(a) is type(b) and a.params().keys() == b.params().keys()
    for k, v in a.params().items():
        assert v.dtype == np.float64 and v.tobytes() == b.params()[k].tobytes(), k
    with np.load(os.path.join(FIX, f"{case}.npz")) as f:
        raw = {k: f[k] for k in f.files}
    p = ref["prefix"]
    first = _layers(a)[0]
    if KIND[ref["module"]] == "rnn":
        sfx = "" if ref["module"].endswith("Cell") else "_l0"
        np.testing.assert_array_equal(first.U, raw[f"{p}weight_hh{sfx}"].astype(np.float64))
        bias = (raw[f"{p}bias_ih{sfx}"].astype(np.float64) + raw[f"{p}bias_hh{sfx}"].astype(np.float64)
                if f"{p}bias_ih{sfx}" in raw else 0.0)
        np.testing.assert_array_equal(first.b, np.broadcast_to(bias, first.b.shape))
    else:
        sfx = "" if ref["module"].endswith("Cell") else "_l0"
        np.testing.assert_array_equal(first.W_hh, raw[f"{p}weight_hh{sfx}"].astype(np.float64))
        if "nobias" in case:
            assert not np.any(first.b_ih) and not np.any(first.b_hh)


def test_a_whole_networks_state_dict_finds_its_recurrent_module():
    """gru-in-net holds ``rnn.*`` beside ``readout.weight``/``readout.bias``: the prefix is found,
    the read-out left alone; naming the prefix (with or without the dot) gives the same model."""
    path = os.path.join(FIX, "gru-in-net.safetensors")
    assert {"readout.weight", "readout.bias", "rnn.weight_hh_l0"} <= set(read_safetensors(path))
    auto = dl.load_model(path)
    for prefix in ("rnn.", "rnn"):
        named = dl.load_model(path, "gru", prefix=prefix)
        for k, v in auto.params().items():
            assert v.tobytes() == named.params()[k].tobytes()
    with pytest.raises(ParameterError) as info:
        dl.load_model(path, prefix="readout.")
    assert info.value.param == "prefix" and "'readout.weight'" in info.value.message
    assert "recurrent modules in the file: 'rnn.'" in info.value.message
    with pytest.raises(ParameterError) as info:
        dl.load_model(path, prefix="encoder.")
    assert info.value.param == "prefix" and "'rnn.'" in info.value.message


def test_a_safetensors_file_is_known_by_its_header_too(tmp_path):
    """A safetensors file under another suffix (``model.st``) is read as one."""
    other = tmp_path / "model.st"
    other.write_bytes(open(os.path.join(FIX, "lstm.safetensors"), "rb").read())
    a, b = dl.load_model(other), dl.load_model(os.path.join(FIX, "lstm.safetensors"))
    assert all(v.tobytes() == b.params()[k].tobytes() for k, v in a.params().items())


def test_safetensors_dtypes_are_read_exactly():
    """F16, BF16, F32, F64 tensors (written by the safetensors library from torch) read as the
    values torch widens them to, bit for bit; I64, BOOL and C64 read as themselves."""
    got = read_safetensors(os.path.join(FIX, "dtypes.safetensors"))
    with np.load(os.path.join(FIX, "dtypes.expected.npz")) as f:
        for k in ("f16", "bf16", "f32", "f64"):
            assert got[k].dtype.kind == "f"
            np.testing.assert_array_equal(got[k].astype(np.float64), f[k])
    assert got["f16"].dtype == np.float16 and got["bf16"].dtype == np.float32 and got["f64"].dtype == np.float64
    np.testing.assert_array_equal(got["i64"], np.arange(6).reshape(2, 3))
    assert got["bool"].dtype == np.bool_ and got["c64"].dtype == np.complex64
    # negative control: BF16 keeps 8 significant bits, so 1e-3 is not 1e-3 there
    assert got["bf16"][1, 0] != np.float32(1e-3)


# ======================================================================= bad files, one line
def _npz_from(case, tmp_path, change, name="bad.npz"):
    with np.load(os.path.join(FIX, f"{case}.npz")) as f:
        arrays = {k: f[k] for k in f.files}
    change(arrays)
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


_ST_CODES = {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16",
             np.dtype("int64"): "I64", np.dtype("complex64"): "C64", np.dtype("bool"): "BOOL"}


def write_safetensors(path, arrays, codes=None):
    """A minimal safetensors writer for tampered files (the format: 8-byte little-endian header
    length, JSON header, data).  ``codes`` overrides a tensor's dtype string."""
    header, blobs, offset = {}, [], 0
    for k, v in arrays.items():
        raw = np.ascontiguousarray(v).tobytes()
        code = (codes or {}).get(k) or _ST_CODES[np.dtype(v.dtype)]
        header[k] = {"dtype": code, "shape": list(np.shape(v)), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))
    return str(path)


def _st_from(case, tmp_path, change, codes=None):
    with np.load(os.path.join(FIX, f"{case}.npz")) as f:
        arrays = {k: f[k] for k in f.files}
    change(arrays)
    return write_safetensors(tmp_path / "bad.safetensors", arrays, codes)


def _drop(*keys):
    return lambda a: [a.pop(k) for k in keys]


def _set(key, value):
    return lambda a: a.__setitem__(key, value(a[key]) if callable(value) else value)


def _rename(old, new):
    return lambda a: a.__setitem__(new, a.pop(old))


def _bytes(path, edit):
    with open(path, "rb") as f:
        raw = f.read()
    return edit(raw)


def _raw_file(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


#: name → (make(tmp_path) → path, load_model kwargs, param, [strings the one line must contain]).
BAD_FILES = {
    "missing tensor": (lambda p: _npz_from("gru-2layer", p, _drop("bias_hh_l1")), {}, "weights",
                       ["missing tensor(s): 'bias_hh_l1'", "2-layer"]),
    "missing layer": (lambda p: _npz_from("gru-2layer", p, _drop("weight_ih_l1", "weight_hh_l1", "bias_ih_l1",
                                                                  "bias_hh_l1")), {"model": "gru"}, None,
                      None),  # a 1-layer gru remains: valid (see the test)
    "layer gap": (lambda p: _npz_from("gru-2layer", p, lambda a: [a.__setitem__(k.replace("_l1", "_l2"), a.pop(k))
                                                                   for k in list(a) if k.endswith("_l1")]),
                  {}, "weights", ["missing tensor(s): 'weight_ih_l1', 'weight_hh_l1', 'bias_ih_l1', 'bias_hh_l1'"]),
    "bias in one layer": (lambda p: _npz_from("lstm-2layer", p, _drop("bias_ih_l1", "bias_hh_l1")), {}, "weights",
                          ["missing tensor(s): 'bias_ih_l1', 'bias_hh_l1'"]),
    "unexpected tensor": (lambda p: _npz_from("lstm", p, _set("weight_xx_l0", np.zeros(3, np.float32))), {},
                          "weights", ["unexpected tensor(s): 'weight_xx_l0'"]),
    "cell and module names": (lambda p: _npz_from("gru", p, _set("weight_hh", np.zeros((12, 4), np.float32))), {},
                              "weights", ["unexpected tensor(s): 'weight_hh'"]),
    "wrong bias shape": (lambda p: _npz_from("gru", p, _set("bias_ih_l0", lambda v: v[:-1])), {}, "weights",
                         ["tensor 'bias_ih_l0' has shape (11,), expected (12,)"]),
    "wrong layer-2 input": (lambda p: _npz_from("gru-2layer", p, _set("weight_ih_l1", lambda v: v[:, :3])), {},
                            "weights", ["tensor 'weight_ih_l1' has shape (12, 3), expected (12, 4) (layer 2 reads "
                                        "layer 1's 4 outputs)"]),
    "wrong input rows": (lambda p: _npz_from("lstm", p, _set("weight_ih_l0", lambda v: v[:-2])), {}, "weights",
                         ["tensor 'weight_ih_l0' has shape (14, 3), expected (16, d)"]),
    "kind mismatch": (lambda p: os.path.join(FIX, "lstm.safetensors"), {"model": "gru"}, "weights",
                      ["tensor 'weight_hh_l0' has shape (16, 4), expected (12, 4) for a gru", "an lstm's"]),
    "no kind fits": (lambda p: _npz_from("gru", p, _set("weight_hh_l0", lambda v: v[:8])), {}, "weights",
                     ["tensor 'weight_hh_l0' has shape (8, 4)", "G = 1 (rnn), 3 (gru) or 4 (lstm)"]),
    "complex": (lambda p: _npz_from("gru", p, _set("weight_hh_l0", lambda v: v.astype(np.complex128))), {},
                "weights", ["tensor 'weight_hh_l0' is complex (complex128)"]),
    "integer": (lambda p: _npz_from("gru", p, _set("bias_hh_l0", lambda v: np.arange(12))), {}, "weights",
                ["tensor 'bias_hh_l0' has dtype int64", "floating point"]),
    "boolean": (lambda p: _npz_from("rnncell-tanh", p, _set("bias_ih", lambda v: v > 0)), {}, "weights",
                ["tensor 'bias_ih' has dtype bool"]),
    "non-finite": (lambda p: _npz_from("lstm", p, _set("weight_ih_l0", lambda v: np.where(v > 0.1, np.nan, v))), {},
                   "weights", ["tensor 'weight_ih_l0' holds a non-finite value (nan)"]),
    "bidirectional": (lambda p: _npz_from("gru", p, _set("weight_ih_l0_reverse", np.zeros((12, 3), np.float32))),
                      {}, "weights", ["'weight_ih_l0_reverse'", "bidirectional module, which is not supported"]),
    "proj_size": (lambda p: _npz_from("lstm", p, _set("weight_hr_l0", np.zeros((2, 4), np.float32))), {}, "weights",
                  ["'weight_hr_l0'", "proj_size > 0 is not supported"]),
    "several modules": (lambda p: _npz_from("gru", p, lambda a: a.update({"enc." + k: v for k, v in list(a.items())})),
                        {}, "weights", ["several recurrent modules", "''", "'enc.'", "prefix="]),
    "no recurrent weights": (lambda p: _npz_from("gru", p, lambda a: [a.pop(k) for k in list(a) if "hh" in k]), {},
                             "weights", ["holds no PyTorch recurrent weights", "'weight_ih_l0'"]),
    "object array": (lambda p: _npz_from("gru", p, _set("bias_hh_l0", np.array([object()], dtype=object))), {},
                     "weights", ["tensor 'bias_hh_l0' cannot be read without pickle"]),
    "torch.save pickle": (lambda p: _raw_file(p, "net.pt", b"PK\x03\x04 a pickle"), {}, "weights",
                          ["torch.save pickle", "safetensors.torch.save_file"]),
    "not an npz": (lambda p: _raw_file(p, "net.npz", b"garbage"), {}, "weights",
                   ["is neither an .npz archive", "nor a .safetensors file"]),
    "neither format": (lambda p: _npz_from("gru", p, lambda a: [a.clear(), a.update(U=np.eye(2))]), {}, "weights",
                       ["has no '__model__' entry", "holds no PyTorch recurrent weights", "'U'"]),
    "st: integer": (lambda p: _st_from("gru", p, _set("bias_hh_l0", np.arange(12))), {}, "weights",
                    ["tensor 'bias_hh_l0' has dtype I64"]),
    "st: complex": (lambda p: _st_from("gru", p, _set("weight_hh_l0", lambda v: v.astype(np.complex64))), {},
                    "weights", ["tensor 'weight_hh_l0' is complex (C64)"]),
    "st: float8": (lambda p: _st_from("gru", p, _set("bias_ih_l0", lambda v: v.astype(np.uint8)), {"bias_ih_l0":
                                                                                                "F8_E4M3"}),
                   {}, "weights", ["tensor 'bias_ih_l0' has dtype F8_E4M3, which dynlab does not read"]),
    "st: missing": (lambda p: _st_from("lstm-2layer", p, _drop("weight_hh_l1")), {}, "weights",
                    ["missing tensor(s): 'weight_hh_l1'"]),
    "st: truncated": (lambda p: _raw_file(p, "t.safetensors", _bytes(os.path.join(FIX, "gru.safetensors"),
                                                                      lambda r: r[:-40])), {}, "weights",
                      ["lie outside the file", "truncated"]),
    "st: bad header": (lambda p: _raw_file(p, "h.safetensors", (5).to_bytes(8, "little") + b"{nope"), {}, "weights",
                       ["is not a safetensors file (its header is not JSON"]),
    "st: header too long": (lambda p: _raw_file(p, "l.safetensors", (10 ** 6).to_bytes(8, "little") + b"{}"), {},
                            "weights", ["header length 1000000 exceeds"]),
    "st: short": (lambda p: _raw_file(p, "s.safetensors", b"\x01\x02"), {}, "weights", ["shorter than"]),
    "st: size mismatch": (lambda p: _raw_file(p, "m.safetensors", _bytes(os.path.join(FIX, "gru.safetensors"),
                                                                          lambda r: r.replace(b'"shape":[12]',
                                                                                              b'"shape":[13]', 1))),
                          {}, "weights", ["bytes of data do not fit shape (13,) of F32"]),
    "unknown kind": (lambda p: os.path.join(FIX, "gru.npz"), {"model": "irnn"}, "model",
                     ["read as 'rnn', 'gru', 'lstm'"]),
    "rnn activation": (lambda p: os.path.join(FIX, "rnn-tanh.npz"), {"activation": "abs"}, "activation",
                       ["'tanh' or 'relu'"]),
    "gru activation": (lambda p: os.path.join(FIX, "gru.npz"), {"activation": "relu"}, "activation",
                       ["has tanh fixed"]),
    "missing file": (lambda p: str(p / "none.safetensors"), {}, "weights", ["no such file"]),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_get_one_line_naming_file_and_tensor(case, tmp_path):
    make, kwargs, param, needles = BAD_FILES[case]
    path = make(tmp_path)
    if param is None:   # a valid file made from a tampered one: it loads
        assert dl.load_model(path, **kwargs).name == kwargs["model"]
        return
    with pytest.raises(ParameterError) as info:
        dl.load_model(path, **kwargs)
    err = info.value
    text = str(err)
    assert err.param == param and "\n" not in text, text
    if param == "weights":
        assert os.path.basename(path) in text, text
    for needle in needles:
        assert needle in text, (needle, text)


def test_cli_weights_reads_pytorch_files(tmp_path):
    """``--weights`` takes the same files; errors are one line naming the option (exit 2)."""
    from conftest import cli_ok, cli_run

    ref = _expected("rnn-relu")
    nc = tmp_path / "d.nc"
    cli_ok("simulate", "--weights", os.path.join(FIX, "rnn-relu.safetensors"), "--model", "rnn",
           "--activation", "relu", "--steps", "7", "--seed", "2", "--data", nc)
    ds = dl.read_dataset(nc)
    m = dl.load_model(os.path.join(FIX, "rnn-relu.npz"), activation="relu")
    assert ds.attrs["model"] == "rnn" and ds.attrs["activation"] == "relu"
    np.testing.assert_array_equal(ds.U.values, m.U)
    assert ds.h.shape == (7, ref["s0"].shape[1])
    cli_ok("simulate", "--weights", os.path.join(FIX, "lstm-2layer.safetensors"), "--steps", "4", "--data", nc)
    ds = dl.read_dataset(nc)
    assert ds.attrs["model"] == "stack" and ds.attrs["cell"] == "lstm" and ds.h.shape == (4, 16)
    assert list(ds.part.values[:8]) == ["h1"] * 4 + ["c1"] * 4
    for args, option, needle in (
            (["--weights", os.path.join(FIX, "gru.safetensors"), "--model", "lstm"], "--weights", "for an lstm"),
            (["--weights", os.path.join(FIX, "gru.safetensors"), "--activation", "relu"], "--activation", "tanh fixed"),
            (["--weights", os.path.join(FIX, "gru.npz"), "--model", "irnn"], "--model", "read as"),
            (["--weights", _npz_from("gru", tmp_path, _drop("bias_ih_l0"))], "--weights", "'bias_ih_l0'"),
            (["--weights", os.path.join(FIX, "gru.npz"), "--hidden", "3"], "--hidden", "fixes the model")):
        result = cli_run("simulate", *args, "--steps", "3")
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith(f"Error: {option}:") and needle in lines[0], lines[0]


def test_from_torch_without_torch_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)   # import torch raises ImportError
    with pytest.raises(ParameterError) as info:
        dl.from_torch(object())
    assert info.value.param == "module" and "needs PyTorch" in info.value.message


# ============================================================================ live (torch)
@pytest.fixture(scope="module")
def mk():
    """make_fixtures, imported (it needs torch)."""
    pytest.importorskip("torch")
    sys.path.insert(0, FIX)
    try:
        import make_fixtures
    finally:
        sys.path.remove(FIX)
    return make_fixtures


@pytest.mark.torch
def test_live_cases_are_the_fixture_cases(mk):
    assert tuple(mk.CASES) == CASES


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_live_from_torch_equals_pytorch(mk, case, tmp_path):
    """dl.from_torch on a live module (float32, converted exactly to float64) against that
    module's forward pass and torch.func.jacrev, computed now; and it is the very model
    load_model reads from the module's state_dict saved to a file."""
    module, sd = mk.build(case)
    m = dl.from_torch(module)
    np.savez(tmp_path / "sd.npz", **{k: v.detach().numpy() for k, v in sd.items()})
    cls, kwargs, _ = mk.CASES[case]
    filed = dl.load_model(tmp_path / "sd.npz", activation=kwargs.get("nonlinearity"))
    _same(m, filed)
    ref = mk.reference(module, 0)
    ref.update(batch_first=int(kwargs.get("batch_first", False)))
    _check(_compare_run(m, ref, is_cell=cls.endswith("Cell"), lstm=KIND[cls] == "lstm"))


@pytest.mark.torch
def test_live_float64_module_and_parametrisation(mk):
    """A module already in float64 converts without rounding; a module whose weight is
    reparametrised (weight_norm-style parametrize) converts its *effective* weight."""
    import torch
    from torch.nn.utils import parametrize

    torch.manual_seed(3)
    net = torch.nn.GRU(3, 4).double()
    m = dl.from_torch(net)
    assert m.W_hh.tobytes() == net.weight_hh_l0.detach().numpy().tobytes()

    class Doubled(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    raw = net.weight_hh_l0.detach().clone()
    parametrize.register_parametrization(net, "weight_hh_l0", Doubled())
    np.testing.assert_array_equal(dl.from_torch(net).W_hh, 2 * raw.numpy())


@pytest.mark.torch
def test_live_refusals_and_dropout(mk):
    import torch

    nn = torch.nn
    refused = {
        "bidirectional": (nn.GRU(3, 4, bidirectional=True), "bidirectional=True) is not supported"),
        "proj_size": (nn.LSTM(3, 4, proj_size=2), "proj_size=2) is not supported"),
        "meta": (nn.GRU(3, 4, device="meta"), "meta device"),
        "unknown": (nn.Linear(3, 4), "got Linear"),
        "container": (nn.Sequential(nn.Linear(3, 3), nn.LSTM(3, 4)), "its recurrent module is module.1: pass that"),
        "state_dict": (nn.GRU(3, 4).state_dict(), "load_model"),
    }
    cell = nn.RNNCell(3, 4)
    cell.weight_hh = nn.Parameter(cell.weight_hh.detach().to(torch.complex64))
    refused["complex"] = (cell, "weight_hh is complex (torch.complex64)")
    cell = nn.GRUCell(3, 4)
    cell.bias_ih = nn.Parameter(torch.arange(12), requires_grad=False)
    refused["integer"] = (cell, "bias_ih has dtype torch.int64")
    for name, (obj, needle) in refused.items():
        with pytest.raises(ParameterError) as info:
            dl.from_torch(obj)
        assert info.value.param == "module" and needle in info.value.message and "\n" not in str(info.value), name
    # dropout between layers is a training-time effect: warned, and the conversion is eval mode
    torch.manual_seed(0)
    net = nn.LSTM(3, 4, num_layers=2, dropout=0.5).double()
    with pytest.warns(UserWarning, match="evaluation mode"):
        m = dl.from_torch(net)
    x = torch.randn(6, 2, 3, dtype=torch.float64)
    net.eval()
    with torch.no_grad():
        out = net(x)[0].numpy().transpose(1, 0, 2)
    h = dl.simulate(m, x.numpy().transpose(1, 0, 2)).h.values[..., m.output_slice]
    assert np.abs(h - out).max() <= TRAJ_TOL
    net.train()
    with torch.no_grad():   # negative control: in training mode the module is another (random) map
        assert np.abs(net(x)[0].numpy().transpose(1, 0, 2) - out).max() > 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # PyTorch's own warning that one layer has no dropout
        single = nn.GRU(3, 4, dropout=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # one layer: dropout has no effect, so no warning of ours
        dl.from_torch(single)


@pytest.mark.torch
def test_live_safetensors_reader_equals_the_library(tmp_path):
    """The NumPy-only reader against safetensors' own, on every fixture and on fresh files."""
    st = pytest.importorskip("safetensors.numpy")
    names = [f for f in os.listdir(FIX) if f.endswith(".safetensors") and f != "dtypes.safetensors"]
    assert len(names) == len(CASES)
    for f in names:
        ours, theirs = read_safetensors(os.path.join(FIX, f)), st.load_file(os.path.join(FIX, f))
        assert ours.keys() == theirs.keys()
        for k in ours:
            assert ours[k].dtype == theirs[k].dtype and ours[k].tobytes() == theirs[k].tobytes(), (f, k)
    rng = np.random.default_rng(0)
    arrays = {"a": rng.standard_normal((3, 5)), "b": rng.standard_normal(7).astype(np.float32),
              "c": rng.standard_normal((2, 2)).astype(np.float16), "empty": np.zeros((0, 3))}
    st.save_file(arrays, str(tmp_path / "x.safetensors"))
    got = read_safetensors(tmp_path / "x.safetensors")
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and got[k].tobytes() == v.tobytes()


# ===================================================== dynlab.torch modules' files (no torch needed)
MODULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "torch_modules")


def _module_fixture():
    with np.load(os.path.join(MODULES, "expected.npz"), allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def test_dynlab_module_files_load_without_torch(monkeypatch):
    """State_dicts of dynlab.torch modules (float32, trained-network style: tests/fixtures/torch_modules/
    make_module_fixtures.py) read by load_model with torch unimportable: every parameter is the module's
    (float32 → float64 exactly), every setting the module's JSON."""
    monkeypatch.setitem(sys.modules, "torch", None)
    exp = _module_fixture()
    m = dl.load_model(os.path.join(MODULES, "irnn.safetensors"))            # found under 'cell.', beside fc.*
    cfg = json.loads(str(exp["irnn/dynlab_model"]))
    assert m.name == "irnn" and {k: getattr(m, k) for k in cfg["settings"]} == cfg["settings"]
    assert m.P == "U" and m.lowrank == 2 and np.shape(m.eta) == (5, 2)
    for k, v in m.params().items():
        np.testing.assert_array_equal(np.asarray(v), exp[f"irnn/{k}"], err_msg=k)
    s = dl.load_model(os.path.join(MODULES, "stack.safetensors"))
    assert s.name == "stack" and [layer.activation for layer in s.layers] == ["abs", "abs"]
    for ell, layer in enumerate(s.layers):
        assert layer.seed == json.loads(str(exp[f"stack/layers.{ell}.dynlab_model"]))["settings"]["seed"]
        for k, v in layer.params().items():
            np.testing.assert_array_equal(v, exp[f"stack/layers.{ell}.{k}"], err_msg=(ell, k))
    path = os.path.join(MODULES, "irnn.safetensors")
    for kwargs, param, needle in (({"model": "gru"}, "model", "holds a 'irnn' module"),
                                  ({"activation": "tanh"}, "activation", "fix the model"),
                                  ({"prefix": "fc."}, "prefix", "holds no module directly under prefix 'fc.'")):
        with pytest.raises(ParameterError) as info:
            dl.load_model(path, **kwargs)
        assert info.value.param == param and needle in info.value.message and "\n" not in str(info.value)


def test_to_torch_without_torch_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    m = dl.make_model("irnn", 3, 2, seed=0)
    task = dl.make_task("adding", 5, n_train=4, n_val=4, n_test=4)
    for call in (lambda: dl.to_torch(m), lambda: dl.train_model(m, task, iterations=1, engine="torch")):
        with pytest.raises(ImportError) as info:
            call()
        assert 'pip install "dynlab[torch]"' in str(info.value) and "\n" not in str(info.value)


@pytest.mark.torch
def test_dynlab_module_fixtures_are_what_their_script_makes():
    pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    sys.path.insert(0, MODULES)
    try:
        import make_module_fixtures as made
    finally:
        sys.path.remove(MODULES)
    files, expected = made.build()
    for name, sd in files.items():
        with open(os.path.join(MODULES, name), "rb") as f:
            assert st.save({k: v.contiguous() for k, v in sd.items()}) == f.read(), name
    exp = _module_fixture()
    assert sorted(exp) == sorted(expected)
    for k, v in expected.items():
        np.testing.assert_array_equal(exp[k], v, err_msg=k)

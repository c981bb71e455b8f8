"""Networks trained in PyTorch, in float64: live modules and their ``state_dict`` files.

Two doors, one conversion:

* ``from_torch(module)`` converts a live ``torch.nn.RNN``, ``GRU`` or ``LSTM`` (any
  ``num_layers``; ``batch_first`` either way: it is a layout of the inputs, not part of the
  network) or an ``RNNCell``, ``GRUCell`` or ``LSTMCell``.  torch is imported only inside it
  (an optional dependency).
* ``dynlab.load_model("net.safetensors", model="gru")`` (and a ``.npz``) reads PyTorch's own
  parameter names without torch and without pickle (``load_torch_weights``).  A
  ``.safetensors`` file is read by the small reader here (``read_safetensors``, NumPy only;
  the format is an 8-byte little-endian header length, a JSON header naming each tensor's
  dtype, shape and byte range, then the raw little-endian data), so the ``safetensors``
  package is needed only to *write* such files.

What a PyTorch network becomes (every array converted to float64, which is exact from
float16, bfloat16 and float32):

=============================  ==============================================================
PyTorch                        dynlab
=============================  ==============================================================
``RNN``, ``RNNCell``           ``rnn``: U = ``weight_hh``, W = ``weight_ih``,
                               b = ``bias_ih`` + ``bias_hh``, activation = ``nonlinearity``
                               (tanh or relu)
``GRU``, ``GRUCell``           ``gru`` (gates r, z, n): ``W_ih``, ``W_hh``, ``b_ih``, ``b_hh``
``LSTM``, ``LSTMCell``         ``lstm`` (gates i, f, g, o) on the state s = [h; c]
``num_layers`` = L > 1         ``Stack`` of L such layers; state [s¹; …; sᴸ], the top layer's
                               output last
``bias=False``                 zero biases
=============================  ==============================================================

Refused, with one line saying what is unsupported: ``bidirectional=True`` (a backward-in-time
pass is not a recurrent map forward in time), ``proj_size > 0`` (LSTM projections), complex,
integer or other non-floating parameters, parameters without values (the ``meta`` device) and
any other module type.  Dropout (``dropout > 0`` with ``num_layers > 1``) acts between layers
in training mode only: it is not part of the network an analysis studies, so the conversion is
the module in evaluation mode (``module.eval()``, PyTorch's own inference) and a
``UserWarning`` says so.

Files of PyTorch parameters are read strictly, in the style of
``module.load_state_dict(strict=True)``: a module's tensors are ``weight_ih_l{k}``,
``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` for k = 0 … L−1 (a cell's:
``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``); L is read from the names, ``bias=False``
from their absence, the kind from ``weight_hh``'s shape (G·hidden × hidden: G = 1 rnn, 3 gru,
4 lstm; checked against ``model`` when given).  Missing and unexpected tensors are listed by
name; a wrong shape says what was expected; ``*_reverse`` and ``weight_hr_l{k}`` tensors say
bidirectional / ``proj_size`` is unsupported.

A ``state_dict`` saved from a whole network carries its module's prefix (``rnn.weight_ih_l0``,
``module.encoder.weight_ih_l0``).  With ``prefix=None`` the one recurrent module in the file is
found by its ``weight_hh`` tensor and its prefix used; a file with several asks for
``prefix=``.  The tensors *directly* under the prefix are the recurrent module's and are read
strictly; tensors of other modules (a read-out ``fc.weight``, an embedding) are left alone.
"""
from __future__ import annotations

import json
import os
import re
import warnings

import numpy as np

from .errors import ParameterError

#: dynlab's name of each PyTorch recurrent kind → number of gate blocks G (weight_hh is G·D × D).
KINDS = {"rnn": 1, "gru": 3, "lstm": 4}
#: What each kind's stacked gate blocks are, for messages.
_GATES = {"rnn": "", "gru": " (gates r, z, n)", "lstm": " (gates i, f, g, o)"}
#: The nonlinearities of ``torch.nn.RNN`` (a GRU's and an LSTM's are tanh, fixed).
RNN_NONLINEARITIES = ("tanh", "relu")

_NAME = re.compile(r"^(?P<name>weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)(?:_l(?P<layer>\d+))?"
                   r"(?P<reverse>_reverse)?$")
_WEIGHT_HH = re.compile(r"^weight_hh(?:_l\d+)?(?:_reverse)?$")

# ============================================================================ safetensors
#: safetensors dtype → NumPy dtype (little-endian); BF16 is widened to float32 on reading.
_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
              "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
              "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
              "C64": "<c8", "C128": "<c16"}
_MAX_HEADER = 100 * 2 ** 20  # the format's own limit on the JSON header


class SafetensorsFile:
    """A ``.safetensors`` file opened for reading: the header now, each tensor on request.

    ``keys()`` lists the tensors; ``dtype(name)`` gives the file's dtype string (``F32``,
    ``BF16``, …); ``array(name)`` reads one tensor as a NumPy array (BF16 → float32).  Every
    malformed header or byte range raises a ``ParameterError`` naming the file and the tensor.
    """

    def __init__(self, path, param: str = "weights"):
        self.path = os.fspath(path)
        self.param = param
        size = os.path.getsize(self.path)
        with open(self.path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                self._fail("is not a safetensors file (shorter than the 8-byte header length)")
            n = int.from_bytes(head, "little")
            if n > size - 8 or n > _MAX_HEADER:
                self._fail(f"is not a safetensors file (its header length {n} exceeds the file's {size} bytes)")
            raw = f.read(n)
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            self._fail(f"is not a safetensors file (its header is not JSON: {exc})")
        if not isinstance(header, dict):
            self._fail("is not a safetensors file (its header is not a JSON object)")
        self.metadata = header.pop("__metadata__", None) or {}
        self._data_start = 8 + n
        data_size = size - self._data_start
        self._entries = {}
        for name, info in header.items():
            ok = (isinstance(info, dict) and isinstance(info.get("dtype"), str)
                  and isinstance(info.get("shape"), list)
                  and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in info["shape"])
                  and isinstance(info.get("data_offsets"), list) and len(info["data_offsets"]) == 2
                  and all(isinstance(o, int) and not isinstance(o, bool) for o in info["data_offsets"]))
            if not ok:
                self._fail(f"tensor {name!r} has a malformed header entry ({json.dumps(info)[:80]})")
            start, end = info["data_offsets"]
            if not 0 <= start <= end <= data_size:
                self._fail(f"tensor {name!r}: its bytes [{start}, {end}) lie outside the file's {data_size} "
                           f"bytes of data (a truncated file?)")
            dtype = info["dtype"]
            if dtype in _ST_DTYPES:
                need = int(np.prod(info["shape"], dtype=np.int64)) * np.dtype(_ST_DTYPES[dtype]).itemsize
                if end - start != need:
                    self._fail(f"tensor {name!r}: {end - start} bytes of data do not fit shape "
                               f"{tuple(info['shape'])} of {dtype} ({need} bytes)")
            self._entries[name] = (dtype, tuple(info["shape"]), start, end)

    def _fail(self, message):
        raise ParameterError(self.param, f"{self.path}: {message}")

    def keys(self) -> list:
        return list(self._entries)

    def dtype(self, name: str) -> str:
        return self._entries[name][0]

    def shape(self, name: str) -> tuple:
        return self._entries[name][1]

    def array(self, name: str) -> np.ndarray:
        dtype, shape, start, end = self._entries[name]
        if dtype not in _ST_DTYPES:
            self._fail(f"tensor {name!r} has dtype {dtype}, which dynlab does not read "
                       f"(weights must be F16, BF16, F32 or F64)")
        with open(self.path, "rb") as f:
            f.seek(self._data_start + start)
            raw = f.read(end - start)
        arr = np.frombuffer(raw, dtype=_ST_DTYPES[dtype]).reshape(shape)
        if dtype == "BF16":  # the upper half of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return np.array(arr, dtype=arr.dtype.newbyteorder("="))


def read_safetensors(path, param: str = "weights") -> dict:
    """Every tensor of a ``.safetensors`` file as a NumPy array, by name (no torch, no pickle)."""
    f = SafetensorsFile(path, param)
    return {k: f.array(k) for k in f.keys()}


# ================================================================ state_dict → dynlab model
def _dtype_name(arr: np.ndarray, file_dtype: str | None) -> str:
    return file_dtype if file_dtype is not None else str(arr.dtype)


class _Tensors:
    """Named tensors with a lazy ``get``: a file's (safetensors or npz) or a live module's."""

    def __init__(self, keys, get, source: str, param: str, file_dtype=None):
        self.keys = list(keys)
        self._get = get
        self.source = source
        self.param = param
        self._file_dtype = file_dtype or (lambda name: None)

    def fail(self, message, param=None):
        raise ParameterError(param or self.param, f"{self.source}: {message}")

    def get(self, key: str) -> np.ndarray:
        """The tensor as float64, after the dtype and finiteness checks (one line each)."""
        arr = self._get(key)
        kind = arr.dtype.kind
        if kind == "c":
            self.fail(f"tensor {key!r} is complex ({_dtype_name(arr, self._file_dtype(key))}); "
                      f"recurrent weights must be real floating point")
        if kind != "f":
            self.fail(f"tensor {key!r} has dtype {_dtype_name(arr, self._file_dtype(key))}; "
                      f"weights must be floating point (float16, bfloat16, float32 or float64)")
        out = np.asarray(arr, dtype=np.float64)
        if not np.all(np.isfinite(out)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(out))[0])
            self.fail(f"tensor {key!r} holds a non-finite value ({out[bad]}) at index {bad}")
        return out


def _find_prefix(t: _Tensors, prefix) -> str:
    """The prefix of the recurrent module's tensors ('' for a bare module's state_dict)."""
    if prefix is not None:
        if not isinstance(prefix, str):
            raise ParameterError("prefix", f"must be a string such as 'rnn.', got {type(prefix).__name__}")
        p = prefix if prefix == "" or prefix.endswith(".") else prefix + "."
        if p not in _candidates(t.keys):
            found = _candidates(t.keys)
            there = [repr(k) for k in t.keys if k.startswith(p) and "." not in k[len(p):]]
            t.fail(f"holds no recurrent weights (weight_hh_l0 or weight_hh) directly under prefix {p!r}"
                   + (f" (its tensors there: {', '.join(there)})" if there else "")
                   + (f"; recurrent modules in the file: {', '.join(repr(c) for c in found)}" if found else ""),
                   param="prefix")
        return p
    found = _candidates(t.keys)
    if not found:
        shown = ", ".join(repr(k) for k in t.keys[:8]) + (", …" if len(t.keys) > 8 else "")
        dynlab_file = "has no '__model__' entry (a dynlab.save_model file) and " if t.source.endswith(".npz") else ""
        t.fail(f"{dynlab_file}holds no PyTorch recurrent weights (no 'weight_hh_l0' or 'weight_hh' tensor, under "
               f"any prefix); its tensors: {shown or 'none'}")
    if len(found) > 1:
        t.fail(f"holds several recurrent modules (prefixes {', '.join(repr(c) for c in found)}); name one with "
               f"dynlab.load_model(…, prefix=…), or save that module's state_dict alone")
    return found[0]


def _candidates(keys) -> list:
    out = set()
    for k in keys:
        head, dot, tail = k.rpartition(".")
        if _WEIGHT_HH.match(tail):
            out.add(head + dot)
    return sorted(out)


def _check_kind(model, param="model"):
    if model is None:
        return None
    key = str(model).strip().lower()
    if key not in KINDS:
        raise ParameterError(param, f"PyTorch parameters are read as {', '.join(repr(k) for k in KINDS)}, "
                                    f"got {model!r}")
    return key


def _check_activation(kind: str, activation, param="activation") -> str:
    if kind == "rnn":
        if activation is None:
            return "tanh"
        act = str(activation).strip().lower()
        if act not in RNN_NONLINEARITIES:
            raise ParameterError(param, f"PyTorch's RNN has nonlinearity 'tanh' or 'relu', got {activation!r}")
        return act
    if activation is not None and str(activation).strip().lower() != "tanh":
        raise ParameterError(param, f"PyTorch's {kind.upper()} has tanh fixed, so its weights make a {kind} with "
                                    f"tanh; for another activation use model.replace(activation=…) on the result")
    return "tanh"


def model_from_tensors(t: _Tensors, *, model=None, activation=None, prefix=None):
    """The dynlab model of a PyTorch recurrent module's named tensors (module docstring)."""
    from .models import GRU, LSTM, RNN, Stack

    own = _dynlab_prefix(t, prefix)
    if own is not None:
        return model_from_dynlab_tensors(t, own, model=model, activation=activation)
    kind = _check_kind(model)
    p = _find_prefix(t, prefix)
    own = {}
    for k in t.keys:
        if k.startswith(p) and "." not in k[len(p):]:
            own[k[len(p):]] = k
    parsed = {name: _NAME.match(name) for name in own}
    for name, m in parsed.items():
        if m and m["reverse"]:
            t.fail(f"tensor {own[name]!r} belongs to a bidirectional module, which is not supported "
                   f"(a backward-in-time pass is not a recurrent map forward in time)")
    for name, m in parsed.items():
        if m and m["name"] == "weight_hr":
            t.fail(f"tensor {own[name]!r} is an LSTM projection: proj_size > 0 is not supported "
                   f"(save an LSTM with proj_size=0)")
    layered = sorted({int(m["layer"]) for m in parsed.values() if m and m["layer"] is not None})
    cell = not layered
    L = 1 if cell else layered[-1] + 1
    bias = any(m and m["name"].startswith("bias") for m in parsed.values())
    expected = []
    for k in range(L):
        sfx = "" if cell else f"_l{k}"
        expected += [f"weight_ih{sfx}", f"weight_hh{sfx}"] + ([f"bias_ih{sfx}", f"bias_hh{sfx}"] if bias else [])
    missing = [n for n in expected if n not in own]
    unexpected = [n for n in own if n not in expected]
    if missing or unexpected:
        what = f"a {L}-layer module" if not cell else "a cell"
        parts = []
        if missing:
            parts.append("missing tensor(s): " + ", ".join(repr(p + n) for n in missing))
        if unexpected:
            parts.append("unexpected tensor(s): " + ", ".join(repr(own[n]) for n in unexpected))
        t.fail(f"is not the state_dict of {what} ({'; '.join(parts)}; expected "
               f"{', '.join(repr(p + n) for n in expected)})")

    def name(base, k):
        return p + (base if cell else f"{base}_l{k}")

    def shape_fail(key, got, want):
        t.fail(f"tensor {key!r} has shape {tuple(got)}, expected {want}")

    key0 = name("weight_hh", 0)
    W0 = t.get(key0)
    rows, cols = W0.shape if W0.ndim == 2 else (0, 0)
    G = rows // cols if cols >= 1 and rows % cols == 0 else None
    fits = [k for k, g in KINDS.items() if g == G]
    if kind is None:
        if not fits:
            shape_fail(key0, W0.shape, "(G·hidden, hidden) with G = 1 (rnn), 3 (gru) or 4 (lstm)")
        kind = fits[0]
    elif kind not in fits:
        G = KINDS[kind]
        want = f"(G·hidden, hidden) with G = {G} for a{'n' if kind != 'gru' else ''} {kind}{_GATES[kind]}"
        if cols >= 1:
            want = (f"({G * cols}, {cols}) for a{'n' if kind != 'gru' else ''} {kind} of hidden size {cols}"
                    f"{_GATES[kind]}")
        if fits:
            want += f"; the shape is a{'n' if fits[0] != 'gru' else ''} {fits[0]}'s"
        shape_fail(key0, W0.shape, want)
    act = _check_activation(kind, activation)
    G, D = KINDS[kind], cols
    layers = []
    for k in range(L):
        arrays = {}
        for base in ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if bias else ()):
            key = name(base, k)
            arr = W0 if key == key0 else t.get(key)
            if base == "weight_ih" and k == 0:
                if arr.ndim != 2 or arr.shape[0] != G * D or arr.shape[1] < 1:
                    shape_fail(key, arr.shape, f"({G * D}, d) with d ≥ 1 input features")
            else:
                want = (G * D, D) if base.startswith("weight") else (G * D,)
                if arr.shape != want:
                    why = f" (layer {k + 1} reads layer {k}'s {D} outputs)" if base == "weight_ih" else ""
                    shape_fail(key, arr.shape, f"{want}{why}")
            arrays[base] = arr
        if not bias:
            arrays["bias_ih"] = arrays["bias_hh"] = np.zeros(G * D)
        if kind == "rnn":
            layers.append(RNN(arrays["weight_hh"], arrays["weight_ih"], arrays["bias_ih"] + arrays["bias_hh"],
                              activation=act, init="given"))
        else:
            cls = GRU if kind == "gru" else LSTM
            layers.append(cls(arrays["weight_ih"], arrays["weight_hh"], arrays["bias_ih"], arrays["bias_hh"],
                              activation=act))
    return layers[0] if L == 1 else Stack(tuple(layers))


# ====================================================== a dynlab.torch module's state_dict → dynlab model
#: The uint8 tensor holding a dynlab module's settings as JSON (``dynlab.torch.base.CONFIG``).
CONFIG = "dynlab_model"


def _dynlab_candidates(keys) -> list:
    """Prefixes of the outermost dynlab modules in a state_dict (a stack's layers are inside it)."""
    found = sorted(k[:-len(CONFIG)] for k in keys if k == CONFIG or k.endswith("." + CONFIG))
    return [p for p in found if not any(q != p and p.startswith(q) for q in found)]


def _dynlab_prefix(t: _Tensors, prefix):
    """The prefix of the dynlab module to read, or None when the tensors are PyTorch's own modules'."""
    found = _dynlab_candidates(t.keys)
    if not found:
        return None
    if prefix is not None:
        p = prefix if prefix == "" or str(prefix).endswith(".") else f"{prefix}."
        if p + CONFIG in t.keys:
            return p
        return None if _candidates(t.keys) else _fail_prefix(t, p, found)
    if len(found) > 1 or _candidates(t.keys):
        every = found + [c for c in _candidates(t.keys)]
        t.fail(f"holds several recurrent modules (prefixes {', '.join(repr(c) for c in every)}); name one with "
               f"dynlab.load_model(…, prefix=…)")
    return found[0]


def _fail_prefix(t, p, found):
    t.fail(f"holds no module directly under prefix {p!r}; dynlab modules in the file: "
           f"{', '.join(repr(c) for c in found)}", param="prefix")


def _config(t: _Tensors, key: str) -> dict:
    raw = np.asarray(t._get(key))
    try:
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError(f"dtype {raw.dtype}, shape {raw.shape}")
        cfg = json.loads(raw.tobytes().decode("utf-8"))
        if not (isinstance(cfg, dict) and isinstance(cfg.get("model"), str) and isinstance(cfg.get("settings"), dict)):
            raise ValueError("not an object with 'model' and 'settings'")
    except ValueError as exc:
        t.fail(f"tensor {key!r} is not a dynlab module's settings (uint8 JSON: {exc})")
    return cfg


def model_from_dynlab_tensors(t: _Tensors, prefix: str, *, model=None, activation=None):
    """The dynlab model of a ``dynlab.torch`` module's state_dict (the tensors under ``prefix``): the
    parameters by dynlab's names, the settings from the JSON of its ``dynlab_model`` tensor."""
    from .models import Stack, get_model_class

    for key, value in (("activation", activation),):
        if value is not None:
            raise ParameterError(key, f"cannot be combined with {t.source}: it holds a dynlab module, whose "
                                      f"settings fix the model")
    cfg = _config(t, prefix + CONFIG)
    name, settings = cfg["model"], cfg["settings"]
    try:
        cls = get_model_class(name, t.param)
    except ParameterError as exc:
        t.fail(f"tensor {prefix + CONFIG!r}: {exc.message}")
    if model is not None:
        want = get_model_class(model, "model").name
        if want != name:
            raise ParameterError("model", f"is {model!r} but {t.source} holds a {name!r} module")
    if cls is Stack:
        layers, ell = [], 0
        while f"{prefix}layers.{ell}.{CONFIG}" in t.keys:
            layers.append(model_from_dynlab_tensors(t, f"{prefix}layers.{ell}."))
            ell += 1
        try:
            return Stack(tuple(layers), seed=settings.get("seed"), weight_scale=settings.get("weight_scale"))
        except ParameterError as exc:
            t.fail(f"the stack under {prefix!r}: {exc.param}: {exc.message}")
    params = {k[len(prefix):]: t.get(k) for k in t.keys
              if k.startswith(prefix) and "." not in k[len(prefix):] and k != prefix + CONFIG}
    kwargs = {**{k: (v.item() if v.ndim == 0 else v) for k, v in params.items()}, **settings}
    if name == "irnn" and "U" not in kwargs:
        kwargs["U"] = None
    try:
        return cls(**kwargs)
    except ParameterError as exc:
        where = f"tensor {prefix + exc.param!r}" if exc.param in params else f"setting {exc.param!r}"
        t.fail(f"{where}: {exc.message}")
    except TypeError as exc:
        t.fail(f"the tensors under {prefix!r} do not describe a {name} model ({exc})")


def load_torch_weights(path, model=None, *, activation=None, prefix=None, param: str = "weights",
                       safetensors: bool | None = None):
    """A dynlab model from a file of PyTorch parameters: ``.safetensors``, or ``.npz`` with
    PyTorch's names (module docstring).  ``model``: 'rnn', 'gru' or 'lstm' (read from
    ``weight_hh``'s shape when None, checked when given); ``activation``: an RNN's
    nonlinearity ('tanh', the default, or 'relu', which a state_dict does not record);
    ``prefix``: the recurrent module's prefix in a whole network's state_dict ('rnn.'), found
    when None.  ``safetensors``: the file's format (None: by its suffix)."""
    path = os.fspath(path)
    if safetensors or (safetensors is None and path.lower().endswith(".safetensors")):
        f = SafetensorsFile(path, param)
        t = _Tensors(f.keys(), f.array, path, param, file_dtype=f.dtype)
        return model_from_tensors(t, model=model, activation=activation, prefix=prefix)
    try:
        npz = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise ParameterError(param, f"cannot read {path} as .npz ({type(exc).__name__}: {exc})") from None
    with npz:
        def get(key):
            try:
                return npz[key]
            except ValueError as exc:  # an object array: a pickle, refused by allow_pickle=False
                raise ParameterError(param, f"{path}: tensor {key!r} cannot be read without pickle ({exc})") from None

        t = _Tensors(npz.files, get, path, param)
        return model_from_tensors(t, model=model, activation=activation, prefix=prefix)


# ================================================================================ live torch
_MODULES = ("RNN", "GRU", "LSTM", "RNNCell", "GRUCell", "LSTMCell")


def _import_torch():
    try:
        import torch
    except ImportError:
        raise ParameterError("module", "from_torch needs PyTorch (pip install torch); without it, save the "
                                       "state_dict with safetensors and read it with dynlab.load_model") from None
    return torch


def _tensor(torch, module_name, key, value) -> np.ndarray:
    if not isinstance(value, torch.Tensor):
        raise ParameterError("module", f"{module_name}.{key} is not a tensor ({type(value).__name__})")
    v = value.detach()
    if v.is_complex():
        raise ParameterError("module", f"{module_name}.{key} is complex ({v.dtype}); recurrent weights must be "
                                       f"real floating point")
    if not v.is_floating_point():
        raise ParameterError("module", f"{module_name}.{key} has dtype {v.dtype}; weights must be floating point "
                                       f"(float16, bfloat16, float32 or float64)")
    if v.device.type == "meta":
        raise ParameterError("module", f"{module_name}.{key} is on the meta device (it has no values)")
    return v.to(device="cpu", dtype=torch.float64).numpy().copy()


def from_torch(module):
    """A dynlab model of a live PyTorch recurrent module, in float64 (module docstring).

    Parameters
    ----------
    module : torch.nn.RNN | GRU | LSTM | RNNCell | GRUCell | LSTMCell, or a ``dynlab.torch`` module
        Any ``num_layers`` (more than one: a ``Stack`` whose state concatenates the layers'
        states, the top layer's last), ``bias`` either way, ``batch_first`` either way,
        an RNN's ``nonlinearity`` tanh or relu.  A ``dynlab.torch`` module (``dl.to_torch``'s, or
        one made in ``dynlab.torch``) gives back its dynlab model, parameter for parameter (its
        settings travel in its ``dynlab_model`` buffer).

    Returns
    -------
    ``RNN`` / ``GRU`` / ``LSTM`` (one layer or a cell) or ``Stack``.  The state of an LSTM is
    s = [h; c]; ``dl.simulate(m, x, h0=…)`` on inputs (T, d) or (B, T, d) gives the module's
    states at every step (its ``output`` is ``h[..., m.output_slice]``).

    Raises ``ParameterError`` (param ``module``) for what cannot be converted: bidirectional,
    ``proj_size > 0``, complex or non-floating parameters, other module types; warns that
    dropout between layers (a training-time effect) is left out.

    Example
    -------
    >>> net = torch.nn.GRU(3, 64, num_layers=2, batch_first=True)
    >>> m = dl.from_torch(net)          # Stack of 2 gru layers, state_size 128
    >>> ds = dl.simulate(m, x)          # x: (B, T, 3) as for net(x) with batch_first
    """
    torch = _import_torch()
    nn = torch.nn
    name = type(module).__name__
    from .torch.base import DynlabModule

    if isinstance(module, DynlabModule):
        sd = module.state_dict()
        arrays = {k: (v.detach().cpu().numpy() if k.endswith(CONFIG) else _tensor(torch, name, k, v))
                  for k, v in sd.items()}
        t = _Tensors(arrays, arrays.__getitem__, name, "module")
        return model_from_dynlab_tensors(t, "")
    if isinstance(module, nn.RNNBase):
        mode = getattr(module, "mode", "")
        kind = {"RNN_TANH": "rnn", "RNN_RELU": "rnn", "GRU": "gru", "LSTM": "lstm"}.get(mode)
        if kind is None:
            raise ParameterError("module", f"{name} has mode {mode!r}, which is not a PyTorch RNN, GRU or LSTM")
        if module.bidirectional:
            raise ParameterError("module", f"{name}(bidirectional=True) is not supported: a backward-in-time pass "
                                           f"is not a recurrent map forward in time")
        if getattr(module, "proj_size", 0):
            raise ParameterError("module", f"{name}(proj_size={module.proj_size}) is not supported: LSTM "
                                           f"projections (weight_hr) are not converted")
        L = int(module.num_layers)
        if module.dropout and L > 1:
            warnings.warn(f"{name}(dropout={module.dropout}) drops units between layers in training mode only; "
                          f"the converted network is the module in evaluation mode (module.eval()), without "
                          f"dropout", UserWarning, stacklevel=2)
        keys = []
        for k in range(L):
            keys += [f"weight_ih_l{k}", f"weight_hh_l{k}"] + ([f"bias_ih_l{k}", f"bias_hh_l{k}"] if module.bias else [])
        activation = "relu" if mode == "RNN_RELU" else None
    elif isinstance(module, nn.RNNCellBase):
        if isinstance(module, nn.LSTMCell):
            kind, activation = "lstm", None
        elif isinstance(module, nn.GRUCell):
            kind, activation = "gru", None
        elif isinstance(module, nn.RNNCell):
            kind, activation = "rnn", module.nonlinearity
        else:
            raise ParameterError("module", f"{name} is not an RNNCell, GRUCell or LSTMCell")
        keys = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if module.bias else [])
    else:
        hint = ""
        if isinstance(module, nn.Module):
            inner = [n for n, m in module.named_modules() if n and isinstance(m, (nn.RNNBase, nn.RNNCellBase))]
            if inner:
                hint = f"; its recurrent module{'s are' if len(inner) > 1 else ' is'} " + \
                       ", ".join(f"module.{n}" for n in inner) + ": pass that"
        elif isinstance(module, dict):
            hint = ("; for a state_dict, save it (safetensors.torch.save_file(sd, 'net.safetensors')) and read it "
                    "with dynlab.load_model")
        raise ParameterError("module", f"from_torch converts torch.nn.{', '.join(_MODULES)}; got {name}{hint}")
    arrays = {k: _tensor(torch, name, k, getattr(module, k)) for k in keys}
    t = _Tensors(arrays, arrays.__getitem__, name, "module")
    return model_from_tensors(t, model=kind, activation=activation, prefix="")


def to_torch(model, *, batch_first: bool = False, dtype="float64", device=None, sigma_eps: float = 0.0):
    """A PyTorch module computing a dynlab model: forward equal to ``dl.simulate``, autograd
    gradients equal to dynlab's exact BPTT gradients.

    Parameters
    ----------
    model : any dynlab model.  rnn, fastrnn, antisymmetric, rin, irnn and fixed-step ctrnn become
        ``dynlab.torch.RNN``, …, ``CTRNN``; a gru or lstm with tanh becomes ``torch.nn.GRU`` /
        ``torch.nn.LSTM`` (another activation: ``dynlab.torch.GRU`` / ``LSTM``); a stack of alike rnn,
        gru or lstm layers with tanh ``torch.nn.RNN`` / ``GRU`` / ``LSTM`` with ``num_layers``, any
        other stack ``dynlab.torch.Stack``; an implicit network
        ``dynlab.torch.Implicit`` (backward by the implicit function theorem).
    batch_first : inputs (B, T, d) instead of (T, B, d), as in ``torch.nn.RNN``
    dtype : "float64" (default: the conversion is exact) or "float32" (or a torch dtype)
    device : where the parameters live ("cpu", "cuda", a ``torch.device``; default the CPU)
    sigma_eps : σ_ε of the random initial state h_0 = hx + ε drawn in training mode (the MASO
        paper's regulariser); dynlab modules only

    Returns
    -------
    torch.nn.Module.  ``module(x, hx)`` returns ``(output, h_n)`` like ``torch.nn.RNN``; the state
    of a dynlab module is dynlab's (an LSTM's [h; c]; a stack's every layer, concatenated).
    ``dl.from_torch(module)`` gives the model back; ``module.state_dict()`` saved with
    ``safetensors.torch.save_file`` is read by ``dl.load_model``.

    Raises ``ImportError`` in one line when PyTorch is not installed (``pip install "dynlab[torch]"``),
    ``ParameterError`` for what has no module (a ctrnn on scipy's adaptive solver).

    Example
    -------
    >>> m = dl.make_model("irnn", 64, 2, K=5, rank=4, g0="previous", activation="relu", eta=0.1, seed=0)
    >>> cell = dl.to_torch(m, batch_first=True)        # dynlab.torch.IRNN, float64
    >>> out, h_n = cell(torch.randn(8, 100, 2, dtype=torch.float64))
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ImportError('dl.to_torch needs PyTorch: pip install "dynlab[torch]" (or pip install torch)') from None
    from .torch.convert import to_torch as convert

    return convert(model, batch_first=batch_first, dtype=dtype, device=device, sigma_eps=sigma_eps)

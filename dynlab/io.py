"""Reading and writing: model weights as ``.npz`` (never pickle) and Datasets as NetCDF.

A weights file holds every parameter array under its name, plus ``__model__`` (the registry
name) and each setting under ``__setting__<name>``, all plain NumPy arrays, read back with
``allow_pickle=False``.  A ``Stack`` stores each layer's parameters and settings under
``layer{ℓ}_`` (``layer2_W_hh``, ``__setting__layer2_activation``, ``__setting__layer2_seed``).

``load_model`` also reads the parameters of a network trained in PyTorch under PyTorch's own
names (``weight_ih_l0``, …) from a ``.safetensors`` file or an ``.npz`` without ``__model__``
(``dynlab.torch_import``: no torch, no pickle).
"""
from __future__ import annotations

import dataclasses
import os
import re
import zipfile

import numpy as np

from .errors import ParameterError
from .models import IRNN, Model, Stack, get_model_class

_SETTING = "__setting__"
_META = ("seed", "weight_scale")


def _settings_for_file(model: Model) -> dict:
    out = {k: v for k, v in model.settings().items() if k != "lowrank"}
    for k in _META:
        out[k] = getattr(model, k)
    if model.SEQUENCE and model.form().kind == "stack":  # each layer's own provenance (given layers keep it)
        for ell, m in enumerate(model.layers, start=1):
            for k in _META:
                out[f"layer{ell}_{k}"] = getattr(m, k)
    return out


def save_model(model: Model, path) -> str:
    """Write ``model``'s parameters and settings to ``path`` (.npz); returns the path."""
    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model, got {type(model).__name__}")
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in model.params().items()}
    arrays["__model__"] = np.array(model.name)
    for k, v in _settings_for_file(model).items():
        arrays[_SETTING + k] = np.array("none" if v is None else v)
    path = os.fspath(path)
    np.savez(path, **arrays)
    return path if path.endswith(".npz") else path + ".npz"


def field_error(param: str, source: str, field: str, message: str) -> ParameterError:
    """A ``ParameterError`` on ``param`` (the option or argument that named the file) whose
    message names the file and the field: ``net.npz: field '__setting__K': must be ≥ 1, got 0``."""
    return ParameterError(param, f"{source}: field {field!r}: {message}")


def _blame(exc: ParameterError, params, settings, param: str, source: str, prefix: str,
           setting_key=None) -> ParameterError:
    """A model's own ``ParameterError`` (``K``, ``activation``, ``U``) re-raised against the
    file's field, so a bad value inside a file never blames an option the user did not give."""
    setting_key = setting_key or (lambda k: _SETTING + k)
    if exc.param in params:
        return field_error(param, source, prefix + exc.param, exc.message)
    if exc.param in settings:
        return field_error(param, source, setting_key(prefix + exc.param), exc.message)
    return ParameterError(param, f"{source}: {prefix}{exc.param}: {exc.message}")


def _from_fields(name: str, params: dict, settings: dict, param: str, source: str | None = None,
                 prefix: str = "", setting_key=None) -> Model:
    """The model ``name`` from a file's parameters and settings; every problem names ``source``
    (the file) and the field (``prefix`` + its name; a setting as ``setting_key`` spells it)."""
    source = source or "the weights"
    setting_key = setting_key or (lambda k: _SETTING + k)
    cls = get_model_class(name, param)
    if cls is Stack:
        return _stack_from_fields(params, settings, param, source, setting_key)
    own_settings = set(cls.SETTINGS) | set(_META)
    own_params = [f.name for f in dataclasses.fields(cls) if f.name not in own_settings]
    for k in params:
        if k not in own_params:
            raise field_error(param, source, prefix + k, f"is not a parameter of a {name} model "
                                                          f"({', '.join(own_params)})")
    for k in settings:
        if k not in own_settings:
            raise field_error(param, source, setting_key(prefix + k), f"is not a setting of a {name} model "
                                                                       f"({', '.join(sorted(own_settings))})")
    kwargs = dict(params)
    for k, v in settings.items():
        if k == "lowrank":
            continue
        kwargs[k] = None if (isinstance(v, str) and v == "none") else v
    if cls is IRNN and "U" not in kwargs:
        kwargs["U"] = None
    try:
        return cls(**kwargs)
    except ParameterError as exc:
        raise _blame(exc, own_params, settings, param, source, prefix, setting_key) from None
    except TypeError as exc:
        raise ParameterError(param, f"{source}: does not describe a {name} model ({exc})") from None


def _stack_from_fields(params: dict, settings: dict, param: str, source: str | None = None,
                       setting_key=None) -> Stack:
    """A ``Stack`` from its ``layer{ℓ}_`` parameters and settings (``save_model``, a Dataset).

    A layer's seed and weight scale are read where stored (a weights file) and otherwise
    are those ``Stack.random`` gave it (seed + ℓ − 1 and the stack's weight scale; a Dataset
    records only the stack's)."""
    source = source or "the weights"
    setting_key = setting_key or (lambda k: _SETTING + k)
    kind = str(settings.get("cell", ""))
    if kind not in ("rnn", "gru", "lstm"):
        raise field_error(param, source, setting_key("cell"), f"must be the layer kind rnn, gru or lstm, got {kind!r}")
    L = settings.get("n_layers")
    if isinstance(L, (bool, np.bool_)) or not isinstance(L, (int, np.integer)) or L < 1:
        raise field_error(param, source, setting_key("n_layers"), f"must be an integer ≥ 1, got {L!r}")
    L = int(L)
    layer_of = re.compile(r"layer(\d+)_")
    for k in list(params) + list(settings):
        m = layer_of.match(k)
        if m is None and k in params:
            raise field_error(param, source, k, "is not a parameter of a stack model (its layers' are layer{ℓ}_…)")
        if m is None and k not in ("cell", "n_layers", "activation", "seed", "weight_scale", "leak", "lowrank"):
            raise field_error(param, source, setting_key(k), "is not a setting of a stack model")
        if m is not None and not 1 <= int(m.group(1)) <= L:
            raise field_error(param, source, k if k in params else setting_key(k),
                              f"names layer {int(m.group(1))} of a stack of n_layers = {L}")
    seed = settings.get("seed")
    scale = settings.get("weight_scale")
    try:
        seed = None if seed is None or (isinstance(seed, str) and seed == "none") else int(seed)
    except (TypeError, ValueError):
        raise field_error(param, source, setting_key("seed"), f"must be an integer or none, got {seed!r}") from None
    try:
        scale = None if scale is None or (isinstance(scale, str) and scale == "none") else float(scale)
    except (TypeError, ValueError):
        raise field_error(param, source, setting_key("weight_scale"), f"must be a number or none, got {scale!r}") \
            from None
    layers = []
    for ell in range(1, L + 1):
        pre = f"layer{ell}_"
        own_params = {k[len(pre):]: v for k, v in params.items() if k.startswith(pre)}
        own_settings = {k[len(pre):]: v for k, v in settings.items() if k.startswith(pre)}
        own_settings.setdefault("seed", "none" if seed is None else seed + ell - 1)
        own_settings.setdefault("weight_scale", "none" if scale is None else scale)
        layers.append(_from_fields(kind, own_params, own_settings, param, source, pre, setting_key))
    try:
        return Stack(tuple(layers), seed=seed, weight_scale=scale)
    except ParameterError as exc:
        raise ParameterError(param, f"{source}: does not describe a stack model ({exc})") from None


def _looks_like_safetensors(path) -> bool:
    """Whether the file starts as a safetensors file does: an 8-byte header length, then '{'."""
    with open(path, "rb") as f:
        head = f.read(9)
    return len(head) == 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < os.path.getsize(path)


#: Suffixes of ``torch.save`` files: pickles, which can run code when read.
_PICKLES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle")


def load_model(path, model: str | None = None, *, activation: str | None = None,
               prefix: str | None = None) -> Model:
    """Read a model: a file written by ``save_model``, or a PyTorch network's parameters.

    Parameters
    ----------
    path : a ``.npz`` written by ``save_model``; or a ``.safetensors`` / ``.npz`` of a PyTorch
        ``state_dict`` under PyTorch's names (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``,
        ``bias_hh_l0``, ``…_l1``; a cell's ``weight_ih``, …), read without torch and without
        pickle (``dynlab.torch_import``).
    model : 'rnn', 'gru' or 'lstm', optional
        The kind of PyTorch module the parameters are from.  None: read from ``weight_hh``'s
        shape (G·hidden × hidden, G = 1, 3, 4); given: checked against it.  Several layers
        (``_l1``, …) make a ``Stack`` of that kind.  For a ``save_model`` file, a check of the
        kind it holds (a stack's layer kind counts).
    activation : 'tanh' or 'relu', optional
        A PyTorch RNN's nonlinearity (a state_dict does not record it; tanh by default).
    prefix : str, optional
        The recurrent module's prefix in a whole network's state_dict (``'rnn.'``); None
        finds the one recurrent module in the file.

    Raises
    ------
    ParameterError
        Every problem is one ``ParameterError`` naming the file and the tensor: missing and
        unexpected tensors (listed, as ``load_state_dict(strict=True)`` does), a wrong shape
        (expected vs got), a complex or integer dtype, bidirectional (``*_reverse``) and
        ``proj_size`` (``weight_hr_l0``) tensors, a ``torch.save`` pickle.  A dynlab file is
        checked entry by entry the same way: ``__model__`` a model name, every ``__setting__…`` a
        single number or string, every parameter a real floating-point array (complex, integer,
        boolean, text and object arrays refused), no unknown entries; a value the model refuses
        (``K`` = 0, an unknown activation) is reported against its entry — ``net.npz: field
        '__setting__K': must be ≥ 1, got 0`` — never against the option that would set it.

    Example
    -------
    >>> m = load_model("net.safetensors", model="gru")   # torch.nn.GRU(3, 64) saved with safetensors
    """
    return _load_model(path, model, activation=activation, prefix=prefix, param="weights")


def _check_entry(param: str, path: str, key: str, value: np.ndarray) -> None:
    """One entry of a dynlab weights file: ``__model__`` a string, a setting one number or
    string, a parameter a real floating-point array (complex, integer, bool and text refused)."""
    kind = value.dtype.kind
    if key == "__model__" or key.startswith(_SETTING):
        if value.ndim != 0:
            raise field_error(param, path, key, f"must be a single value, got an array of shape {value.shape}")
        if key == "__model__" and kind != "U":
            raise field_error(param, path, key, f"must be a model name (a string), got dtype {value.dtype}")
        if kind == "c":
            raise field_error(param, path, key, f"must be real, got a complex value ({value.item()!r})")
        if kind not in "biufU":
            raise field_error(param, path, key, f"must be a number or a string, got dtype {value.dtype}")
        return
    if kind == "c":
        raise field_error(param, path, key, f"must be real, got complex values (dtype {value.dtype}; their "
                                            f"imaginary part would be lost)")
    if kind != "f":
        what = {"b": "booleans", "i": "integers", "u": "integers", "U": "text", "S": "bytes"}.get(kind, "")
        raise field_error(param, path, key, f"must be floating-point numbers, got {what + ' ' if what else ''}"
                                            f"(dtype {value.dtype})")


def _load_model(path, model=None, *, activation=None, prefix=None, param: str = "weights") -> Model:
    """``load_model`` with the errors raised against ``param`` (``weights``; ``resume`` for a
    training checkpoint), each naming the file and, for a bad entry, the entry."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ParameterError(param, f"no such file: {path}")
    if path.lower().endswith(_PICKLES):
        raise ParameterError(param, f"{path} is a torch.save pickle, which dynlab does not read (unpickling "
                                    f"can run code); save the state_dict with safetensors.torch.save_file("
                                    f"net.state_dict(), 'net.safetensors') and load that")
    if path.lower().endswith(".safetensors") or _looks_like_safetensors(path):
        from .torch_import import load_torch_weights
        return load_torch_weights(path, model, activation=activation, prefix=prefix, safetensors=True, param=param)
    if not zipfile.is_zipfile(path):
        raise ParameterError(param, f"{path} is neither an .npz archive (dynlab.save_model, or a state_dict "
                                    f"saved with numpy.savez) nor a .safetensors file")
    key = None
    try:
        with np.load(path, allow_pickle=False) as f:
            if "__model__" not in f.files:
                torch_names = True
            else:
                torch_names = False
                data = {}
                for key in f.files:
                    data[key] = f[key]
    except Exception as exc:
        if key is not None:
            raise field_error(param, path, key, f"cannot be read ({type(exc).__name__}: {exc})") from None
        raise ParameterError(param, f"cannot read {path} as a dynlab .npz ({type(exc).__name__}: {exc})") from None
    if torch_names:
        from .torch_import import load_torch_weights
        return load_torch_weights(path, model, activation=activation, prefix=prefix, param=param)
    for key, value in (("activation", activation), ("prefix", prefix)):
        if value is not None:
            raise ParameterError(key, f"cannot be combined with weights: {path} is a dynlab weights file, which "
                                      f"fixes the model ({key} applies to files of PyTorch parameters)")
    data = {k: v for k, v in data.items() if "/" not in k}  # a training checkpoint's train/… entries
    for k, v in data.items():
        _check_entry(param, path, k, v)
    name = str(data.pop("__model__"))
    settings = {}
    for k in list(data):
        if k.startswith(_SETTING):
            v = data.pop(k)
            settings[k[len(_SETTING):]] = v.item()
    params = {k: (v.item() if v.ndim == 0 else v) for k, v in data.items()}
    try:
        get_model_class(name, param)
    except ParameterError as exc:
        raise field_error(param, path, "__model__", exc.message) from None
    if model is not None:
        want = get_model_class(model, "model").name
        if want != name and not (name == "stack" and str(settings.get("cell")) == want):
            raise ParameterError("model", f"is {model!r} but {path} holds a {name!r} model")
    return _from_fields(name, params, settings, param, path)


def model_from_dataset(ds, prefix: str = "", *, entry: str | None = None) -> Model:
    """Rebuild the model whose parameters and settings a Dataset stores (docs/design.md, *Data contract*).

    ``entry``: in a result of several entries along ``model`` (``dynlab phase``, ``dynlab
    gradients``), the entry to rebuild (its parameters are stored under ``<entry>__``);
    ``prefix`` gives such a prefix directly (``layer2_`` for a stacked partition result)."""
    if entry is not None:
        entries = str(ds.attrs.get("models", "")).split(",")
        if entry not in entries:
            raise ParameterError("entry", f"{entry!r} is not an entry of this Dataset (entries: "
                                          f"{', '.join(e for e in entries if e) or 'none'})")
        prefix = entry + "__"
    elif not prefix and "models" in ds.attrs:
        raise ParameterError("entry", f"this Dataset holds several entries ({ds.attrs['models']}); "
                                      f"name one with entry=")
    name = ds.attrs.get(prefix + "model")
    if name is None:
        raise ParameterError("data", f"the Dataset has no '{prefix}model' attribute")
    cls = get_model_class(str(name), "data")
    if cls is Stack:
        layered = re.compile(re.escape(prefix) + r"layer\d+_")
        params = {k[len(prefix):]: (ds[k].values.item() if ds[k].ndim == 0 else ds[k].values)
                  for k in map(str, ds.variables) if layered.match(k)}
        settings = {k[len(prefix):]: (v.item() if hasattr(v, "item") else v) for k, v in ds.attrs.items()
                    if layered.match(k) or k in (prefix + "cell", prefix + "n_layers", prefix + "seed",
                                                 prefix + "weight_scale")}
        if settings.get("seed") == -1:
            settings["seed"] = None
        return _stack_from_fields(params, settings, "data", "the Dataset", lambda k: prefix + k)
    probe_names = {"U", "W", "b", "M", "V", "H", "eta", "alpha", "beta", "eps", "gamma", "tau"} | set(cls.PARAMS)
    params = {}
    for k in probe_names:
        if prefix + k in ds.variables:
            v = ds[prefix + k].values
            params[k] = v.item() if v.ndim == 0 else v
    if cls is IRNN and "V" in params:
        params.pop("U", None)
    settings = {}
    fields = set(cls.__dataclass_fields__)
    for k in fields:
        if k in params:
            continue
        if prefix + k in ds.attrs and k not in ("U", "W", "b"):
            v = ds.attrs[prefix + k]
            settings[k] = v.item() if hasattr(v, "item") else v
    if settings.get("seed") == -1:
        settings["seed"] = None
    params = {k: v for k, v in params.items() if k in fields}
    return _from_fields(cls.name, params, settings, "data", "the Dataset", setting_key=lambda k: prefix + k)



def model_from_partition(ds):
    """Rebuild the model of a ``partition``/``templates`` Dataset: one layer, or a ``Stack``
    from layer 1's ``U``/``W``/``b`` and the ``layer{ℓ}_`` parameters of the layers above."""
    L = int(ds.attrs.get("layers", 1))
    if L == 1:
        return model_from_dataset(ds)
    # every layer under layer{ℓ}_; files written before that kept layer 1 unprefixed
    first = model_from_dataset(ds, prefix="layer1_" if "layer1_U" in ds else "")
    return Stack((first,) + tuple(model_from_dataset(ds, prefix=f"layer{ell}_") for ell in range(2, L + 1)))

def write_dataset(ds, path, **kwargs) -> str:
    """Write a Dataset to NetCDF (netCDF4 engine); attrs are made NetCDF-safe."""
    from ._dataset import clean_attr

    path = os.fspath(path)
    out = ds.copy()
    out.attrs = {k: clean_attr(v) for k, v in ds.attrs.items()}
    for name in out.variables:
        out[name].attrs = {k: clean_attr(v) for k, v in out[name].attrs.items()}
    out.to_netcdf(path, **kwargs)
    return path


def read_dataset(path):
    """Read a NetCDF Dataset fully into memory (the file is closed on return)."""
    import xarray as xr

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ParameterError("data", f"no such file: {path}")
    with xr.open_dataset(path) as ds:
        return ds.load()

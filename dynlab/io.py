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
    if isinstance(model, Stack):  # each layer's own provenance (a stack of given layers keeps it)
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


def _from_fields(name: str, params: dict, settings: dict, param: str) -> Model:
    cls = get_model_class(name, param)
    if cls is Stack:
        return _stack_from_fields(params, settings, param)
    kwargs = dict(params)
    for k, v in settings.items():
        if k == "lowrank":
            continue
        kwargs[k] = None if (isinstance(v, str) and v == "none") else v
    if cls is IRNN and "U" not in kwargs:
        kwargs["U"] = None
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ParameterError(param, f"does not describe a {name} model ({exc})") from None


def _stack_from_fields(params: dict, settings: dict, param: str) -> Stack:
    """A ``Stack`` from its ``layer{ℓ}_`` parameters and settings (``save_model``, a Dataset).

    A layer's seed and weight scale are read where stored (a weights file) and otherwise
    are those ``Stack.random`` gave it (seed + ℓ − 1 and the stack's weight scale; a Dataset
    records only the stack's)."""
    kind = str(settings.get("cell", ""))
    try:
        L = int(settings.get("n_layers"))
    except (TypeError, ValueError):
        raise ParameterError(param, f"does not describe a stack model (n_layers is {settings.get('n_layers')!r})") \
            from None
    if kind not in ("rnn", "gru", "lstm") or L < 1:
        raise ParameterError(param, f"does not describe a stack model (cell {kind!r}, n_layers {L})")
    seed = settings.get("seed")
    seed = None if seed is None or (isinstance(seed, str) and seed == "none") else int(seed)
    scale = settings.get("weight_scale")
    scale = None if scale is None or (isinstance(scale, str) and scale == "none") else float(scale)
    layers = []
    for ell in range(1, L + 1):
        pre = f"layer{ell}_"
        own_params = {k[len(pre):]: v for k, v in params.items() if k.startswith(pre)}
        own_settings = {k[len(pre):]: v for k, v in settings.items() if k.startswith(pre)}
        own_settings.setdefault("seed", "none" if seed is None else seed + ell - 1)
        own_settings.setdefault("weight_scale", "none" if scale is None else scale)
        layers.append(_from_fields(kind, own_params, own_settings, param))
    try:
        return Stack(tuple(layers), seed=seed, weight_scale=scale)
    except ParameterError as exc:
        raise ParameterError(param, f"does not describe a stack model ({exc})") from None


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

    Every problem is one ``ParameterError`` naming the file and the tensor: missing and
    unexpected tensors (listed, as ``load_state_dict(strict=True)`` does), a wrong shape
    (expected vs got), a complex or integer dtype, bidirectional (``*_reverse``) and
    ``proj_size`` (``weight_hr_l0``) tensors, a ``torch.save`` pickle.

    Example
    -------
    >>> m = load_model("net.safetensors", model="gru")   # torch.nn.GRU(3, 64) saved with safetensors
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ParameterError("weights", f"no such file: {path}")
    if path.lower().endswith(_PICKLES):
        raise ParameterError("weights", f"{path} is a torch.save pickle, which dynlab does not read (unpickling "
                                        f"can run code); save the state_dict with safetensors.torch.save_file("
                                        f"net.state_dict(), 'net.safetensors') and load that")
    if path.lower().endswith(".safetensors") or _looks_like_safetensors(path):
        from .torch_import import load_torch_weights
        return load_torch_weights(path, model, activation=activation, prefix=prefix, safetensors=True)
    if not zipfile.is_zipfile(path):
        raise ParameterError("weights", f"{path} is neither an .npz archive (dynlab.save_model, or a state_dict "
                                        f"saved with numpy.savez) nor a .safetensors file")
    try:
        with np.load(path, allow_pickle=False) as f:
            if "__model__" not in f.files:
                torch_names = True
            else:
                torch_names = False
                data = {k: f[k] for k in f.files}
    except Exception as exc:
        raise ParameterError("weights", f"cannot read {path} as a dynlab .npz ({type(exc).__name__}: {exc})") from None
    if torch_names:
        from .torch_import import load_torch_weights
        return load_torch_weights(path, model, activation=activation, prefix=prefix)
    for key, value in (("activation", activation), ("prefix", prefix)):
        if value is not None:
            raise ParameterError(key, f"cannot be combined with weights: {path} is a dynlab weights file, which "
                                      f"fixes the model ({key} applies to files of PyTorch parameters)")
    name = str(data.pop("__model__"))
    data = {k: v for k, v in data.items() if "/" not in k}  # a training checkpoint's train/… entries
    settings = {}
    for k in list(data):
        if k.startswith(_SETTING):
            v = data.pop(k)
            settings[k[len(_SETTING):]] = v.item() if v.ndim == 0 else v
    params = {k: (v.item() if v.ndim == 0 else v) for k, v in data.items()}
    if model is not None:
        want = get_model_class(model, "model").name
        if want != name and not (name == "stack" and str(settings.get("cell")) == want):
            raise ParameterError("model", f"is {model!r} but {path} holds a {name!r} model")
    return _from_fields(name, params, settings, "weights")


def model_from_dataset(ds, prefix: str = "", *, entry: str | None = None) -> Model:
    """Rebuild the model whose parameters and settings a Dataset stores (README, *Datasets*).

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
        return _stack_from_fields(params, settings, "data")
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
    return _from_fields(cls.name, params, settings, "data")


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

"""Reading and writing: model weights as ``.npz`` (never pickle) and Datasets as NetCDF.

A weights file holds every parameter array under its name, plus ``__model__`` (the registry
name) and each setting under ``__setting__<name>``, all plain NumPy arrays, read back with
``allow_pickle=False``.
"""
from __future__ import annotations

import os

import numpy as np

from .errors import ParameterError
from .models import IRNN, Model, get_model_class

_SETTING = "__setting__"
_META = ("seed", "weight_scale")


def _settings_for_file(model: Model) -> dict:
    out = {k: v for k, v in model.settings().items() if k != "lowrank"}
    for k in _META:
        out[k] = getattr(model, k)
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
    if cls.name == "stack":
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


def _stack_from_fields(params: dict, settings: dict, param: str) -> Model:
    """A ``Stack`` from the ``layer{ℓ}_<name>`` entries ``save_model`` writes (``cell``, ``n_layers``)."""
    from .models import Stack

    try:
        L = int(settings.get("n_layers"))
    except (TypeError, ValueError):
        raise ParameterError(param, "does not describe a stack model (no n_layers setting)") from None
    cells = str(settings.get("cell", "")).split(",")
    cells = cells * L if len(cells) == 1 else cells
    if len(cells) != L:
        raise ParameterError(param, f"does not describe a stack model (cell {settings.get('cell')!r}, {L} layers)")
    layers = []
    for ell in range(1, L + 1):
        head = f"layer{ell}_"
        own = {k[len(head):]: v for k, v in params.items() if k.startswith(head)}
        sets = {k[len(head):]: v for k, v in settings.items() if k.startswith(head)}
        layers.append(_from_fields(cells[ell - 1], own, sets, param))
    meta = {k: (None if (isinstance(settings.get(k), str) and settings[k] == "none") else settings.get(k))
            for k in _META}
    return Stack(tuple(layers), **meta)


def load_model(path) -> Model:
    """Read a model written by ``save_model``."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ParameterError("weights", f"no such file: {path}")
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except Exception as exc:
        raise ParameterError("weights", f"cannot read {path} as a dynlab .npz ({type(exc).__name__}: {exc})") from None
    if "__model__" not in data:
        raise ParameterError("weights", f"{path} has no '__model__' entry; was it written by dynlab.save_model?")
    name = str(data.pop("__model__"))
    data = {k: v for k, v in data.items() if "/" not in k}  # a training checkpoint's train/… entries
    settings = {}
    for k in list(data):
        if k.startswith(_SETTING):
            v = data.pop(k)
            settings[k[len(_SETTING):]] = v.item() if v.ndim == 0 else v
    params = {k: (v.item() if v.ndim == 0 else v) for k, v in data.items()}
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

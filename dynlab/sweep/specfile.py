"""Sweep spec files (TOML, read with tomllib / tomli: data only, no code is ever executed).

.. code-block:: toml

    analysis = "gradient_norms"        # a registered target (dynlab.sweep.TARGETS)
    backend = "numba"                  # optional: numba | numpy | cupy
    region_size = 64                   # optional: points per region (store chunk)

    [model]                            # fixed model settings; `name` is the model
    name = "irnn"
    hidden = 32

    [input]                            # fixed input settings; `kind` is the input kind
    kind = "random-walk"
    steps = 200

    [options]                          # fixed options of the analysis (e.g. k, transient)

    [grid]                             # cartesian axes: setting = [values]
    K = [1, 5, 10]
    eta = [0.1, 0.5, 1.0]
    weight_scale = [0.5, 1.0]

    [zip.schedule]                     # optional: settings varied together along `schedule`
    alpha = [1.0, 0.5]
    g0 = ["zero", "previous"]

    [repeat]
    seeds = 4                          # or a list of seeds

Every setting keeps the name it has in ``dynlab.sweep`` (``[grid] model = ["rnn", "irnn"]``
sweeps the model); ``[model] name`` and ``[input] kind`` are the fixed ``model`` and ``input``.
"""
from __future__ import annotations

import os

from ..errors import ParameterError

TOP_KEYS = ("analysis", "backend", "region_size", "model", "input", "options", "grid", "zip", "repeat")


def _toml():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    return tomllib


def _fail(path: str, key: str | None, message: str):
    """A ParameterError naming the spec file and, where one is to blame, its key
    (``grad.toml: region_size: must be …``); never an option the user did not type."""
    raise ParameterError(f"{path}: {key}" if key else path, message)


def _read(path: str) -> tuple[dict, dict]:
    """The sweep's keyword arguments and, for each setting, the key of the file that gave it
    (``hidden`` → ``model.hidden``, ``model`` → ``model.name``, ``K`` → ``grid.K``)."""
    tomllib = _toml()
    if not str(path).strip():
        raise ParameterError("SPEC.toml", "is empty: give the path of the sweep's TOML spec")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        _fail(path, None, f"cannot read the spec file ({exc.strerror or exc})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        _fail(path, None, f"is not UTF-8 text (TOML must be): byte 0x{raw[exc.start]:02x} at byte offset "
                          f"{exc.start} (line {line}) cannot be decoded")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        _fail(path, None, f"is not valid TOML ({exc})")
    unknown = [k for k in doc if k not in TOP_KEYS]
    if unknown:
        _fail(path, unknown[0], f"unknown key{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}; "
                                f"known: {', '.join(TOP_KEYS)}")
    if "analysis" not in doc:
        _fail(path, None, "names no analysis (analysis = \"gradient_norms\", …)")
    if not isinstance(doc["analysis"], str):
        _fail(path, "analysis", f"must be a string, got {doc['analysis']!r}")
    for section in ("model", "input", "options", "grid", "zip", "repeat"):
        if section in doc and not isinstance(doc[section], dict):
            _fail(path, section, f"must be a table ([{section}]), got {doc[section]!r}")
    fixed, origin = {}, {}

    def put(name, value, key):
        if name in fixed:
            _fail(path, key, f"sets {name!r}, which {origin[name]} sets already")
        fixed[name] = value
        origin[name] = key

    for key, value in doc.get("model", {}).items():
        put("model" if key == "name" else key, value, f"model.{key}")
    for key, value in doc.get("input", {}).items():
        put("input" if key == "kind" else key, value, f"input.{key}")
    for key, value in doc.get("options", {}).items():
        put(key, value, f"options.{key}")
    zipped = {}
    for dim, group in doc.get("zip", {}).items():
        if not isinstance(group, dict):
            _fail(path, f"zip.{dim}", "must be a table of setting = [values]")
        zipped[dim] = group
        origin.update({name: f"zip.{dim}.{name}" for name in group if name not in origin})
    for name in doc.get("grid", {}):
        origin.setdefault(name, f"grid.{name}")
    repeat = doc.get("repeat", {})
    bad = [k for k in repeat if k != "seeds"]
    if bad:
        _fail(path, f"repeat.{bad[0]}", "unknown key; [repeat] knows only `seeds`")
    out = {"analysis": doc["analysis"], "grid": dict(doc.get("grid", {})), "fixed": fixed, "zipped": zipped,
           "seeds": repeat.get("seeds")}
    if "backend" in doc:
        out["backend"] = doc["backend"]
    if "region_size" in doc:
        out["region_size"] = doc["region_size"]
    return out, origin


def load_spec_file(path) -> dict:
    """The keyword arguments of ``dynlab.sweep`` a TOML spec file describes (module docstring).

    Raises ParameterError whose ``param`` names the file and its key (``grad.toml: grid.K``),
    or the file alone for what concerns it as a whole (unreadable, not UTF-8 — with the byte
    offset —, not TOML, no analysis).
    """
    return _read(os.fspath(path))[0]


def _file_key(path: str, param: str, origin: dict) -> str:
    """A sweep's ``ParameterError`` param (``fixed.hidden``, ``grid.K``, ``seeds``, ``backend``)
    as the spec file's key that set it (``model.hidden``, ``grid.K``, ``repeat.seeds``)."""
    head, _, name = param.partition(".")
    if head == "fixed" and name:
        param = name
    if param in origin:
        return f"{path}: {origin[param]}"
    if param == "seeds":
        return f"{path}: repeat.seeds"
    return f"{path}: {param}"


def sweep_from_file(path, **kwargs):
    """``dynlab.sweep(**load_spec_file(path), **kwargs)``; keyword arguments win over the file.

    An error in a value the file gave names the file and its key (``grad.toml: region_size``);
    one in a keyword argument names that argument."""
    from .driver import sweep

    path = os.fspath(path)
    args, origin = _read(path)
    given = {k: v for k, v in kwargs.items() if v is not None}
    args.update(given)
    analysis = args.pop("analysis")
    grid = args.pop("grid")
    try:
        return sweep(analysis, grid, **args)
    except ParameterError as exc:
        if exc.param in given or exc.param.startswith(path + ":"):
            raise
        raise ParameterError(_file_key(path, exc.param, origin), exc.message) from None

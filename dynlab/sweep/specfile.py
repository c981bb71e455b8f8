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


def load_spec_file(path) -> dict:
    """The keyword arguments of ``dynlab.sweep`` a TOML spec file describes (module docstring).

    Raises ParameterError naming ``spec`` (unreadable file, TOML syntax, unknown section or
    key, a section that is not a table) or the setting (``grid.K``, ``model.hidden``, …).
    """
    path = os.fspath(path)
    tomllib = _toml()
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise ParameterError("spec", f"cannot read {path} ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError("spec", f"{path} is not valid TOML ({exc})") from None
    unknown = [k for k in doc if k not in TOP_KEYS]
    if unknown:
        raise ParameterError("spec", f"unknown key(s) {', '.join(map(repr, unknown))} in {path}; "
                                     f"known: {', '.join(TOP_KEYS)}")
    if "analysis" not in doc:
        raise ParameterError("spec", f"{path} names no analysis (analysis = \"gradient_norms\", …)")
    if not isinstance(doc["analysis"], str):
        raise ParameterError("analysis", f"must be a string, got {doc['analysis']!r}")
    for section in ("model", "input", "options", "grid", "zip", "repeat"):
        if section in doc and not isinstance(doc[section], dict):
            raise ParameterError("spec", f"[{section}] must be a table, got {doc[section]!r}")
    fixed = {}

    def put(name, value, where):
        if name in fixed:
            raise ParameterError(f"{where}.{name}", "is given twice in the spec")
        fixed[name] = value

    for key, value in doc.get("model", {}).items():
        put("model" if key == "name" else key, value, "model")
    for key, value in doc.get("input", {}).items():
        put("input" if key == "kind" else key, value, "input")
    for key, value in doc.get("options", {}).items():
        put(key, value, "options")
    zipped = {}
    for dim, group in doc.get("zip", {}).items():
        if not isinstance(group, dict):
            raise ParameterError(f"zip.{dim}", "must be a table of setting = [values]")
        zipped[dim] = group
    repeat = doc.get("repeat", {})
    bad = [k for k in repeat if k != "seeds"]
    if bad:
        raise ParameterError("repeat", f"knows only `seeds`, got {', '.join(map(repr, bad))}")
    out = {"analysis": doc["analysis"], "grid": dict(doc.get("grid", {})), "fixed": fixed, "zipped": zipped,
           "seeds": repeat.get("seeds")}
    if "backend" in doc:
        out["backend"] = doc["backend"]
    if "region_size" in doc:
        out["region_size"] = doc["region_size"]
    return out


def sweep_from_file(path, **kwargs):
    """``dynlab.sweep(**load_spec_file(path), **kwargs)``; keyword arguments win over the file."""
    from .driver import sweep

    args = load_spec_file(path)
    args.update({k: v for k, v in kwargs.items() if v is not None})
    analysis = args.pop("analysis")
    grid = args.pop("grid")
    return sweep(analysis, grid, **args)

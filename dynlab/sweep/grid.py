"""The sweep specification: which settings vary how, validated once, frozen.

A sweep has *axes*.  A cartesian axis sweeps one setting over its values (``grid``); a zipped
axis sweeps several settings together, one value of each per position (``zipped``); the
``seed`` axis repeats every setting with several random seeds (``seeds``).  The points are the
cartesian product of the axes, in C order; the result has one dimension per axis (a zipped
axis is one dimension, with one coordinate per setting along it).  Every other setting is
``fixed`` and becomes an attribute of the result.

Settings share one flat namespace:

* the run: ``model``, ``hidden``, ``inputs``, ``activation``, ``K``, ``eta``, ``alpha``, ``g0``,
  ``weight_scale``, ``seed``, ``steps``, ``input``, ``variance`` (as ``dynlab.spec.RunSpec``;
  ``seed`` seeds both the weights and the input);
* any other keyword setting of the model (``make_model``: ``rank``, ``beta``, ``eps``, …);
* the analysis target's own options (``Target.options``, e.g. ``transient`` for lyapunov).

Values are scalars (int, float, str, bool); a float setting accepts an int.
"""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from .. import spec as _spec
from ..errors import ParameterError
from .targets import RUN_SETTINGS, get_target

#: Defaults of the run settings a sweep fills in when they are not given (RunSpec's), so the
#: attrs of a result name the whole run.
RUN_DEFAULTS = {"model": _spec.DEFAULT_MODEL, "hidden": _spec.DEFAULT_HIDDEN, "inputs": _spec.DEFAULT_INPUTS,
                **{f.name: f.default for f in dataclasses.fields(_spec.RunSpec) if f.name in ("seed", "steps", "input")}}


@dataclasses.dataclass(frozen=True)
class Axis:
    """One dimension of the sweep: ``dim`` and, per setting in ``names``, its values along it."""

    dim: str
    names: tuple
    values: tuple  # one tuple of values per name, all of length ``size``

    @property
    def size(self) -> int:
        return len(self.values[0])

    @property
    def zipped(self) -> bool:
        return self.names != (self.dim,)


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: the analysis, its axes, the fixed settings.  Build with ``make_sweep_spec``."""

    analysis: str
    axes: tuple
    fixed: tuple  # sorted (name, value) pairs

    @property
    def dims(self) -> tuple:
        return tuple(a.dim for a in self.axes)

    @property
    def shape(self) -> tuple:
        return tuple(a.size for a in self.axes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def fixed_dict(self) -> dict:
        return dict(self.fixed)

    def point(self, index: tuple) -> dict:
        """The settings of the point at the multi-index ``index`` (fixed ∪ the axes' values)."""
        out = dict(self.fixed)
        for axis, i in zip(self.axes, index):
            for name, vals in zip(axis.names, axis.values):
                out[name] = vals[i]
        return out

    def fingerprint(self) -> str:
        """Canonical JSON of what determines the results (a store remembers it, resume checks it)."""
        return json.dumps({"analysis": self.analysis,
                           "axes": [[a.dim, list(a.names), [list(v) for v in a.values]] for a in self.axes],
                           "fixed": [list(p) for p in self.fixed]}, sort_keys=True)

    @classmethod
    def from_fingerprint(cls, text: str) -> "SweepSpec":
        d = json.loads(text)
        axes = tuple(Axis(dim, tuple(names), tuple(tuple(v) for v in vals)) for dim, names, vals in d["axes"])
        return cls(d["analysis"], axes, tuple(tuple(p) for p in d["fixed"]))


def _check_value(name: str, value, kind, where: str):
    """The value converted to the setting's type, or a ParameterError naming ``where.name``."""
    param = f"{where}.{name}"
    if value is None or isinstance(value, (list, tuple, dict, np.ndarray)):
        raise ParameterError(param, f"must be a single {getattr(kind, '__name__', 'scalar')} value, got {value!r}")
    if isinstance(value, np.generic):
        value = value.item()
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParameterError(param, f"must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ParameterError(param, f"must be finite, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ParameterError(param, f"must be an integer, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise ParameterError(param, f"must be a string, got {value!r}")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise ParameterError(param, f"must be true or false, got {value!r}")
        return value
    # a model setting without a typed default: any scalar
    if not isinstance(value, (bool, int, float, str)):
        raise ParameterError(param, f"must be a number, a string or a boolean, got {value!r}")
    return value


def _model_setting_types(models) -> dict:
    """name → type of every keyword setting of the given models (``make_model``'s defaults)."""
    from ..models import get_model_class, model_options

    out = {}
    for m in models:
        get_model_class(m)
        for name, default in model_options(m).items():
            if name in RUN_SETTINGS or name in ("seed", "weight_scale"):
                continue
            kind = type(default) if isinstance(default, (bool, int, float, str)) else object
            if name in out and out[name] is not kind:
                kind = float if {out[name], kind} == {int, float} else object
            out[name] = kind
    return out


def _values(name, vals, kind, where):
    if isinstance(vals, (str, bytes)) or not hasattr(vals, "__len__"):
        raise ParameterError(f"{where}.{name}", f"must be a list of values, got {vals!r}")
    vals = list(vals.tolist() if isinstance(vals, np.ndarray) else vals)
    if not vals:
        raise ParameterError(f"{where}.{name}", "has no values; give at least one")
    out = tuple(_check_value(name, v, kind, where) for v in vals)
    return out


def make_sweep_spec(analysis: str, grid=None, *, fixed=None, zipped=None, seeds=None) -> SweepSpec:
    """Validate a sweep description into a ``SweepSpec``.

    Parameters
    ----------
    analysis : str — a registered target (``dynlab.sweep.TARGETS``)
    grid : dict setting → list of values — cartesian axes, in the order given
    fixed : dict setting → value — held fixed; recorded as attrs of the result
    zipped : dict dim → {setting: values} — settings swept together along one dimension
    seeds : int n (seeds 0..n−1) or list of int — the ``seed`` axis (repeats), last

    Raises ParameterError naming ``grid.NAME``, ``fixed.NAME``, ``zip.DIM.NAME`` or
    ``seeds``: an unknown setting, a wrong type, an empty list, a repeated value, a setting
    given twice, a shape-setting option that is swept, or a sweep with no axis at all.
    """
    target = get_target(analysis)
    grid = dict(grid or {})
    fixed = dict(fixed or {})
    zipped = dict(zipped or {})
    for where, d in (("grid", grid), ("fixed", fixed), ("zip", zipped)):
        for k in d:
            if not isinstance(k, str):
                raise ParameterError(where, f"setting names must be strings, got {k!r}")
    # which models take part: the fixed one, or every value of a swept ``model``
    models = set()
    if "model" in fixed:
        models.add(_check_value("model", fixed["model"], str, "fixed"))
    if "model" in grid:
        models.update(_values("model", grid["model"], str, "grid"))
    for dim, group in zipped.items():
        if isinstance(group, dict) and "model" in group:
            models.update(_values("model", group["model"], str, f"zip.{dim}"))
    if not models:
        models.add(RUN_DEFAULTS["model"])
    models = {m.strip().lower() for m in models}
    try:
        kinds = dict(RUN_SETTINGS)
        kinds.update(_model_setting_types(sorted(models)))
    except ParameterError as exc:
        raise ParameterError("model", exc.message) from None
    for name, (_, kind) in target.options.items():
        kinds[name] = kind

    def known(name, where):
        if name not in kinds:
            raise ParameterError(f"{where}.{name}",
                                 f"unknown setting {name!r} for analysis {target.name!r} with model "
                                 f"{', '.join(sorted(models))}; known: {', '.join(sorted(kinds))}")
        if name in target.shape_settings and where != "fixed":
            raise ParameterError(f"{where}.{name}", f"sets the shape of the {target.name} result and cannot be "
                                                    "swept; give it as a fixed setting")
        return kinds[name]

    seen = {}

    def claim(name, where):
        if name in seen:
            raise ParameterError(f"{where}.{name}", f"is given twice (also in {seen[name]})")
        seen[name] = where

    axes = []
    for name, vals in grid.items():
        claim(name, "grid")
        kind = known(name, "grid")
        v = _values(name, vals, kind, "grid")
        _unique(v, f"grid.{name}")
        axes.append(Axis(name, (name,), (v,)))
    for dim, group in zipped.items():
        where = f"zip.{dim}"
        if not isinstance(group, dict) or len(group) < 1:
            raise ParameterError(where, "must map at least one setting to its list of values")
        names, vals = [], []
        for name, v in group.items():
            claim(name, where)
            vals.append(_values(name, v, known(name, where), where))
            names.append(name)
        lengths = {len(v) for v in vals}
        if len(lengths) != 1:
            raise ParameterError(where, f"zipped settings need lists of one length, got "
                                        f"{', '.join(f'{n}: {len(v)}' for n, v in zip(names, vals))}")
        _unique(list(zip(*vals)), where)
        if dim in kinds and (dim,) != tuple(names):
            raise ParameterError(where, f"a zipped dimension may not be named like the setting {dim!r}")
        axes.append(Axis(dim, tuple(names), tuple(vals)))
    if seeds is not None:
        claim("seed", "seeds")
        if isinstance(seeds, bool):
            raise ParameterError("seeds", f"must be a count or a list of seeds, got {seeds!r}")
        if isinstance(seeds, (int, np.integer)):
            if seeds < 1:
                raise ParameterError("seeds", f"must be ≥ 1 repeats, got {seeds}")
            v = tuple(range(int(seeds)))
        else:
            v = _values("seed", seeds, int, "seeds")
        if any(s < 0 for s in v):
            raise ParameterError("seeds", "seeds must be ≥ 0")
        _unique(v, "seeds")
        axes.append(Axis("seed", ("seed",), (v,)))
    if not axes:
        raise ParameterError("grid", "is empty: give at least one setting to sweep (grid, zipped or seeds)")
    dims = [a.dim for a in axes]
    if len(set(dims)) != len(dims):
        raise ParameterError("zip", f"dimension names must differ, got {dims}")
    fx = {}
    for name, value in fixed.items():
        claim(name, "fixed")
        fx[name] = _check_value(name, value, known(name, "fixed"), "fixed")
    for name, value in RUN_DEFAULTS.items():
        if name not in seen:
            fx[name] = value
    for name, (default, _) in target.options.items():
        if name not in seen and default is not None:
            fx[name] = default
    return SweepSpec(target.name, tuple(axes), tuple(sorted(fx.items())))


def _unique(values, param):
    seen = set()
    for v in values:
        if v in seen:
            raise ParameterError(param, f"lists {v!r} more than once; each value once")
        seen.add(v)


# ============================================================================ regions
def region_chunks(shape: tuple, region_size: int) -> tuple:
    """Chunk shape of the store (= the regions): whole trailing dimensions first, ≤ region_size points."""
    chunks = [1] * len(shape)
    rem = max(1, int(region_size))
    for i in range(len(shape) - 1, -1, -1):
        c = max(1, min(shape[i], rem))
        chunks[i] = c
        rem = rem // c if c == shape[i] else 1
    return tuple(chunks)


def regions(shape: tuple, chunks: tuple) -> list:
    """Every region as a tuple of slices, in C order of the chunk grid."""
    counts = [-(-n // c) for n, c in zip(shape, chunks)]
    out = []
    for idx in np.ndindex(*counts):
        out.append(tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(idx, chunks, shape)))
    return out


def region_points(spec: SweepSpec, region: tuple) -> list:
    """(multi-index, settings) of every point of a region, in C order."""
    sub = tuple(s.stop - s.start for s in region)
    return [(tuple(s.start + i for s, i in zip(region, idx)), spec.point(tuple(s.start + i for s, i in zip(region, idx))))
            for idx in np.ndindex(*sub)]


# ============================================================================ settings as columns
@dataclasses.dataclass(frozen=True, eq=False)
class SettingsTable:
    """The settings of n points as columns (``region_table``): for each axis of ``spec``, the
    position of every point along it (``codes``, (n,) int64 each); a setting's values are its
    axis's values at those positions, a fixed setting is one value for all.  What a vectorised
    target reads instead of one dict per point (``Target.vectorised``).  ``memo``: what a
    target may keep from one region of a sweep to the next (``columns.Memo``; None: nothing)."""

    spec: SweepSpec
    codes: tuple
    memo: object = None
    _columns: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def n(self) -> int:
        return int(self.codes[0].shape[0]) if self.codes else 1

    def _axis(self, name: str):
        for a, axis in enumerate(self.spec.axes):
            if name in axis.names:
                return a, axis.values[axis.names.index(name)]
        return None, None

    def varies(self, name: str) -> bool:
        """Whether ``name`` is swept (along an axis of more than one value)."""
        a, _ = self._axis(name)
        return a is not None and self.spec.axes[a].size > 1

    def column(self, name: str, default=None) -> np.ndarray:
        """The values of setting ``name`` at every point, (n,) (``default`` where it is not set)."""
        if name in self._columns:
            return self._columns[name]
        a, values = self._axis(name)
        if a is None:
            value = self.spec.fixed_dict().get(name, default)
            return np.full(self.n, value, dtype=object if isinstance(value, str) or value is None else None)
        out = np.asarray(values, dtype=object if isinstance(values[0], str) else None)[self.codes[a]]
        self._columns[name] = out
        return out

    def point(self, i: int) -> dict:
        """The settings of point i, as ``SweepSpec.point`` gives them."""
        return self.spec.point(tuple(int(c[i]) for c in self.codes))

    def groups(self, names, rows=None) -> list:
        """The points (of ``rows``, default all) split by the values of the settings ``names``: a
        list of index arrays (ascending, in the order of each group's first point), one per
        distinct combination."""
        rows = np.arange(self.n) if rows is None else np.asarray(rows)
        axes = sorted({a for a, axis in enumerate(self.spec.axes) if set(axis.names) & set(names)})
        if not axes:
            return [rows]
        key = np.ravel_multi_index([self.codes[a][rows] for a in axes], [self.spec.axes[a].size for a in axes])
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        parts = np.split(order, np.cumsum(np.bincount(inverse))[:-1])
        return [rows[parts[g]] for g in np.argsort(first, kind="stable")]


def region_table(spec: SweepSpec, region: tuple, memo=None) -> SettingsTable:
    """The ``SettingsTable`` of a region's points, in C order (those of ``region_points``)."""
    sub = tuple(s.stop - s.start for s in region)
    idx = np.indices(sub, dtype=np.int64).reshape(len(sub), -1)
    return SettingsTable(spec, tuple(idx[a] + region[a].start for a in range(len(sub))), memo)

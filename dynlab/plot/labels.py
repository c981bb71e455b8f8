"""Reading what a result Dataset says about itself: its entries, their settings, display names.

A result of one model (``dynlab.simulate(m, x)``, ``dynlab.gradient_norms(m, x)``, …) keeps
its settings as plain attrs (``K``, ``activation``); a result of several entries along
``model`` (``dynlab phase``, ``dynlab gradients``) keeps each entry's settings under the prefix
``<entry>__``.  ``entries`` and ``entry_attr`` read both alike, so every picture accepts both.
Only Dataset reading here: nothing is computed.
"""
from __future__ import annotations

#: Display names of the models, in the papers' spelling.
PRETTY = {"rnn": "RNN", "fastrnn": "FastRNN", "antisymmetric": "AntisymmetricRNN", "rin": "RIN",
          "irnn": "iRNN", "ctrnn": "CTRNN", "implicit": "implicit net", "gru": "GRU", "lstm": "LSTM"}
SEP = "__"


def entries(ds) -> list[str]:
    """The entry names of a result: the ``model`` coordinate, or the one model of a single result."""
    if "model" in ds.dims:
        return [str(n) for n in ds["model"].values]
    return [str(ds.attrs.get("model", "model"))]


def entry_attr(ds, name: str, key: str, default=None):
    """Setting ``key`` of entry ``name`` (``<name>__key`` in a multi-entry result, else ``key``).

    Files written before every entry was prefixed kept the first entry unprefixed; that
    spelling is read too."""
    if "model" not in ds.dims:
        return ds.attrs.get(key, default)
    value = ds.attrs.get(name + SEP + key)
    if value is None and name == entries(ds)[0]:
        value = ds.attrs.get(key)
    return default if value is None else value


def entry_data(ds, name: str, var: str):
    """Variable ``var`` of entry ``name`` as a DataArray (selected along ``model`` when present)."""
    da = ds[var]
    return da.sel(model=name) if "model" in da.dims else da


def entry_title(ds, name: str) -> str:
    """``iRNN (K=5)``, ``RNN``, …: an entry's display name with its K for an iRNN."""
    registry = str(entry_attr(ds, name, "model", name))
    title = PRETTY.get(registry, registry)
    if registry == "irnn" and entry_attr(ds, name, "K") is not None:
        title += f" (K={int(entry_attr(ds, name, 'K'))})"
    return title

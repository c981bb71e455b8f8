"""Datasets holding several entries side by side along ``model`` (``dynlab phase``, ``gradients``).

Every entry is stored alike: its parameters as variables ``<entry>__<name>`` (``rnn__U``,
``irnn-K5__eta``; a map model's own dimensions too: ``lstm__gate_row``) and its settings as
attrs ``<entry>__<setting>``; ``attrs["models"]`` lists
the entries in order and ``attrs["model"]`` the distinct registry names among them.  No entry is
privileged, so nothing at the top level describes one entry only.  ``dynlab.model_from_dataset
(ds, entry="rnn")`` rebuilds an entry's model.
"""
from __future__ import annotations

import numpy as np

SEP = "__"


def entry_prefix(name: str) -> str:
    """The prefix of an entry's parameters and settings (``"rnn"`` → ``"rnn__"``)."""
    return name + SEP


def entry_coords(names, models, T: int, time_name: str = "time step t") -> dict:
    """The coordinates shared by multi-entry Datasets: model, time, unit, unit_from, unit_in."""
    primary = models[0]
    unit = np.arange(primary.hidden)
    return {
        "model": ("model", np.array(names, dtype=object), {"long_name": "model", "units": "1"}),
        "time": ("time", np.arange(1, T + 1), {"long_name": time_name, "units": "step"}),
        "unit": ("unit", unit, {"long_name": "hidden unit", "units": "1"}),
        "unit_from": ("unit_from", unit, {"long_name": "presynaptic unit", "units": "1"}),
        "unit_in": ("unit_in", np.arange(primary.inputs), {"long_name": "input feature", "units": "1"}),
    }


def add_entries(data: dict, attrs: dict, names, models) -> None:
    """Every entry's parameters (variables) and settings (attrs) under its prefix, in place."""
    from .._dataset import model_attrs, model_variables

    for name, model in zip(names, models):
        variables = model_variables(model, prefix=entry_prefix(name))
        if getattr(model, "MAP", False):
            # a GRU's gate rows (3D) and an LSTM's (4D), a stack's layers: each entry's own dims
            shared = {"unit", "unit_from", "unit_in"}
            variables = {k: v.copy(deep=False) for k, v in variables.items()}
            for v in variables.values():
                v.dims = tuple(d if d in shared else entry_prefix(name) + d for d in v.dims)
        data.update(variables)
        attrs.update(model_attrs(model, prefix=entry_prefix(name)))
    attrs["models"] = ",".join(names)
    attrs["model"] = ",".join(dict.fromkeys(m.name for m in models))

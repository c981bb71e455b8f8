"""The training history: the variables ``train_model`` records, and the Dataset they make."""
from __future__ import annotations

import json

import numpy as np

#: name → (long_name, units) of every variable a history may hold (``dynlab.train.loop``'s table).
HISTORY_VARS = {
    "loss": ("training loss", "1"),
    "val_loss": ("validation loss", "1"),
    "val_accuracy": ("validation accuracy", "1"),
    "jac_norm": ("‖∂h_T/∂h_1‖₂", "1"),
    "step_norm": ("‖∂h_T/∂h_{T-1}‖₂", "1"),
    "ratio": ("‖∂h_T/∂h_1‖₂ / ‖∂h_T/∂h_{T-1}‖₂", "1"),
    "A_h_norm": ("‖A_h‖₂ = ‖∂h_T/∂h_0‖₂ (MASO 𝒜_h)", "1"),
    "dL_dh1_norm": ("‖∂L/∂h_1‖₂", "1"),
    "dL_dWr_norm": ("‖∂L/∂W_r‖_F", "1"),
    "grad_norm": ("global gradient norm (before clipping)", "1"),
    "lr": ("learning rate", "1"),
}


def history_dataset(model, readout, task, records, its, past, config, command, eng, backend):
    import xarray as xr

    from .._dataset import base_attrs, clean_attr, finish, model_attrs, model_variables

    data = {k: np.asarray(v, dtype=np.float64) for k, v in records.items()}
    it = np.asarray(its, dtype=np.int64)
    if past is not None:
        it = np.concatenate([past["iteration"], it])
        data = {k: np.concatenate([past[k], v]) for k, v in data.items()}
    if task.loss not in ("ce", "ce-seq"):
        data.pop("val_accuracy")
    dvars = {k: xr.Variable(("iteration",), v, {"long_name": HISTORY_VARS[k][0], "units": HISTORY_VARS[k][1]})
             for k, v in data.items()}
    dvars.update(model_variables(model))
    dvars["W_out"] = xr.Variable(("output", "unit"), readout["W_out"], {"long_name": "read-out weights W_out",
                                                                         "units": "1"})
    dvars["b_out"] = xr.Variable(("output",), readout["b_out"], {"long_name": "read-out bias b_out", "units": "1"})
    attrs = model_attrs(model)
    attrs.update(base_attrs(backend, command))        # the backend that ran
    attrs.update({"task": task.name, "loss_kind": task.loss, "baseline": float(task.baseline),
                  "baseline_name": task.baseline_name, "task_steps": int(task.steps)})
    for k, v in config.items():
        if k == "task":
            attrs.update({f"task_{kk}": clean_attr(vv) for kk, vv in v.items() if kk not in ("task", "steps")})
        elif k == "seed":
            attrs["train_seed"] = int(v)
        elif k == "penalty":
            attrs["penalty"] = json.dumps(v)
        else:
            attrs[k] = clean_attr(v if not isinstance(v, list) else ",".join(v))
    if eng is not None:
        attrs.update(eng.attrs())
    coords = {"iteration": ("iteration", it, {"long_name": "training iteration", "units": "1"})}
    return finish(xr.Dataset(dvars, coords=coords, attrs=attrs), "train_model")


__all__ = ["HISTORY_VARS", "history_dataset"]

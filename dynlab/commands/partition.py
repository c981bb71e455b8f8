"""``dynlab partition``: the MASO partition codes of a piecewise-affine RNN, as one Dataset.

``partition_dataset(spec)`` builds the Dataset (``dynlab.partition`` plus, with ``--embed``,
2-D embeddings of the prefix codes at four time slices); ``dynlab.plot.plot_partition`` draws
it; ``partition_summary`` is the one-paragraph text the command prints.
"""
from __future__ import annotations

import numpy as np

#: Default number of labelled sequences taken by ``--dataset`` when ``--batch`` is not given.
DATASET_BATCH = 500
#: The model and activation ``dynlab partition`` uses when none is given (a partition needs a
#: max-affine activation).
DEFAULT_MODEL = "rnn"
DEFAULT_ACTIVATION = "relu"


def _build_model(spec, inputs: int):
    from ..errors import ParameterError
    from ..models import Stack
    from ..spec import build_model

    run = spec.run
    if spec.layers < 1:
        raise ParameterError("layers", f"must be ≥ 1, got {spec.layers}")
    if spec.layers == 1:
        return build_model(run)
    if run.weights is not None:
        raise ParameterError("layers", "a weights file holds one layer; --layers needs random weights")
    if run.model not in (None, "rnn"):
        raise ParameterError("layers", f"stacked layers are rnn layers (--model rnn), got --model {run.model}")
    extra = dict(run.settings)
    bad = [k for k in extra if k not in ("identity_init", "leak")]
    if bad:
        raise ParameterError(bad[0], "is not a setting of stacked rnn layers (identity_init, leak)")
    for key in ("K", "eta", "alpha", "g0"):
        if getattr(run, key) is not None:
            raise ParameterError(key, "is not a setting of the rnn model")
    return Stack.random(run.hidden or 2, inputs, cell="rnn", layers=spec.layers, seed=run.seed,
                        weight_scale=run.weight_scale, activation=run.activation, **extra)


def partition_dataset(spec):
    """The Dataset of a ``PartitionSpec`` (``dynlab partition``).

    Model: ``rnn`` with ReLU unless asked otherwise (``--layers L`` stacks L rnn layers).
    Input: the spec's ``--input`` sequence(s), or ``--dataset`` labelled sequences (then a
    ``label`` variable).  Returns ``dynlab.partition``'s Dataset (``codes``, ``regions``,
    ``prefix_regions``, ``reconstruction_error``, ``h``, …) plus, with ``embed``,
    ``embedding_pca`` (and with ``tsne`` also ``embedding_tsne``) (slice, batch, coord) at
    ``slice_time`` = T/4, T/2, 3T/4, T.
    """
    import dataclasses

    import xarray as xr

    from .._dataset import finish
    from ..analysis.partition import partition
    from ..analysis.partition_codes import embed_codes
    from ..errors import ParameterError
    from ..spec import build_input, input_attrs

    run = spec.run
    if run.weights is None:
        run = dataclasses.replace(run, model=run.model or DEFAULT_MODEL,
                                  activation=run.activation or DEFAULT_ACTIVATION)
    spec = dataclasses.replace(spec, run=run)
    labels = None
    if spec.dataset is not None:
        from ..tasks.labelled import labelled_sequences

        x, labels, name = labelled_sequences(spec.dataset, seed=run.seed)
        if run.inputs is not None and run.inputs != x.shape[2]:
            raise ParameterError("inputs", f"the {name} data have {x.shape[2]} input feature(s), got {run.inputs}")
        n = DATASET_BATCH if run.batch is None else run.batch
        if n < 1:
            raise ParameterError("batch", f"must be ≥ 1, got {n}")
        keep = np.sort(np.random.default_rng(run.seed).permutation(len(labels))[:n])
        x, labels = x[keep], labels[keep]
        model = _build_model(dataclasses.replace(spec, run=dataclasses.replace(run, inputs=x.shape[2])), x.shape[2])
    else:
        model = _build_model(spec, run.inputs or 1)
        x = build_input(run, model.inputs)
    ds = partition(model, x, backend=run.backend, command=run.command)
    if spec.dataset is None:
        ds.attrs.update(input_attrs(run, ds.sizes["time"]))
    if labels is not None:
        ds["label"] = xr.Variable(("batch",), labels, {"long_name": "class label", "units": "1"})
        ds.attrs["dataset"] = name
    if spec.tsne and not spec.embed:
        raise ParameterError("tsne", "goes with --embed (it adds t-SNE to the PCA embedding)")
    if spec.tsne:
        from ..tasks.labelled import have_digits

        if not have_digits():
            raise ParameterError("tsne", "needs scikit-learn (pip install 'dynlab[digits]')")
    if spec.embed:
        if "batch" not in ds["codes"].dims or ds.sizes["batch"] < 3:
            raise ParameterError("embed", "needs at least 3 sequences: give --batch B (B ≥ 3) or --dataset")
        T = ds.sizes["time"]
        times = np.unique(np.clip(np.round(np.array([0.25, 0.5, 0.75, 1.0]) * T).astype(int), 1, T))
        codes = ds["codes"].values
        ds = ds.assign_coords(slice_time=("slice", times, {"long_name": "time slice t", "units": "step"}))
        ds["embedding_pca"] = xr.Variable(("slice", "batch", "coord"), embed_codes(codes, times, method="pca"),
                                          {"long_name": "PCA of the prefix codes c_1..c_t", "units": "1"})
        if spec.tsne:
            ds["embedding_tsne"] = xr.Variable(("slice", "batch", "coord"),
                                               embed_codes(codes, times, method="tsne", seed=run.seed),
                                               {"long_name": "t-SNE of the prefix codes c_1..c_t", "units": "1"})
    return finish(ds, "partition")


def partition_summary(ds) -> str:
    """One paragraph: codes shape, regions at the end, reconstruction error."""
    err = float(np.max(ds["reconstruction_error"].values))
    shape = " × ".join(f"{ds.sizes[d]} {d}" for d in ds["codes"].dims)
    text = (f"codes: {shape}; distinct codes seen by t = {ds.sizes['time']}: {int(ds['regions'].values[-1])}")
    if "batch" in ds["codes"].dims:
        text += f"; distinct prefix codes over the batch: {int(ds['prefix_regions'].values[-1])}"
    text += f"; max reconstruction error |A_RNN x + B_RNN − h| = {err:.2e} ({ds.attrs.get('reconstruction_method')})"
    return text



"""The commands: each body builds the spec and calls the library (``dynlab.spec``, ``dynlab.plot``)."""
from __future__ import annotations

import contextlib

import click

from . import main
from .options import (backend_option, compare_option, data_option, input_options, lyapunov_option, make_spec,
                      model_options, model_options_K_list, out_option)
from .options import dataset_option, embed_option, layers_option, tsne_option


def _write_data(ds, path: str) -> None:
    from ..errors import ParameterError
    from ..io import write_dataset

    try:
        write_dataset(ds, path)
    except OSError as exc:
        raise ParameterError("data", f"cannot write {path} ({exc.strerror or exc})") from None


@contextlib.contextmanager
def keep_partial(data: str | None):
    """On a DivergenceError, write the results computed before it to ``data`` and re-raise."""
    from ..errors import DivergenceError

    try:
        yield
    except DivergenceError as err:
        if data is not None and err.partial is not None:
            _write_data(err.partial, data)
            err.written_to = data
        raise


def _save(ds, data: str | None, out: str | None, draw) -> None:
    """Write the Dataset first (it is never lost to a drawing failure), then the picture."""
    written = []
    if data is not None:
        _write_data(ds, data)
        written.append(data)
    if out is not None:
        from ..plot import save_figure

        save_figure(draw(ds), out)
        written.append(out)
    if written:
        click.echo("wrote " + ", ".join(written))


@main.command()
def models():
    """List the models with their settings and defaults."""
    from .. import MODELS, model_options

    width = max(map(len, MODELS)) + 2
    for name, cls in MODELS.items():
        click.echo(f"{name:<{width}}{cls.DESCRIPTION}")
        opts = ", ".join(f"{k}={v}" for k, v in model_options(name).items() if k != "seed")
        click.echo(f"{'':<{width}}settings: {opts}")


@main.command(short_help="Run a model over input sequences; write h_t and plot it.")
@model_options
@input_options(batch=True)
@backend_option
@out_option
@data_option
@click.pass_context
def simulate(ctx, out, data, **options):
    """Run a model over input sequences: h_t to --data, the first sequence's h_t to --out.

    Example: dynlab simulate --model irnn --K 5 --steps 1000 --data run.nc --out run.png
    """
    from ..plot import plot_states, simulate_summary
    from ..spec import simulate_spec

    with keep_partial(data):
        ds = simulate_spec(make_spec(ctx, options))
    _save(ds, data, out, plot_states)
    click.echo(simulate_summary(ds))


@main.command(short_help="Phase portrait of h (iRNN paper Fig. 2), with the equilibrium curve.")
@model_options
@input_options(batch=False, variance_default="10, as in the iRNN paper's Fig. 2")
@compare_option
@backend_option
@out_option
@data_option
@click.pass_context
def phase(ctx, out, data, **options):
    """Phase portrait of the hidden state (iRNN paper, Fig. 2).

    Draws the trajectory h_m from h_0 (black circle) and, for an iRNN, the equilibrium
    curve α s = φ(U s + W x + b) over the input's range (blue) with s_m = h_m + h_{m-1}
    (green).  D > 2 is projected on the trajectory's top two principal components.

    Example: dynlab phase --model irnn --K 5 --compare rnn,fastrnn --out phase.png
    """
    from ..plot import phase_dataset, phase_summary, plot_phase

    with keep_partial(data):
        ds = phase_dataset(make_spec(ctx, options))
    _save(ds, data, out, plot_phase)
    click.echo(phase_summary(ds))


@main.command(short_help="Gradient flow ‖∂h_T/∂h_t‖ over T − t for several models; ratio, Lyapunov.")
@model_options_K_list
@input_options(batch=False)
@compare_option
@lyapunov_option
@backend_option
@out_option
@data_option
@click.pass_context
def gradients(ctx, out, data, K, lyapunov, **options):
    """Gradient flow through time (iRNN paper Figs. 3b, 8): ‖∂h_T/∂h_t‖₂ against T − t.

    One model per --K value (irnn) plus each --compare model, all on the same input; prints
    the ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T-1)‖ and the top finite-time Lyapunov exponent of each;
    --lyapunov computes the whole spectrum and draws it in a second panel.

    Example: dynlab gradients --model irnn --K 1,5,10 --compare rnn,fastrnn --out grad.png
    """
    from ..plot import gradients_dataset, gradients_summary, plot_gradients
    from ..spec import GradientSpec

    spec = GradientSpec(make_spec(ctx, dict(options, K=None)), K_values=K, lyapunov=lyapunov)
    with keep_partial(data):
        ds = gradients_dataset(spec)
    _save(ds, data, out, plot_gradients)
    click.echo(gradients_summary(ds))


@main.command(short_help="MASO partition codes of a piecewise-affine RNN over time; regions; exact affine form.")
@model_options
@input_options(batch=True, steps=200)
@layers_option
@embed_option
@tsne_option
@dataset_option
@backend_option
@out_option
@data_option
@click.pass_context
def partition(ctx, out, data, layers, embed, tsne, dataset, **options):
    """Partition codes of a relu / leaky-relu / abs RNN (MASO paper, Thms. 1-2, Fig. 2).

    Writes `codes` (which affine piece every unit is on at every step and layer), `regions`
    (distinct codes seen so far) and `reconstruction_error` (max |A_RNN x + B_RNN - h|).
    Defaults here: --model rnn --activation relu.

    Example: dynlab partition --dataset digits --hidden 32 --batch 300 --embed --out codes.png
    """
    from ..plot.partition import partition_dataset, partition_summary, plot_partition
    from ..spec import PartitionSpec

    spec = PartitionSpec(make_spec(ctx, options), layers=layers, embed=embed, tsne=tsne, dataset=dataset)
    ds = partition_dataset(spec)
    _save(ds, data, out, plot_partition)
    click.echo(partition_summary(ds))

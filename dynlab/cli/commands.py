"""The commands: each body builds the spec and calls the library (``dynlab.spec``, ``dynlab.plot``)."""
from __future__ import annotations

import contextlib

import click

from . import main
from .options import (backend_option, compare_option, data_option, input_options, lyapunov_option, make_spec,
                      model_options, model_options_K_list, out_option)
from .options import train_options


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


@main.command(short_help="Train a model on a task with exact BPTT gradients; record gradient diagnostics.")
@model_options
@train_options
@out_option
@data_option
@click.pass_context
def train(ctx, out, data, task, steps, pad, iterations, lr, optimiser, batch, clip, sigma_eps, record_every, eta_per_k,
          resume, save_weights, **options):
    """Train a model plus a linear read-out on a task (adding, adding-ternary, copy, digits).

    Exact gradients by reverse mode through time; every --record-every iterations the loss,
    the validation loss, ‖∂h_T/∂h_1‖, the ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T-1)‖, ‖∂L/∂h_1‖,
    ‖𝒜_h‖ = ‖∂h_T/∂h_0‖ and ‖∂L/∂W_r‖ go to the history (--data), drawn with --out.
    --hidden defaults to 64 here; --inputs comes from the task.

    Example (the iRNN set-up that learns the adding task, README): dynlab train --task adding
    --model irnn --K 5 --g0 previous --activation relu --set rank=4 --set sign=-1
    --weight-scale 0.05 --eta 0.1 --lr 0.01 --iterations 600 --out add.png
    """
    from ..plot.training import plot_training, train_summary
    from ..train.loop import TrainSpec, train_spec

    spec = TrainSpec(make_spec(ctx, options), task=task, steps=steps, pad=pad, iterations=iterations, lr=lr,
                     optimiser=optimiser, batch=batch, clip=clip, sigma_eps=sigma_eps, record_every=record_every,
                     eta_per_k=eta_per_k, resume=resume, save_weights=save_weights)
    with keep_partial(data):
        res = train_spec(spec)
    _save(res.history, data, out, plot_training)
    if save_weights is not None:
        click.echo(f"wrote {save_weights}")
    click.echo(train_summary(res.history))

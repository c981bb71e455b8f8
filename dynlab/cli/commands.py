"""The commands: each body fills the defaults, refuses options that do not apply, builds the spec
and calls the library (``dynlab.runs`` computes, ``dynlab.plot.draw`` draws).

Every command follows the same steps, in this order, so nothing is computed before every user
error is found: click parses the options (paths are checked writable then, ``options.py``);
``_prepare`` fills the defaults that depend on other options (``defaults.fill``) and refuses an
option that would have no effect (``checks.check``); then the run; then the Dataset is written
(``--data``), the picture drawn from it (``--out``), and the summary printed unless ``--quiet``.
"""
from __future__ import annotations

import contextlib

import click

from . import main
from .checks import check
from .defaults import command_key, fill, given, stated_defaults
from .options import (IRNN_ONLY, announce_compilation, backend_option, check_writable_dir, compare_option, data_option, input_options,
                      is_quiet, lyapunov_option, make_spec, model_options, model_options_K_list,
                      model_options_without, out_option, quiet_option, step_norms_option)
from .options import force_option
from .options import sweep_options
from .options import dataset_option, embed_option, layers_option, tsne_option
from .options import train_options


def _prepare(ctx: click.Context, values: dict) -> dict:
    """The command's option values with the dependent defaults filled in; refuses (exit 2, one
    line) an option the chosen mode does not use.  Runs before anything is computed."""
    values = fill(ctx, values)
    check(ctx, command_key(ctx), values, given(ctx))
    return values


def _say(ctx: click.Context, text: str) -> None:
    """Print a summary or 'wrote' line on stdout, unless --quiet."""
    if not is_quiet(ctx):
        click.echo(text)


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
        err.data_requested = data
        if data is not None and err.partial is not None:
            _write_data(err.partial, data)
            err.written_to = data
        raise


#: Seconds a computation runs before its progress bar appears (tests patch it).
PROGRESS_AFTER_S = 3.0


class _StageProgress:
    """A one-line stderr bar for the long stages of gradients, spectrum, partition and fixed points
    (``dynlab._resources.progress``): stage, fraction done and ETA; silent for the first
    ``PROGRESS_AFTER_S`` seconds, so short runs print nothing."""

    def __init__(self, width: int = 30):
        import time

        self.clock = time.monotonic
        self.t0 = self.clock()
        self.after = PROGRESS_AFTER_S
        self.width = width
        self.last = -1.0
        self.stage = None
        self.stage_t0 = self.t0
        self.shown = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        if stage != self.stage:
            self.stage, self.stage_t0, self.last = stage, now, -1.0
        if now - self.t0 < self.after or (done < total and now - self.last < 0.2):
            return
        self.last = now
        elapsed = now - self.stage_t0
        left = elapsed * (total - done) / done if done and elapsed > 0 else None
        eta = "--:--" if left is None else "{:d}:{:02d}".format(*divmod(int(round(left)), 60))
        fill = int(self.width * done / max(total, 1))
        click.echo(f"\r{stage}: [{'#' * fill}{'.' * (self.width - fill)}] {done}/{total}, ETA {eta}  ",
                   err=True, nl=False)
        self.shown = True

    def close(self) -> None:
        if self.shown:
            click.echo("", err=True)


@contextlib.contextmanager
def stage_progress(ctx: click.Context):
    """Show ``_StageProgress`` on stderr while the block runs, unless --quiet."""
    if is_quiet(ctx):
        yield None
        return
    from .._resources import reporting

    bar = _StageProgress()
    try:
        with reporting(bar):
            yield bar
    finally:
        bar.close()


def _save(ctx: click.Context, ds, data: str | None, out: str | None) -> None:
    """Write the Dataset first (it is never lost to a drawing failure), then its picture, drawn
    by ``dynlab.plot.draw`` (the function a script calls on the same result)."""
    written = []
    if data is not None:
        _write_data(ds, data)
        written.append(data)
    if out is not None:
        from ..plot import draw, save_figure

        save_figure(draw(ds), out)
        written.append(out)
    if written:
        _say(ctx, "wrote " + ", ".join(written))


@stated_defaults("models")
@main.command()
@quiet_option
def models():
    """List the models with their settings and defaults (printed also with --quiet: it is the answer)."""
    from .. import MODELS, model_options

    width = max(map(len, MODELS)) + 2
    for name, cls in MODELS.items():
        click.echo(f"{name:<{width}}{cls.DESCRIPTION}")
        opts = ", ".join(f"{k}={v}" for k, v in model_options(name).items() if k != "seed")
        click.echo(f"{'':<{width}}settings: {opts}")


@stated_defaults("simulate")
@main.command(short_help="Run a model over input sequences; write h_t and plot it.")
@model_options
@input_options(batch=True)
@backend_option
@out_option
@data_option
@quiet_option
@force_option
@click.pass_context
def simulate(ctx, out, data, **options):
    """Run a model over input sequences: h_t to --data, the first sequence's h_t to --out.

    Example: dynlab simulate --model irnn --K 5 --steps 1000 --data run.nc --out run.png
    """
    from ..runs import simulate_spec, simulate_summary

    options = _prepare(ctx, options)
    with keep_partial(data), stage_progress(ctx):
        ds = simulate_spec(make_spec(ctx, options))
    _save(ctx, ds, data, out)
    _say(ctx, simulate_summary(ds))


@stated_defaults("phase")
@main.command(short_help="Phase portrait of h (iRNN paper Fig. 2), with the equilibrium curve.")
@model_options
@input_options(batch=False)
@compare_option
@click.option("--field/--no-field", "field", default=None,
              help="Draw the vector field (streamlines), nullclines and equilibria (by stability) of a 2-D "
                   "ctrnn or cell (not irnn) at a constant input (--input constant).")
@backend_option
@out_option
@data_option
@quiet_option
@force_option
@click.pass_context
def phase(ctx, out, data, field, **options):
    """Phase portrait of the hidden state (iRNN paper, Fig. 2).

    Draws the trajectory h_m from h_0 (black circle) and, for an iRNN, the equilibrium
    curve α s = φ(U s + W x + b) over the input's range (blue) with s_m = h_m + h_{m-1}
    (green).  D > 2 is projected on the trajectory's top two principal components.

    The input's variance is 10 here (random-walk, noise), as in the paper's Fig. 2.

    Example: dynlab phase --model irnn --K 5 --compare rnn,fastrnn --out phase.png
    """
    from ..runs import phase_dataset, phase_summary

    options = _prepare(ctx, options)
    with keep_partial(data), stage_progress(ctx):
        ds = phase_dataset(make_spec(ctx, options), field=field)
    _save(ctx, ds, data, out)
    _say(ctx, phase_summary(ds))


@stated_defaults("gradients")
@main.command(short_help="Gradient flow ‖∂h_T/∂h_t‖ over T − t for several models; ratio, Lyapunov.")
@model_options_K_list
@input_options(batch=False)
@compare_option
@lyapunov_option
@step_norms_option
@backend_option
@out_option
@data_option
@quiet_option
@force_option
@click.pass_context
def gradients(ctx, out, data, K, lyapunov, step_norms, **options):
    """Gradient flow through time (iRNN paper Figs. 3b, 8): ‖∂h_T/∂h_t‖₂ against T − t.

    One model per --K value (irnn) plus each --compare model, all on the same input; prints
    the ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T-1)‖ and the top finite-time Lyapunov exponent of each;
    --lyapunov computes the whole spectrum and draws it in a second panel.

    Example: dynlab gradients --model irnn --K 1,5,10 --compare rnn,fastrnn --out grad.png
    """
    from ..runs import gradients_dataset, gradients_summary
    from ..spec import GradientSpec

    options = _prepare(ctx, dict(options, K=K))
    spec = GradientSpec(make_spec(ctx, dict(options, K=None)), K_values=K, lyapunov=lyapunov, step_norms=step_norms)
    with keep_partial(data), stage_progress(ctx):
        ds = gradients_dataset(spec)
    _save(ctx, ds, data, out)
    _say(ctx, gradients_summary(ds))


# ----------------------------------------------------------------------------- figures
@stated_defaults("figures")
@main.group(short_help="The papers' figures: list, make, all (claims checked on the data).")
@quiet_option
def figures():
    """Reproduce the figures of the four papers (docs/design.md, *Figures*), each with its claim checked.

    Every figure writes NAME.png (or .pdf), its data NAME.nc, and a line in claims.json with
    the paper's claim, its competence gate, the measured effect ± SE, the negative control and
    the verdict: holds, does not hold, inconclusive (the gate was not met) or underpowered.
    Every verdict is a finding (exit status 0); exit status 1 only when a recipe breaks or its
    negative control passes (the other figures are still written).  The gallery is gallery/,
    written by a full `dynlab figures all`; `make` and `--quick` runs write to figures-scratch/
    unless --out says otherwise.

    Example: dynlab figures all --quick --out /tmp/gallery-quick/
    """


def _parse_out_dir(ctx, param, value):
    """A directory we can write into (made when missing), checked before any figure runs."""
    return None if value is None else check_writable_dir(value, ctx, param)


_figure_out = click.option("--out", "out_dir", type=str, default=None, metavar="DIR", callback=_parse_out_dir,
                           help="Directory for the pictures, the NetCDF data and claims.json (made when missing).")
_figure_quick = click.option("--quick", is_flag=True, default=False,
                             help="Reduced sizes (a few seconds per figure; scaling printed on each).")
_figure_format = click.option("--format", "fmt", type=click.Choice(["png", "pdf", "svg"]), default=None,
                              help="Picture format.")


@stated_defaults("figures list")
@figures.command("list")
@quiet_option
def figures_list():
    """List the figures: name, source, and the claim checked on the data (printed also with --quiet)."""
    from ..figures import recipes

    found = recipes()
    width = max(map(len, found)) + 2 if found else 0
    for name, r in found.items():
        click.echo(f"{name:<{width}}{r.source}: {r.claim}")


def _make_figures(ctx, names, out_dir, quick, fmt, gallery=False):
    import os
    import sys
    import time

    from ..figures import get
    from ..figures._recipe import run_recipe, write_claims

    chosen = [get(n) for n in names]  # unknown names fail before anything runs
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        from ..errors import ParameterError
        raise ParameterError("out_dir", f"cannot create {out_dir} ({exc.strerror or exc})") from None
    announce_compilation(ctx)
    records = []
    t0 = time.perf_counter()
    quiet = is_quiet(ctx)
    bar = (contextlib.nullcontext(chosen) if quiet else
           click.progressbar(chosen, label="figures", file=sys.stderr, item_show_func=lambda r: r.name if r else ""))
    broken = []
    with bar as items:
        for recipe in items:
            try:
                records.append(run_recipe(recipe, out_dir, quick=quick, fmt=fmt))
            except Exception as exc:  # one broken recipe loses no other figure; named at the end
                broken.append(f"{recipe.name} ({type(exc).__name__}: {exc})")
                continue
            write_claims(records, out_dir)  # after every figure: nothing finished is lost
    for r in records:
        e = r.get("effect") or {}
        nums = (f"{e['name']} = {e['ours']:.3g} ± {e['se']:.2g} ({r.get('seeds', '?')} seeds)"
                if isinstance(e.get("ours"), (int, float)) and isinstance(e.get("se"), (int, float)) else "")
        state = "ERROR" if r.get("error") else r.get("verdict", "holds" if r["passed"] else "does not hold")
        _say(ctx, f"{state:<14} {r['name']:<26} {r['seconds']:>7.1f} s  {nums}")
        if r.get("error"):
            _say(ctx, f"      {r['error']}")
        elif not r["passed"]:
            _say(ctx, f"      {state}: {r.get('finding', '')}")
    extra = ""
    if gallery:
        from ..figures._gallery import write_gallery

        write_gallery(records, out_dir, fmt=fmt, total_seconds=time.perf_counter() - t0)
        extra = ", README.md"
    _say(ctx, f"wrote {len(records)} figure(s), claims.json{extra} to {out_dir}")
    errors = broken + [f"{r['name']} (negative control passes)" for r in records if r.get("error")]
    if errors:
        click.echo(f"Error: figure(s) broke: {'; '.join(errors)}", err=True)
        ctx.exit(1)


@stated_defaults("figures make")
@figures.command("make")
@click.argument("names", nargs=-1, required=True)
@_figure_out
@_figure_quick
@_figure_format
@quiet_option
@click.pass_context
def figures_make(ctx, names, out_dir, quick, fmt):
    """Make the named figures (see `dynlab figures list`), by default into the scratch folder
    figures-scratch/: the committed gallery (gallery/) changes only when --out names it.

    Example: dynlab figures make irnn-fig2-phase rin-gradients --quick
    """
    _make_figures(ctx, names, out_dir, quick, fmt)


@stated_defaults("figures all")
@figures.command("all")
@_figure_out
@_figure_quick
@_figure_format
@quiet_option
@click.pass_context
def figures_all(ctx, out_dir, quick, fmt):
    """Make every figure, in the order of `dynlab figures list`, and the gallery page README.md beside them:
    into gallery/ (full sizes), or into figures-scratch/ with --quick, unless --out says otherwise.

    Example: dynlab figures all --quick
    """
    from ..figures import recipes

    if out_dir is None:     # the default depends on --quick (never the gallery for a quick run)
        param = next(p for p in ctx.command.params if p.name == "out_dir")
        out_dir = check_writable_dir(fill(ctx, {"out_dir": None, "quick": quick})["out_dir"], ctx, param)
    _make_figures(ctx, list(recipes()), out_dir, quick, fmt, gallery=True)
class _Progress:
    """A one-line progress bar on stderr: points done, rate (points/s) and ETA."""

    def __init__(self, width: int = 30):
        import time

        self.clock = time.monotonic
        self.t0 = self.clock()
        self.last = -1.0
        self.width = width
        self.shown = False

    def __call__(self, done: int, total: int, computed: int) -> None:
        now = self.clock()
        if done < total and now - self.last < 0.2:
            return
        self.last = now
        rate = computed / (now - self.t0) if computed and now > self.t0 else 0.0
        eta = "--:--" if rate == 0 else "{:d}:{:02d}".format(*divmod(int(round((total - done) / rate)), 60))
        fill = int(self.width * done / max(total, 1))
        click.echo(f"\r[{'#' * fill}{'.' * (self.width - fill)}] {done}/{total} points, {rate:.3g} points/s, "
                   f"ETA {eta}", err=True, nl=False)
        self.shown = True

    def close(self) -> None:
        if self.shown:
            click.echo("", err=True)


@stated_defaults("sweep")
@main.command(short_help="Sweep one analysis over a grid of settings (TOML spec) into a Zarr store.")
@click.argument("spec_file", metavar="SPEC.toml", type=str, required=False)
@sweep_options
@click.option("--verify", "verify_store", type=str, default=None, metavar="STORE.zarr",
              help="Check a store's health instead of running a sweep: every region marked done is read "
                   "and its checksums compared; exit 1 when a region is damaged (--resume recomputes it).")
@backend_option
@data_option
@quiet_option
@click.pass_context
def sweep(ctx, spec_file, store, resume, scheduler, region_size, backend, data, verify_store):
    """Run the sweep SPEC.toml describes (see `dynlab.sweep.specfile`): analysis, [model],
    [input], [options], [grid], [zip.NAME], [repeat] seeds.  Prints a progress bar; --out
    keeps every finished region in a Zarr store, --resume continues it (recomputing damaged
    regions), --data exports NetCDF; --verify STORE reports a store's health.

    Example: dynlab sweep grad.toml --out results.zarr --data results.nc
    """
    import shlex

    from ..sweep import sweep_from_file

    _prepare(ctx, dict(spec_file=spec_file, store=store, resume=resume, scheduler=scheduler,
                       region_size=region_size, backend=backend, data=data, verify_store=verify_store))
    if verify_store is not None:
        _verify_store(ctx, verify_store)
        return
    argv = (ctx.obj or {}).get("argv")
    announce_compilation(ctx)
    bar = None if is_quiet(ctx) else _Progress()
    try:
        ds = sweep_from_file(spec_file, store=store, resume=resume, scheduler=scheduler, region_size=region_size,
                             backend=backend, progress=bar,
                             command=None if argv is None else "dynlab " + shlex.join(argv))
    finally:
        if bar is not None:
            bar.close()
    if data is not None:
        _write_data(ds, data)
    if ds.attrs.get("regions_repaired"):
        click.echo(f"recomputed damaged region(s): {ds.attrs['regions_repaired']}", err=True)
    _say(ctx, f"{ds.attrs['analysis']}: {int(ds['done'].sum())}/{ds['done'].size} points over "
              f"{', '.join(f'{d}={n}' for d, n in ds['done'].sizes.items())}; "
              f"{ds.attrs['points_computed']} computed now" + (f"; store {store}" if store else "")
              + (f"; wrote {data}" if data else ""))
def _verify_store(ctx, path: str) -> None:
    """``sweep --verify STORE``: print the store's health; exit 1 when it is damaged."""
    import os

    from ..errors import ParameterError
    from ..sweep import store as st

    path = path.rstrip("/")
    if not os.path.isdir(path):
        raise ParameterError("verify_store", f"{path} does not exist or is not a folder")
    try:
        st.open_existing_any(path)
        report = st.verify(path)
    except ParameterError as exc:
        raise ParameterError("verify_store", exc.message) from None
    damaged = report["damaged"]
    lines = [f"{path}: {report['done']}/{report['points']} points done in {report['regions_done']}/"
             f"{report['regions']} regions over {', '.join(report['dims'])}; "
             + ("checksums verified" if report["checksums"] else "no checksums (an older store): readability only")
             + f"; {len(damaged)} damaged region(s)"
             + (f"; {len(report['coords_damaged'])} damaged coordinate(s)" if report["coords_damaged"] else "")
             + (f"; being written now by {report['lock']}" if report["lock"] else "")]
    lines += [f"  damaged {why}" for _, why in damaged] + [f"  damaged coordinate {c}" for c in report["coords_damaged"]]
    if damaged or report["coords_damaged"]:
        lines.append("  dynlab sweep SPEC.toml --out STORE --resume recomputes them")
    click.echo("\n".join(lines))
    if damaged or report["coords_damaged"]:
        ctx.exit(1)


# ------------------------------------------------- equilibria, spectrum, converge (issue 4)
from .options import K_max_option, equilibria_options, spectrum_at_option  # noqa: E402


@stated_defaults("equilibria")
@main.command(short_help="Equilibria along an input sequence, multi-start fixed points, continuation.")
@model_options
@input_options(batch=False)
@equilibria_options
@backend_option
@out_option
@data_option
@quiet_option
@force_option
@click.pass_context
def equilibria(ctx, out, data, method, tol, n_starts, continue_over, param_range, **options):
    """Equilibria and their stability (eigenvalues of ∇φU − αI).

    Default: the equilibrium at every input x_m of the sequence (iRNN: the step's, α s =
    φ(U s + W x_m + b) with h_prev = h_(m-1); other models: the fixed point at the constant
    input x_m).  --fixed-points N: every equilibrium a multi-start search finds at x_1.
    --continue-over NAME --range LO,HI: the branch of equilibria over a parameter, with folds.
    Exits 1 (data kept) when a solve did not converge.

    Example: dynlab equilibria --model ctrnn --hidden 1 --continue-over b --range -10,2 --out bif.png
    """
    from ..runs import equilibria_dataset, equilibria_summary, not_converged
    from ..spec import EquilibriaSpec

    mode = dict(method=method, tol=tol, n_starts=n_starts, continue_over=continue_over, param_range=param_range)
    options = _prepare(ctx, {**options, **mode})
    mode = {k: options.pop(k) for k in mode}
    spec = EquilibriaSpec(make_spec(ctx, options), **dict(mode, method=mode["method"].lower()))
    with keep_partial(data), stage_progress(ctx):
        ds = equilibria_dataset(spec)
    _save(ctx, ds, data, out)
    _say(ctx, equilibria_summary(ds))
    failed = not_converged(ds)
    if failed:
        click.echo(f"Error: {failed}", err=True)
        ctx.exit(1)


@stated_defaults("spectrum")
@main.command(short_help="Eigenvalues of ∇φU − αI along trajectories (iRNN paper Fig. 7).")
@model_options
@input_options(batch=True)
@spectrum_at_option
@backend_option
@out_option
@data_option
@quiet_option
@force_option
@click.pass_context
def spectrum(ctx, out, data, at, **options):
    """Stability spectra at every point of the input sequence(s): eigenvalues of ∇φU − αI
    (histogram of real parts and complex plane) and of the step Jacobian (unit circle).

    Example: dynlab spectrum --model irnn --K 5 --hidden 32 --batch 8 --out fig7.png
    """
    from ..runs import spectrum_dataset, spectrum_summary
    from ..spec import SpectrumSpec

    options = _prepare(ctx, dict(options, at=at))
    at = options.pop("at")
    with keep_partial(data), stage_progress(ctx):
        ds = spectrum_dataset(SpectrumSpec(make_spec(ctx, options), at=at.lower()))
    _save(ctx, ds, data, out)
    _say(ctx, spectrum_summary(ds))


@stated_defaults("converge")
@main.command(short_help="Convergence of the iRNN inner recursion to its equilibrium (Fig. 6).")
@model_options
@input_options(batch=False)
@K_max_option
@backend_option
@out_option
@data_option
@quiet_option
@force_option
@click.pass_context
def converge(ctx, out, data, K_max, **options):
    """‖g_k − h_eq‖ against k at every step of the sequence (h_eq: scipy's root), the fitted
    linear rate, the local rate and the bound ρ = 1 − αη + η‖U‖₂ with e_k ≤ ρ^k e_0.
    Exits 1 (data kept) where scipy's reference root did not converge.

    Example: dynlab converge --model irnn --hidden 16 --eta 0.5 --K-max 60 --out fig6.png
    """
    from ..runs import converge_dataset, converge_summary
    from ..runs.stability import reference_failed
    from ..spec import ConvergeSpec

    options = _prepare(ctx, options)
    with keep_partial(data):
        ds = converge_dataset(ConvergeSpec(make_spec(ctx, options), K_max=K_max))
    _save(ctx, ds, data, out)
    _say(ctx, converge_summary(ds))
    failed = reference_failed(ds)
    if failed:
        click.echo(f"Error: {failed}", err=True)
        ctx.exit(1)


@stated_defaults("partition")
@main.command(short_help="MASO partition codes of a piecewise-affine RNN over time; regions; exact affine form.")
@model_options_without(*IRNN_ONLY)
@input_options(batch=True)
@layers_option
@embed_option
@tsne_option
@dataset_option
@backend_option
@out_option
@data_option
@quiet_option
@force_option
@click.pass_context
def partition(ctx, out, data, layers, embed, tsne, dataset, **options):
    """Partition codes of a relu / leaky-relu / abs RNN (MASO paper, Thms. 1-2, Fig. 2).

    Writes `codes` (which affine piece every unit is on at every step and layer), `regions`
    (distinct codes seen so far) and `reconstruction_error` (max |A_RNN x + B_RNN - h|).
    Defaults here: --model rnn --activation relu.

    Example: dynlab partition --dataset digits --hidden 32 --batch 300 --embed --out codes.png
    """
    from ..runs import partition_dataset, partition_summary
    from ..spec import PartitionSpec

    maso = dict(layers=layers, embed=embed, tsne=tsne, dataset=dataset)
    options = _prepare(ctx, {**options, **maso})
    maso = {k: options.pop(k) for k in maso}
    with keep_partial(data), stage_progress(ctx):
        ds = partition_dataset(PartitionSpec(make_spec(ctx, options), **maso))
    _save(ctx, ds, data, out)
    _say(ctx, partition_summary(ds))


@stated_defaults("train")
@main.command(short_help="Train a model on a task with exact BPTT gradients; record gradient diagnostics.")
@model_options
@train_options
@out_option
@data_option
@quiet_option
@force_option
@click.pass_context
def train(ctx, out, data, **options):
    """Train a model plus a linear read-out on a task (adding, adding-ternary, copy, digits).

    Exact gradients by reverse mode through time; every --record-every iterations the loss,
    the validation loss, ‖∂h_T/∂h_1‖, the ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T-1)‖, ‖∂L/∂h_1‖,
    ‖𝒜_h‖ = ‖∂h_T/∂h_0‖ and ‖∂L/∂W_r‖ go to the history (--data), drawn with --out.
    --hidden defaults to 64 here (2 for the implicit networks); --inputs comes from the task.

    Example (the iRNN set-up that learns the adding task, README): dynlab train --task adding
    --model irnn --K 5 --g0 previous --activation relu --set rank=4 --set sign=-1
    --weight-scale 0.05 --eta 0.1 --lr 0.01 --iterations 600 --out add.png

    PyTorch's cells: --model gru, --model lstm (the read-out reads h, not c), and stacks of
    them: --model stack --set cell=lstm --set layers=2.
    """
    from ..runs import implicit_train_summary, train_spec, train_summary
    from ..train.loop import ImplicitTrainResult, TrainSpec

    options = _prepare(ctx, options)
    training = {k: options.pop(k) for k in ("task", "steps", "pad", "iterations", "lr", "optimiser", "batch", "clip",
                                            "sigma_eps", "record_every", "eta_per_k", "resume", "save_weights")}
    spec = TrainSpec(make_spec(ctx, options), progress=False if is_quiet(ctx) else None, **training)
    with keep_partial(data):
        res = train_spec(spec)
    implicit = isinstance(res, ImplicitTrainResult)
    _save(ctx, res.history, data, out)
    if training["save_weights"] is not None:
        _say(ctx, f"wrote {training['save_weights']}")
    _say(ctx, (implicit_train_summary if implicit else train_summary)(res.history))

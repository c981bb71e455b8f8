"""The commands, built from one table (``COMMANDS``): each row names the command, its help, the
option ids it takes (``dynlab.cli.options.OPTIONS``) and what it computes.

Every computing command runs the same steps, in this order, so nothing is computed before every
user error is found: click parses the options (paths are checked writable then, ``options.py``);
``_prepare`` fills the defaults that depend on other options (``defaults.fill``) and refuses an
option that would have no effect (``checks.check``); the options become one frozen spec; the
command layer (``dynlab.commands``) computes the result, talking through ``dynlab.progress``
unless ``--quiet``; the Dataset is written (``--data``), the picture drawn from it (``--out``),
the summary printed, and a failed solve ends with exit status 1.  ``models``, ``sweep`` and the
``figures`` group have bodies of their own (``body``), with options from the same table.

Help texts name what the code uses, from the tables it uses (the tasks, the models a command
takes, the colours of a picture), so they cannot drift.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
from typing import Callable

import click

from .. import _palette
from . import main
from .checks import check
from .defaults import COMMAND_MODELS, command_key, fill, given, stated_defaults
from .options import (IMPLICIT_TASK_NAMES, INPUT, MODEL, RUNS, TASK_NAMES, announce_compilation, is_quiet,
                      make_spec, options)


@dataclasses.dataclass(frozen=True)
class Command:
    """One command of the table.

    name, short_help, help : as ``dynlab --help`` and ``dynlab NAME --help`` show them
    options : option ids (``OPTIONS``) in --help order; ``model`` lists ``COMMAND_MODELS[name]``
    compute : "function" of ``dynlab.commands`` (or "module:function"): spec → result
    summary : "function" of ``dynlab.commands``: result → the printed text
    spec : "module:Class" wrapping the ``RunSpec`` with the command's own options (``own``); None:
        the own options are keywords of ``compute``
    own : option parameter name → the spec field (or keyword) it fills
    failed : "module:function": Dataset → the exit-1 message, or None when the run succeeded
    writes : parameters naming further files the command writes ("wrote FILE" after the run)
    body : a command of its own kind (``models``, ``sweep``, ``figures …``): called with the
        click context and the option values instead of the steps above
    group : the group it belongs to (``figures``), or None for ``dynlab`` itself
    """

    name: str
    short_help: str
    help: str
    options: tuple = ()
    compute: str | None = None
    summary: str | None = None
    spec: str | None = None
    own: dict = dataclasses.field(default_factory=dict)
    failed: str | None = None
    writes: tuple = ()
    body: Callable | None = None
    group: str | None = None

    @property
    def key(self) -> str:
        """The ``dynlab.cli.defaults.DEFAULTS`` key ("figures make")."""
        return f"{self.group} {self.name}" if self.group else self.name


def _find(ref: str, package: str = "dynlab.commands"):
    """The object ``ref`` names: "function" in ``package``, or "module:name"."""
    module, _, name = ref.rpartition(":")
    return getattr(importlib.import_module(module or package), name)


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


@contextlib.contextmanager
def talking(ctx: click.Context):
    """The block's long calls report to one progress bar on stderr (``dynlab.progress``; it appears
    after ``dynlab.progress.DELAY_S`` seconds, so short runs print nothing); with --quiet, to none."""
    from .. import progress

    if is_quiet(ctx):
        with progress.quiet(), progress.meter(False):
            yield
        return
    with progress.meter(None if progress.is_quiet() else progress.TqdmMeter()):
        yield


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


def _run(entry: Command, ctx: click.Context, values: dict) -> None:
    """The steps every computing command takes (the module docstring)."""
    out, data = values.pop("out", None), values.pop("data", None)
    values = _prepare(ctx, values)
    own = {field: values.pop(name) for name, field in entry.own.items()}
    run = make_spec(ctx, values)
    spec, kwargs = (_find(entry.spec)(run, **own), {}) if entry.spec else (run, own)
    with keep_partial(data), talking(ctx):
        result = _find(entry.compute)(spec, **kwargs)
    ds = getattr(result, "history", result)   # training returns its result; the rest a Dataset
    _save(ctx, ds, data, out)
    for name in entry.writes:
        path = own.get(entry.own.get(name, name))
        if path is not None:
            _say(ctx, f"wrote {path}")
    _say(ctx, _find(entry.summary)(result))
    message = _find(entry.failed)(ds) if entry.failed else None
    if message:
        click.echo(f"Error: {message}", err=True)
        ctx.exit(1)


# ------------------------------------------------------------------- the commands of their own kind
def _models(ctx):
    from .. import MODELS, model_options

    width = max(map(len, MODELS)) + 2
    for name, cls in MODELS.items():
        click.echo(f"{name:<{width}}{cls.DESCRIPTION}")
        opts = ", ".join(f"{k}={v}" for k, v in model_options(name).items() if k != "seed")
        click.echo(f"{'':<{width}}settings: {opts}")


def _sweep(ctx, spec_file, store, resume, scheduler, region_size, backend, data, verify_store):
    import shlex

    from ..sweep import sweep_from_file

    _prepare(ctx, dict(spec_file=spec_file, store=store, resume=resume, scheduler=scheduler,
                       region_size=region_size, backend=backend, data=data, verify_store=verify_store))
    if verify_store is not None:
        _verify_store(ctx, verify_store)
        return
    argv = (ctx.obj or {}).get("argv")
    announce_compilation(ctx)
    with talking(ctx):
        ds = sweep_from_file(spec_file, store=store, resume=resume, scheduler=scheduler, region_size=region_size,
                             backend=backend, command=None if argv is None else "dynlab " + shlex.join(argv))
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


def _figures_list(ctx):
    from ..figures import recipes

    found = recipes()
    width = max(map(len, found)) + 2 if found else 0
    for name, r in found.items():
        click.echo(f"{name:<{width}}{r.source}: {r.claim}")


#: The stage the figure commands report (``dynlab.progress``), with the figure's name as its note.
FIGURES_STAGE = "paper figures (figures)"


def _scale_of(ctx, quick, scale):
    """The scale of a figures run: --scale, or quick with --quick; both disagreeing is a usage error."""
    if quick and scale not in (None, "quick"):
        from ..errors import ParameterError
        raise ParameterError("scale", f"--quick is --scale quick; it cannot go with --scale {scale}")
    return "quick" if quick else (scale or "stand-in")


def _make_figures(ctx, names, out_dir, quick, fmt, gallery=False, scale=None, real_data=None, redraw=False,
                  engine="auto"):
    import os

    from .._progress import progress as report_progress
    from ..figures import get
    from ..figures._recipe import run_recipe, write_claims

    chosen = [get(n) for n in names]  # unknown names fail before anything runs
    scale = _scale_of(ctx, quick, scale)
    quick = scale == "quick"
    if not redraw:     # a scale a recipe does not run, or real data it lacks, fails before anything runs
        from ..figures._recipe import Scale, check_scale, choose_engine

        for recipe in chosen:
            check_scale(recipe, Scale(scale, real_data))
        choose_engine(scale, engine)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        from ..errors import ParameterError
        raise ParameterError("out_dir", f"cannot create {out_dir} ({exc.strerror or exc})") from None
    announce_compilation(ctx)
    records = []
    broken = []
    with talking(ctx):
        report_progress(FIGURES_STAGE, 0, len(chosen))
        for i, recipe in enumerate(chosen):
            report_progress(FIGURES_STAGE, i, len(chosen), note=recipe.name)
            try:
                records.append(run_recipe(recipe, out_dir, quick=quick, fmt=fmt, scale=scale, data=real_data,
                                          redraw=redraw, engine=engine))
            except Exception as exc:  # one broken recipe loses no other figure; named at the end
                broken.append(f"{recipe.name} ({type(exc).__name__}: {exc})")
                continue
            finally:
                report_progress(FIGURES_STAGE, i + 1, len(chosen))
            write_claims(records, out_dir)  # after every figure: nothing finished is lost
    for r in records:
        e = r.get("effect") or {}
        nums = (f"{e['name']} = {e['ours']:.3g} ± {e['se']:.2g} ({r.get('seeds', '?')} seeds)"
                if isinstance(e.get("ours"), (int, float)) and isinstance(e.get("se"), (int, float)) else "")
        state = "ERROR" if r.get("error") else r.get("verdict", "holds" if r["passed"] else "does not hold")
        where = "" if r.get("error") else (" (paper scale)" if r.get("at_paper_scale") else "")
        _say(ctx, f"{state + where:<28} {r['name']:<26} {r['seconds']:>7.1f} s  {nums}")
        if r.get("error"):
            _say(ctx, f"      {r['error']}")
        elif not r["passed"]:
            _say(ctx, f"      {state}: {r.get('finding', '')}")
    extra = ""
    if records and (gallery or os.path.exists(os.path.join(out_dir, "README.md"))):
        # the page of every record in claims.json (those of earlier runs, the paper-scale ones, kept)
        from ..figures._gallery import rebuild_gallery

        rebuild_gallery(out_dir, fmt=fmt)
        extra = ", README.md"
    _say(ctx, f"wrote {len(records)} figure(s), claims.json{extra} to {out_dir}")
    errors = broken + [f"{r['name']} (negative control passes)" for r in records if r.get("error")]
    if errors:
        click.echo(f"Error: figure(s) broke: {'; '.join(errors)}", err=True)
        ctx.exit(1)


def _figures_all(ctx, out_dir, quick, fmt, scale=None, real_data=None, redraw=False, engine="auto"):
    from ..figures import recipes
    from .options import check_writable_dir

    scale = _scale_of(ctx, quick, scale)
    if out_dir is None:     # the default depends on --quick (never the gallery for a quick run)
        param = next(p for p in ctx.command.params if p.name == "out_dir")
        out_dir = check_writable_dir(fill(ctx, {"out_dir": None, "quick": scale == "quick"})["out_dir"], ctx, param)
    found = recipes()
    names = [n for n, r in found.items()
             if redraw or (scale in r.scales and not (scale == "paper" and r.reads and real_data is None))]
    skipped = [n for n in found if n not in names]
    if skipped:         # the items with no such scale here, or whose paper scale needs --data: said, not run
        _say(ctx, f"not at the {scale} scale here (see each record's paper_cost; --data for the real data): "
                  + ", ".join(skipped))
    _make_figures(ctx, names, out_dir, scale == "quick", fmt, gallery=True, scale=scale, real_data=real_data,
                  redraw=redraw, engine=engine)


# ------------------------------------------------------------------------------------ the table
_INPUT_ONE = ("steps", "input", "variance")   # one sequence: no --batch
_PHASE_MARKS = {k: _palette.PHASE[k] for k in ("start", "curve", "s")}

COMMANDS = (
    Command("models", "List the models with their settings and defaults.",
            "List the models with their settings and defaults (printed also with --quiet: it is the answer).",
            options=("quiet",), body=lambda ctx: _models(ctx)),
    Command("simulate", "Run a model over input sequences; write h_t and plot it.",
            "Run a model over input sequences: h_t to --data, the first sequence's h_t to --out.\n\n"
            "Example: dynlab simulate --model irnn --K 5 --steps 1000 --data run.nc --out run.png",
            options=(*MODEL, *INPUT, *RUNS), compute="simulate_spec", summary="simulate_summary"),
    Command("phase", "Phase portrait of h (iRNN paper Fig. 2), with the equilibrium curve.",
            "Phase portrait of the hidden state (iRNN paper, Fig. 2).\n\n"
            f"Draws the trajectory h_m (coloured by time) from h_0 ({_PHASE_MARKS['start']} circle) and, for an "
            f"iRNN, the equilibrium curve α s = φ(U s + W x + b) over the input's range ({_PHASE_MARKS['curve']}) "
            f"with s_m = h_m + h_(m-1) ({_PHASE_MARKS['s']} dots).  D > 2 is projected on the trajectory's top two "
            "principal components.\n\n"
            "The default input is i.i.d. N(0, 1) noise, whose size does not grow with time, so the cells do not "
            "saturate; the paper's own input is --input random-walk (variance 10, 1000 steps).\n\n"
            "Example: dynlab phase --model irnn --K 5 --compare rnn,fastrnn --out phase.png",
            options=(*MODEL, *_INPUT_ONE, "compare", "field", *RUNS), compute="phase_dataset",
            summary="phase_summary", own={"field": "field"}),
    Command("gradients", "Gradient flow ‖∂h_T/∂h_t‖ over T − t for several models; ratio, Lyapunov.",
            "Gradient flow through time (iRNN paper Figs. 3b, 8): ‖∂h_T/∂h_t‖₂ against T − t.\n\n"
            "One model per --K value (irnn) plus each --compare model, all on the same input; prints the ratio "
            "‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T-1)‖ and the top finite-time Lyapunov exponent of each; --lyapunov computes "
            "the whole spectrum and draws it in a second panel.\n\n"
            "Example: dynlab gradients --model irnn --K 1,5,10 --compare rnn,fastrnn --out grad.png",
            options=(*("K_list" if o == "K" else o for o in MODEL), *_INPUT_ONE, "compare", "lyapunov",
                     "step_norms", *RUNS),
            compute="gradients_dataset", summary="gradients_summary", spec="dynlab.spec:GradientSpec",
            own={"K": "K_values", "lyapunov": "lyapunov", "step_norms": "step_norms"}),
    Command("equilibria", "Equilibria along an input sequence, multi-start fixed points, continuation.",
            "Equilibria and their stability (eigenvalues of ∇φU − αI).\n\n"
            "Default: the equilibrium at every input x_m of the sequence (iRNN: the step's, α s = φ(U s + W x_m + b) "
            "with h_prev = h_(m-1); other models: the fixed point at the constant input x_m).\n\n"
            "--fixed-points N: every fixed point a multi-start search finds at the constant input --constant-input "
            "(0 by default), started from the states the network visits (--task: on that task's inputs; gru, lstm, "
            "stack: on the input sequence; others: random states run along the dynamics).  Points outside the "
            "states a trajectory can reach are left out unless --keep-unreachable.\n\n"
            "--complete: every fixed point of a piecewise-affine model at --constant-input, with what was proven "
            "(all activation regions solved or pruned by an LP), and every cycle of period ≤ --cycles K of a map; "
            "exits 1 (data kept) when --max-regions stops the search before it is complete.\n\n"
            "--continue-over NAME --range LO,HI: the branch of equilibria over a parameter, with its folds, Hopf / "
            "Neimark–Sacker points, flips and branch points (located, classified, the other branch followed).  Exits 1 "
            "(data kept) when a solve did not converge.\n\n"
            "Example: dynlab equilibria --model gru --weights net.npz --fixed-points 1024 --task flipflop --out fp.png",
            options=(*MODEL, *_INPUT_ONE, "method", "tol", "n_starts", "constant_input", "starts_task",
                     "keep_unreachable", "complete", "cycles", "max_regions", "continue_over", "param_range", *RUNS),
            compute="equilibria_dataset", summary="equilibria_summary", spec="dynlab.spec:EquilibriaSpec",
            own={"method": "method", "tol": "tol", "n_starts": "n_starts", "constant_input": "constant_input",
                 "task": "task", "keep_unreachable": "keep_unreachable", "continue_over": "continue_over",
                 "param_range": "param_range", "complete": "complete", "cycles": "cycles",
                 "max_regions": "max_regions"},
            failed="not_converged"),
    Command("spectrum", "Eigenvalues of ∇φU − αI along trajectories (iRNN paper Fig. 7).",
            "Stability spectra at every point of the input sequence(s): eigenvalues of ∇φU − αI (histogram of "
            "real parts and complex plane) and of the step Jacobian (unit circle).\n\n"
            "Example: dynlab spectrum --model irnn --K 5 --hidden 32 --batch 8 --out fig7.png",
            options=(*MODEL, *INPUT, "at", *RUNS), compute="spectrum_dataset", summary="spectrum_summary",
            spec="dynlab.spec:SpectrumSpec", own={"at": "at"}),
    Command("converge", "Convergence of the iRNN inner recursion to its equilibrium (Fig. 6).",
            "‖g_k − h_eq‖ against k at every step of the sequence (h_eq: scipy's root), the fitted linear rate, "
            "the local rate and the bound ρ = 1 − αη + η‖U‖₂ with e_k ≤ ρ^k e_0.  Exits 1 (data kept) where "
            "scipy's reference root did not converge.\n\n"
            "Example: dynlab converge --model irnn --hidden 16 --eta 0.5 --K-max 60 --out fig6.png",
            options=(*MODEL, *_INPUT_ONE, "K_max", *RUNS), compute="converge_dataset", summary="converge_summary",
            spec="dynlab.spec:ConvergeSpec", own={"K_max": "K_max"}, failed="dynlab.commands.stability:reference_failed"),
    Command("partition", "MASO partition codes of a piecewise-affine RNN over time; regions; exact affine form.",
            "Partition codes of a relu / leaky-relu / abs RNN (MASO paper, Thms. 1-2, Fig. 2).\n\n"
            "Writes `codes` (which affine piece every unit is on at every step and layer), `regions` (distinct "
            "codes seen so far) and `reconstruction_error` (max |A_RNN x + B_RNN - h|).  Models: "
            + ", ".join(COMMAND_MODELS["partition"]) + ".\n\n"
            "Example: dynlab partition --dataset digits --hidden 32 --batch 300 --embed --out codes.png",
            options=(*(o for o in MODEL if o not in ("K", "eta", "g0")), *INPUT, "layers", "embed", "tsne", "dataset",
                     *RUNS),
            compute="partition_dataset", summary="partition_summary", spec="dynlab.spec:PartitionSpec",
            own={"layers": "layers", "embed": "embed", "tsne": "tsne", "dataset": "dataset"}),
    Command("train", "Train a model on a task with exact BPTT gradients; record gradient diagnostics.",
            "Train a model plus a linear read-out on a task: " + ", ".join(TASK_NAMES) + " (sequence models), "
            + ", ".join(IMPLICIT_TASK_NAMES) + " (--model implicit).\n\n"
            "Exact gradients by reverse mode through time; every --record-every iterations the loss, the "
            "validation loss, ‖∂h_T/∂h_1‖, the ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T-1)‖, ‖∂L/∂h_1‖, ‖𝒜_h‖ = ‖∂h_T/∂h_0‖ "
            "and ‖∂L/∂W_r‖ go to the history (--data), drawn with --out.  --inputs comes from the task.\n\n"
            "Example (the iRNN set-up that learns the adding task): dynlab train --task adding --model irnn --K 5 "
            "--g0 previous --activation relu --set rank=4 --set sign=-1 --weight-scale 0.05 --eta 0.1 --lr 0.01 "
            "--iterations 600 --out add.png\n\n"
            "PyTorch's cells: --model gru, --model lstm (the read-out reads h, not c), and stacks of them: --model "
            "stack --set cell=lstm --set layers=2.\n\n"
            "The real data, from your files: --task mnist-pixels (--permute 42: permuted), mnist-rows, noisy-mnist "
            "(--steps T, 1000 by default), har2, with --task-data DIR, e.g. dynlab train --task noisy-mnist "
            "--task-data ~/data/mnist --model irnn --hidden 128 --K 5.",
            options=(*MODEL, "task", "task_data", "task_steps", "pad", "permute", "iterations", "lr", "optimiser",
                     "train_batch", "clip", "sigma_eps", "record_every", "eta_per_k", "resume", "save_weights", "backend",
                     "out", "data", "quiet", "force"),
            compute="train_spec", summary="train_result_summary", spec="dynlab.train.spec:TrainSpec",
            own={k: k for k in ("task", "task_data", "steps", "pad", "permute", "iterations", "lr", "optimiser",
                                "batch", "clip", "sigma_eps", "record_every", "eta_per_k", "resume", "save_weights")},
            writes=("save_weights",)),
    Command("sweep", "Sweep one analysis over a grid of settings (TOML spec) into a Zarr store.",
            "Run the sweep SPEC.toml describes (see `dynlab.sweep.specfile`): analysis, [model], [input], "
            "[options], [grid], [zip.NAME], [repeat] seeds.  Prints a progress bar; --out keeps every finished "
            "region in a Zarr store, --resume continues it (recomputing damaged regions), --data exports NetCDF; "
            "--verify STORE reports a store's health.\n\n"
            "Example: dynlab sweep grad.toml --out results.zarr --data results.nc",
            options=("spec_file", "store", "sweep_resume", "scheduler", "region_size", "verify_store", "backend",
                     "data", "quiet"),
            body=_sweep),
    Command("figures", "The papers' figures: list, make, all (claims checked on the data).",
            "Reproduce the figures of the four papers (docs/design.md, *Figures*), each with its claim checked.\n\n"
            "Every figure writes NAME.png (or .pdf), its data NAME.nc, and a line in claims.json with the paper's "
            "claim, its competence gate, the measured effect ± SE, the negative control and the verdict: holds, "
            "does not hold, inconclusive (the gate was not met) or underpowered.  Every verdict is a finding "
            "(exit status 0); exit status 1 only when a recipe breaks or its negative control passes (the other "
            "figures are still written).  The gallery is gallery/, written by a full `dynlab figures all`; `make` "
            "and `--quick` runs write to figures-scratch/ unless --out says otherwise.\n\n"
            "Example: dynlab figures all --quick --out /tmp/gallery-quick/",
            options=("quiet",), body=lambda ctx: None),
    Command("list", "List the figures: name, source, claim.",
            "List the figures: name, source, and the claim checked on the data (printed also with --quiet).",
            options=("quiet",), body=lambda ctx: _figures_list(ctx), group="figures"),
    Command("make", "Make the named figures (see `dynlab figures list`).",
            "Make the named figures (see `dynlab figures list`), by default into the scratch folder "
            "figures-scratch/: the committed gallery (gallery/) changes only when --out names it.\n\n"
            "Scales: --scale quick (seconds), stand-in (the gallery's reduced sizes, the default) or paper (the "
            "paper's sizes and budgets; the real MNIST / HAR data from --data DIR). Each record states the paper's "
            "setting and ours, and its verdict \"at this scale\" or \"at paper scale\"; a paper-scale run writes "
            "NAME.paper.png beside NAME.png.\n\n"
            "Example: dynlab figures make irnn-fig2-phase rin-gradients --quick",
            options=("names", "out_dir", "quick", "scale", "figures_data", "engine", "redraw", "fmt", "quiet"),
            group="figures",
            body=lambda ctx, names, out_dir, quick, fmt, scale, real_data, redraw, engine: _make_figures(
                ctx, names, out_dir, quick, fmt, scale=scale, real_data=real_data, redraw=redraw, engine=engine)),
    Command("all", "Make every figure and the gallery page README.md beside them.",
            "Make every figure, in the order of `dynlab figures list`, and the gallery page README.md beside them: "
            "into gallery/ (full sizes), or into figures-scratch/ with --quick, unless --out says otherwise.\n\n"
            "Example: dynlab figures all --quick",
            options=("out_dir", "quick", "scale", "figures_data", "engine", "redraw", "fmt", "quiet"), body=_figures_all,
            group="figures"),
)


def build(entry: Command, parent: click.Group) -> click.Command:
    """The click command (or group) of a table row, registered on ``parent``."""
    if entry.body is not None:
        def callback(**values):
            return entry.body(click.get_current_context(), **values)
    else:
        def callback(**values):
            return _run(entry, click.get_current_context(), values)
    callback.__name__ = entry.name
    kind = parent.group if entry.name == "figures" else parent.command
    cmd = kind(entry.name, short_help=entry.short_help, help=entry.help)(
        options(entry.options, COMMAND_MODELS.get(entry.key, ()))(callback))
    return stated_defaults(entry.key)(cmd)


GROUPS = {None: main}
for _entry in COMMANDS:
    _cmd = build(_entry, GROUPS[_entry.group])
    if isinstance(_cmd, click.Group):
        GROUPS[_entry.name] = _cmd
del _entry, _cmd

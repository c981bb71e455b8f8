"""``--help`` states, for every option of every command, the default that command really uses.

The table ``dynlab.cli.defaults.DEFAULTS`` is the single statement of the defaults; these tests
(1) check it covers every option of every command, (2) check every help line ends in the
``[default: …]`` the table renders, and (3) run each command without the option and measure
what was used: from the written Dataset (``--data``), or, for ``dynlab train``, from the
arguments that reach the library's training call (spied on, so no 500-iteration run is needed).
A default that depends on another option (``By``) is measured at every value it lists and at one
value it does not; where it says the option does not apply (``NA``), giving it must be refused.
"""
from __future__ import annotations

import json
import math
import re

import click
import numpy as np
import pytest

import dynlab
from conftest import cli_ok as ok, cli_run as run
from dynlab.backends import resolve_backend
from dynlab.cli import main
from dynlab.cli import defaults as D
from dynlab.cli.defaults import DEFAULTS, DESCRIBED, NA, NO_DEFAULT, By, Default

#: What a probe returns for a quantity the run does not show (an option the mode does not use).
UNOBSERVED = object()


def all_commands(cmd=main, path=()):
    """(table key, click command) of the group and of every command below it."""
    yield (" ".join(path) or "dynlab"), cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from all_commands(sub, path + (name,))


COMMANDS = dict(all_commands())


# ---------------------------------------------------------------------------------- coverage
def test_every_option_of_every_command_has_a_table_entry():
    """A new option without a stated default (or an explicit NO_DEFAULT) fails here."""
    assert set(COMMANDS) == set(DEFAULTS)
    for key, cmd in COMMANDS.items():
        names = [p.name for p in cmd.params]
        assert len(names) == len(set(names)), key
        missing = [n for n in names if n not in DEFAULTS[key]]
        stale = [n for n in DEFAULTS[key] if n not in names]
        assert not missing, f"dynlab {key}: no stated default for {missing}"
        assert not stale, f"dynlab {key}: table rows for options it does not have: {stale}"
        for name, entry in DEFAULTS[key].items():
            assert isinstance(entry, Default) or entry is NO_DEFAULT, (key, name, entry)


def test_every_option_without_a_default_is_a_flag_path_argument_or_mode():
    """NO_DEFAULT is kept for what has none: flags (False), paths, --set, arguments, mode switches."""
    modes = {"n_starts", "continue_over", "param_range", "settings", "version", "task", "scale"}
    for key, cmd in COMMANDS.items():
        for p in cmd.params:
            if DEFAULTS[key][p.name] is not NO_DEFAULT:
                continue
            if isinstance(p, click.Argument) or p.name in modes:
                continue
            is_flag = isinstance(p, click.Option) and p.is_flag and not p.secondary_opts and p.default is False
            is_path = p.metavar is not None and any(s in p.metavar for s in (".nc", ".npz", ".zarr", "FILE", "DIR"))
            assert is_flag or is_path, f"dynlab {key} {p.opts}: has a default; state it in DEFAULTS"


def _normal(text: str) -> str:
    """Text without its whitespace: the help formatter wraps lines (even inside digits-pixels)."""
    return "".join(text.split())


@pytest.mark.parametrize("key", sorted(COMMANDS))
def test_help_states_each_default_from_the_table(key):
    """Each option's help line carries exactly the table's ``[default: …]``; none for NO_DEFAULT."""
    cmd = COMMANDS[key]
    ctx = click.Context(cmd, info_name=key)
    shown = _normal(ok(*([] if key == "dynlab" else key.split()), "--help").stdout)
    for p in cmd.params:
        if not isinstance(p, click.Option):
            continue
        entry = DEFAULTS[key][p.name]
        record = p.get_help_record(ctx)
        assert record is not None, (key, p.name)
        if isinstance(entry, Default):
            stated = f"[default: {entry.render()}]"
            assert record[1].count("[default:") == 1 and stated in record[1], (key, p.name, record[1])
            assert _normal(stated) in shown, (key, p.name)
        else:
            assert "[default:" not in record[1], (key, p.name, record[1])


# ------------------------------------------------------------- the table against the library
def test_model_settings_table_equals_the_models_own_defaults():
    for setting, row in D.MODEL_SETTINGS.items():
        for name in dynlab.MODELS:
            own = dynlab.model_options(name)
            if name in row:
                assert own[setting] == row[name], (setting, name)
            else:
                assert setting not in own, f"{name} takes {setting}: list it in MODEL_SETTINGS"


def test_command_defaults_equal_the_library_constants(tmp_path_factory):
    """Where the library has the same default for its own callers, the two agree."""
    from dynlab.commands import partition as rp, phase as rph
    from dynlab.sweep import driver
    from dynlab.tasks import make_task
    from dynlab.train import spec as train_spec

    assert D.PHASE_VARIANCE == rph.DEFAULT_VARIANCE
    assert (D.PARTITION_DATASET_BATCH, DEFAULTS["partition"]["model"].value,
            DEFAULTS["partition"]["activation"].value) == (rp.DATASET_BATCH, rp.DEFAULT_MODEL, rp.DEFAULT_ACTIVATION)
    assert D.TRAIN_HIDDEN == train_spec.TRAIN_DEFAULT_HIDDEN
    assert train_spec.TRAIN_DEFAULTS == {"sequence": (D.TRAIN_ITERATIONS, D.TRAIN_LR),
                                   "implicit": (D.IMPLICIT_ITERATIONS, D.IMPLICIT_LR)}
    assert D.IMPLICIT_TASKS == train_spec.IMPLICIT_TASKS
    import realdata_files as rf

    folder = tmp_path_factory.mktemp("data")
    rf.write_mnist_idx(folder / "mnist")
    rf.write_har(folder / "har")
    data = {t: folder / ("har" if t == "har2" else "mnist") for t in dynlab.tasks.DATA_TASKS}
    assert set(data) <= set(D.TASK_INPUTS)
    for task, d in D.TASK_INPUTS.items():
        assert make_task(task, None, n_train=4, n_val=4, n_test=4, data=data.get(task)).inputs == d, task
    for task, T in D.TASK_STEPS.items():
        assert make_task(task, None, n_train=4, n_val=4, n_test=4, data=data.get(task)).settings["steps"] == T, task
    assert (driver.REGION_SIZE_BATCHED, driver.REGION_SIZE) == (64, 8)   # as the help of sweep --region-size says
    assert str(driver.REGION_SIZE_BATCHED) in DEFAULTS["sweep"]["region_size"].render()


# ---------------------------------------------------------------------------------- runners
class _Stop(Exception):
    """Raised by the spied training calls once they have seen their arguments."""


def _run_to_dataset(tmp_path, key, args):
    path = tmp_path / "probe.nc"
    if path.exists():
        path.unlink()
    result = run(*key.split(), *args, "--data", path)
    # exit 1 (a numerical failure: equilibria of a relu rin that do not converge) still writes the data
    assert result.exit_code in (0, 1) and path.exists(), (key, args, result.stdout, result.stderr)
    return dynlab.read_dataset(path)


def _run_train(monkeypatch, args):
    """The arguments ``dynlab train ARGS`` hands to ``train_model`` / ``train_implicit``."""
    seen = {}

    def train_model(model, task, **kw):
        seen.update(kind="sequence", model=model, task=task, **kw)
        raise _Stop

    def train_implicit(task, **kw):
        seen.update(kind="implicit", task=task, **kw)
        raise _Stop

    monkeypatch.setattr("dynlab.train.loop.train_model", train_model)
    monkeypatch.setattr("dynlab.train.implicit.train_implicit", train_implicit)
    result = run("train", "--quiet", *args)
    assert isinstance(result.exception, _Stop), (args, result.stdout, result.stderr)
    return seen


SWEEP_SPEC = """analysis = "{analysis}"
[model]
name = "irnn"
hidden = 2
[input]
steps = 5
[grid]
eta = [{values}]
"""


def _run_sweep(tmp_path, monkeypatch, args, analysis="gradient_norms", points=100):
    """(Dataset, whether a Dask client was asked for) of a one-axis sweep of ``points`` points."""
    from dynlab.sweep import driver

    asked = []
    real = driver._client
    monkeypatch.setattr(driver, "_client", lambda *a: asked.append(a) or real(*a))
    spec = tmp_path / "s.toml"
    spec.write_text(SWEEP_SPEC.format(analysis=analysis,
                                      values=", ".join(f"{0.1 + i / points:.4f}" for i in range(points))))
    path = tmp_path / "s.nc"
    if path.exists():
        path.unlink()
    ok("sweep", spec, "--quiet", "--data", path, *args)
    return dynlab.read_dataset(path), bool(asked)


def _run_figures(tmp_path, monkeypatch, key, args, assignment=None):
    """The folder and the picture format ``dynlab figures make|all`` wrote (one figure, quick unless the
    case under test is a full run: ``assignment`` says quick=False)."""
    import dynlab.figures as figs
    from dynlab.figures import _recipe

    one = "irnn-fig2-phase"  # the fastest figure (no training; a few seconds in full mode)
    monkeypatch.setattr(figs, "recipes", lambda: {one: figs.get(one)})
    engines = []
    real = _recipe.choose_engine
    monkeypatch.setattr(_recipe, "choose_engine", lambda scale, engine="auto": engines.append(engine) or real(scale, engine))
    monkeypatch.chdir(tmp_path)
    quick = [] if "--quick" in args or (assignment or {}).get("quick", True) is False else ["--quick"]
    ok(*key.split(), *([one] if key == "figures make" else []), *quick, "--quiet", *args)
    claims = sorted(tmp_path.glob("*/claims.json"))
    assert len(claims) == 1
    folder = claims[0].parent
    record = json.loads(claims[0].read_text())[0]
    pictures = [p.suffix[1:] for p in folder.iterdir() if p.stem == record["name"] and p.suffix != ".nc"]
    return {"out_dir": folder.name, "fmt": pictures[0] if len(pictures) == 1 else pictures,
            "engine": engines[-1] if len(set(engines)) == 1 else engines}


# ----------------------------------------------------------------------------------- probes
def _attr(ds, name):
    value = ds.attrs.get(name, UNOBSERVED)
    return None if isinstance(value, str) and value == "none" else value


def _model_probes(prefixed: bool, backend="backend"):
    """Probes of the model and input options on a command's Dataset (``entry``: the primary model)."""
    def p(entry, name):
        return f"{entry}__{name}" if prefixed else name

    def var(ds, entry, name):
        key = p(entry, name)
        return float(ds[key]) if key in ds else UNOBSERVED

    return {
        "model": lambda ds, e: ds.attrs["model"],
        "hidden": lambda ds, e: ds.sizes["unit"],
        "inputs": lambda ds, e: ds.sizes["unit_in"],
        "seed": lambda ds, e: _attr(ds, p(e, "seed")),
        "activation": lambda ds, e: _attr(ds, p(e, "activation")),
        "K": lambda ds, e: _attr(ds, p(e, "K")),
        "eta": lambda ds, e: var(ds, e, "eta"),
        "alpha": lambda ds, e: var(ds, e, "alpha"),
        "g0": lambda ds, e: _attr(ds, p(e, "g0")),
        "weight_scale": lambda ds, e: _attr(ds, p(e, "weight_scale")),
        "steps": lambda ds, e: ds.sizes["time"],
        "batch": lambda ds, e: ds.sizes.get("batch"),
        "input": lambda ds, e: _attr(ds, "input"),
        "variance": lambda ds, e: _attr(ds, "variance"),
        "backend": lambda ds, e: _attr(ds, backend),
    }


def _trained(rec, sequence, implicit=lambda rec: UNOBSERVED):
    return sequence(rec) if rec["kind"] == "sequence" else implicit(rec)


TRAIN_PROBES = {
    "model": lambda r, e: _trained(r, lambda r: r["model"].name, lambda r: "implicit"),
    "hidden": lambda r, e: _trained(r, lambda r: r["model"].hidden, lambda r: r["hidden"]),
    "inputs": lambda r, e: _trained(r, lambda r: r["model"].inputs),
    "seed": lambda r, e: r["seed"],
    "activation": lambda r, e: _trained(r, lambda r: r["model"].settings()["activation"], lambda r: r["activation"]),
    "K": lambda r, e: _trained(r, lambda r: r["model"].settings().get("K", UNOBSERVED)),
    "eta": lambda r, e: _trained(r, lambda r: float(r["model"].params().get("eta", math.nan))),
    "alpha": lambda r, e: _trained(r, lambda r: float(r["model"].params().get("alpha", math.nan))),
    "g0": lambda r, e: _trained(r, lambda r: r["model"].settings().get("g0", UNOBSERVED)),
    "weight_scale": lambda r, e: _trained(r, lambda r: r["model"].weight_scale, lambda r: r["weight_scale"]),
    "task": lambda r, e: _trained(r, lambda r: r["task"].name, lambda r: r["task"]),
    "steps": lambda r, e: _trained(r, lambda r: r["task"].settings["steps"]),
    "pad": lambda r, e: _trained(r, lambda r: r["task"].settings["pad"]),
    "permute": lambda r, e: _trained(r, lambda r: r["task"].settings.get("permute")),
    "iterations": lambda r, e: r["iterations"],
    "lr": lambda r, e: r["lr"],
    "optimiser": lambda r, e: r["optimiser"],
    "batch": lambda r, e: r["batch"],
    "clip": lambda r, e: _trained(r, lambda r: r["clip"]),
    "sigma_eps": lambda r, e: _trained(r, lambda r: r["sigma_eps"]),
    "record_every": lambda r, e: _trained(r, lambda r: r["record_every"]),
    "backend": lambda r, e: resolve_backend(r["backend"]),     # what the trainer resolves the option to
}

PROBES = {
    "simulate": _model_probes(False),
    "phase": {**_model_probes(True), "compare": lambda ds, e: tuple(str(m) for m in ds["model"].values[1:]),
              "field": lambda ds, e: "field_F1" in ds},
    "gradients": {**_model_probes(True), "compare": lambda ds, e: tuple(str(m) for m in ds["model"].values[1:]),
                  "K": lambda ds, e: (int(ds.attrs[f"{e}__K"]) if ds.sizes["model"] == 1 and f"{e}__K" in ds.attrs
                                      else UNOBSERVED),
                  "step_norms": lambda ds, e: "step_norm" in ds},
    "equilibria": {**_model_probes(False, backend="trajectory_backend"),
                   "method": lambda ds, e: ds.attrs["solve_method"], "tol": lambda ds, e: float(ds.attrs["tol"])},
    "spectrum": {**_model_probes(False), "at": lambda ds, e: ds.attrs["at"]},
    "converge": {**_model_probes(False, backend="trajectory_backend"), "K_max": lambda ds, e: int(ds.attrs["K_max"])},
    "partition": {**_model_probes(False), "layers": lambda ds, e: int(ds.attrs["layers"]),
                  "dataset": lambda ds, e: ds.attrs.get("dataset")},
    "train": TRAIN_PROBES,
    "sweep": {"backend": lambda r, e: r[0].attrs["backend"], "scheduler": lambda r, e: "asked" if r[1] else None},
    "figures make": {"out_dir": lambda r, e: r["out_dir"], "fmt": lambda r, e: r["fmt"], "engine": lambda r, e: r["engine"]},
    "figures all": {"out_dir": lambda r, e: r["out_dir"], "fmt": lambda r, e: r["fmt"], "engine": lambda r, e: r["engine"]},
}
#: A measured default capped by the data: ``partition --dataset`` takes at most the data set's size.
CAPS = {("partition", "batch"): lambda ds: (len(dynlab.tasks.labelled.labelled_sequences(ds.attrs["dataset"])[1])
                                            if "label" in ds else math.inf)}
#: Defaults stated in words only (``DESCRIBED``), each measured by its own test below.
DESCRIBED_TESTS = {("sweep", "region_size"): "test_sweep_region_size_default_is_the_stated_one",
                   ("equilibria", "constant_input"): "test_fixed_points_search_at_zero_input_by_default",
                   ("equilibria", "cycles"): "test_complete_enumeration_defaults_are_the_stated_ones",
                   ("equilibria", "max_regions"): "test_complete_enumeration_defaults_are_the_stated_ones"}
#: Extra arguments a value of a key option needs (the implicit networks train on xor, oscillator).
NEEDS = {("train", "model", "implicit"): {"task": "xor"}, ("train", "task", "xor"): {"model": "implicit"},
         ("train", "task", "oscillator"): {"model": "implicit"}}
#: The models each command takes (the "otherwise" model of a per-model default is one of them).
COMMAND_MODELS = D.COMMAND_MODELS
#: A value to give an option when checking that it is refused where its default says it does not apply.
SAMPLE = {"K": "1", "eta": "1", "alpha": "1", "g0": "zero", "variance": "1", "steps": "5", "inputs": "2",
          "input": "noise"}


def _stated(key):
    return {n: e for n, e in DEFAULTS[key].items() if isinstance(e, Default)}


def _choices(key, option):
    if option == "model":
        return list(COMMAND_MODELS[key])
    param = next(p for p in COMMANDS[key].params if p.name == option)
    if getattr(param, "is_flag", False):
        return [True, False]
    return list(param.type.choices)


def _leaves(key, value, assignment):
    """(option values, the default there) for every case a ``By`` lists, and one it does not."""
    if not isinstance(value, By):
        yield assignment, value
        return
    def case(k):
        return {**assignment, value.option: k, **NEEDS.get((key, value.option, k), {})}

    for k, v in value.values.items():
        yield from _leaves(key, v, case(k))
    others = [c for c in _choices(key, value.option) if c not in value.values]
    if others:
        yield from _leaves(key, value.otherwise, case(others[0]))
    elif value.otherwise is not NA:
        yield from _leaves(key, value.otherwise, assignment)   # the key option not given at all


def _args(key, assignment):
    out = []
    for option, value in assignment.items():
        param = next(p for p in COMMANDS[key].params if p.name == option)
        if getattr(param, "is_flag", False):       # a flag: given (True) or not (False)
            out += [param.opts[0]] if value else []
            continue
        out += [param.opts[0], value]
    return out


def _same(measured, expected) -> bool:
    if isinstance(expected, bool) or isinstance(measured, bool):
        return bool(measured) == bool(expected) and isinstance(measured, (bool, np.bool_))
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return measured is not None and float(measured) == pytest.approx(float(expected), rel=1e-12)
    if isinstance(expected, str):
        return str(measured).lower() == expected.lower()
    return measured == expected


MEASURED = [k for k in PROBES]


@pytest.mark.parametrize("key", MEASURED)
def test_each_stated_default_is_the_value_the_command_uses(key, tmp_path, monkeypatch):
    """Run the command without the option (at each case a per-option default lists, and one it
    does not) and compare what was used with what --help states; where the default says the option
    does not apply, giving it is refused (exit 2, one line naming it)."""
    stated = _stated(key)
    probes = {n: f for n, f in PROBES[key].items() if n in stated}
    described = {n for n, e in stated.items() if e.value is DESCRIBED}
    assert described == {n for (k, n) in DESCRIBED_TESTS if k == key}, "a DESCRIBED default needs its own test"
    assert set(probes) == set(stated) - described, f"dynlab {key}: no probe for {set(stated) - described - set(probes)}"

    if key == "train":      # the tasks of the real data read files: tiny ones in the real formats
        import realdata_files as rf

        rf.write_mnist_idx(tmp_path / "mnist")
        rf.write_har(tmp_path / "har")
        for task in D.TASK_INPUTS:
            if task in dynlab.tasks.DATA_TASKS:
                folder = tmp_path / ("har" if task == "har2" else "mnist")
                monkeypatch.setitem(NEEDS, ("train", "task", task), {"task_data": str(folder)})

    def measure(assignment):
        args = _args(key, assignment)
        if key == "train":
            return _run_train(monkeypatch, args)
        if key == "sweep":
            return _run_sweep(tmp_path, monkeypatch, args)
        if key.startswith("figures"):
            return _run_figures(tmp_path, monkeypatch, key, args, assignment)
        return _run_to_dataset(tmp_path, key, args)

    cases = {}
    for name, entry in stated.items():
        if name in described:
            continue
        for assignment, _ in _leaves(key, entry.value, {}):
            cases.setdefault(tuple(sorted(assignment.items())), dict(assignment))
    cases.setdefault((), {})
    checked = set()
    for assignment in cases.values():
        result = None
        entry_name = assignment.get("model") or D.resolve(DEFAULTS[key].get("model", Default(None)).value, {}, {})
        for name, entry in stated.items():
            if name in described or name in assignment:
                continue
            expected = D.resolve(entry.value, assignment, DEFAULTS[key])
            if expected is NA:
                r = run(*key.split(), *_args(key, assignment), _flag(key, name), SAMPLE[name])
                lines = r.stderr.strip().splitlines()
                assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"Error: {_flag(key, name)}"), \
                    (key, assignment, name, r.stderr)
                checked.add(name)
                continue
            if result is None:
                result = measure(assignment)
            measured = probes[name](result, entry_name)
            if measured is UNOBSERVED:
                continue
            if (key, name) in CAPS and expected is not None:
                expected = min(expected, CAPS[(key, name)](result))
            assert _same(measured, expected), \
                f"dynlab {key} {_args(key, assignment)}: {name} used {measured!r}, --help says {expected!r}"
            checked.add(name)
    assert checked == set(stated) - described, f"never measured: {set(stated) - described - checked}"


def _flag(key, name):
    return next(p for p in COMMANDS[key].params if p.name == name).opts[0]


def test_sweep_region_size_default_is_the_stated_one(tmp_path, monkeypatch):
    """A batched target's regions are the backend's own size (numba: ``config.SWEEP_REGION_FLOPS`` of
    tangent work, within ``config.SWEEP_REGION_RANGE``), 8 points otherwise (the store's chunks)."""
    from dynlab import config

    lo, hi = config.SWEEP_REGION_RANGE
    ds, _ = _run_sweep(tmp_path, monkeypatch, [], analysis="gradient_norms", points=lo + 36)
    # D = 2, T = 5: a few hundred flops a setting, so the range's top, cut to the grid's points
    assert [int(c) for c in ds.attrs["sweep_chunks"].split(",")] == [lo + 36]
    ds, _ = _run_sweep(tmp_path, monkeypatch, [], analysis="simulate", points=10)
    assert [int(c) for c in ds.attrs["sweep_chunks"].split(",")] == [8]
    text = DEFAULTS["sweep"]["region_size"].render()
    assert re.search(r"the backend's size for batched targets \(numba: .*{}–{} settings.*\), 8 otherwise".format(lo, hi),
                     text)


def test_fixed_points_search_at_zero_input_by_default(tmp_path):
    """--fixed-points searches at x = 0 unless --constant-input gives one value (every unit) or d."""
    ds = _run_to_dataset(tmp_path, "equilibria", ["--fixed-points", "4", "--hidden", "3", "--inputs", "2"])
    assert ds.attrs["result"] == "fixed_points" and ds["x"].values.tolist() == [0.0, 0.0]
    ds = _run_to_dataset(tmp_path, "equilibria", ["--fixed-points", "4", "--hidden", "3", "--inputs", "2",
                                                  "--constant-input", "0.5"])
    assert ds["x"].values.tolist() == [0.5, 0.5]
    ds = _run_to_dataset(tmp_path, "equilibria", ["--fixed-points", "4", "--hidden", "3", "--inputs", "2",
                                                  "--constant-input", "0.5,-1"])
    assert ds["x"].values.tolist() == [0.5, -1.0]
    assert "0 for every input unit" in DEFAULTS["equilibria"]["constant_input"].render()


def test_complete_enumeration_defaults_are_the_stated_ones(tmp_path):
    """--complete searches fixed points only (--cycles 1) with the work limit --help states."""
    from dynlab.analysis.pwa import MAX_REGIONS

    ds = _run_to_dataset(tmp_path, "equilibria", ["--complete", "--hidden", "3", "--activation", "relu"])
    assert ds.attrs["solve_method"] == "complete" and ds.attrs["cycles"] == 1
    assert ds.attrs["max_regions"] == MAX_REGIONS
    assert DEFAULTS["equilibria"]["max_regions"].render() == str(MAX_REGIONS)
    assert DEFAULTS["equilibria"]["cycles"].render().startswith("1 ")


def test_partition_and_train_defaults_are_what_the_issue_found_wrong(tmp_path, monkeypatch):
    """The two cases the issue names: partition says rnn/relu and runs them; train says 64 units."""
    shown = _normal(ok("partition", "--help").stdout)
    assert _normal("--model [rnn|fastrnn|antisymmetric|rin] Model kind (see `dynlab models`). "
                   "[default: rnn]") in shown
    assert _normal("Activation φ. [default: relu]") in shown
    ds = _run_to_dataset(tmp_path, "partition", ["--steps", "5"])
    assert (ds.attrs["model"], ds.attrs["activation"]) == ("rnn", "relu")
    assert _normal("Hidden-state size D. [default: 2 for --task xor, oscillator; 64 otherwise]") in \
        _normal(ok("train", "--help").stdout)
    assert _run_train(monkeypatch, ["--steps", "5"])["model"].hidden == 64

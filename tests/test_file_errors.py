"""Validated files (issue 19, item 3): weights files, training checkpoints and TOML sweep specs
are read field by field, and every error names the FILE and the FIELD (or the spec's key),
never an option the user did not type.

Each table builds its damaged files from a real, tiny file written by dynlab itself (a trained
checkpoint, ``save_model``, a spec that runs), changes one thing, and checks: exit status 2,
exactly one line on stderr, ``Error: <the option that named the file>: <file>: field '<field>'``
(a spec: ``Error: <file>: <key>:``), no traceback.  The controls check that the untampered
files still load and that a checkpoint still resumes bit for bit.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import dynlab
from conftest import cli_run as run
from dynlab.errors import ParameterError
from dynlab.train import backprop as bp
from dynlab.train.loop import load_checkpoint, resume_training, save_checkpoint, train_model


def _one_error_line(res) -> str:
    """The single stderr line of a refused command (exit 2, no traceback)."""
    err = res.stderr
    assert res.exit_code == 2, (res.exit_code, res.stdout, err, res.exception)
    assert "Traceback" not in err and "Traceback" not in res.stdout, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _arrays(path) -> dict:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _task():
    return dynlab.tasks.make_task("adding", 6, seed=1, n_train=64, n_val=16, n_test=16)


# ============================================================================ checkpoints
#: The run every checkpoint case starts from: an iRNN (η trained in log space, α frozen), a
#: learned h0, a plateau schedule, Adam: every kind of entry a checkpoint can hold.
_RUN = dict(optimiser="adam", lr=1e-2, batch=8, sigma_eps=0.2, record_every=2, seed=3, learn_h0=True,
            plateau=2, clip=1.0)


def _irnn():
    return dynlab.make_model("irnn", 4, 2, K=2, eta=0.4, g0="previous", seed=2)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A real checkpoint after 3 iterations (plus the 5-iteration run it must resume into)."""
    d = tmp_path_factory.mktemp("ckpt")
    half = train_model(_irnn(), _task(), iterations=3, **_RUN)
    return save_checkpoint(d / "ck.npz", half)


def _config(edit):
    def change(a):
        c = json.loads(str(a["train/config"]))
        edit(c)
        a["train/config"] = np.array(json.dumps(c))
    return change


def _set(key, value):
    def change(a):
        a[key] = value
    return change


def _drop(*keys, prefix=None):
    def change(a):
        for k in [k for k in a if k in keys or (prefix is not None and k.startswith(prefix))]:
            del a[k]
    return change


#: (case, change to the arrays, the field the error must name).  The first six are the review's.
CHECKPOINT_CASES = [
    ("bad JSON", _set("train/config", np.array("{not json")), "train/config"),
    ("missing key", _drop("train/iteration"), "train/iteration"),
    ("negative iteration", _set("train/iteration", np.array(-5)), "train/iteration"),
    ("wrong task type", _config(lambda c: c["task"].update(task="nosuch")), "train/config"),
    ("wrong-shaped moment", _set("train/opt/m/U", np.zeros((3, 3))), "train/opt/m/U"),
    ("moments removed", _drop(prefix="train/opt/"), "train/opt/m/U"),
    # more of the same kinds
    ("one moment removed", _drop("train/opt/v/log_eta"), "train/opt/v/log_eta"),
    ("moment of a frozen parameter", _set("train/opt/m/alpha", np.zeros(())), "train/opt/m/alpha"),
    ("complex moment", lambda a: a.update({"train/opt/m/U": a["train/opt/m/U"] + 1j}), "train/opt/m/U"),
    ("non-finite moment", lambda a: a.update({"train/opt/v/W": np.full_like(a["train/opt/v/W"], np.nan)}),
     "train/opt/v/W"),
    ("config not an object", _set("train/config", np.array("[1, 2]")), "train/config"),
    ("config key missing", _config(lambda c: c.pop("batch")), "train/config"),
    ("config batch 0", _config(lambda c: c.update(batch=0)), "train/config"),
    ("config seed a string", _config(lambda c: c.update(seed="3")), "train/config"),
    ("config learn_h0 'maybe'", _config(lambda c: c.update(learn_h0="maybe")), "train/config"),
    ("config freezes an unknown parameter", _config(lambda c: c.update(freeze=["Z"])), "train/config"),
    ("config task steps 0", _config(lambda c: c["task"].update(steps=0)), "train/config"),
    ("config task of other inputs", _config(lambda c: c["task"].update(task="copy", steps=3)), "train/config"),
    ("iteration a float", _set("train/iteration", np.array(2.5)), "train/iteration"),
    ("iteration an array", _set("train/iteration", np.array([3, 3])), "train/iteration"),
    ("optimiser step count ≠ iteration", _set("train/opt_t", np.array(7)), "train/opt_t"),
    ("optimiser name ≠ the run's", _set("train/opt_name", np.array("sgd")), "train/opt_name"),
    ("negative learning rate", _set("train/opt_lr", np.array(-1.0)), "train/opt_lr"),
    ("beta1 out of range", _set("train/opt_beta1", np.array(1.5)), "train/opt_beta1"),
    ("read-out of the wrong shape", _set("train/W_out", np.zeros((2, 4))), "train/W_out"),
    ("read-out of integers", lambda a: a.update({"train/b_out": np.zeros(1, dtype=np.int64)}), "train/b_out"),
    ("h0 removed", _drop("train/h0"), "train/h0"),
    ("plateau counter out of range", _set("train/plateau_bad", np.array(9)), "train/plateau_bad"),
    ("history of another length", lambda a: a.update({"train/history/loss": a["train/history/loss"][:1]}),
     "train/history/loss"),
    ("history iterations beyond the run", _set("train/history/iteration", np.array([2, 99])),
     "train/history/iteration"),
    ("unknown entry", _set("train/extra", np.zeros(2)), "train/extra"),
    ("model: K = 0", _set("__setting__K", np.array(0)), "__setting__K"),
    ("model: array-valued g0", _set("__setting__g0", np.array(["zero", "previous"])), "__setting__g0"),
]


def _tampered(tmp_path, checkpoint, change, name="t.npz"):
    a = _arrays(checkpoint)
    change(a)
    path = tmp_path / name
    np.savez(path, **a)
    return str(path)


@pytest.mark.parametrize("case,change,field", CHECKPOINT_CASES, ids=[c[0] for c in CHECKPOINT_CASES])
def test_tampered_checkpoint_is_refused_naming_file_and_field(tmp_path, checkpoint, case, change, field):
    path = _tampered(tmp_path, checkpoint, change)
    line = _one_error_line(run("train", "--resume", path, "--iterations", 1, "--quiet"))
    assert line.startswith(f"Error: --resume: {path}: field '{field}': "), line
    with pytest.raises(ParameterError) as err:          # the library says the same, on ``resume``
        load_checkpoint(path)
    assert err.value.param == "resume" and f"field '{field}'" in err.value.message


def test_untampered_checkpoint_resumes_bit_for_bit_through_the_cli(tmp_path, checkpoint):
    """The control: the checkpoint every tampered case starts from is accepted, and ``train
    --resume`` continues it exactly as an uninterrupted 5-iteration run."""
    full = train_model(_irnn(), _task(), iterations=5, **_RUN)
    out = str(tmp_path / "more.npz")
    res = run("train", "--resume", checkpoint, "--iterations", 2, "--save-weights", out, "--quiet")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    st = load_checkpoint(out)
    assert st["start"] == 5
    for k, v in full.model.params().items():
        assert np.array_equal(np.asarray(v), np.asarray(st["model"].params()[k])), k
    for k in bp.READOUT:
        assert np.array_equal(full.readout[k], st["readout"][k]), k
    assert np.array_equal(full.h0, st["h0"])
    assert st["optimiser"].t == full.optimiser.t
    for slot, d in full.optimiser.slots.items():
        for key, arr in d.items():
            assert np.array_equal(st["optimiser"].slots[slot][key], arr), (slot, key)
    assert (st["plateau"].best, st["plateau"].bad) == (full.plateau.best, full.plateau.bad)


@pytest.mark.parametrize("name,optimiser,kw", [
    ("rnn", "rmsprop", {}),
    ("lstm", "sgd", {}),
    ("stack", "adam", {"layers": 2, "cell": "gru"}),
])
def test_other_checkpoints_still_resume_bit_for_bit(tmp_path, name, optimiser, kw):
    """The moment checks know each optimiser's slots (SGD without momentum keeps none) and each
    model's trained arrays: real checkpoints of other kinds pass them and resume exactly."""
    def model():
        return dynlab.make_model(name, 3, 2, seed=1, **kw)
    run_kw = dict(optimiser=optimiser, lr=1e-2, batch=4, record_every=2, seed=1)
    full = train_model(model(), _task(), iterations=4, **run_kw)
    path = save_checkpoint(tmp_path / "c.npz", train_model(model(), _task(), iterations=2, **run_kw))
    rest = resume_training(path, 2)
    for k, v in full.model.params().items():
        assert np.array_equal(np.asarray(v), np.asarray(rest.model.params()[k])), k
    for k in bp.READOUT:
        assert np.array_equal(full.readout[k], rest.readout[k]), k


def test_resume_errors_from_the_run_name_the_checkpoint(tmp_path, checkpoint):
    """A value only the checkpoint gave is never blamed on an option: a penalty on a parameter
    the model lacks names the file and train/config's key 'penalty', not a --penalty."""
    path = _tampered(tmp_path, checkpoint, _config(lambda c: c.update(penalty={"Z": [1.0, 0.0]})))
    line = _one_error_line(run("train", "--resume", path, "--iterations", 1))
    assert line.startswith(f"Error: --resume: {path}: field 'train/config': key 'penalty': "), line


# ============================================================================ weights files
@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    irnn = dynlab.save_model(dynlab.make_model("irnn", 4, 2, K=3, seed=0), d / "irnn.npz")
    stack = dynlab.save_model(dynlab.make_model("stack", 3, 2, layers=2, cell="gru", seed=0), d / "stack.npz")
    return {"irnn": irnn, "stack": stack}


#: (case, source file, change, the field the error must name)
WEIGHTS_CASES = [
    ("K = 0", "irnn", _set("__setting__K", np.array(0)), "__setting__K"),
    ("K fractional", "irnn", _set("__setting__K", np.array(2.5)), "__setting__K"),
    ("K an array", "irnn", _set("__setting__K", np.array([1, 2])), "__setting__K"),
    ("unknown activation", "irnn", _set("__setting__activation", np.array("swish")), "__setting__activation"),
    ("array-valued g0", "irnn", _set("__setting__g0", np.array(["zero", "previous"])), "__setting__g0"),
    ("bad g0", "irnn", _set("__setting__g0", np.array("sometimes")), "__setting__g0"),
    ("negative seed", "irnn", _set("__setting__seed", np.array(-3)), "__setting__seed"),
    ("complex setting", "irnn", _set("__setting__leak", np.array(0.1 + 1j)), "__setting__leak"),
    ("unknown setting", "irnn", _set("__setting__nosuch", np.array(1)), "__setting__nosuch"),
    ("complex U", "irnn", lambda a: a.update(U=a["U"] + 1j), "U"),
    ("integer U", "irnn", lambda a: a.update(U=np.ones((4, 4), dtype=np.int64)), "U"),
    ("boolean U", "irnn", lambda a: a.update(U=np.ones((4, 4), dtype=bool)), "U"),
    ("text U", "irnn", lambda a: a.update(U=np.full((4, 4), "a")), "U"),
    ("object U", "irnn", lambda a: a.update(U=np.array([{}], dtype=object)), "U"),
    ("U of the wrong shape", "irnn", _set("U", np.zeros((3, 3))), "U"),
    ("non-finite U", "irnn", _set("U", np.full((4, 4), np.inf)), "U"),
    ("U missing", "irnn", _drop("U"), "U"),
    ("negative eta", "irnn", _set("eta", np.array(-1.0)), "eta"),
    ("unknown parameter", "irnn", _set("Z", np.zeros(3)), "Z"),
    ("unknown model", "irnn", _set("__model__", np.array("nosuch")), "__model__"),
    ("model an array", "irnn", _set("__model__", np.array(["irnn", "rnn"])), "__model__"),
    ("model a number", "irnn", _set("__model__", np.array(3)), "__model__"),
    ("stack: bad cell", "stack", _set("__setting__cell", np.array("tree")), "__setting__cell"),
    ("stack: n_layers 0", "stack", _set("__setting__n_layers", np.array(0)), "__setting__n_layers"),
    ("stack: a layer beyond n_layers", "stack", _set("layer3_b_ih", np.zeros(9)), "layer3_b_ih"),
    ("stack: layer activation", "stack", _set("__setting__layer2_activation", np.array("swish")),
     "__setting__layer2_activation"),
    ("stack: layer weights of the wrong shape", "stack", _set("layer2_W_hh", np.zeros((2, 2))), "layer2_W_hh"),
]


@pytest.mark.parametrize("case,source,change,field", WEIGHTS_CASES, ids=[c[0] for c in WEIGHTS_CASES])
def test_bad_weights_file_names_file_and_field(tmp_path, weights, case, source, change, field):
    a = _arrays(weights[source])
    change(a)
    path = str(tmp_path / "net.npz")
    np.savez(path, **a)
    line = _one_error_line(run("simulate", "--weights", path, "--steps", 3, "--quiet"))
    assert line.startswith(f"Error: --weights: {path}: field '{field}': "), line
    with pytest.raises(ParameterError) as err:
        dynlab.load_model(path)
    assert err.value.param == "weights" and path in err.value.message


def test_good_weights_files_still_load(weights):
    """The control: the untampered files load as the models saved."""
    m = dynlab.load_model(weights["irnn"])
    assert m.name == "irnn" and m.K == 3
    s = dynlab.load_model(weights["stack"])
    assert s.name == "stack" and len(s.layers) == 2


def test_a_bad_checkpoint_model_blames_resume_not_weights(tmp_path, checkpoint):
    """The model inside a checkpoint read by --resume is reported on --resume (was --weights)."""
    path = _tampered(tmp_path, checkpoint, _set("__setting__activation", np.array("swish")))
    line = _one_error_line(run("train", "--resume", path, "--iterations", 1))
    assert line.startswith(f"Error: --resume: {path}: field '__setting__activation': "), line


# ============================================================================ TOML sweep specs
_SPEC = ("analysis = 'gradient_norms'\n[model]\nname = 'irnn'\nhidden = 3\n[input]\nsteps = 5\n"
         "[grid]\nK = [1, 2]\n")

#: (case, spec text or bytes, the key the error must name; None: the file as a whole)
SPEC_CASES = [
    ("region_size 0", "region_size = 0\n" + _SPEC, "region_size"),
    ("region_size a string", "region_size = 'big'\n" + _SPEC, "region_size"),
    ("unknown backend", "backend = 'fortran'\n" + _SPEC, "backend"),
    ("analysis unknown", _SPEC.replace("'gradient_norms'", "'nosuch'"), "analysis"),
    ("analysis a number", _SPEC.replace("'gradient_norms'", "3"), "analysis"),
    ("unknown section", _SPEC + "[modle]\nx = 1\n", "modle"),
    ("section not a table", "grid = 3\n" + _SPEC.replace("[grid]\nK = [1, 2]\n", ""), "grid"),
    ("model hidden a string", _SPEC.replace("hidden = 3", "hidden = '32'"), "model.hidden"),
    ("model hidden 0", _SPEC.replace("hidden = 3", "hidden = 0"), "model.hidden"),
    ("model K 0", _SPEC.replace("[grid]\nK = [1, 2]", "[grid]\neta = [0.1, 0.2]").replace(
        "hidden = 3", "hidden = 3\nK = 0"), "model.K"),
    ("model activation", _SPEC.replace("hidden = 3", "hidden = 3\nactivation = 'swish'"), "model.activation"),
    ("model name", _SPEC.replace("'irnn'", "'nosuch'"), "model.name"),
    ("input kind", _SPEC.replace("steps = 5", "steps = 5\nkind = 'zigzag'"), "input.kind"),
    ("input steps 0", _SPEC.replace("steps = 5", "steps = 0"), "input.steps"),
    ("grid K 0", _SPEC.replace("K = [1, 2]", "K = [0, 2]"), "grid.K"),
    ("grid K not a list", _SPEC.replace("K = [1, 2]", "K = 2"), "grid.K"),
    ("grid unknown setting", _SPEC + "foo = [1]\n", "grid.foo"),
    ("repeat seeds -1", _SPEC + "[repeat]\nseeds = -1\n", "repeat.seeds"),
    ("repeat unknown key", _SPEC + "[repeat]\ncount = 2\n", "repeat.count"),
    ("zip group not a table", _SPEC + "[zip]\nschedule = 3\n", "zip.schedule"),
    ("not TOML", _SPEC + "[grid\n", None),
    ("no analysis", _SPEC.replace("analysis = 'gradient_norms'\n", ""), None),
    ("Latin-1 bytes", _SPEC.replace("'irnn'", "'irnn'  # café").encode("latin-1"), None),
    ("UTF-16", _SPEC.encode("utf-16"), None),
]


@pytest.mark.parametrize("case,text,key", SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
def test_bad_spec_file_names_file_and_key(tmp_path, case, text, key):
    path = tmp_path / "grad.toml"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    store = tmp_path / "s.zarr"
    line = _one_error_line(run("sweep", path, "--out", store))
    assert line.startswith(f"Error: {path}: {key}: " if key else f"Error: {path}: "), line
    for option in ("--region-size", "--backend", "--K", "--model", "--hidden", "--steps", "--activation"):
        assert option not in line, line
    if isinstance(text, bytes):
        assert "byte offset" in line
    assert not os.path.exists(store)


def test_options_given_on_the_command_line_keep_their_name(tmp_path):
    """--backend given on the command line is blamed as --backend, the file's is not."""
    path = tmp_path / "grad.toml"
    path.write_text(_SPEC)
    line = _one_error_line(run("sweep", path, "--out", tmp_path / "s.zarr", "--backend", "cupy"))
    assert line.startswith("Error: --backend: "), line


def test_good_spec_file_still_runs(tmp_path):
    path = tmp_path / "grad.toml"
    path.write_text(_SPEC)
    res = run("sweep", path, "--quiet")
    assert res.exit_code == 0, (res.stdout, res.stderr)


# ============================================================================ --compare
@pytest.mark.parametrize("command", ["gradients", "phase"])
def test_compare_implicit_names_compare(command):
    line = _one_error_line(run(command, "--compare", "rnn,implicit", "--steps", 5, "--hidden", 2))
    assert line.startswith("Error: --compare: implicit is a static equilibrium model"), line

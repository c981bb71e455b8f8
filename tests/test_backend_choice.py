"""Issue 43: one backend object from the entry point down — training honours the backend the
user chose (or refuses it in one line), provenance names the backend that ran."""
import contextlib

import numpy as np
import pytest

import dynlab
from dynlab import config
from dynlab.errors import ParameterError
from dynlab.train.loop import train_model


def _task():
    return dynlab.tasks.make_task("adding", 10, seed=1, n_train=64, n_val=16, n_test=16)


def _model():
    return dynlab.make_model("rnn", 5, 2, seed=3)


@pytest.mark.parametrize("name", ["numpy", "numba"])
def test_training_names_the_backend_that_ran(name):
    res = train_model(_model(), _task(), iterations=4, lr=1e-2, batch=8, record_every=2, seed=0, progress=False,
                      backend=name)
    assert res.history.attrs["backend"] == name


def test_numpy_and_numba_train_alike():
    kw = dict(iterations=6, lr=1e-2, batch=8, record_every=2, seed=0, sigma_eps=0.1, progress=False)
    ref = train_model(_model(), _task(), backend="numpy", **kw).history
    fast = train_model(_model(), _task(), backend="numba", **kw).history
    for v in ("loss", "val_loss", "grad_norm", "jac_norm"):
        np.testing.assert_allclose(fast[v].values, ref[v].values, rtol=1e-10, atol=0, err_msg=v)


def test_training_uses_the_chosen_backend_object(monkeypatch):
    """The reference's training passes run when backend="numpy" (numba's never)."""
    from dynlab.backends import get_backend

    seen = []
    ref, fast = get_backend("numpy"), get_backend("numba")
    for be in (ref, fast):
        orig = type(be).train_forward

        def spy(self, *a, _orig=orig, **k):
            seen.append(self.name)
            return _orig(self, *a, **k)
        monkeypatch.setattr(type(be), "train_forward", spy)
    train_model(_model(), _task(), iterations=2, lr=1e-2, batch=8, record_every=2, seed=0, progress=False,
                backend="numpy")
    assert seen and set(seen) == {"numpy"}


def test_backend_without_training_passes_is_refused_before_work(monkeypatch):
    from dynlab.backends.numba import NumbaBackend

    class NoTraining(NumbaBackend):
        name = "no-training"

        def supports(self, op, form):
            return op not in ("train_forward", "train_backward") and super().supports(op, form)

        def train_forward(self, *a, **k):       # pragma: no cover - must not be reached
            raise AssertionError("work started")

    with pytest.raises(ParameterError) as err:
        train_model(_model(), _task(), iterations=2, batch=8, progress=False, backend=NoTraining())
    assert err.value.param == "backend"
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- the CLI reads the registry
@contextlib.contextmanager
def _registered(name, target):
    """``name`` registered for the block; the registry, BACKENDS and the instances as they were after."""
    import dynlab.backends as B

    before = (dict(B._REGISTRY), B.BACKENDS, dict(B._INSTANCES))
    B.register_backend(name, target)
    try:
        yield
    finally:
        B._REGISTRY.clear()
        B._REGISTRY.update(before[0])
        B.BACKENDS = before[1]
        B._INSTANCES.clear()
        B._INSTANCES.update(before[2])


@pytest.fixture
def xyz_backend():
    """``test-xyz`` registered for one test."""
    with _registered("test-xyz", "xyz_backend:XyzBackend"):
        yield


def test_cli_backend_registered_at_run_time_is_a_choice(xyz_backend, tmp_path):
    import xarray as xr
    from click.testing import CliRunner

    from dynlab.cli import main
    from xyz_backend import XyzBackend

    XyzBackend.simulations = 0
    out = tmp_path / "s.nc"
    r = CliRunner().invoke(main, ["simulate", "--model", "rnn", "--hidden", "3", "--steps", "5", "--backend",
                                  "test-xyz", "--data", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    assert XyzBackend.simulations >= 1
    with xr.open_dataset(out) as ds:
        assert ds.attrs["backend"] == "test-xyz"
    help_text = CliRunner().invoke(main, ["simulate", "--help"]).output
    assert "test-xyz" in help_text


def test_cli_backend_choices_follow_the_registry():
    from click.testing import CliRunner

    import dynlab.backends as B
    from dynlab.cli import main

    assert "test-xyz" not in B.BACKENDS           # the fixture above left the registry as it was
    r = CliRunner().invoke(main, ["simulate", "--backend", "test-xyz"])
    assert r.exit_code == 2 and "--backend" in r.output and len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(main, ["simulate", "--backend", "reference", "--steps", "3", "--quiet"])  # an alias
    assert r.exit_code == 0, r.output


# ---------------------------------------------------------------- one lookup per public call
def _count_lookups(monkeypatch):
    import dynlab.backends as B

    n = [0]
    orig = B._name

    def counted(backend):
        n[0] += 1
        return orig(backend)
    monkeypatch.setattr(B, "_name", counted)
    return n


@pytest.mark.parametrize("backend", [None, "numpy", "numba"])
def test_gradient_norms_looks_the_backend_up_once(monkeypatch, backend):
    m = dynlab.make_model("irnn", 3, 1, K=2, seed=0)
    x = np.zeros((12, 1))
    dynlab.gradient_norms(m, x, backend=backend)        # compiled, cached
    n = _count_lookups(monkeypatch)
    ds = dynlab.gradient_norms(m, x, backend=backend)
    assert n[0] == 1
    assert ds.attrs["backend"] == (backend or config.DEFAULT_BACKEND)


@pytest.mark.parametrize("batched", [True, False])
def test_sweep_looks_the_backend_up_once(monkeypatch, batched):
    kw = dict(fixed={"model": "irnn", "hidden": 3, "steps": 12}, seeds=1, batched=batched, progress=False)
    dynlab.sweep("gradient_norms", {"K": [1, 2]}, **kw)
    n = _count_lookups(monkeypatch)
    dynlab.sweep("gradient_norms", {"K": [1, 2], "eta": [0.1, 0.5]}, **kw)
    assert n[0] == 1


def test_cli_gradients_looks_the_backend_up_once(monkeypatch):
    from dynlab.commands.gradients import gradients_dataset
    from dynlab.spec import GradientSpec, RunSpec

    spec = GradientSpec(RunSpec(model="irnn", hidden=3, steps=12), K_values=(1, 2), lyapunov=True)
    gradients_dataset(spec)
    n = _count_lookups(monkeypatch)
    gradients_dataset(spec)
    assert n[0] == 1


# ---------------------------------------------------------------- a model's step on the caller's backend
def test_model_step_takes_the_callers_backend():
    m = dynlab.make_model("gru", 4, 2, seed=1)
    rng = np.random.default_rng(0)
    S, X = rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    ref = m.step(S, X)
    np.testing.assert_allclose(m.step(S, X, backend="numba"), ref, rtol=1e-12, atol=1e-14)
    J, Jx = m.step_jacobian(S, X, inputs=True)
    J2, Jx2 = m.step_jacobian(S, X, inputs=True, backend="numba")
    np.testing.assert_allclose(J2, J, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(Jx2, Jx, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- provenance of calls without backend=
@pytest.fixture(params=["numpy", "numba"])
def default_backend(request, monkeypatch):
    monkeypatch.setattr(config, "DEFAULT_BACKEND", request.param)
    return request.param


def test_implicit_training_names_the_backend_that_ran(default_backend):
    from dynlab.train.implicit import train_implicit

    _, ds = train_implicit("xor", hidden=2, iterations=3, seed=0, eval_every=3)
    assert ds.attrs["backend"] == default_backend


def test_figure_training_histories_name_the_backend_that_ran(default_backend):
    from dynlab.figures._training import histories

    task = dynlab.tasks.make_task("adding", 8, seed=1, n_train=32, n_val=8, n_test=8)
    ds = histories(task, [("rnn", "rnn", {}, {})], iterations=2, lr=1e-2, batch=8, record_every=2, hidden=4)
    assert ds.attrs["backend"] == default_backend


def test_figure_recipe_names_the_backend_that_ran(default_backend):
    """implicit-fig1's neuron is solved by the default backend's implicit_solve: the attrs name it
    (a literal "numpy" before; the MASO recipes' was a literal "numba")."""
    from dynlab.figures.implicit import fig1_derivative as recipe

    assert recipe.compute(True).attrs["backend"] == default_backend


# ---------------------------------------------------------------- dynlab train --backend
@pytest.mark.parametrize("name", ["numpy", "numba"])
def test_cli_train_runs_on_the_chosen_backend(tmp_path, name):
    import xarray as xr
    from click.testing import CliRunner

    from dynlab.cli import main

    out = tmp_path / "h.nc"
    r = CliRunner().invoke(main, ["train", "--task", "adding", "--steps", "10", "--model", "rnn", "--hidden", "5",
                                  "--iterations", "4", "--batch", "8", "--record-every", "2", "--backend", name,
                                  "--data", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    with xr.open_dataset(out) as ds:
        assert ds.attrs["backend"] == name


def test_cli_train_implicit_runs_on_the_chosen_backend(tmp_path, default_backend):
    import xarray as xr
    from click.testing import CliRunner

    from dynlab.cli import main

    other = {"numpy": "numba", "numba": "numpy"}[default_backend]
    out = tmp_path / "h.nc"
    r = CliRunner().invoke(main, ["train", "--task", "xor", "--model", "implicit", "--iterations", "3",
                                  "--backend", other, "--data", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    with xr.open_dataset(out) as ds:
        assert ds.attrs["backend"] == other


def test_cli_train_on_a_backend_registered_at_run_time(xyz_backend, tmp_path):
    import xarray as xr
    from click.testing import CliRunner

    from dynlab.cli import main

    out = tmp_path / "h.nc"
    r = CliRunner().invoke(main, ["train", "--task", "adding", "--steps", "10", "--model", "rnn", "--hidden", "5",
                                  "--iterations", "2", "--batch", "8", "--record-every", "2", "--backend", "test-xyz",
                                  "--data", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    with xr.open_dataset(out) as ds:
        assert ds.attrs["backend"] == "test-xyz"


def test_cli_train_refuses_a_backend_that_cannot_train_in_one_line():
    from click.testing import CliRunner

    from dynlab.cli import main

    with _registered("test-no-training", "xyz_backend:NoTrainingBackend"):
        r = CliRunner().invoke(main, ["train", "--task", "adding", "--steps", "10", "--hidden", "5", "--iterations",
                                      "2", "--batch", "8", "--backend", "test-no-training", "--quiet"])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "--backend" in lines[0], r.output


# ---------------------------------------------------------------- --model reads the model registry
def test_cli_model_added_to_the_registry_at_run_time_is_a_choice(monkeypatch, tmp_path):
    import xarray as xr
    from click.testing import CliRunner

    import dynlab.models as M
    from dynlab.cli import main

    class XyzRNN(M.RNN):
        name = "test-xyz-rnn"

    r = CliRunner().invoke(main, ["simulate", "--model", "test-xyz-rnn", "--steps", "3", "--quiet"])
    assert r.exit_code == 2 and "--model" in r.output          # not registered yet: refused in one line
    monkeypatch.setitem(M.MODELS, "test-xyz-rnn", XyzRNN)
    out = tmp_path / "s.nc"
    r = CliRunner().invoke(main, ["simulate", "--model", "test-xyz-rnn", "--hidden", "3", "--steps", "5",
                                  "--data", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    with xr.open_dataset(out) as ds:
        assert ds.attrs["model"] == "test-xyz-rnn"
    assert "test-xyz-rnn" in CliRunner().invoke(main, ["simulate", "--help"]).output
    from dynlab.cli.options import _parse_compare

    assert _parse_compare(None, None, "rnn,test-xyz-rnn") == ("rnn", "test-xyz-rnn")


# ---------------------------------------------------------------- one look-up for every long public call
def _backend_kw(func, backend):
    """{"backend": backend} where ``func`` takes it (the host solvers may not)."""
    import inspect

    return {"backend": backend} if "backend" in inspect.signature(func).parameters else {}


def _public_calls():
    m = dynlab.make_model("irnn", 3, 1, K=2, seed=0)
    g = dynlab.make_model("gru", 3, 1, seed=0)
    r = dynlab.make_model("rnn", 3, 1, activation="relu", seed=0)
    x = np.full((12, 1), 0.1)
    return {
        "simulate": lambda b: dynlab.simulate(m, x, backend=b),
        "gradient_norms": lambda b: dynlab.gradient_norms(m, x, backend=b),
        "lyapunov": lambda b: dynlab.lyapunov(m, x, backend=b),
        "jacobians": lambda b: dynlab.jacobians(m, x, backend=b),
        "equilibrium": lambda b: dynlab.equilibrium(m, x[0], **_backend_kw(dynlab.equilibrium, b)),
        "partition": lambda b: dynlab.partition(r, np.zeros((2, 5, 1)), backend=b),
        "spectrum": lambda b: dynlab.spectrum(m, x, backend=b),
        "fixed_points": lambda b: dynlab.fixed_points(g, np.zeros(1), n_starts=8, seed=0,
                                                      **_backend_kw(dynlab.fixed_points, b)),
        "train_model": lambda b: train_model(dynlab.make_model("rnn", 3, 2, seed=0), _task(), iterations=2, batch=8,
                                             record_every=2, progress=False, backend=b),
    }


@pytest.mark.parametrize("name", sorted(_public_calls()))
@pytest.mark.parametrize("backend", [None, "numpy"])
def test_every_public_call_looks_the_backend_up_once(monkeypatch, name, backend):
    call = _public_calls()[name]
    call(backend)                                   # compiled, cached
    n = _count_lookups(monkeypatch)
    call(backend)
    assert n[0] == 1, f"{name}: {n[0]} registry look-ups"
# ---------------------------------------------------------------- the kernel tables
def _table_backends():
    from dynlab.backends.gpu import GPUBackend
    from dynlab.backends.numba import NumbaBackend
    from dynlab.backends.reference import ReferenceBackend

    return [ReferenceBackend(), NumbaBackend(), GPUBackend()]   # the GPU's tables need no device


def test_the_backends_kinds_are_the_forms():
    from dynlab.backends.base import SEQUENCE_KINDS
    from dynlab.models.forms import FORMS

    assert SEQUENCE_KINDS == frozenset(FORMS)


def test_kernel_tables_are_keyed_by_operations_and_sequence_kinds():
    from dynlab.backends.base import OPERATIONS, sequence_kinds

    for be in _table_backends():
        assert set(be.KERNELS) <= set(OPERATIONS), (be.name, set(be.KERNELS) - set(OPERATIONS))
        for op, table in be.KERNELS.items():
            assert set(table) <= sequence_kinds(), (be.name, op, set(table) - sequence_kinds())
            assert all(callable(fn) for fn in table.values()), (be.name, op)


def test_supports_and_kernel_read_the_tables():
    """One lookup: ``kernel(op, form)`` is the table's entry where ``supports`` says yes, else the
    one-line ParameterError naming the backend, the operation, the kind and the kinds served."""
    import dynlab as dl

    forms = [dl.make_model(name, 3, 2, seed=0).form() for name in ("rnn", "irnn", "gru", "lstm")]
    forms += [dl.make_model("ctrnn", 3, 2, seed=0, method="euler").form(),
              dl.make_model("stack", 3, 2, seed=0, cell="lstm", layers=2).form()]
    for be in _table_backends():
        for op, table in be.KERNELS.items():
            for f in forms:
                assert be.supports(op, f) == (f.kind in table and all(l.kind in table for l in getattr(f, "layers", ()))), \
                    (be.name, op, f.kind)
                if be.supports(op, f):
                    assert be.kernel(op, f) is table[f.kind]
                    continue
                with pytest.raises(ParameterError) as err:
                    be.kernel(op, f)
                msg = str(err.value)
                assert err.value.param == "backend" and "\n" not in msg
                assert f"{be.name} has no {op} for a {f.kind} form" in msg, msg
                if f.kind not in table:
                    assert all(k in msg for k in table), msg


def test_numba_tables_name_what_each_kind_runs():
    """The numba backend's tables, as the tests elsewhere rely on them: training for every kind
    but the CTRNN, the reverse pass and the partition for one-line cells (a stack of them for the
    partition), the sweep's tangents for cells and iRNNs."""
    from dynlab.backends.numba import NumbaBackend

    K = NumbaBackend.KERNELS
    assert set(K["train_forward"]) == set(K["train_backward"]) == {"cell", "irnn", "gru", "lstm", "stack"}
    assert set(K["reverse_cotangents"]) == {"cell"} and set(K["partition_trace"]) == {"cell", "stack"}
    assert set(K["sweep_gradients"]) == {"cell", "irnn"}
    assert set(K["simulate"]) == set(K["jacobians"]) == set(K["gradient_flow"]) == {"cell", "irnn", "ctrnn", "gru",
                                                                                   "lstm", "stack"}


def test_gpu_refuses_scipy_ctrnn_for_every_operation_naming_the_method():
    import dynlab as dl
    from dynlab.backends.base import OPERATIONS
    from dynlab.backends.gpu import GPUBackend

    be = GPUBackend()
    f = dl.make_model("ctrnn", 3, 2, seed=0, method="RK45").form()
    assert not any(be.supports(op, f) for op in OPERATIONS)
    with pytest.raises(ParameterError) as err:
        be.kernel("simulate", f)
    assert "cupy has no simulate for a ctrnn form" in str(err.value) and "RK45" in str(err.value)
    assert be.supports("simulate", dl.make_model("ctrnn", 3, 2, seed=0, method="rk4").form())


@pytest.mark.parametrize("name", ["numpy", "numba"])
def test_gated_equilibria_run_their_step_jacobians_on_the_chosen_backend(monkeypatch, name):
    from dynlab.backends import get_backend

    g = dynlab.make_model("lstm", 3, 1, seed=2)
    seen = []
    for be in (get_backend("numpy"), get_backend("numba")):
        orig = type(be).jacobians

        def spy(self, *a, _orig=orig, **k):
            seen.append(self.name)
            return _orig(self, *a, **k)
        monkeypatch.setattr(type(be), "jacobians", spy)
    eq = dynlab.equilibrium(g, np.zeros(1), backend=name)
    fp = dynlab.fixed_points(g, np.zeros(1), n_starts=4, seed=0, backend=name)
    assert eq.attrs["backend"] == fp.attrs["backend"] == name
    assert seen and set(seen) == {name}

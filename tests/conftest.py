"""Shared fixtures and model cases for the dynlab tests.

``MODEL_CASES`` builds the common battery's model variants (``tests/battery.py``) the simulation
tests sweep over: name → ``build(activation, T)``.  Weights are kept small (weight_scale 0.5; 0.1
for the RIN, whose recurrence is U + I) so that even the unbounded activations (identity, relu,
abs, leaky-relu) keep the states of a T ≈ 40 run of moderate size: then the kernels differ from
each other and from tests/naive.py only by summation order, ≈ 1e-16 relative per step.

``kernel_path`` runs one test on each of the three kernel families: the NumPy reference,
the numba backend's jitted loops (``VECTORISE_MIN_WORK`` huge) and its vectorised BLAS kernel
(``VECTORISE_MIN_WORK`` = 0).

Which dynlab is tested.  The README's test command, ``pytest -q --import-mode=importlib`` (the
``pytest`` script: ``python -m pytest`` would put the working directory first on sys.path),
imports the *installed* dynlab; with an editable install (``pip install -e ".[test]"``) that is
the checkout itself.  Only this folder is put on sys.path (for ``naive``, ``naive_maso`` and
``conftest``).  Every test runs in an empty scratch directory, so that the processes the tests
start (``sys.executable -m dynlab.cli``, ``python -c``, the ``dynlab`` script), which put their
working directory first on sys.path, import that same dynlab; the session stops at once if a
started process would import another one.  ``DYNLAB_TEST_INSTALLED=1`` (set by ``.ci/run``)
also stops it when dynlab is imported from this checkout rather than from site-packages.  The
pytest header names the dynlab under test.  ``DYNLAB_COMPILE_NOTICE=0``: see below.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from dynlab.backends.numba import bptt as nb_bptt
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # so tests can `import naive`

# The CLI's first-run notice (dynlab/_compile_notice.py) is off in the tests, so that a command's
# output is the same with a cold Numba cache (a fresh CI install) and a warm one;
# tests/test_compile_notice.py turns it on where it is tested.
os.environ["DYNLAB_COMPILE_NOTICE"] = "0"
# Long library calls are quiet in the tests (no progress bars, dynlab.progress); the tests of the
# bars lift it where they test them.
os.environ["DYNLAB_QUIET"] = "1"

import dynlab  # noqa: E402
import dynlab.config  # noqa: E402

#: The checkout the tests belong to (the folder above tests/).
CHECKOUT = os.path.realpath(os.path.join(os.path.dirname(__file__), os.pardir))


def benchmarks_module(name: str):
    """``benchmarks.<name>`` from this checkout, loaded by path: the checkout is not on sys.path
    (the tests import the installed dynlab, see above), and the package is registered under its
    own name so that its modules' relative imports work."""
    import importlib
    import importlib.util
    import sys

    if "benchmarks" not in sys.modules:
        folder = os.path.join(CHECKOUT, "benchmarks")
        spec = importlib.util.spec_from_file_location("benchmarks", os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])
        module = importlib.util.module_from_spec(spec)
        sys.modules["benchmarks"] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"benchmarks.{name}")


def gradients_per_weight_chunk(monkeypatch, model, readout, x, target, h0, chunks=(1, 4, 100)) -> list:
    """``loss_and_grads``'s gradients (loss ``mse-seq``) with ``bp.WEIGHT_CHUNK_STEPS`` set to
    each of ``chunks`` in turn: the backward loops sum parameter gradients a chunk of steps at a
    time, so a step dropped or counted twice at a chunk's edge shows as an O(1) difference."""
    from dynlab.train import backprop as bp

    runs = []
    for chunk in chunks:
        monkeypatch.setattr(nb_bptt, "WEIGHT_CHUNK_STEPS", chunk)
        runs.append(bp.loss_and_grads(model, readout, x, target, loss="mse-seq", h0=h0)[1])
    return runs


def check_short_cotangents(tape, T: int, B: int, n: int) -> None:
    """``backward(tape, dL_dH[-k:])`` means the last k steps' cotangents, the rest zero (what a
    loss at the end passes, k = 1): bitwise the gradients, ∂L/∂h_0 and ∂L/∂h_1 of the zero-padded
    (T, B, n) array, since adding a zero row changes no bit.  The rows must land on their own
    steps: the same rows one step earlier give other gradients (so the check can fail).  Wrong
    shapes raise a ParameterError naming dL_dH."""
    from dynlab.errors import ParameterError
    from dynlab.train import backprop as bp

    rows = np.random.default_rng(2).standard_normal((2, B, n))
    for k in (1, 2):
        full = np.zeros((T, B, n))
        full[T - k:] = rows[2 - k:]
        short_g, short_h0, short_h1 = bp.backward(tape, rows[2 - k:])
        full_g, full_h0, full_h1 = bp.backward(tape, full)
        for name in full_g:
            np.testing.assert_array_equal(short_g[name], full_g[name], err_msg=f"k = {k}: {name}")
        np.testing.assert_array_equal(short_h0, full_h0)
        np.testing.assert_array_equal(short_h1, full_h1)
    early = np.zeros((T, B, n))
    early[T - 3:T - 1] = rows
    early_g = bp.backward(tape, early)[0]
    assert any(not np.allclose(early_g[name], short_g[name], rtol=1e-6, atol=0) for name in short_g)
    for bad in (np.zeros((T + 1, B, n)), np.zeros((0, B, n)), np.zeros((1, B + 1, n)), np.zeros((1, B, n + 1)),
                np.zeros((B, n))):
        with pytest.raises(ParameterError, match="dL_dH"):
            bp.backward(tape, bad)


def dynlab_location() -> str:
    """The folder of the dynlab package this process imports."""
    if dynlab.__file__ is None:   # a namespace package: a folder without __init__.py
        return os.path.realpath(list(dynlab.__path__)[0])
    return os.path.realpath(os.path.dirname(dynlab.__file__))


def from_checkout(path: str) -> bool:
    """Whether the package folder ``path`` is this checkout's source (``CHECKOUT/dynlab``); a
    virtual environment inside the checkout (``.venv``) holds an installed copy."""
    return os.path.realpath(path) == os.path.join(CHECKOUT, "dynlab")


def tested_line() -> str:
    """``dynlab VERSION from PATH: installed|this checkout`` (``.ci/run`` reads it)."""
    where = dynlab_location()
    kind = "this checkout (an editable install, or the working directory)" if from_checkout(where) \
        else "installed, not this checkout"
    return f"dynlab {dynlab.__version__} from {where}: {kind}"


def pytest_report_header(config):
    return tested_line()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(tested_line())   # shown with -q too, where the header is not


def pytest_sessionstart(session):
    """Stop before any test when the wrong dynlab would be tested (module docstring)."""
    where = dynlab_location()
    if dynlab.__file__ is None:
        pytest.exit(f"dynlab is imported from {where}, a folder without __init__.py: the remains of an "
                    f"uninstalled copy (e.g. Numba's cache files in its __pycache__ folders); delete that "
                    f"folder and reinstall", returncode=3)
    if os.environ.get("DYNLAB_TEST_INSTALLED") == "1" and from_checkout(where):
        pytest.exit(f"DYNLAB_TEST_INSTALLED=1 but dynlab is imported from this checkout ({where}): install it "
                    f"without -e and run the `pytest` script, not `python -m pytest`", returncode=3)
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        child = subprocess.run([sys.executable, "-c", "import dynlab, os; print(os.path.dirname(dynlab.__file__))"],
                               cwd=scratch, capture_output=True, text=True, timeout=120)
    theirs = os.path.realpath(child.stdout.strip()) if child.returncode == 0 else f"nothing ({child.stderr.strip()})"
    if theirs != where:
        pytest.exit(f"the tests import dynlab from {where}, but the processes they start would import {theirs}: "
                    f"install the checkout (pip install -e \".[test]\" to test your working copy) and run the "
                    f"`pytest` script from any directory", returncode=3)


#: Tests that look back over the whole session and so run after every other collected test.
RUN_LAST = ("test_kernel_signatures.py::test_no_kernel_was_compiled_twice_in_this_session",)


def pytest_collection_modifyitems(session, config, items):
    """Move the ``RUN_LAST`` tests to the end of the session (stable order otherwise)."""
    last = [it for it in items if it.nodeid.endswith(RUN_LAST)]
    if last:
        items[:] = [it for it in items if it not in last] + last


@pytest.fixture(scope="session", autouse=True)
def scratch_cwd(tmp_path_factory):
    """Run every test in an empty directory (module docstring: started processes import the
    dynlab under test, and nothing is written into the checkout)."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(before)

D_HIDDEN = 4
D_IN = 2

import battery  # noqa: E402

#: The battery's one-line cells, iRNN and fixed-step CTRNN cases (tests/battery.py), as
#: ``build(activation, T)`` at D_HIDDEN × D_IN (the files that sweep the activation: the battery's
#: ``irnn-K1-identity`` is ``irnn-K1-zero-plus`` at another η, so it is left out of the sweep).
MODEL_CASES = {name: (lambda act, T, name=name: battery.build(name, D_HIDDEN, D_IN, T, activation=act))
               for name in battery.names("cell", "irnn", "ctrnn", exclude=("irnn-K1-identity",))}

ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity", "leaky-relu", "abs")

KERNEL_PATHS = {
    # name: (backend, VECTORISE_MIN_WORK, expected Dataset attr "kernel")
    "numpy": ("numpy", None, "numpy"),
    "numba-loops": ("numba", 1 << 62, "loops"),
    "numba-vectorised": ("numba", 0, "batched"),
}


def inputs(B, T, d=D_IN, seed=0, scale=0.7):
    """Moderate Gaussian inputs, (T, d) for B=None or (B, T, d)."""
    shape = (T, d) if B is None else (B, T, d)
    return scale * np.random.default_rng(seed).standard_normal(shape)


@pytest.fixture(params=list(KERNEL_PATHS))
def kernel_path(request, monkeypatch):
    """(backend, expected kernel name); the numba threshold is patched to force the path."""
    backend, threshold, kernel = KERNEL_PATHS[request.param]
    if threshold is not None:
        monkeypatch.setattr(dynlab.config, "VECTORISE_MIN_WORK", threshold)
    return backend, kernel


def force_path(monkeypatch, name):
    """Patch the numba threshold for the named path; return (backend, expected kernel)."""
    backend, threshold, kernel = KERNEL_PATHS[name]
    if threshold is not None:
        monkeypatch.setattr(dynlab.config, "VECTORISE_MIN_WORK", threshold)
    return backend, kernel


def cli_run(*args):
    """Invoke ``dynlab ARGS`` in-process (every argument str()-ed); returns click's Result."""
    from click.testing import CliRunner

    from dynlab.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def cli_ok(*args):
    """``cli_run`` that must exit 0 (the output and exception are shown when it does not)."""
    result = cli_run(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


_QUICK_FIGURES: dict = {}


def quick_figure_dataset(name: str):
    """A copy of the gallery recipe ``name``'s quick Dataset, computed once per test session: the
    files that check recipes (test_figures.py, test_figures_mutation.py) share it."""
    from dynlab.figures import get

    if name not in _QUICK_FIGURES:
        _QUICK_FIGURES[name] = get(name).compute(True)
    return _QUICK_FIGURES[name].copy(deep=True)

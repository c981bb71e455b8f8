"""BLAS thread limits: the numba backend's policy, in force inside every hot loop of a public
call, restored afterwards, nestable, public threadpoolctl only.

The numba backend runs every public call (``with backend:``) with BLAS on
``config.NUMBA_BLAS_THREADS`` threads (``dynlab.backends.numba.threads``): its loops of small BLAS
products (training, BPTT, spectra, Lyapunov, gradients, equilibria, continuation, MASO reverse
passes, sweep regions, implicit training) stall on BLAS's own threads.  Each case below starts
from BLAS on 2 threads, replaces a function the path calls inside its loop by a spy that reads
the BLAS thread counts from threadpoolctl, runs the public call, and checks that the spy saw the
limit — and that the 2 threads are back afterwards.  The reference backend leaves them alone.
Not a timing test.
"""
from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest

import dynlab as dl
from dynlab import config
from dynlab.backends.numba.threads import limit_blas_threads

threadpoolctl = pytest.importorskip("threadpoolctl")
import scipy.linalg.cython_blas  # noqa: E402,F401  (loaded first, so that threadpoolctl sees scipy's BLAS)


def blas_counts() -> list[int]:
    """The thread counts of every loaded BLAS (NumPy's and scipy's OpenBLAS, …), sorted, unique."""
    info = threadpoolctl.ThreadpoolController().info()
    return sorted({lib["num_threads"] for lib in info if lib["user_api"] == "blas"})


@pytest.fixture
def two_threads():
    """BLAS on 2 threads for the test (skipped where BLAS cannot run 2)."""
    assert blas_counts(), (f"threadpoolctl {threadpoolctl.__version__} finds no BLAS next to NumPy "
                           f"{np.__version__}: dynlab could not limit its threads (setup.cfg's floor is too low)")
    with threadpoolctl.ThreadpoolController().limit(limits=2, user_api="blas"):
        if blas_counts() != [2]:
            pytest.skip(f"BLAS runs {blas_counts()} threads here, not 2: a limit to 1 cannot be told apart")
        yield
    assert blas_counts() != [], "no BLAS found"


def spy(monkeypatch, owner, name: str, seen: list):
    """Replace ``owner.name`` by a wrapper that records the BLAS thread counts at each call."""
    original = getattr(owner, name)

    def recording(*args, **kwargs):
        seen.append(blas_counts())
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording)


# ---------------------------------------------------------------------------- the paths

def _irnn(D=4, K=3, d=1):
    return dl.make_model("irnn", D, d, K=K, eta=0.5, seed=0)


def _walk(T=30, B=1):
    return dl.tasks.random_walk(steps=T, inputs=1, variance=2.0, batch=B, seed=0)


def _loss_and_grads():
    from dynlab.train import backprop as bp

    m = dl.make_model("irnn", 4, 2, K=3, eta=0.5, seed=0)
    x, y = dl.tasks.adding_problem(20, 8, seed=0)
    return lambda: bp.loss_and_grads(m, bp.init_readout(4, 1, seed=0), x, y, loss="mse")


def _backward():
    from dynlab.train import backprop as bp

    tape = bp.forward(_irnn(d=2), np.random.default_rng(0).standard_normal((8, 20, 2)))
    ext = np.zeros(tape.H[1:].shape)
    ext[-1] = 1.0
    return lambda: bp.backward(tape, ext)


def _train_model():
    task = dl.tasks.make_task("adding", 20, seed=0, n_train=64, n_val=16, n_test=16)
    m = dl.make_model("irnn", 4, 2, K=3, eta=0.5, seed=0)
    return lambda: dl.train_model(m, task, iterations=2, batch=8, record_every=2, progress=False)


def _train_implicit():
    return lambda: dl.train_implicit("xor", hidden=2, iterations=3, seed=0)


def _templates():
    rng = np.random.default_rng(0)
    m = dl.make_model("rnn", 4, 1, activation="relu", seed=0)
    return lambda: dl.templates(m, rng.uniform(0, 1, (2, 10, 1)), rng.standard_normal((3, 4)))


def _sweep():
    return lambda: dl.sweep("lyapunov", {"weight_scale": [0.5, 1.0]}, fixed={"model": "rnn", "hidden": 3, "steps": 20})


#: (path, where the spy goes, the function it replaces, the call)
CASES = [
    ("loss_and_grads: taped forward", "dynlab.backends.numba.bptt", "_forward_irnn", _loss_and_grads),
    ("backward: BPTT", "dynlab.backends.numba.bptt", "_backward_irnn", _backward),
    ("train_model: each iteration", "dynlab.backends.numba.bptt", "forward_irnn", _train_model),
    ("train_implicit: each iteration", "dynlab.analysis.implicit", "implicit_vjp", _train_implicit),
    ("spectrum: eigenvalues", "dynlab.analysis.spectra", "flow_eigenvalues",
     lambda: (lambda m=_irnn(), x=_walk(): dl.spectrum(m, x))),
    ("lyapunov: QR steps", "dynlab.backends.numba.flow.GramSchmidtQR", "feed",
     lambda: (lambda m=_irnn(), x=_walk(): dl.lyapunov(m, x))),
    ("gradient_norms: J_t and backward pass", "dynlab.backends.numba.flow.BackwardChain", "feed",
     lambda: (lambda m=_irnn(), x=_walk(): dl.gradient_norms(m, x))),
    ("jacobians: J_t", "dynlab.backends.numba.backend", "_jac_loops",
     lambda: (lambda m=_irnn(), x=_walk(): dl.jacobians(m, x))),
    ("equilibrium: Newton", "dynlab.analysis.equilibria", "run_solver",
     lambda: (lambda m=_irnn(): dl.equilibrium(m, np.linspace(-1, 1, 5)[:, None]))),
    ("continuation: corrector", "dynlab.analysis.continuation", "_correct",
     lambda: (lambda m=_irnn(D=2): dl.continuation(m, "x", -1.0, 1.0, max_points=20))),
    ("templates: reverse pass", "dynlab.analysis.partition", "template_arrays", _templates),
    ("sweep: each region", "dynlab.sweep.driver", "region_points", _sweep),
]


def _resolve(dotted: str):
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("path, owner, name, make", CASES, ids=[c[0] for c in CASES])
def test_limit_in_force_inside_the_loop(two_threads, monkeypatch, path, owner, name, make):
    assert config.NUMBA_BLAS_THREADS == 1  # the default this test pins
    call = make()
    seen = []
    spy(monkeypatch, _resolve(owner), name, seen)
    call()
    assert seen, f"{owner}.{name} was not called by {path}"
    assert all(counts == [1] for counts in seen), f"{path}: BLAS threads seen inside {seen}"
    assert blas_counts() == [2], "the threads were not given back"


@pytest.mark.parametrize("path, owner, name, make", CASES[:3] + CASES[4:5], ids=[c[0] for c in CASES[:3] + CASES[4:5]])
def test_limit_follows_the_setting_at_call_time(two_threads, monkeypatch, path, owner, name, make):
    """None in ``config.NUMBA_BLAS_THREADS``: BLAS keeps its own threads (read at call time)."""
    monkeypatch.setattr(config, "NUMBA_BLAS_THREADS", None)
    call = make()
    seen = []
    spy(monkeypatch, _resolve(owner), name, seen)
    call()
    assert seen and all(counts == [2] for counts in seen)


def test_the_reference_backend_leaves_blas_alone_the_numba_backend_limits_it(two_threads, monkeypatch):
    """The policy is the backend's: ``simulate`` on numpy runs under BLAS's own threads, on numba
    under ``config.NUMBA_BLAS_THREADS``."""
    import dynlab.simulation as sim

    m, x = _irnn(), _walk()
    seen = []
    spy(monkeypatch, sim, "run_states", seen)
    dl.simulate(m, x, backend="numpy")
    dl.simulate(m, x, backend="numba")
    assert seen == [[2], [1]]
    assert blas_counts() == [2]


# ---------------------------------------------------------------------------- the mechanism

def test_limits_nest_and_restore(two_threads):
    with limit_blas_threads(1):
        assert blas_counts() == [1]
        with limit_blas_threads(1):          # the same limit: shared, not set again
            assert blas_counts() == [1]
        assert blas_counts() == [1]          # still held by the outer block
        with limit_blas_threads(2):          # a different limit inside: set and restored on its own
            assert blas_counts() == [2]
        assert blas_counts() == [1]
        with limit_blas_threads(None):
            assert blas_counts() == [1]
    assert blas_counts() == [2]


def test_limit_restored_after_an_exception(two_threads):
    be = dl.get_backend("numba")
    with pytest.raises(ValueError, match="inside"):
        with be:
            assert blas_counts() == [1]
            raise ValueError("inside")
    assert blas_counts() == [2]


def test_a_limit_is_given_back_by_the_thread_that_set_it(two_threads):
    """Two Python threads each holding their own limit, the first leaving while the second
    still holds it: each gives back what it set, in its own thread, so the threads are back at
    the end.  (threadpoolctl ≥ 3.8 ignores a limit set or restored from a thread other than the
    one that took control of OpenBLAS's process-wide pool: a limit handed between threads
    would stay set forever.)"""
    inside, release = threading.Barrier(2), threading.Event()
    errors = []

    def hold(wait):
        try:
            with limit_blas_threads(1):
                inside.wait(timeout=30)
                if wait:
                    release.wait(timeout=30)
        except BaseException as exc:  # reported below
            errors.append(exc)

    first = threading.Thread(target=hold, args=(False,))
    second = threading.Thread(target=hold, args=(True,))
    first.start(), second.start()
    first.join(timeout=30)
    release.set()
    second.join(timeout=30)
    assert not errors
    assert blas_counts() == [2]


def test_dynlab_worker_threads_run_under_the_callers_limit(two_threads):
    """``in_threads``: the calling thread holds one BLAS thread for the whole section, the
    workers set none of their own, every piece sees 1, and the 2 threads are back after."""
    from dynlab.backends.numba.threads import in_threads

    barrier = threading.Barrier(3)

    def piece(i):
        barrier.wait(timeout=30)  # all three at once: the limit is held while every one runs
        return blas_counts()

    assert in_threads(piece, 3) == [[1], [1], [1]]
    assert blas_counts() == [2]


def test_only_public_threadpoolctl_names_are_used():
    """No private threadpoolctl API: only the names its documentation lists."""
    import ast

    public = {"ThreadpoolController", "threadpool_limits", "threadpool_info"}
    root = Path(dl.__file__).parent
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("threadpoolctl"):
                assert node.module == "threadpoolctl", (path, node.module)
                assert {a.name for a in node.names} <= public, (path, [a.name for a in node.names])
            if isinstance(node, ast.Attribute) and node.attr in ("lib_controllers", "clear_controlling_thread"):
                raise AssertionError(f"{path}: {node.attr} is not threadpoolctl's public interface")


def test_every_tunable_is_applied_somewhere():
    """Each ``*_BLAS_THREADS`` of dynlab.config governs some code (no dead tunable), and only the
    numba backend reads one (the thread policy is the backend's)."""
    root = Path(dl.__file__).parent
    readers = {p.relative_to(root).as_posix() for p in root.rglob("*.py") if p.name != "config.py"
               and re.search(r"config\.[A-Z_]*BLAS_THREADS\b", p.read_text())}
    names = [n for n in dir(config) if n.endswith("_BLAS_THREADS")]
    source = "\n".join((root / r).read_text() for r in readers)
    for name in names:
        assert re.search(rf"config\.{name}\b", source), f"{name} is not applied"
    assert readers and all(r.startswith("backends/numba/") for r in readers), readers

"""Long library calls talk: one progress facility (``dynlab.progress``), quiet where asked.

Checked: what ``progress=`` means (None: a bar after a delay unless quiet; False; True; a callable
meter), that nested calls report to the outermost meter and a bar shows one stage at a time,
that every long public name takes the parameter (signature and docstring), that the compile
notice is told by a Python call too, and that the tests' own quiet (``DYNLAB_QUIET``) silences
the default.
"""
from __future__ import annotations

import inspect
import io

import numpy as np
import pytest

import dynlab as dl
from dynlab import progress as pg

LONG = ("simulate", "gradient_norms", "lyapunov", "jacobians", "equilibrium", "fixed_points", "spectrum",
        "continuation", "partition", "templates", "train_implicit", "train_model", "sweep")


@pytest.mark.parametrize("name", LONG)
def test_every_long_public_call_takes_progress(name):
    func = dl.sweep.sweep if name == "sweep" else getattr(dl, name)   # dl.sweep is the callable package
    sig = inspect.signature(func)
    assert "progress" in sig.parameters and sig.parameters["progress"].default is None, name
    assert sig.parameters["progress"].kind is inspect.Parameter.KEYWORD_ONLY, name
    doc = func.__doc__ or ""
    assert "progress" in doc and "dynlab.progress" in doc, name


def test_the_parameter_lands_in_the_parameters_section():
    doc = pg._with_parameter('''Title.

    Parameters
    ----------
    a : int
        the a

    Returns
    -------
    b
    ''')
    lines = doc.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("progress :"))
    assert lines.index("    Returns") > at > lines.index("    a : int")
    assert lines[at].startswith("    progress :")


def _gradients(**kw):
    m = dl.make_model("irnn", 4, 1, K=2, seed=0)
    return dl.gradient_norms(m, dl.tasks.noise(60, 1, seed=0), **kw)


def test_a_callable_meter_hears_every_report_and_the_answer_is_unchanged():
    seen = []
    with_meter = _gradients(progress=lambda *a: seen.append(a))
    plain = _gradients(progress=False)
    assert seen and all(stage == "gradient flow (steps)" for stage, _, _ in seen)
    assert seen[-1][1] == seen[-1][2] == 60 and all(0 <= d <= t for _, d, t in seen)
    np.testing.assert_array_equal(with_meter["jac_norm"].values, plain["jac_norm"].values)


def test_true_draws_a_bar_false_and_quiet_draw_nothing(capsys, monkeypatch):
    _gradients(progress=True)
    err = capsys.readouterr().err
    assert "gradient flow" in err and "60/60" in err and "steps/s" in err
    _gradients(progress=False)
    _gradients()                                   # DYNLAB_QUIET=1 (tests/conftest.py)
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("DYNLAB_QUIET")
    monkeypatch.setattr(pg, "DELAY_S", 0.0)
    _gradients()                                   # the default: a bar (after DELAY_S)
    assert "60/60" in capsys.readouterr().err
    with pg.quiet():
        _gradients()
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(pg, "DELAY_S", 60.0)       # a short call under the real delay says nothing
    _gradients()
    assert capsys.readouterr().err == ""


def test_bad_progress_is_one_error_naming_it():
    with pytest.raises(dl.ParameterError, match="progress"):
        _gradients(progress="yes")


def test_nested_calls_report_to_the_outer_meter_and_false_silences_them():
    seen = []
    task = dl.make_task("adding", 8, n_train=64, n_val=16, n_test=16)
    m = dl.make_model("rnn", 4, 2, seed=0)
    dl.train_model(m, task, iterations=4, batch=8, record_every=2, progress=lambda *a: seen.append(a))
    stages = {s for s, _, _ in seen}
    assert "training (iterations)" in stages
    assert [d for s, d, _ in seen if s == "training (iterations)"] == [0, 1, 2, 3, 4]
    outer = []
    from dynlab._progress import reporting

    with reporting(lambda *a: outer.append(a)):
        _gradients()                                # None inside a reporter: the caller's meter
        _gradients(progress=False)                  # False: nothing, not even to the caller
    assert outer and {d for _, d, _ in outer} <= set(range(61))
    n = len(outer)
    assert all(a[0] == "gradient flow (steps)" for a in outer) and n == len([a for a in outer])


def test_a_bar_shows_one_stage_at_a_time_and_a_resumed_stage_counts_from_there():
    buf = io.StringIO()
    meter = pg.TqdmMeter(delay=0.0, file=buf)
    meter("training (iterations)", 0, 10)
    meter("gradient flow (steps)", 5, 20)           # work inside the open stage: not drawn
    meter("training (iterations)", 10, 10)
    meter("spectra (points)", 3, 9)                 # the open stage finished: the next one shows
    meter.close()
    text = buf.getvalue()
    assert "training" in text and "10/10" in text and "spectra" in text and "3/9" in text
    assert "gradient flow" not in text
    buf = io.StringIO()
    meter = pg.TqdmMeter(delay=0.0, file=buf)
    meter("sweep (points)", 60, 100)                # 60 points already in the store
    assert meter._bar.n == 60 and meter._bar.total == 100
    meter.close()


def test_a_stage_of_unknown_total_shows_a_count_and_a_rate_and_ends_when_its_total_is_told():
    buf = io.StringIO()
    meter = pg.TqdmMeter(delay=0.0, file=buf, leave=True)
    for i in range(4):
        meter.note(f"{i} of 8 rows converged")
        meter("equilibria (Newton iterations)", i, None)
    meter("eigenvalues (points)", 1, 9)             # inside the open stage (its total unknown): not drawn
    assert meter._stage == "equilibria (Newton iterations)" and meter._bar.total is None
    meter("equilibria (Newton iterations)", 4, 4)   # the count's end: the stage is finished
    newton = buf.getvalue()
    assert "equilibria (Newton iterations): 4 it" in newton and "it/s" in newton and "rows converged" in newton
    assert "%" not in newton and "ETA" not in newton and "eigenvalues" not in newton
    meter("eigenvalues (points)", 3, 9)             # the next stage shows, with its percentage and no old note
    meter.close()
    text = buf.getvalue()
    rest = text[text.index("eigenvalues"):]
    assert "3/9" in rest and "%" in rest and "ETA" in rest and "rows converged" not in rest
    calls = []
    with pg.meter(lambda *a: calls.append(a)):
        from dynlab import _progress

        _progress.progress("x (steps)", 2, None)
    assert calls == [("x (steps)", 2, None)]


def test_a_finished_stage_run_again_gets_a_new_bar():
    buf = io.StringIO()
    meter = pg.TqdmMeter(delay=0.0, file=buf)
    for i in range(3):
        meter("equilibria (iterations)", i, None)
    meter("equilibria (iterations)", 3, 3)
    first = meter._bar
    meter("equilibria (iterations)", 0, None)       # a second solve: counted from 0, not backwards
    assert meter._bar is not first and meter._bar.n == 0 and meter._bar.total is None
    meter.close()


def test_the_equilibrium_solvers_report_iterations_of_unknown_total():
    calls = []
    g = dl.make_model("gru", 6, 1, seed=3)
    dl.fixed_points(g, np.zeros(1), n_starts=16, seed=0, progress=lambda *a: calls.append(a))
    solve = [c for c in calls if c[0] == "equilibria (iterations)"]
    assert solve and any(t is None for _, _, t in solve)
    ends = [(d, t) for _, d, t in solve if t is not None]
    assert ends and all(d == t for d, t in ends)      # each run ends with its count told


def test_the_compile_notice_is_told_by_a_python_call(monkeypatch):
    """A first compilation inside a long call: one line when it starts, the seconds at the call's
    end (the command line instead tells the total when the process ends)."""
    from dynlab import _compile_notice as cn

    buf = io.StringIO()
    listener = cn.install(at_exit=False)
    monkeypatch.setattr(listener, "stream", buf)
    monkeypatch.setattr(listener, "told", False)
    monkeypatch.setattr(listener, "at_exit", False)
    monkeypatch.delenv("DYNLAB_QUIET")
    monkeypatch.setenv("DYNLAB_COMPILE_NOTICE", "1")
    import numba

    ns = {"__name__": "dynlab.backends.numba.fresh_for_the_notice"}
    exec("def f(x):\n    return x * 3 + 1\n", ns)
    fresh = numba.njit(ns["f"])

    def long_call(x):
        return fresh(x)

    pg.reports(long_call)(2.0, progress=False)      # progress=False: no meter, so no notice either
    assert buf.getvalue() == ""
    pg.reports(long_call)(2, progress=None)          # int: a new signature compiles
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("dynlab: compiling its Numba kernels") and len(lines) == 2
    assert lines[1].startswith("dynlab: compiled 1 kernel in ") and lines[1].endswith("cached for later runs")
    pg.reports(long_call)(3, progress=None)          # nothing compiles: nothing more is said
    assert len(buf.getvalue().splitlines()) == 2

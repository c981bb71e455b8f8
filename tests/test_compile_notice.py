"""The first-run notice: one line when dynlab's Numba kernels compile, nothing when they come from the cache."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from dynlab import _compile_notice as cn


def _jitted(module: str, body: str = "return x + 1"):
    """A fresh njit function whose module is ``module`` (so the listener sees it as dynlab's or not)."""
    import numba

    ns = {"__name__": module}
    exec(f"def f(x):\n    {body}\n", ns)
    return numba.njit(ns["f"])


@pytest.fixture
def notice():
    from numba.core import event

    listener = cn.make_listener(io.StringIO())
    listener.at_exit = True   # told as the command line tells it (a Python call tells only while its meter talks)
    event.register("numba:compile", listener)
    yield listener
    event.unregister("numba:compile", listener)


def test_one_notice_on_the_first_dynlab_compilation_and_the_total_after(notice):
    assert notice.summary() is None
    _jitted("numpy.fake")(1)                        # not dynlab's: ignored
    assert not notice.told and notice.stream.getvalue() == ""
    _jitted("dynlab.kernels.fake")(1)
    _jitted("dynlab.kernels.fake2", "return x * 2")(2.0)
    lines = notice.stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynlab: compiling its Numba kernels")
    assert cn.EXPECTED in lines[0] and "cached in" in lines[0]
    assert notice.count == 2 and notice.seconds > 0 and notice._depth == 0
    notice.report()
    assert notice.stream.getvalue().splitlines()[-1].startswith("dynlab: compiled 2 kernels in ")


def test_an_already_compiled_kernel_says_nothing(notice):
    f = _jitted("dynlab.kernels.fake3")
    f(1)
    out = notice.stream.getvalue()
    f(2)                                               # same signature: no compilation, no event
    assert notice.stream.getvalue() == out and notice.count == 1


def test_cache_location_names_numba_cache_dir(monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/some/where")
    assert cn.cache_location() == "/some/where"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert "__pycache__" in cn.cache_location()


def _env(**extra):
    """The tests' environment without their quiet (``DYNLAB_QUIET``), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "DYNLAB_QUIET"}
    env.update(MPLBACKEND="Agg", **extra)
    return env


def _cli(cache_dir, *args):
    env = _env(NUMBA_CACHE_DIR=str(cache_dir), DYNLAB_COMPILE_NOTICE="1")
    return subprocess.run([sys.executable, "-m", "dynlab", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_the_cli_tells_a_cold_first_run_once_and_a_warm_run_nothing(tmp_path):
    args = ["simulate", "--model", "rnn", "--hidden", "4", "--steps", "5", "--out", str(tmp_path / "s.png")]
    cold = _cli(tmp_path / "cache", *args)
    assert cold.returncode == 0, cold.stderr
    lines = cold.stderr.splitlines()
    assert sum(line.startswith("dynlab: compiling its Numba kernels") for line in lines) == 1, cold.stderr
    assert str(tmp_path / "cache") in cold.stderr
    assert lines[-1].startswith("dynlab: compiled ") and lines[-1].endswith("cached for later runs")
    warm = _cli(tmp_path / "cache", *args)
    assert warm.returncode == 0 and "compil" not in warm.stderr, warm.stderr
    quiet = _cli(tmp_path / "cache2", "-q", *args)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    bad = _cli(tmp_path / "cache3", "simulate", "--hidden", "0")
    assert bad.returncode == 2 and "compil" not in bad.stderr
    off = subprocess.run([sys.executable, "-m", "dynlab", *args], capture_output=True, text=True, timeout=300,
                         env=_env(NUMBA_CACHE_DIR=str(tmp_path / "cache4"), DYNLAB_COMPILE_NOTICE="0"))
    assert off.returncode == 0 and "compil" not in off.stderr

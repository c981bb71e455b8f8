"""Tell the user, once per process, that dynlab's Numba kernels are being compiled (the first run).

dynlab's kernels are ``@njit(cache=True)``: the first run on a machine (after an install, an
upgrade, or with an empty cache) compiles them, which takes from a few seconds (one small command)
to about a minute (a command that needs many kernels, on two cores); later runs load them from
Numba's cache (a per-user folder that a reinstall keeps, ``dynlab._cache``).  Without a word that
first run looks hung, so the CLI and every long Python call (``dynlab.progress``) install
``CompileNotice`` unless quiet: on the first *compilation* of a dynlab kernel — Numba's
``"numba:compile"`` event, which a cache hit never fires — it prints one line on stderr saying what
is happening, how long it may take and where the result is cached; at the end of the Python call
(the command line: when the process ends) it prints how long the compilation took.  Nothing is
printed when every kernel comes from the cache.  ``DYNLAB_COMPILE_NOTICE=0`` turns the notice off
(the test suite sets it, so that in-process CLI tests see the same output with a cold or a warm
cache); ``DYNLAB_QUIET=1`` turns it off with the progress bars.
"""
from __future__ import annotations

import atexit
import os
import sys
import time

#: the expected duration quoted in the notice: measured cold runs of the commands with an
#: empty cache (BENCHMARKS.md, ``cli``) take from a few seconds to about a minute on two cores
EXPECTED = "a few seconds to about a minute, once"


def cache_location() -> str:
    """Where Numba keeps dynlab's compiled kernels: ``NUMBA_CACHE_DIR`` when it is set (dynlab sets
    it to its per-user folder at import, ``dynlab._cache``), else Numba's own rule, the
    ``__pycache__`` folders beside the kernels' source — said with the reason when Numba was
    imported before dynlab."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return env
    from . import _cache

    where = "the __pycache__ folders of the installed dynlab package"
    if _cache.NUMBA_WAS_FIRST:
        where += (" (Numba was imported before dynlab, so dynlab could not choose its per-user cache, "
                  "which a reinstall keeps: import dynlab first, or set NUMBA_CACHE_DIR)")
    return where


def _is_dynlab(dispatcher) -> bool:
    fn = getattr(dispatcher, "py_func", None)
    return str(getattr(fn, "__module__", "") or "").split(".")[0] == "dynlab"


class CompileNotice:
    """A Numba event listener: one notice on the first dynlab compilation, the total at the end.

    ``stream`` receives the lines (stderr by default).  ``told`` says whether the notice was
    given; ``seconds`` is the wall time spent compiling dynlab kernels (nested compilations are
    counted once), ``count`` the number of top-level kernel compilations."""

    def __init__(self, stream=None):
        self.stream = stream
        self.told = False
        self.seconds = 0.0
        self.count = 0
        self._depth = 0
        self._t0 = 0.0
        self.at_exit = False

    def _write(self, text: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed stream at exit: the notice is a courtesy, never an error
            pass

    def on_start(self, ev) -> None:
        data = ev.data or {}
        dispatcher = data.get("dispatcher") if isinstance(data, dict) else None
        if self._depth == 0 and not _is_dynlab(dispatcher):
            return
        if self._depth == 0:
            self._t0 = time.perf_counter()
            self.count += 1
            if not self.told and self._may_tell():
                self.told = True
                self._write(f"dynlab: compiling its Numba kernels for this machine (first run only: {EXPECTED}); "
                            f"they are cached in {cache_location()}, so later runs start at once")
        self._depth += 1

    def _may_tell(self) -> bool:
        """The command line (``at_exit``) tells whenever it installed the notice; a Python call only
        while a meter that is not silent listens (``dynlab.progress``: not quiet, not progress=False)."""
        if self.at_exit:
            return True
        from ._progress import listening, notice_wanted

        return listening() and notice_wanted()

    def on_end(self, ev) -> None:
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._t0

    def summary(self) -> str | None:
        """The closing line (None when nothing was compiled)."""
        if not self.told:
            return None
        return (f"dynlab: compiled {self.count} kernel{'s' if self.count != 1 else ''} in {self.seconds:.1f} s; "
                "cached for later runs")

    def report(self) -> None:
        line = self.summary()
        if line:
            self._write(line)

    def mark(self) -> tuple:
        """The counters now (``report_since`` tells what was compiled after)."""
        return (self.count, self.seconds)

    def report_since(self, mark: tuple) -> None:
        """One line on what was compiled since ``mark`` (a Python call's end); nothing when nothing
        was, or when the total is told at exit instead (the command line)."""
        count, seconds = self.count - mark[0], self.seconds - mark[1]
        if count and not self.at_exit:
            self._write(f"dynlab: compiled {count} kernel{'s' if count != 1 else ''} in {seconds:.1f} s; "
                        "cached for later runs")


def make_listener(stream=None) -> CompileNotice:
    """A ``CompileNotice`` that is also a Numba ``event.Listener`` (ready for ``event.register``)."""
    from numba.core import event

    return type("CompileNoticeListener", (CompileNotice, event.Listener), {})(stream)


_INSTALLED: list = []


def install(stream=None, *, at_exit: bool = True):
    """Register a ``CompileNotice`` for Numba's ``"numba:compile"`` events, once per process
    (a later call returns the first listener); ``at_exit`` (the command line) prints the total
    when the process ends instead of at the end of each Python call (``dynlab.progress``).
    Returns the listener."""
    if not _INSTALLED:
        from numba.core import event

        listener = make_listener(stream)
        event.register("numba:compile", listener)
        _INSTALLED.append(listener)
    listener = _INSTALLED[0]
    if at_exit and not listener.at_exit:
        listener.at_exit = True
        atexit.register(listener.report)
    return listener


def uninstall() -> None:
    """Remove the listener ``install`` registered (tests)."""
    if not _INSTALLED:
        return
    from numba.core import event

    event.unregister("numba:compile", _INSTALLED.pop())

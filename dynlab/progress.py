"""Progress of long calls: one facility for every long public call, and the first-run compile notice.

Every long public call — ``train_model``, ``sweep``, ``gradient_norms``, ``lyapunov``,
``fixed_points``, ``simulate``, ``spectrum``, ``partition``, the paper figures — takes
``progress=``, a *meter* passed in (as diffrax's ``progress_meter``):

``None`` (default)
    the session's default: a bar on stderr (tqdm) for each stage of the call that runs longer than
    ``DELAY_S`` seconds, so short calls print nothing; nothing at all when quiet (below).
``False``
    nothing for this call (and for the calls it makes).
``True``
    a bar from the first report on.
a callable ``meter(stage, done, total)``
    receives every report: ``stage`` names what is counted ("gradient flow (steps)"), ``done`` of
    ``total`` units are finished; ``total`` is None where it is not known in advance (the Newton
    iterations of an equilibrium search), and the stage then ends with a report of ``done`` of
    ``done``.  ``TqdmMeter(...)`` is the bar above with its settings; any
    function will do (a log, a notebook widget).  A meter with a ``note(text)`` method also gets
    short notes (the training loss).

Quiet: ``DYNLAB_QUIET=1`` in the environment, or a ``with quiet():`` block, makes the default
silent — no bars and no compile notice (the test suite sets it; ``dynlab -q`` uses the block).
An explicit ``progress=True`` or meter still reports.

The compile notice: dynlab's Numba kernels compile on their first use on a machine (seconds to
about a minute, once; later runs load them from the cache, ``dynlab._cache``).  The first long
call that is not quiet installs ``dynlab._compile_notice``'s listener: one line on stderr when a
kernel first compiles, and at the end of the call how long compiling took.
``DYNLAB_COMPILE_NOTICE=0`` turns the notice alone off.

A computation reports through ``dynlab._progress.progress(stage, done, total)``; nested public
calls report to the meter of the outermost one.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys

from . import _progress

#: Seconds a call runs before the default bar appears.
DELAY_S = 2.0

#: ``progress=`` as the docstrings of the long calls state it.
PARAMETER_DOC = ("progress : None, bool or callable(stage, done, total), optional\n"
                 "    A progress meter (``dynlab.progress``): None shows a bar on stderr once the call has run\n"
                 "    a few seconds (nothing when quiet), False nothing, True a bar at once.")

is_quiet = _progress.is_quiet
notice_wanted = _progress.notice_wanted


@contextlib.contextmanager
def quiet(on: bool = True):
    """Within this block the default meter is silent (``on=False``: it talks again)."""
    token = _progress._QUIET.set(bool(on))
    try:
        yield
    finally:
        _progress._QUIET.reset(token)


def _split(stage: str) -> tuple[str, str]:
    """("gradient flow", "steps") from "gradient flow (steps)": the unit when it is one word."""
    head, sep, tail = stage.rpartition(" (")
    if sep and tail.endswith(")") and " " not in tail[:-1] and tail[:-1]:
        unit = tail[:-1]
        return head, "it" if unit == "iterations" else unit
    return stage, "it"


class TqdmMeter:
    """A tqdm bar per stage on ``file`` (stderr): stage, percentage, done/total, ETA and rate; for a
    stage whose total is not known (None), the count and the rate only — no percentage, no ETA.

    One bar at a time: while a stage is unfinished, reports of other stages are the work inside it
    (the analyses a sweep runs at each point, the diagnostics of a training run) and are not drawn;
    a stage that finishes (done = total) gives way to the next.

    Parameters
    ----------
    delay : seconds a stage runs before its bar is drawn (``DELAY_S`` by default)
    file : the stream (stderr by default)
    leave : keep each finished stage's bar on screen (default False: it is cleared)
    """

    BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}, ETA {remaining}, {rate_fmt}{postfix}]"
    #: a stage whose total is not known: what is counted so far, and how fast
    COUNT_FORMAT = "{desc}: {n_fmt} {unit} [{elapsed}, {rate_fmt}{postfix}]"

    def __init__(self, *, delay: float | None = None, file=None, leave: bool = False):
        self.delay = DELAY_S if delay is None else float(delay)
        self.file = file
        self.leave = leave
        self._bar = None
        self._stage = None
        self._note = ""

    def note(self, text: str) -> None:
        """A short note shown after the rate (e.g. the current loss)."""
        self._note = str(text)
        if self._bar is not None:
            self._bar.set_postfix_str(self._note, refresh=False)

    def _open(self) -> bool:
        """Whether the current stage is unfinished (a stage of unknown total is, until its total is told)."""
        bar = self._bar
        return bar is not None and (bar.total is None or bar.n < bar.total)

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        again = stage == self._stage and not self._open() and self._bar is not None and int(done) < self._bar.n
        if stage != self._stage or again:     # a new stage, or a finished one run again (a second solve)
            if self._open():
                return  # a stage inside the open one (a sweep's points, training's diagnostics): its own bar shows
            self._close_bar()
            self._stage = stage
            from tqdm import tqdm

            desc, unit = _split(stage)
            # each stage's bar waits ``delay`` seconds: a stage that ends sooner is never drawn; a
            # resumed stage (a sweep's regions already done) starts at ``done``, so the rate counts
            # only what this call computes
            self._bar = tqdm(total=None if total is None else int(total), initial=int(done), desc=desc, unit=unit,
                             delay=self.delay, file=self.file if self.file is not None else sys.stderr,
                             leave=self.leave, dynamic_ncols=False, ncols=100,
                             bar_format=self.COUNT_FORMAT if total is None else self.BAR_FORMAT)
            if self._note:
                self._bar.set_postfix_str(self._note, refresh=False)
            return
        bar = self._bar
        if total is not None and bar.total is None:
            bar.total = int(total)   # the count's end is known now: the stage finishes at it
        step = int(done) - bar.n
        if step:
            bar.update(step)
        if bar.total is not None and int(done) >= bar.total:
            if bar.format_dict["elapsed"] >= self.delay:
                bar.refresh()   # the finished count is shown, however soon after the last update it came
            self._note = ""     # a stage's note (the loss, the rows converged) is not the next stage's

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def close(self) -> None:
        """Close the current bar (a meter can be used again afterwards)."""
        self._close_bar()
        self._stage = None


def _resolve(progress):
    """(meter or None, made_here) for a ``progress=`` argument."""
    if progress is None:
        return (None, False) if is_quiet() else (TqdmMeter(), True)
    if progress is False:
        return None, False
    if progress is True:
        return TqdmMeter(delay=0.0), True
    if callable(progress):
        return progress, False
    from .errors import ParameterError

    raise ParameterError("progress", f"must be None, True, False or a callable(stage, done, total), got {progress!r}")


class _Silent:
    """The reporter of ``progress=False`` and of a quiet default: nested calls keep it and stay quiet
    (``dynlab._progress.listening`` is False for it, so nothing is chunked for its sake)."""

    silent = True

    def __call__(self, stage, done, total):
        pass


_SILENT = _Silent()


@contextlib.contextmanager
def meter(progress=None):
    """Install the meter ``progress`` names for the block (``reports`` does it for a public call).

    Inside a block that already has a reporter, ``progress=None`` keeps the outer one (a nested
    call reports to its caller's meter).  The compile notice is installed here too, and the
    seconds spent compiling during the block are told at its end (once, by the outermost block).
    """
    outer = _progress._REPORTER.get()
    if progress is None and outer is not None:
        yield outer
        return
    chosen, made = _resolve(progress)
    notice = mark = None
    if outer is None and chosen is not None and notice_wanted():
        from . import _compile_notice

        notice = _compile_notice.install(at_exit=False)
        mark = notice.mark()
    try:
        with _progress.reporting(_SILENT if chosen is None else chosen):
            yield chosen
    finally:
        if made:
            chosen.close()
        if notice is not None:
            notice.report_since(mark)


def reports(func):
    """Decorator of a long public call: it takes ``progress=`` (keyword only; see the module) and
    runs inside ``meter(progress)``.  The signature and the docstring gain the parameter."""
    sig = inspect.signature(func)
    own = "progress" in sig.parameters

    @functools.wraps(func)
    def wrapper(*args, progress=None, **kwargs):
        with meter(progress):
            return func(*args, **kwargs)

    if not own:
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_KEYWORD), len(params))
        params.insert(at, inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=None))
        wrapper.__signature__ = sig.replace(parameters=params)
        wrapper.__doc__ = _with_parameter(func.__doc__)
    return wrapper


def _with_parameter(doc: str | None) -> str | None:
    """``doc`` with ``PARAMETER_DOC`` as the last entry of its numpydoc Parameters section."""
    if not doc:
        return doc
    lines = doc.split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Parameters"
                     and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"})
    except StopIteration:
        return doc
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    end = len(lines)
    for i in range(start + 2, len(lines) - 1):
        if lines[i].strip() and lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"} \
                and lines[i][:len(indent)] == indent and not lines[i][len(indent):].startswith(" "):
            end = i
            break
    while end > start + 2 and not lines[end - 1].strip():
        end -= 1
    entry = [indent + line for line in PARAMETER_DOC.split("\n")]
    return "\n".join(lines[:end] + entry + lines[end:])


__all__ = ["DELAY_S", "TqdmMeter", "is_quiet", "meter", "quiet", "reports"]

"""Progress and quietness: the context a long computation reports through.

``progress(stage, done, total)`` reports to the reporter installed by ``reporting`` (none: a no-op);
``listening()`` says whether one listens; ``is_quiet()`` / ``notice_wanted()`` say whether the
default meter and the compile notice may talk.  ``dynlab.progress`` builds its meters on these.
(They lived in ``dynlab._resources`` beside the memory guards until issue 43.)

This module imports only the standard library.
"""
from __future__ import annotations

import contextlib as _contextlib
import contextvars as _contextvars
import os

_REPORTER = _contextvars.ContextVar("dynlab_progress", default=None)


@_contextlib.contextmanager
def reporting(callback):
    """Within this block, ``progress(stage, done, total)`` calls ``callback(stage, done, total)``.
    The library is quiet without a reporter; ``dynlab.progress.meter`` installs one for every long
    public call (a bar, the caller's meter, or a silent one)."""
    token = _REPORTER.set(callback)
    try:
        yield callback
    finally:
        _REPORTER.reset(token)


def listening() -> bool:
    """Whether a reporter listens: a computation may then report its progress (and, where that
    costs something, e.g. running in chunks, it pays it only then).  A silent reporter does not."""
    cb = _REPORTER.get()
    return cb is not None and not getattr(cb, "silent", False)


def progress(stage: str, done: int, total: int | None, note: str | None = None) -> None:
    """Report that ``done`` of ``total`` units of ``stage`` are finished (a no-op without a
    reporter); ``total`` is None while it is not known (Newton's iterations: a count and a rate are
    shown, no percentage); such a stage ends with a report whose total is known (``done`` of ``done``).
    ``note`` (e.g. the current loss) goes to a reporter's ``note`` method, if it has one."""
    cb = _REPORTER.get()
    if cb is not None:
        if note is not None and hasattr(cb, "note"):
            cb.note(note)
        cb(stage, int(done), None if total is None else int(total))


#: ``dynlab.progress.quiet()`` blocks (None: no block; the environment decides).
_QUIET = _contextvars.ContextVar("dynlab_quiet", default=None)


def is_quiet() -> bool:
    """Whether the default meter is silent: inside ``dynlab.progress.quiet()``, else ``DYNLAB_QUIET``
    set to 1/true/yes/on."""
    inner = _QUIET.get()
    if inner is not None:
        return inner
    return os.environ.get("DYNLAB_QUIET", "").strip().lower() in ("1", "true", "yes", "on")


def notice_wanted() -> bool:
    """Whether the compile notice may talk: not quiet, and ``DYNLAB_COMPILE_NOTICE`` not 0."""
    return not is_quiet() and os.environ.get("DYNLAB_COMPILE_NOTICE", "1").strip() != "0"

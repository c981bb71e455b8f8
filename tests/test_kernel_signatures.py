"""One compiled specialisation per dtype: the jitted kernels are not compiled again for an
argument that differs only in its writeable flag or its layout.

Numba compiles a kernel once per combination of argument types, and an array's type includes
its writeable flag and its layout ('C' or 'A').  A model's validated weights are read-only while
a copy made for a dtype or a transpose is not, and a layer's slice of state cotangents is not
contiguous; before ``dynlab.kernels.readonly`` the same GRU/LSTM kernels were compiled twice or
three times per dtype (≈ 5–6 s each time on two cores; users met it as a second compile pause,
the test suite as ≈ 40 s).  Here every dynlab path that used to do that is run with the
arguments that used to differ (input width 1, where Wᵀ is already contiguous and stays
read-only, and width 2, where it is a fresh copy; a shared and a per-step η table; output and
state cotangents of a stack), and then every dynlab dispatcher's signatures are compared.  The
check runs over every signature this process has compiled or loaded, so a duplicate made by any
earlier test fails it too.  ``test_no_kernel_was_compiled_twice_in_this_session`` repeats it after
every other test of the session (tests/conftest.py moves it to the end), so the paths of the test
files that sort after this one are covered as well.  ``test_the_check_sees_a_duplicate`` is the
negative control of both.
"""
from __future__ import annotations

import re
import sys

import numpy as np
from numba.core.registry import CPUDispatcher

import dynlab
from conftest import force_path
from dynlab.train import backprop as bp

_RO = re.compile(r"(Array\([^,]+, \d+, ')(C|A|F)(', )(True|False)")


def _canonical(sig) -> str:
    """A signature with every array's writeable flag and layout dropped."""
    return _RO.sub(lambda m: m.group(1) + "?" + m.group(3) + "?", str(sig))


def _duplicates(dispatchers) -> dict:
    """{name: [signatures]} for the dispatchers compiled more than once for one canonical signature."""
    out = {}
    for name, d in dispatchers:
        seen = {}
        for sig in d.signatures:
            seen.setdefault(_canonical(sig), []).append(str(sig))
        dup = [s for group in seen.values() if len(group) > 1 for s in group]
        if dup:
            out[name] = dup
    return out


def _dynlab_dispatchers():
    for modname, mod in sorted(sys.modules.items()):
        if not modname.startswith("dynlab.") or mod is None:
            continue
        for attr, obj in sorted(vars(mod).items()):
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == modname:
                yield f"{modname}.{attr}", obj


def _exercise(monkeypatch):
    """Every path whose arguments used to change flags or layout, with both variants."""
    T, B = 6, 3
    rng = np.random.default_rng(0)
    for d in (1, 2):                                   # Wᵀ read-only (d = 1) or a fresh copy (d = 2)
        x = rng.standard_normal((B, T, d))
        for kind in ("gru", "lstm", "rnn"):
            m = dynlab.make_model(kind, 4, d, seed=1)
            for path in ("numba-loops", "numba-vectorised"):
                with monkeypatch.context() as mp:
                    backend, _ = force_path(mp, path)
                    dynlab.simulate(m, x, backend=backend)
        for eta in (0.5, np.full((T, 2), 0.4)):       # a shared and a per-step η table
            m = dynlab.make_model("irnn", 4, d, K=2, eta=eta, seed=2)
            with monkeypatch.context() as mp:
                backend, _ = force_path(mp, "numba-loops")
                dynlab.simulate(m, x, backend=backend)
            ro = bp.init_readout(4, 1, seed=0)
            bp.loss_and_grads(m, ro, x, rng.standard_normal((B, 1)), loss="mse")
        for kind in ("gru", "lstm"):
            m = dynlab.make_model(kind, 4, d, seed=3)
            ro = bp.init_readout(4, 1, seed=0)
            bp.loss_and_grads(m, ro, x, rng.standard_normal((B, 1)), loss="mse")
        for cell in ("gru", "lstm"):                   # output and (sliced) state cotangents
            m = dynlab.make_model("stack", 4, d, cell=cell, layers=2, seed=4)
            tape = bp.forward(m, x)
            bp.backward(tape, rng.standard_normal((T, B, m.hidden)))
            bp.backward(tape, rng.standard_normal((T, B, m.state_size)))


def test_each_kernel_is_compiled_once_per_dtype(monkeypatch):
    _exercise(monkeypatch)
    names = [n for n, _ in _dynlab_dispatchers()]
    assert "dynlab.backends.numba.loops.gated_batch" in names and "dynlab.backends.numba.train.lstm_backward_all" in names
    assert _duplicates(_dynlab_dispatchers()) == {}


def test_no_kernel_was_compiled_twice_in_this_session():
    """Run last (tests/conftest.py): every dynlab kernel any test of this session compiled or
    loaded, one signature per dtype."""
    assert _duplicates(_dynlab_dispatchers()) == {}


def test_the_check_sees_a_duplicate():
    """Negative control: a kernel called with a writable and then a read-only array is compiled
    twice, and the check above names it."""
    from numba import njit

    @njit
    def total(a):
        return a.sum()

    a = np.arange(3.0)
    total(a)
    r = a.view()
    r.flags.writeable = False
    total(r)
    total(a[::2])                                      # layout 'A'
    dup = _duplicates([("total", total)])
    assert list(dup) == ["total"] and len(dup["total"]) == 3
    total(a.astype(np.float32))                        # another dtype is a legitimate second compile
    assert len(_duplicates([("total", total)])["total"]) == 3

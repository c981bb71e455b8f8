"""The compiled-kernel cache lives in a per-user folder and survives a reinstall (``dynlab._cache``).

A reinstall is simulated the way pip does one: the installed package folder is deleted and every
file written anew (same content, new modification times) at the same path.  Each run is a fresh
process with its own ``XDG_CACHE_HOME`` (platformdirs' per-user cache on Linux), so nothing here
touches the user's real cache; whether kernels compiled is read from dynlab's compile notice.
With Numba ≥ 0.68 (content-keyed cache) the per-user folder alone keeps the kernels; with older
Numba (the floors job) the restored source stamps are what keeps them — the same test covers both.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import dynlab
from dynlab import _cache

RUN = ("import numpy as np, dynlab as dl\n"
       "dl.simulate(dl.make_model('rnn', 3, 1, seed=0), np.zeros((5, 1)), backend='numba', progress=True)\n"
       "import os; print('NUMBA_CACHE_DIR=' + os.environ.get('NUMBA_CACHE_DIR', ''))\n")


def _install(site):
    """Write the package into ``site`` as pip does: every file new (fresh modification times)."""
    src = os.path.dirname(dynlab.__file__)
    dst = site / "dynlab"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, copy_function=shutil.copyfile, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _run(site, cache, code=RUN):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "DYNLAB_QUIET")}
    env.update(PYTHONPATH=str(site), XDG_CACHE_HOME=str(cache), DYNLAB_COMPILE_NOTICE="1", MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env,
                       cwd=str(site))
    assert r.returncode == 0, r.stderr
    return r


def test_the_cache_is_per_user_and_survives_a_reinstall_but_not_a_change(tmp_path):
    site, cache = tmp_path / "site", tmp_path / "cache"
    pkg = _install(site)
    first = _run(site, cache)
    assert f"NUMBA_CACHE_DIR={cache / 'dynlab' / 'numba'}" in first.stdout
    assert "compiling its Numba kernels" in first.stderr
    assert str(cache / "dynlab" / "numba") in first.stderr          # the notice says where
    index = list((cache / "dynlab" / "numba").rglob("*.nbi"))
    assert index and not list(pkg.rglob("*.nbi"))                   # in the user's cache, not the package
    before = os.stat(pkg / "backends" / "numba" / "loops.py").st_mtime_ns
    _install(site)                                                  # the reinstall: new files, new times
    assert os.stat(pkg / "backends" / "numba" / "loops.py").st_mtime_ns != before
    again = _run(site, cache)
    assert "compil" not in again.stderr, again.stderr               # nothing compiled again
    # a real change of a kernel's source compiles again (Numba's own rule still holds)
    path = pkg / "backends" / "numba" / "loops.py"
    path.write_text(path.read_text() + "\n# changed\n")
    changed = _run(site, cache)
    assert "compiling its Numba kernels" in changed.stderr


def test_the_stamps_restore_only_unchanged_content(tmp_path):
    """Negative control of the mechanism: a file with other content keeps its new time."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    a, b = pkg / "a.py", pkg / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    record = tmp_path / "stamps.json"
    assert _cache.keep_source_stamps(str(pkg), str(record)) == {"restored": 0, "recorded": 2, "kept": 0}
    t_a, t_b = os.stat(a).st_mtime_ns, os.stat(b).st_mtime_ns
    for path, text in ((a, "x = 1\n"), (b, "y = 3\n")):            # a: same content; b: changed
        path.unlink()
        path.write_text(text)
        os.utime(path, ns=(t_a + 10 ** 9, t_a + 10 ** 9))
    assert _cache.keep_source_stamps(str(pkg), str(record)) == {"restored": 1, "recorded": 1, "kept": 0}
    assert os.stat(a).st_mtime_ns == t_a and os.stat(b).st_mtime_ns == t_a + 10 ** 9 != t_b
    assert _cache.keep_source_stamps(str(pkg), str(record)) == {"restored": 0, "recorded": 0, "kept": 2}


def test_numba_imported_first_keeps_numbas_rule_and_the_notice_says_so(tmp_path):
    site, cache = tmp_path / "site", tmp_path / "cache"
    _install(site)
    r = _run(site, cache, "import numba\n" + RUN)
    assert "NUMBA_CACHE_DIR=\n" in r.stdout                          # dynlab could not choose, so it did not
    assert "Numba was imported before dynlab" in r.stderr and "import dynlab first" in r.stderr
    mine = _run(site, tmp_path / "cache2", "import os\nos.environ['NUMBA_CACHE_DIR'] = %r\n" % str(tmp_path / "own")
                + RUN)
    assert f"NUMBA_CACHE_DIR={tmp_path / 'own'}" in mine.stdout       # a user's own choice is kept


@pytest.mark.parametrize("value", ["0"])
def test_it_can_be_turned_off(tmp_path, value):
    site, cache = tmp_path / "site", tmp_path / "cache"
    _install(site)
    r = _run(site, cache, f"import os\nos.environ['DYNLAB_KEEP_CACHE'] = '{value}'\n" + RUN)
    assert "NUMBA_CACHE_DIR=\n" in r.stdout and not (cache / "dynlab").exists()

"""Where dynlab's compiled Numba kernels are kept, so that reinstalling dynlab keeps them.

dynlab's kernels are ``@njit(cache=True)``.  Numba writes its cache beside the source, in the
``__pycache__`` folders of the installed package, unless ``NUMBA_CACHE_DIR`` names another folder;
``pip install`` deletes the old package's folders and writes every file anew.  Two things make a
reinstall keep the compiled kernels:

1. **A per-user cache folder.**  When ``import dynlab`` runs before Numba is imported and
   ``NUMBA_CACHE_DIR`` is not set, dynlab sets it to ``<user cache>/dynlab/numba`` (platformdirs:
   ``~/.cache/dynlab/numba`` on Linux, honouring ``XDG_CACHE_HOME``).  Numba reads the variable
   when it is first imported, so it then applies to the whole process — including the user's own
   ``cache=True`` functions — and to the processes it starts.  If Numba was imported first,
   setting it would have no effect: dynlab leaves it alone, the kernels are cached by Numba's own
   rule (``__pycache__`` beside the source) and the compile notice says so.  A ``NUMBA_CACHE_DIR``
   the user set is always kept.
2. **Source stamps that follow the content.**  Numba before 0.68 keys each cache index on its
   source file's modification time and size (0.68 and later on a SHA-256 of the content), and a
   reinstall gives every file a new modification time, so every kernel would compile again.  ``<user cache>/dynlab/source-stamps.json`` records, per
   source file of the package, its size, modification time and SHA-256; at import, a file whose
   time changed but whose content did not (a reinstall of the same release, a checkout switched
   back) gets its recorded time back (``os.utime``), so Numba's index matches again.  A file whose
   content changed is recorded anew, and Numba recompiles it as it always would.  Where the
   package's files cannot be touched (a read-only install) nothing is changed: the kernels then
   compile again after a reinstall, as before.

Only the standard library and platformdirs are imported here (``import dynlab`` stays light).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

#: True when Numba had been imported before dynlab could choose the cache folder.
NUMBA_WAS_FIRST = False


def user_cache_dir() -> str:
    """dynlab's per-user cache folder (platformdirs), e.g. ``~/.cache/dynlab``."""
    from platformdirs import user_cache_dir as _dir

    return _dir("dynlab", appauthor=False)


def numba_cache_dir() -> str:
    """The folder dynlab gives Numba for compiled kernels: ``<user cache>/dynlab/numba``."""
    return os.path.join(user_cache_dir(), "numba")


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def keep_source_stamps(package: str | None = None, record: str | None = None) -> dict:
    """Give every source file of ``package`` whose content equals its recorded content its recorded
    modification time back; record the others.  Returns counts {"restored", "recorded", "kept"}.

    ``record`` is the JSON file of stamps (``<user cache>/dynlab/source-stamps.json`` by default),
    keyed by absolute path: {path: [size, mtime_ns, sha256]}.  Failures to read, write or touch
    are not errors (the cost is a recompilation, as without this)."""
    package = package or _package_dir()
    record = record or os.path.join(user_cache_dir(), "source-stamps.json")
    try:
        with open(record, encoding="utf-8") as fh:
            stamps = json.load(fh)
        if not isinstance(stamps, dict):
            stamps = {}
    except (OSError, ValueError):
        stamps = {}
    counts = {"restored": 0, "recorded": 0, "kept": 0}
    changed = False
    for folder, dirs, files in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            old = stamps.get(path)
            if isinstance(old, list) and len(old) == 3 and old[0] == st.st_size and old[1] == st.st_mtime_ns:
                counts["kept"] += 1
                continue
            try:
                digest = _sha256(path)
            except OSError:
                continue
            if isinstance(old, list) and len(old) == 3 and old[0] == st.st_size and old[2] == digest:
                try:
                    os.utime(path, ns=(st.st_atime_ns, int(old[1])))
                    counts["restored"] += 1
                    continue
                except OSError:
                    pass
            stamps[path] = [st.st_size, st.st_mtime_ns, digest]
            counts["recorded"] += 1
            changed = True
    if changed:
        try:
            os.makedirs(os.path.dirname(record), exist_ok=True)
            tmp = f"{record}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(stamps, fh)
            os.replace(tmp, record)
        except OSError:
            pass
    return counts


def prepare() -> None:
    """Called once by ``import dynlab``: choose Numba's cache folder (when it still can) and keep the
    source stamps.  ``DYNLAB_KEEP_CACHE=0`` turns both off (Numba's own rules apply)."""
    global NUMBA_WAS_FIRST
    if os.environ.get("DYNLAB_KEEP_CACHE", "1").strip() == "0":
        return
    try:
        if "numba" in sys.modules:
            NUMBA_WAS_FIRST = "NUMBA_CACHE_DIR" not in os.environ
        elif not os.environ.get("NUMBA_CACHE_DIR"):
            os.environ["NUMBA_CACHE_DIR"] = numba_cache_dir()
        keep_source_stamps()
    except Exception:  # noqa: BLE001 — a cache is a convenience; it never stops dynlab from importing
        pass

"""The sweep store: one Zarr group holding the whole grid, written region by region.

Layout: every summary variable spans the sweep dimensions (then its own extra dimensions);
the Zarr chunks along the sweep dimensions ARE the regions, so two regions never share a
chunk (workers of a Dask cluster write theirs concurrently without locks).  The template —
coordinates, attrs, every variable filled with NaN (−1 for integers), ``done`` = 0 — is
written once before any point is computed.  A region is then written in two steps:

1. its data variables and ``computed_at`` (the wall-clock time each point was computed);
2. ``done`` = 1 over the region.

zarr-python ≥ 3.1 writes every chunk to a temporary file and renames it into place, so a
chunk is either the old or the new one, never torn.  A crash (or SIGKILL) therefore loses at
most the regions in flight: their ``done`` is still 0, and ``resume`` recomputes exactly the
regions not marked done, leaving the finished ones (and their ``computed_at``) untouched.

The store's attrs hold the sweep's fingerprint (``sweep_spec``, canonical JSON of the
analysis, axes and fixed settings): resuming with a different spec is refused, and an
existing store is never overwritten.

Crash safety (what a SIGKILL at any instant leaves behind):

- **Atomic creation.**  The template is written under ``STORE.partial-PID`` and renamed to
  ``STORE`` only when complete, so ``STORE`` either does not exist or is a whole template.
  A killed creation leaves only a ``.partial-PID`` folder, removed by the next run on the
  same path once that PID is gone.
- **One writer.**  ``STORE.lock`` (beside the store) is held with ``flock`` for the whole run;
  a second ``sweep`` on the same store (fresh or ``--resume``) refuses with one line naming
  the holder's PID instead of recomputing the same regions.  The kernel drops the lock when
  its holder dies, so a killed run never leaves a stale lock.  (``flock`` is advisory and
  local: two machines writing one store on a network file system are not excluded.)
- **Checksums.**  Each point's ``checksum`` is the CRC-32 of its values in every data
  variable and ``computed_at`` (in name order, stored bytes), written with the data in
  step 1.  ``verify`` reads every region marked done and compares; a chunk that is
  unreadable (truncated, corrupt), missing (reads as the fill value) or overwritten is found,
  named, and its region recomputed by ``resume`` — never loaded as garbage or as NaN marked
  done.  Coordinates are rewritten from the spec on resume.
"""
from __future__ import annotations

import os
import socket
import warnings
import zlib

import numpy as np

from ..errors import ParameterError

#: Variables every sweep store has beside the target's.
BOOKKEEPING = ("done", "computed_at", "checksum")

#: Suffix of the lock file beside a store, and of a store being created (+ the creator's PID).
LOCK_SUFFIX = ".lock"
PARTIAL_SUFFIX = ".partial-"

#: Private test hook: ``_DYNLAB_SWEEP_KILL_AT=create`` (after the template is written, before the
#: rename), ``data:N`` / ``done:N`` (after the N-th region's data / done mark) makes the process
#: SIGKILL itself there, so the crash tests hit every step of the write protocol exactly.
_KILL_ENV = "_DYNLAB_SWEEP_KILL_AT"
_kill_counts: dict = {}


def _kill_point(name: str) -> None:
    at = os.environ.get(_KILL_ENV)
    if not at:
        return
    point, _, n = at.partition(":")
    if point != name:
        return
    _kill_counts[name] = _kill_counts.get(name, 0) + 1
    if _kill_counts[name] >= int(n or 1):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


class StoreLock:
    """``flock`` on ``STORE.lock`` for the life of a run (module docstring, *One writer*)."""

    def __init__(self, path: str):
        import fcntl

        self.store = path
        self.path = os.path.abspath(path) + LOCK_SUFFIX
        for _ in range(20):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise ParameterError("store", f"{path} is being written by another dynlab sweep ({holder}); "
                                              "wait for it to finish or stop it, then --resume") from None
            except OSError as exc:
                os.close(fd)
                raise ParameterError("store", f"cannot lock {self.path} ({exc.strerror or exc})") from None
            # the file may have been unlinked by its previous holder between our open and flock:
            # hold the lock only on the file that is there now
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        else:  # pragma: no cover - 20 races in a row
            raise ParameterError("store", f"cannot lock {self.path}: it keeps being replaced")
        self.fd = fd
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())

    def release(self) -> None:
        import fcntl

        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _read_holder(fd) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 200).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text or "its pid is not recorded yet"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_partials(path: str) -> None:
    """Remove ``STORE.partial-PID`` folders left by creations killed before their rename."""
    import glob
    import shutil

    for tmp in glob.glob(glob.escape(os.path.abspath(path)) + PARTIAL_SUFFIX + "*"):
        pid = tmp.rsplit(PARTIAL_SUFFIX, 1)[1]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


#: Integer variables of a point not yet computed (``done`` = 0) hold this value.
INT_NOT_COMPUTED = -1


def template(spec, target, chunks, attrs: dict):
    """The full-size Dataset of a sweep before any point is computed (NumPy-backed)."""
    import xarray as xr

    settings0 = spec.point((0,) * len(spec.axes))
    variables = target.variables_for(settings0)
    coords = {}
    for axis in spec.axes:
        if axis.zipped:
            coords[axis.dim] = (axis.dim, np.arange(axis.size), {"long_name": f"index along {axis.dim}", "units": "1"})
            for name, vals in zip(axis.names, axis.values):
                coords[name] = (axis.dim, np.asarray(vals), {"long_name": name, "units": "1"})
        else:
            coords[axis.dim] = (axis.dim, np.asarray(axis.values[0]), {"long_name": axis.dim, "units": "1"})
    if target.coords is not None:
        for dim, (vals, a) in target.coords(settings0).items():
            coords[dim] = (dim, np.asarray(vals), dict(a))
    dims = spec.dims
    shape = spec.shape
    data = {}
    for name, var in variables.items():
        extra = tuple(d for d, _ in var.dims)
        full = shape + tuple(n for _, n in var.dims)
        dt = np.dtype(var.dtype)
        fill = np.nan if dt.kind == "f" else INT_NOT_COMPUTED
        data[name] = xr.Variable(dims + extra, np.full(full, fill, dtype=dt),
                                 {"long_name": var.long_name, "units": var.units})
    data["done"] = xr.Variable(dims, np.zeros(shape, dtype=np.int8),
                               {"long_name": "point computed and written (1) or not yet (0)", "units": "1"})
    data["computed_at"] = xr.Variable(dims, np.full(shape, np.nan),
                                      {"long_name": "wall-clock time the point was computed (seconds since the Unix epoch)",
                                       "units": "s"})
    data["checksum"] = xr.Variable(dims, np.full(shape, INT_NOT_COMPUTED, dtype=np.int64),
                                   {"long_name": "CRC-32 of the point's stored values (every data variable and "
                                                 "computed_at, in name order); -1 before it is computed",
                                    "units": "1"})
    # the analysis' own variables, in the target's order: what a picture of the sweep draws
    # (``dynlab.plot.plot_sweep``), the same from memory, NetCDF or Zarr
    ds = xr.Dataset(data, coords=coords, attrs={**attrs, "result": "sweep", "sweep_variables": ",".join(variables)})
    return ds, {name: tuple(chunks) + tuple(n for _, n in v.dims) for name, v in variables.items()}


def _encoding(ds, var_chunks, chunks):
    enc = {name: {"chunks": c} for name, c in var_chunks.items()}
    enc["done"] = {"chunks": tuple(chunks)}
    enc["computed_at"] = {"chunks": tuple(chunks)}
    enc["checksum"] = {"chunks": tuple(chunks)}
    return enc


def create(path: str, ds, var_chunks: dict, chunks: tuple) -> None:
    """Write the template to a new store, atomically: under ``STORE.partial-PID``, renamed to
    ``STORE`` when complete (module docstring).  Refuses an existing path (never overwrite).
    The caller holds the store's lock."""
    import shutil

    if os.path.exists(path):
        raise ParameterError("store", f"{path} already exists; resume it (--resume) or choose another path")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ParameterError("store", f"the folder {parent} of {path} does not exist")
    tmp = os.path.abspath(path) + PARTIAL_SUFFIX + str(os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        # Consolidated metadata is written once here: region writes change chunk data only, never
        # the metadata, so the consolidated copy stays valid and xr.open_zarr(path) opens it quietly.
        # (zarr 3 warns that consolidation is outside its format spec; xarray and zarr-python read it.)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
            ds.to_zarr(tmp, mode="w-", encoding=_encoding(ds, var_chunks, chunks), consolidated=True)
        _kill_point("create")
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _open_group(path: str):
    """The store's Zarr group, its metadata only (no chunk is read: a damaged chunk, even of a
    coordinate, does not stop a resume that will rewrite it); ParameterError naming ``store``."""
    import zarr

    if not os.path.isdir(path):
        raise ParameterError("store", f"nothing to resume: {path} does not exist")
    try:
        group = zarr.open_group(path, mode="r", use_consolidated=False)
        attrs = dict(group.attrs)
        names = {k for k, _ in group.arrays()}
    except Exception as exc:  # not a Zarr store at all, or its metadata is damaged
        raise ParameterError("store", f"{path} is not a readable Zarr store ({type(exc).__name__}: {exc})") from None
    if attrs.get("sweep_spec") is None or not {"done", "computed_at"} <= names:
        raise ParameterError("store", f"{path} is not a dynlab sweep store; refusing to write into it")
    return group, attrs


def open_existing(path: str, fingerprint: str):
    """Check that the store at ``path`` holds this very sweep (ParameterError naming ``store`` if not)."""
    _, attrs = _open_group(path)
    old = attrs["sweep_spec"]
    if old != fingerprint:
        raise ParameterError("store", f"{path} was written by another sweep spec ({describe_difference(old, fingerprint)}); "
                                      "its results are kept; choose another path")


def open_existing_any(path: str) -> None:
    """Check that ``path`` is a dynlab sweep store (any spec); ParameterError naming ``store`` if not."""
    _open_group(path)


def describe_difference(old: str, new: str) -> str:
    """A short description of how two fingerprints differ."""
    import json

    a, b = json.loads(old), json.loads(new)
    parts = []
    if a["analysis"] != b["analysis"]:
        parts.append(f"analysis {a['analysis']!r} vs {b['analysis']!r}")
    fa, fb = dict(map(tuple, a["fixed"])), dict(map(tuple, b["fixed"]))
    for k in sorted(set(fa) | set(fb)):
        if fa.get(k) != fb.get(k):
            parts.append(f"{k}: {fa.get(k, 'unset')!r} in the store vs {fb.get(k, 'unset')!r}")
    axa = {ax[0]: ax for ax in a["axes"]}
    axb = {ax[0]: ax for ax in b["axes"]}
    for k in sorted(set(axa) | set(axb)):
        if axa.get(k) != axb.get(k):
            parts.append(f"axis {k!r} differs")
    return "; ".join(parts) or "the order of the axes differs"


def read_done(path: str) -> np.ndarray:
    """The ``done`` mask of a store as a NumPy bool array."""
    import zarr

    return np.asarray(zarr.open_array(os.path.join(path, "done"), mode="r")[...]).astype(bool)


def store_chunks(path: str) -> tuple:
    import zarr

    return tuple(zarr.open_array(os.path.join(path, "done"), mode="r").chunks)


def write_region(path: str, dims: tuple, region: tuple, values: dict, variables: dict) -> None:
    """Write one region's data variables and ``computed_at``, then mark it done (module docstring).

    The arrays are written straight into the Zarr arrays of the template (plain float64 /
    integer data, no CF encoding to apply): xarray's ``to_zarr(region=…)`` writes the same
    bytes but re-reads and checks the whole store's metadata, ≈ 75 ms a call here against
    ≈ 5 ms, which would dominate small regions.
    """
    import zarr

    group = zarr.open_group(path, mode="r+", use_consolidated=False)
    shape = tuple(s.stop - s.start for s in region)
    stored = {name: np.asarray(arr, dtype=group[name].dtype) for name, arr in values.items()}
    # every chunk of a written region is stored, even one equal to the fill value (zarr skips
    # those by default): a missing chunk in a region marked done is then always damage.  An
    # array takes zarr's runtime configuration when it is opened (zarr.config, every 3.x).
    with zarr.config.set({"array.write_empty_chunks": True}):
        for name, arr in stored.items():
            group[name][region] = arr
        if "checksum" in group:  # stores written before checksums existed have none
            group["checksum"][region] = point_checksums(stored, shape)
    _kill_point("data")
    group["done"][region] = np.ones(shape, dtype=np.int8)
    _kill_point("done")


def point_checksums(values: dict, shape: tuple) -> np.ndarray:
    """CRC-32 per point of ``values`` (name → array of region shape + extra dims, the stored
    dtypes), over the names in sorted order; int64 array of ``shape``."""
    n = int(np.prod(shape))
    flat = [np.ascontiguousarray(values[k]).reshape((n, -1)) for k in sorted(values)]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        c = 0
        for arr in flat:
            c = zlib.crc32(arr[i].tobytes(), c)
        out[i] = c
    return out.reshape(shape)


def _region_label(dims: tuple, region: tuple) -> str:
    return "[" + ", ".join(f"{d}={s.start}:{s.stop}" for d, s in zip(dims, region)) + "]"


def verify(path: str) -> dict:
    """The store's health: read every region marked done and check its checksums.

    Returns ``{"points", "done", "regions", "regions_done", "checksums" (bool: the store has
    them), "damaged": [(region, reason), …], "coords_damaged": [name, …], "lock": holder or
    None}``; a region is damaged when a chunk of it cannot be read, or a point's checksum does
    not match its values (a missing chunk reads as the fill value and so does not match).
    """
    import zarr

    from .grid import regions as _regions

    group = zarr.open_group(path, mode="r", use_consolidated=False)
    done_arr = group["done"]
    dims = tuple(done_arr.metadata.dimension_names or ())
    chunks = tuple(done_arr.chunks)
    shape = tuple(done_arr.shape)
    names = sorted(k for k, a in group.arrays() if k not in ("done", "checksum")
                   and tuple(a.metadata.dimension_names or ())[:len(dims)] == dims and len(a.shape) >= len(dims))
    coords = sorted(k for k, _ in group.arrays() if k not in names and k not in ("done", "checksum"))
    has_sum = "checksum" in group
    report = {"points": int(np.prod(shape)), "done": 0, "regions": 0, "regions_done": 0, "checksums": has_sum,
              "damaged": [], "coords_damaged": [], "lock": lock_holder(path), "dims": dims}
    for name in coords:
        try:
            group[name][...]
        except Exception as exc:
            report["coords_damaged"].append(f"{name} ({type(exc).__name__}: {exc})")
    for region in _regions(shape, chunks):
        report["regions"] += 1
        label = _region_label(dims, region)
        try:
            done = np.asarray(done_arr[region]).astype(bool)
        except Exception as exc:
            report["damaged"].append((region, f"{label}: done unreadable ({type(exc).__name__}: {exc})"))
            continue
        if not done.any():
            continue
        report["regions_done"] += 1
        report["done"] += int(done.sum())
        values, bad = {}, None
        for name in names + (["checksum"] if has_sum else []):
            try:
                values[name] = np.asarray(group[name][region])
            except Exception as exc:
                bad = f"{label}: {name} unreadable ({type(exc).__name__}: {exc})"
                break
        if bad is None:
            # every chunk of a written region is stored (write_region), so a missing one is damage
            # even where the values it held equal the fill value
            gone = [k for k in names + (["checksum"] if has_sum else []) if _chunk_missing(group[k], region)]
            if gone:
                bad = f"{label}: chunk missing: {', '.join(gone)}"
        if bad is None and has_sum:
            stored = values.pop("checksum")
            fresh = point_checksums(values, tuple(s.stop - s.start for s in region))
            wrong = done & (fresh != stored)
            if wrong.any():
                bad = f"{label}: {int(wrong.sum())} point(s) marked done fail their checksum"
        if bad is not None:
            report["damaged"].append((region, bad))
    return report


def _chunk_missing(arr, region) -> bool:
    """Whether the chunk of ``arr`` at ``region``'s start is absent from the store."""
    try:
        idx = tuple(s.start // c for s, c in zip(region, arr.chunks)) + (0,) * (len(arr.shape) - len(region))
        key = arr.metadata.encode_chunk_key(idx)
        return not os.path.exists(os.path.join(arr.store_path.store.root, arr.path, key))
    except Exception:
        return False


def lock_holder(path: str):
    """Who holds ``STORE.lock`` now ("pid N on HOST"), or None when nobody does."""
    import fcntl

    lp = os.path.abspath(path) + LOCK_SUFFIX
    try:
        fd = os.open(lp, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        os.close(fd)
        return holder
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    return None


def repair(path: str, damaged: list, tmpl) -> None:
    """Before a resume: unmark the damaged regions (they are recomputed) and rewrite the
    coordinates from the spec's template."""
    import zarr

    group = zarr.open_group(path, mode="r+", use_consolidated=False)
    for region, _ in damaged:
        group["done"][region] = np.zeros(tuple(s.stop - s.start for s in region), dtype=np.int8)
    for name in tmpl.coords:
        if name in group:
            group[name][...] = np.asarray(tmpl[name].values, dtype=group[name].dtype)


def load(path: str):
    """The whole store as an in-memory Dataset.

    Read without dask (``chunks=None``): loading must not depend on whatever dask scheduler the
    process holds as its default (a client to a scheduler that went away blocks a dask-backed
    load forever)."""
    import xarray as xr

    with xr.open_zarr(path, consolidated=False, chunks=None) as ds:
        return ds.load()

"""``sweep``: run a target over a grid of settings, in process or on a Dask cluster, with resume.

The grid is cut into regions (N-D boxes of points = the store's chunks, ``grid.region_chunks``).
A region is computed as one unit — in one batch when the target has a batched kernel — and,
with a store, written as soon as it is finished (``store.write_region``), so progress is
durable region by region.  ``resume=True`` recomputes only the regions whose ``done`` mask is
not set.  With a Dask scheduler each missing region is one task; workers write their own
regions to the shared store (or, without a store, return them to the client).
"""
from __future__ import annotations

from ..backends import get_backend

import os
import time

import numpy as np

from .._resources import check_grid
from .._progress import progress as report_progress
from ..progress import reports
from ..errors import ParameterError
from . import store as _store
from .grid import RUN_SETTINGS, SweepSpec, make_sweep_spec, region_chunks, region_points, region_table, regions
from .targets import get_target, model_and_input

#: Points per region when the target has a batched kernel (one batch per region) and when not.
REGION_SIZE_BATCHED = 64
REGION_SIZE = 8


def default_region_size(spec: SweepSpec, target, backend, batched: bool = True) -> int:
    """Points per region when the caller gives none: for a target with a batched kernel the
    backend's own answer (``Backend.sweep_region_size`` for the grid's largest hidden size,
    steps and K — a GPU fills a share of its free memory, so one region is one launch), else
    ``REGION_SIZE_BATCHED``; ``REGION_SIZE`` for per-point targets."""
    if not (batched and target.batched is not None):
        return REGION_SIZE
    from ..backends import get_backend

    settings = spec.point((0,) * len(spec.axes))
    for axis in spec.axes:
        for name, vals in zip(axis.names, axis.values):
            if name in ("hidden", "steps", "K") and all(isinstance(v, (int, np.integer)) for v in vals):
                settings[name] = max(vals)
    try:
        model, x = model_and_input(split_settings(settings, target)[0])
    except ParameterError:  # a bad setting: validate_points names it, with where it was given
        return REGION_SIZE_BATCHED
    size = get_backend(backend).sweep_region_size(model.state_size, x.shape[0], model.step_cost().inner_steps)
    return REGION_SIZE_BATCHED if size is None else int(max(1, size))


def split_settings(settings: dict, target) -> tuple[dict, dict]:
    """(run settings for ``model_and_input``, the target's own options)."""
    opts = {k: v for k, v in settings.items() if k in target.options}
    run = {k: v for k, v in settings.items() if k not in target.options}
    return run, opts


def compute_region(spec: SweepSpec, region: tuple, backend, batched: bool = True, memo=None) -> dict:
    """The values of one region: name → array (region shape + extra dims), with ``computed_at``.
    ``backend``: a Backend (passed down as it is) or a name (a Dask task's: looked up here, once).
    Inside the backend's ``region()`` (the numba backend splits no work between threads of its
    own there: a sweep's workers are its parallelism).  ``memo``: what a vectorised target keeps
    between the regions of one sweep (``columns.Memo``; None: a fresh one)."""
    be = get_backend(backend)
    with be, be.region():
        return _compute_region(spec, region, be, batched, memo)


def _compute_region(spec: SweepSpec, region: tuple, backend, batched: bool, memo=None) -> dict:
    target = get_target(spec.analysis)
    shape = tuple(s.stop - s.start for s in region)
    if batched and target.vectorised is not None:   # the whole region from its settings as columns
        table = region_table(spec, region, memo)
        return _assemble(target, table.point(0), shape, target.vectorised(table, backend), np.full(shape, time.time()))
    pts = region_points(spec, region)
    pairs = [split_settings(s, target) for _, s in pts]
    if batched and target.batched is not None:
        results = target.batched(pairs, backend)
        stamps = [time.time()] * len(pts)
    else:
        results, stamps = [], []
        for run, opts in pairs:
            results.append(target.compute(run, opts, backend))
            stamps.append(time.time())
    columns = {}
    for name, var in target.variables_for(pts[0][1]).items():
        extra = tuple(n for _, n in var.dims)
        arr = np.empty((len(pts),) + extra, dtype=np.dtype(var.dtype))
        for i, res in enumerate(results):
            if name not in res:
                raise ValueError(f"sweep target {target.name!r} returned no {name!r} for {pts[i][1]}")
            v = np.asarray(res[name])
            if v.shape != extra:
                raise ValueError(f"sweep target {target.name!r}: {name!r} has shape {v.shape}, declared {extra}")
            arr[i] = v
        columns[name] = arr
    return _assemble(target, pts[0][1], shape, columns, np.asarray(stamps, dtype=np.float64))


def _assemble(target, first: dict, shape: tuple, columns: dict, stamps) -> dict:
    """The region's arrays (region shape + each variable's extra dims) from one array per variable
    over the region's points in C order, checked against the declared variables."""
    n = int(np.prod(shape, dtype=np.int64))
    out = {}
    for name, var in target.variables_for(first).items():
        extra = tuple(k for _, k in var.dims)
        if name not in columns:
            raise ValueError(f"sweep target {target.name!r} returned no {name!r}")
        v = np.asarray(columns[name])
        if v.shape != (n,) + extra:
            raise ValueError(f"sweep target {target.name!r}: {name!r} has shape {v.shape}, declared {(n,) + extra}")
        out[name] = v.astype(np.dtype(var.dtype), copy=False).reshape(shape + extra)
    out["computed_at"] = np.asarray(stamps, dtype=np.float64).reshape(shape)
    return out


def _region_task(spec, region, backend, batched, path, variables):
    """One Dask task: compute a region; write it to the store (return None) or return it.

    Dask supplies the parallelism (one task per worker thread), so numba's own threads are
    set to 1 for this thread: a worker per core then uses every core without oversubscribing.
    """
    import numba

    numba.set_num_threads(1)
    values = compute_region(spec, region, backend, batched)
    if path is None:
        return values
    _store.write_region(path, spec.dims, region, values, variables)
    return None


def _where(spec: SweepSpec, name: str) -> str:
    for axis in spec.axes:
        if name in axis.names:
            return f"grid.{name}" if not axis.zipped else f"zip.{axis.dim}.{name}"
    return f"fixed.{name}" if name in dict(spec.fixed) else name


def validate_points(spec: SweepSpec, target) -> None:
    """Build the model and input of every axis value (others at their first value), and run the
    target's option checks, so a bad value fails before any work, naming where it was given."""
    base = [0] * len(spec.axes)
    seen = set()
    for a, axis in enumerate(spec.axes):
        for i in range(axis.size):
            idx = list(base)
            idx[a] = i
            settings = spec.point(tuple(idx))
            key = tuple(sorted((k, v) for k, v in settings.items()))
            if key in seen:
                continue
            seen.add(key)
            run, opts = split_settings(settings, target)
            try:
                model, x = model_and_input(run)
                if target.validate is not None:
                    target.validate(model, x, opts)
            except ParameterError as exc:
                raise ParameterError(_where(spec, exc.param), exc.message) from None


def _attrs(spec: SweepSpec, backend: str, command, chunks) -> dict:
    from .._dataset import base_attrs, clean_attr

    attrs = {k: clean_attr(v) for k, v in spec.fixed}
    attrs.update(base_attrs(backend, command))
    attrs.update({"analysis": spec.analysis, "sweep_dims": ",".join(spec.dims), "sweep_spec": spec.fingerprint(),
                  "sweep_chunks": ",".join(map(str, chunks))})
    return attrs


#: Seconds a scheduler address has to accept a connection and answer as a Dask scheduler.
SCHEDULER_TIMEOUT = 10.0


def _host_port(address: str):
    """(host, port) of a TCP scheduler address (``tcp://`` or ``tls://`` or none; port 8786 when
    none is given), or None for another protocol or an address this does not read."""
    text = address.strip()
    for scheme in ("tcp://", "tls://"):
        if text.startswith(scheme):
            text = text[len(scheme):]
    if "://" in text or "/" in text:
        return None
    if text.startswith("["):                        # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    try:
        return (host, int(port) if port else 8786) if host else None
    except ValueError:
        return None


def _why_unreachable(address: str, timeout: float):
    """Why no Dask scheduler can be used at ``address`` (None: one answered within ``timeout``).

    First, for a TCP address, whether a connection opens at all — a refused port or an unknown
    host fails at once.  Then a Dask client's handshake, within the deadline, on an event loop of
    its own in a thread of its own: a client that fails there is closed there.  (A synchronous
    ``Client`` that fails in its constructor is left half made: distributed 2026.8 then closes it
    from ``Client.__del__`` at exit, waiting 2 × its timeout and printing a traceback; one that
    reaches an endpoint which accepts and never answers does not return at all.)"""
    import asyncio
    import socket
    import threading

    hp = _host_port(address)
    if hp is not None:
        try:
            socket.create_connection(hp, timeout=timeout).close()
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
    from distributed import Client

    found = []

    async def handshake():
        client = Client(address, asynchronous=True, timeout=timeout, set_as_default=False)
        try:
            await asyncio.wait_for(client, timeout)
        except BaseException as exc:   # noqa: BLE001 — whatever it is, it is the reason
            found.append(f"{type(exc).__name__}: {exc}" if str(exc) else f"no answer as a Dask scheduler within "
                                                                          f"{timeout:g} s ({type(exc).__name__})")
        try:
            await asyncio.wait_for(client.close(), 2.0)
        except BaseException:          # noqa: BLE001 — closing a client that never started
            pass

    worker = threading.Thread(target=lambda: asyncio.run(handshake()), daemon=True, name="dynlab-scheduler-probe")
    worker.start()
    worker.join(timeout + 5.0)
    if worker.is_alive():
        return f"no answer as a Dask scheduler within {timeout:g} s"
    return found[0] if found else None


def _client(scheduler, dask_options):
    """(client, what to close afterwards): a ``Client`` given by the caller is theirs (nothing to
    close); one dynlab opens — on a ``LocalCluster`` it starts, or to a scheduler address — is
    closed when the sweep ends (with the cluster), so no client of ours stays the process's
    default dask scheduler.  An address is tried first (``_why_unreachable``), so that one that
    cannot be used fails in one line, at once, with nothing left behind."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ParameterError("scheduler", "needs dask.distributed (pip install 'dynlab[dask]')") from None
    if isinstance(scheduler, Client):
        return scheduler, None
    if scheduler == "local":
        opts = {"n_workers": os.cpu_count() or 1, "threads_per_worker": 1, "dashboard_address": None}
        opts.update(dask_options or {})
        cluster = LocalCluster(**opts)
        return Client(cluster, set_as_default=False), cluster
    address = str(scheduler)
    why = _why_unreachable(address, SCHEDULER_TIMEOUT)
    if why is None:
        try:   # never the process's default (distributed 2026.8 leaves even a failed one as the default)
            client = Client(address, timeout=f"{SCHEDULER_TIMEOUT:g}s", set_as_default=False)
            return client, client
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
    why = " ".join(why.split())
    raise ParameterError("scheduler", f"cannot connect to {scheduler!r} ({why[:300]})")


#: The stage the sweep reports (``dynlab.progress``).
STAGE = "sweep (points)"


@reports
def sweep(analysis, grid=None, *, fixed=None, zipped=None, seeds=None, store=None, resume=False, backend=None,
          scheduler=None, region_size=None, batched=True, progress=None, dask_options=None, command=None):
    """Compute one analysis target over a grid of settings; one dimension per swept setting.

    Parameters
    ----------
    analysis : str
        A registered target (``dynlab.sweep.TARGETS``): ``simulate``, ``gradient_norms``,
        ``lyapunov``, ``irnn_equilibrium``, … (see ``dynlab.sweep.targets`` to add one).
    grid : dict setting → list of values
        Cartesian axes, e.g. ``{"K": [1, 5, 10], "eta": [0.1, 0.5]}`` (``dynlab.sweep.grid``
        lists the settings: model, input and the target's options).
    fixed : dict setting → value
        Settings held fixed (attrs of the result); ``model`` defaults to irnn, ``seed`` to 0.
    zipped : dict dim → {setting: values}, optional
        Settings varied together along one dimension ``dim``.
    seeds : int or list of int, optional
        Repeats: a ``seed`` dimension (n → seeds 0..n−1); the seed draws weights and input.
    store : path, optional
        A Zarr store written region by region as points finish (module ``dynlab.sweep.store``).
        An existing path is never overwritten: it is an error unless ``resume=True``, and then
        it must hold this same sweep; only its missing regions are computed (``resume=True``
        on a path that does not exist yet starts the sweep there).  The store is created
        atomically, locked for the run (a second writer refuses, naming the holder's PID),
        and verified on resume: regions whose chunks are unreadable, missing or fail their
        checksums are recomputed (listed in the attr ``regions_repaired``).
    backend : "numba" (default) | "numpy" | "cupy"
        Batched kernels: numba's prange kernel, the reference's NumPy loops, or the GPU's fused
        kernels; targets without one call the public analysis with this backend per point.
    scheduler : None (in process) | "local" (a distributed.LocalCluster) | address | Client
    region_size : int — points per region (chunk); default: the backend's for batched targets
        (``default_region_size``: the GPU backend sizes it from its free memory, the CPU ones 64),
        else 8.
    batched : bool — False computes every point through the target's per-point function.
    progress : None, bool or callable(stage, done, total), optional — a progress meter
        (``dynlab.progress``), told the points done after every region (stage "sweep (points)";
        a resumed sweep starts at the points already done).  None: a bar on stderr once the
        sweep has run a few seconds (nothing when quiet); False: nothing; True: a bar at once.
    dask_options : dict, optional — keyword arguments of the LocalCluster for "local".

    Returns
    -------
    xarray.Dataset: the target's variables over the sweep dimensions (then their own), the
    swept values as coordinates, ``done`` and ``computed_at`` per point, attrs with the fixed
    settings, ``analysis``, ``backend``, ``dynlab_version``, ``command``, ``sweep_spec``; the
    attr ``points_computed`` counts the points this call computed.

    Example
    -------
    >>> res = dl.sweep("gradient_norms", {"K": [1, 5, 10], "eta": [0.1, 0.5]},
    ...                fixed={"model": "irnn", "hidden": 8, "steps": 200}, seeds=2)
    >>> res.ratio.sel(K=10).mean("seed")
    """
    spec = make_sweep_spec(analysis, grid, fixed=fixed, zipped=zipped, seeds=seeds)
    target = get_target(spec.analysis)
    # before the store, the lock or any array: a grid whose results cannot be held is refused
    check_grid(spec.size, len(target.variables_for(spec.point((0,) * len(spec.axes)))) + 2,
               "×".join(str(n) for n in spec.shape) or "1")
    be = get_backend(backend)      # resolved once: the object goes down; its name to the attrs and to Dask
    backend = be.name
    if region_size is None:
        region_size = default_region_size(spec, target, be, batched)
    if isinstance(region_size, bool) or not isinstance(region_size, (int, np.integer)) or region_size < 1:
        raise ParameterError("region_size", f"must be a positive integer, got {region_size!r}")
    path = None if store is None else os.fspath(store)
    fingerprint = spec.fingerprint()
    lock = None
    client = cluster = None
    try:
        if path is not None:
            lock = _store.StoreLock(path)  # one writer: a second sweep on this store refuses here
            _store.clean_partials(path)
        if path is not None and resume and not os.path.exists(path):
            resume = False  # killed before the store existed: nothing to continue, start it
        if path is not None and not resume and os.path.exists(path):
            raise ParameterError("store", f"{path} already exists; resume it (--resume) or choose another path")
        if not resume:
            validate_points(spec, target)
        if scheduler is not None:  # connect before the store is made: a bad scheduler leaves nothing behind
            client, cluster = _client(scheduler, dask_options)
        repaired = []
        if path is not None and resume:
            _store.open_existing(path, fingerprint)
            chunks = _store.store_chunks(path)
        else:
            chunks = region_chunks(spec.shape, region_size)
        variables = target.variables_for(spec.point((0,) * len(spec.axes)))
        tmpl, var_chunks = _store.template(spec, target, chunks, _attrs(spec, backend, command, chunks))
        if path is not None and resume:
            health = _store.verify(path)
            repaired = [why for _, why in health["damaged"]]
            _store.repair(path, health["damaged"], tmpl)
            done = _store.read_done(path)
        else:
            done = np.zeros(spec.shape, dtype=bool)
            if path is not None:
                _store.create(path, tmpl, var_chunks, chunks)
        todo = [r for r in regions(spec.shape, chunks) if not done[r].all()]
        total = spec.size
        n_done = int(done.sum())
        # without a store, results are assembled in memory
        mem = None if path is not None else {name: tmpl[name].values.copy() for name in list(variables) + ["computed_at"]}
        computed = 0

        def finished(region, values):
            nonlocal n_done, computed
            if mem is not None:
                for name, arr in values.items():
                    mem[name][region] = arr
                done[region] = True
            npts = int(np.prod([s.stop - s.start for s in region]))
            n_done += npts
            computed += npts
            report_progress(STAGE, n_done, total)

        report_progress(STAGE, n_done, total)
        if scheduler is None:
            from .columns import Memo

            memo = Memo(model_and_input)   # models and inputs built once for the whole sweep
            with be:               # the backend's policy (BLAS threads) set once, not per region
                for region in todo:
                    values = compute_region(spec, region, be, batched, memo)
                    if path is not None:
                        _store.write_region(path, spec.dims, region, values, variables)
                    finished(region, values)
        else:
            from distributed import as_completed

            futures = {client.submit(_region_task, spec, region, backend, batched, path, variables, pure=False): region
                       for region in todo}
            for fut in as_completed(futures, loop=client.loop):   # our client, not the default
                finished(futures[fut], fut.result())
    finally:
        if cluster is not None:      # ours: the client (and the LocalCluster) dynlab opened
            client.close()
            if cluster is not client:
                cluster.close()
        if lock is not None:
            lock.release()
    if path is not None:
        ds = _store.load(path)
    else:
        ds = tmpl.copy()
        for name, arr in mem.items():
            ds[name].values[...] = arr
        ds["done"].values[...] = done.astype(np.int8)
    ds.attrs["points_computed"] = computed
    ds.attrs["result"] = "sweep"
    if repaired:
        ds.attrs["regions_repaired"] = "; ".join(repaired)
    return ds


def sweep_spec_settings() -> tuple:
    """The run settings every target understands (for --help and error messages)."""
    return tuple(RUN_SETTINGS)

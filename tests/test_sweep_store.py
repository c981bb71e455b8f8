"""The crash-safe sweep store (dynlab/sweep/store.py, module docstring): atomic creation, one
writer, checksums, ``sweep --verify``, and resume after a SIGKILL at every step of the write
protocol — the result must equal an uninterrupted run bit for bit.

Every comparison here is exact (``assert_array_equal``): a resumed point is computed by the
same code on the same settings as in the uninterrupted run, so any difference is lost or
garbage data, not rounding.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

import dynlab as dl
from dynlab.cli import main
from dynlab.errors import ParameterError
from dynlab.sweep import store as st

SPEC = """analysis = "gradient_norms"
[model]
model = "irnn"
hidden = 3
[input]
steps = 60
[grid]
K = [1, 2, 5]
eta = [0.1, 0.5]
[repeat]
seeds = 4
"""
GRID = {"K": [1, 2, 5], "eta": [0.1, 0.5]}
FIXED = {"model": "irnn", "hidden": 3, "steps": 60}
VARS = ("ratio", "log_ratio", "log_jac_norm_1", "log_step_norm_T", "diverged_at")
REGION = 2  # 24 points → 12 regions


@pytest.fixture(scope="module")
def reference():
    return dl.sweep("gradient_norms", GRID, fixed=FIXED, seeds=4, region_size=REGION)


def _equal(path, ref):
    final = st.load(path)
    assert final["done"].all()
    for v in VARS:
        np.testing.assert_array_equal(final[v].values, ref[v].values, err_msg=v)
    for c in ref.coords:
        np.testing.assert_array_equal(final[c].values, ref[c].values, err_msg=c)
    assert st.verify(path)["damaged"] == []


def _spec(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text(SPEC)
    return str(p)


def _cli(args):
    return CliRunner().invoke(main, args)


# ---------------------------------------------------------------- kills at every step
KILL_POINTS = ["create", "data:1", "done:1", "data:2", "done:5", "data:12", "done:12"]


@pytest.mark.slow
@pytest.mark.parametrize("at", KILL_POINTS)
def test_kill_at_each_step_of_the_protocol_then_resume_equals_uninterrupted(at, tmp_path, reference):
    """SIGKILL while the template is written (before its rename), between a region's data and
    its done mark, and after its done mark: the store is absent or resumable, and --resume
    finishes it to the uninterrupted result bit for bit."""
    spec, out = _spec(tmp_path), str(tmp_path / "k.zarr")
    env = dict(os.environ, **{st._KILL_ENV: at})
    proc = subprocess.run([sys.executable, "-m", "dynlab.cli", "sweep", spec, "--out", out, "--region-size",
                           str(REGION), "-q"], env=env, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert not os.path.exists(out + st.LOCK_SUFFIX) or st.lock_holder(out) is None  # the kernel dropped the lock
    if at == "create":
        assert not os.path.exists(out)  # never a half-written store under the store's name
        assert [n for n in os.listdir(tmp_path) if st.PARTIAL_SUFFIX in n]  # only the partial one
    r = _cli(["sweep", spec, "--out", out, "--resume", "-q"])
    assert r.exit_code == 0, r.output
    _equal(out, reference)
    assert not [n for n in os.listdir(tmp_path) if st.PARTIAL_SUFFIX in n]  # the partial one was cleaned


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.3, 0.8, 1.5, 2.5])
def test_kill_at_timed_instants_then_resume_equals_uninterrupted(delay, tmp_path, reference):
    """SIGKILL at fixed wall-clock instants (from interpreter start-up to mid-run); whatever
    state that leaves, a fresh run or --resume ends with the uninterrupted result."""
    spec, out = _spec(tmp_path), str(tmp_path / "t.zarr")
    proc = subprocess.Popen([sys.executable, "-m", "dynlab.cli", "sweep", spec, "--out", out, "--region-size",
                             str(REGION), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    r = _cli(["sweep", spec, "--out", out, "--resume", "-q"])
    assert r.exit_code == 0, r.output
    _equal(out, reference)


# ---------------------------------------------------------------- damaged stores
def _chunk(out, var, *idx):
    return os.path.join(out, var, "c", *map(str, idx))


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(max(1, os.path.getsize(path) // 3))


DAMAGE = {
    "truncated data chunk": lambda out: _truncate(_chunk(out, "ratio", 1, 0, 0)),
    "garbage data chunk": lambda out: open(_chunk(out, "log_ratio", 0, 1, 1), "wb").write(os.urandom(64)),
    "overwritten by another region's chunk": lambda out: shutil.copy(_chunk(out, "log_jac_norm_1", 0, 0, 0),
                                                                     _chunk(out, "log_jac_norm_1", 2, 1, 1)),
    "deleted data chunk": lambda out: os.remove(_chunk(out, "log_step_norm_T", 1, 1, 0)),
    "deleted integer chunk (all fill value)": lambda out: os.remove(_chunk(out, "diverged_at", 2, 0, 0)),
    "deleted computed_at chunk": lambda out: os.remove(_chunk(out, "computed_at", 0, 0, 1)),
    "deleted checksum chunk": lambda out: os.remove(_chunk(out, "checksum", 1, 0, 1)),
    "truncated checksum chunk": lambda out: _truncate(_chunk(out, "checksum", 2, 1, 0)),
    "deleted done chunk": lambda out: os.remove(_chunk(out, "done", 0, 1, 0)),
    "truncated done chunk": lambda out: _truncate(_chunk(out, "done", 1, 1, 1)),
    "truncated coordinate": lambda out: _truncate(_chunk(out, "eta", 0)),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_store_is_detected_named_and_repaired(kind, tmp_path, reference):
    spec, out = _spec(tmp_path), str(tmp_path / "d.zarr")
    assert _cli(["sweep", spec, "--out", out, "--region-size", str(REGION), "-q"]).exit_code == 0
    assert _cli(["sweep", "--verify", out]).exit_code == 0
    DAMAGE[kind](out)
    v = _cli(["sweep", "--verify", out])
    not_done = kind.startswith("deleted done")  # a region whose done mark is gone is simply not done
    if not_done:
        assert v.exit_code == 0 and "23/24 points" not in v.output and "damaged region(s)" in v.output
    else:
        assert v.exit_code == 1, (kind, v.output)
        assert "damaged" in v.output.splitlines()[1] and "Traceback" not in v.output
    r = _cli(["sweep", spec, "--out", out, "--resume", "-q"])
    assert r.exit_code == 0, r.output
    _equal(out, reference)


def test_verify_names_the_variable_and_the_region(tmp_path):
    spec, out = _spec(tmp_path), str(tmp_path / "n.zarr")
    _cli(["sweep", spec, "--out", out, "--region-size", str(REGION), "-q"])
    os.remove(_chunk(out, "log_ratio", 2, 0, 1))
    _truncate(_chunk(out, "ratio", 0, 1, 0))
    v = _cli(["sweep", "--verify", out])
    assert v.exit_code == 1
    assert "[K=2:3, eta=0:1, seed=2:4]" in v.output and "chunk missing: log_ratio" in v.output
    assert "[K=0:1, eta=1:2, seed=0:2]: ratio unreadable" in v.output
    assert "2 damaged region(s)" in v.output


# ---------------------------------------------------------------- one writer; nothing left behind
def test_a_second_writer_refuses_naming_the_holder(tmp_path):
    out = str(tmp_path / "l.zarr")
    with st.StoreLock(out):
        with pytest.raises(ParameterError, match=rf"being written by another dynlab sweep \(pid {os.getpid()} on"):
            dl.sweep("gradient_norms", GRID, fixed=FIXED, store=out, region_size=REGION)
        assert not os.path.exists(out)
        assert st.lock_holder(out).startswith(f"pid {os.getpid()}")
    assert st.lock_holder(out) is None and not os.path.exists(out + st.LOCK_SUFFIX)
    ds = dl.sweep("gradient_norms", GRID, fixed=FIXED, store=out, region_size=REGION)
    assert ds["done"].all()


def test_cli_second_writer_is_one_line_exit_2(tmp_path):
    spec, out = _spec(tmp_path), str(tmp_path / "c.zarr")
    _cli(["sweep", spec, "--out", out, "-q"])
    with st.StoreLock(out):
        r = _cli(["sweep", spec, "--out", out, "--resume"])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: --out:") and f"pid {os.getpid()}" in lines[0]


def test_a_failed_scheduler_leaves_no_store(tmp_path):
    pytest.importorskip("distributed")
    out = str(tmp_path / "s.zarr")
    with pytest.raises(ParameterError, match="scheduler"):
        dl.sweep("gradient_norms", GRID, fixed=FIXED, store=out, scheduler="nosuch://x")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError):     # nor a half-made client left as the process's dask scheduler
        __import__("distributed").default_client()


def _answering_garbage():
    """A local TCP port that accepts connections and answers with bytes that are no Dask message
    (what an address taken by another service looks like to a client): its port."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            conn, _ = srv.accept()
            conn.sendall(b"\xff" * 128)

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def _closed_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("kind", ["refused", "garbage", "unknown-host"])
def test_an_unreachable_scheduler_is_one_line_and_exits_at_once(tmp_path, kind):
    """``dynlab sweep --scheduler ADDRESS`` where no Dask scheduler answers: exit 2, one line naming
    --scheduler, and the process gone within seconds — a refused port or an unknown host at once, a
    port that answers garbage after the failed handshake.  (Before: the line came after 10 s, and
    under distributed 2026.8 the half-made client's ``__del__`` then held the process another 20 s
    and printed a 10-line traceback.)  In a child process, so its exit is part of what is timed."""
    pytest.importorskip("distributed")
    address = {"refused": lambda: f"tcp://127.0.0.1:{_closed_port()}", "garbage": lambda: f"127.0.0.1:{_answering_garbage()}",
               "unknown-host": lambda: "tcp://no-such-host.invalid:8786"}[kind]()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dynlab.cli", "sweep", _spec(tmp_path), "--scheduler", address],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    elapsed = time.perf_counter() - t0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("Error: --scheduler:") and address in lines[0], lines
    assert elapsed < 8.0, f"{elapsed:.1f} s"          # ≈ 1.5 s of it starting Python and dynlab
    assert os.listdir(tmp_path) == ["g.toml"]         # nothing written


def test_a_store_loads_without_the_process_dask_scheduler(tmp_path, reference):
    """Loading a store must not go through dask's default scheduler: a client to a scheduler that
    went away, left as the process's default, blocked ``sweep``'s final load forever (seen with
    distributed 2026.8 in the full suite).  Here the default scheduler raises when used."""
    dask = pytest.importorskip("dask")
    out = str(tmp_path / "s.zarr")
    dl.sweep("gradient_norms", GRID, fixed=FIXED, seeds=4, region_size=REGION, store=out)

    def refuse(*args, **kwargs):
        raise AssertionError("the store was loaded through dask's default scheduler")

    with dask.config.set(scheduler=refuse):
        _equal(out, reference)
        ds = dl.sweep("gradient_norms", GRID, fixed=FIXED, seeds=4, region_size=REGION, store=out, resume=True)
    for v in VARS:
        np.testing.assert_array_equal(ds[v].values, reference[v].values, err_msg=v)


def test_a_sweep_on_a_scheduler_address_leaves_no_client_behind(tmp_path):
    """The client dynlab opens to a scheduler address is closed when the sweep ends: it does not
    stay the process's default dask scheduler."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl:
        ds = dl.sweep("gradient_norms", GRID, fixed=FIXED, region_size=REGION, scheduler=cl.scheduler_address)
        assert int(ds["done"].values.min()) == 1
        with pytest.raises(ValueError):
            distributed.default_client()


def test_stores_without_checksums_still_resume(tmp_path, reference):
    """A store written before checksums existed (no ``checksum`` array) resumes; verify says it
    can check readability only."""
    spec, out = _spec(tmp_path), str(tmp_path / "o.zarr")
    _cli(["sweep", spec, "--out", out, "--region-size", str(REGION), "-q"])
    shutil.rmtree(os.path.join(out, "checksum"))
    with pytest.warns(UserWarning, match="Consolidated metadata"):
        zarr.consolidate_metadata(out)  # as the older dynlab wrote it
    assert "checksum" not in zarr.open_group(out, mode="r")
    v = _cli(["sweep", "--verify", out])
    assert v.exit_code == 0 and "no checksums" in v.output
    _truncate(_chunk(out, "ratio", 1, 1, 1))
    assert _cli(["sweep", "--verify", out]).exit_code == 1  # readability is still checked
    r = _cli(["sweep", spec, "--out", out, "--resume", "-q"])
    assert r.exit_code == 0, r.output
    final = st.load(out)
    for v in VARS:
        np.testing.assert_array_equal(final[v].values, reference[v].values, err_msg=v)


def test_verify_refusals_are_one_line(tmp_path):
    spec = _spec(tmp_path)
    for args, opt in [(["sweep", "--verify", str(tmp_path / "none.zarr")], "--verify"),
                      (["sweep", spec, "--verify", str(tmp_path)], "SPEC.toml"),
                      (["sweep", "--verify", str(tmp_path), "--resume"], "--resume"),
                      (["sweep", "--verify", str(tmp_path)], "--verify"),
                      (["sweep"], "SPEC.toml")]:
        r = _cli(args)
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"Error: {opt}"), (args, r.output)

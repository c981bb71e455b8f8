"""``--model gru|lstm|stack`` through the CLI (simulate, phase, gradients, train, sweep): every
output equals the library's own call on the same model and input; partition and converge refuse
them with one line naming --model."""
import numpy as np
import pytest

import dynlab as dl
from conftest import cli_ok as ok, cli_run as run
from dynlab.train.loop import train_model
from dynlab.spec import DEFAULT_INPUT

STACK = ("--set", "cell=lstm", "--set", "layers=2")


def _model(name, D, d=1, seed=0, **kw):
    return dl.make_model(name, D, d, seed=seed, **kw)


def _input(T, seed=0, variance=1.0):
    return dl.tasks.make_input(DEFAULT_INPUT, T, 1, seed=seed, variance=variance)  # the commands' default input


@pytest.mark.parametrize("name,args,kw", [("gru", (), {}), ("lstm", (), {}),
                                          ("stack", STACK, {"cell": "lstm", "layers": 2})])
def test_simulate_equals_the_library(tmp_path, name, args, kw):
    data = tmp_path / "s.nc"
    ok("simulate", "--model", name, *args, "--hidden", 3, "--steps", 15, "--seed", 2, "--data", data)
    ds = dl.read_dataset(data)
    m = _model(name, 3, seed=2, **kw)
    want = dl.simulate(m, _input(15, seed=2))
    assert ds.sizes["unit"] == m.state_size
    np.testing.assert_array_equal(ds["h"].values, want["h"].values)
    assert ("part" in ds.coords) == ("part" in want.coords) == (name != "gru")   # h/c labels where c exists
    if "part" in want.coords:
        assert list(ds["part"].values) == list(want["part"].values)
    rebuilt = dl.model_from_dataset(ds)
    for k, v in m.params().items():
        np.testing.assert_array_equal(rebuilt.params()[k], v)


def test_phase_compares_gru_lstm_stack_and_rnn_on_their_outputs(tmp_path):
    """Entries of different state sizes side by side: each entry's h is its output h (D units)."""
    data = tmp_path / "p.nc"
    ok("phase", "--model", "lstm", "--compare", "rnn,gru,stack", "--hidden", 3, "--steps", 12, "--data", data)
    ds = dl.read_dataset(data)
    x = _input(12, variance=1.0)         # phase's default input: noise of variance 1
    np.testing.assert_array_equal(ds["x"].values, x)
    for entry in ("lstm", "rnn", "gru", "stack"):
        m = dl.model_from_dataset(ds, entry=entry)
        assert m.name == entry and m.hidden == 3
        h = dl.simulate(m, x)["h"].values[:, m.output_slice]
        np.testing.assert_array_equal(ds["h"].sel(model=entry).values, h)
    assert ds.sizes["lstm__gate_row"] == 12 and ds.sizes["gru__gate_row"] == 9


def test_gradients_lyapunov_spectrum_of_the_whole_state(tmp_path):
    """--lyapunov: an LSTM has 2D exponents (state [h; c]); an RNN entry beside it D (NaN after)."""
    data = tmp_path / "g.nc"
    ok("gradients", "--model", "lstm", "--compare", "rnn", "--lyapunov", "--hidden", 3, "--steps", 20, "--data", data)
    ds = dl.read_dataset(data)
    x = _input(20)
    lstm, rnn = dl.model_from_dataset(ds, entry="lstm"), dl.model_from_dataset(ds, entry="rnn")
    assert ds.sizes["exponent"] == 6
    np.testing.assert_array_equal(ds["lyapunov"].sel(model="lstm").values, dl.lyapunov(lstm, x, k=6)["lyapunov"].values)
    lam = ds["lyapunov"].sel(model="rnn").values
    np.testing.assert_array_equal(lam[:3], dl.lyapunov(rnn, x, k=3)["lyapunov"].values)
    assert np.isnan(lam[3:]).all()
    g = dl.gradient_norms(lstm, x)
    np.testing.assert_array_equal(ds["log_jac_norm"].sel(model="lstm").values, g["log_jac_norm"].values)
    np.testing.assert_array_equal(ds["h"].sel(model="lstm").values, g["h"].values[:, :3])


@pytest.mark.parametrize("name,args,kw", [("gru", (), {}), ("lstm", (), {}),
                                          ("stack", ("--set", "cell=gru", "--set", "layers=2"),
                                           {"cell": "gru", "layers": 2})])
def test_train_equals_the_library_and_resumes(tmp_path, name, args, kw):
    common = ("--task", "adding", "--steps", 6, "--hidden", 4, "--batch", 8, "--record-every", 1, "--lr", 0.01)
    data, w = tmp_path / "h.nc", tmp_path / "w.npz"
    ok("train", *common, "--model", name, *args, "--iterations", 3, "--seed", 1, "--data", data, "--save-weights", w)
    h = dl.read_dataset(data)
    task = dl.tasks.make_task("adding", 6, seed=1)
    m = _model(name, 4, 2, seed=1, **kw)
    lib = train_model(m, task, iterations=3, lr=0.01, batch=8, record_every=1, seed=1)
    np.testing.assert_array_equal(h["loss"].values, lib.history["loss"].values)
    assert np.isfinite(h["loss"].values).all()
    saved = dl.load_model(w)
    assert saved.name == name
    for k, v in lib.model.params().items():
        np.testing.assert_array_equal(saved.params()[k], v)
    data2 = tmp_path / "h2.nc"
    ok("train", "--resume", w, "--iterations", 2, "--data", data2)
    lib5 = train_model(m, task, iterations=5, lr=0.01, batch=8, record_every=1, seed=1)
    np.testing.assert_array_equal(dl.read_dataset(data2)["loss"].values, lib5.history["loss"].values)


@pytest.mark.parametrize("cmd,model,needle", [
    ("partition", "gru", "MASO partition analysis takes rnn"),
    ("partition", "lstm", "MASO partition analysis takes rnn"),
    ("partition", "stack", "MASO partition analysis takes rnn"),
    ("converge", "gru", "iRNN"),
    ("converge", "lstm", "iRNN"),
    ("converge", "stack", "iRNN"),
])
def test_refused_with_one_line_naming_model(cmd, model, needle):
    res = run(cmd, "--model", model, "--hidden", 2, "--steps", 3)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: --model:") and needle in lines[0], lines


def test_stack_settings_belong_to_the_stack():
    res = run("simulate", "--model", "gru", "--set", "cell=lstm", "--steps", 3)
    assert res.exit_code == 2 and "--set cell" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_sweep_spec_file_with_map_models(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('analysis = "gradient_norms"\n[model]\nhidden = 3\n[input]\nsteps = 12\n'
                    '[grid]\nmodel = ["gru", "lstm", "stack"]\n')
    data = tmp_path / "r.nc"
    ok("sweep", spec, "--data", data)
    res = dl.read_dataset(data)
    for name in ("gru", "lstm", "stack"):
        g = dl.gradient_norms(_model(name, 3), _input(12))["log_jac_norm"].values
        assert res["log_jac_norm_1"].sel(model=name).item() == g[0]
        assert res["log_step_norm_T"].sel(model=name).item() == g[-2]


def test_fixed_points_of_a_map_start_on_its_trajectory(tmp_path):
    """``equilibria --fixed-points`` on a GRU starts from the states it visits (the
    FixedPointFinder workflow).  A tanh GRU's state is a convex mix of n ∈ (−1, 1) and h, so
    from h0 = 0 it never leaves the box |h| < 1: every point reported lies in it, and it
    equals the library's call with the same trajectory.  (Random starts spread far outside
    the box used to end in saturated slow points at |h| ≈ 50.)"""
    data = tmp_path / "e.nc"
    ok("equilibria", "--model", "gru", "--hidden", 8, "--fixed-points", 64, "--seed", 0, "--data", data)
    ds = dl.read_dataset(data)
    assert ds.attrs["starts"] == "states of the network's trajectory on the input"
    assert (np.abs(ds["h_eq"].values) < 1).all(), ds["h_eq"].values
    assert "pc_axes" in ds and ds.sizes["point"] >= 1
    m = _model("gru", 8)
    x = _input(ds.attrs["steps"] if "steps" in ds.attrs else 1000, seed=0)
    H = dl.simulate(m, x)["h"].values[:-1]
    want = dl.fixed_points(m, np.zeros(1), n_starts=64, seed=0, trajectories=H)   # at x = 0 by default
    np.testing.assert_array_equal(ds["x"].values, [0.0])
    np.testing.assert_allclose(ds["h_eq"].values, want["h_eq"].values, rtol=0, atol=1e-12)

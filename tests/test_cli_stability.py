"""``dynlab equilibria``, ``spectrum`` and ``converge``: the written Datasets checked against
plain-NumPy recomputations from the stored parameters, closed forms, and one-line errors."""
from __future__ import annotations

import numpy as np
import pytest

import dynlab as dl
from dynlab.analysis.equilibria import eigenvalues_from
from conftest import cli_ok as ok, cli_run as run
from dynlab.models import CTRNN


@pytest.fixture
def neuron(tmp_path):
    """The bistable neuron ġ = −g + σ(8g − 4) saved as weights."""
    return dl.save_model(CTRNN([[8.0]], [[0.0]], [-4.0], activation="sigmoid"), tmp_path / "neuron.npz")


def test_equilibria_sequence_residuals_and_eigenvalues_from_the_file(tmp_path):
    data, out = tmp_path / "eq.nc", tmp_path / "eq.png"
    r = ok("equilibria", "--hidden", 3, "--steps", 25, "--data", data, "--out", out)
    assert "25/25 converged" in r.stdout and out.stat().st_size > 5000
    ds = dl.read_dataset(data)
    U, W, b, alpha = ds.U.values, ds.W.values, ds.b.values, float(ds.alpha)
    s = ds.h_eq.values + ds.h_prev.values          # sign +1
    z = s @ U.T + ds.x.values @ W.T + b
    assert np.abs(alpha * s - np.tanh(z)).max() <= 1e-12
    for m in (0, 24):
        J = (1 - np.tanh(z[m]) ** 2)[:, None] * U - alpha * np.eye(3)
        np.testing.assert_allclose(np.sort_complex(eigenvalues_from(ds.isel(time=m))),
                                   np.sort_complex(np.linalg.eigvals(J)), rtol=0, atol=1e-12)
    # h_prev is the simulated trajectory shifted by one step
    h = dl.simulate(dl.model_from_dataset(ds), ds.x.values)["h"].values
    np.testing.assert_allclose(ds.h_prev.values[1:], h[:-1], rtol=0, atol=1e-15)


def test_equilibria_fixed_points_and_continuation_of_the_bistable_neuron(tmp_path, neuron):
    data = tmp_path / "fp.nc"
    r = ok("equilibria", "--weights", neuron, "--fixed-points", 32, "--data", data, "--out", tmp_path / "fp.png")
    assert "3 roots" in r.stdout and r.stdout.count("certified") == 3
    ds = dl.read_dataset(data)
    g = ds.h_eq.values[:, 0]
    np.testing.assert_allclose(g, 1 / (1 + np.exp(-(8 * g - 4))), rtol=0, atol=1e-12)
    assert ds.stability.values.tolist() == [1, -1, 1]
    data = tmp_path / "bif.nc"
    r = ok("equilibria", "--weights", neuron, "--continue-over", "b", "--range", "-10,2", "--data", data,
           "--out", tmp_path / "bif.png")
    assert r.stdout.count("fold at b") == 2
    ds = dl.read_dataset(data)
    gf = (1 + np.array([-1.0, 1.0]) * np.sqrt(0.5)) / 2       # g(1 − g) = 1/8
    np.testing.assert_allclose(ds.fold_param.values, np.log(gf / (1 - gf)) - 8 * gf, rtol=0, atol=1e-6)


def test_equilibria_reports_non_convergence_with_exit_1_and_keeps_the_data(tmp_path):
    data = tmp_path / "eq.nc"
    r = run("equilibria", "--method", "rk4", "--tol", "1e-300", "--steps", 5, "--data", data)
    assert r.exit_code == 1
    assert "did not converge at 5 of 5 inputs (first at step m=1" in r.stderr
    assert int(dl.read_dataset(data).converged.sum()) == 0


def test_spectrum_writes_eigenvalues_that_recompute_from_the_file(tmp_path):
    data = tmp_path / "sp.nc"
    r = ok("spectrum", "--hidden", 4, "--K", 3, "--batch", 2, "--steps", 30, "--data", data, "--out", tmp_path / "s.png")
    assert "60 points" in r.stdout
    ds = dl.read_dataset(data)
    U, W, b = ds.U.values, ds.W.values, ds.b.values
    # every point at its (batch, time) place: the state of step m is s_m, its input x_m
    assert ds.state.dims == ("batch", "time", "unit") and ds.eig_real.dims == ("batch", "time", "eig")
    assert list(ds.time.values) == list(range(1, 31)) and list(ds.batch.values) == [0, 1]
    s, x = ds.state.values, ds.x.values
    z = s @ U.T + x @ W.T + b
    for bi, t in ((0, 0), (1, 1), (1, 29)):
        J = (1 - np.tanh(z[bi, t]) ** 2)[:, None] * U - np.eye(4)
        np.testing.assert_allclose(np.sort_complex(eigenvalues_from(ds.isel(batch=bi, time=t))),
                                   np.sort_complex(np.linalg.eigvals(J)), rtol=0, atol=1e-12)
    assert (ds.max_real.values < 0).all()   # weight scale 0.5 < α = 1


def test_converge_bound_and_reference_from_the_file(tmp_path):
    data = tmp_path / "cv.nc"
    r = ok("converge", "--hidden", 6, "--eta", 0.5, "--K-max", 40, "--steps", 5, "--data", data,
           "--out", tmp_path / "cv.png")
    assert "holds for every k at 5/5 inputs" in r.stdout
    ds = dl.read_dataset(data)
    U, W, b = ds.U.values, ds.W.values, ds.b.values
    s = ds.h_eq.values + ds.h_prev.values
    assert np.abs(s - np.tanh(s @ U.T + ds.x.values @ W.T + b)).max() <= 1e-13
    np.testing.assert_allclose(ds.error.values[:, 0], np.linalg.norm(ds.h_eq.values, axis=1), rtol=1e-15)
    rho = 0.5 + 0.5 * np.linalg.norm(U, 2)
    assert float(ds.bound_rate) == pytest.approx(rho, rel=1e-14)


@pytest.mark.parametrize("args,option", [
    (("equilibria", "--continue-over", "b"), "--range"),
    (("equilibria", "--continue-over", "q", "--range", "0,1"), "--continue-over"),
    (("equilibria", "--continue-over", "b", "--range", "2,1"), "--range"),
    (("equilibria", "--method", "bisect"), "--method"),
    (("converge", "--model", "rnn"), "--model"),
    (("converge", "--K-max", "0"), "--K-max"),
    (("spectrum", "--at", "nowhere"), "--at"),
])
def test_user_errors_name_the_option(args, option):
    r = run(*args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"Error: {option}") and r.stderr.count("\n") == 1


def test_phase_field_of_a_2d_ctrnn_matches_the_model_vector_field(tmp_path):
    """``dynlab phase`` on a 2-D CTRNN with constant input draws its field by default: the stored
    field is the model's own ``vector_field`` (1e-15), the equilibria are zeros of it (1e-12),
    and the labels agree with the simulation (a stable one attracts a nearby start)."""
    data = tmp_path / "ph.nc"
    r = ok("phase", "--model", "ctrnn", "--weight-scale", 3, "--seed", 3, "--input", "constant", "--steps", 50,
           "--data", data, "--out", tmp_path / "ph.png")
    assert "3 equilibria (2 stable, 1 unstable)" in r.stdout
    ds = dl.read_dataset(data)
    m = dl.model_from_dataset(ds, entry="ctrnn")
    x = ds.x.values[0]
    g1, g2 = np.meshgrid(ds.field_x1.values, ds.field_x2.values)
    V = m.vector_field(np.stack([g1, g2], axis=-1).reshape(-1, 2), x[None]).reshape(g1.shape + (2,))
    np.testing.assert_allclose(ds.field_F1.values, V[..., 0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(ds.field_F2.values, V[..., 1], rtol=0, atol=1e-15)
    assert np.abs(m.vector_field(ds.fp_h.values, x[None])).max() <= 1e-12
    for h, st in zip(ds.fp_h.values, ds.fp_stability.values):
        end = dl.simulate(m, np.tile(x, (300, 1)), h0=h + 1e-4, backend="numpy")["h"].values[-1]
        assert (np.linalg.norm(end - h) < 1e-6) == (st == 1)
    # the nullclines cross at every equilibrium: each F_i changes sign on the grid
    assert (np.diff(np.sign(ds.field_F1.values), axis=1) != 0).any()


def test_phase_field_errors_and_default_off():
    assert run("phase", "--model", "irnn", "--field", "--input", "constant").exit_code == 2
    r = run("phase", "--model", "ctrnn", "--field")
    assert r.exit_code == 2 and r.stderr.startswith("Error: --field: ")

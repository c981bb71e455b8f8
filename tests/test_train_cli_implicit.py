"""`dynlab train --model implicit`: the CLI equals `train_implicit` called directly, prints the
XOR table, and refuses options that have no meaning for the implicit networks."""
import numpy as np
from click.testing import CliRunner

from dynlab.cli import main
from dynlab.io import read_dataset
from dynlab.train.implicit import train_implicit


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_xor_cli_equals_library_call_and_prints_the_table(tmp_path):
    res = run(["train", "--model", "implicit", "--task", "xor", "--iterations", 400, "--data", tmp_path / "x.nc",
               "--save-weights", tmp_path / "w.npz"])
    assert res.exit_code == 0, res.output
    ds = read_dataset(tmp_path / "x.nc")
    _, ref = train_implicit("xor", hidden=2, iterations=400, lr=0.01, seed=0, batch=128)
    assert np.array_equal(ds["loss"].values, ref["loss"].values)
    assert np.array_equal(ds["Y_test"].values, ref["Y_test"].values)
    assert "x1  x2   target Y1   output Y1" in res.output
    rows = [ln.split() for ln in res.output.splitlines() if ln.strip()[:1] in "01" and len(ln.split()) >= 4]
    assert len(rows) == 4
    for r, y in zip(rows, ref["Y_test"].values[:, 0]):
        assert abs(float(r[3]) - y) < 1e-4
    assert (tmp_path / "w.npz").exists()


def test_semi_gradient_and_second_target_through_set(tmp_path):
    res = run(["train", "--model", "implicit", "--task", "xor", "--iterations", 50, "--set", "gradient=semi",
               "--set", "second=or", "--data", tmp_path / "s.nc"])
    assert res.exit_code == 0, res.output
    ds = read_dataset(tmp_path / "s.nc")
    _, ref = train_implicit("xor", gradient="semi", second="or", iterations=50, lr=0.01, seed=0, batch=128)
    assert np.array_equal(ds["loss"].values, ref["loss"].values)
    assert "semi gradient" in res.output


def test_meaningless_options_are_refused_with_one_line():
    for args, opt in ((["--sigma-eps", 1], "--sigma-eps"), (["--K", 3], "--K"), (["--set", "rank=2"], "rank")):
        res = run(["train", "--model", "implicit", "--task", "xor", *args])
        assert res.exit_code == 2
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and opt in lines[0], res.output
    res = run(["train", "--model", "implicit", "--task", "adding"])
    assert res.exit_code == 2 and "--task" in res.output


def test_equilibria_command_solves_implicit_nets_like_the_library(tmp_path):
    import dynlab as dl
    from dynlab.analysis.implicit import implicit_equilibrium

    res = run(["equilibria", "--model", "implicit", "--hidden", 6, "--inputs", 3, "--steps", 20,
               "--data", tmp_path / "e.nc", "--out", tmp_path / "e.png"])
    assert res.exit_code == 0, res.output
    ds = read_dataset(tmp_path / "e.nc")
    m = dl.make_model("implicit", hidden=6, inputs=3, seed=0)
    x = dl.tasks.noise(steps=20, inputs=3, seed=0)   # the command's default input
    ref = implicit_equilibrium(m, x, method="newton")
    assert np.array_equal(ds["h_eq"].values, ref["h_eq"].values)
    assert ds["residual"].max() <= 1e-12 and ds["converged"].all()
    bad = run(["equilibria", "--model", "implicit", "--continue-over", "b", "--range", "0,1"])
    assert bad.exit_code == 2 and "--continue-over" in bad.output

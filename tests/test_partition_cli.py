"""``dynlab partition``: the written Dataset is recomputed through the Python API from the
file alone (model rebuilt from its parameters, same input), and user errors are one line."""
import numpy as np
import pytest

from dynlab.analysis import partition as P
from conftest import cli_ok as ok, cli_run as run
from dynlab.io import model_from_partition, read_dataset


@pytest.mark.parametrize("layers", [1, 2])
def test_partition_writes_codes_regions_and_exact_reconstruction(tmp_path, layers):
    nc, png = tmp_path / "p.nc", tmp_path / "p.png"
    r = ok("partition", "--hidden", 6, "--batch", 5, "--steps", 30, "--input", "noise", "--layers", layers,
           "--activation", "abs", "--embed", "--data", nc, "--out", png)
    assert "reconstruction error" in r.stdout and png.stat().st_size > 5000
    ds = read_dataset(nc)
    assert ds.attrs["layers"] == layers and ds.attrs["activation"] == "abs"
    model = model_from_partition(ds)
    codes = P.partition_codes(model, ds["x"].values)
    np.testing.assert_array_equal(ds["codes"].values, codes)
    want = ("batch", "time", "unit") + (("layer",) if layers > 1 else ())
    assert ds["codes"].dims == want
    assert np.all(np.diff(ds["regions"].values) >= 0)
    assert np.all(ds["reconstruction_error"].values < 1e-12)
    assert ds["embedding_pca"].dims == ("slice", "batch", "coord")
    assert list(ds["slice_time"].values) == [8, 15, 22, 30]


def test_partition_defaults_to_a_relu_rnn_and_labelled_data(tmp_path):
    nc = tmp_path / "p.nc"
    ok("partition", "--dataset", "patterns", "--batch", 12, "--hidden", 4, "--data", nc)
    ds = read_dataset(nc)
    assert ds.attrs["model"] == "rnn" and ds.attrs["activation"] == "relu"
    assert ds["label"].dims == ("batch",) and ds.sizes["batch"] == 12
    assert ds.attrs["dataset"] == "patterns"


@pytest.mark.parametrize("args,option", [
    (("--activation", "tanh"), "--activation"),
    (("--model", "irnn"), "--model"),
    (("--embed",), "--embed"),
    (("--layers", 2, "--model", "fastrnn"), "--layers"),
    (("--layers", 0), "--layers"),
    (("--dataset", "patterns", "--inputs", 3), "--inputs"),
])
def test_partition_user_errors_are_one_line(args, option):
    steps = () if "--dataset" in args else ("--steps", 10)  # the data set fixes the steps: --steps is refused
    r = run("partition", *steps, *args)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {option}"), r.stderr


def test_tsne_option(tmp_path, monkeypatch):
    r = run("partition", "--steps", 10, "--tsne")
    assert r.exit_code == 2 and r.stderr.startswith("Error: --tsne")
    import dynlab.tasks.labelled as labelled

    with monkeypatch.context() as mp:
        mp.setattr(labelled, "have_digits", lambda: False)
        r = run("partition", "--steps", 10, "--batch", 4, "--embed", "--tsne")
        assert r.exit_code == 2 and r.stderr.startswith("Error: --tsne: needs scikit-learn")
    pytest.importorskip("sklearn")
    nc = tmp_path / "p.nc"
    ok("partition", "--steps", 2, "--batch", 8, "--hidden", 3, "--embed", "--tsne", "--data", nc)
    ds = read_dataset(nc)
    assert list(ds["slice_time"].values) == [1, 2]  # T = 2: the slices T/4 … T collapse to 1, 2
    emb = ds["embedding_tsne"].values
    assert emb.shape == (2, 8, 2) and np.all(np.isfinite(emb))

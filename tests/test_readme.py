"""The README is the front door: short, set-up first, and every example runs and shows what it says.

The examples are run as written (``docs/_ext/readme_examples.py``: each ``dynlab`` line through the
installed console script, each Python block as a script) in a scratch folder, and what the README
says of each is checked on the data they write — the same runs that make the README's pictures.
"""
from __future__ import annotations

import importlib.util
import pathlib
import re

import numpy as np
import pytest

import dynlab as dl

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _examples_module():
    spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "docs" / "_ext" / "readme_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_short_with_the_set_up_first():
    lines = README.splitlines()
    assert len(lines) < 200, len(lines)
    sections = [line for line in lines if line.startswith("## ")]
    assert sections[0] == "## Set-up"
    setup = README[README.index("## Set-up"):README.index(sections[1])]
    block = re.search(r"```bash\n(.*?)```", setup, flags=re.S).group(1)
    assert "python -m pip install . && dynlab phase" in block                     # the main job
    assert 'python -m pip install ".[test]" && pytest -q --import-mode=importlib' in block   # what CI runs
    assert "constraints/floors.txt" in setup and ".ci/docs" in setup              # floors; the docs' one command


def test_pictures_and_links_exist():
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README):
        assert (ROOT / target).exists(), target
    pictures = re.findall(r"!\[[^]]*\]\(([^)]+)\)", README)
    assert len(pictures) == 3 and all(p.startswith("docs/_static/readme/") for p in pictures)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    folder = tmp_path_factory.mktemp("readme")
    module = _examples_module()
    blocks = module.examples(README)
    assert [lang for lang, _ in blocks] == ["bash", "bash", "python"]
    done = module.run(blocks, str(folder))
    return folder, done


@pytest.mark.slow
def test_example_1_the_irnn_stays_on_its_curve_and_the_others_do_not(ran):
    folder, done = ran
    ds = dl.read_dataset(folder / "phase.nc")
    assert (folder / "phase.png").exists()
    assert float(ds["eq_residual"].max()) < 1e-3                                 # "below 10⁻³"
    assert f"max {float(ds['eq_residual'].max()):.3g}" in done[0].stdout          # "the command prints it"
    fig = dl.plot.draw(ds)                                                       # "(the zoomed inset)"
    irnn, rnn = fig.axes[0], fig.axes[1]
    insets = [a for a in irnn.child_axes]
    assert len(insets) == 1 and not rnn.child_axes
    np.testing.assert_array_equal(insets[0].collections[0].get_offsets(), ds["s"].values)
    x = ds["x"].values
    for name in ("rnn", "fastrnn"):                                              # "follow no such curve"
        m = dl.model_from_dataset(ds, entry=name)
        h = ds["h"].sel(model=name).values
        eq = dl.equilibrium(m, x, h, method="newton")["h_eq"].values
        assert np.median(np.abs(h - eq).max(axis=1)) > 1e-2, name


@pytest.mark.slow
def test_example_2_gradient_reach(ran):
    folder, done = ran
    ds = dl.read_dataset(folder / "gradients.nc")
    k5 = ds["jac_norm"].sel(model="irnn-K5").values
    assert ds.sizes["time"] == 1000 and np.all((k5 > 1e-2) & (k5 < 1e2))        # within two decades of 1
    assert float(ds["log_jac_norm"].sel(model="rnn")[0]) < -100 * np.log(10)     # below 10⁻¹⁰⁰
    fast = ds["log_jac_norm"].sel(model="fastrnn").values
    assert np.all(np.diff(fast[::100]) > 0) and fast[0] < np.log(1e-3)           # decays steadily
    assert np.isfinite(ds["log_jac_norm"].values).all()
    assert "ratio" in done[1].stdout and "top λ" in done[1].stdout


@pytest.mark.slow
def test_example_3_the_irnn_learns_the_adding_problem_and_a_tanh_rnn_does_not(ran):
    folder, done = ran
    assert (folder / "training.png").exists()
    val = float(re.search(r"val_loss=([0-9.e-]+)", done[2].stdout).group(1))
    assert val < 0.02 and "baseline=0.1667" in done[2].stdout                     # below 0.02; baseline 0.167
    task = dl.make_task("adding", 100)
    rnn = dl.train_model(dl.make_model("rnn", 32, task.inputs, seed=0), task, iterations=300, lr=1e-2, batch=128)
    assert float(rnn.history["val_loss"][-1]) > 0.1                              # "stays at the baseline"

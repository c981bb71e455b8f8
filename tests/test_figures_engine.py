"""What trains a recipe's networks (``dynlab figures make --engine``): the rule of ``auto`` (PyTorch
through ``dl.to_torch`` on a CUDA GPU at paper scale, dynlab's own exact-gradient trainer
otherwise), the record that names the engine, and one quick recipe trained through PyTorch."""
from __future__ import annotations

import sys
import types

import pytest
from click.testing import CliRunner

from dynlab.cli import main
from dynlab.errors import ParameterError
from dynlab.figures import get
from dynlab.figures._recipe import choose_engine, engine_for, engine_words, run_recipe, train_model

DYNLAB = "dynlab exact-gradient BPTT (numba, CPU)"


def _fake_torch(monkeypatch, cuda: bool):
    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(is_available=lambda: cuda)
    monkeypatch.setitem(sys.modules, "torch", fake)


@pytest.mark.parametrize("cuda", [False, True])
def test_auto_trains_through_torch_only_on_a_gpu_at_paper_scale(monkeypatch, cuda):
    _fake_torch(monkeypatch, cuda)
    for scale in ("quick", "stand-in"):
        assert choose_engine(scale) == {}
    want = {"engine": "torch", "device": "cuda", "dtype": "float64"} if cuda else {}
    assert choose_engine("paper") == want
    assert choose_engine("paper", "numba") == {}
    assert choose_engine("stand-in", "torch") == {"engine": "torch", "device": "cuda" if cuda else "cpu",
                                                 "dtype": "float64"}


def test_without_torch_auto_is_dynlab_and_torch_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)      # import torch → ImportError
    assert choose_engine("paper") == {}
    with pytest.raises(ParameterError) as info:
        choose_engine("paper", "torch")
    assert info.value.param == "engine" and "pip install" in str(info.value)
    with pytest.raises(ParameterError, match="engine"):
        choose_engine("paper", "jax")


def test_the_wrapper_trains_with_the_running_engine_and_notes_it(monkeypatch):
    import dynlab as dl

    seen = []
    monkeypatch.setattr(dl, "train_model", lambda *a, **kw: seen.append(kw) or "trained")
    assert train_model("m", "t", lr=0.1) == "trained" and seen[-1] == {"lr": 0.1}   # outside a recipe
    _fake_torch(monkeypatch, True)
    with engine_for("paper") as used:
        train_model("m", "t", lr=0.1)
        train_model("m", "t", lr=0.2)
    assert seen[-1] == {"engine": "torch", "device": "cuda", "dtype": "float64", "lr": 0.2}
    assert used == [engine_words(seen[-1])] and "cuda" in used[0]
    with engine_for("stand-in") as used:
        train_model("m", "t")
        train_model("m", "t", backend="numpy")
    assert seen[-1] == {"backend": "numpy"} and used == [DYNLAB, "dynlab exact-gradient BPTT (numpy, CPU)"]


def test_a_record_names_its_engine_and_an_untrained_one_none(tmp_path):
    rec = run_recipe(get("rin-gradients"), tmp_path, scale="quick", engine="numba")
    assert rec["engine"] == DYNLAB
    rec = run_recipe(get("implicit-a2-iterative"), tmp_path, scale="quick")
    assert "engine" not in rec


def test_cli_refuses_an_unknown_engine_in_one_line():
    res = CliRunner().invoke(main, ["figures", "make", "rin-gradients", "--quick", "--engine", "jax"])
    assert res.exit_code == 2 and "--engine" in res.output and "Traceback" not in res.output


@pytest.mark.torch
def test_a_quick_recipe_trained_through_torch(tmp_path):
    """rin-gradients at the quick scale through engine='torch' (CPU here): the record says so, and
    it is complete (verdict, effect, control) like the one dynlab's trainer writes."""
    pytest.importorskip("torch")
    torch_rec = run_recipe(get("rin-gradients"), tmp_path / "t", scale="quick", engine="torch")
    ours = run_recipe(get("rin-gradients"), tmp_path / "d", scale="quick", engine="numba")
    assert torch_rec["engine"].startswith("PyTorch autograd via dl.to_torch (float64, c")
    assert torch_rec["verdict"] in ("holds", "does not hold", "inconclusive", "underpowered")
    assert set(ours) - {"engine"} <= set(torch_rec)

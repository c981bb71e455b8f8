"""Products split by rows for OpenBLAS's small-matrix path (``kernels.gemm_rows``,
``numba_cpu.dot_rows``, ``config.BLAS_SMALL_GEMM``; issue 20, ninth session).

* ``gemm_rows``: one call up to ``SMALL_GEMM_MNK`` multiply-adds or without the path; else the
  rows halved until each call fits, never below ``SMALL_GEMM_MIN_ROWS``;
* ``has_small_path``: only OpenBLAS with an AVX-512 architecture; MKL, OpenBLAS Haswell (every
  AVX2 CPU) or no BLAS found are refused (the negative controls);
* ``dot_rows`` is the product whatever the rows (to rounding: each call is BLAS's own);
* every loop that splits gives the same states and gradients split and whole (to 1e-13
  relative: the two BLAS paths may sum in another order), at shapes where the split happens.
"""
from __future__ import annotations

import numpy as np
import pytest

import dynlab as dl
from dynlab import config
from dynlab.backends.numba import threads as _blas
from dynlab.backends.numba._arrays import gemm_rows
from dynlab.backends.numba import loops as numba_cpu
from dynlab.train import backprop as bp


def test_gemm_rows(monkeypatch):
    assert gemm_rows(64, 128, 128, True) == 32            # 1.05e6 > 1e6: halved once
    assert gemm_rows(64, 384, 128, True) == 16
    assert gemm_rows(64, 131, 512, True) == 8             # 16 rows would be 1.07e6
    assert gemm_rows(60, 128, 128, True) == 60            # 0.98e6: one call
    assert gemm_rows(64, 512, 2048, True) == 64           # fewer than 8 rows a call: not split
    assert gemm_rows(100, 128, 128, True) == 50
    assert gemm_rows(64, 384, 128, False) == 64           # no small-matrix path: never split
    monkeypatch.setattr(config, "BLAS_SMALL_GEMM", True)
    assert _blas.small_gemm()
    monkeypatch.setattr(config, "BLAS_SMALL_GEMM", False)
    assert not _blas.small_gemm()


def test_has_small_path():
    assert _blas.has_small_path([("openblas", "SkylakeX")])
    assert _blas.has_small_path([("openblas", "SkylakeX"), ("openblas", "Cooperlake")])
    assert not _blas.has_small_path([("openblas", "Haswell")])
    assert not _blas.has_small_path([("openblas", "SkylakeX"), ("openblas", "Zen")])
    assert not _blas.has_small_path([("mkl", None)])
    assert not _blas.has_small_path([])


@pytest.mark.parametrize("rows", [1, 3, 8, 16, 64, 100])
def test_dot_rows_is_the_product(rows):
    from numba import njit

    @njit
    def run(A, B, out, rows):
        numba_cpu.dot_rows(A, B, out, rows)

    rng = np.random.default_rng(rows)
    A, B = rng.standard_normal((64, 40)), rng.standard_normal((40, 24))
    out = np.full((64, 24), np.nan)
    run(A, B, out, rows)
    np.testing.assert_allclose(out, A @ B, rtol=1e-14, atol=1e-13)


def _models():
    return {"irnn": dl.make_model("irnn", 128, 2, K=2, eta=0.5, seed=0), "gru": dl.make_model("gru", 128, 2, seed=0),
            "lstm": dl.make_model("lstm", 128, 2, seed=0)}


@pytest.mark.parametrize("kind", ["irnn", "gru", "lstm"])
def test_split_and_whole_agree(kind, monkeypatch):
    m = _models()[kind]
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((128, 6, 2)), rng.standard_normal((128, 1))   # simulate: two blocks of 64 rows
    monkeypatch.setattr(config, "TRAIN_THREADS", 1)
    readout = bp.init_readout(m.hidden, 1, seed=0)
    out = {}
    for split in (True, False):
        monkeypatch.setattr(config, "BLAS_SMALL_GEMM", split)
        D = m.hidden
        G = {"irnn": D, "gru": 3 * D, "lstm": 4 * D}[kind]
        small = _blas.small_gemm()
        assert (gemm_rows(64, D + 3, G, small) < 64) == split      # the split happens (or not)
        assert (gemm_rows(128, G if kind != "irnn" else D, D, small) < 128) == split
        L, g, _ = bp.loss_and_grads(m, readout, x, y, loss="mse")
        H = dl.simulate(m, x)["h"].values
        out[split] = (L, g, H)
    (L1, g1, H1), (L0, g0, H0) = out[True], out[False]
    np.testing.assert_allclose(H1, H0, rtol=1e-13, atol=1e-14)
    assert abs(L1 - L0) <= 1e-13 * abs(L0)
    for k in g0:
        np.testing.assert_allclose(g1[k], g0[k], rtol=1e-12, atol=1e-14 * np.abs(g0[k]).max(), err_msg=k)

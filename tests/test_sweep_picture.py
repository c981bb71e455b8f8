"""A sweep's picture draws the analysis' variables, averaged over seeds with their spread, and is
the same whether the sweep comes from memory, NetCDF or Zarr.

The drawn numbers are read back from the matplotlib artists and compared with means and sample
standard deviations computed here from the raw arrays."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import dynlab as dl
from dynlab.plot.sweep import BOOKKEEPING, sweep_variables


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    where = tmp_path_factory.mktemp("sweep")
    res = dl.sweep("gradient_norms", {"K": [1, 3], "eta": [0.3, 0.8, 1.0]},
                   fixed={"model": "irnn", "hidden": 4, "steps": 40}, seeds=3, store=str(where / "s.zarr"))
    dl.write_dataset(res, where / "s.nc")
    return res, dl.read_dataset(where / "s.nc"), xr.open_zarr(where / "s.zarr")


def _images(fig):
    return [a.images[0].get_array().filled(np.nan) for a in fig.axes if a.images]


def test_only_the_analysis_variables_are_drawn_in_the_targets_order(swept):
    res, nc, zarr = swept
    want = ["ratio", "log_ratio", "log_jac_norm_1", "log_step_norm_T"]   # gradient_norms' variables
    for ds in (res, nc, zarr):
        assert sweep_variables(ds) == want
        assert not set(sweep_variables(ds)) & set(BOOKKEEPING)
    fig = dl.plot.draw(zarr)
    titles = [a.get_title() for a in fig.axes if a.images]
    assert len(titles) == 4 and not any("checksum" in t or "CRC" in t for t in titles)
    with pytest.raises(dl.ParameterError, match="checksum"):
        dl.plot.plot_sweep(res, variables=["checksum"])


def test_cells_are_the_mean_over_seeds_with_the_spread_printed(swept):
    res = swept[0]
    fig = dl.plot.draw(res)
    ratio = res["ratio"].transpose("K", "eta", "seed").values
    mean, sd = ratio.mean(axis=-1), ratio.std(axis=-1, ddof=1)
    np.testing.assert_allclose(_images(fig)[0], mean, rtol=1e-12)
    assert not np.allclose(_images(fig)[0], ratio[..., 0])      # not seed 0 (the control)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert f"{mean[0, 0]:.3g}\n±{sd[0, 0]:.2g}" in texts
    assert "3 seeds" in fig._suptitle.get_text()


def test_netcdf_and_zarr_draw_the_same_picture(swept):
    res, nc, zarr = swept
    drawn = [_images(dl.plot.draw(ds)) for ds in (res, nc, zarr)]
    for other in drawn[1:]:
        assert len(other) == len(drawn[0])
        for a, b in zip(drawn[0], other):
            np.testing.assert_array_equal(a, b)


def test_one_swept_setting_draws_error_bars_of_the_seeds_spread():
    res = dl.sweep("simulate", {"eta": [0.2, 0.6, 1.0]}, fixed={"model": "irnn", "hidden": 4, "steps": 30}, seeds=4)
    fig = dl.plot.draw(res)
    ax = fig.axes[0]
    line = ax.lines[0]
    v = res["final_norm"].transpose("eta", "seed").values
    np.testing.assert_allclose(line.get_ydata(), v.mean(axis=1), rtol=1e-12)
    bars = ax.collections[0].get_segments()                       # one vertical segment per point
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in bars], 2 * v.std(axis=1, ddof=1), rtol=1e-10)

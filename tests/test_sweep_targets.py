"""The convergence, spectrum and partition sweep targets equal the public calls made point by point."""
import numpy as np

import dynlab as dl
from dynlab.spec import DEFAULT_INPUT
from dynlab.analysis.convergence import convergence
from dynlab.analysis.spectra import spectrum


def test_convergence_target_equals_public_call():
    fixed = {"model": "irnn", "hidden": 8, "steps": 4, "weight_scale": 0.4, "K_max": 25}
    res = dl.sweep("convergence", {"eta": [0.3, 0.6]}, fixed=fixed)
    for eta in (0.3, 0.6):
        m = dl.make_model("irnn", hidden=8, inputs=1, eta=eta, weight_scale=0.4, seed=0)
        x = dl.tasks.make_input(DEFAULT_INPUT, 4, 1, seed=0)   # the sweep's default input
        cv = convergence(m, x, K_max=25)
        pt = res.sel(eta=eta)
        assert float(pt.rate) == float(cv.rate.max())
        assert float(pt.bound_rate) == float(cv.bound_rate)
        assert int(pt.bound_holds) == int(cv.bound_holds.all())
        assert float(pt.final_error) == float(cv.error.isel(k=-1).max())


def test_spectrum_target_equals_public_call():
    res = dl.sweep("spectrum", {"K": [1, 5]}, fixed={"model": "irnn", "hidden": 6, "steps": 15})
    for K in (1, 5):
        m = dl.make_model("irnn", hidden=6, inputs=1, K=K, seed=0)
        x = dl.tasks.make_input(DEFAULT_INPUT, 15, 1, seed=0)
        sp = spectrum(m, x)
        pt = res.sel(K=K)
        assert float(pt.max_real) == float(sp.max_real.max())
        assert float(pt.frac_stable) == float(np.mean(sp.stability.values == 1))
        assert float(pt.max_step_radius) == float(sp.step_radius.max())


def test_convergence_target_refuses_other_models():
    import pytest

    with pytest.raises(dl.ParameterError, match="model"):
        dl.sweep("convergence", {"seed": [0]}, fixed={"model": "rnn", "hidden": 4, "steps": 3})


def test_partition_target_equals_public_call_and_refuses_tanh():
    import pytest

    from dynlab.analysis.partition import partition

    res = dl.sweep("partition", {"hidden": [4, 8]}, fixed={"model": "rnn", "activation": "relu", "steps": 30})
    for D in (4, 8):
        m = dl.make_model("rnn", hidden=D, inputs=1, activation="relu", seed=0)
        ds = partition(m, dl.tasks.make_input(DEFAULT_INPUT, 30, 1, seed=0))
        pt = res.sel(hidden=D)
        assert float(pt.regions) == float(ds.regions[-1])
        assert float(pt.reconstruction_error) == float(ds.reconstruction_error.max()) < 1e-10
    with pytest.raises(dl.ParameterError, match="activation"):
        dl.sweep("partition", {"seed": [0]}, fixed={"model": "rnn", "activation": "tanh", "steps": 5})

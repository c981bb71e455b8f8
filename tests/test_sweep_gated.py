"""Sweeps over gru, lstm and stacks: the per-point targets equal the public calls (the batched
gradient kernel is for the one-line cells and the iRNN; map models take the per-point path),
the gradient summaries equal central differences of the step map, and the targets that do not
apply refuse them naming the model."""
import numpy as np
import pytest

import dynlab as dl
from dynlab.spec import DEFAULT_INPUT
from dynlab.errors import ParameterError

MAPS = {"model": ["gru", "lstm", "stack"]}
FIXED = {"hidden": 3, "steps": 12, "cell": "lstm", "layers": 2}


def _run(name, seed, steps=12):
    kw = {"cell": "lstm", "layers": 2} if name == "stack" else {}
    m = dl.make_model(name, 3, 1, seed=seed, **kw)
    return m, dl.tasks.make_input(DEFAULT_INPUT, steps, 1, seed=seed)  # the sweep's default input


def _sweep(analysis, fixed=FIXED, **kw):
    # cell/layers are stack settings: the gru and lstm points must not receive them
    out = {}
    for name in MAPS["model"]:
        f = {k: v for k, v in fixed.items() if name == "stack" or k not in ("cell", "layers")}
        out[name] = dl.sweep(analysis, {"seed": [0, 3]}, fixed={**f, "model": name}, **kw)
    return out


@pytest.mark.parametrize("batched", [True, False])
def test_gradient_norms_equal_public_calls(batched):
    for name, res in _sweep("gradient_norms", batched=batched).items():
        for seed in (0, 3):
            m, x = _run(name, seed)
            lj = dl.gradient_norms(m, x)["log_jac_norm"].values
            assert res["log_jac_norm_1"].sel(seed=seed).item() == lj[0]
            assert res["log_step_norm_T"].sel(seed=seed).item() == lj[-2]
            assert res["diverged_at"].sel(seed=seed).item() == 0


def test_gradient_summary_equals_central_differences_of_the_step_map():
    """ln‖∂s_T/∂s_1‖₂ of an LSTM's whole state [h; c], from the sweep, vs central differences
    of the composed steps s_2..s_T (eps 1e-6; agreement to 1e-7)."""
    res = dl.sweep("gradient_norms", {"seed": [3]}, fixed={"model": "lstm", "hidden": 3, "steps": 12})
    m, x = _run("lstm", 3)
    s = np.zeros((1, m.state_size))
    S = []
    for t in range(12):
        s = m.step(s, x[t:t + 1])
        S.append(s)

    def final(s1):
        s = s1[None]
        for t in range(1, 12):
            s = m.step(s, x[t:t + 1])
        return s[0]

    eps, n = 1e-6, m.state_size
    P = np.empty((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = eps
        P[:, j] = (final(S[0][0] + e) - final(S[0][0] - e)) / (2 * eps)
    want = np.log(np.linalg.norm(P, 2))
    assert abs(res["log_jac_norm_1"].item() - want) <= 1e-7


def test_simulate_and_lyapunov_equal_public_calls():
    for name, res in _sweep("simulate").items():
        for seed in (0, 3):
            m, x = _run(name, seed)
            h = dl.simulate(m, x)["h"].values
            assert res["final_norm"].sel(seed=seed).item() == np.linalg.norm(h[-1])
            assert res["max_abs_h"].sel(seed=seed).item() == np.abs(h).max()
    for name, res in _sweep("lyapunov", fixed={**FIXED, "k": 2}).items():
        for seed in (0, 3):
            m, x = _run(name, seed)
            np.testing.assert_array_equal(res["lyapunov"].sel(seed=seed).values,
                                          dl.lyapunov(m, x, k=2)["lyapunov"].values)


@pytest.mark.parametrize("analysis,match", [("irnn_equilibrium", "needs model irnn"),
                                            ("convergence", "needs model irnn"),
                                            ("partition", "MASO partition analysis takes rnn")])
@pytest.mark.parametrize("name", ["gru", "lstm", "stack"])
def test_targets_that_do_not_apply_refuse_naming_the_model(analysis, match, name):
    with pytest.raises(ParameterError, match=match) as err:
        dl.sweep(analysis, {"seed": [0]}, fixed={"model": name, "hidden": 3, "steps": 5})
    assert err.value.param == "fixed.model"

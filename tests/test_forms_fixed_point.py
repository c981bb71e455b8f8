"""What a kernel form carries for the analyses: its fixed-point map (F, ∂F/∂y, ∂F/∂x), its cost
per step, its typed settings, and the backend the equilibrium analyses name as provenance."""
import numpy as np
import pytest

import dynlab as dl
from dynlab import _resources as res
from dynlab.backends import get_backend
from dynlab.errors import ParameterError
from dynlab.models.forms import StepCost

#: every registered sequence model, at weights small enough that the state settles (a contraction)
MODELS = [
    ("rnn", {}), ("rnn", {"activation": "relu"}), ("fastrnn", {}), ("antisymmetric", {"eps": 0.5, "gamma": 1.0}), ("rin", {}),
    ("irnn", {"K": 3, "eta": 0.5}), ("irnn", {"K": 2, "eta": 0.4, "g0": "previous", "sign": -1}),
    ("ctrnn", {}), ("gru", {}), ("lstm", {}),
    ("stack", {"cell": "gru", "layers": 2}), ("stack", {"cell": "lstm", "layers": 2}),
    ("stack", {"cell": "rnn", "layers": 2}),
]
IDS = [f"{n}-{'-'.join(f'{k}{v}' for k, v in kw.items())}" for n, kw in MODELS]


def _model(name, kw):
    return dl.make_model(name, 3, 2, seed=4, weight_scale=0.3, **kw)


def _settled(m, x, h_prev):
    """A fixed point found without the fixed-point map: the model's own simulation run until the
    state stops moving (for the iRNN: one step from h_prev with K = 4000 inner steps)."""
    if m.name == "irnn":
        big = m.replace(K=4000)
        h = dl.simulate(big, x[None, None, :], h_prev[None], backend="numpy")["h"].values[0, -1]
        return h
    T = 4000 if m.name == "ctrnn" else 1500
    xs = np.broadcast_to(x, (1, T, x.size))
    H = dl.simulate(m, np.ascontiguousarray(xs), h_prev[None], backend="numpy")["h"].values[0]
    s = dl.simulate(m, np.ascontiguousarray(xs[:, :1]), H[-1][None], backend="numpy")
    assert np.abs(s["h"].values[0, -1] - H[-1]).max() <= 1e-13  # it has settled
    return H[-1]


@pytest.mark.parametrize("name, kw", MODELS, ids=IDS)
def test_fixed_point_map_vanishes_at_a_simulated_fixed_point(name, kw):
    """The residual of every form's map is zero (≤ 1e-12) at a fixed point the simulation reached on
    its own; the map's unknown and state convert back and forth (iRNN: s = h_eq + sign·h_prev)."""
    m = _model(name, kw)
    fmap = m.form().fixed_point_map()
    x = np.array([0.3, -0.2])
    h_prev = 0.1 * np.arange(1, m.state_size + 1) / m.state_size
    h = _settled(m, x, h_prev)
    y = fmap.at_step(h[None], h_prev[None]) if fmap.shifted else h[None]
    F = fmap.F(y, fmap.c(x[None]))
    assert F.shape == (1, m.state_size)
    assert np.abs(F).max() <= 1e-12, np.abs(F).max()
    np.testing.assert_allclose(fmap.state(y, h_prev[None])[0], h, rtol=0, atol=1e-15)
    # and an equilibrium solve (Newton on the map) lands on the same point
    eq = dl.equilibrium(m, x, h_prev)
    np.testing.assert_allclose(eq["h_eq"].values, h, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name, kw", MODELS, ids=IDS)
def test_fixed_point_map_jacobians_match_central_differences(name, kw):
    """∂F/∂y and ∂F/∂x at random points equal central differences with step h = 1e-6 to 1e-6
    relative (the differences' own error is ~h²·|F'''| + ε/h ≈ 1e-10)."""
    m = _model(name, kw)
    fmap = m.form().fixed_point_map()
    rng = np.random.default_rng(1)
    N, D, d, h = 4, m.state_size, m.inputs, 1e-6
    y = rng.standard_normal((N, D))
    x = rng.standard_normal((N, d))
    c = fmap.c(x)
    J = fmap.jac(y, c)
    Jx = fmap.dF_dx(y, c)
    assert J.shape == (N, D, D) and Jx.shape == (N, D, d)
    Jfd = np.empty_like(J)
    for j in range(D):
        e = np.zeros(D)
        e[j] = h
        Jfd[:, :, j] = (fmap.F(y + e, c) - fmap.F(y - e, c)) / (2 * h)
    Jxfd = np.empty_like(Jx)
    for j in range(d):
        e = np.zeros(d)
        e[j] = h
        Jxfd[:, :, j] = (fmap.F(y, fmap.c(x + e)) - fmap.F(y, fmap.c(x - e))) / (2 * h)
    assert np.abs(J - Jfd).max() <= 1e-6 * max(1.0, np.abs(J).max())
    assert np.abs(Jx - Jxfd).max() <= 1e-6 * max(1.0, np.abs(Jx).max())


@pytest.mark.parametrize("name, kw", MODELS, ids=IDS)
def test_one_point_methods_agree_with_the_batched_map(name, kw):
    """What continuation reads (F1, jac1, derivs1 at one point) is the batched F and ∂F."""
    m = _model(name, kw)
    fmap = m.form().fixed_point_map()
    rng = np.random.default_rng(2)
    y, x = rng.standard_normal(m.state_size), rng.standard_normal(m.inputs)
    c1 = fmap.c1(x, fmap.b)
    np.testing.assert_allclose(c1, fmap.c(x[None])[0], rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(fmap.F1(y, c1, fmap.beta), fmap.F(y[None], c1[None])[0], rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(fmap.jac1(y, c1, fmap.beta), fmap.jac(y[None], c1[None])[0], rtol=1e-13, atol=1e-14)
    dx = rng.standard_normal(m.inputs)
    F, Fy, Fl = fmap.derivs1(y, c1, fmap.beta, fmap.c_dx(dx), False)
    np.testing.assert_allclose(Fl, fmap.dF_dx(y[None], c1[None])[0] @ dx, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(Fy, fmap.jac1(y, c1, fmap.beta), rtol=0, atol=0)


def test_forms_without_equilibria_refuse_by_name():
    m = dl.make_model("implicit", 3, 2, seed=0)
    with pytest.raises(ParameterError) as e:
        m.form().fixed_point_map()
    assert e.value.param == "model" and "implicit" in e.value.message
    with pytest.raises(ParameterError) as e:
        dl.equilibrium(m, [0.1, 0.2])
    assert e.value.param == "model" and "equilibria are not defined for model 'implicit'" in e.value.message


# ------------------------------------------------------------------ cost per step, typed settings
@pytest.mark.parametrize("name, kw, cost", [
    ("rnn", {}, (1, 1)), ("fastrnn", {}, (1, 1)), ("irnn", {"K": 7}, (1, 7)), ("ctrnn", {"substeps": 3}, (1, 1)),
    ("gru", {}, (3, 1)), ("lstm", {}, (4, 1)), ("stack", {"cell": "lstm", "layers": 2}, (4, 1)),
    ("stack", {"cell": "gru", "layers": 3}, (3, 1)), ("stack", {"cell": "rnn", "layers": 2}, (1, 1)),
    ("implicit", {}, (1, 1)),
])
def test_step_cost_is_the_forms_and_known_before_the_form(name, kw, cost):
    m = dl.make_model(name, 3, 2, seed=0, **kw)
    known = m.step_cost()
    assert "_form" not in m.__dict__  # asked before the form is made
    assert isinstance(known, StepCost) and tuple(known) == cost
    assert m.form().cost == known
    assert dl.models.gates_of(name, kw) == cost[0]


def test_irnn_settings_are_typed_fields_of_its_form():
    f = dl.make_model("irnn", 3, 2, K=5, eta=0.5, g0="previous", sign=-1, seed=0).form()
    assert type(f.K) is int and f.K == 5 and f.inner_steps == 5
    assert type(f.g0prev) is bool and f.g0prev and type(f.sign) is float and f.sign == -1.0
    assert f.eta.shape == (1, 5)


def test_simulation_estimate_reads_the_cost():
    """The work estimate scales with the gate blocks and the inner steps of the form."""
    one, _ = res.simulation_work(dl.make_model("rnn", 4, 2, seed=0), 1, 1000)
    k5, sizes = res.simulation_work(dl.make_model("irnn", 4, 2, K=5, seed=0), 1, 1000)
    assert sizes["K"] == 5 and k5 > one
    g3, _ = res.simulation_work(dl.make_model("gru", 4, 2, seed=0), 1, 1000)
    g1, _ = res.simulation_work(dl.make_model("rnn", 4, 2, seed=0), 1, 1000)
    assert g3 > g1


# ------------------------------------------------------------------ provenance
def test_equilibrium_provenance_names_the_backend_that_ran():
    """Closed-form maps run NumPy on the host (the reference backend's arithmetic); the step maps'
    Jacobians run on the default backend: the Dataset's ``backend`` attr says which."""
    ref, default = get_backend("reference").name, get_backend(None).name
    x = np.array([0.1, -0.1])
    for name, want in (("rnn", ref), ("irnn", ref), ("ctrnn", ref), ("gru", default), ("lstm", default)):
        m = dl.make_model(name, 3, 2, seed=0)
        assert dl.equilibrium(m, x).attrs["backend"] == want, name
        assert m.form().fixed_point_map().backend.name == want
    assert dl.fixed_points(dl.make_model("lstm", 3, 2, seed=0), x, n_starts=4).attrs["backend"] == default
    assert dl.convergence(dl.make_model("irnn", 3, 2, K=2, seed=0), x, K_max=3).attrs["backend"] == ref
    br = dl.continuation(dl.make_model("gru", 2, 1, seed=0), "x", -0.5, 0.5, max_points=20)
    assert br.attrs["backend"] == default
    # a step map asked for another backend runs its Jacobians there
    assert dl.make_model("gru", 3, 2, seed=0).form().fixed_point_map("numpy").backend.name == ref


def test_time_rows_say_whether_the_rule_changes_over_time():
    m = dl.make_model("irnn", 3, 2, K=2, seed=0)
    assert m.form().time_rows == 1
    per_time = m.replace(eta=np.random.default_rng(0).uniform(0.1, 0.5, (6, 2)))
    assert per_time.form().time_rows == 6
    assert dl.make_model("stack", 3, 2, cell="gru", layers=2, seed=0).form().time_rows == 1
    from dynlab.analysis.jacobians import jacobian_at     # imported here: no other test's import is relied on

    with pytest.raises(ParameterError) as e:  # per-time η: the step Jacobians need each point's time
        jacobian_at(per_time, np.zeros((1, 2)), np.zeros((1, 3)))
    assert e.value.param == "t" and "6 time steps" in e.value.message

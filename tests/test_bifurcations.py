"""Bifurcations along branches of equilibria (``dl.continuation``, ``dynlab.analysis.bifurcations``)
against closed forms (Hopf, flip, pitchfork, Neimark–Sacker), the criticality against the dynamics
themselves (the cycle or invariant circle the normal form predicts, simulated), two-parameter
curves against closed forms and eigenvalues, and a mutation test for each detector: break its
test function or its sign and the closed-form check fails, or a point is reported where there is
none.  Tolerances: the points are located by Newton on augmented systems to ‖·‖∞ ≤ 1e-12, so the
parameter is within ~1e-12·cond; 1e-8 (the issue's goal) leaves a margin of 1e3 or more."""
from __future__ import annotations

import numpy as np
import pytest

import dynlab as dl
from dynlab.analysis import bifurcations as bif
from dynlab.models import CTRNN, RNN, FastRNN


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


# ------------------------------------------------------------------ Hopf (flows)
def hopf_closed_form():
    """ġ = −α g + tanh(U g), U = [[a, −w], [w, a]]: g = 0 for every α, eigenvalues a − α ± iw, so a
    Hopf point at α = a with ω = w; φ''(0) = 0, φ'''(0) = −2 give l₁ = −a(a² + w²)/(2w) < 0
    (supercritical).  No fold, no branch point."""
    a, w = 0.7, 1.3
    br = dl.continuation(CTRNN([[a, -w], [w, a]], [[0.0], [0.0]], [0.0, 0.0]), "alpha", 0.4, 1.0, ds=0.02)
    assert br.attrs["n_hopf"] == 1 and br.attrs["n_folds"] == 0 and br.attrs["n_branch_points"] == 0
    assert abs(float(br["special_param"][0]) - a) <= 1e-8 and int(br["special_refined"][0]) == 1
    assert abs(float(br["special_frequency"][0]) - w) <= 1e-8
    assert abs(float(br["special_coefficient"][0]) + a * (a * a + w * w) / (2 * w)) <= 1e-10
    assert int(br["special_criticality"][0]) == bif.SUPER
    return br


def test_hopf_of_a_rotation_ctrnn_in_closed_form():
    hopf_closed_form()


#: Two sigmoid CTRNNs with a Hopf point over b0 (found by a random search; B ≠ 0 there): l₁ < 0 and > 0.
HOPF_CASES = {"supercritical": ([[4.71, -4.13], [7.79, 4.2]], [-5.1, -5.36], -1.0, -1),
              "subcritical": ([[1.92, -7.41], [11.41, 9.42]], [-4.38, -4.84], -0.32, 1)}


def _critical(m, lam):
    """(equilibrium, critical eigenvalue, its right and left eigenvectors with ⟨q, q⟩ = ⟨p, q⟩ = 1) of
    the CTRNN with b0 = λ — numpy's, independent of dynlab.analysis.bifurcations."""
    m2 = m.replace(b=np.array([lam, m.b[1]]))
    y = dl.equilibrium(m2, [0.0], np.zeros(2))["h_eq"].values
    J = np.array(m2.form().fixed_point_map().jac(y[None], m2.b[None])[0])
    ev, V = np.linalg.eig(J)
    k = int(np.argmax(ev.imag))
    q = V[:, k] / np.linalg.norm(V[:, k])
    evt, Vt = np.linalg.eig(J.T)
    p = Vt[:, int(np.argmin(np.abs(evt - np.conj(ev[k]))))]
    return m2, y, ev[k], q, p / np.conj(np.vdot(p, q))


def _criticality_by_simulation(m, lam_h, l1, om):
    """On the side of λ_H where the normal form ż = (μ + iω)z + ω l₁ z|z|² has a cycle (μ l₁ < 0),
    at |μ| ≈ 0.003, its radius is r = √(−μ/(ω l₁)) in z = ⟨p, g − g*⟩.  Started at 0.75 r and 1.33 r
    (g = g* + 2 Re(z q)) and run for 2/|μ|, the trajectories leave r if the cycle is unstable
    (subcritical) and approach it if it is stable: returns the ratios of their final mean |z| to
    their first, and μ."""
    from scipy.integrate import solve_ivp

    mu_p = _critical(m, lam_h + 1e-3)[2].real
    side = 1.0 if mu_p * l1 < 0 else -1.0
    m2, y, ev, q, p = _critical(m, lam_h + side * 1e-3 * 0.003 / abs(mu_p))
    mu = ev.real
    r = np.sqrt(-mu / (om * l1))
    U, b = m2.U, m2.b

    def field(t, g):
        return -g + 1.0 / (1.0 + np.exp(-(U @ g + b)))

    T = 2.0 / abs(mu)
    out = []
    for f in (0.75, 1.33):
        sol = solve_ivp(field, (0, T), y + 2 * (f * r * q).real, rtol=1e-8, atol=1e-11, dense_output=True)
        tail = sol.sol(np.linspace(0.9 * T, T, 50)).T
        out.append(np.abs((tail - y) @ p.conj()).mean() / (f * r))
    return out, mu


@pytest.mark.parametrize("case", list(HOPF_CASES))
def test_hopf_criticality_against_the_simulated_cycle(case):
    """The sign and size of l₁ decide the cycle: supercritical — a stable cycle of radius r on the
    unstable side (from 0.75 r the trajectory grows, from 1.33 r it shrinks); subcritical — an
    unstable cycle on the stable side (from 0.75 r it decays, from 1.33 r it escapes).  The radius
    from l₁ is right to within the factors 0.75 and 1.33 (the normal form's error at |μ| = 0.003
    is a few per cent of r)."""
    U, b, lam0, crit = HOPF_CASES[case]
    m = CTRNN(U, [[0.0], [0.0]], b, activation="sigmoid")
    br = dl.continuation(m, "b0", lam0 - 0.4, lam0 + 0.4, ds=0.02, switch=False)
    h = np.flatnonzero(br["special_type"].values == bif.HOPF)
    assert h.size == 1 and int(br["special_criticality"][h[0]]) == crit
    lam_h, l1, om = (float(br[v][h[0]]) for v in ("special_param", "special_coefficient", "special_frequency"))
    (inner, outer), mu = _criticality_by_simulation(m, lam_h, l1, om)
    if crit == bif.SUPER:  # both end on the cycle, whose radius is r to 5 %
        assert mu > 0 and inner > 1.05 and outer < 0.95
        assert abs(0.75 * inner - 1) <= 0.05 and abs(1.33 * outer - 1) <= 0.05
    else:
        assert mu < 0 and inner < 0.95 and outer > 1.05


# ------------------------------------------------------------------ flip (maps)
def flip_closed_form():
    """h ↦ tanh(w h + x), w = −2.5: a flip where f' = w(1 − h²) = −1, h = ±√(1 + 1/w), at
    x = atanh(h) − w h; c = f'''/6 + f''²/4 with f'' = w²φ''(z), f''' = w³φ'''(z) (Kuznetsov's c in
    one dimension; its sign and size checked against the second iterate in ``test_flip_...``)."""
    w = -2.5
    br = dl.continuation(RNN([[w]], [[1.0]], [0.0]), "x", -3.5, 3.5, ds=0.05)
    hs = np.array([-1.0, 1.0]) * np.sqrt(1 + 1 / w)
    xs = np.arctanh(hs) - w * hs
    assert br.attrs["n_flips"] == 2 and br.attrs["n_folds"] == 0 and br.attrs["n_branch_points"] == 0
    order = np.argsort(br["special_param"].values)
    np.testing.assert_allclose(br["special_param"].values[order], xs, rtol=0, atol=1e-8)
    np.testing.assert_allclose(br["special_h"].values[order, 0], hs, rtol=0, atol=1e-8)
    t = hs
    c = (w ** 3 * (1 - t * t) * (6 * t * t - 2)) / 6 + (w * w * -2 * t * (1 - t * t)) ** 2 / 4
    np.testing.assert_allclose(br["special_coefficient"].values[order], c, rtol=1e-9)
    assert (br["special_criticality"].values == bif.SUPER).all()
    return br, w


def test_flip_of_a_tanh_map_with_negative_self_weight_in_closed_form():
    flip_closed_form()


def test_flip_two_cycle_amplitude_is_the_normal_form_s():
    """Past the flip (x = x_PD + δ on the unstable side, multiplier −(1 + β)) the map's stable
    2-cycle has half-width √(β/c) to first order (η ↦ −(1 + β)η + cη³): iterated to convergence,
    the measured half-width agrees to 3 % at β ≈ 4e-3 (the relative correction is O(√β))."""
    br, w = flip_closed_form()
    k = int(np.argmax(br["special_param"].values))
    x_pd, c = float(br["special_param"][k]), float(br["special_coefficient"][k])
    m = RNN([[w]], [[1.0]], [0.0])
    x = x_pd - 0.01  # inside: h* on the unstable side (|f'| > 1)
    eq = float(dl.equilibrium(m, [x])["h_eq"].values[0])
    beta = -w * (1 - eq * eq) - 1.0
    assert beta > 0
    h = eq + 1e-3
    for _ in range(20000):
        h = np.tanh(w * h + x)
    h2 = np.tanh(w * h + x)
    np.testing.assert_allclose(abs(h - h2) / 2, np.sqrt(beta / c), rtol=0.03)


# ------------------------------------------------------------------ branch points (pitchfork)
def pitchfork_closed_form():
    """ġ = −α g + tanh(U g), U = [[a, s], [s, a]] symmetric: g = 0 for every α and F_α = −g = 0
    there, so where α = a + s (the largest eigenvalue) [F_g F_α] loses rank: a pitchfork.  The
    switched branch is g₁ = g₂ = γ with α γ = tanh((a + s) γ), stable (supercritical)."""
    a, s = 0.5, 0.8
    br = dl.continuation(CTRNN([[a, s], [s, a]], [[0.0], [0.0]], [0.0, 0.0]), "alpha", 0.9, 1.8, ds=0.02)
    assert br.attrs["n_branch_points"] == 1 and br.attrs["n_hopf"] == 0 and br.attrs["n_folds"] == 0
    assert abs(float(br["special_param"][0]) - (a + s)) <= 1e-8 and int(br["special_refined"][0]) == 1
    assert np.abs(br["special_h"].values).max() <= 1e-8
    other = br["branch"].values > 0
    assert br.attrs["n_branches"] == 3 and other.sum() > 10
    g, lam = br["h_eq"].values[other], br["param"].values[other]
    assert np.abs(g[:, 0] - g[:, 1]).max() <= 1e-10
    np.testing.assert_allclose(lam * g[:, 0], np.tanh((a + s) * g[:, 0]), rtol=0, atol=1e-11)
    assert (br["stability"].values[other & (np.abs(br["h_eq"].values[:, 0]) > 1e-3)] == 1).all()
    return br


def test_pitchfork_branch_point_and_the_switched_branch_in_closed_form():
    pitchfork_closed_form()


def test_a_neutral_saddle_is_no_hopf_point():
    """U = diag(0.5, 1.5): at g = 0 the eigenvalues 0.5 − α and 1.5 − α are real and sum to 0 at
    α = 1 — the Hopf product ∏(λ_i + λ_j) changes sign there (a neutral saddle), but no Hopf point
    may be reported (nor a branch point: none lies in [0.8, 1.2])."""
    br = dl.continuation(CTRNN([[0.5, 0.0], [0.0, 1.5]], [[0.0], [0.0]], [0.0, 0.0]), "alpha", 0.8, 1.2, ds=0.02)
    assert br.sizes["special"] == 0 and br.sizes["arc"] > 5


def test_a_broken_symmetry_has_no_branch_point():
    """Perturbed (b = 0.05 on unit 1) the pitchfork unfolds: no branch point is reported, a fold is."""
    a, s = 0.5, 0.8
    br = dl.continuation(CTRNN([[a, s], [s, a]], [[0.0], [0.0]], [0.05, 0.0]), "alpha", 0.9, 1.8, ds=0.02)
    assert br.attrs["n_branch_points"] == 0 and br.attrs["n_branches"] == 1


# ------------------------------------------------------------------ Neimark–Sacker (maps)
def ns_closed_form():
    """FastRNN h ↦ σ(β)h + σ(α) tanh(ρR_θ h): h = 0 for every α, multipliers σ(β) + σ(α)ρe^{±iθ},
    on the unit circle where σ(α) = g* = (−σ(β)cos θ + √(1 − σ(β)² sin²θ))/ρ; there B = 0 and
    C = −2σ(α)(Ru)(Rv)(Rw) give d = −½ g* ρ³ cos(θ − θ₀), θ₀ = arg μ (supercritical)."""
    rho, th, beta = 1.5, 1.0, 1.0
    U = rho * np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
    a = _sig(beta)
    g = (-a * np.cos(th) + np.sqrt(1 - a * a * np.sin(th) ** 2)) / rho
    alpha = np.log(g / (1 - g))
    br = dl.continuation(FastRNN(U, [[0.0], [0.0]], [0.0, 0.0], alpha=alpha - 0.5, beta=beta), "alpha",
                         alpha - 0.5, alpha + 0.5, ds=0.02)
    th0 = np.angle(a + g * rho * np.exp(1j * th))
    assert br.attrs["n_neimark_sacker"] == 1 and br.attrs["n_flips"] == 0 and br.attrs["n_branch_points"] == 0
    assert abs(float(br["special_param"][0]) - alpha) <= 1e-8 and int(br["special_refined"][0]) == 1
    assert abs(float(br["special_frequency"][0]) - th0) <= 1e-8
    assert abs(float(br["special_coefficient"][0]) + 0.5 * g * rho ** 3 * np.cos(th - th0)) <= 1e-10
    assert int(br["special_criticality"][0]) == bif.SUPER
    return br


def test_neimark_sacker_of_a_rotation_scaled_map_in_closed_form():
    ns_closed_form()


def test_neimark_sacker_invariant_circle_against_iteration():
    """A general tanh map (B ≠ 0 at its NS point): beyond it (|μ| = 1 + β) the normal form
    predicts a stable invariant circle of radius √(−β/d) in z = ⟨p, h − h*⟩; from 0.75 r the orbit
    grows and from 1.33 r it shrinks (averaged over the last 200 of 4000 steps)."""
    U, b = [[1.093, -1.364], [1.05, 0.734]], [-0.03, -0.057]
    m = RNN(U, [[0.0], [0.0]], b)
    br = dl.continuation(m, "b0", 0.7, 1.1, ds=0.01, switch=False)
    k = int(np.flatnonzero(br["special_type"].values == bif.NS)[0])
    lam, d = float(br["special_param"][k]), float(br["special_coefficient"][k])
    assert d < 0 and int(br["special_criticality"][k]) == bif.SUPER
    for delta in (3e-3, -3e-3):
        m2 = m.replace(b=np.array([lam + delta, b[1]]))
        y = dl.equilibrium(m2, [0.0])["h_eq"].values
        J = m2.step_jacobian(y[None], np.zeros((1, 1)))[0]
        ev, V = np.linalg.eig(J)
        i = int(np.argmax(ev.imag))
        if abs(ev[i]) > 1:
            break
    q = V[:, i] / np.linalg.norm(V[:, i])
    evt, Vt = np.linalg.eig(J.T)
    p = Vt[:, int(np.argmin(np.abs(evt - np.conj(ev[i]))))]
    p = p / np.conj(np.vdot(p, q))
    r = np.sqrt(-(abs(ev[i]) - 1) / d)
    for f, grows in ((0.75, True), (1.33, False)):
        h = (y + 2 * (f * r * q).real)[None]
        zs = []
        for n in range(4000):
            h = m2.step(h, np.zeros((1, 1)))
            if n >= 3800:
                zs.append(abs(np.vdot(p, h[0] - y)))
        assert (np.mean(zs) / (f * r) > 1.05) == grows and (np.mean(zs) / (f * r) < 0.95) == (not grows)


# ------------------------------------------------------------------ mutation tests
def _mutate_tests(monkeypatch, name, fn):
    """Replace the (sign, q) of test ``name`` in ``bifurcations.tests`` by fn(sign, q, Fy, discrete)."""
    real = bif.tests

    def mutated(discrete, Fy, Fl, t, eigs):
        out = real(discrete, Fy, Fl, t, eigs)
        if name in out:
            out[name] = fn(out[name], Fy, Fl, t, eigs)
        return out

    monkeypatch.setattr(bif, "tests", mutated)


def test_mutation_hopf_test_function(monkeypatch):
    """Hopf test ∏_{i<j}(λ_i + λ_j) replaced by det F_y = ∏ λ_i (a complex pair adds |λ|² > 0: no
    sign change as it crosses the axis): the closed-form check fails."""
    _mutate_tests(monkeypatch, "hopf", lambda v, Fy, Fl, t, e: (float(np.sign(np.linalg.det(Fy))), v[1]))
    with pytest.raises(AssertionError):
        hopf_closed_form()


def test_mutation_flip_test_function(monkeypatch):
    """Flip test ∏(μ_i + 1) replaced by ∏(μ_i − 1): no flip is found where it is, the check fails."""
    def wrong(v, Fy, Fl, t, e):
        mu = e + 1.0
        return float(np.prod(np.sign(mu.real[np.abs(mu.imag) < 1e-12] - 1.0))), v[1]

    _mutate_tests(monkeypatch, "flip", wrong)
    with pytest.raises(AssertionError):
        flip_closed_form()


def test_mutation_neimark_sacker_test_function(monkeypatch):
    """NS test ∏_{i<j}(μ_i μ_j − 1) replaced by det(J − I) = ∏(μ_i − 1) (a complex pair adds
    |μ − 1|² > 0: no sign change on the unit circle): the closed-form check fails."""
    _mutate_tests(monkeypatch, "ns", lambda v, Fy, Fl, t, e: (float(np.sign(np.linalg.det(Fy))), v[1]))
    with pytest.raises(AssertionError):
        ns_closed_form()


def test_mutation_branch_point_test_without_its_border(monkeypatch):
    """BP test det[F_y F_λ; tᵀ] replaced by det F_y (no border): it changes sign at folds too, and
    the hysteresis neuron — two folds, no branch point — gets branch points where there are none."""
    neuron = CTRNN([[8.0]], [[0.0]], [0.0], activation="sigmoid")
    br = dl.continuation(neuron, "b", -8.0, 0.0)
    assert br.attrs["n_folds"] == 2 and br.attrs["n_branch_points"] == 0
    _mutate_tests(monkeypatch, "bp", lambda v, Fy, Fl, t, e: (float(np.sign(np.linalg.det(Fy))), v[1]))
    br = dl.continuation(neuron, "b", -8.0, 0.0, switch=False)
    assert br.attrs["n_branch_points"] > 0


def test_mutation_criticality_sign(monkeypatch):
    """The criticality read with the wrong sign: the closed-form (supercritical) Hopf check fails."""
    real = bif.criticality
    monkeypatch.setattr(bif, "criticality", lambda code, coef, fd: -real(code, coef, fd))
    with pytest.raises(AssertionError):
        hopf_closed_form()


# ------------------------------------------------------------------ two parameters; every model
def test_fold_curve_of_the_neuron_is_the_line_of_its_drive():
    """ġ = −g + σ(w g + w_in x + b): x and b enter only through c = w_in x + b, so each fold of the
    branch over b continues in (b, x) along the line w_in x + b = b_fold (1e-9)."""
    w_in = 0.7
    m = CTRNN([[8.0]], [[w_in]], [0.0], activation="sigmoid")
    br = dl.continuation(m, "b", -8.0, 0.0)
    for k in range(2):
        fc = dl.bifurcation_curve(m, br, k, "x", -1.0, 1.0, tol=1e-12)
        c = w_in * fc["param2"].values + fc["param"].values
        np.testing.assert_allclose(c, float(br["special_param"][k]), rtol=0, atol=1e-9)
        assert fc["param2"].values.min() <= -1.0 + 0.1 and fc["param2"].values.max() >= 1.0 - 0.1


def test_hopf_curve_keeps_a_pair_on_the_imaginary_axis():
    """The rotation CTRNN's Hopf point continued in (α, b): at every point of the curve the
    equilibrium's Jacobian (numpy's eigenvalues, independent of the bordered test) has a pair with
    |Re λ| ≤ 1e-9 and Im λ = the stored ω; at b = 0 the curve passes through α = a."""
    a, w = 0.7, 1.3
    m = CTRNN([[a, -w], [w, a]], [[0.0], [0.0]], [0.0, 0.0])
    br = hopf_closed_form()
    hc = dl.bifurcation_curve(m, br, 0, "b", -0.5, 0.5)
    assert hc.sizes["arc"] > 10 and hc["residual"].values.max() <= 1e-10
    for i in range(hc.sizes["arc"]):
        m2 = m.replace(alpha=float(hc["param"][i]), b=np.full(2, float(hc["param2"][i])))
        s = m2.form().fixed_point_map()
        ev = np.linalg.eigvals(s.jac(hc["h_eq"].values[i][None], m2.b[None])[0])
        k = int(np.argmax(ev.imag))
        assert abs(ev[k].real) <= 1e-9 and abs(ev[k].imag - float(hc["frequency"][i])) <= 1e-8
    np.testing.assert_allclose(np.interp(0.0, hc["param2"].values, hc["param"].values), a, atol=1e-4)


@pytest.mark.parametrize("name,over,lo,hi,kw", [
    ("rnn", "b1", -1.0, 1.0, {}), ("fastrnn", "alpha", -1.0, 1.0, {}), ("rin", "x", -1.0, 1.0, {"activation": "tanh", "weight_scale": 0.3}),
    ("irnn", "alpha", 0.5, 2.0, {}), ("ctrnn", "x0", -1.0, 1.0, {}), ("gru", "b2", -1.0, 1.0, {}),
    ("lstm", "x", -1.0, 1.0, {}), ("stack", "b5", -1.0, 1.0, {"cell": "gru", "layers": 2}),
])
def test_every_model_is_continued_and_its_points_are_roots(name, over, lo, hi, kw):
    """Every kind of model over its parameters: points on the branch, and every special point found,
    solve F = 0 (1e-12 and 1e-9) for the model with that parameter applied by an independent path
    (``apply_parameter`` → its form's fixed-point map at that value)."""
    from dynlab.analysis.family import apply_parameter

    m = dl.make_model(name, 2, 1, seed=3, **{"weight_scale": 2.0, **kw})
    br = dl.continuation(m, over, lo, hi, max_points=150)
    assert br["residual"].values.max() <= 1e-12 and br.sizes["arc"] > 5
    pts = [("param", "h_eq", i, 1e-12) for i in range(0, br.sizes["arc"], 25)]
    pts += [("special_param", "special_h", k, 1e-9) for k in range(br.sizes["special"])]
    for pv, hv, i, tol in pts:
        m2, x2 = apply_parameter(m, br["x"].values, over, float(br[pv][i]))
        s = m2.form().fixed_point_map()
        assert np.abs(s.F(br[hv].values[i][None], s.c(x2[None]))).max() <= tol

"""Every fixed point and k-cycle of a piecewise-affine network (``fixed_points(method="complete")``,
``dynlab.analysis.pwa``), checked against brute force over every activation region (a separate,
obviously-correct loop here), closed forms, the map itself (``dl.simulate``) and the multi-start
search — and a mutation test showing the brute-force comparison fails when the LP relaxation is
wrong."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import dynlab as dl
from dynlab.analysis import pwa
from dynlab.errors import ParameterError
from dynlab.models import CTRNN, IRNN, RNN, FastRNN

SLOPES = {"relu": (0.0, 1.0), "leaky-relu": (0.2, 1.0), "abs": (-1.0, 1.0)}


def brute_force(U, c, activation, beta=1.0, gamma=1.0):
    """Every solution of β y = γ φ(U y + c), region by region: for each of the 2^D choices of piece
    (slope s_i on z_i < 0 or z_i ≥ 0), solve (βI − γ S U) y = γ S c and keep y when every z_i lies
    on its chosen side (to 1e-10)."""
    D = len(c)
    lo, hi = SLOPES[activation]
    out = []
    for pat in itertools.product((0, 1), repeat=D):
        S = np.diag([hi if p else lo for p in pat])
        y = np.linalg.solve(beta * np.eye(D) - gamma * S @ U, gamma * S @ c)
        z = U @ y + c
        if all((zi >= -1e-10) if p else (zi <= 1e-10) for zi, p in zip(z, pat)):
            if not any(np.linalg.norm(y - o) <= 1e-9 * (1 + np.linalg.norm(y)) for o in out):
                out.append(y)
    return np.array(out).reshape(-1, D)


def same_points(A, B, tol=1e-9):
    """Whether two point sets are equal (every point of each within tol of one of the other)."""
    if A.shape != B.shape:
        return False
    if A.size == 0:
        return True
    d = np.linalg.norm(A[:, None] - B[None], axis=2)
    return bool((d.min(axis=1) <= tol).all() and (d.min(axis=0) <= tol).all())


def _inhibition(D, seed, w=1.0, s=0.2, noise=0.1):
    """Mutually inhibiting ReLU units (self-excitation s, inhibition w, bias 1): many fixed points."""
    rng = np.random.default_rng(seed)
    U = -w * (np.ones((D, D)) - np.eye(D)) + s * np.eye(D) + noise * rng.standard_normal((D, D))
    return RNN(U, np.zeros((D, 1)), np.ones(D), activation="relu")


@pytest.mark.parametrize("activation,seed", [("relu", 10), ("relu", 7), ("leaky-relu", 3), ("abs", 9)])
def test_complete_equals_brute_force_on_random_maps(activation, seed):
    """D = 8 random maps (U = 1.5 I + N(0, 1.5²/D): self-excitation, so several regions hold roots —
    3 to 18 with these seeds): the same set of fixed points as the 256-region brute force, each a
    root to 1e-12, and the statement says complete."""
    rng = np.random.default_rng(seed)
    D = 8
    U = 1.5 * rng.standard_normal((D, D)) / np.sqrt(D) + 1.5 * np.eye(D)
    W = rng.standard_normal((D, 1))
    b = rng.standard_normal(D)
    m = RNN(U, W, b, activation=activation, leak=0.2)
    x = np.array([0.3])
    fp = dl.fixed_points(m, x, method="complete", progress=False)
    ref = brute_force(U, W @ x + b, activation)
    assert same_points(fp["h_eq"].values, ref)
    assert fp.attrs["complete"] == 1 and fp.attrs["completeness"].startswith("complete: ")
    assert len(ref) >= 2 and fp.attrs["n_roots"] == len(ref) and (fp["residual"].values <= 1e-12).all()
    assert (fp["certified"].values == 1).all()  # each inside its region: the region test certifies it


def test_mutually_inhibiting_network_against_brute_force_and_multistart():
    """The issue's example at D = 10: the enumeration equals brute force over the 1024 regions
    (85 points with this seed), every point the multi-start search (1024 starts) finds is one of
    them (to 1e-9), and the search misses some (it finds 44 here): the completeness is real."""
    m = _inhibition(10, 0)
    fp = dl.fixed_points(m, [0.0], method="complete", progress=False)
    ref = brute_force(m.U, m.b, "relu")
    assert same_points(fp["h_eq"].values, ref) and len(ref) > 50
    ms = dl.fixed_points(m, [0.0], n_starts=1024, progress=False)
    d = np.linalg.norm(ms["h_eq"].values[:, None] - fp["h_eq"].values[None], axis=2).min(axis=1)
    assert (d <= 1e-9).all()
    assert ms.attrs["n_roots"] < fp.attrs["n_roots"]


@pytest.mark.parametrize("make", [
    lambda U, W, b: IRNN(U, W, b, activation="relu", alpha=1.5),
    lambda U, W, b: CTRNN(U, W, b, activation="relu", alpha=1.5, tau=2.0),
    lambda U, W, b: FastRNN(U, W, b, activation="relu", alpha=0.5, beta=-1.0),
])
def test_flows_and_gated_cells_solve_their_own_equation(make):
    """irnn (α s = φ(U s + c)), ctrnn (the same zeros of the flow) and fastrnn ((1 − σ(β)) h =
    σ(α) φ(U h + c)): brute force with their β, γ gives the same points."""
    rng = np.random.default_rng(5)
    D = 6
    U, W, b = 2.5 * rng.standard_normal((D, D)) / np.sqrt(D), rng.standard_normal((D, 1)), rng.standard_normal(D)
    m = make(U, W, b)
    fp = dl.fixed_points(m, [0.0], method="complete", progress=False)
    if m.name == "fastrnn":
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        beta, gamma = 1 - sig(m.beta), sig(m.alpha)
    else:
        beta, gamma = 1.5, 1.0
    assert same_points(fp["h_eq"].values, brute_force(U, b, "relu", beta, gamma))
    assert (fp["residual"].values <= 1e-12).all()


def test_two_cycle_of_a_negative_self_weight_in_closed_form():
    """h ↦ relu(w h + c), w < −1, c > 0: the fixed point c/(1 − w) and the 2-cycle {c, 0}
    (relu(w c + c) = 0 since c(1 + w) < 0), whose multiplier is w · 0 = 0 (stable); the cycle
    found is that one, and ``dl.simulate`` maps each of its states to the next."""
    w, c = -2.0, 0.7
    m = RNN([[w]], [[0.0]], [c], activation="relu")
    fp = dl.fixed_points(m, [0.0], method="complete", cycles=3, progress=False)
    np.testing.assert_allclose(fp["h_eq"].values[:, 0], [c / (1 - w)], atol=1e-14)
    assert fp.sizes["cycle"] == 1 and int(fp["cycle_period"][0]) == 2
    np.testing.assert_allclose(np.sort(fp["cycle_h"].values[0, :2, 0]), [0.0, c], atol=1e-14)
    assert float(fp["cycle_radius"][0]) == 0.0 and int(fp["cycle_stability"][0]) == 1
    assert np.isnan(fp["cycle_h"].values[0, 2]).all()


def test_cycles_of_a_random_map_against_brute_force_and_the_simulation():
    """Every 2-cycle of a D = 3 relu map: brute force over the 2^6 pairs of regions (solve the
    6-dimensional affine system h₂ = S₁(U h₁ + c), h₁ = S₂(U h₂ + c)) gives the same orbits, and one
    step of ``dl.simulate`` from each state lands on the next (1e-12)."""
    rng = np.random.default_rng(11)
    D = 3
    U = -1.8 * np.eye(D) + 0.6 * rng.standard_normal((D, D))
    b = rng.uniform(0.2, 1.0, D)
    m = RNN(U, np.zeros((D, 1)), b, activation="relu")
    fp = dl.fixed_points(m, [0.0], method="complete", cycles=2, progress=False)
    found = set()
    for p1 in itertools.product((0, 1), repeat=D):
        for p2 in itertools.product((0, 1), repeat=D):
            S1, S2 = np.diag(p1).astype(float), np.diag(p2).astype(float)
            M = np.block([[np.eye(D), -S2 @ U], [-S1 @ U, np.eye(D)]])
            y = np.linalg.solve(M, np.concatenate([S2 @ b, S1 @ b]))
            h1, h2 = y[:D], y[D:]
            z1, z2 = U @ h1 + b, U @ h2 + b
            ok = all((z >= -1e-10) if p else (z <= 1e-10) for z, p in zip(np.r_[z1, z2], p1 + p2))
            if ok and np.linalg.norm(h1 - h2) > 1e-9:
                found.add(tuple(np.round(min(tuple(h1), tuple(h2)), 9)))
    got = {tuple(np.round(fp["cycle_h"].values[i, 0], 9)) for i in range(fp.sizes.get("cycle", 0))}
    assert got == found and len(found) >= 1
    for i in range(fp.sizes["cycle"]):
        H = fp["cycle_h"].values[i, :2]
        nxt = dl.simulate(m, np.zeros((1, 1, 1)).repeat(2, axis=0), H, backend="numpy")["h"].values[:, 0]
        np.testing.assert_allclose(nxt, H[::-1], atol=1e-12)
        assert float(fp["cycle_residual"][i]) <= 1e-12


def test_work_limit_reports_incomplete_and_keeps_what_it_found():
    """A limit of 30 (LP nodes + regions) stops the D = 10 enumeration: ``complete`` 0, the
    statement begins "incomplete after", the unexamined regions are counted, and the points found
    so far are all true fixed points (a subset of the complete set)."""
    m = _inhibition(10, 0)
    full = dl.fixed_points(m, [0.0], method="complete", progress=False)
    part = dl.fixed_points(m, [0.0], method="complete", max_regions=30, progress=False)
    assert part.attrs["complete"] == 0 and part.attrs["completeness"].startswith("incomplete after ")
    assert part.attrs["unexamined_regions"] > 0
    d = np.linalg.norm(part["h_eq"].values[:, None] - full["h_eq"].values[None], axis=2).min(axis=1)
    assert (d <= 1e-9).all() and part.attrs["n_roots"] < full.attrs["n_roots"]


def test_mutation_a_wrong_relaxation_is_caught_by_brute_force(monkeypatch):
    """Mutation: with the relaxation's inequality reversed (φ treated as concave: r ≤ every piece
    instead of ≥) the LP prunes nodes that hold fixed points, and the brute-force comparison of
    ``test_complete_equals_brute_force_on_random_maps`` fails — the check can fail."""
    m = _inhibition(10, 0)
    ref = brute_force(m.U, m.b, "relu")
    real = pwa.pieces

    def concave(activation, leak=0.01):
        p = real(activation, leak)
        return pwa.Pieces(p.slope, p.offset, p.lo, p.hi, not p.convex)

    monkeypatch.setattr(pwa, "pieces", concave)
    monkeypatch.setattr(pwa, "LEAF_UNITS", 3)
    fp = dl.fixed_points(m, [0.0], method="complete", progress=False)
    assert not same_points(fp["h_eq"].values, ref)


def test_what_the_complete_method_refuses():
    with pytest.raises(ParameterError, match="activation"):
        dl.fixed_points(dl.make_model("rnn", 3, 1, seed=0), [0.0], method="complete")
    with pytest.raises(ParameterError, match="model"):
        dl.fixed_points(dl.make_model("gru", 3, 1, seed=0), [0.0], method="complete")
    with pytest.raises(ParameterError, match="model"):
        dl.fixed_points(dl.make_model("antisymmetric", 3, 1, seed=0, activation="relu"), [0.0], method="complete")
    with pytest.raises(ParameterError, match="cycles"):
        dl.fixed_points(dl.make_model("ctrnn", 3, 1, seed=0, activation="relu"), [0.0], method="complete", cycles=2)
    with pytest.raises(ParameterError, match="method"):
        dl.fixed_points(dl.make_model("rnn", 3, 1, seed=0), [0.0], method="exhaustive")
    with pytest.raises(ParameterError, match="max_regions"):
        dl.fixed_points(_inhibition(3, 0), [0.0], method="complete", max_regions=0)
    assert pwa.MAX_REGIONS == __import__("dynlab.spec", fromlist=["x"]).COMPLETE_MAX_REGIONS


def test_cli_complete_writes_the_statement_and_exits_1_when_stopped(tmp_path):
    from click.testing import CliRunner

    from dynlab.cli import main

    w = tmp_path / "w.npz"
    dl.save_model(_inhibition(8, 0), w)
    runner = CliRunner()
    res = runner.invoke(main, ["equilibria", "--weights", str(w), "--complete", "--cycles", "2",
                               "--data", str(tmp_path / "c.nc")])
    assert res.exit_code == 0, res.output
    ds = dl.read_dataset(tmp_path / "c.nc")
    assert ds.attrs["complete"] == 1 and "complete:" in res.output and "2-cycles" in ds.attrs["completeness"]
    assert same_points(ds["h_eq"].values, brute_force(_inhibition(8, 0).U, np.ones(8), "relu"))
    res = runner.invoke(main, ["equilibria", "--weights", str(w), "--complete", "--max-regions", "3",
                               "--data", str(tmp_path / "p.nc")])
    assert res.exit_code == 1 and "incomplete after" in res.output
    assert dl.read_dataset(tmp_path / "p.nc").attrs["complete"] == 0
    res = runner.invoke(main, ["equilibria", "--weights", str(w), "--cycles", "2"])
    assert res.exit_code == 2 and "--cycles" in res.output

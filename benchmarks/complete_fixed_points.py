"""Workloads ``complete-fixed-points-16`` and ``-32`` (docs/design.md, *Benchmarks*; the group
``complete-fixed-points`` runs both): every fixed point of a trained ReLU RNN by region enumeration
(``dl.fixed_points(method="complete")``: branch and bound over activation patterns with a HiGHS LP
test), against the multi-start search on the same network.

The networks: ``benchmarks/data/flipflop_relu{16,32}.npz``, Elman ReLU RNNs trained on the 3-bit
flip-flop by ``python -m benchmarks.make_flipflop_relu`` (the files record how); the input is x = 0
(the memory phase).  Rows:

* ``complete`` (reference): the public call, with its proof (every region solved or pruned);
* ``brute force`` (D = 16 only): all 2¹⁶ regions' linear systems solved in batches and each
  solution kept when it lies in its own region — the slow, obviously-complete answer the
  enumeration must equal (compared, to 1e-9);
* ``multi-start, 1024 random starts`` and ``multi-start, 1024 starts on its trajectories`` (the
  FixedPointFinder workflow): ``dl.fixed_points`` as a user would call it — not compared (it
  returns what its starts reach); the info lines say how many of the complete set each found,
  and that every point it found is in the complete set.

The info lines of ``-16`` also reproduce the issue's example: a mutually inhibiting ReLU network
(D = 10, U = −(11ᵀ − I) + 0.2 I + N(0, 0.1²), b = 1, seed 0) counted by brute force over its
2¹⁰ regions, by the enumeration, and by the multi-start search with 1024 starts; and the worst case
for pruning, the same construction at D = 16 (most regions hold a candidate), timed once.
"""
from __future__ import annotations

import itertools
import os
import time

import numpy as np

import dynlab as dl

from .harness import Impl, Workload

HERE = os.path.dirname(os.path.abspath(__file__))
STARTS = 1024


def load_relu(D):
    from dynlab.models import RNN

    z = np.load(os.path.join(HERE, "data", f"flipflop_relu{D}.npz"))
    return RNN(z["U"], z["W"], z["b"], activation="relu")


def inhibition(D, seed=0):
    """The issue's mutually inhibiting ReLU network (module docstring)."""
    from dynlab.models import RNN

    rng = np.random.default_rng(seed)
    U = -(np.ones((D, D)) - np.eye(D)) + 0.2 * np.eye(D) + 0.1 * rng.standard_normal((D, D))
    return RNN(U, np.zeros((D, 1)), np.ones(D), activation="relu")


def brute_force(m, x, chunk=4096):
    """Every fixed point of h = relu(U h + W x + b), region by region (2^D linear solves)."""
    D = m.hidden
    U, c = m.U, m.W @ x + m.b
    out = []
    pats = np.array(list(itertools.product((0.0, 1.0), repeat=D)))
    for lo in range(0, len(pats), chunk):
        S = pats[lo:lo + chunk]
        M = np.eye(D)[None] - S[:, :, None] * U[None]
        h = np.linalg.solve(M, (S * c)[..., None])[..., 0]
        z = h @ U.T + c
        ok = np.all(np.where(S > 0, z >= -1e-10, z <= 1e-10), axis=1)
        out.append(h[ok])
    P = np.vstack(out)
    keep = []
    for i, p in enumerate(P):
        if all(np.linalg.norm(p - P[j]) > 1e-9 * (1 + np.linalg.norm(p)) for j in keep):
            keep.append(i)
    return _sorted(P[keep])


def _sorted(P):
    return P[np.lexsort(P.T[::-1])] if len(P) else P


def _trajectory_states(m, n, seed=0):
    task = dl.make_task("flipflop", 100, seed=1, n_train=4, n_val=4, n_test=64)
    x, _ = task.batch("test")
    H = dl.simulate(m, x, backend="numpy")["h"].values.reshape(-1, m.state_size)
    return H[np.random.default_rng(seed).integers(0, H.shape[0], n)]


def _coverage(P, Q):
    """(points of Q found in P, whether every point of Q is in P) to 1e-9."""
    if len(Q) == 0:
        return 0, True
    d = np.linalg.norm(Q[:, None] - P[None], axis=2).min(axis=1) if len(P) else np.full(len(Q), np.inf)
    return int((d <= 1e-9).sum()), bool((d <= 1e-9).all())


def _build(D, quick):
    m = load_relu(D)
    x0 = np.zeros(m.inputs)
    starts = _trajectory_states(m, 256 if quick else STARTS)
    n = 256 if quick else STARTS

    def complete():
        return _sorted(dl.fixed_points(m, x0, method="complete", progress=False)["h_eq"].values)

    def random_starts():
        return dl.fixed_points(m, x0, n_starts=n, progress=False)["h_eq"].values

    def trajectory_starts():
        return dl.fixed_points(m, x0, n_starts=n, trajectories=starts, progress=False)["h_eq"].values

    impls = [Impl(f"dl.fixed_points(method='complete'), D={D}", complete)]
    if D <= 16:
        impls.append(Impl(f"brute force over all 2^{D} regions (batched solves)", lambda: brute_force(m, x0)))
    impls += [Impl(f"multi-start, {n} random starts", random_starts, check=False,
                   note="returns what its starts reach"),
              Impl(f"multi-start, {n} starts on its trajectories", trajectory_starts, check=False,
                   note="returns what its starts reach")]
    info = {"sizes": f"trained flip-flop ReLU RNN D={D} (benchmarks/data/flipflop_relu{D}.npz), x = 0, float64"}
    if quick:
        return impls, info
    t0 = time.perf_counter()
    fp = dl.fixed_points(m, x0, method="complete", progress=False)
    secs = time.perf_counter() - t0
    P = _sorted(fp["h_eq"].values)
    info["complete: fixed points, proof"] = (
        f"{len(P)} ({int(fp.attrs['n_stable'])} stable, {int(fp.attrs['n_saddles'])} one-mode saddles) in "
        f"{secs:.3g} s; {fp.attrs['lp_nodes']} LP nodes ({fp.attrs['pruned_nodes']} pruned), "
        f"{fp.attrs['regions_solved']} regions solved of 2^{D} = {2 ** D}; proven complete: "
        f"{'yes' if fp.attrs['complete'] else 'NO'}")
    for label, fn in (("random starts", random_starts), ("starts on its trajectories", trajectory_starts)):
        Q = fn()
        found, inside = _coverage(P, Q)
        info[f"multi-start ({n} {label})"] = (f"{len(Q)} points, {found} of the {len(P)} complete ones; every one "
                                               f"in the complete set: {'yes' if inside else 'NO'}")
    if D <= 16:
        info.update(_issue_example())
    return impls, info


def _issue_example():
    out = {}
    m = inhibition(10)
    x0 = np.zeros(1)
    B = brute_force(m, x0)
    t0 = time.perf_counter()
    fp = dl.fixed_points(m, x0, method="complete", progress=False)
    t_c = time.perf_counter() - t0
    ms = dl.fixed_points(m, x0, n_starts=STARTS, progress=False)
    found, inside = _coverage(fp["h_eq"].values, ms["h_eq"].values)
    out["issue's example: mutually inhibiting D=10"] = (
        f"brute force over 1024 regions {len(B)}; complete {fp.attrs['n_roots']} ({t_c:.3g} s, equal to brute force: "
        f"{'yes' if _coverage(_sorted(fp['h_eq'].values), B)[1] and len(B) == fp.attrs['n_roots'] else 'NO'}); "
        f"multi-start with {STARTS} starts {ms.attrs['n_roots']} ({ms.attrs['n_roots'] / max(len(B), 1):.0%}), all "
        f"in the complete set: {'yes' if inside else 'NO'}")
    m16 = inhibition(16)
    t0 = time.perf_counter()
    fp = dl.fixed_points(m16, x0, method="complete", progress=False)
    t16 = time.perf_counter() - t0
    ms = dl.fixed_points(m16, x0, n_starts=STARTS, progress=False)
    out["worst case: mutually inhibiting D=16"] = (
        f"complete {fp.attrs['n_roots']} in {t16:.3g} s ({fp.attrs['lp_nodes']} LP nodes, {fp.attrs['regions_solved']} "
        f"regions solved of 65536); multi-start with {STARTS} starts {ms.attrs['n_roots']}")
    return out


WORKLOADS = [
    Workload("complete-fixed-points-16", "every fixed point of a trained ReLU RNN, D=16: region enumeration vs brute "
             "force and multi-start", lambda quick: _build(16, quick),
             baseline="dl.fixed_points(method='complete'), D=16", rtol=1e-9, repeat=3),
    Workload("complete-fixed-points-32", "every fixed point of a trained ReLU RNN, D=32: region enumeration vs "
             "multi-start", lambda quick: _build(32, quick),
             baseline="dl.fixed_points(method='complete'), D=32", rtol=1e-9, repeat=1),
]
GROUPS = {"complete-fixed-points": ["complete-fixed-points-16", "complete-fixed-points-32"]}

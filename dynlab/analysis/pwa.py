"""Every fixed point and k-cycle of a piecewise-affine network, with a proof that none is missing.

The equilibria of a ``ResidualMap`` (``dynlab.models.fixed_point``) solve β y = γ φ(R y + c).  For a
piecewise-affine φ (relu, leaky-relu, abs, identity) write r = φ(z), z = R y + c; where β ≠ 0,
y = (γ/β) r and every fixed point is a solution of

    z = A r + c,   r_i = φ(z_i),   A = (γ/β) R                                        (1)

— in each *region* (a choice of affine piece r_i = m_p z_i + o_p for every unit) one linear
system (I − A M) z = A o + c, a true fixed point only if its z lies in the region.  A k-cycle of
a map h ↦ a h + γ φ(R h + c) (β = 1 − a) is the same problem on kD units: with r_j = φ(z_j) along
the cycle, y_j = γ/(1 − aᵏ) Σ_m aᵐ r_(j−1−m) (indices mod k), so z = 𝒜 r + 𝒸 with a block-
circulant 𝒜 of blocks γ a^((j−1−l) mod k)/(1 − aᵏ) R.

**Branch and bound.**  The regions are the leaves of a tree that fixes one unit's piece per
level.  At a node (some units fixed, the others free) the linear program (scipy's HiGHS)

    min t ≥ 0  s.t.  fixed unit i, piece p:  r_i = m_p z_i + o_p,  lo_p − t ≤ z_i ≤ hi_p + t
                     free unit i:            m_q z_i + o_q − r_i ≤ t  for every piece q

(rows scaled to unit norm in r; z = A r + c) relaxes the node: every fixed point whose region
lies below the node satisfies it with t = 0 (a convex φ is the max of its pieces, so r_i ≥ every
piece; a concave one — leaky-relu with slope > 1 — the min, with the signs reversed).  A node
whose least violation t* exceeds ``PRUNE_TOL`` holds no fixed point and is pruned; a node with
at most ``LEAF_UNITS`` free units is finished by solving all its regions exactly (batched
``numpy.linalg.solve``).  Each candidate is kept only when its z lies in its own region (to
``REGION_TOL``·(1 + |z|)).  What is proven: every one of the Pᴺ regions was either solved or
lies under a pruned node — up to the LP solver's accuracy, which the margin ``PRUNE_TOL`` on t*
(a distance in z, rows normalised) stands well above (HiGHS's feasibility tolerance is 1e-7
on the unscaled rows, and the pruned nodes' smallest t* is reported).  A region whose linear
system is singular (cond > 1e12) holds no isolated point or a continuum; such regions are
counted and named in the statement, never silently dropped.  A work limit (``max_regions``
nodes and regions) stops the search with the open subtrees counted: "incomplete after N".
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from .._progress import progress
from ..errors import ParameterError

#: A node is pruned when its LP's least violation t* (a distance in z: rows have unit norm)
#: exceeds this; HiGHS's primal feasibility tolerance is 1e-7, so a node holding a fixed point
#: (t* = 0 exactly) is never pruned by rounding.
PRUNE_TOL = 1e-6
#: Nodes with at most this many free units are finished by solving every region (2⁶ = 64 solves
#: cost less than one LP).
LEAF_UNITS = 6
#: A candidate's z may lie this far (relative, ·(1 + |z|)) outside its region: points on a
#: boundary z_i = 0 belong to both sides and are deduplicated.
REGION_TOL = 1e-10
#: Above this condition number a region's linear system counts as singular.
SINGULAR_COND = 1e12
#: Default work limit: LP nodes plus regions solved.
MAX_REGIONS = 200_000


@dataclasses.dataclass(frozen=True)
class Pieces:
    """The affine pieces of φ: on [lo_p, hi_p], φ(z) = m_p z + o_p; ``convex`` (φ = max of the
    pieces) or concave (φ = min)."""

    slope: np.ndarray
    offset: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    convex: bool

    @property
    def count(self) -> int:
        return int(self.slope.size)


def pieces(activation: str, leak: float = 0.01) -> Pieces:
    """The pieces of a piecewise-affine activation; ParameterError for a smooth one."""
    inf = np.inf
    if activation == "identity":
        return Pieces(np.array([1.0]), np.zeros(1), np.array([-inf]), np.array([inf]), True)
    neg = {"relu": 0.0, "leaky-relu": float(leak), "abs": -1.0}.get(activation)
    if neg is None:
        raise ParameterError("activation", f"the complete enumeration needs a piecewise-affine φ (relu, leaky-relu, "
                                           f"abs, identity); this model's is {activation}")
    return Pieces(np.array([neg, 1.0]), np.zeros(2), np.array([-inf, 0.0]), np.array([0.0, inf]), neg <= 1.0)


@dataclasses.dataclass
class Enumeration:
    """What ``enumerate_regions`` found and proved.

    z : (n, N) the solutions whose z lies in its own region;  pattern : (n, N) their pieces;
    complete : every region solved or pruned;  nodes : LP relaxations solved;  pruned : nodes
    pruned;  regions : regions solved exactly;  singular : regions with a singular system;
    open_patterns : regions left unexamined when the work limit stopped the search (0 if complete);
    min_pruned_violation : the smallest t* of a pruned node (inf when none was pruned).
    """

    z: np.ndarray
    pattern: np.ndarray
    complete: bool
    nodes: int
    pruned: int
    regions: int
    singular: int
    open_patterns: float
    min_pruned_violation: float
    total_patterns: float


def _node_lp(A, c, pc: Pieces, assign, scale):
    """The node's LP (module docstring); returns (t*, r*).  The fixed units' equalities are kept
    exact (A_eq); the solver's failure to decide (any status but optimal) returns t* = 0: a node
    is never pruned on anything but a solved LP."""
    from scipy.optimize import linprog

    N = c.size
    eye = np.eye(N)
    fixed = assign >= 0
    free = ~fixed
    p = np.where(fixed, assign, 0)
    m, o = pc.slope[p], pc.offset[p]
    lo, hi = pc.lo[p], pc.hi[p]
    rows, rhs = [], []
    low = fixed & np.isfinite(lo)  # z_i ≥ lo_p:  −A_i r ≤ c_i − lo_p
    rows.append(-A[low])
    rhs.append(c[low] - lo[low])
    up = fixed & np.isfinite(hi)  # z_i ≤ hi_p:  A_i r ≤ hi_p − c_i
    rows.append(A[up])
    rhs.append(hi[up] - c[up])
    sign = 1.0 if pc.convex else -1.0
    for q in range(pc.count):  # free units: r_i above (convex φ) every piece m_q z_i + o_q
        mq, oq = pc.slope[q], pc.offset[q]
        rows.append(sign * (mq * A[free] - eye[free]))
        rhs.append(-sign * (mq * c[free] + oq))
    Aub = np.vstack(rows)
    bub = np.concatenate(rhs)
    norm = np.linalg.norm(Aub, axis=1)
    zero = norm == 0.0
    norm[zero] = 1.0
    Aub = np.hstack([Aub / norm[:, None], -np.ones((Aub.shape[0], 1))])
    bub = bub / norm
    Aeq = np.hstack([eye[fixed] - m[fixed, None] * A[fixed], np.zeros((int(fixed.sum()), 1))])
    beq = m[fixed] * c[fixed] + o[fixed]
    cost = np.zeros(N + 1)
    cost[-1] = 1.0
    bounds = [(None, None)] * N + [(0.0, None)]
    res = linprog(cost, A_ub=Aub, b_ub=bub, A_eq=Aeq if beq.size else None, b_eq=beq if beq.size else None,
                  bounds=bounds, method="highs", options={"presolve": False})
    if res.status != 0 or res.x is None:
        return 0.0, None
    return float(res.x[-1]), res.x[:N]


def _solve_regions(A, c, pc: Pieces, patterns):
    """Solve (I − A M) z = A o + c for every row of ``patterns`` (n, N); returns (z, in_region,
    singular) with z NaN where singular."""
    n, N = patterns.shape
    M = pc.slope[patterns]
    O = pc.offset[patterns]
    mats = np.eye(N)[None] - A[None] * M[:, None, :]
    rhs = O @ A.T + c
    cond = np.linalg.cond(mats)
    singular = ~(cond < SINGULAR_COND)
    z = np.full((n, N), np.nan)
    ok = ~singular
    if ok.any():
        z[ok] = np.linalg.solve(mats[ok], rhs[ok][..., None])[..., 0]
    slack = REGION_TOL * (1.0 + np.abs(z))
    with np.errstate(invalid="ignore"):
        inside = np.all((z >= pc.lo[patterns] - slack) & (z <= pc.hi[patterns] + slack), axis=1) & ok
    return z, inside, singular


def enumerate_regions(A, c, pc: Pieces, *, max_regions: int = MAX_REGIONS, leaf_units: int = LEAF_UNITS,
                      stage: str = "regions"):
    """Every solution of z = A r + c, r = φ(z) (module docstring, (1)) by branch and bound.

    Parameters
    ----------
    A : (N, N), c : (N,) — the problem (1);  pc : the pieces of φ (``pieces``)
    max_regions : work limit, LP nodes plus regions solved; the search stops there, reporting
        the regions it did not examine
    leaf_units : nodes with at most this many free units are solved region by region

    Returns
    -------
    Enumeration
    """
    A = np.asarray(A, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    N = c.size
    P = pc.count
    scale = 1.0 + float(np.abs(c).max(initial=0.0))
    colnorm = np.linalg.norm(A, axis=0)
    found_z, found_p = [], []
    nodes = pruned = regions = singular = 0
    min_t = np.inf
    root = -np.ones(N, dtype=np.int64)
    if P == 1:
        root[:] = 0
    stack = [root]
    work = 0
    while stack:
        if work >= max_regions:
            break
        assign = stack.pop()
        free = np.flatnonzero(assign < 0)
        if free.size <= leaf_units:
            combos = np.array(list(itertools.product(range(P), repeat=free.size)), dtype=np.int64).reshape(-1, free.size)
            pats = np.repeat(assign[None], combos.shape[0], axis=0)
            pats[:, free] = combos
            z, inside, sing = _solve_regions(A, c, pc, pats)
            found_z.append(z[inside])
            found_p.append(pats[inside])
            regions += pats.shape[0]
            singular += int(sing.sum())
            work += pats.shape[0]
            progress(stage, work, max(work, max_regions))
            continue
        t, r = _node_lp(A, c, pc, assign, scale)
        nodes += 1
        work += 1
        if t > PRUNE_TOL * scale:
            pruned += 1
            min_t = min(min_t, t)
            continue
        # branch on the free unit whose relaxation gap |r_i − φ(z_i)| moves the others most (times
        # ‖A e_i‖): on a trained D = 32 network 25 % fewer LP nodes than the gap alone
        if r is None:
            i = int(free[0])
            first = 0
        else:
            z = A @ r + c
            zi = z[free]
            val = pc.slope[None, :] * zi[:, None] + pc.offset[None, :]
            phi = val.max(axis=1) if pc.convex else val.min(axis=1)
            i = int(free[np.argmax(np.abs(r[free] - phi) * colnorm[free])])
            first = int(np.argmax((z[i] >= pc.lo) & (z[i] <= pc.hi)))
        for p in [q for q in range(P) if q != first] + [first]:  # the LP point's piece is explored first
            child = assign.copy()
            child[i] = p
            stack.append(child)
    open_patterns = float(sum(P ** int((a < 0).sum()) for a in stack))
    Z = np.vstack(found_z) if found_z else np.empty((0, N))
    pat = np.vstack(found_p) if found_p else np.empty((0, N), dtype=np.int64)
    return Enumeration(Z, pat, not stack, nodes, pruned, regions, singular, open_patterns, min_t, float(P) ** N)


# ------------------------------------------------------------------ fixed points and cycles
def _problem(system, c, k: int):
    """(A, 𝒸) of (1) for k-cycles (k = 1: fixed points) of ``system`` at c (D,)."""
    beta, gamma, R = float(system.beta), float(system.gamma), system.R
    D = R.shape[0]
    if k == 1:
        return (gamma / beta) * R, np.array(c, dtype=np.float64)
    a = 1.0 - beta
    blocks = np.empty((k * D, k * D))
    for j in range(k):
        for l in range(k):
            blocks[j * D:(j + 1) * D, l * D:(l + 1) * D] = gamma * a ** ((j - 1 - l) % k) / (1.0 - a ** k) * R
    return blocks, np.tile(c, k)


def _states(system, r, k: int):
    """y along the cycle (k, D) from r (k·D,): y_j = γ/(1 − aᵏ) Σ_m aᵐ r_(j−1−m)."""
    D = system.R.shape[0]
    r = r.reshape(k, D)
    a = 1.0 - float(system.beta)
    y = np.zeros((k, D))
    for j in range(k):
        for m in range(k):
            y[j] += a ** m * r[(j - 1 - m) % k]
    return float(system.gamma) / (1.0 - a ** k) * y


def complete_points(system, c, *, cycles: int = 1, max_regions: int = MAX_REGIONS, name: str = "the model"):
    """Every fixed point (and, for maps, every cycle of period 2..``cycles``) of a piecewise-affine
    fixed-point map ``system`` (``form.fixed_point_map()``) at c (D,), by ``enumerate_regions``;
    ``name`` is the model's, for the messages.

    Returns
    -------
    dict with ``points`` (n, D) the fixed points (each polished by one Newton step inside its
    region, which is exact there), ``patterns`` (n, D) their pieces, ``cycles`` a list of
    (period, states (period, D)) — each cycle once, of minimal period, starting at its
    lexicographically smallest state —, and ``proof``: one ``Enumeration`` per period.
    """
    if not system.residual_form:
        raise ParameterError("model", f"the complete enumeration takes the models of the form β y = γ φ(R y + c) "
                                      f"(rnn, fastrnn, rin, irnn, ctrnn); {name} is given by its step map")
    if float(system.beta) == 0.0:
        raise ParameterError("model", f"the complete enumeration needs β ≠ 0: {name} has h' = h + γ φ(·) (β = 0), "
                                       "whose fixed points {y : φ(R y + c) = 0} form a polyhedron, not isolated points")
    cycles = int(cycles)
    if cycles < 1:
        raise ParameterError("cycles", f"must be ≥ 1, got {cycles}")
    if cycles > 1 and not system.discrete:
        raise ParameterError("cycles", f"k-cycles are orbits of a map; {name}'s equilibria are those of a "
                                       "flow (give cycles=1)")
    if cycles > 1 and abs(1.0 - float(system.beta)) >= 1.0:
        raise ParameterError("cycles", "needs |a| < 1 in h' = a h + γ φ(·)")
    pc = pieces(system.activation, system.leak)
    D = system.R.shape[0]
    proofs, points, pats, cyc = [], np.empty((0, D)), np.empty((0, D), dtype=np.int64), []
    budget = int(max_regions)
    for k in range(1, cycles + 1):
        A, cc = _problem(system, c, k)
        en = enumerate_regions(A, cc, pc, max_regions=budget, stage=f"complete enumeration (period {k}: work)")
        budget = max(budget - en.nodes - en.regions, 0)
        proofs.append(en)
        sol = [(_states(system, pc.slope[p] * z + pc.offset[p], k), p) for z, p in zip(en.z, en.pattern)]
        if k == 1:
            P = np.array([y[0] for y, _ in sol]).reshape(-1, D)
            pat = np.array([p for _, p in sol], dtype=np.int64).reshape(-1, D)
            P = _polish(system, P, c, pc, pat)
            keep = _distinct(P)
            points, pats = P[keep], pat[keep]
            order = np.lexsort(points.T[::-1]) if len(points) else np.arange(0)
            points, pats = points[order], pats[order]
        else:
            for y, _ in sol:
                period = _minimal_period(y)
                if period != k:
                    continue  # a repetition of a shorter orbit (a fixed point, or a divisor's cycle)
                start = min(range(k), key=lambda j: tuple(y[j]))
                y = np.roll(y, -start, axis=0)
                if not any(len(o) == k and np.allclose(o, y, rtol=0, atol=1e-9 * (1 + np.abs(y).max())) for _, o in cyc):
                    cyc.append((k, y))
        if not en.complete:
            break
    return {"points": points, "patterns": pats, "cycles": cyc, "proof": proofs, "pieces": pc}


def _polish(system, P, c, pc, pat):
    """One Newton step on F inside each point's region (exact there: F is affine in the region)."""
    if not len(P):
        return P
    C = np.broadcast_to(c, P.shape)
    F = system.F(P, C)
    d = pc.slope[pat]
    J = (system.gamma * d)[:, :, None] * system.R[None] - system.beta * np.eye(P.shape[1])[None]
    try:
        return P - np.linalg.solve(J, F[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return P


def _distinct(P, tol=1e-9):
    keep = []
    for i, p in enumerate(P):
        if all(np.linalg.norm(p - P[j]) > tol * (1.0 + np.linalg.norm(p)) for j in keep):
            keep.append(i)
    return np.array(keep, dtype=np.int64)


def _minimal_period(y, tol=1e-9):
    k = y.shape[0]
    for d in range(1, k + 1):
        if k % d == 0 and np.allclose(y, np.roll(y, -d, axis=0), rtol=0, atol=tol * (1.0 + np.abs(y).max())):
            return d
    return k


def statement(proofs, pc: Pieces, D: int, cycles: int) -> tuple[bool, str]:
    """(complete, the sentence that says what was proven or where the search stopped)."""
    parts = []
    complete = all(en.complete for en in proofs) and len(proofs) == cycles
    work = sum(en.nodes + en.regions for en in proofs)
    for k, en in enumerate(proofs, start=1):
        what = "fixed points" if k == 1 else f"{k}-cycles"
        if en.complete:
            t = "" if not en.pruned else f", smallest pruned LP violation t* = {en.min_pruned_violation:.3g}"
            s = f"; {en.singular} regions with a singular system (no isolated point)" if en.singular else ""
            parts.append(f"{what}: all {en.total_patterns:.0f} regions of {k * D} units accounted for — "
                         f"{en.regions} solved exactly, the rest under {en.pruned} of {en.nodes} LP nodes pruned "
                         f"(t* > {PRUNE_TOL:g}·scale{t}){s}")
        else:
            parts.append(f"{what}: stopped by the work limit with {en.open_patterns:.0f} of {en.total_patterns:.0f} "
                         f"regions unexamined ({en.regions} solved, {en.pruned} of {en.nodes} LP nodes pruned)")
    missing = [k for k in range(len(proofs) + 1, cycles + 1)]
    if missing:
        parts.append(f"periods {missing[0]}..{cycles} not searched (work limit reached)")
    head = "complete" if complete else f"incomplete after {work} regions"
    return complete, f"{head}: " + "; ".join(parts)

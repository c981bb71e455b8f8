"""Special points along a branch of equilibria: detected by test functions, located by Newton on
(minimally) augmented systems, classified by their normal-form coefficients.

Test functions, evaluated at every point of the branch (A = F_y for a flow, J = F_y + I, the step
Jacobian, for a map; t the unit tangent of the branch; λ_i, μ_i their eigenvalues):

==============  =====================================  ===========================================
point           test function (changes sign)           located by Newton on
==============  =====================================  ===========================================
fold (LP)       t_λ, the tangent's λ-component          Moore–Spence: F = 0, F_y v = 0, lᵀv = 1
Hopf (H)        ∏_{i<j} (λ_i + λ_j)        (flows)      F = 0, G(y, λ, κ) = 0: two entries of the
                                                        bordered solve of A² + κI (κ = ω² > 0)
Neimark–Sacker  ∏_{i<j} (μ_i μ_j − 1)       (maps)      F = 0, two entries of the bordered solve
  (NS)                                                  of J² − 2κJ + I (κ = cos θ, |κ| < 1)
flip (PD)       ∏_i (μ_i + 1) = det(J + I)  (maps)      F = 0, g = 0: the bordered solve of J + I
branch (BP)     det [F_y F_λ; tᵀ]  (bordered)           F + βψ = 0, [F_y F_λ]ᵀψ = 0, ψᵀψ = 1
==============  =====================================  ===========================================

(the bordered systems of Govaerts, "Numerical methods for bifurcations of dynamical equilibria",
2000; the branch-point system of Beyn).  The Hopf and NS products also vanish at neutral saddles
(real λ, −λ; real μ, 1/μ): a located point with κ ≤ 0 (Hopf) or |κ| ≥ 1 (NS), or a bisected one
without a complex pair within ``BOUNDARY_TOL`` of the boundary, is one, and is not reported.  The Newton matrices are central differences of the exact residuals (step 1e-7 relative;
the residuals, not the matrices, decide convergence, to ``tol``).  Where Newton does not converge
— or φ is piecewise affine, and the eigenvalues jump at a kink — the point is located by
bisection of the test function along the branch (``refined`` 0).

Normal-form coefficients (Kuznetsov, *Elements of Applied Bifurcation Theory*, 3rd ed., §§3.5,
4.5–4.7, 5.4–5.5, 10.2; ⟨a, b⟩ = āᵀb, B and C the second and third derivatives of F in y):

* fold: a = ½⟨p, B(q, q)⟩ with A q = 0, Aᵀp = 0, ⟨q, q⟩ = ⟨p, q⟩ = 1 (for a map A = J − I);
* Hopf: the first Lyapunov coefficient
  l₁ = Re[⟨p, C(q,q,q̄)⟩ − 2⟨p, B(q, A⁻¹B(q,q̄))⟩ + ⟨p, B(q̄, (2iωI − A)⁻¹B(q,q))⟩]/(2ω),
  A q = iωq, Aᵀp = −iωp, ⟨q,q⟩ = ⟨p,q⟩ = 1; l₁ < 0 supercritical (a stable cycle is born),
  l₁ > 0 subcritical;
* flip: c = ⟨p, C(q,q,q)⟩/6 − ⟨p, B(q, (J − I)⁻¹B(q,q))⟩/2, J q = −q, Jᵀp = −p; c > 0
  supercritical (a stable 2-cycle), c < 0 subcritical;
* Neimark–Sacker: d = Re(e^{−iθ} c₁), c₁ = ½⟨p, C(q,q,q̄) + 2B(q,(I − J)⁻¹B(q,q̄)) +
  B(q̄,(e^{2iθ}I − J)⁻¹B(q,q))⟩, J q = e^{iθ}q, Jᵀp = e^{−iθ}p; d < 0 supercritical (a stable
  invariant circle), d > 0 subcritical.

A coefficient within ``CRITICALITY_TOL`` of 0 (1e-6 where B and C are differences of the step
Jacobian) leaves the type undetermined (criticality 0).
"""
from __future__ import annotations

import numpy as np

#: Codes of the special points (CF flag_values) and their labels in the pictures.
FOLD, HOPF, NS, FLIP, BP = 1, 2, 3, 4, 5
NAMES = {FOLD: "fold", HOPF: "hopf", NS: "neimark-sacker", FLIP: "flip", BP: "branch-point"}
LABELS = {FOLD: "LP", HOPF: "H", NS: "NS", FLIP: "PD", BP: "BP"}
#: Criticality codes.
SUPER, UNDETERMINED, SUB = -1, 0, 1
#: |coefficient| below which the type is undetermined (analytic forms; differences of the Jacobian).
CRITICALITY_TOL = (1e-10, 1e-6)
#: Relative step of the central differences of the Newton matrices.
FD_NEWTON = 1e-7


# ------------------------------------------------------------------ test functions
def _pair_sign(vals, kind):
    """Sign of ∏_{i<j}(v_i + v_j) (kind "sum") or ∏_{i<j}(v_i v_j − 1) ("prod") over a
    conjugation-closed set: the sum of the factors' angles is 0 or π (mod 2π)."""
    n = vals.size
    if n < 2:
        return 1.0
    i, j = np.triu_indices(n, 1)
    f = vals[i] + vals[j] if kind == "sum" else vals[i] * vals[j] - 1.0
    if np.any(np.abs(f) < 1e-300):
        return 0.0
    return float(np.sign(np.cos(np.sum(np.angle(f)))))


def tests(discrete: bool, Fy, Fl, t, eigs):
    """The test values at one point of the branch: {name: (sign, q)} with q a smooth quantity that
    crosses 0 with the sign (for the interpolated first guess): BP, and Hopf (flows) or NS and flip
    (maps); and ``hopf_n`` / ``ns_n``, the number of complex eigenvalues on the unstable side — a
    sign change of the Hopf/NS product with no change of that count is a neutral saddle (a real
    pair), which is not located at all.  ``eigs`` are the eigenvalues of F_y."""
    out = {}
    K = np.vstack([np.column_stack([Fy, Fl]), t[None]])
    sgn, _ = np.linalg.slogdet(K)
    smin = np.linalg.svd(K, compute_uv=False)[-1]
    out["bp"] = (float(sgn), float(sgn) * smin)
    cplx = np.abs(eigs.imag) > 1e-10 * (1.0 + np.abs(eigs))
    if not discrete:
        q = np.nan
        if cplx.any():
            re = eigs.real[cplx]
            q = float(re[np.argmin(np.abs(re))])
        out["hopf"] = (_pair_sign(eigs, "sum"), q)
        out["hopf_n"] = int((cplx & (eigs.real > 0)).sum())
        return out
    mu = eigs + 1.0
    q = np.nan
    if cplx.any():
        m = np.abs(mu[cplx]) - 1.0
        q = float(m[np.argmin(np.abs(m))])
    out["ns"] = (_pair_sign(mu, "prod"), q)
    out["ns_n"] = int((cplx & (np.abs(mu) > 1)).sum())
    real = ~cplx
    sign = float(np.prod(np.sign(mu.real[real] + 1.0))) if real.any() else 1.0
    qf = float((mu.real[real] + 1.0)[np.argmin(np.abs(mu.real[real] + 1.0))]) if real.any() else np.nan
    out["flip"] = (sign, qf)
    return out


# ------------------------------------------------------------------ Newton on augmented systems
def _fd_jacobian(G, u, r0=None):
    m = u.size
    cols = []
    for k in range(m):
        e = FD_NEWTON * (1.0 + abs(u[k]))
        up, um = u.copy(), u.copy()
        up[k] += e
        um[k] -= e
        cols.append((G(up) - G(um)) / (2.0 * e))
    return np.column_stack(cols)


def newton(G, u0, tol, max_iter=30):
    """Newton on G(u) = 0 with a central-difference Jacobian.  Returns (u, converged, residual):
    converged when ‖G‖∞ ≤ tol, or when the step has shrunk to rounding (‖Δu‖ ≤ 1e-13(1 + ‖u‖))
    with ‖G‖∞ ≤ 1e3·tol."""
    u = np.array(u0, dtype=np.float64)
    res = np.inf
    for _ in range(max_iter):
        r = G(u)
        res = float(np.max(np.abs(r)))
        if not np.isfinite(res):
            return u, False, res
        if res <= tol:
            return u, True, res
        J = _fd_jacobian(G, u, r)
        try:
            du = np.linalg.solve(J, r) if J.shape[0] == J.shape[1] else np.linalg.lstsq(J, r, rcond=None)[0]
        except np.linalg.LinAlgError:
            return u, False, res
        u = u - du
        if np.linalg.norm(du) <= 1e-13 * (1.0 + np.linalg.norm(u)):
            res = float(np.max(np.abs(G(u))))
            return u, res <= 1e3 * tol, res
    res = float(np.max(np.abs(G(u))))
    return u, res <= tol, res


def _bordered(M, Bb, Cb):
    """G (k × k) of [M Bb; Cbᵀ 0][V; G] = [0; I]: singular M ⇔ G singular (G = 0 at rank n − k)."""
    n, k = Bb.shape
    K = np.zeros((n + k, n + k))
    K[:n, :n], K[:n, n:], K[n:, :n] = M, Bb, Cb.T
    rhs = np.zeros((n + k, k))
    rhs[n:] = np.eye(k)
    return np.linalg.solve(K, rhs)[n:]


def _real_basis(v):
    """Orthonormal real basis (n, 2) of span{Re v, Im v}."""
    Q, _ = np.linalg.qr(np.column_stack([v.real, v.imag]))
    return Q


def _eig_near(A, target):
    """(eigenvalue, right eigenvector, left eigenvector p with Aᵀp = conj(eigenvalue)·p… normalised
    ⟨q, q⟩ = ⟨p, q⟩ = 1) of A for the eigenvalue nearest ``target``."""
    w, V = np.linalg.eig(A)
    i = int(np.argmin(np.abs(w - target)))
    lam, q = w[i], V[:, i].astype(complex)
    q = q / np.linalg.norm(q)
    wt, Vt = np.linalg.eig(A.T)
    j = int(np.argmin(np.abs(wt - np.conj(lam))))
    p = Vt[:, j].astype(complex)
    p = p / np.conj(np.vdot(p, q))  # ⟨p, q⟩ = p̄ᵀq = 1
    return lam, q, p


def _augmented(kind, fam, y0, lam0, extra0, tol):
    """Newton on the augmented system of ``kind``; returns (y, λ, extra, converged, residual)."""
    D = fam.D
    if kind == "bp":
        Fy, Fl = fam.derivs(y0, lam0)[1:]
        psi = np.linalg.svd(np.column_stack([Fy, Fl]))[0][:, -1]

        def G(u):
            y, lam, beta, ps = u[:D], u[D], u[D + 1], u[D + 2:]
            F, Fy, Fl = fam.derivs(y, lam)
            return np.concatenate([F + beta * ps, Fy.T @ ps, [Fl @ ps, ps @ ps - 1.0]])

        u, ok, res = newton(G, np.concatenate([y0, [lam0, 0.0], psi]), tol)
        return u[:D], u[D], u[D + 1], ok, res
    if kind == "flip":
        A = fam.jac(y0, lam0) + 2.0 * np.eye(D)  # J + I
        U, _, Vt = np.linalg.svd(A)
        b, c = U[:, -1:], Vt[-1][:, None]

        def G(u):
            y, lam = u[:D], u[D]
            M = fam.jac(y, lam) + 2.0 * np.eye(D)
            return np.concatenate([fam.F(y, lam), _bordered(M, b, c)[0]])

        u, ok, res = newton(G, np.concatenate([y0, [lam0]]), tol)
        return u[:D], u[D], None, ok, res
    # hopf / ns: two entries of the 2 × 2 bordered solve, unknowns (y, λ, κ)
    A = fam.jac(y0, lam0)
    if kind == "ns":
        A = A + np.eye(D)
        _, q, p = _eig_near(A, np.exp(1j * np.arccos(np.clip(extra0, -1, 1))))
    else:
        _, q, p = _eig_near(A, 1j * np.sqrt(max(extra0, 0.0)))
    Bb, Cb = _real_basis(q), _real_basis(p)

    def Gfull(u):
        y, lam, kap = u[:D], u[D], u[D + 1]
        Ay = fam.jac(y, lam)
        if kind == "ns":
            Ay = Ay + np.eye(D)
            M = Ay @ Ay - 2.0 * kap * Ay + np.eye(D)
        else:
            M = Ay @ Ay + kap * np.eye(D)
        return np.concatenate([fam.F(y, lam), _bordered(M, Bb, Cb).ravel()])

    u0 = np.concatenate([y0, [lam0, extra0]])
    try:
        Jf = _fd_jacobian(Gfull, u0)
    except np.linalg.LinAlgError:
        return y0, lam0, extra0, False, np.inf
    best, pick = -1.0, (0, 3)
    for a in range(4):
        for b in range(a + 1, 4):
            rows = list(range(D)) + [D + a, D + b]
            s = np.linalg.svd(Jf[rows], compute_uv=False)[-1]
            if s > best:
                best, pick = s, (a, b)

    def G(u):
        g = Gfull(u)
        return np.concatenate([g[:D], g[D + np.array(pick)]])

    try:
        u, ok, res = newton(G, u0, tol)
    except np.linalg.LinAlgError:
        return y0, lam0, extra0, False, np.inf
    return u[:D], u[D], u[D + 1], ok, res


def moore_spence(fam, y, lam, tol, max_iter=30):
    """Newton on F = 0, F_y v = 0, lᵀv = 1 (the fold); returns (y, λ, converged, residual)."""
    D = fam.D
    v = np.linalg.svd(fam.jac(y, lam))[2][-1]
    l_vec = v.copy()
    Z = np.concatenate([y, [lam], v])
    res = np.inf
    for _ in range(max_iter):
        y, lam, v = Z[:D], Z[D], Z[D + 1:]
        F, Fy, Fl = fam.derivs(y, lam)
        G = np.concatenate([F, Fy @ v, [l_vec @ v - 1.0]])
        res = float(np.max(np.abs(G)))
        if res <= tol:
            return y, lam, True, res
        J = np.zeros((2 * D + 1, 2 * D + 1))
        J[:D, :D], J[:D, D] = Fy, Fl
        J[D:2 * D, :D], J[D:2 * D, D] = fam.second(y, lam, v)
        J[D:2 * D, D + 1:] = Fy
        J[2 * D, D + 1:] = l_vec
        try:
            Z = Z - np.linalg.solve(J, G)
        except np.linalg.LinAlgError:
            break
        if not np.all(np.isfinite(Z)):
            break
    return Z[:D], Z[D], False, res


# ------------------------------------------------------------------ normal forms
def _solve(M, b):
    return np.linalg.solve(M.astype(complex), b.astype(complex))


def coefficient(code, fam, y, lam, extra=None):
    """(normal-form coefficient, frequency ω or θ (NaN for fold/flip/BP)) at a located point."""
    D = fam.D
    Fy = fam.jac(y, lam)
    B = lambda u, v: fam.B(y, lam, u, v)  # noqa: E731
    C = lambda u, v, w: fam.C(y, lam, u, v, w)  # noqa: E731
    if code == FOLD:
        _, q, p = _eig_near(Fy, 0.0)
        return float(0.5 * np.vdot(p, B(q, q)).real), np.nan
    if code == HOPF:
        ev, q, p = _eig_near(Fy, 1j * np.sqrt(max(extra, 0.0)) if extra is not None else 1j)
        om = abs(ev.imag)
        if ev.imag < 0:
            q, p, ev = q.conj(), p.conj(), ev.conj()
        qb = q.conj()
        h11 = _solve(Fy, B(q, qb))
        h20 = _solve(2j * om * np.eye(D) - Fy, B(q, q))
        val = np.vdot(p, C(q, q, qb)) - 2.0 * np.vdot(p, B(q, h11)) + np.vdot(p, B(qb, h20))
        return float(val.real / (2.0 * om)), float(om)
    J = Fy + np.eye(D)
    if code == FLIP:
        _, q, p = _eig_near(J, -1.0)
        q, p = q.real / np.linalg.norm(q.real), p.real
        p = p / (p @ q)
        h = np.linalg.solve(J - np.eye(D), B(q, q))
        return float((p @ C(q, q, q)) / 6.0 - (p @ B(q, h)) / 2.0), np.nan
    if code == NS:
        th0 = np.arccos(np.clip(extra, -1, 1)) if extra is not None else 1.0
        ev, q, p = _eig_near(J, np.exp(1j * th0))
        if ev.imag < 0:
            q, p, ev = q.conj(), p.conj(), ev.conj()
        th = float(np.angle(ev))
        qb = q.conj()
        h11 = _solve(np.eye(D) - J, B(q, qb))
        h20 = _solve(np.exp(2j * th) * np.eye(D) - J, B(q, q))
        c1 = 0.5 * (np.vdot(p, C(q, q, qb)) + 2.0 * np.vdot(p, B(q, h11)) + np.vdot(p, B(qb, h20)))
        return float((np.exp(-1j * th) * c1).real), th
    return np.nan, np.nan


def criticality(code, coef, fd: bool) -> int:
    """SUPER (−1), SUB (1) or UNDETERMINED (0) from the coefficient's sign."""
    if code not in (HOPF, NS, FLIP) or not np.isfinite(coef):
        return UNDETERMINED
    if abs(coef) <= CRITICALITY_TOL[1 if fd else 0]:
        return UNDETERMINED
    if code == FLIP:
        return SUPER if coef > 0 else SUB
    return SUPER if coef < 0 else SUB


# ------------------------------------------------------------------ locate one crossing
def _extra_guess(code, fam, y, lam):
    A = fam.jac(y, lam)
    ev = np.linalg.eigvals(A + (np.eye(fam.D) if code == NS else 0.0))
    cplx = ev[np.abs(ev.imag) > 1e-12]
    if code == HOPF:
        if not cplx.size:
            return 0.0
        e = cplx[np.argmin(np.abs(cplx.real))]
        return float(e.imag ** 2)
    if code == NS:
        if not cplx.size:
            return 0.0
        e = cplx[np.argmin(np.abs(np.abs(cplx) - 1.0))]
        return float(np.cos(np.angle(e)))
    return None


#: A bisected Hopf / NS point must have a complex pair this close to the boundary (|Re λ|, ||μ| − 1|,
#: relative to 1 + |λ|); bisection to 2⁻⁴⁵ of a step leaves it at ~1e-12.
BOUNDARY_TOL = 1e-7


def _on_boundary(code, fam, y, lam) -> bool:
    """Whether F_y (Hopf) or J (NS) at (y, λ) has a complex pair on the stability boundary."""
    A = fam.jac(y, lam) + (np.eye(fam.D) if code == NS else 0.0)
    ev = np.linalg.eigvals(A)
    c = ev[np.abs(ev.imag) > 1e-10 * (1.0 + np.abs(ev))]
    if not c.size:
        return False
    gap = np.abs(c.real) if code == HOPF else np.abs(np.abs(c) - 1.0)
    return bool(np.min(gap / (1.0 + np.abs(c))) <= BOUNDARY_TOL)


def locate(code, fam, Xa, Xb, qa, qb, sa, tol, bisect):
    """Locate the special point of type ``code`` between branch points Xa and Xb (test sign ``sa``
    at Xa, the opposite at Xb; qa, qb the smooth quantities of ``tests`` for the first guess).  ``bisect(s) → (X, sign)`` corrects (1 − s)Xa + sXb onto the branch
    and returns the test's sign there.  Returns a dict (``type``, ``param``, ``h``, ``refined``,
    ``residual``, ``coefficient``, ``criticality``, ``frequency``) or None for a neutral saddle."""
    D = fam.D
    w = 0.5
    if np.isfinite(qa) and np.isfinite(qb) and qa != qb:
        w = float(np.clip(qa / (qa - qb), 0.0, 1.0))
    guess = (1 - w) * Xa + w * Xb
    y0, lam0 = guess[:D], guess[D]
    span = np.linalg.norm(Xb - Xa)
    ok = False
    extra = None
    if fam.smooth:
        kind = {HOPF: "hopf", NS: "ns", FLIP: "flip", BP: "bp"}[code]
        extra0 = _extra_guess(code, fam, y0, lam0)
        try:
            y, lam, extra, ok, res = _augmented(kind, fam, y0, lam0, extra0, tol)
        except (np.linalg.LinAlgError, ValueError):
            ok = False
        if ok:
            X = np.concatenate([y, [lam]])
            near = np.linalg.norm(X - guess) <= 2.0 * span + 1e-9
            if not near:
                ok = False
            elif code == HOPF and not extra > 0:
                return None
            elif code == NS and not abs(extra) < 1:
                return None
    if not ok:  # bisection of the test's sign along the branch
        lo_s, hi_s = 0.0, 1.0
        X = guess
        for _ in range(45):
            mid = 0.5 * (lo_s + hi_s)
            Xm, sgn = bisect(mid)
            if Xm is None:
                break
            X = Xm
            if sgn == 0:
                break
            if sgn == sa:
                lo_s = mid
            else:
                hi_s = mid
        y, lam = X[:D], X[D]
        res = float(np.max(np.abs(fam.F(y, lam))))
        if code in (HOPF, NS):
            extra = _extra_guess(code, fam, y, lam)
            if fam.smooth and not _on_boundary(code, fam, y, lam):
                return None  # a neutral saddle (real λ, −λ or μ, 1/μ): the product test vanishes there too
    coef, freq = (np.nan, np.nan)
    if fam.smooth and code != BP:
        try:
            coef, freq = coefficient(code, fam, y, lam, extra)
        except np.linalg.LinAlgError:
            coef, freq = np.nan, np.nan
    elif code in (HOPF, NS) and extra is not None:
        freq = float(np.sqrt(max(extra, 0.0))) if code == HOPF else float(np.arccos(np.clip(extra, -1, 1)))
    fd = not fam.system.closed_form_higher or fam.mode == "model"
    return {"type": code, "param": float(lam), "h": np.array(y, dtype=np.float64), "refined": bool(ok),
            "residual": float(res), "coefficient": float(coef), "criticality": criticality(code, coef, fd),
            "frequency": float(freq)}


def switch_direction(fam, X, t):
    """The tangent of the other branch at a branch point X: the unit vector of the 2-dimensional
    null space of [F_y F_λ] orthogonal to the current tangent t."""
    D = fam.D
    F, Fy, Fl = fam.derivs(X[:D], X[D])
    N = np.linalg.svd(np.column_stack([Fy, Fl]))[2][-2:].T  # (D + 1, 2)
    a = N.T @ t
    c = np.array([-a[1], a[0]])
    if np.linalg.norm(c) < 1e-12:
        c = np.array([1.0, 0.0])
    t2 = N @ c
    return t2 / np.linalg.norm(t2)

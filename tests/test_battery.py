"""The common battery (``tests/battery.py`` declares it): every registered model × every analysis
× every available backend, as scikit-learn's ``check_estimator`` runs one battery over every
estimator.  One test per (case, analysis): a pair ``battery.refusal`` declares unsupported must be
refused with a one-line ``ParameterError`` naming the parameter; every other pair runs its check:

* the reference (``backend="numpy"``) against something independent — tests/naive.py's loops for
  the states, central differences for Jacobians and BPTT gradients, explicit Jacobian products for
  the gradient norms, Benettin's QR written out for the Lyapunov exponents, eigenvalues of the
  step Jacobians for the spectra, scipy's root and the simulation kernels for equilibria, fixed
  points, continuation and the iRNN's inner convergence, the exact affine form for partitions;
* every other available backend (``dl.available_backends()``: numba here, cupy on a GPU — the
  simulator runs it in tests/test_gpu_backend.py, whose cases come from the battery) against the
  reference;
* the Dataset's contract (docs/design.md, *Data contract*): attrs model, seed, backend,
  dynlab_version, command; a long_name and units on every data variable; the model rebuilt from
  the Dataset alone; determinism under a seed; bad input refused with a ParameterError naming
  the parameter.

Tolerances.  Backends against the reference: 1e-12·max(1, |ref|) — the same formulas summed in
another order, ≈ 1e-16 per operation over a few dozen (T ≤ 5, D ≤ 6), the vectorised tanh/sigmoid
within 3 ulp; gradients 1e-11 of the array's largest entry (a backward pass sums T·B terms per entry).
Central differences (δ = 1e-6, functions of order one): truncation δ²·|f'''| ≈ 1e-12, rounding
1e-16/δ ≈ 1e-10, so 1e-6 relative resolves a wrong term (O(1)) by six orders; scipy's solvers at
rtol 1e-12 add ≲ 1e-12/δ = 1e-6 of noise to a derivative of a CTRNN step, which is why the bound is
1e-6 and not tighter.  Equilibria to a residual of 1e-12 are known to that times ‖F_y⁻¹‖ (< 100
for these contracting weights): 1e-10 between two solvers, and after one step of the map.
"""
from __future__ import annotations

import inspect
import re
import zlib

import numpy as np
import pytest

import battery as bt
import dynlab as dl
import naive
from dynlab.errors import ParameterError

BACKENDS = dl.available_backends()
close = bt.close
OTHERS = tuple(b for b in BACKENDS if b != "numpy")


def _data(case, m, B=bt.B, T=bt.T):
    """The case's inputs (B, T, d) and initial state (B, n), drawn from its name."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    return 0.7 * rng.standard_normal((B, T, m.inputs)), 0.3 * rng.standard_normal((B, m.state_size))


def refused(call, param, words):
    """``call`` raises a one-line ParameterError naming ``param`` and saying ``words``."""
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.param == param, (param, str(info.value))
    assert re.search(words, str(info.value)), (words, str(info.value))
    assert "\n" not in str(info.value)


def contract(ds, m, backend, analysis, used=()):
    """The data contract (docs/design.md) on a result: the attrs, a long_name and units on every data
    variable, and the model — parameters and settings — rebuilt from the Dataset alone (``used``: the
    parameters the call replaced, stored as used).  A CTRNN integrated by scipy records the backend
    "scipy" (its solver runs on the host whatever the backend)."""
    a = ds.attrs
    layered = analysis == "partition" and int(a.get("layers", 1)) > 1
    if layered:   # the MASO convention: layer 1's model and every layer's under layer{ℓ}_ (model_from_partition)
        from dynlab.io import model_from_partition

        assert a["model"] == m.layers[0].name and a["layer1_seed"] == m.layers[0].seed, a
    else:
        assert a["model"] == m.name and a["seed"] == (-1 if m.seed is None else m.seed), a
    assert a["dynlab_version"] == dl.__version__ and "command" in a, a
    if backend is not None and a["backend"] == "scipy" and m.name == "ctrnn" and m.method not in ("euler", "rk4"):
        backend = "scipy"
    if backend is not None:
        assert a["backend"] == backend, (a["backend"], backend)
    for name, var in ds.data_vars.items():
        assert var.attrs.get("long_name") and "units" in var.attrs, (analysis, name, var.attrs)
    back = model_from_partition(ds) if layered else dl.model_from_dataset(ds)
    assert type(back) is type(m) and list(back.params()) == list(m.params()), (analysis, back)
    for k, v in m.params().items():
        if k not in used:
            np.testing.assert_array_equal(np.asarray(back.params()[k]), np.asarray(v), err_msg=f"{analysis}: {k}")
    assert back.settings() == m.settings(), (analysis, back.settings(), m.settings())


def one_step(m, y, xin):
    """One step of the model from states y (N, n) at the constant input xin (d,), on the reference
    kernels (a CTRNN: one interval dt)."""
    xs = np.broadcast_to(xin, (y.shape[0], 1, xin.size)).copy()
    if m.name == "irnn" and np.ndim(m.eta) == 2:
        m = m.replace(eta=np.asarray(m.eta)[:1])
    return dl.simulate(m, xs, h0=y, backend="numpy").h.values[:, 0]


def fixed(m, y, xin, where):
    """y (N, n) are fixed points at xin: one step of the map (the flow over dt) leaves them, to 1e-10
    (a residual ≤ 1e-12 moves the state by about that times 1 + ‖J‖)."""
    close(one_step(m, y, xin), y, 1e-10, f"{where}: one step from the fixed point")


def scipy_root(m, xin):
    return dl.equilibrium(m, xin, method="scipy").h_eq.values


# ------------------------------------------------------------------------------ the checks
def check_simulate(case, m):
    x, h0 = _data(case, m)
    ref = dl.simulate(m, x, h0, backend="numpy")
    contract(ref, m, "numpy", "simulate")
    H = ref.h.values
    assert ref.h.dims == ("batch", "time", "unit") and H.shape == (bt.B, bt.T, m.state_size)
    assert np.abs(H - H[:, :1]).max() > 1e-3                    # the state moves: the checks see the dynamics
    if case.family == "ctrnn-scipy":   # scipy's solver (rtol 1e-12) vs RK4 at h = 1.5e-3 (error ≈ h⁴ ≈ 5e-12)
        fine = m.replace(method="rk4", substeps=200)
        close(H, dl.simulate(fine, x, h0, backend="numpy").h.values, 1e-9, "scipy vs fine RK4")
    else:
        close(H, naive.simulate(m, x, h0), 1e-12, "reference vs naive")
    np.testing.assert_array_equal(dl.simulate(case.build(), x, h0, backend="numpy").h.values, H)   # a seed: one model
    other = case.build(seed=case.seed + 1)
    assert any(not np.array_equal(np.asarray(v), np.asarray(other.params()[k])) for k, v in m.params().items())
    refused(lambda: dl.simulate(m, x[..., :1] if m.inputs > 1 else x[..., [0, 0]], backend="numpy"), "x", "input")
    refused(lambda: dl.simulate(m, x, h0[:, :-1], backend="numpy"), "h0", "shape")
    refused(lambda: dl.simulate(m, x, backend="fortran"), "backend", "unknown backend")
    for be in OTHERS:
        ds = dl.simulate(m, x, h0, backend=be)
        assert ds.attrs["backend"] == (be if case.family != "ctrnn-scipy" else "scipy")
        close(ds.h.values, H, 1e-12, f"{be}: h")


def _fd_first_step(m, x, h0, eps=1e-6):
    """∂h_1/∂h_0 and ∂h_1/∂x_1 (B, n, n), (B, n, d) by central differences of the reference's simulate
    (over the whole sequence, so that a per-time η table keeps its rows)."""
    def h1(xx, hh):
        return dl.simulate(m, xx, hh, backend="numpy").h.values[:, 0]

    n, d = h0.shape[1], x.shape[2]
    J, Jx = np.empty((x.shape[0], n, n)), np.empty((x.shape[0], n, d))
    for j in range(n):
        e = np.zeros(n)
        e[j] = eps
        J[:, :, j] = (h1(x, h0 + e) - h1(x, h0 - e)) / (2 * eps)
    for j in range(d):
        e = np.zeros_like(x)
        e[:, 0, j] = eps
        Jx[:, :, j] = (h1(x + e, h0) - h1(x - e, h0)) / (2 * eps)
    return J, Jx


def check_jacobians(case, m):
    x, h0 = _data(case, m)
    ref = dl.jacobians(m, x, h0, backend="numpy")
    contract(ref, m, "numpy", "jacobians")
    assert ref.jac.dims == ("batch", "time", "unit", "unit_from") and ref.jac_x.dims[-1] == "unit_in"
    J, Jx = _fd_first_step(m, x, h0)
    for got, want, what in ((ref.jac.values[:, 0], J, "J_1"), (ref.jac_x.values[:, 0], Jx, "Jx_1")):
        scale = np.abs(want).max()
        assert scale > 1e-3, what                                 # not a comparison of two zeros
        assert np.abs(got - want).max() <= 1e-6 * scale, (what, np.abs(got - want).max() / scale)
    refused(lambda: dl.jacobians(m, x, h0[:, :-1], backend="numpy"), "h0", "shape")
    for be in OTHERS:
        ds = dl.jacobians(m, x, h0, backend=be)
        close(ds.jac.values, ref.jac.values, 1e-12, f"{be}: jac")
        close(ds.jac_x.values, ref.jac_x.values, 1e-12, f"{be}: jac_x")


def check_gradient_norms(case, m):
    x, h0 = _data(case, m)
    g = np.random.default_rng(2).standard_normal((bt.B, m.state_size))     # ∂L/∂h_T
    ref = dl.gradient_norms(m, x, h0, backend="numpy", dL_dhT=g)
    contract(ref, m, "numpy", "gradient_norms")
    J = dl.jacobians(m, x, h0, backend="numpy", inputs=False).jac.values
    for b in range(bt.B):   # ‖∂h_T/∂h_t‖₂ of the products formed one by one; σ₁ by LAPACK both sides
        P = naive.backward_products(J[b])
        norms = naive.norm2(P)
        with np.errstate(divide="ignore"):
            close(ref.log_jac_norm.values[b], np.log(norms), 1e-10, "log_jac_norm")
        close(ref.step_norm.values[b], naive.norm2(J[b]), 1e-12, "step_norm")
        close(ref.ratio.values[b], norms[0] / norms[-2], 1e-10, "ratio")
        close(ref.dL_dh1_norm.values[b], np.linalg.norm(g[b] @ P[0]), 1e-10, "‖∂L/∂h_1‖")
    refused(lambda: dl.gradient_norms(m, x, backend="numpy", dL_dhT=g[:, :-1]), "dL_dhT", "shape")
    for be in OTHERS:
        ds = dl.gradient_norms(m, x, h0, backend=be, dL_dhT=g)
        for k in ("log_jac_norm", "step_norm", "ratio", "dL_dh1_norm", "h"):
            close(ds[k].values, ref[k].values, 1e-12, f"{be}: {k}")


def _collapsed(lam):
    """Exponents with λ < −30 as −∞: a tangent direction a dead ReLU unit zeroes has |R_ii| = 0 in
    exact arithmetic, which one summation order keeps at 0 and another leaves at ~1e-100 (λ ≈ −40)."""
    lam = np.asarray(lam, dtype=np.float64)
    return np.where(lam < -30.0, -np.inf, lam)


def check_lyapunov(case, m):
    x, h0 = _data(case, m)
    n = m.state_size
    Q0 = np.linalg.qr(np.random.default_rng(1).standard_normal((n, n)))[0]
    ref = dl.lyapunov(m, x, h0, backend="numpy", Q0=Q0)
    contract(ref, m, "numpy", "lyapunov")
    refused(lambda: dl.lyapunov(m, x, backend="numpy", k=n + 1), "k", "")
    J = dl.jacobians(m, x, h0, backend="numpy", inputs=False).jac.values
    for b in range(bt.B):   # Benettin written out: Q_t R_t = J_t Q_{t−1}, λ = mean ln|R_t[i, i]|, sorted
        Q, logs = Q0, np.zeros(n)
        with np.errstate(divide="ignore"):
            for t in range(bt.T):
                Q, R = np.linalg.qr(J[b, t] @ Q)
                logs = logs + np.log(np.abs(np.diag(R)))
        close(_collapsed(ref.lyapunov.values[b]), _collapsed(np.sort(logs / bt.T)[::-1]), 1e-10, "lyapunov")
    for be in OTHERS:
        got = dl.lyapunov(m, x, h0, backend=be, Q0=Q0).lyapunov.values
        close(_collapsed(got), _collapsed(ref.lyapunov.values), 1e-12, f"{be}: lyapunov")


def check_spectrum(case, m):
    x, h0 = _data(case, m)
    ref = dl.spectrum(m, x, h0, backend="numpy")
    contract(ref, m, "numpy", "spectrum")
    refused(lambda: dl.spectrum(m, x, backend="numpy", at="bogus"), "at", "")
    J = dl.jacobians(m, x, h0, backend="numpy", inputs=False).jac.values
    eig = np.linalg.eigvals(J)                                    # the step Jacobian at (x_m, h_{m−1})
    lam = ref.step_eig_real.values + 1j * ref.step_eig_imag.values
    close(ref.step_radius.values, np.abs(eig).max(axis=-1), 1e-10, "step radius")
    close(lam.sum(axis=-1), np.trace(J, axis1=-2, axis2=-1), 1e-10, "Σλ = trace J")
    close(np.prod(lam, axis=-1), np.linalg.det(J), 1e-10, "Πλ = det J")
    for be in OTHERS:
        ds = dl.spectrum(m, x, h0, backend=be)
        for k in ("step_radius", "max_real"):
            close(ds[k].values, ref[k].values, 1e-10, f"{be}: {k}")
        close(np.sort(ds.eig_real.values), np.sort(ref.eig_real.values), 1e-10, f"{be}: eig_real")


def check_equilibrium(case, m):
    X = _data(case, m)[0].reshape(-1, m.inputs)                   # B·T constant inputs, one solve each
    eq = dl.equilibrium(m, X)
    contract(eq, m, None, "equilibrium")
    if case.name in bt.NO_EQUILIBRIUM:       # said, not hidden: not converged, the residual it reached
        assert not eq.converged.values.any() and (eq.residual.values > 1e-12).all()
        return
    assert eq.converged.values.all() and eq.residual.values.max() <= 1e-12
    assert eq.iterations.values.max() <= 10                        # Newton: quadratic near the root
    close(eq.h_eq.values, scipy_root(m, X), 1e-10, "newton vs scipy")
    if case.family != "irnn":   # the iRNN's h_eq is the limit of the inner recursion: convergence checks it
        for n in range(X.shape[0]):
            fixed(m, eq.h_eq.values[n:n + 1], X[n], f"equilibrium {n}")
    refused(lambda: dl.equilibrium(m, np.zeros(m.inputs + 1)), "x", "")
    for be in OTHERS:     # a step map's Jacobians on that backend; a closed-form map is host NumPy
        ds = dl.equilibrium(m, X, backend=be)
        close(ds.h_eq.values, eq.h_eq.values, 1e-10, f"{be}: h_eq")
        assert ds.attrs["backend"] == (be if m.form().kind in ("gru", "lstm", "stack") else "numpy")


def check_fixed_points(case, m):
    xin = _data(case, m)[0][0, 0]
    fp = dl.fixed_points(m, xin, n_starts=6, trajectory_steps=10, seed=0)
    contract(fp, m, None, "fixed_points")
    for be in OTHERS:
        other = dl.fixed_points(m, xin, n_starts=6, trajectory_steps=10, seed=0, backend=be)
        close(other.h_eq.values, fp.h_eq.values, 1e-9, f"{be}: fixed points")
    refused(lambda: dl.fixed_points(m, xin, n_starts=0), "n_starts", "")
    roots = fp.h_eq.values[fp.kind.values == 1]
    assert len(roots) == fp.attrs["n_roots"]
    if case.name in bt.NO_EQUILIBRIUM:
        assert len(roots) == 0
        return
    assert len(roots) >= 1
    if case.family == "irnn":   # the step equation's root in s (h_prev = 0): unique at these weights
        close(roots, np.broadcast_to(scipy_root(m, xin), roots.shape), 1e-9, "fixed point vs scipy")
    else:
        fixed(m, roots, xin, "fixed_points")


def check_continuation(case, m):
    xin = _data(case, m)[0][0, 0]
    if case.name in bt.NO_EQUILIBRIUM:
        with pytest.raises(dl.ConvergenceError, match="no equilibrium found"):
            dl.continuation(m, "x0", -0.5, 0.5, x=xin, max_points=5)
        return
    br = dl.continuation(m, "x0", -0.5, 0.5, x=xin, max_points=5, detect=False, switch=False)
    contract(br, m, None, "continuation")
    refused(lambda: dl.continuation(m, "zz", -0.5, 0.5), "over", "")
    ok = br.converged.values == 1
    assert ok.sum() >= 3 and np.ptp(br.param.values[ok]) > 0
    for lam, h in zip(br.param.values[ok], br.h_eq.values[ok]):
        xl = xin.copy()
        xl[0] = lam
        if case.family == "irnn":
            close(h, scipy_root(m, xl), 1e-9, f"branch at x0 = {lam}")
        else:
            fixed(m, h[None], xl, f"branch at x0 = {lam}")


def check_convergence(case, m):
    """e_k = ‖g_k − h_eq‖ against the simulation kernels: h_m = g_K of a model with K = k."""
    xin, h0 = _data(case, m)
    xin, hp = xin[0, 0], h0[0]
    cv = dl.convergence(m, xin, hp, K_max=4, eta=0.5)
    contract(cv, m, None, "convergence", used=("eta",))
    assert int(cv.reference_converged) == 1
    for k in range(1, 5):
        g = dl.simulate(m.replace(K=k, eta=0.5), xin[None, None], hp[None], backend="numpy").h.values[0, 0]
        assert abs(float(cv.error[k]) - np.linalg.norm(g - cv.h_eq.values)) <= 1e-12, k
    refused(lambda: dl.convergence(m, xin, K_max=0), "K_max", "")


def _codes(m, x, h0, H):
    """The affine piece (z > 0) of every unit's pre-activation z_t = R h_{t−1} + W u_t + b, layer by
    layer from the simulated states H (B, T, n); identity has one piece (0)."""
    layers = m.layers if m.name == "stack" else (m,)
    out, u, o = [], x, 0
    for layer in layers:
        f, w = layer.form(), layer.state_size
        Hl = H[..., o:o + w]
        prev = np.concatenate([h0[:, None, o:o + w], Hl[:, :-1]], axis=1)
        z = prev @ f.R.T + u @ f.W.T + f.b
        out.append((z > 0).astype(np.int8) if layer.activation != "identity" else np.zeros(z.shape, np.int8))
        u, o = Hl, o + w
    return np.stack(out, axis=-1) if len(out) > 1 else out[0]


def check_partition(case, m):
    x, h0 = _data(case, m)
    ref = dl.partition(m, x, h0, backend="numpy")
    contract(ref, m, "numpy", "partition")
    refused(lambda: dl.partition(m, x, backend="numpy", reconstruction="bogus"), "reconstruction", "")
    H = dl.simulate(m, x, h0, backend="numpy").h.values
    codes = _codes(m, x, h0, H)
    close(ref.codes.values, codes, 0, "codes")
    assert 0 < codes.mean() < 1 or codes.max() == 0                # both pieces seen (identity: one)
    af = dl.affine_form(m, x, h0, backend="numpy")                # h = A x + B, exactly (MASO Thm. 1–2)
    Ax = np.einsum("bij,bj->bi", af["A"], x.reshape(bt.B, -1)) + af["B"]
    close(Ax.reshape(bt.B, bt.T, -1), H[..., -m.hidden:], 1e-12, "A x + B vs the states")
    for be in OTHERS:
        ds = dl.partition(m, x, h0, backend=be)
        close(ds.codes.values, ref.codes.values, 0, f"{be}: codes")
        close(ds.regions.values, ref.regions.values, 0, f"{be}: regions")


def _fd_entries(f, value, picks, eps=1e-6):
    """Central differences of the scalar f(θ) at the entries ``picks`` of θ."""
    arr = np.array(value, dtype=np.float64)
    out = []
    for idx in picks:
        p, q = arr.copy(), arr.copy()
        p[idx] += eps
        q[idx] -= eps
        out.append((f(p) - f(q)) / (2 * eps))
    return np.array(out)


def check_bptt(case, m):
    x, h0 = _data(case, m)
    rng = np.random.default_rng(3)
    readout = {"W_out": rng.standard_normal((2, m.hidden)), "b_out": rng.standard_normal(2)}
    target = rng.standard_normal((bt.B, bt.T, 2))

    def run(model=m, r=readout, h=h0, be="numpy"):
        return dl.loss_and_grads(model, r, x, target, loss="mse-seq", h0=h, backend=be)

    L, g, _ = run()
    assert set(g) == set(m.params()) | {"W_out", "b_out", "h0"}
    arrays = dict(m.params(), **readout, h0=h0)
    for name, value in arrays.items():   # three entries of every array (all of a smaller one)
        value = np.asarray(value, dtype=np.float64)
        picks = [np.unravel_index(i, value.shape) for i in
                 np.random.default_rng(len(name)).choice(value.size, min(3, value.size), replace=False)]

        def f(v, name=name):
            if name == "h0":
                return run(h=v)[0]
            if name in readout:
                return run(r=dict(readout, **{name: v}))[0]
            return run(model=m.with_params({name: v if v.ndim else float(v)}))[0]

        fd = _fd_entries(f, value, picks)
        got = np.array([np.asarray(g[name])[i] for i in picks])
        scale = max(float(np.abs(np.asarray(g[name])).max()), 1e-12)
        assert np.abs(got - fd).max() <= 1e-6 * scale, (name, got, fd)
    refused(lambda: dl.loss_and_grads(m, readout, x, target, loss="hinge"), "loss", "")
    for be in OTHERS:
        Lb, gb, _ = run(be=be)
        assert abs(Lb - L) <= 1e-12 * abs(L)
        for k, v in g.items():
            v = np.asarray(v)
            assert np.abs(np.asarray(gb[k]) - v).max() <= 1e-11 * max(1.0, np.abs(v).max()), (be, k)


def check_implicit_equilibrium(case, m):
    X = _data(case, m, B=4, T=1)[0][:, 0]
    ref = dl.implicit_equilibrium(m, X, backend="numpy")
    contract(ref, m, "numpy", "implicit_equilibrium")
    assert ref.converged.values.all() and ref.residual.values.max() <= 1e-12
    close(ref.h_eq.values, dl.implicit_equilibrium(m, X, method="scipy").h_eq.values, 1e-9, "auto vs scipy")
    refused(lambda: dl.implicit_equilibrium(m, np.zeros((2, m.inputs + 1))), "X", "")
    for be in OTHERS:
        close(dl.implicit_equilibrium(m, X, backend=be).h_eq.values, ref.h_eq.values, 1e-10, f"{be}: h_eq")


def check_to_torch(case, m):
    torch = pytest.importorskip("torch")
    module = dl.to_torch(m, batch_first=True)
    if case.family == "implicit":
        X = _data(case, m, B=4, T=1)[0][:, 0]
        Z = module.equilibrium(torch.tensor(X)).detach().numpy()
        close(Z, dl.implicit_equilibrium(m, X).h_eq.values, 1e-12, "module.equilibrium")
        return
    x, _ = _data(case, m)
    out, _ = module(torch.tensor(x))
    close(out.detach().numpy(), dl.simulate(m, x, backend="numpy").h.values[..., m.output_slice], 1e-12, "forward")


CHECKS = {name: globals()[f"check_{name}"] for name in bt.ANALYSES}


def _call(analysis, m, backend):
    """The analysis's plain call on model m (for the refusals)."""
    x = np.zeros((bt.B, bt.T, m.inputs))
    calls = {
        "simulate": lambda: dl.simulate(m, x, backend=backend),
        "jacobians": lambda: dl.jacobians(m, x, backend=backend),
        "gradient_norms": lambda: dl.gradient_norms(m, x, backend=backend),
        "lyapunov": lambda: dl.lyapunov(m, x, backend=backend),
        "spectrum": lambda: dl.spectrum(m, x, backend=backend),
        "equilibrium": lambda: dl.equilibrium(m, x[0, 0], backend=backend),
        "fixed_points": lambda: dl.fixed_points(m, x[0, 0], n_starts=2, backend=backend),
        "continuation": lambda: dl.continuation(m, "x0", -0.5, 0.5, max_points=3),
        "convergence": lambda: dl.convergence(m, x[0, 0], K_max=2),
        "partition": lambda: dl.partition(m, x, backend=backend),
        "bptt": lambda: dl.loss_and_grads(m, {"W_out": np.zeros((1, m.hidden)), "b_out": np.zeros(1)}, x,
                                          np.zeros((bt.B, 1)), loss="mse", backend=backend),
        "implicit_equilibrium": lambda: dl.implicit_equilibrium(m, x[:, 0], backend=backend),
        "to_torch": lambda: (pytest.importorskip("torch"), dl.to_torch(m)),
    }
    return calls[analysis]


def _pairs():
    out = []
    for case in bt.CASES:
        for analysis in bt.ANALYSES:
            marks = [pytest.mark.torch] if analysis == "to_torch" else []
            out.append(pytest.param(case, analysis, marks=marks, id=f"{case}-{analysis}"))
    return out


@pytest.mark.parametrize("case, analysis", _pairs())
def test_battery(case, analysis):
    c = bt.CASES[case]
    m = c.build()
    backends = BACKENDS if analysis in bt.BACKEND_ANALYSES else ("numpy",)
    why = bt.refusal(c, analysis)
    if why is not None:                      # declared unsupported: refused on every backend, in one line
        for be in backends:
            refused(_call(analysis, m, be), *why)
        return
    CHECKS[analysis](c, m)
    for be in backends:                      # a backend's own refusals (a GPU's: scipy's solvers, training)
        why = bt.refusal(c, analysis, be)
        if why is not None:
            refused(_call(analysis, m, be), *why)


# ------------------------------------------------------------------------------ the registries
def test_every_registered_model_has_a_case():
    """A model registered without a case fails here (and a case of an unregistered model)."""
    assert bt.missing_models() == [], f"registered models without a battery case: {bt.missing_models()}"
    assert {c.model for c in bt.CASES.values()} <= set(dl.MODELS)
    for c in bt.CASES.values():
        assert c.build().name == c.model, c.name


def test_every_analysis_is_run_or_named():
    """Every public function of dynlab.analysis is run by the battery or named with where it is
    tested (``battery.ELSEWHERE``); every analysis the battery runs is public; the backend analyses
    are exactly those that take ``backend=``."""
    public = set()
    for name in dl.__all__:
        obj = getattr(dl, name)
        module = getattr(getattr(obj, "__wrapped__", obj), "__module__", "") or ""
        if callable(obj) and not isinstance(obj, type) and module.startswith("dynlab.analysis"):
            public.add(name)
    ran = set(bt.PUBLIC.values())
    assert public - ran - set(bt.ELSEWHERE) == set(), sorted(public - ran - set(bt.ELSEWHERE))
    assert set(bt.ELSEWHERE) <= public and not ran & set(bt.ELSEWHERE)
    assert set(bt.PUBLIC) == set(bt.ANALYSES) and set(CHECKS) == set(bt.ANALYSES)
    for analysis, name in bt.PUBLIC.items():
        fn = getattr(dl, name)
        takes = "backend" in inspect.signature(getattr(fn, "__wrapped__", fn)).parameters
        assert takes == (analysis in bt.BACKEND_ANALYSES), analysis


def test_the_backends_are_the_registered_ones_that_run_here():
    from dynlab.backends import BACKENDS as REGISTERED

    assert "numpy" in BACKENDS and "numba" in BACKENDS and set(BACKENDS) <= set(REGISTERED)
    # read now, not at collection: a backend registered since (at run time) is one a user may choose
    for name in set(REGISTERED) - set(dl.available_backends()):   # the others refuse in one line naming the backend
        refused(lambda: dl.simulate(bt.build("rnn"), np.zeros((bt.T, bt.DIN)), backend=name), "backend", "")

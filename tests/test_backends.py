"""The backends' training passes on every kernel form: the NumPy reference's BPTT against central
finite differences of the loss it differentiates, and the numba backend's against the reference.

The loss is L = Σ_t ⟨e_t, y_t⟩ over the last T' steps, y the outputs (or, for an LSTM and a stack,
the whole state), e fixed random cotangents; its gradient with respect to every array and scalar of
the form, and to h0, is what ``train_backward`` returns.

Tolerances: central differences with step 1e-6 have truncation error O(h²) ≈ 1e-12 times the third
derivatives (order one here: weights of scale 0.5, T = 6) and rounding error ≈ 1e-16·|L|/h ≈ 1e-10,
so 1e-7 of the gradient's largest entry resolves a wrong term (which is O(1)) by six orders.  The
numba backend computes the same sums in another order, with its vectorised tanh and sigmoid
(≤ 3 ulp): 1e-11 relative.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import battery
from dynlab.backends import get_backend
from dynlab.errors import DivergenceError

D, DIN, B, T, TP = 4, 3, 3, 6, 4

#: The battery's cases (tests/battery.py) whose forms these passes run: the one-line cells, the iRNN
#: (g_0 = previous with σ = −1; η per (time, k); eq. 9's low rank P = U with α ≠ 1), the gated cells
#: and stacks of them.
MODELS = ("rnn", "fastrnn", "antisymmetric", "rin", "irnn-K5-previous-minus", "irnn-K2-etaTK-relu",
          "irnn-K3-eq9-lowrank2", "gru", "lstm", "stack-gru", "stack-lstm")


def _form(case):
    return battery.build(case, D, DIN, T).form()


def _data(form, on_state, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(T, B, DIN))
    h0 = 0.5 * rng.normal(size=(B, form.state_size))
    w = form.state_size if on_state else form.hidden
    ext = rng.normal(size=(TP, B, w))
    return x, h0, ext


def _loss(be, form, x, h0, ext):
    tape = be.train_forward(form, x, h0)
    y = tape.H if ext.shape[2] == form.state_size and form.state_size != form.hidden else tape.outputs
    return float(np.sum(ext * np.asarray(y)[-TP:]))


def _fields(form):
    """(name, value) of every differentiable entry of the form: the stack's as ``layer{ℓ}_<name>``."""
    if form.kind == "stack":
        return [(f"layer{ell}_{n}", v) for ell, lf in enumerate(form.layers, start=1) for n, v in _fields(lf)]
    return [(f.name, getattr(form, f.name)) for f in dataclasses.fields(form)
            if isinstance(getattr(form, f.name), np.ndarray) or f.name in ("a", "gain", "alpha")]


def _replaced(form, name, value):
    if form.kind == "stack":
        ell, rest = name.split("_", 1)
        i = int(ell[len("layer"):]) - 1
        layers = list(form.layers)
        layers[i] = _replaced(layers[i], rest, value)
        return dataclasses.replace(form, layers=tuple(layers))
    return dataclasses.replace(form, **{name: value})


def _finite_differences(form, x, h0, ext, h=1e-6):
    ref = get_backend("numpy")
    out = {}
    for name, v in _fields(form) + [("h0", h0)]:
        a = np.array(v, dtype=np.float64)
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            vals = []
            for s in (h, -h):
                b = a.copy()
                b[i] += s
                if name == "h0":
                    vals.append(_loss(ref, form, x, b, ext))
                else:
                    vals.append(_loss(ref, _replaced(form, name, b if b.ndim else float(b)), x, h0, ext))
            g[i] = (vals[0] - vals[1]) / (2 * h)
        out[name] = g
    return out


def _cases():
    out = []
    for case in MODELS:
        out.append((case, False))
        if "lstm" in case:
            out.append((case, True))
    return out


@pytest.mark.parametrize("case,on_state", _cases())
def test_reference_bptt_equals_finite_differences(case, on_state):
    form = _form(case)
    x, h0, ext = _data(form, on_state)
    ref = get_backend("numpy")
    grads, dh0, _ = ref.train_backward(form, ref.train_forward(form, x, h0), ext)
    fd = _finite_differences(form, x, h0, ext)
    assert set(fd) - {"h0"} <= set(grads), sorted(set(fd) - set(grads))
    for name, want in fd.items():
        got = dh0 if name == "h0" else np.asarray(grads[name])
        scale = max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-7 * scale, err_msg=f"{case}: {name}")


def test_finite_differences_catch_a_wrong_gradient():
    """The comparison above resolves a wrong term: the reference's gradient of the GRU's W_hh with
    the reset gate's contribution dropped differs from the differences by far more than 1e-7."""
    form = _form("gru")
    x, h0, ext = _data(form, False)
    ref = get_backend("numpy")
    grads, _, _ = ref.train_backward(form, ref.train_forward(form, x, h0), ext)
    fd = _finite_differences(form, x, h0, ext)
    wrong = np.array(grads["W_hh"])
    wrong[:D] = 0.0  # the reset gate's rows
    assert np.max(np.abs(wrong - fd["W_hh"])) > 1e3 * 1e-7 * max(1.0, np.max(np.abs(fd["W_hh"])))


@pytest.mark.parametrize("case,on_state", _cases())
def test_numba_training_passes_equal_the_reference(case, on_state):
    form = _form(case)
    x, h0, ext = _data(form, on_state, seed=1)
    ref, nb = get_backend("numpy"), get_backend("numba")
    tr, tn = ref.train_forward(form, x, h0), nb.train_forward(form, x, h0)
    for attr in ("H", "outputs", "states"):
        np.testing.assert_allclose(np.asarray(getattr(tn, attr)), np.asarray(getattr(tr, attr)), rtol=1e-12,
                                   atol=1e-13, err_msg=f"{case}: {attr}")
    gr, r0, r1 = ref.train_backward(form, tr, ext)
    gn, n0, n1 = nb.train_backward(form, tn, ext)
    assert set(gn) == set(gr), (sorted(gn), sorted(gr))
    for name in gr:
        want = np.asarray(gr[name])
        scale = max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(np.asarray(gn[name]), want, rtol=0, atol=1e-11 * scale, err_msg=f"{case}: {name}")
    np.testing.assert_allclose(n0, r0, rtol=0, atol=1e-11 * max(1.0, np.max(np.abs(r0))))
    np.testing.assert_allclose(n1, r1, rtol=0, atol=1e-11 * max(1.0, np.max(np.abs(r1))))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("case", ["rnn", "irnn-K5-previous-minus", "gru", "stack-lstm"])
def test_a_diverging_forward_pass_names_its_step(backend, case):
    form = _form(case)
    x, h0, _ = _data(form, False)
    x[3, 1] = np.inf
    with pytest.raises(DivergenceError) as info:
        get_backend(backend).train_forward(form, x, h0)
    assert info.value.step == 4 and info.value.batch == 1


# ------------------------------------------------ every operation × every form, numba vs reference
# The catalogue the GPU backend is judged by (tests/gpu_cases.py), run on the numba backend in this
# process.  Tolerances as there: float64 1e-12·max(1, |ref|) (summation order, the vectorised
# tanh/sigmoid's ulps; σ₁ by power iteration with certification vs LAPACK's SVD within n·ε), float32
# 3e-5·max(1, |ref|) against the float64 reference.
import gpu_cases  # noqa: E402

# the ``global:``/``fused:`` variants re-run the GPU backend's other kernel paths: nothing new on numba
NUMBA_CASES = [c for c in gpu_cases.case_ids() if c not in gpu_cases.GPU_ONLY and ":" not in c]


@pytest.mark.parametrize("case", NUMBA_CASES)
def test_numba_operation_equals_the_reference(case):
    ref, nb = get_backend("numpy"), get_backend("numba")
    with np.errstate(all="ignore"):
        got = gpu_cases.run(nb, case)
        f32 = gpu_cases.float32_case(case)
        want = gpu_cases.run(ref, gpu_cases.as_float64_case(case) if f32 and not case.startswith("api-") else case)
    assert set(got) == set(want) or f32 and set(got) < set(want), (sorted(got), sorted(want))
    for k in got:
        if "implicit" in case and k in ("residual", "iterations", "code"):
            # numba's own ``auto`` (per point, Newton early): both converge below tol, by other routes
            assert k != "residual" or np.all(np.asarray(got[k]) <= 1e-12) and np.all(np.asarray(want[k]) <= 1e-12)
            continue
        w = np.asarray(want[k])
        # an equilibrium solved to residual 1e-12 is known to that times ‖(I − D A)⁻¹‖ (< 100 here)
        rtol = 3e-5 if f32 else 1e-10 if case.endswith("implicit") or case.startswith("implicit") else 1e-12
        gpu_cases.close(got[k], w.astype(np.float64) if f32 and w.dtype.kind == "f" else w, rtol, f"{case}: {k}")

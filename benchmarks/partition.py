"""Workload ``templates`` (MASO §5): templates dz/dx of a linear read-out, reverse mode vs the matrix.

Rows (same model, inputs and read-out; ReLU RNN D=128, d=1, C=10, T=200, B=4):

* ``materialised A_RNN`` (reference): the (T·D)×(T·d) matrix of Theorem 1 built by the block
  recursion (``dynlab.analysis.partition._compose``), then W_out times its last block row —
  O(T²·D²·d) time and O(T²·D·d) memory per sequence;
* ``dynlab reverse mode``: λ_{t−1} = λ_t J_t from λ_T = W_out on the prepared forward pass
  (``template_arrays``) — O(T·C·D²), never forms A_RNN;
* ``dl.templates``: the public call (simulation, pieces, reverse pass, Dataset).

The info lines time the reverse mode at MNIST's length T = 784, where A_RNN would need
(784·128)×784 float64 = 0.64 GB per sequence.  JAX's ``jacrev`` of x ↦ z through ``lax.scan``
is added when JAX is installed.
"""
from __future__ import annotations

import time

import numpy as np

import dynlab as dl
from dynlab.analysis import partition as P

from .harness import Impl, Workload
from .peers import jax_or_none


def _setup(T, B=4, D=128, C=10):
    m = dl.make_model("rnn", D, 1, activation="relu", seed=0, weight_scale=1.0)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (B, T, 1))
    Wo, bo = rng.standard_normal((C, D)) / np.sqrt(D), rng.standard_normal(C)
    return m, x, Wo, bo


def _jax_templates(m, x, Wo, bo):
    jax = jax_or_none()
    import jax.numpy as jnp
    from jax import lax

    UT, WT, b = jnp.asarray(m.U.T), jnp.asarray(m.W.T), jnp.asarray(m.b)
    Wj, bj = jnp.asarray(Wo), jnp.asarray(bo)

    def z(xs):  # one sequence (T, d)
        def step(h, xt):
            return jnp.maximum(h @ UT + xt @ WT + b, 0.0), None
        h = lax.scan(step, jnp.zeros(UT.shape[0]), xs)[0]
        return Wj @ h + bj

    jac = jax.jit(jax.vmap(jax.jacrev(z)))
    xj = jnp.asarray(x)

    def call():
        return np.asarray(jac(xj).block_until_ready())  # (B, C, T, d)

    return call


def build(quick: bool):
    T = 50 if quick else 200
    m, x, Wo, bo = _setup(T)
    B, _, d = x.shape
    D = m.hidden
    tr = P.forward(m, x)

    def materialised():
        A, _ = P._compose(tr)
        return np.einsum("cd,bdj->bcj", Wo, A[:, -D:]).reshape(B, Wo.shape[0], T, d)

    impls = [
        Impl("materialised A_RNN (block recursion), W_out · last block row", materialised),
        Impl("dynlab reverse mode (template_arrays)", lambda: P.template_arrays(tr, Wo, bo)["template"]),
        Impl("dl.templates (+ simulation, pieces, Dataset)", lambda: dl.templates(m, x, Wo, bo)["template"].values),
    ]
    info = {"sizes": f"ReLU RNN D={D}, d=1, C={Wo.shape[0]}, T={T}, B={B}, float64",
            "A_RNN size": f"({T * D} × {T * d}) per sequence = {T * D * T * d * 8 / 1e6:.0f} MB"}
    if jax_or_none() is not None:
        import jax
        name = f"jax {jax.__version__} vmap(jacrev) through lax.scan"
        impls.append(Impl(name, _jax_templates(m, x, Wo, bo)))
        info["ratios"] = [("dynlab reverse mode / jax (goal ≤ 1)", "dynlab reverse mode (template_arrays)", name)]
    if not quick:
        mL, xL, WoL, boL = _setup(784, B=1)
        trL = P.forward(mL, xL)
        P.template_arrays(trL, WoL, boL)
        t0 = time.perf_counter()
        r = P.template_arrays(trL, WoL, boL)
        el = time.perf_counter() - t0
        err = float(np.max(np.abs(r["inner"] + r["bias"] - r["z"])))
        info["T=784 (pixel MNIST), B=1"] = (f"reverse mode {el:.3g} s, |⟨t,x⟩ + bias − z| ≤ {err:.1e}; "
                                           f"A_RNN would be {784 * D * 784 * 8 / 1e9:.2f} GB")
    return impls, info


WORKLOADS = [
    Workload("templates", "templates dz/dx of a read-out, reverse mode vs materialised A_RNN, D=128, T=200",
             build, baseline="materialised A_RNN (block recursion), W_out · last block row", rtol=1e-10, repeat=3),
]

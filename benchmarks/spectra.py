"""Workload ``spectra`` (docs/design.md, *Benchmarks*): eigenvalues of ∇φU − I at 2000 points, D = 128.

Rows (same model, same points):

* ``numpy.linalg.eigvals`` (baseline and reference): batched LAPACK ``geev`` on the 2000
  matrices ∇φ(z_n)U − I, prebuilt outside the timing (so this row is the bare LAPACK floor);
* ``dynlab flow_eigenvalues``: dynlab's array layer, which also BUILDS the matrices from the
  states (chunks of 256 points) before the same batched ``geev``;
* ``dl.spectrum(step=False)``: the public call, with the simulation of the 8 × 250 steps,
  the matrices, the eigenvalues, the stability labels and the Dataset.

Both sides sort each point's eigenvalues (by decreasing real part) so that they can be compared.
The target (issue 4): dynlab within 1.2× of the batched LAPACK call.
"""
from __future__ import annotations

import numpy as np

import dynlab as dl
from dynlab.activations import dphi
from dynlab.analysis.equilibria import fixed_point_map, flow_eigenvalues

from .harness import Impl, Workload


def _sorted_parts(ev):
    ev = np.sort(ev, axis=-1)[:, ::-1]
    return ev.real, ev.imag


def build(quick: bool):
    D, B, T = (64, 4, 100) if quick else (128, 8, 250)
    m = dl.make_model("irnn", hidden=D, inputs=1, K=5, eta=0.5, seed=0)
    x = dl.tasks.random_walk(steps=T, inputs=1, variance=10.0, batch=B, seed=0)
    h = dl.simulate(m, x, backend="numpy")["h"].values
    hp = np.concatenate([np.zeros((B, 1, D)), h[:, :-1]], axis=1)
    s = (h + hp).reshape(B * T, D)
    xs = x.reshape(B * T, 1)
    system = fixed_point_map(m)
    c = system.c(xs)
    z = s @ m.U.T + c
    mats = dphi("tanh", z)[:, :, None] * m.U[None] - np.eye(D)[None]

    impls = [
        Impl("numpy.linalg.eigvals (batched LAPACK)", lambda: _sorted_parts(np.linalg.eigvals(mats)),
             note="matrices prebuilt"),
        Impl("dynlab flow_eigenvalues", lambda: _parts(flow_eigenvalues(system, s, c)),
             note="builds the matrices too"),
        Impl("dl.spectrum(step=False)", lambda: _spectrum_parts(m, x), note="simulation + Dataset too"),
    ]
    info = {"points": f"{B * T} (B={B} random-walk sequences × T={T} steps), D={D}, iRNN K=5, η=0.5, tanh"}
    return impls, info


def _parts(ev):
    return ev.real, ev.imag


def _spectrum_parts(m, x):
    ds = dl.spectrum(m, x, step=False, backend="numpy")
    D = ds["eig_real"].shape[-1]       # (batch, time, eig) → (points, eig), as the other rows
    return ds["eig_real"].values.reshape(-1, D), ds["eig_imag"].values.reshape(-1, D)


WORKLOADS = [Workload("spectra", "eigenvalues of ∇φU − I at 2000 points, D=128", build,
                      baseline="numpy.linalg.eigvals (batched LAPACK)", rtol=1e-12, repeat=3)]

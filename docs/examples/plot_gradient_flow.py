"""
Gradient flow and Lyapunov spectra
==================================

How far back can a recurrent network carry a gradient?  ‖∂h_T/∂h_t‖₂ against T − t answers it, and
the finite-time Lyapunov exponents summarise its rate: the norm of a long product of step
Jacobians grows like exp(λ₁ (T − t)).  Here the iRNN with K = 5 inner steps against a tanh RNN
and a FastRNN of the same size, on the same 2000 steps of noise.
"""
import numpy as np

import dynlab as dl
from dynlab.commands import gradients_dataset
from dynlab.spec import GradientSpec, RunSpec

# %%
# What ``dynlab gradients --model irnn --K 5 --compare rnn,fastrnn --steps 2000 --lyapunov``
# computes, called from Python (the command layer, ``dynlab.commands``):
spec = GradientSpec(RunSpec(model="irnn", hidden=32, steps=2000, compare=("rnn", "fastrnn")), K_values=(5,),
                    lyapunov=True)
ds = gradients_dataset(spec)
fig = dl.plot.draw(ds)

# %%
# The ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T−1)‖ (the iRNN paper's Fig. 3b) and the top exponent of each:
for name in ds["model"].values:
    e = ds.sel(model=name)
    print(f"{name:>10}: ratio {float(e['ratio']):.3g}, ln‖∂h_T/∂h_1‖ = {float(e['log_jac_norm'][0]):9.1f}, "
          f"λ₁ = {float(e['lyapunov'][0]):+.4f} per step")

# %%
# The exponents check the norms: over a long horizon ln‖∂h_T/∂h_1‖ ≈ λ₁ (T − 1).  The norms are
# computed by one backward pass over the products (kept normalised, so nothing under- or
# overflows), the exponents by QR steps along the trajectory — two independent routes.
for name in ds["model"].values:
    e = ds.sel(model=name)
    slope = float(e["log_jac_norm"][0]) / (ds.sizes["time"] - 1)
    print(f"{name:>10}: ln‖∂h_T/∂h_1‖/(T−1) = {slope:+.4f}, λ₁ = {float(e['lyapunov'][0]):+.4f}")
    assert abs(slope - float(e["lyapunov"][0])) < 0.01

# %%
# One model at a time, in Python, is the public call itself; ``lyapunov`` gives the running
# estimate too, to judge its convergence:
m = dl.make_model("rnn", 32, 1, seed=0)
x = dl.tasks.noise(2000, 1, seed=0)
ly = dl.lyapunov(m, x, k=4, transient=200)
fig = dl.plot.draw(ly)

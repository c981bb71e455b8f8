"""
Analyse a GRU trained in PyTorch
================================

A network trained in PyTorch comes into dynlab through its parameters under PyTorch's own names
(``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, …), read from a
``.safetensors`` file or a plain ``.npz`` — never a pickle, and without needing torch installed.
In PyTorch, after training::

    import numpy as np
    np.savez("net.npz", **{k: v.detach().numpy() for k, v in gru.state_dict().items()})
    # or: safetensors.torch.save_file(gru.state_dict(), "net.safetensors")

(with torch at hand, ``dl.from_torch(gru)`` converts the live module instead).  Here a GRU of 64
units trained on the 3-bit flip-flop task stands in for yours: its weights are written under
PyTorch's names, exactly as the line above would.
"""
import os
import pathlib
import tempfile

import numpy as np

import dynlab as dl

here = pathlib.Path.cwd()   # the examples are run from their folder in the repository
repo = next(p for p in (here, *here.parents) if (p / "benchmarks" / "data").is_dir())
trained = np.load(repo / "benchmarks" / "data" / "flipflop_gru64.npz")
path = os.path.join(tempfile.mkdtemp(), "net.npz")
np.savez(path, weight_ih_l0=trained["W_ih"], weight_hh_l0=trained["W_hh"],
         bias_ih_l0=trained["b_ih"], bias_hh_l0=trained["b_hh"])

# %%
# Load it.  The kind is read from the shapes (``model="gru"`` checks it); a missing or unexpected
# tensor, or a wrong shape, is one error naming the file and the tensor.
m = dl.load_model(path, model="gru")
print(m)

# %%
# Gradient flow and Lyapunov spectrum over a long horizon
# -------------------------------------------------------
# The network's own inputs: flip-flop pulses (three channels of ±1 pulses, probability 0.05 per
# step), here 2000 steps of one test sequence.  ``log_jac_norm`` stays finite at any horizon.
task = dl.make_task("flipflop", 2000, n_train=8, n_val=8, n_test=8, seed=1)
x = task.batch("test")[0][0]
g = dl.gradient_norms(m, x)
ly = dl.lyapunov(m, x, k=6, transient=100)
print(f"ln‖∂h_T/∂h_1‖ = {float(g['log_jac_norm'][0]):.1f} over T = {x.shape[0]} steps")
print("top Lyapunov exponents (1/step):", np.round(ly["lyapunov"].values, 4))
fig = dl.plot.draw(g)

# %%
# Every exponent is negative: along its driven trajectory the trained network contracts onto its
# memories, so a perturbation of the state dies out — the slowest direction at the rate λ₁ per step
# — and ‖∂h_T/∂h_1‖ has fallen by many orders of magnitude over 2000 steps.  What it remembers is
# held by its attractors, not by a marginal direction: the fixed points below show them.
assert (ly["lyapunov"].values < 0).all() and float(g["log_jac_norm"][0]) < -20
fig = dl.plot.draw(ly)

# %%
# Its fixed points
# ----------------
# At zero input, started from the states the network visits on the task's test inputs; points
# outside the states a trajectory can reach (‖h‖∞ ≤ 1 for a GRU) are left out and counted.
fp = dl.fixed_points(m, np.zeros(3), trajectories=dl.make_task("flipflop", 100, n_test=32, seed=2),
                     n_starts=256)
print({k: fp.attrs[k] for k in ("n_roots", "n_stable", "n_saddles", "n_slow", "n_unreachable")})
fig = dl.plot.draw(fp)

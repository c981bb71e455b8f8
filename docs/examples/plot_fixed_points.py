"""
Fixed points of a trained network
=================================

The workflow of Sussillo & Barak (2013): train a network, then find the fixed points of its
dynamics at a constant input, starting from the states it visits, and read how it computes from
them.  The 3-bit flip-flop task: three channels of ±1 pulses; each output must hold the sign of
its channel's last pulse.  A network that solves it needs 2³ = 8 stable states, one per memory,
and saddles between memories one bit apart.
"""
import numpy as np

import dynlab as dl

task = dl.make_task("flipflop", 50, seed=0, n_train=2000, n_val=200, n_test=64)
tr = dl.train_model(dl.make_model("gru", 16, 3, seed=0), task, iterations=400, lr=1e-2, batch=64)
print(tr)
fig = dl.plot.draw(tr)

# %%
# The validation loss falls far below the baseline (the loss of always answering 0).  Now the
# fixed points at zero input — where the network sits between pulses — from 512 starts drawn
# along its trajectories on the task's test inputs:
fp = dl.fixed_points(tr.model, np.zeros(3), trajectories=task, n_starts=512)
print({k: fp.attrs[k] for k in ("n_roots", "n_stable", "n_saddles", "n_slow", "n_unreachable")})
fig = dl.plot.draw(fp)

# %%
# Every point reported is certified (a unique root proven nearby by the Newton–Kantorovich
# theorem) and lies in the states a trajectory can reach.  Each stable point carries one output
# pattern: read out through the trained read-out, the 8 stable points give the 8 sign patterns.
stable = fp["h_eq"].values[(fp["kind"].values == 1) & (fp["n_unstable"].values == 0)]
patterns = np.sign(stable @ tr.readout["W_out"].T + tr.readout["b_out"])
print(len({tuple(p) for p in patterns}), "distinct output patterns at", len(stable), "stable points")
assert len(stable) == 8 and len({tuple(p) for p in patterns}) == 8 and fp.attrs["n_slow"] <= 1

# %%
# Any other constant input is asked for the same way.  With channel 1 held at +1 (a pulse that
# does not end) the network can no longer hold a −1 on that channel, and fewer stable states
# remain:
fp1 = dl.fixed_points(tr.model, np.array([1.0, 0.0, 0.0]), trajectories=task, n_starts=512)
print({k: fp1.attrs[k] for k in ("n_roots", "n_stable", "n_saddles")})
held = fp1["h_eq"].values[(fp1["kind"].values == 1) & (fp1["n_unstable"].values == 0)]
signs = np.sign(held @ tr.readout["W_out"][0] + tr.readout["b_out"][0])
print("channel-1 outputs at its stable states:", signs)
assert 0 < fp1.attrs["n_stable"] < 8 and (signs > 0).all()

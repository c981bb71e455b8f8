"""What the two flip-flop items share (flipflop-fixed-points, flipflop-bifurcation): the GRU trained on
the 3-bit flip-flop at their common sizes, the gate, the words of the scale-down and the Recipe's
common ending (no paper's setting, beyond the papers, the scaling alone as the title, unstyled)."""
from __future__ import annotations

from .._recipe import setting, setting_attr, train_model

#: the gate's level: a tenth of the constant predictor's MSE (≈ 1 for ±1 targets)
LEARNED_MSE = 0.1
#: (D, T, iterations, batch, lr, test trajectories, starts, seeds) quick and full
QUICK = (16, 50, 300, 32, 2e-2, 32, 256, (0, 1, 2))
FULL = (64, 100, 1000, 64, 1e-2, 64, 1024, (0, 1, 2, 3, 4))
N_BITS = 3
GATE = ("the GRU learned the flip-flop: validation MSE below 0.1 — a tenth of the constant predictor's "
        "≈ 1 for ±1 targets — beyond 2 SE over seeds")
#: the keywords both items' ``Recipe`` takes
RECIPE = dict(trains=True, gate=GATE, paper=setting(), beyond=True, title="{scaling}", title_size=6.5, style=False)


def train_gru(name, seed, D, T, its, batch, lr, n_traj):
    """(task, untrained GRU, ``train_model``'s result) of one seed: the flip-flop task (2000 training
    sequences, 64 validation, ``n_traj`` test) and the GRU of ``D`` units trained on it with Adam."""
    import dynlab as dl

    task = dl.make_task("flipflop", T, seed=seed, n_train=2000, n_val=64, n_test=n_traj)
    m0 = dl.make_model("gru", D, N_BITS, seed=seed)
    res = train_model(m0, task, iterations=its, lr=lr, batch=batch, seed=seed, record_every=its,
                      progress=False, command=f"dynlab figures make {name}")
    return task, m0, res


def run_words(D, T, its, batch, lr) -> tuple:
    """(the ``setting`` attr, the start of the ``scaling`` words) of a run at these sizes."""
    return (setting_attr(data="3-bit flip-flop", T=T, D=D, batch=batch, steps=its, lr=lr),
            f"GRU D={D}, flip-flop T={T} (p=0.05), {its} Adam iterations (lr {lr:g}, batch {batch}), ")

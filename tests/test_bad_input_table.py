"""The bad-input table (issue 19, item 5): bad command lines across every command, each refused
with exit status 2 and exactly one line, ``Error: NAME: …``, naming the option, argument, file or
command that is wrong, with no traceback and nothing computed.

``BAD[command]`` lists ``(argv, name)``; ``{T}`` is the test's scratch folder, ``{W}`` a saved
fastrnn (weights), ``{SPEC}`` a valid sweep spec, ``{FILE}`` a plain text file.  Every row runs
with the computing primitives of the library (the simulation, the BPTT step, the implicit net's
training step, the figure recipes) replaced by one that fails the row: validation must come
before any computation.  Out of this table, by design: sizes too large for the machine (refused
by the resource guards) and the contents of weights, checkpoint and TOML files (validated by
their readers, tested with tampered-file fixtures).
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import dynlab
from conftest import cli_run as run

#: The primitives through which every command computes; a row reaching one is a bug.
COMPUTE = ["dynlab.simulation.simulate", "dynlab.simulation.run_states", "dynlab.train.backprop.loss_and_grads",
           "dynlab.train.implicit.mse_and_delta", "dynlab.figures._recipe.run_recipe"]

#: command → [(argv, the name the one error line starts with)].
BAD = {
    'simulate': [
        # sizes beyond this machine: refused before allocating, naming the option and the estimate
        (['simulate', '--hidden', '200000'], '--hidden'),
        (['simulate', '--hidden', '99999999999999999999999'], '--hidden'),
        (['simulate', '--steps', '1000000000000'], '--steps'),
        (['simulate', '--batch', '1000000000'], '--batch'),
        (['simulate', '--inputs', '100000000000'], '--inputs'),
        (['simulate', '--hidden', 'abc'], '--hidden'),
        (['simulate', '--hidden', '0'], '--hidden'),
        (['simulate', '--hidden', '-3'], '--hidden'),
        (['simulate', '--hidden', ''], '--hidden'),
        (['simulate', '--inputs', '0'], '--inputs'),
        (['simulate', '--inputs', '-1'], '--inputs'),
        (['simulate', '--model', 'nosuch'], '--model'),
        (['simulate', '--activation', 'ünï'], '--activation'),
        (['simulate', '--K', '0'], '--K'),
        (['simulate', '--K', '-2'], '--K'),
        (['simulate', '--eta', 'nan'], '--eta'),
        (['simulate', '--eta', 'inf'], '--eta'),
        (['simulate', '--eta', '-1'], '--eta'),
        (['simulate', '--eta', '0'], '--eta'),
        (['simulate', '--alpha', '-1'], '--alpha'),
        (['simulate', '--alpha', 'nan'], '--alpha'),
        (['simulate', '--weight-scale', 'nan'], '--weight-scale'),
        (['simulate', '--weight-scale', '-1'], '--weight-scale'),
        (['simulate', '--weight-scale', 'inf'], '--weight-scale'),
        (['simulate', '--seed', '-1'], '--seed'),
        (['simulate', '--seed', 'abc'], '--seed'),
        (['simulate', '--seed', '1.5'], '--seed'),
        (['simulate', '--g0', 'maybe'], '--g0'),
        (['simulate', '--set', 'foo'], '--set'),
        (['simulate', '--set', '=1'], '--set'),
        (['simulate', '--set', 'nosuch=1'], '--set nosuch'),
        (['simulate', '--set', 'K=3'], '--set'),
        (['simulate', '--set', 'rank=1', '--set', 'rank=2'], '--set'),
        (['simulate', '--model', 'rnn', '--set', 'rank=-1'], '--set rank'),
        (['simulate', '--weights', '{T}/missing.npz'], '--weights'),
        (['simulate', '--weights', ''], '--weights'),
        (['simulate', '--steps', '0'], '--steps'),
        (['simulate', '--steps', '-5'], '--steps'),
        (['simulate', '--steps', '1.5'], '--steps'),
        (['simulate', '--batch', '0'], '--batch'),
        (['simulate', '--batch', '-1'], '--batch'),
        (['simulate', '--input', 'nosuch'], '--input'),
        (['simulate', '--variance', '-1'], '--variance'),
        (['simulate', '--variance', 'nan'], '--variance'),
        (['simulate', '--backend', 'nosuch'], '--backend'),
        (['simulate', '--data', '{T}/x.txt'], '--data'),
        (['simulate', '--data', '{T}/nodir/x.nc'], '--data'),
        (['simulate', '--data', ''], '--data'),
        (['simulate', '--data', '/proc/x.nc'], '--data'),
        (['simulate', '--out', '{T}/x.bmp'], '--out'),
        (['simulate', '--out', '/proc/x.png'], '--out'),
        (['simulate', '--out', '{T}'], '--out'),
        (['simulate', '--bogus'], '--bogus'),
        (['simulate', 'extra'], 'extra'),
        (['simulate', '--hidden'], '--hidden'),
        (['simulate', '--seed'], '--seed'),
        (['simulate', '--hidden', '1e3'], '--hidden'),
        (['simulate', '--hidden', '٣'], '--hidden'),
        (['simulate', '--weight-scale', '1,5'], '--weight-scale'),
        (['simulate', '--weight-scale', '0x10'], '--weight-scale'),
        (['simulate', '--eta', '1e999'], '--eta'),
        (['simulate', '--alpha', '-inf'], '--alpha'),
        (['simulate', '--model', 'RNN', '--K', '2'], '--K'),
        (['simulate', '--set', 'beta=abc'], '--set beta'),
        (['simulate', '--model', 'fastrnn', '--set', 'beta=nan'], '--set beta'),
        (['simulate', '--model', 'fastrnn', '--set', 'beta=inf'], '--set beta'),
        (['simulate', '--model', 'rnn', '--set', 'identity_init=maybe'], '--set identity_init'),
        (['simulate', '--model', 'rnn', '--set', 'identity_init='], '--set identity_init'),
        (['simulate', '--model', 'irnn', '--set', 'rank=-1'], '--set rank'),
        (['simulate', '--model', 'irnn', '--set', 'rank=1.5'], '--set rank'),
        (['simulate', '--model', 'irnn', '--set', 'sign=7'], '--set sign'),
        (['simulate', '--model', 'stack', '--set', 'cell=nosuch'], '--set cell'),
        (['simulate', '--model', 'stack', '--set', 'layers=0'], '--set layers'),
        (['simulate', '--model', 'ctrnn', '--set', 'method=nosuch'], '--set method'),
        (['simulate', '--model', 'antisymmetric', '--set', 'eps=-1'], '--set eps'),
        (['simulate', '--activation', 'leaky-relu', '--set', 'leak=nan'], '--set leak'),
        (['simulate', '--weights', '{T}/w.txt'], '--weights'),
        (['simulate', '--weights', '{T}'], '--weights'),
        (['simulate', '--weights', '{SPEC}'], '--weights'),
        (['simulate', '--weights', '{W}', '--model', 'rnn'], '--model'),
        # work past the command line's confirmation limit: the estimate, and --force to run it
        (['simulate', '--K', '1000000000', '--steps', '10'], '--K'),
        (['simulate', '--weights', '{KHUGE}', '--steps', '10'], '--weights'),
        (['gradients', '--weights', '{KHUGE}', '--steps', '10'], '--weights'),
        (['simulate', '--input', ''], '--input'),
        (['simulate', '--backend', ''], '--backend'),
        (['simulate', '--weight-scale', '０.５'], '--weight-scale'),
        (['simulate', '--model', 'irnn', '--set', 'rank=٣'], '--set rank'),
        (['simulate', '--model'], '--model'),
        (['simulate', '--model='], '--model'),
        (['simulate', '--hidden=-1'], '--hidden'),
        (['simulate', '--hidden', '+-1'], '--hidden'),
        (['simulate', '--seed', '1e100'], '--seed'),
        (['simulate', '--eta', '1.5.2'], '--eta'),
        (['simulate', '--eta', 'NaN'], '--eta'),
        (['simulate', '--eta', 'Infinity'], '--eta'),
        (['simulate', '--eta', '-0'], '--eta'),
        (['simulate', '--weight-scale', ''], '--weight-scale'),
        (['simulate', '--set', 'K'], '--set'),
        (['simulate', '--set', 'seed=3'], '--set'),
        (['simulate', '--set', 'hidden=3'], '--set'),
        (['simulate', '--set', ' =3'], '--set'),
        (['simulate', '--model', 'fastrnn', '--set', 'beta='], '--set beta'),
        (['simulate', '--model', 'irnn', '--set', 'rank=0'], '--set rank'),
    ],
    'phase': [
        (['phase', '--compare', 'nosuch'], '--compare'),
        (['phase', '--compare', ''], '--compare'),
        (['phase', '--compare', 'rnn,rnn'], '--compare'),
        (['phase', '--compare', ',,'], '--compare'),
        (['phase', '--steps', '0'], '--steps'),
        (['phase', '--hidden', '-1'], '--hidden'),
        (['phase', '--eta', '-inf'], '--eta'),
        (['phase', '--field', '--hidden', '3'], '--field'),
        (['phase', '--data', '{T}/nodir/x.nc'], '--data'),
        (['phase', '--out', ''], '--out'),
        (['phase', '--compare', 'implicit'], '--compare'),
        (['phase', '--model', 'nosuch'], '--model'),
        (['phase', '--input', 'nosuch'], '--input'),
        (['phase', '--steps', 'abc'], '--steps'),
        (['phase', '--out', '/proc/p.png'], '--out'),
        (['phase', '--data', '{T}/p.txt'], '--data'),
        (['phase', '--seed', '-1'], '--seed'),
        (['phase', '--backend', 'x'], '--backend'),
        (['phase', '--variance', 'nan'], '--variance'),
        (['phase', '--weights', '{T}/none.npz'], '--weights'),
        (['phase', '--weights', '{FILE}'], '--weights'),
        (['phase', '--set', 'nosuch=1'], '--set nosuch'),
        (['phase', '--field', '--model', 'rnn', '--hidden', '3'], '--field'),
        (['phase', '--K', '0'], '--K'),
        (['phase', '--bogus'], '--bogus'),
    ],
    'gradients': [
        # work or memory beyond this machine (tests/test_resources.py has the rest)
        (['gradients', '--hidden', '30000', '--steps', '10'], '--hidden'),
        (['gradients', '--K', '1,,5'], '--K'),
        (['gradients', '--K', 'a'], '--K'),
        (['gradients', '--K', '0'], '--K'),
        (['gradients', '--K', '-1,2'], '--K'),
        (['gradients', '--K', ''], '--K'),
        (['gradients', '--compare', 'lstm,xx'], '--compare'),
        (['gradients', '--steps', '0'], '--steps'),
        (['gradients', '--steps', '1'], '--steps'),
        (['gradients', '--weight-scale', 'nan'], '--weight-scale'),
        (['gradients', '--hidden', '0'], '--hidden'),
        (['gradients', '--compare', 'rnn,,fastrnn'], '--compare'),
        (['gradients', '--data', '/proc/x.nc'], '--data'),
        (['gradients', '--out', '{T}/g.jpg'], '--out'),
        (['gradients', '--K', '2.5'], '--K'),
        (['gradients', '--K', '3,3'], '--K'),
        (['gradients', '--eta', '0'], '--eta'),
        (['gradients', '--model', 'nosuch'], '--model'),
        (['gradients', '--lyapunov', 'yes'], 'yes'),
        (['gradients', '--compare', 'rnn,implicit'], '--compare'),
        (['gradients', '--weights', '{FILE}'], '--weights'),
        (['gradients', '--lyapunov=yes'], '--lyapunov'),
    ],
    'equilibria': [
        (['equilibria', '--tol', '0'], '--tol'),
        (['equilibria', '--tol', '-1'], '--tol'),
        (['equilibria', '--tol', 'nan'], '--tol'),
        (['equilibria', '--fixed-points', '0'], '--fixed-points'),
        (['equilibria', '--fixed-points', '-1'], '--fixed-points'),
        (['equilibria', '--continue-over', 'nosuch', '--range', '0,1'], '--continue-over'),
        (['equilibria', '--continue-over', 'b', '--range', '1,0'], '--range'),
        (['equilibria', '--continue-over', 'b', '--range', 'a,b'], '--range'),
        (['equilibria', '--continue-over', 'b', '--range', 'nan,1'], '--range'),
        (['equilibria', '--continue-over', 'b', '--range', '0,inf'], '--range'),
        (['equilibria', '--method', 'nosuch'], '--method'),
        (['equilibria', '--hidden', '-2'], '--hidden'),
        (['equilibria', '--steps', '0'], '--steps'),
        (['equilibria', '--out', '{T}/x.gif'], '--out'),
        (['equilibria', '--data', '{T}/x'], '--data'),
        (['equilibria', '--fixed-points', 'abc'], '--fixed-points'),
        (['equilibria', '--continue-over', 'b'], '--range'),
        (['equilibria', '--continue-over', 'b', '--range', '1'], '--range'),
        (['equilibria', '--continue-over', 'b', '--range', '0,1,2'], '--range'),
        (['equilibria', '--continue-over', '', '--range', '0,1'], '--continue-over'),
        (['equilibria', '--continue-over', 'x9', '--range', '0,1'], '--continue-over'),
        (['equilibria', '--continue-over', 'b99', '--range', '0,1'], '--continue-over'),
        (['equilibria', '--tol', 'abc'], '--tol'),
        (['equilibria', '--weights', '{T}/none.npz'], '--weights'),
        (['equilibria', '--weights', '{FILE}'], '--weights'),
        (['equilibria', '--model', 'nosuch'], '--model'),
    ],
    'spectrum': [
        # work or memory beyond this machine (tests/test_resources.py has the rest)
        (['spectrum', '--hidden', '30000', '--steps', '10'], '--hidden'),
        (['spectrum', '--at', 'nosuch'], '--at'),
        (['spectrum', '--hidden', '0'], '--hidden'),
        (['spectrum', '--batch', '0'], '--batch'),
        (['spectrum', '--steps', '-1'], '--steps'),
        (['spectrum', '--at', ''], '--at'),
        (['spectrum', '--out', '/proc/s.png'], '--out'),
        (['spectrum', '--data', '{T}/s.txt'], '--data'),
        (['spectrum', '--eta', '-1'], '--eta'),
        (['spectrum', '--input', 'sine', '--variance', '2'], '--variance'),
        (['spectrum', '--weights', '{FILE}'], '--weights'),
        (['spectrum', '--seed', '-5'], '--seed'),
        (['spectrum', '--model', 'nosuch'], '--model'),
        (['spectrum', '--steps', 'abc'], '--steps'),
        (['spectrum', '--batch', '-2'], '--batch'),
        (['spectrum', '--variance', '-1'], '--variance'),
        (['spectrum', '--set', 'nosuch=1'], '--set nosuch'),
        (['spectrum', '--K', '0'], '--K'),
        (['spectrum', '--model', 'implicit'], '--model'),
        (['spectrum', '--bogus'], '--bogus'),
    ],
    'converge': [
        (['converge', '--K-max', '0'], '--K-max'),
        (['converge', '--K-max', '-1'], '--K-max'),
        (['converge', '--eta', '0'], '--eta'),
        (['converge', '--hidden', '0'], '--hidden'),
        (['converge', '--steps', '0'], '--steps'),
        (['converge', '--K-max', 'abc'], '--K-max'),
        (['converge', '--K-max', '2.5'], '--K-max'),
        (['converge', '--model', 'rnn'], '--model'),
        (['converge', '--out', '{T}/c.tiff'], '--out'),
        (['converge', '--alpha', 'nan'], '--alpha'),
        (['converge', '--model', 'implicit'], '--model'),
        (['converge', '--weights', '{FILE}'], '--weights'),
        (['converge', '--steps', '-1'], '--steps'),
        (['converge', '--eta', 'nan'], '--eta'),
        (['converge', '--K', '0'], '--K'),
        (['converge', '--data', '/proc/c.nc'], '--data'),
        (['converge', '--input', 'nosuch'], '--input'),
        (['converge', '--bogus'], '--bogus'),
        (['converge', '--K-max'], '--K-max'),
    ],
    'partition': [
        (['partition', '--layers', '0'], '--layers'),
        (['partition', '--layers', '-1'], '--layers'),
        (['partition', '--dataset', 'nosuch'], '--dataset'),
        (['partition', '--activation', 'tanh'], '--activation'),
        (['partition', '--hidden', '0'], '--hidden'),
        (['partition', '--batch', '0'], '--batch'),
        (['partition', '--K', '3'], '--K'),
        (['partition', '--model', 'irnn'], '--model'),
        (['partition', '--dataset', ''], '--dataset'),
        (['partition', '--layers', 'abc'], '--layers'),
        (['partition', '--out', '/proc/p.png'], '--out'),
        (['partition', '--data', '{T}/nodir/p.nc'], '--data'),
        (['partition', '--embed'], '--embed'),
        (['partition', '--activation', 'sigmoid'], '--activation'),
        (['partition', '--set', 'leak=0.1'], '--set leak'),
        (['partition', '--model', 'stack', '--set', 'layers=0'], '--set layers'),
        (['partition', '--weights', '{FILE}'], '--weights'),
        (['partition', '--model', 'implicit'], '--model'),
    ],
    'train': [
        # work or memory beyond this machine (tests/test_resources.py has the rest)
        (['train', '--batch', '1000000000'], '--batch'),
        (['train', '--task', 'nosuch'], '--task'),
        (['train', '--iterations', '-1'], '--iterations'),
        (['train', '--iterations', '0'], '--iterations'),
        (['train', '--lr', '0'], '--lr'),
        (['train', '--lr', '-1'], '--lr'),
        (['train', '--lr', 'nan'], '--lr'),
        (['train', '--optimiser', 'x'], '--optimiser'),
        (['train', '--batch', '0'], '--batch'),
        (['train', '--clip', '-1'], '--clip'),
        (['train', '--clip', 'nan'], '--clip'),
        (['train', '--sigma-eps', '-1'], '--sigma-eps'),
        (['train', '--record-every', '0'], '--record-every'),
        (['train', '--record-every', '-1'], '--record-every'),
        (['train', '--resume', '{T}/missing.npz'], '--resume'),
        (['train', '--resume', '{T}/x.txt'], '--resume'),
        (['train', '--save-weights', '{T}/x.txt'], '--save-weights'),
        (['train', '--save-weights', '{T}/nodir/x.npz'], '--save-weights'),
        (['train', '--pad', '-1'], '--pad'),
        (['train', '--steps', '0'], '--steps'),
        (['train', '--hidden', '0'], '--hidden'),
        (['train', '--model', 'nosuch'], '--model'),
        (['train', '--lr', 'inf'], '--lr'),
        (['train', '--clip', '0'], '--clip'),
        (['train', '--sigma-eps', 'inf'], '--sigma-eps'),
        (['train', '--model', 'implicit', '--task', 'xor', '--iterations', '0'], '--iterations'),
        (['train', '--model', 'implicit', '--task', 'xor', '--lr', '-1'], '--lr'),
        (['train', '--model', 'implicit', '--task', 'xor', '--hidden', '0'], '--hidden'),
        (['train', '--model', 'implicit', '--task', 'xor', '--batch', '0'], '--batch'),
        (['train', '--task', ''], '--task'),
        (['train', '--optimiser', ''], '--optimiser'),
        (['train', '--iterations', 'abc'], '--iterations'),
        (['train', '--lr', 'abc'], '--lr'),
        (['train', '--task', 'xor'], '--task'),
        (['train', '--model', 'implicit'], '--task'),
        (['train', '--resume', ''], '--resume'),
        (['train', '--save-weights', ''], '--save-weights'),
        (['train', '--save-weights', '/proc/x.npz'], '--save-weights'),
        (['train', '--out', '/proc/t.png'], '--out'),
        (['train', '--data', '{T}/t.csv'], '--data'),
        (['train', '--weights', '{T}/none.npz'], '--weights'),
        (['train', '--model', 'rnn', '--eta-per-k'], '--eta-per-k'),
        (['train', '--task', 'digits-rows', '--steps', '5'], '--steps'),
        (['train', '--pad', 'abc'], '--pad'),
        (['train', '--weights', '{FILE}'], '--weights'),
        (['train', '--optimiser', 'adamw'], '--optimiser'),
        # the contents of weights files and checkpoints (the message names the file and field)
        (['train', '--resume', '{EMPTY}'], '--resume'),
        (['train', '--resume', '{W}'], '--resume'),
        (['train', '--weights', '{G0ARRAY}'], '--weights'),
        (['train', '--weights', '{K0}'], '--weights'),
    ],
    'sweep': [
        (['sweep', '{GRID}'], '{GRID}: grid'),
        (['sweep', '{T}/missing.toml'], '{T}/missing.toml'),
        (['sweep'], 'SPEC.toml'),
        (['sweep', '{SPEC}', '--out', '{T}/x.txt'], '--out'),
        (['sweep', '{SPEC}', '--out', '{T}/nodir/x.zarr'], '--out'),
        (['sweep', '{SPEC}', '--region-size', '0'], '--region-size'),
        (['sweep', '{SPEC}', '--region-size', '-1'], '--region-size'),
        (['sweep', '--verify', '{T}/none.zarr'], '--verify'),
        (['sweep', '--verify', '{SPEC}'], '--verify'),
        (['sweep', '{SPEC}', '--verify', '{T}/none.zarr'], 'SPEC.toml'),
        (['sweep', '{SPEC}', '--data', '{T}/x.txt'], '--data'),
        (['sweep', '{SPEC}', '--backend', 'x'], '--backend'),
        (['sweep', '{T}'], '{T}'),
        (['sweep', '{SPEC}', '--resume'], '--resume'),
        (['sweep', '{SPEC}', '--region-size', 'abc'], '--region-size'),
        (['sweep', '{SPEC}', '--out', ''], '--out'),
        (['sweep', '{SPEC}', '--out', '/proc/x.zarr'], '--out'),
        (['sweep', '{SPEC}', '--data', '/proc/x.nc'], '--data'),
        (['sweep', '--verify', '{T}/none.zarr', '--region-size', '3'], '--region-size'),
        (['sweep', '--verify', '{T}/none.zarr', '--resume'], '--resume'),
        (['sweep', '--verify', ''], '--verify'),
        (['sweep', ''], 'SPEC.toml'),
        (['sweep', '--out', '{T}/y.zarr'], 'SPEC.toml'),
        (['sweep', '--verify'], '--verify'),
        (['sweep', '{SPEC}', '--backend', ''], '--backend'),
        (['sweep', '{SPEC}', '--region-size', '٣'], '--region-size'),
        (['sweep', '{SPEC}', '--verify', '{T}'], 'SPEC.toml'),
        (['sweep', '{SPEC}', '{SPEC}'], '{SPEC}'),
        # the contents of a spec file: errors name the file and its key, never an option
        (['sweep', '{LATIN1}'], '{LATIN1}'),
        (['sweep', '{BACKEND}'], '{BACKEND}: backend'),
        (['sweep', '{REGION0}'], '{REGION0}: region_size'),
        (['sweep', '{HIDDEN0}'], '{HIDDEN0}: model.hidden'),
    ],
    'figures list': [
        (['figures', 'list', '--bogus'], '--bogus'),
        (['figures', 'list', 'extra'], 'extra'),
        (['figures', 'list', '--quiet=yes'], '--quiet'),
        (['figures', 'list', '-x'], '-x'),
    ],
    'figures make': [
        (['figures', 'make'], 'NAMES'),
        (['figures', 'make', 'nosuch'], 'NAME'),
        (['figures', 'make', '--format', 'gif', 'x'], '--format'),
        (['figures', 'make', '--out', '/proc/x', 'irnn-fig2-phase'], '--out'),
        (['figures', 'make', 'nosuch', 'irnn-fig2-phase'], 'NAME'),
        (['figures', 'make', ''], 'NAME'),
        (['figures', 'make', 'irnn-fig2-phase', '--format', ''], '--format'),
        (['figures', 'make', 'irnn-fig2-phase', '--out', '{SPEC}'], '--out'),
        (['figures', 'make', 'irnn-fig2-phase', '--quick=1'], '--quick'),
    ],
    'figures all': [
        (['figures', 'all', '--out', '/proc/x'], '--out'),
        (['figures', 'all', '--out', '{SPEC}'], '--out'),
        (['figures', 'all', '--format', 'gif'], '--format'),
        (['figures', 'all', '--out', ''], '--out'),
        (['figures', 'all', '--quick', 'extra'], 'extra'),
        (['figures', 'all', '--bogus'], '--bogus'),
    ],
    'figures': [
        (['figures', 'nosuch'], 'nosuch'),
        (['figures', '--bogus'], '--bogus'),
    ],
    'models': [
        (['models', '--bogus'], '--bogus'),
        (['models', 'extra'], 'extra'),
        (['models', '--quiet=1'], '--quiet'),
        (['models', '-x'], '-x'),
    ],
    'dynlab': [
        (['nosuch'], 'nosuch'),
        (['--bogus'], '--bogus'),
        (['--version', '--bogus'], '--bogus'),
        (['-q', 'nosuch'], 'nosuch'),
        (['-q', '--bogus'], '--bogus'),
        (['--version=1'], '--version'),
        (['--quiet=yes', 'models'], '--quiet'),
    ],
}

ROWS = [(cmd, argv, name) for cmd, rows in BAD.items() for argv, name in rows]
#: Every command of ``dynlab`` (and the group itself, ``dynlab``); each must have rows.
COMMANDS = ("simulate", "phase", "gradients", "equilibria", "spectrum", "converge", "partition", "train", "sweep",
            "figures list", "figures make", "figures all", "figures", "models", "dynlab")


class Computed(AssertionError):
    """A bad command line reached a computation before it was refused."""


@pytest.fixture
def no_compute(monkeypatch):
    def refuse(*args, **kwargs):
        raise Computed("computed before refusing")

    for target in COMPUTE:
        monkeypatch.setattr(target, refuse)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad-input")
    w = dynlab.save_model(dynlab.make_model("fastrnn", 2, 1, seed=1), tmp / "w.npz")
    spec = tmp / "s.toml"
    spec.write_text('analysis = "simulate"\n[model]\nname = "irnn"\nhidden = 2\n[input]\nsteps = 5\n'
                    '[grid]\neta = [0.5, 1.0]\n')
    text = tmp / "notes.txt"
    text.write_text("not a model\n")
    out = {"T": str(tmp), "W": str(w), "SPEC": str(spec), "FILE": str(text)}
    body = '[model]\nname = "irnn"\nhidden = 2\n[input]\nsteps = 5\n[grid]\neta = [0.5, 1.0]\n'
    for key, text in {"LATIN1": '# caf\xe9\nanalysis = "simulate"\n' + body,
                      "BACKEND": 'analysis = "simulate"\nbackend = "x"\n' + body,
                      "REGION0": 'analysis = "simulate"\nregion_size = 0\n' + body,
                      "HIDDEN0": 'analysis = "simulate"\n' + body.replace("hidden = 2", "hidden = 0")}.items():
        path = tmp / f"{key.lower()}.toml"
        path.write_bytes(text.encode("latin-1"))
        out[key] = str(path)
    empty = tmp / "empty.npz"
    np.savez(empty)
    good = dict(np.load(dynlab.save_model(dynlab.make_model("irnn", 2, 1, seed=1), tmp / "irnn.npz")))
    np.savez(tmp / "g0array.npz", **{**good, "__setting__g0": np.array(["zero", "previous"])})
    np.savez(tmp / "k0.npz", **{**good, "__setting__K": np.array(0)})
    np.savez(tmp / "khuge.npz", **{**good, "__setting__K": np.array(10 ** 9)})
    out.update(EMPTY=str(empty), G0ARRAY=str(tmp / "g0array.npz"), K0=str(tmp / "k0.npz"),
               KHUGE=str(tmp / "khuge.npz"))
    grid = tmp / "grid.toml"
    grid.write_text('analysis = "simulate"\n[model]\nname = "irnn"\nhidden = 2\n[input]\nsteps = 5\n[grid]\n'
                    'eta = {0}\nalpha = {0}\nseed = {0}\n'.format(list(range(1, 1001))))
    out["GRID"] = str(grid)
    return out


def test_the_table_covers_every_command():
    from dynlab.cli import main

    assert len(ROWS) >= 150
    assert set(BAD) == set(COMMANDS)
    assert all(BAD[c] for c in COMMANDS)
    listed = set(main.commands) | {f"figures {n}" for n in main.commands["figures"].commands}
    assert listed <= set(COMMANDS), listed - set(COMMANDS)
    assert len({(c, tuple(a)) for c, a, _ in ROWS}) == len(ROWS), "a row is listed twice"


@pytest.mark.parametrize("command, argv, name", ROWS, ids=[" ".join(a) or "(empty)" for _, a, _ in ROWS])
def test_a_bad_command_line_is_one_line_naming_its_source(command, argv, name, files, no_compute):
    argv, name = [a.format(**files) for a in argv], name.format(**files)
    t0 = time.perf_counter()
    result = run(*argv)
    seconds = time.perf_counter() - t0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert not isinstance(result.exception, Computed), argv
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {name}: "), lines[0]
    assert seconds < 10, f"{seconds:.1f} s to refuse {argv}"

"""The torch engine on a GPU: ``python -m benchmarks.gpu_torch [--json OUT] [--epochs E] [--seeds S]``.

Three measurements (issue 44), each printed as a table, on the CUDA device PyTorch sees:

1. **the ``train-torch`` step on the GPU**: one training step of ``train_model(..., engine="torch")``
   (``TorchEngine.loss_and_grads`` and dynlab's Adam step on the host) for the iRNN K = 5,
   D = 128, T = 784, batch 128 — float32 and float64, eager and with ``torch.compile`` of the time
   step (``dynlab.torch._ops.irnn_step``, patched for the call as ``benchmarks/train_torch.py``
   does): whether compiling helps on a GPU (it does not on two CPU cores);
2. **one pixel-MNIST epoch of the iRNN at the paper's sizes**: the paper's cell (eq. 9, P = U =
   I + V H of rank D/8, ReLU, g₀ = h_(m−1), η per (m, k)) with D = 128, K = 1, 2, 3 (Table 1's rows),
   batch 128 (the paper's), T = 784, d = 1, 10 classes: 469 steps (60 000 images) plus one pass
   over 10 000 test images, timed as ``n`` steps and one evaluation pass and scaled (the data are
   random pixels of MNIST's shape: the arithmetic does not depend on their values);
3. **each MNIST/HAR gallery item at paper scale, estimated**: for every arm of the item (the
   cells and settings its recipe trains, at the paper's sizes: ``ITEMS``) the step and
   evaluation times are measured as in 2., and the item's time is Σ over arms of
   seeds × epochs × (steps per epoch × step + evaluation).  The papers train "to convergence" and
   give no epoch counts, so ``--epochs`` (default 10) and ``--seeds`` (default 5, the gallery's
   least) are stated assumptions; the per-epoch column scales to any other choice.

Without a CUDA device it refuses in one line, unless ``--device cpu`` is given (``--quick``: tiny
sizes, a smoke run of the script itself).  Timings synchronise the device around every call.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time

import numpy as np

#: the paper-scale data sets: T, d, classes, training and test sequences
DATA = {"pixel-mnist": (784, 1, 10, 60000, 10000), "noisy-mnist": (1000, 28, 10, 60000, 10000),
        "har2": (128, 9, 2, 7352, 2947)}
#: item → [(arm label, data set, registry name, settings, hidden D, batch)] at the papers' sizes
_PAPER_IRNN = {"P": "U", "g0": "previous", "activation": "relu"}


def _irnn(K, act="relu"):
    return dict(_PAPER_IRNN, K=K, activation=act)


ITEMS = {
    "irnn-table1-pixel-digits": (
        [(k, "pixel-mnist", *c, 128, 128) for k, c in (
            ("fastrnn", ("fastrnn", {})), ("rnn", ("rnn", {})), ("lstm", ("lstm", {})),
            ("antisymmetric", ("antisymmetric", {})), ("irnn-K1", ("irnn", _irnn(1))),
            ("irnn-K2", ("irnn", _irnn(2))), ("irnn-K3", ("irnn", _irnn(3))))]
        + [(f"permuted {k}", "pixel-mnist", *c, 128, 128) for k, c in (
            ("fastrnn", ("fastrnn", {})), ("lstm", ("lstm", {})), ("antisymmetric", ("antisymmetric", {})),
            ("irnn-K1", ("irnn", _irnn(1))), ("irnn-K1-readout", ("irnn", _irnn(1))))]),
    "irnn-table2-noisy-digits": [(k, "noisy-mnist", *c, 128, 128) for k, c in (
        ("fastrnn", ("fastrnn", {})), ("lstm", ("lstm", {})), ("antisymmetric", ("antisymmetric", {})),
        ("irnn-K1", ("irnn", _irnn(1))))],
    "irnn-table11-activation": [(f"{a} K={K}", "har2", "irnn", _irnn(K, a), 80, 128)
                                for a in ("relu", "sigmoid") for K in (1, 3, 5)] + [
                               ("control relu K=1", "har2", "irnn", _irnn(1), 80, 128)],
    "maso-table1-h0": [(f"{ds} {L} layer{'s' * (L > 1)} {h0} h0", "pixel-mnist", "stack" if L > 1 else "rnn",
                        dict(activation="relu", identity_init=True, **({"cell": "rnn", "layers": L} if L > 1 else {})),
                        128, 64) for ds in ("digits", "permuted") for L in (1, 2) for h0 in ("zero", "random")]
                      + [(f"{ds} {c}", "pixel-mnist", c, {}, 128, 64) for ds in ("digits", "permuted")
                         for c in ("gru", "gru", "lstm")],
    "maso-table4-grid": [(f"{o} lr{i} σ{s}", "pixel-mnist", "rnn", dict(activation="relu", identity_init=True), 128, 64)
                         for o in ("rmsprop", "sgd") for i in range(3) for s in (0.0, 0.01, 0.1, 1.0, 5.0)],
    "maso-fig2-codes / fig3-templates / fig5 / fig6 (one network each)": [
        (f"ReLU RNN {i}", "pixel-mnist", "rnn", dict(activation="relu", identity_init=True), 128, 64) for i in range(4)],
}


def _sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def _compiled(torch, on):
    from dynlab.torch import _ops

    saved = _ops.irnn_step
    if on:
        _ops.irnn_step = _COMPILED.setdefault("irnn", torch.compile(saved, dynamic=False))
    try:
        yield
    finally:
        _ops.irnn_step = saved


_COMPILED: dict = {}


def _model(name, settings, D, d, T):
    import dynlab as dl

    kw = dict(settings)
    if name == "irnn":
        kw.update(rank=max(1, D // 8), eta=np.full((T, kw["K"]), 1e-2))
    return dl.make_model(name, D, d, seed=0, **kw)


def step_seconds(model, T, d, C, batch, *, device, dtype, compile_step=False, n=5):
    """Median seconds of one step of train_model's torch engine (forward, backward, the gradients
    read back, dynlab's Adam on the host) on random data of the shape; compiled steps warm up first."""
    import torch

    from dynlab.train import backprop as bp
    from dynlab.train.optim import make_optimiser
    from dynlab.train.torch_engine import TorchEngine

    eng = TorchEngine(model, device=device, dtype=dtype)
    rng = np.random.default_rng(0)
    readout = bp.init_readout(model.hidden, C, seed=0)
    opt = make_optimiser("adam", lr=1e-2)
    times = []
    with _compiled(torch, compile_step):
        for i in range(n + 2):
            x, y = rng.random((batch, T, d)), rng.integers(0, C, batch)
            _sync(torch, eng.device)
            t0 = time.perf_counter()
            _, g, _ = eng.loss_and_grads(model, readout, x, y, loss="ce")
            params = {**model.params(), **readout}
            opt.step({k: v for k, v in params.items() if k in g}, {k: g[k] for k in params if k in g})
            _sync(torch, eng.device)
            if i >= 2:                               # two warm-up steps (allocator, compilation)
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def eval_seconds(model, T, d, C, n_seq, *, device, dtype):
    """Seconds of one evaluation pass (read-out outputs of n_seq sequences, no graph, in chunks)."""
    import torch

    from dynlab.train import backprop as bp
    from dynlab.train.torch_engine import TorchEngine

    eng = TorchEngine(model, device=device, dtype=dtype)
    readout = bp.init_readout(model.hidden, C, seed=0)
    x = np.random.default_rng(1).random((min(n_seq, 1024), T, d))
    eng.outputs(model, readout, x[:8], "ce")
    _sync(torch, eng.device)
    t0 = time.perf_counter()
    eng.outputs(model, readout, x, "ce")
    _sync(torch, eng.device)
    return (time.perf_counter() - t0) * n_seq / x.shape[0]


def _table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_torch", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="float32", help="of the epoch and item estimates (the step table has both)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=5, help="timed steps per measurement (after two warm-up steps)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of this script")
    p.add_argument("--no-compile", action="store_true", help="leave out the torch.compile rows")
    p.add_argument("--json", metavar="OUT", help="write every number to OUT")
    args = p.parse_args(argv)
    import torch

    import dynlab as dl

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("benchmarks.gpu_torch: PyTorch sees no CUDA device here (--device cpu --quick runs the script "
              "on the CPU as a smoke test)", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    shrink = (lambda T: min(T, 12)) if args.quick else (lambda T: T)
    Dq = (lambda D: min(D, 8)) if args.quick else (lambda D: D)
    out = {"device": name, "torch": torch.__version__, "dynlab": dl.__version__, "epochs": args.epochs,
           "seeds": args.seeds, "dtype": args.dtype}
    print(f"# The torch engine on {name} (torch {torch.__version__}, dynlab {dl.__version__})"
          + (" — quick: tiny sizes (T ≤ 12, D ≤ 8), a smoke run, not a measurement" if args.quick else "") + "\n")

    # 1. the train-torch step
    T1, D1 = shrink(784), Dq(128)
    m = dl.make_model("irnn", D1, 2, K=5, eta=0.5, seed=0)
    rows = []
    for dtype in ("float32", "float64"):
        for comp in ((False,) if args.no_compile else (False, True)):
            s = step_seconds(m, T1, 2, 10, 128 if not args.quick else 8, device=device, dtype=dtype,
                             compile_step=comp, n=args.steps)
            rows.append((dtype, "torch.compile per step" if comp else "eager", f"{s:.4g}"))
    out["train_torch_step"] = rows
    print(f"## 1. train-torch step (iRNN K=5, D={D1}, T={T1}, batch 128, d=2, 10 classes), seconds per step\n")
    print(_table(("dtype", "mode", "s / step"), rows) + "\n")

    # 2 and 3: per arm, per epoch
    cache = {}

    def arm_epoch(data, name_, settings, D, batch):
        T, d, C, n_train, n_test = DATA[data]
        T, D = shrink(T), Dq(D)
        key = (data, name_, json.dumps(settings, sort_keys=True), D, batch)
        if key not in cache:
            model = _model(name_, settings, D, d, T)
            st = step_seconds(model, T, d, C, batch if not args.quick else 8, device=device, dtype=args.dtype,
                              n=args.steps)
            ev = eval_seconds(model, T, d, C, n_test if not args.quick else 64, device=device, dtype=args.dtype)
            steps = -(-n_train // batch)
            cache[key] = (st, ev, steps, st * steps + ev)
        return cache[key]

    rows = []
    for K in (1, 2, 3):
        st, ev, steps, epoch = arm_epoch("pixel-mnist", "irnn", _irnn(K), 128, 128)
        rows.append((f"iRNN K={K}", f"{st:.4g}", steps, f"{ev:.4g}", f"{epoch:.4g}", f"{epoch / 60:.3g}"))
    out["pixel_mnist_epoch"] = rows
    print(f"## 2. one pixel-MNIST epoch, the paper's iRNN (eq. 9, rank 16, ReLU), D=128, batch 128, {args.dtype}\n")
    print(_table(("cell", "s / step", "steps / epoch", "s / test pass", "s / epoch", "min / epoch"), rows) + "\n")

    items = []
    for item, arms in ITEMS.items():
        per_epoch = sum(arm_epoch(data, n_, s_, D, b)[3] for _, data, n_, s_, D, b in arms)
        total = per_epoch * args.epochs * args.seeds
        items.append((item, len(arms), f"{per_epoch / 60:.3g}", f"{total / 3600:.3g}"))
    out["items"] = items
    print(f"## 3. gallery items at paper scale, estimated ({args.seeds} seeds × {args.epochs} epochs, {args.dtype})\n")
    print(_table(("item", "arms", "min per epoch (all arms, one seed)", "GPU-hours"), items) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A gallery item trained both ways: ``python -m benchmarks.torch_standin [--quick] [--dtype float32] [--json OUT]``.

The stand-in for the paper-scale runs of ``engine="torch"``: the ``rin-gradients`` recipe (the RIN
note: an L2 penalty on U against one on V = U + I, a ReLU RIN on the adding task, 4 arms × 10
seeds × 600 Adam iterations, D = 32, T = 50; ``--quick``: 3 seeds × 100 iterations, D = 16,
T = 30) is computed twice — by its own code, once as it stands (dynlab's exact-gradient trainer)
and once with ``dl.train_model`` running ``engine="torch"`` (``device``, ``dtype`` as given) — and
checked by its own ``check``.  Printed: each engine's verdict, its two paired effects (mean ± SE
over seeds), the gate and the control, and whether the effects agree within the exact trainer's SE.

The recipe is not changed: for the torch run ``dynlab.train_model`` is, for the duration of the
call, ``functools.partial(train_model, engine="torch", …)`` — the name the recipe calls.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time


@contextlib.contextmanager
def torch_engine(device="cpu", dtype="float64"):
    """``dynlab.train_model`` with ``engine="torch"`` for the block (module docstring)."""
    import dynlab
    from dynlab.train.loop import train_model

    saved = dynlab.__dict__.get("train_model")
    dynlab.train_model = functools.partial(train_model, engine="torch", device=device, dtype=dtype)
    try:
        yield
    finally:
        if saved is None:
            del dynlab.train_model
        else:
            dynlab.train_model = saved


def run(quick: bool, device="cpu", dtype="float64") -> dict:
    """{engine: (seconds, the recipe's check)} for dynlab's exact trainer and the torch engine."""
    from dynlab.figures.beyond import rin_gradients as item

    out = {}
    for engine in ("numba", "torch"):
        t0 = time.perf_counter()
        with (torch_engine(device, dtype) if engine == "torch" else contextlib.nullcontext()):
            ds = item.compute(quick)
        out[engine] = (time.perf_counter() - t0, item.check(ds), ds)
    return out


def compare(results) -> dict:
    """The two engines' verdicts and effects side by side; ``agree``: same verdict of every part,
    and every effect within the exact trainer's SE of it."""
    (_, a, _), (_, b, _) = results["numba"], results["torch"]
    rows, agree = [], a["passed"] == b["passed"]
    for pa, pb in zip(a["parts"], b["parts"]):
        within = abs(pa["mean"] - pb["mean"]) <= pa["se"]
        agree &= within and pa["verdict"] == pb["verdict"]
        rows.append({"part": pa["name"], "exact": [pa["mean"], pa["se"], pa["verdict"]],
                     "torch": [pb["mean"], pb["se"], pb["verdict"]], "within_se": bool(within)})
    return {"agree": bool(agree), "passed": [a["passed"], b["passed"]], "parts": rows,
            "control": [a["control"]["passed"], b["control"]["passed"]],
            "gate": [a.get("gate", {}).get("met"), b.get("gate", {}).get("met")]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.torch_standin", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float64")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    res = run(args.quick, args.device, args.dtype)
    c = compare(res)
    import numpy as np

    dm = float(np.max(np.abs(res["numba"][2]["val_mse"].values - res["torch"][2]["val_mse"].values)))
    print(f"rin-gradients{' (quick)' if args.quick else ''}: exact trainer {res['numba'][0]:.0f} s, torch engine "
          f"({args.device}, {args.dtype}) {res['torch'][0]:.0f} s; largest per-run difference in the final "
          f"validation MSE {dm:.2g}")
    for r in c["parts"]:
        print(f"  {r['part']}: exact {r['exact'][0]:.5g} ± {r['exact'][1]:.2g} ({r['exact'][2]}), "
              f"torch {r['torch'][0]:.5g} ± {r['torch'][1]:.2g} ({r['torch'][2]}); within the exact SE: "
              f"{r['within_se']}")
    print(f"  verdict (passed): exact {c['passed'][0]}, torch {c['passed'][1]}; gate met: {c['gate']}; "
          f"control passed: {c['control']}; same verdict within SE: {c['agree']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**c, "seconds": [res["numba"][0], res["torch"][0]], "max_val_mse_diff": dm,
                       "device": args.device, "dtype": args.dtype, "quick": args.quick}, f, indent=1)
    return 0 if c["agree"] else 1


if __name__ == "__main__":
    sys.exit(main())

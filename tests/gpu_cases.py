"""Every GPU-backend operation × every kernel form, as cases both sides of the comparison build
alike: ``run(backend, case)`` returns a dict of NumPy arrays for a backend object.

``tests/test_gpu_backend.py`` runs each case on the NumPy reference in the test process and on the
GPU backend — in that process when it can run there (a GPU, or a session already under the
simulator), else in a child started as ``python gpu_cases.py OUT`` with ``NUMBA_ENABLE_CUDASIM=1``
(Numba reads that variable once, when it is first imported, so the rest of the test session never
sees the simulator).  The child also records the argument types of every kernel launch, so that
the parent can compile each kernel for a real device (``cuda.compile_ptx``) with the very types
the simulator ran.

The models are the common battery's cases (``tests/battery.py``, ``MODELS`` below): the GPU is the
battery's third backend, run here because the simulator must run in a child process.  Sizes are
tiny (D = 3, an LSTM's state 6, B = 2, T = 5): the simulator runs one Python thread per
CUDA thread.  Inputs are drawn from a generator seeded by the case's name, so both sides see the
same numbers.
"""
from __future__ import annotations

import os
import pickle
import sys
import traceback
import zlib

import numpy as np

D, DIN, B, T = 3, 2, 2, 5


#: The battery's cases the GPU runs (tests/battery.py): case id → (battery case, overrides).  Every
#: kernel form, every activation compiled into a GPU kernel at least once, and the inner loops kept
#: short (K = 3, two CTRNN substeps): the simulator runs a Python thread per CUDA thread.
MODELS = {"rnn": ("rnn", {}), "fastrnn": ("fastrnn", {}), "antisymmetric": ("antisymmetric", {}),
          "rin-abs": ("rin", {"activation": "abs"}),
          "irnn-K3-previous-minus": ("irnn-K5-previous-minus", {"K": 3}),
          "irnn-K2-etaTK-relu": ("irnn-K2-etaTK-relu", {}), "irnn-K1-identity": ("irnn-K1-identity", {}),
          "ctrnn-euler": ("ctrnn-euler", {"substeps": 2}), "ctrnn-rk4": ("ctrnn-rk4", {"substeps": 2}),
          "gru": ("gru", {}), "lstm": ("lstm", {}), "stack-gru": ("stack-gru", {}), "stack-lstm": ("stack-lstm", {})}


def _models():
    import battery

    return {case: (lambda name=name, kw=kw: battery.build(name, D, DIN, T, **kw))
            for case, (name, kw) in MODELS.items()}


#: every form above: simulate (float64, float32), jacobians, gradient flow, Lyapunov
MODEL_OPS = ("simulate-f64", "simulate-f32", "jacobians", "gradient_flow", "lyapunov")
#: the operations on their own forms
OTHER_CASES = ("simulate-on-device", "simulate-diverge-stop", "simulate-diverge-flag", "backward_norms-2chunks", "tangent_qr-2chunks",
               "sweep-irnn-f64", "sweep-irnn-f32", "sweep-cell-f64", "sweep-cell-f32", "sweep-diverge",
               "partition-2layers", "reverse", "implicit-contracting", "implicit-newton")
#: the public functions end to end with ``backend=be.name`` (Datasets, sweeps, the driver)
API_CASES = ("api-simulate", "api-gradient_norms", "api-lyapunov", "api-partition", "api-templates",
             "api-implicit", "api-sweep-gradient_norms", "api-sweep-irnn_equilibrium")
#: the public analyses at sizes whose working sets exceed a block's 48 KiB of shared memory, on a
#: real GPU's launch shapes' paths: D = 64 and 128, T = 2–3, B = 1 (``_large``)
LARGE_CASES = ("large-gradient_norms-D64", "large-gradient_norms-D128", "large-lyapunov-D64", "large-simulate-D128",
               "large-gru-D64")
#: the cases each backend variant (``VARIANTS``) runs again: every kernel's other paths at D = 3
VARIANT_CASES = ("simulate-f64/rnn", "simulate-f64/irnn-K3-previous-minus", "simulate-f64/ctrnn-rk4",
                 "simulate-f64/gru", "simulate-f64/lstm", "simulate-f32/lstm", "simulate-diverge-stop",
                 "jacobians/irnn-K2-etaTK-relu", "jacobians/ctrnn-rk4", "gradient_flow/rnn",
                 "lyapunov/irnn-K3-previous-minus", "backward_norms-2chunks",
                 "tangent_qr-2chunks", "sweep-irnn-f64", "sweep-cell-f32")
#: Backend variants, as instance overrides of ``GPUBackend``'s thresholds:
#:   ``global`` — no optional part in shared memory (SHARED_BYTES = 0): the weights of every
#:   simulation and the iterates, products, frames, matrices and Gram matrices of every other kernel
#:   in global memory/scratch (each ``wsh``/``msh``/``psh``/``qsh``/``gsh`` = 0 path), the fused
#:   ``products`` and ``qr_steps`` (their thresholds 1), GRU/LSTM by GEMM + ``gate_step`` (threshold
#:   1), and σ₁ by Jacobi (``POWER_MAXIT`` = 0: nothing certified);
#:   ``fused`` — the same fused kernels with their iterates in shared memory, the fused ``sim_gated``.
VARIANTS = {"global": {"SHARED_BYTES": 0, "PRODUCTS_KERNEL_MIN_BATCH": 1, "QR_FUSED_MIN_BATCH": 1,
                       "GATED_GEMM_MIN_BATCH": 1, "POWER_MAXIT": 0},
            "fused": {"PRODUCTS_KERNEL_MIN_BATCH": 1, "QR_FUSED_MIN_BATCH": 1, "GATED_GEMM_MIN_BATCH": 1 << 30}}
#: the D = 64 products through the fused kernel with its global scratch (2·64²·8 bytes > 48 KiB)
VARIANT_LARGE = ("fused:large-gradient_norms-D64",)
#: refusals: the GPU side only (a CTRNN with a scipy method, the training passes, a launch past the limits)
GPU_ONLY = ("refuse-scipy-ctrnn", "refuse-launch")


def float32_case(case: str) -> bool:
    """Whether the case runs in float32 (judged against its float64 twin of the reference)."""
    case = base_case(case)
    return case.startswith("simulate-f32/") or case.startswith("sweep-") and case.endswith("-f32") \
        or case == "api-simulate"


def close(got, want, rtol, where):
    """``battery.close``: integers exactly, non-finite entries in the same places, finite ones to
    |Δ| ≤ rtol·max(1, |want|)."""
    import battery

    battery.close(got, want, rtol, where)


def as_float64_case(case: str) -> str:
    return case.replace("simulate-f32/", "simulate-f64/").replace("-f32", "-f64")


def case_ids() -> list:
    return [f"{op}/{m}" for op in MODEL_OPS for m in _models()] + list(OTHER_CASES) + list(API_CASES) \
        + list(LARGE_CASES) + [f"{v}:{c}" for v in VARIANTS for c in VARIANT_CASES] + list(VARIANT_LARGE) \
        + list(GPU_ONLY)


def base_case(case: str) -> str:
    """The case without its backend variant (``global:…``, ``fused:…``): what the reference runs."""
    return case.split(":", 1)[1] if ":" in case else case


def variant(be, name: str):
    """A copy of backend ``be`` with the thresholds of ``VARIANTS[name]`` (its ``_launch``, a
    recorder where one was set, comes along)."""
    import copy

    v = copy.copy(be)
    for k, val in VARIANTS[name].items():
        setattr(v, k, val)
    return v


def _rank_one_rnn(D: int, seed: int):
    """A tanh RNN whose U = 2.5·u vᵀ + 0.05·G/√D is dominated by one direction, so that every J_t and
    every product ∂h_T/∂h_t has a well separated σ₁: the certified power iteration settles them all
    (a random U's flat spectrum would send each to the Jacobi fallback, which the simulator runs in
    seconds per matrix at D = 64; the ``global`` variant tests it at D = 3)."""
    import dynlab as dl

    rng = np.random.default_rng(seed)
    u, v = rng.standard_normal(D), rng.standard_normal(D)
    U = 2.5 * np.outer(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)) + 0.05 * rng.standard_normal((D, D)) / np.sqrt(D)
    return dl.RNN(U=U, W=rng.standard_normal((D, 1)), b=0.1 * rng.standard_normal(D), init="given")


def _large(be, case: str, rng) -> dict:
    """The public analyses at D = 64/128 (``LARGE_CASES``); ``be`` None: the reference."""
    import dynlab as dl

    backend = "numpy" if be is None else be
    if case.startswith("large-gradient_norms"):
        D = int(case.rsplit("D", 1)[1])
        m = _rank_one_rnn(D, D)
        x = rng.standard_normal((1, 3, 1))
        ds = dl.gradient_norms(m, x, backend=backend, dL_dhT=rng.standard_normal((1, D)))
        return {k: ds[k].values for k in ("log_jac_norm", "step_norm", "dL_dh_norm", "h")}
    if case == "large-lyapunov-D64":
        m = dl.make_model("irnn", 64, 1, seed=5, K=1, eta=0.5, weight_scale=0.5)
        ds = dl.lyapunov(m, rng.standard_normal((1, 2, 1)), backend=backend)
        return {"lyapunov": ds["lyapunov"].values, "lyapunov_running": ds["lyapunov_running"].values}
    if case == "large-simulate-D128":
        out = {}
        for name in ("rnn", "irnn"):
            m = dl.make_model(name, 128, 2, seed=6, weight_scale=0.5)
            out[name] = dl.simulate(m, rng.standard_normal((1, 2, 2)), backend=backend)["h"].values
        return out
    m = dl.make_model("gru", 64, 2, seed=7)
    return {"h": dl.simulate(m, rng.standard_normal((2, 2, 2)), backend=backend)["h"].values}


def _rng(case: str):
    """The case's generator; a float32 case draws what its float64 twin draws."""
    return np.random.default_rng(zlib.crc32(case.replace("-f32", "-f64").encode()))


def run(be, case: str) -> dict:
    """The arrays of one case on backend ``be`` (a variant's case on that variant of ``be``)."""
    import dynlab as dl
    from dynlab.backends.base import stack_tangent

    if ":" in case:
        name, case = case.split(":", 1)
        be = variant(be, name)
    rng = _rng(case)
    if case.startswith("large-"):
        return _large(None if be.name == "numpy" else be, case, rng)
    if "/" in case:
        op, name = case.split("/")
        f = _models()[name]().form()
        n = f.state_size
        x = 0.7 * rng.standard_normal((B, T, DIN))
        h0 = 0.3 * rng.standard_normal((B, n))
        if op.startswith("simulate"):
            kept = h0.copy()
            H, bad, _ = be.simulate(f, x, h0, dtype=np.float32 if op.endswith("f32") else np.float64)
            return {"H": H, "bad": bad, "h0_kept": np.array(np.array_equal(h0, kept))}   # the input is not written
        if op == "jacobians":
            N = 4
            X = rng.standard_normal((N, DIN))
            Hp = 0.5 * rng.standard_normal((N, n))
            eta = f.eta_rows(np.arange(N)) if f.kind == "irnn" and f.eta.shape[0] > 1 else None
            J, Jx, _ = be.jacobians(f, X, Hp, eta=eta, inputs=True)
            J1, _, _ = be.jacobians(f, X, Hp, eta=eta, inputs=False)
            return {"J": J, "Jx": Jx, "J_only": J1}
        from dynlab.backends.reference import ReferenceBackend

        H, _, _ = ReferenceBackend().simulate(f, x, h0)    # one trajectory for both sides
        if op == "gradient_flow":
            out, _ = be.gradient_flow(f, x, h0, H, dL_dhT=rng.standard_normal((B, n)))
            return out
        Q = np.linalg.qr(rng.standard_normal((B, n, 2)))[0]
        logr, _ = be.lyapunov_logr(f, x, h0, H, Q)
        return {"logr": logr, "absQ": np.abs(Q)}          # the frames agree up to column signs
    if case == "simulate-on-device":     # GPUBackend.results_on_device(): the arrays where the kernels ran
        import contextlib

        f = dl.make_model("gru", D, DIN, seed=7).form()
        x = rng.standard_normal((B, T, DIN))
        h0 = 0.3 * rng.standard_normal((B, D))
        with getattr(be, "results_on_device", contextlib.nullcontext)():
            H, bad, _ = be.simulate(f, x, h0)
        if hasattr(be, "results_on_device"):
            from dynlab.backends.gpu.device import runtime, to_host

            assert isinstance(H, runtime().xp.ndarray), type(H)
            H, bad = to_host(H), to_host(bad)
        return {"H": H, "bad": bad}
    if case.startswith("simulate-diverge"):
        m = dl.make_model("rnn", D, DIN, seed=1, weight_scale=1e9, activation="identity")
        x = rng.standard_normal((B, 40, DIN))
        h0 = np.zeros((B, D))
        h0[1] = 1e200                                      # sequence 1 overflows many steps earlier
        H, bad, _ = be.simulate(m.form(), x, h0, stop=case.endswith("stop"))
        with np.errstate(all="ignore"):
            return {"H": np.where(np.isfinite(H), H, np.nan) / np.nanmax(np.abs(H)), "finite": np.isfinite(H),
                    "bad": bad}
    if case.startswith("backward_norms"):
        J = rng.standard_normal((B, 6, D, D))
        acc = be.backward_norms(B, D, dL_dhT=rng.standard_normal((B, D)), step_norms=True)
        late, early = acc.feed(J[:, 3:]), acc.feed(J[:, :3])
        return {k: np.concatenate([early[k], late[k]], axis=1) for k in late}
    if case.startswith("tangent_qr"):
        J = rng.standard_normal((B, 6, D, D))
        qr = be.tangent_qr(B, D, np.linalg.qr(rng.standard_normal((B, D, D)))[0])
        return {"logr": np.concatenate([qr.feed(J[:, :2]), qr.feed(J[:, 2:])], axis=1), "absQ": np.abs(qr.Q)}
    if case.startswith("sweep"):
        kind = "cell" if "cell" in case else "irnn"
        forms, xs = [], []
        for s, K in enumerate((1, 3, 2)):
            if kind == "irnn":
                m = dl.make_model("irnn", D, 1, seed=s, K=K, eta=0.4, g0="previous" if s == 1 else "zero",
                                  sign=-1 if s == 2 else 1, weight_scale=1e80 if "diverge" in case and s == 1 else 0.5,
                                  activation="identity" if "diverge" in case else "tanh")
            else:
                m = dl.make_model("fastrnn" if s == 1 else "rnn", D, 1, seed=s, weight_scale=0.6 + 0.1 * s)
            forms.append(m.form())
            xs.append(rng.standard_normal((6, 1)) * (50.0 if "diverge" in case else 1.0))
        if "diverge" in case:   # a diverged setting has its step and NaN logs; its J_T is not defined
            log1, logT, bad = be.sweep_gradients(forms, xs)
            return {"log1": log1, "logT": np.where(bad == 0, logT, np.nan), "bad": bad}
        tb = stack_tangent(forms, xs)
        if case.endswith("f32"):
            tb = tb.astype(np.float32)
        logs, M, J, bad = be.forward_tangent(tb)
        out = {"logs": logs, "M": M, "J": J, "bad": bad}
        if hasattr(be, "top_singular"):     # σ₁ of M̃_T on the device (float32 stays float32), else LAPACK's
            from dynlab.backends.gpu.device import to_device, to_host

            out["sigma"] = to_host(be.top_singular(to_device(M, M.dtype)))
        else:
            out["sigma"] = np.linalg.svd(M, compute_uv=False)[:, 0]
        if case.endswith("f64"):
            out.update(zip(("log1", "logT", "bad1"), be.sweep_gradients(forms, xs)))
        return out
    if case.startswith("partition"):
        from dynlab.analysis.partition import piece

        layers = [dl.make_model("rnn", D, DIN, seed=1, weight_scale=0.7, activation="relu").form(),
                  dl.make_model("rnn", D, D, seed=2, weight_scale=0.7, activation="leaky-relu").form()]
        x = rng.standard_normal((B, T, DIN))
        out = {}
        for ell, (H, bad, Z) in enumerate(be.partition_trace(layers, x, [np.zeros((B, D)), 0.1 * np.ones((B, D))])):
            out.update({f"H{ell}": H, f"bad{ell}": bad, f"Z{ell}": Z, f"codes{ell}": piece("relu", Z)})
        return out
    if case == "reverse":
        f = dl.make_model("fastrnn", D, DIN, seed=2, weight_scale=0.5, activation="relu", alpha=-1.0, beta=2.0).form()
        C = 2
        S = (rng.random((B, T, D)) > 0.4).astype(float)
        lam = rng.standard_normal((B * C, D))
        out, offset = be.reverse_cotangents(f, S, lam, rng.standard_normal((B, C, T, D)))
        lam2 = rng.standard_normal((B * C, D))
        out2, offset2 = be.reverse_cotangents(f, S, lam2, None)
        return {"out": out, "offset": offset, "lam0": lam, "out_top": out2, "offset_top": offset2, "lam0_top": lam2}
    if case.startswith("implicit"):
        U, N = 3, 4
        A = (3.0 if case.endswith("newton") else 0.4) * rng.standard_normal((U, U))
        C = rng.standard_normal((N, U))
        Z, res, its, conv, code = be.implicit_solve(A, C, "tanh", 0.01, tol=1e-12, max_iter=None, Z0=None, steps=30,
                                                    dt=1.0)
        return {"Z": Z, "residual": res, "iterations": its, "converged": conv, "code": code}
    if case.startswith("api-"):
        return _api(be.name, case, rng)
    if case == "refuse-launch":    # 7 vectors of D = 900 float64 in shared memory: 50,400 bytes > 49,152
        from dynlab.backends.gpu.limits import LaunchError

        m = dl.make_model("ctrnn", 900, 1, seed=0, method="euler")
        try:
            be.jacobians(m.form(), np.zeros((1, 1)), np.zeros((1, 900)))
        except LaunchError as err:
            return {"error": np.array([str(err)])}
        return {"error": np.array(["no error"])}
    if case == "refuse-scipy-ctrnn":
        from dynlab.errors import ParameterError

        m = dl.make_model("ctrnn", D, DIN, seed=6, method="RK45")
        out = {}
        for name, call in (("simulate", lambda: dl.simulate(m, np.zeros((T, DIN)), backend=be.name)),
                           ("gradient_norms", lambda: dl.gradient_norms(m, np.zeros((T, DIN)), backend=be.name)),
                           ("jacobians", lambda: dl.jacobians(m, np.zeros((T, DIN)), backend=be.name))):
            try:
                call()
            except ParameterError as err:
                out[name] = np.array([err.param, str(err)])
            else:
                out[name] = np.array(["", "no error"])
        out["supports_train"] = np.array([be.supports("train_forward", dl.make_model("rnn", D, DIN).form())])
        return out
    raise KeyError(case)


def _api(backend: str, case: str, rng) -> dict:
    """The public functions on ``backend``: their Datasets' numbers."""
    import dynlab as dl

    m = dl.make_model("irnn", D, DIN, seed=3, K=2, eta=0.5, weight_scale=0.5)
    x = 0.7 * rng.standard_normal((B, T, DIN))
    if case == "api-simulate":
        ds = dl.simulate(m, x, backend=backend, dtype=np.float32)
        return {"h": ds["h"].values}
    if case == "api-gradient_norms":
        ds = dl.gradient_norms(dl.make_model("gru", D, DIN, seed=7), x, backend=backend)
        return {k: ds[k].values for k in ("log_jac_norm", "step_norm", "ratio")}
    if case == "api-lyapunov":
        ds = dl.lyapunov(m, x, k=2, backend=backend)
        return {"lyapunov": ds["lyapunov"].values}
    if case in ("api-partition", "api-templates"):
        from dynlab.analysis.partition import partition_codes, templates

        r = dl.make_model("rnn", D, DIN, seed=1, weight_scale=0.7, activation="relu")
        if case == "api-partition":
            return {"codes": partition_codes(r, x, backend=backend)}
        ds = templates(r, x, rng.standard_normal((2, D)), backend=backend)
        return {k: ds[k].values for k in ds.data_vars if np.asarray(ds[k].values).dtype.kind == "f"}
    if case == "api-implicit":
        from dynlab.analysis.implicit import solve_stacked

        A = 0.6 * rng.standard_normal((D, D))
        Z, res, its, conv, code = solve_stacked(A, rng.standard_normal((5, D)), "tanh", backend=backend)
        return {"Z": Z, "converged": conv, "code": code}
    if case == "api-sweep-gradient_norms":
        out = {}
        for model, grid in (("irnn", {"K": [1, 2], "eta": [0.3, 0.6]}), ("rnn", {"weight_scale": [0.3, 0.6]}),
                            ("gru", {"weight_scale": [0.3, 0.6]})):   # batched (irnn, rnn) and per point (gru)
            res = dl.sweep("gradient_norms", grid, fixed={"model": model, "hidden": D, "steps": T}, backend=backend)
            out.update({f"{model}:{k}": res[k].values for k in ("log_jac_norm_1", "log_step_norm_T", "diverged_at")})
        return out
    res = dl.sweep("irnn_equilibrium", {"eta": [0.3, 0.6]}, fixed={"hidden": D, "steps": T, "K": 2}, backend=backend)
    return {k: res[k].values for k in ("residual", "converged", "h_gap")}


def _describe(a):
    """A picklable description of one kernel argument's Numba type: ('array', dtype, ndim) or
    ('scalar', dtype)."""
    if isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__"):
        return ("array", np.dtype(a.dtype).str, int(a.ndim))
    if isinstance(a, (bool, np.bool_)):
        return ("scalar", "bool")
    if isinstance(a, (int, np.integer)) and not isinstance(a, np.floating):
        return ("scalar", "<i8")
    return ("scalar", np.dtype(type(a) if isinstance(a, np.generic) else np.float64).str)


def run_all(be, cases, launches=None, shapes=None) -> dict:
    """{case: arrays or the traceback text}; ``launches`` collects (kernel name, dtype, argument
    types) and ``shapes`` (kernel name, blocks, threads, shared bytes) of every kernel launch when
    given."""
    if launches is not None:
        real = be._launch

        def recording(kernel, blocks, threads, shared, *args):
            name = getattr(kernel, "py_func", kernel).__name__
            floats = [a.dtype for a in args if hasattr(a, "dtype") and np.dtype(a.dtype).kind == "f"]
            launches.add((name, np.dtype(floats[0]).str, tuple(_describe(a) for a in args)))
            out = real(kernel, blocks, threads, shared, *args)      # a launch the check refuses is not kept
            if shapes is not None:
                shapes.add((name, int(blocks), int(threads), int(shared)))
            return out

        be._launch = recording
    out = {}
    with np.errstate(all="ignore"):
        for case in cases:
            try:
                out[case] = run(be, case)
            except Exception:
                out[case] = traceback.format_exc()
    if launches is not None:
        del be._launch
    return out


def main(path: str) -> None:
    """The child: every case on the GPU backend, pickled to ``path`` with the launches."""
    sys.setswitchinterval(1e-4)  # the simulator's barriers hand the GIL round its threads: ≈15× faster
    import numpy

    try:
        from dynlab.backends import get_backend

        be = get_backend("cupy")
    except Exception as exc:
        with open(path, "wb") as fh:
            pickle.dump({"unavailable": f"{type(exc).__name__}: {exc} (NumPy {numpy.__version__})"}, fh)
        return
    launches, shapes = set(), set()
    results = run_all(be, case_ids(), launches, shapes)
    with open(path, "wb") as fh:
        pickle.dump({"results": results, "launches": sorted(launches), "shapes": sorted(shapes), "device": be.device,
                     "simulator": bool(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1")}, fh)


if __name__ == "__main__":
    main(sys.argv[1])

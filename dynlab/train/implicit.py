"""Training implicit networks on static tasks (implicit paper, Algorithm 1), on the CPU.

Every iteration: solve the equilibria of the mini-batch (``dynlab.analysis.implicit``, method
"auto" to 1e-12), take the MSE over the finite targets (NaN targets are free units), turn
δ_Z = ∂L/∂Z into parameter gradients with one batched linear solve (exact implicit gradient) or
with the semi-gradient, and apply an optimiser from ``dynlab.train.optim`` (Adam, lr 0.01, the
paper's settings, by default).

A feed-forward baseline is the same network with its recurrent weights (W; W2 and R for two
layers) frozen at zero (``feedforward=True``): then Z = f(A Z + c) is evaluated exactly by
one pass per layer and the exact implicit gradient is ordinary backpropagation.
"""
from __future__ import annotations

from ..backends import get_backend

import dataclasses

import numpy as np

from .._progress import progress as report_progress
from ..errors import ConvergenceError, ParameterError

RECURRENT = ("W", "W2", "R")


def mse_and_delta(Y, target):
    """MSE over the finite entries of ``target`` and its gradient ∂L/∂Y (zero on free entries)."""
    mask = np.isfinite(target)
    count = int(mask.sum())
    if count == 0:
        raise ParameterError("targets", "has no finite entry: nothing to train on")
    diff = np.where(mask, Y - np.where(mask, target, 0.0), 0.0)
    return float(np.sum(diff * diff) / count), 2.0 * diff / count


def _output_block(model, Z, k):
    """The first k output units of Z (the units targets map onto)."""
    out = model.outputs
    if k > out.stop - out.start:
        raise ParameterError("targets", f"has {k} columns but the network has only {out.stop - out.start} outputs")
    return slice(out.start, out.start + k)


def evaluate(model, X, target, *, tol=1e-12, backend=None):
    """(MSE, outputs Y, max residual) of ``model`` on inputs X against ``target`` (NaN: free);
    the equilibria solved on ``backend`` (None: ``config.DEFAULT_BACKEND``)."""
    from ..analysis.implicit import solve

    Z, res, _, conv, _ = solve(model, X, tol=tol, backend=backend)
    if not conv.all():
        bad = int(np.argmax(~conv))
        raise ConvergenceError(f"implicit equilibrium not found for input {bad} (residual {res[bad]:.2e} > {tol:g})")
    sl = _output_block(model, Z, target.shape[1])
    loss, _ = mse_and_delta(Z[:, sl], target)
    return loss, Z[:, model.outputs], float(res.max())


def train_implicit(task="xor", *, hidden: int = 2, hidden2: int = 0, gradient: str = "exact",
                   feedforward: bool = False, activation: str = "sigmoid", optimiser: str = "adam",
                   lr: float = 0.01, iterations: int = 3000, batch: int | None = None, seed: int | None = 0,
                   weight_scale: float = 0.0, model=None, eval_every: int = 10, tol: float = 1e-12,
                   weights_out=None, command: str | None = None, backend=None, **task_options):
    """Train an implicit network on a static task; returns (trained model, history Dataset).

    Parameters
    ----------
    task : "xor", "oscillator", or a ``dynlab.tasks.StaticTask``
    hidden, hidden2 : layer sizes (hidden2 = 0: one layer whose first units are the outputs)
    gradient : "exact" (implicit function theorem) or "semi" (semi-gradient, paper §3.3)
    feedforward : freeze the recurrent weights W (W2, R) at zero: the feed-forward baseline
    optimiser, lr : an optimiser of ``dynlab.train.optim`` (Adam, 0.01 as in the paper)
    iterations : gradient steps;  batch : mini-batch size (None: the whole training set)
    seed : initialisation (paper: Q, T ~ U[−0.5, 0.5], recurrent weights N(0, s²/n) with
        s = ``weight_scale``, 0 by default as in the paper) and mini-batch order
    model : start from this implicit model instead (its sizes win)
    eval_every : validation loss every this many iterations
    weights_out : path of a ``.npz`` to save the trained weights to (``dynlab.save_model``)
    backend : the backend that solves the equilibria (name or object; None: ``config.DEFAULT_BACKEND``);
        the history's attrs name it
    task_options : passed to the task (``second="and"`` for XOR; ``samples``, ``window`` for the
        oscillator)

    Returns
    -------
    (model, xarray.Dataset) with ``loss`` (iteration): training MSE of the mini-batch before each
    step; ``grad_norm`` (iteration); ``residual`` (iteration): worst equilibrium residual of the
    batch; ``val_loss`` (eval_iteration); ``Y_test``/``target_test`` (sample, output) and
    ``test_loss``; the trained parameters; attrs with the settings.

    Example
    -------
    >>> m, ds = train_implicit("xor", hidden=2, gradient="exact", iterations=3000, seed=0)
    """
    be = get_backend(backend)      # it solves every equilibrium of the run; the attrs name it
    with be:
        import xarray as xr

        from .._dataset import base_attrs, finish, model_attrs, model_variables
        from .._validate import as_int
        from ..analysis.implicit import implicit_vjp, solve
        from ..io import save_model
        from ..models import make_model
        from ..models import Model
        from ..tasks.static import STATIC_TASKS, StaticTask
        from .optim import make_optimiser

        if isinstance(task, StaticTask):
            data = task
            if task_options:
                raise ParameterError("task", "options cannot be given with a prepared StaticTask")
        else:
            if task not in STATIC_TASKS:
                raise ParameterError("task", f"unknown static task {task!r}; choose from {', '.join(STATIC_TASKS)}")
            if task == "oscillator":
                task_options.setdefault("seed", seed)
            data = STATIC_TASKS[task](**task_options)
        if gradient not in ("exact", "semi"):
            raise ParameterError("gradient", f"must be 'exact' or 'semi', got {gradient!r}")
        iterations = as_int(iterations, "iterations", low=1)
        eval_every = as_int(eval_every, "eval_every", low=1)
        if model is None:
            model = make_model("implicit", hidden=hidden, inputs=data.inputs, hidden2=hidden2, seed=seed,
                               weight_scale=0.0 if feedforward else weight_scale, activation=activation)
        elif not (isinstance(model, Model) and model.form().kind == "implicit"):
            raise ParameterError("model", f"must be an implicit model, got {getattr(model, 'name', type(model).__name__)}")
        if model.inputs != data.inputs:
            raise ParameterError("model", f"reads {model.inputs} inputs; the task has {data.inputs}")
        if feedforward:
            model = model.replace(**{k: np.zeros_like(getattr(model, k)) for k in RECURRENT
                                     if getattr(model, k) is not None})
        # free (all-NaN) target columns past the network's outputs are dropped: XOR's free Y2 target
        # for a one-unit network
        n_out = model.outputs.stop - model.outputs.start
        k = data.targets
        while k > n_out and np.isnan(data.Y_train[:, k - 1]).all():
            k -= 1
        if k < data.targets:
            data = dataclasses.replace(data, Y_train=data.Y_train[:, :k], Y_val=data.Y_val[:, :k], Y_test=data.Y_test[:, :k])
        _output_block(model, None, data.targets)
        N = data.X_train.shape[0]
        if batch is not None:
            batch = min(as_int(batch, "batch", low=1), N)
        opt = make_optimiser(optimiser, lr=lr)
        frozen = set(RECURRENT) if feedforward else set()
        rng = np.random.default_rng(seed)
        order, pos = rng.permutation(N), 0

        loss_h = np.empty(iterations)
        gnorm_h = np.empty(iterations)
        res_h = np.empty(iterations)
        val_it, val_h = [], []
        for it in range(iterations):
            if batch is None:
                idx = slice(None)
            else:
                if pos + batch > N:
                    order, pos = rng.permutation(N), 0
                idx = order[pos:pos + batch]
                pos += batch
            X, Yt = data.X_train[idx], data.Y_train[idx]
            Z, res, _, conv, _ = solve(model, X, tol=tol, backend=be)
            if not conv.all():
                bad = int(np.argmax(~conv))
                err = ConvergenceError(f"iteration {it}: implicit equilibrium not found for batch input {bad} "
                                       f"(residual {res[bad]:.2e} > {tol:g})")
                err.iteration, err.model, err.x = it, model, X[bad]  # where it happened, to reproduce it
                raise err
            sl = _output_block(model, Z, data.targets)
            loss, dY = mse_and_delta(Z[:, sl], Yt)
            dZ = np.zeros_like(Z)
            dZ[:, sl] = dY
            grads = implicit_vjp(model, X, Z, dZ, gradient=gradient)
            for k in frozen:
                if k in grads:
                    grads[k] = np.zeros_like(grads[k])
            loss_h[it], res_h[it] = loss, float(res.max())
            report_progress("training (iterations)", it + 1, iterations, note=f"loss {loss:.4g}")
            gnorm_h[it] = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads.values())))
            if it % eval_every == 0:
                val_it.append(it)
                val_h.append(evaluate(model, data.X_val, data.Y_val, tol=tol, backend=be)[0])
            new = opt.step(model.params(), grads)
            model = model.replace(**new)
        val_it.append(iterations)
        val_h.append(evaluate(model, data.X_val, data.Y_val, tol=tol, backend=be)[0])
        test_loss, Y_test, _ = evaluate(model, data.X_test, data.Y_test, tol=tol, backend=be)
        if weights_out is not None:
            save_model(model, weights_out)
        k = data.targets
        ds = xr.Dataset(
            {
                "loss": xr.Variable(("iteration",), loss_h, {"long_name": "training MSE (mini-batch)", "units": "1"}),
                "grad_norm": xr.Variable(("iteration",), gnorm_h, {"long_name": f"‖∂L/∂θ‖ ({gradient} gradient)", "units": "1"}),
                "residual": xr.Variable(("iteration",), res_h, {"long_name": "worst equilibrium residual of the batch", "units": "1"}),
                "val_loss": xr.Variable(("eval_iteration",), np.array(val_h), {"long_name": "validation MSE", "units": "1"}),
                "Y_test": xr.Variable(("sample", "output"), Y_test[:, :k], {"long_name": "network output on the test set", "units": "1"}),
                "target_test": xr.Variable(("sample", "output"), data.Y_test, {"long_name": "test targets (NaN: free)", "units": "1"}),
                "X_test": xr.Variable(("sample", "feature"), data.X_test, {"long_name": "test inputs", "units": "1"}),
                "test_loss": xr.Variable((), test_loss, {"long_name": "test MSE", "units": "1"}),
                **model_variables(model),
            },
            coords={"iteration": np.arange(iterations), "eval_iteration": np.array(val_it)},
            attrs={**model_attrs(model), **base_attrs(be.name, command), "task": data.name, "gradient": gradient,
                   "feedforward": int(bool(feedforward)), "optimiser": optimiser, "lr": lr,
                   "batch": -1 if batch is None else batch, "iterations": iterations, "hidden2": model.hidden2,
                   "tol": tol, **{f"task_{k_}": (v if not isinstance(v, list) else str(v)) for k_, v in data.info.items()}},
        )
        return model, finish(ds, "train_implicit")

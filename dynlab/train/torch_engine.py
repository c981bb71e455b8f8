"""Training through PyTorch: the gradients of ``dl.train_model(..., engine="torch", device=…)``.

The loop is dynlab's own (``dynlab.train.loop``: the same batches, ε, clipping, optimiser,
projections, evaluation records, gradient diagnostics and history Dataset); the engine replaces
only where the loss and its gradients come from, and where the validation outputs are computed:

* ``loss_and_grads`` runs the model's ``dl.to_torch`` module on ``device`` in ``dtype`` and
  differentiates it with autograd — the same quantities as ``dynlab.train.backprop.loss_and_grads``:
  the loss, every parameter's gradient by dynlab's names, ``W_out``, ``b_out``, ∂L/∂h_0 (B, n), and
  in ``info`` the total ∂L/∂h_1 (B, n) and ∂L/∂W_r.  ∂L/∂h_1 is read from the state after the
  first step: the sequence is run as its first step and then the rest from that state, so the
  state s_1 is one tensor whose gradient is the cotangent of s_1 through the steps after the first
  (and the read-out of step 1), as dynlab defines it — for a stack, not the path from layer ℓ − 1
  into layer ℓ within step 1.
* ``evaluate`` computes the read-out outputs of a whole split on the device (no graph, in chunks
  of ``EVAL_CHUNK`` sequences) and scores them with dynlab's ``loss_value``.

The optimiser stays dynlab's (on the host, in float64, on a few arrays of parameters per step):
the parameters are the float64 master copy, written into the module before each step (in
``dtype``) and the gradients read back in float64.  So in float64 on the CPU the two engines
differ only by the rounding of the same arithmetic (tests: ``tests/test_torch_train.py``), and a
checkpoint (``save_checkpoint``) is the same file whichever engine wrote it.  The Jacobian
diagnostics of the history are dynlab's, on the host, from the same master parameters.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..errors import DivergenceError, ParameterError
from . import backprop as bp

#: Sequences per chunk of ``TorchEngine.evaluate`` (outputs only; no graph is kept).
EVAL_CHUNK = 1024
#: The engines ``train_model`` takes.
ENGINES = ("numba", "torch")


def check_engine(engine) -> str:
    key = str(engine).strip().lower()
    if key not in ENGINES:
        raise ParameterError("engine", f"must be one of {', '.join(ENGINES)}, got {engine!r}")
    return key


def make_engine(engine, model, *, device=None, dtype="float64"):
    """The engine ``train_model`` runs on: None for dynlab's own (which takes no ``device`` and runs
    in float64), a ``TorchEngine`` for "torch"."""
    engine = check_engine(engine)
    if engine == "torch":
        return TorchEngine(model, device=device, dtype=dtype)
    if str(dtype) not in ("float64", "torch.float64") or device not in (None, "cpu"):
        raise ParameterError("dtype" if str(dtype) not in ("float64", "torch.float64") else "device",
                             "applies to engine='torch'; dynlab's own engine runs in float64 on the CPU")
    return None


def _import_torch():
    try:
        import torch
    except ImportError:
        raise ImportError('engine="torch" needs PyTorch: pip install "dynlab[torch]" (or pip install torch)') from None
    return torch


def default_device(torch) -> str:
    """'cuda' when PyTorch sees a GPU, else 'cpu'."""
    return "cuda" if torch.cuda.is_available() else "cpu"


class TorchEngine:
    """The torch engine of one run (module docstring): ``model`` fixes the module's shape."""

    name = "torch"

    def __init__(self, model, *, device=None, dtype="float64"):
        torch = _import_torch()
        from ..torch.base import as_device, as_dtype
        from ..torch.convert import Net, to_torch

        self.torch = torch
        self.dtype = as_dtype(dtype)
        self.device = as_device(default_device(torch) if device is None else device)
        try:
            torch.empty(0, device=self.device)
        except (RuntimeError, AssertionError) as exc:
            raise ParameterError("device", f"{self.device} cannot be used here ({str(exc).splitlines()[0]})") from None
        module = to_torch(model, dtype=self.dtype, device=self.device)
        for p in module.parameters():
            p.requires_grad_(True)
        self.net = Net(module, model)

    def config(self) -> dict:
        """The run settings a checkpoint keeps (``resume_training`` runs on them again)."""
        return {"engine": "torch", "device": str(self.device), "torch_dtype": str(self.dtype).replace("torch.", "")}

    def attrs(self) -> dict:
        """What the history says of the engine: its name, the device, the dtype, torch's version."""
        name = str(self.device)
        if self.device.type == "cuda":
            name += f" ({self.torch.cuda.get_device_name(self.device)})"
        return {"engine": "torch", "device": name, "torch_dtype": str(self.dtype).replace("torch.", ""),
                "torch_version": self.torch.__version__}

    @contextlib.contextmanager
    def _threads(self):
        """``config.TORCH_CPU_THREADS`` threads for the call on the CPU (restored after)."""
        from .. import config

        n = config.TORCH_CPU_THREADS
        if self.device.type != "cpu" or n is None:
            yield
            return
        saved = self.torch.get_num_threads()
        self.torch.set_num_threads(int(n))
        try:
            yield
        finally:
            self.torch.set_num_threads(saved)

    def _tensor(self, a, *, grad=False):
        t = self.torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to(self.device, self.dtype)
        return t.requires_grad_(grad)

    def _readout(self, readout, grad):
        return self._tensor(readout["W_out"], grad=grad), self._tensor(readout["b_out"], grad=grad)

    # ------------------------------------------------------------------ one step
    def loss_and_grads(self, model, readout, x, target, *, loss: str, h0=None, workspace=None):
        """As ``dynlab.train.backprop.loss_and_grads`` (module docstring); ``workspace`` is ignored.
        On the CPU it runs on ``config.TORCH_CPU_THREADS`` torch threads."""
        with self._threads():
            return self._loss_and_grads(model, readout, x, target, loss, h0)

    def _loss_and_grads(self, model, readout, x, target, loss, h0):
        loss = bp.check_loss(loss)
        bp._check_trainable(model)
        xa, h0a = bp._as_batch(model, x, h0)
        net = self.net
        net.assign(model)
        net.zero_grad()
        Wo, bo = self._readout(readout, True)
        xt = self._tensor(np.swapaxes(xa, 0, 1))                    # (T, B, d)
        s0 = self._tensor(h0a, grad=True)
        form = net.form()
        rec = net.recurrent(form)
        _, s1 = net.scan(form, xt[:1], s0, 0)
        s1.retain_grad()
        T, osl = xt.shape[0], net.output_slice
        rest = net.scan(form, xt[1:], s1, 1)[0] if T > 1 else None
        if loss.endswith("-seq"):
            H = s1[:, osl].unsqueeze(0) if rest is None else self.torch.cat([s1[:, osl].unsqueeze(0), rest], dim=0)
        else:
            H = s1[:, osl] if rest is None else rest[-1]
        Y = H @ Wo.t() + bo
        Yn = Y.detach().to("cpu", self.torch.float64).numpy()
        L, _, extra = bp.loss_value(loss, Yn, target)          # validates the target, the reported loss
        self._loss(loss, Y, target).backward()
        grads = net.grads()
        grads["W_out"] = Wo.grad.to("cpu", self.torch.float64).numpy()
        grads["b_out"] = bo.grad.to("cpu", self.torch.float64).numpy()
        grads["h0"] = s0.grad.to("cpu", self.torch.float64).numpy()
        info = {"dL_dh1": s1.grad.to("cpu", self.torch.float64).numpy(), "dL_dWr": net.recurrent_grad(rec),
                "outputs": Yn}
        info.update(extra)
        return L, grads, info

    def _loss(self, loss, Y, target):
        """The loss of ``dynlab.train.backprop.loss_value`` on Y ((B, C), or (T, B, C) for -seq) in torch."""
        F = self.torch.nn.functional
        if loss.startswith("mse"):
            t = np.asarray(target, dtype=np.float64)
            t = self._tensor(np.swapaxes(t, 0, 1) if loss == "mse-seq" else t)
            return ((Y - t) ** 2).mean()
        lab = np.asarray(target)
        lab = np.swapaxes(lab, 0, 1) if loss == "ce-seq" else lab
        lab_t = self.torch.from_numpy(np.ascontiguousarray(lab, dtype=np.int64)).to(self.device)
        return F.cross_entropy(Y.reshape(-1, Y.shape[-1]), lab_t.reshape(-1))

    # ------------------------------------------------------------------ evaluation
    def outputs(self, model, readout, x, loss: str):
        """Read-out outputs on x (B, T, d) from h_0 = 0, on the device in chunks: (B, C), or (T, B, C)
        for -seq losses, float64.  A non-finite state raises ``DivergenceError`` naming its step."""
        from ..simulation import check_input

        torch, net = self.torch, self.net
        xa, _ = check_input(x, model.inputs)
        net.assign(model)
        Wo, bo = self._readout(readout, False)
        seq = loss.endswith("-seq")
        outs = []
        with torch.no_grad(), self._threads():
            form = net.form()
            for lo in range(0, xa.shape[0], EVAL_CHUNK):
                xt = self._tensor(np.swapaxes(xa[lo:lo + EVAL_CHUNK], 0, 1))
                s0 = torch.zeros((xt.shape[1], model.state_size), dtype=self.dtype, device=self.device)
                H, _ = net.scan(form, xt, s0, 0)
                ok = torch.isfinite(H).all(dim=2)                      # (T, B)
                if not bool(ok.all()):
                    bad = (~ok).to(torch.int64)
                    step = int(bad.argmax(dim=0)[bad.any(dim=0)].min())
                    b = int(bad[step].argmax())
                    raise DivergenceError(step=step + 1, batch=lo + b, model=model.name)
                Ys = (H if seq else H[-1]) @ Wo.t() + bo
                outs.append(Ys.to("cpu", torch.float64).numpy())
        return np.concatenate(outs, axis=-2)

    def evaluate(self, model, readout, task, split: str = "val") -> dict:
        """Loss (and accuracy) on a whole split from h_0 = 0, as ``dynlab.train.loop.evaluate``."""
        x, y = task.batch(split)
        L, _, extra = bp.loss_value(task.loss, self.outputs(model, readout, x, task.loss), y)
        return {"loss": L, **extra}

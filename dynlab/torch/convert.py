"""dynlab models → PyTorch modules (``dl.to_torch``), and one interface over every module it makes.

What each model becomes:

=========================================  ===============================================================
dynlab                                     PyTorch
=========================================  ===============================================================
rnn, fastrnn, antisymmetric, rin, irnn,    ``dynlab.torch.RNN``, ``FastRNN``, ``AntisymmetricRNN``,
ctrnn (euler, rk4)                         ``RIN``, ``IRNN``, ``CTRNN``
gru, lstm with tanh                        ``torch.nn.GRU``, ``torch.nn.LSTM`` (PyTorch's own, one layer)
gru, lstm with another activation          ``dynlab.torch.GRU``, ``dynlab.torch.LSTM``
stack of rnn, gru or lstm layers, all     ``torch.nn.RNN``, ``GRU``, ``LSTM`` with ``num_layers`` = L
alike with tanh
any other stack                            ``dynlab.torch.Stack`` of dynlab modules
implicit                                   ``dynlab.torch.Implicit``
=========================================  ===============================================================

A ReLU stack is not given to ``torch.nn.RNN(nonlinearity="relu")``: PyTorch's relu has derivative 0
at 0 where dynlab takes 1 (``dynlab.torch._ops``), and an identity-initialised ReLU stack meets exact
zeros (a silent unit read by the next layer), where the two gradients differ.

``Net`` wraps any of them for code that runs a model written once for all (``dl.train_model(...,
engine="torch")``): the parameters by dynlab's names in both directions (``assign``, ``grads``), the
cell over time-major inputs from a state in dynlab's layout (``scan``; an LSTM's [h; c], every
layer's state of a stack), and the gradient of the matrix multiplying the previous state (``dL_dWr``).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..errors import ParameterError
from .base import DynlabModule, as_device, as_dtype
from .cells import CELLS
from .implicit import Implicit
from .stack import Stack

_NATIVE = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}
_NAMES = (("W_ih", "weight_ih"), ("W_hh", "weight_hh"), ("b_ih", "bias_ih"), ("b_hh", "bias_hh"))


def _native_kind(model):
    """'rnn' | 'gru' | 'lstm' when PyTorch's own module computes ``model`` (a one-layer gru/lstm with
    tanh, or a stack of alike rnn / gru / lstm layers with tanh), else None."""
    layers = list(model.layers) if model.name == "stack" else [model]
    kinds = {m.name for m in layers}
    acts = {m.activation for m in layers}
    if len(kinds) != 1 or len(acts) != 1:
        return None
    kind, act = kinds.pop(), acts.pop()
    if act == "tanh" and (kind in ("gru", "lstm") or (kind == "rnn" and model.name == "stack")):
        return kind
    return None


def to_torch(model, *, batch_first: bool = False, dtype=torch.float64, device=None, sigma_eps: float = 0.0):
    """The PyTorch module of a dynlab model (module docstring); ``dl.to_torch`` is this function."""
    from ..models import Model

    if not isinstance(model, Model):
        raise ParameterError("model", f"must be a dynlab model (dl.make_model, dl.load_model), got "
                                      f"{type(model).__name__}")
    dtype, device = as_dtype(dtype), as_device(device)
    kind = _native_kind(model) if model.name in ("gru", "lstm", "stack") else None
    if kind is not None:
        if sigma_eps:
            raise ParameterError("sigma_eps", f"PyTorch's nn.{_NATIVE[kind].__name__} has no random initial "
                                              f"state; add ε ~ N(0, σ²) to its h0 yourself")
        layers = list(model.layers) if model.name == "stack" else [model]
        D, d = layers[0].hidden, layers[0].inputs
        extra = {"nonlinearity": layers[0].activation} if kind == "rnn" else {}
        module = _NATIVE[kind](d, D, num_layers=len(layers), batch_first=batch_first, dtype=dtype, device=device,
                               **extra)
        Net(module, model).assign(model)
        return module
    kwargs = dict(batch_first=batch_first, sigma_eps=sigma_eps, dtype=dtype, device=device)
    if model.name == "stack":
        return Stack.from_model(model, **kwargs)
    if model.name == "implicit":
        if sigma_eps:
            raise ParameterError("sigma_eps", "an implicit network has no initial state")
        return Implicit.from_model(model, dtype=dtype, device=device)
    return CELLS[model.name].from_model(model, **kwargs)


def _numpy(t) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


class Net:
    """A module ``to_torch`` made, seen through dynlab's names and layout (module docstring).

    ``model`` is a dynlab model of the module's shape (the names and sizes are read from it)."""

    def __init__(self, module: nn.Module, model):
        self.module, self.model = module, model
        self.native = not isinstance(module, DynlabModule)
        self.pairs = self._pairs()
        ref = next(iter(module.parameters()))
        self.dtype, self.device = ref.dtype, ref.device

    # ---------------------------------------------------------------- names
    def _pairs(self):
        """[(dynlab name, module parameter)], the module's own names mapped onto dynlab's."""
        m, model = self.module, self.model
        if not self.native:
            if isinstance(m, Stack):
                return [(f"layer{ell}_{k}", p) for ell, layer in enumerate(m.layers, start=1)
                        for k, p in layer.named_parameters()]
            return list(m.named_parameters())
        L = int(m.num_layers)
        out = []
        for k in range(L):
            pre = f"layer{k + 1}_" if model.name == "stack" else ""
            if isinstance(m, nn.RNN):
                out += [(pre + "U", getattr(m, f"weight_hh_l{k}")), (pre + "W", getattr(m, f"weight_ih_l{k}")),
                        (pre + "b", getattr(m, f"bias_ih_l{k}"))]
            else:
                out += [(pre + ours, getattr(m, f"{theirs}_l{k}")) for ours, theirs in _NAMES]
        return out

    def assign(self, model) -> None:
        """Copy ``model``'s parameters into the module (an ``nn.RNN``'s b into ``bias_ih``, ``bias_hh`` = 0)."""
        params = model.params()
        with torch.no_grad():
            for name, p in self.pairs:
                p.copy_(torch.from_numpy(np.array(params[name], dtype=np.float64)).to(p.dtype))
            if self.native and isinstance(self.module, nn.RNN):
                for k in range(int(self.module.num_layers)):
                    getattr(self.module, f"bias_hh_l{k}").zero_()

    def grads(self) -> dict:
        """The parameters' gradients (float64 NumPy) under dynlab's names (zeros where none flowed)."""
        return {name: (np.zeros(tuple(p.shape)) if p.grad is None else _numpy(p.grad)) for name, p in self.pairs}

    def zero_grad(self) -> None:
        for _, p in self.pairs:
            p.grad = None

    # ---------------------------------------------------------------- the map
    @property
    def state_size(self) -> int:
        return int(self.model.state_size)

    @property
    def output_slice(self) -> slice:
        return self.model.output_slice

    def form(self):
        """The update rule's tensors (``DynlabModule.form``); None for PyTorch's own modules."""
        return None if self.native else self.module.form()

    def scan(self, form, x, s0, t0: int = 0):
        """(outputs (T, B, hidden), last state (B, n)) for time-major x (T, B, d) from s0 (B, n)."""
        if not self.native:
            return self.module._run(form, x, s0, t0)
        m = self.module
        L, D, B = int(m.num_layers), int(m.hidden_size), s0.shape[0]
        xin = x.transpose(0, 1) if m.batch_first else x
        if isinstance(m, nn.LSTM):
            hc = s0.reshape(B, L, 2, D)
            out, (h, c) = m(xin, (hc[:, :, 0].transpose(0, 1).contiguous(), hc[:, :, 1].transpose(0, 1).contiguous()))
            last = torch.stack([h, c], dim=2).transpose(0, 1).reshape(B, L * 2 * D)
        else:
            out, h = m(xin, s0.reshape(B, L, D).transpose(0, 1).contiguous())
            last = h.transpose(0, 1).reshape(B, L * D)
        return (out.transpose(0, 1) if m.batch_first else out), last

    def recurrent(self, form):
        """The tensors whose gradient is ∂L/∂W_r, the matrix multiplying h_{t−1} (the cells' R, the
        iRNN's U (P U for eq. 9), W_hh; every layer's for a stack); retained for their gradient."""
        if self.native:
            return [getattr(self.module, f"weight_hh_l{k}") for k in range(int(self.module.num_layers))]
        forms = form if isinstance(form, list) else [form]
        out = []
        for f in forms:
            key = "R" if "R" in f else ("W_hh" if "W_hh" in f else "U")
            if f[key].requires_grad and not f[key].is_leaf:
                f[key].retain_grad()
            out.append(f[key])
        return out

    @staticmethod
    def recurrent_grad(tensors) -> np.ndarray:
        """∂L/∂W_r from ``recurrent``'s tensors after the backward pass (stacked along the rows)."""
        parts = [np.zeros(tuple(t.shape)) if t.grad is None else _numpy(t.grad) for t in tensors]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

"""A stack of dynlab cells as one PyTorch module (``dynlab.models.stack``): layer ℓ > 1 reads layer ℓ − 1's
output at the same step; the state is [s¹; …; sᴸ], the top layer's output last.

``dl.to_torch`` gives a stack of PyTorch's own kinds (rnn, gru or lstm layers with tanh, all alike)
as ``torch.nn.RNN``/``GRU``/``LSTM`` with ``num_layers``; every other stack (other activations, the
one-line cells) becomes this module.  Its layers are dynlab modules
(``layers[ℓ − 1]``), run one after the other over the whole sequence — the same arithmetic, step for
step, as dynlab's step-by-step stack.
"""
from __future__ import annotations

import torch
from torch import nn

from ..errors import ParameterError
from .base import CONFIG, DynlabModule, as_device, as_dtype, config_tensor


class Stack(DynlabModule):
    """L dynlab cells in a stack (module docstring); ``layers`` is an ``nn.ModuleList``.

    ``Stack(layers)`` takes dynlab modules (each reading the previous one's ``hidden_size``);
    ``Stack.from_model(model)`` copies a dynlab ``Stack``.  The state (``hx``, ``h_n``) is the
    concatenation of the layers' states, (B, Σ n_ℓ).
    """

    MODEL = "stack"

    def __init__(self, layers, *, batch_first: bool = False, sigma_eps: float = 0.0):
        nn.Module.__init__(self)
        layers = list(layers)
        if not layers or not all(isinstance(m, DynlabModule) and not isinstance(m, Stack) for m in layers):
            raise ParameterError("layers", "must be a non-empty list of dynlab cell modules (dynlab.torch.RNN, GRU, …)")
        for i in range(1, len(layers)):
            if layers[i].input_size != layers[i - 1].hidden_size:
                raise ParameterError("layers", f"layer {i + 1} takes {layers[i].input_size} inputs but layer {i} "
                                               f"outputs {layers[i - 1].hidden_size}")
        self._finish(nn.ModuleList(layers), batch_first, sigma_eps, {"seed": None, "weight_scale": None})

    @classmethod
    def from_model(cls, model, *, batch_first: bool = False, sigma_eps: float = 0.0, dtype=torch.float64,
                   device=None) -> "Stack":
        from .cells import CELLS

        if model.name != "stack":
            raise ParameterError("model", f"Stack runs a 'stack' model, got {model.name!r}")
        dtype, device = as_dtype(dtype), as_device(device)
        self = cls.__new__(cls)
        nn.Module.__init__(self)
        layers = nn.ModuleList(CELLS[m.name].from_model(m, dtype=dtype, device=device) for m in model.layers)
        self._finish(layers, batch_first, sigma_eps, {"seed": model.seed, "weight_scale": model.weight_scale})
        return self

    def _finish(self, layers, batch_first, sigma_eps, meta):
        from .._validate import as_bool, as_scalar

        self.layers = layers
        self.batch_first = as_bool(batch_first, "batch_first")
        self.sigma_eps = as_scalar(sigma_eps, "sigma_eps", low=0.0)
        self.settings = dict(meta, n_layers=len(layers), cell=",".join(m.MODEL for m in layers))
        self.input_size, self.hidden_size = layers[0].input_size, layers[-1].hidden_size
        sizes = [m.state_size for m in layers]
        self._offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        self._state_size = self._offsets[-1]
        top = layers[-1].output_slice
        self._output = (self._offsets[-2] + top.start, self._offsets[-2] + top.stop)
        ref = next(iter(layers[0].parameters()))
        self.register_buffer(CONFIG, config_tensor({"model": "stack", "settings": meta}, ref.device))

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, n_layers={len(self.layers)}" + \
               (", batch_first=True" if self.batch_first else "") + \
               (f", sigma_eps={self.sigma_eps:g}" if self.sigma_eps else "")

    def form(self):
        """Every layer's ``form()``, in order."""
        return [m.form() for m in self.layers]

    def _run(self, form, x, s0, t0):
        o = self._offsets
        inp, last = x, []
        for ell, (m, f) in enumerate(zip(self.layers, form)):
            inp, sT = m._run(f, inp, s0[:, o[ell]:o[ell + 1]], t0)
            last.append(sT)
        return inp, torch.cat(last, dim=1)

"""The base of dynlab's PyTorch modules: parameters named as dynlab names them, a self-describing
``state_dict``, PyTorch's input layouts, and the random initial state of the MASO paper.

A module holds the parameters of one dynlab model (``model.params()``: ``U``, ``W``, ``b``, ``eta``,
…; scalars as 0-d tensors) as ``nn.Parameter``s under the same names, and its settings (K, g0,
activation, …) as plain attributes and, for files, in a ``uint8`` buffer ``dynlab_model`` holding
them as JSON — so ``safetensors.torch.save_file(module.state_dict(), "net.safetensors")`` writes a
file ``dynlab.load_model`` reads back into the same dynlab model without torch.  Parameters dynlab's
trainer keeps fixed by default (an iRNN's α: ``Model.TRAIN_FROZEN``) have ``requires_grad=False``.

Inputs follow ``torch.nn.RNN``: ``input`` (T, B, d), or (B, T, d) with ``batch_first=True``, or
(T, d) unbatched; the initial state ``hx`` (B, n) or (1, B, n) ((n,) or (1, n) unbatched; zeros when
None), n = ``state_size``.  ``forward`` returns ``(output, h_n)``: the output h at every step, laid out
as the input, and the final state (1, B, n).  In training mode (``module.train()``) a module made
with ``sigma_eps`` > 0 starts from h_0 = hx + ε, ε ~ N(0, σ_ε² I) (the MASO paper's random initial
state, a regulariser); in evaluation mode from hx.
"""
from __future__ import annotations

import json
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from ..errors import ParameterError

#: The buffer holding a module's dynlab settings as JSON (uint8): what makes a state_dict a model file.
CONFIG = "dynlab_model"
_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def as_dtype(dtype, param: str = "dtype") -> torch.dtype:
    """``torch.float32``/``torch.float64`` (or their names, or NumPy's) as a torch dtype; anything
    else a one-line ParameterError."""
    if isinstance(dtype, torch.dtype):
        key = str(dtype).replace("torch.", "")
    elif isinstance(dtype, str):
        key = dtype.strip().lower()
    else:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = repr(dtype)
    if key in _DTYPES:
        return _DTYPES[key]
    raise ParameterError(param, f"must be float32 or float64 (torch.float32, torch.float64), got {dtype!r}")


def as_device(device, param: str = "device") -> torch.device:
    """A ``torch.device`` from a name ('cpu', 'cuda', 'cuda:1', 'mps') or a device; None: 'cpu'."""
    try:
        return torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as exc:
        raise ParameterError(param, f"is not a torch device ({exc})") from None


def settings_of(model) -> dict:
    """The settings a model file stores (``dynlab.io``'s): every setting but the derived ``lowrank``,
    and how the model was drawn (``seed``, ``weight_scale``)."""
    out = {k: v for k, v in model.settings().items() if k != "lowrank"}
    out["seed"] = model.seed
    out["weight_scale"] = model.weight_scale
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in out.items()}


def config_tensor(config: dict, device=None) -> torch.Tensor:
    return torch.tensor(list(json.dumps(config, sort_keys=True).encode("utf-8")), dtype=torch.uint8, device=device)


def config_text(t: torch.Tensor) -> str:
    return bytes(t.detach().cpu().numpy().astype(np.uint8).tobytes()).decode("utf-8", errors="replace")


#: Settings that say how a model's weights were drawn, not what it computes.
_DRAW = ("seed", "weight_scale")


def _rule(text: str) -> dict:
    """A module's settings JSON without ``_DRAW``: what must agree for its state_dict to load."""
    cfg = json.loads(text)
    cfg["settings"] = {k: v for k, v in cfg.get("settings", {}).items() if k not in _DRAW}
    return cfg


def seed_from_torch() -> int:
    """A seed for dynlab's generator drawn from torch's global one, so ``torch.manual_seed`` governs
    a module made without ``seed=``."""
    return int(torch.randint(0, 2 ** 31 - 1, (1,)).item())


class DynlabModule(nn.Module):
    """Common machinery of every dynlab module (module docstring)."""

    #: the dynlab registry name of the model this module runs
    MODEL: ClassVar[str] = ""

    # ------------------------------------------------------------------ construction
    def __init__(self, input_size: int, hidden_size: int, *, batch_first: bool = False, sigma_eps: float = 0.0,
                 seed: int | None = None, weight_scale: float | None = None, dtype=None, device=None, **settings):
        super().__init__()
        from ..models import make_model

        model = make_model(self.MODEL, hidden_size, input_size, seed=seed_from_torch() if seed is None else seed,
                           weight_scale=weight_scale, **settings)
        self._setup(model, batch_first=batch_first, sigma_eps=sigma_eps,
                    dtype=torch.get_default_dtype() if dtype is None else dtype, device=device)

    @classmethod
    def from_model(cls, model, *, batch_first: bool = False, sigma_eps: float = 0.0, dtype=torch.float64,
                   device=None) -> "DynlabModule":
        """The module of an existing dynlab model (its parameters copied; float64 by default, which
        is exact)."""
        self = cls.__new__(cls)
        nn.Module.__init__(self)
        self._setup(model, batch_first=batch_first, sigma_eps=sigma_eps, dtype=dtype, device=device)
        return self

    def _setup(self, model, *, batch_first, sigma_eps, dtype, device):
        from .._validate import as_bool, as_scalar

        if model.name != self.MODEL:
            raise ParameterError("model", f"{type(self).__name__} runs a {self.MODEL!r} model, got {model.name!r}")
        dtype, device = as_dtype(dtype), as_device(device)
        self.batch_first = as_bool(batch_first, "batch_first")
        self.sigma_eps = as_scalar(sigma_eps, "sigma_eps", low=0.0)
        self.settings = settings_of(model)
        for k, v in self.settings.items():
            if not hasattr(type(self), k):
                setattr(self, k, v)
        self.input_size, self.hidden_size = int(model.inputs), int(model.hidden)
        self._state_size = int(model.state_size)
        self._output = (model.output_slice.start, model.output_slice.stop)
        frozen = set(getattr(model, "TRAIN_FROZEN", ()))
        for name, value in model.params().items():
            if value is None:
                continue
            t = torch.tensor(np.asarray(value, dtype=np.float64), dtype=dtype, device=device)
            self.register_parameter(name, nn.Parameter(t, requires_grad=name not in frozen))
        self.register_buffer(CONFIG, config_tensor(self._config(model), device))
        self._check(model)

    def _config(self, model) -> dict:
        return {"model": model.name, "settings": self.settings}

    def _check(self, model) -> None:
        """Refuse (ParameterError) a model this module cannot run; nothing by default."""

    # ----------------------------------------------------------------- sizes
    @property
    def state_size(self) -> int:
        """Size n of the dynamical state (the hidden size; 2·hidden for an LSTM)."""
        return self._state_size

    @property
    def output_slice(self) -> slice:
        """The entries of the state that are the cell's output h."""
        return slice(*self._output)

    def extra_repr(self) -> str:
        shown = {k: v for k, v in self.settings.items() if v is not None and not (k == "leak" and
                                                                                self.settings.get("activation") != "leaky-relu")}
        parts = [f"{self.input_size}, {self.hidden_size}"] + [f"{k}={v!r}" for k, v in shown.items()]
        if self.batch_first:
            parts.append("batch_first=True")
        if self.sigma_eps:
            parts.append(f"sigma_eps={self.sigma_eps:g}")
        return ", ".join(parts)

    # ----------------------------------------------------------------- the map
    def form(self) -> dict:
        """The tensors of the update rule (the effective matrices: R = U + I for a RIN, P U for the
        iRNN's eq. 9, …), built from the parameters by differentiable operations."""
        raise NotImplementedError

    def scan(self, x: torch.Tensor, s0: torch.Tensor, *, form: dict | None = None, t0: int = 0):
        """The cell over time-major inputs x (T, B, d) from the state s0 (B, n): returns the outputs
        (T, B, hidden) and the last state (B, n).  ``form``: the tensors of ``form()`` (computed
        here when None; pass one to run several pieces of a sequence on the same tensors);
        ``t0``: the 0-based time of x's first step (for a per-time η)."""
        return self._run(self.form() if form is None else form, x, s0, t0)

    def _run(self, form, x, s0, t0):
        raise NotImplementedError

    # ----------------------------------------------------------------- PyTorch's layout
    def forward(self, input: torch.Tensor, hx: torch.Tensor | None = None):
        """(output, h_n) as ``torch.nn.RNN`` returns them (module docstring)."""
        if not isinstance(input, torch.Tensor):
            raise ParameterError("input", f"must be a torch.Tensor, got {type(input).__name__}")
        if input.dim() not in (2, 3):
            raise ParameterError("input", f"must have shape (T, d), (T, B, d) or, with batch_first, (B, T, d); "
                                          f"got {tuple(input.shape)}")
        batched = input.dim() == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        T, B, d = x.shape
        if d != self.input_size:
            raise ParameterError("input", f"has {d} features per step but the module takes input_size="
                                          f"{self.input_size}")
        if T < 1:
            raise ParameterError("input", "must have at least one time step")
        ref = self._reference()
        n = self.state_size
        if hx is None:
            s0 = torch.zeros((B, n), dtype=ref.dtype, device=ref.device)
        else:
            want = ((B, n), (1, B, n)) if batched else ((n,), (1, n))
            if tuple(hx.shape) not in want:
                raise ParameterError("hx", f"must have shape {' or '.join(str(w) for w in want)}, got {tuple(hx.shape)}")
            s0 = hx.reshape(B, n)
        if self.training and self.sigma_eps > 0:
            s0 = s0 + self.sigma_eps * torch.randn((B, n), dtype=s0.dtype, device=s0.device)
        out, sT = self.scan(x.to(ref.dtype), s0.to(ref.dtype))
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
        return out, sT.unsqueeze(0) if batched else sT

    def _reference(self) -> torch.Tensor:
        """A parameter whose dtype and device the module computes in."""
        return next(iter(self.parameters()))

    # ----------------------------------------------------------------- state_dict
    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        key = prefix + CONFIG
        if key in state_dict:
            theirs, ours = config_text(state_dict[key]), config_text(getattr(self, CONFIG))
            if _rule(theirs) != _rule(ours):
                error_msgs.append(f"{key}: the state_dict holds a dynlab model {theirs}, this module runs {ours} "
                                  f"(make the module with the same settings, or load the file with "
                                  f"dynlab.load_model)")
                state_dict[key] = getattr(self, CONFIG)
            else:   # the same rule; how the weights were drawn (seed, weight_scale) comes with them
                self._buffers[CONFIG] = torch.empty_like(state_dict[key], device=getattr(self, CONFIG).device)
                if hasattr(self, "settings"):
                    self.settings.update({k: v for k, v in json.loads(theirs)["settings"].items() if k in _DRAW})
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

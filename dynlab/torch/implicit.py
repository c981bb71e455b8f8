"""Implicit networks (Sanokowski 2022) as a PyTorch module, differentiated by the implicit function
theorem.

The output is an equilibrium of the stacked state Z = [Y1; Y2] (``dynlab.models.implicit``)::

    Z = f(A Z + c(X)),   A = [[W, R], [Q2, W2]],   c(X) = [Q X + T; T2]

Forward: the equilibrium is found by dynlab's own solver (``dynlab.analysis.implicit``, method
``auto``: Picard, Newton and their fallbacks, to ``tol`` in float64) on the host — the very point
``dl.implicit_equilibrium`` gives, which matters where several equilibria exist.  Backward: a custom
``torch.autograd.Function`` solves the adjoint linear system on the module's device,

    (I − D A)ᵀ λ = δ_Z,   D = diag f'(A Z + c),   ∂L/∂A = Σ (D λ) Zᵀ,   ∂L/∂c = D λ,

one batched ``torch.linalg.solve`` and no unrolled iterations (paper eqs. 4–6; appendix B for two
layers).  ``gradient="semi"`` is the paper's semi-gradient (§3.3): λ from I − D A_ff, with A_ff the
feed-forward block Q2 alone.  The gradients of W, Q, T (and R, Q2, W2, T2) follow from A and c by
autograd through the blocks.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import ConvergenceError, ParameterError
from .base import DynlabModule


def dphi(act: str, z, leak: float = 0.01):
    """φ'(z) for dynlab's activations, the right derivative at the kinks (``dynlab.activations``)."""
    if act == "tanh":
        t = torch.tanh(z)
        return 1.0 - t * t
    if act == "sigmoid":
        s = torch.sigmoid(z)
        return s * (1.0 - s)
    if act == "identity":
        return torch.ones_like(z)
    one = torch.ones_like(z)
    if act == "relu":
        return torch.where(z >= 0, one, 0.0)
    if act == "leaky-relu":
        return torch.where(z >= 0, one, leak)
    if act == "abs":
        return torch.where(z >= 0, one, -1.0)
    raise ValueError(f"activation: unknown activation {act!r}")


class _Equilibrium(torch.autograd.Function):
    """Z(A, C) with Z = f(Z Aᵀ + C), rows of Z and C the points; backward by the adjoint solve."""

    @staticmethod
    def forward(ctx, A, C, A_back, act, leak, tol, method):
        from ..analysis.implicit import solve_stacked

        A64 = A.detach().to("cpu", torch.float64).numpy()
        C64 = C.detach().to("cpu", torch.float64).numpy()
        Z, res, _, conv, _ = solve_stacked(A64, C64, act, leak, method=method, tol=tol)
        if not np.all(conv):
            bad = int(np.argmax(~conv))
            raise ConvergenceError(f"implicit equilibrium not found for input {bad} "
                                   f"(residual {res[bad]:.2e} > {tol:g}, method {method!r})")
        Zt = torch.as_tensor(Z, dtype=C.dtype, device=C.device)
        ctx.save_for_backward(A, C, A_back, Zt)
        ctx.act, ctx.leak = act, leak
        return Zt

    @staticmethod
    def backward(ctx, dZ):
        A, C, A_back, Z = ctx.saved_tensors
        D = dphi(ctx.act, Z @ A.t() + C, ctx.leak)                        # (N, U)
        eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
        M = eye - D.unsqueeze(-1) * A_back                                 # I − D A (or A_ff), (N, U, U)
        lam = torch.linalg.solve(M.transpose(1, 2), dZ.unsqueeze(-1)).squeeze(-1)
        P = D * lam
        return P.t() @ Z, P, None, None, None, None, None


class Implicit(DynlabModule):
    """An implicit network with one layer (``hidden2=0``) or two (module docstring).

    Parameters ``W``, ``Q``, ``T`` (and ``W2``, ``Q2``, ``R``, ``T2``).  ``forward(X)`` takes inputs
    X (N, m) (or (m,)) and returns the network's output Y (N, n_out): all of Y for one layer, Y2 for
    two; ``equilibrium(X)`` returns the whole stacked Z.  Options: ``gradient`` ("exact" | "semi"),
    ``tol`` (the residual ‖Z − f(A Z + c)‖∞ the solve reaches, 1e-12), ``method`` (dynlab's solver
    method, "auto").  A point whose equilibrium is not found raises ``ConvergenceError``.

    Example
    -------
    >>> net = dynlab.torch.Implicit(2, 2, activation="sigmoid", weight_scale=0.0, seed=0)
    >>> Y = net(torch.tensor([[0., 1.], [1., 1.]], dtype=torch.float64))
    """

    MODEL = "implicit"

    def __init__(self, input_size, hidden_size, *, gradient: str = "exact", tol: float = 1e-12,
                 method: str = "auto", **kwargs):
        super().__init__(input_size, hidden_size, **kwargs)
        self._options(gradient, tol, method)

    @classmethod
    def from_model(cls, model, *, gradient: str = "exact", tol: float = 1e-12, method: str = "auto", **kwargs):
        self = super().from_model(model, **kwargs)
        self._options(gradient, tol, method)
        return self

    def _options(self, gradient, tol, method):
        from .._validate import as_scalar
        from ..analysis.implicit import METHODS

        if gradient not in ("exact", "semi"):
            raise ParameterError("gradient", f"must be 'exact' or 'semi', got {gradient!r}")
        if method not in METHODS:
            raise ParameterError("method", f"must be one of {', '.join(METHODS)}, got {method!r}")
        self.gradient, self.method = gradient, method
        self.tol = as_scalar(tol, "tol", low=0.0, low_open=True)

    def _setup(self, model, **kwargs):
        super()._setup(model, **kwargs)
        self.hidden2 = int(model.hidden2)
        self._output = (model.outputs.start, model.outputs.stop)
        self._state_size = int(model.units)

    def form(self):
        """A, its feed-forward part A_ff (the semi-gradient's), and the input weights."""
        if self.hidden2 == 0:
            return {"A": self.W, "A_ff": torch.zeros_like(self.W)}
        top = torch.cat([self.W, self.R], dim=1)
        A = torch.cat([top, torch.cat([self.Q2, self.W2], dim=1)], dim=0)
        zero = torch.zeros_like
        A_ff = torch.cat([torch.cat([zero(self.W), zero(self.R)], dim=1), torch.cat([self.Q2, zero(self.W2)], dim=1)])
        return {"A": A, "A_ff": A_ff}

    def drive(self, X):
        """c(X) = [Q X + T; T2] for row inputs X (N, m)."""
        c = X @ self.Q.t() + self.T
        if self.hidden2 == 0:
            return c
        return torch.cat([c, self.T2.expand(c.shape[0], self.hidden2)], dim=1)

    def equilibrium(self, X):
        """The stacked equilibrium Z (N, n + n2) for inputs X (N, m) or (m,), differentiable."""
        if not isinstance(X, torch.Tensor):
            raise ParameterError("X", f"must be a torch.Tensor, got {type(X).__name__}")
        single = X.dim() == 1
        Xb = X.unsqueeze(0) if single else X
        if Xb.dim() != 2 or Xb.shape[1] != self.input_size:
            raise ParameterError("X", f"must have shape ({self.input_size},) or (N, {self.input_size}), "
                                      f"got {tuple(X.shape)}")
        f = self.form()
        back = f["A"] if self.gradient == "exact" else f["A_ff"]
        Z = _Equilibrium.apply(f["A"], self.drive(Xb.to(self.W.dtype)), back, self.activation, float(self.leak),
                               self.tol, self.method)
        return Z[0] if single else Z

    def forward(self, X):
        return self.equilibrium(X)[..., self._output[0]:self._output[1]]

    def extra_repr(self) -> str:
        return super().extra_repr() + f", hidden2={self.hidden2}, gradient={self.gradient!r}"

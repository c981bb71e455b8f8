"""dynlab's recurrent cells as PyTorch modules: the one-line cells, the iRNN, the fixed-step CTRNN, and
GRU/LSTM cells with any activation.

Each class is made two ways: ``IRNN(input_size, hidden_size, K=5, eta=0.01, …)`` draws a new cell
with dynlab's documented initialisation (``dynlab.make_model``; ``seed=None`` draws the seed from
torch's generator, so ``torch.manual_seed`` governs it), and ``IRNN.from_model(model)`` (what
``dl.to_torch`` calls) copies an existing dynlab model.  The keyword settings are dynlab's, named as
the papers name them:

==================  ==========================================================================
``RNN``             ``activation``, ``identity_init`` (Le et al.'s IRNN: U = s·I, b = 0, ReLU)
``FastRNN``         ``alpha``, ``beta`` (raw gates: h = σ(β) h + σ(α) φ(…); α₀ = −3, β₀ = 3)
``AntisymmetricRNN`` ``eps``, ``gamma`` (h = h + ε φ((M − Mᵀ − γI) h + …))
``RIN``             (ReLU, U small: V = U + I starts near the identity)
``IRNN``            ``K``, ``eta`` (η₀: a number, (K,) or a (T, K) table — one η per time step and
                    inner step, learned), ``alpha``, ``g0`` ("zero" | "previous"), ``sign`` (±1),
                    ``rank`` (U = I + V H), ``P`` ("I": eq. 5, "U": eq. 9, the paper's own form),
                    ``activation``; SiRNN is K = 1
``CTRNN``           ``tau``, ``alpha``, ``dt``, ``substeps``, ``method`` ("euler" | "rk4")
``GRU``, ``LSTM``   PyTorch's equations and gate order with φ = ``activation`` (``dl.to_torch``
                    gives ``torch.nn.GRU``/``LSTM`` themselves for tanh)
==================  ==========================================================================

and every module takes ``batch_first``, ``sigma_eps`` (the random initial state, in training mode),
``seed``, ``weight_scale``, ``dtype`` and ``device``.  Forward: ``dynlab.torch.base``.
"""
from __future__ import annotations

import torch

from ..errors import ParameterError
from . import _ops
from .base import DynlabModule


def _stack(outs):
    return torch.stack(outs, dim=0)


class _Gated(DynlabModule):
    """h_t = a h_{t−1} + γ φ(R h_{t−1} + W x_t + b) (``dynlab.models.cells``)."""

    def _run(self, form, x, s0, t0):
        c = torch.matmul(x, form["W"].t()) + form["b"]
        RT, a, gain = form["R"].t(), form["a"], form["gain"]
        act, leak = self.activation, float(self.leak)
        h, outs = s0, []
        for t in range(x.shape[0]):
            h = _ops.cell_step(h, c[t], RT, a, gain, act, leak)
            outs.append(h)
        return _stack(outs), h


class RNN(_Gated):
    """Elman RNN h_t = φ(U h_{t−1} + W x_t + b); ``identity_init=True``: Le et al.'s IRNN (ReLU,
    U = weight_scale · I, b = 0).  Parameters ``U``, ``W``, ``b``."""

    MODEL = "rnn"

    def form(self):
        return {"R": self.U, "W": self.W, "b": self.b, "a": 0.0, "gain": 1.0}


class FastRNN(_Gated):
    """FastRNN h_t = σ(β) h_{t−1} + σ(α) φ(U h_{t−1} + W x_t + b).  Parameters ``U``, ``W``, ``b``,
    ``alpha``, ``beta`` (the raw gates)."""

    MODEL = "fastrnn"

    def form(self):
        return {"R": self.U, "W": self.W, "b": self.b, "a": torch.sigmoid(self.beta), "gain": torch.sigmoid(self.alpha)}


class AntisymmetricRNN(_Gated):
    """AntisymmetricRNN h_t = h_{t−1} + ε φ((M − Mᵀ − γI) h_{t−1} + W x_t + b).  Parameters ``M``,
    ``W``, ``b``, ``eps``, ``gamma``."""

    MODEL = "antisymmetric"

    def form(self):
        eye = torch.eye(self.hidden_size, dtype=self.M.dtype, device=self.M.device)
        return {"R": self.M - self.M.t() - self.gamma * eye, "W": self.W, "b": self.b, "a": 1.0, "gain": self.eps}


class RIN(_Gated):
    """Recurrent Identity Network h_t = φ(W x_t + (U + I) h_{t−1} + b).  Parameters ``U``, ``W``, ``b``."""

    MODEL = "rin"

    def form(self):
        eye = torch.eye(self.hidden_size, dtype=self.U.dtype, device=self.U.device)
        return {"R": self.U + eye, "W": self.W, "b": self.b, "a": 0.0, "gain": 1.0}


class IRNN(DynlabModule):
    """The incremental RNN (iRNN paper eq. 5; ``P="U"``: eq. 9), K Euler steps per time step:

        g_k = g_{k−1} + η_m^k (φ(U(g_{k−1} ± h_{m−1}) + W x_m + b) − α(g_{k−1} ± h_{m−1})),  h_m = g_K.

    Parameters: ``U`` (dense) or ``V``, ``H`` (U = I + V H, with ``rank=r``), ``W``, ``b``, ``eta``
    (scalar, (K,) or (T, K)), ``alpha`` (``requires_grad=False``: the paper trains η, not α).  With
    ``P="U"`` they are the paper's U (= P), W, b, and the step uses P U, P W, P b (``form()``).
    η must stay > 0 (``dl.from_torch`` refuses η ≤ 0): an optimiser stepping η itself can cross 0
    from a small η₀ — clamp it after each step, or optimise ln η as dynlab's trainer does.

    Example
    -------
    >>> cell = dynlab.torch.IRNN(1, 128, K=5, P="U", rank=16, g0="previous", activation="relu",
    ...                          eta=torch.full((784, 5), 1e-2), batch_first=True)
    >>> out, h_n = cell(x)        # x (B, 784, 1)
    """

    MODEL = "irnn"

    def form(self):
        if "V" in self._parameters:
            eye = torch.eye(self.hidden_size, dtype=self.V.dtype, device=self.V.device)
            Up = eye + self.V @ self.H
        else:
            Up = self.U
        U, W, b = Up, self.W, self.b
        if self.P == "U":   # eq. 9: the step uses P U, P W, P b with P = U
            U, W, b = Up @ Up, Up @ W, Up @ b
        eta = self.eta
        if eta.dim() < 2:    # one η for every k (0-d) or one per k ((K,)), shared over time: one row
            eta = eta.reshape(1, -1).expand(1, int(self.K))
        return {"U": U, "W": W, "b": b, "eta": eta, "alpha": self.alpha}

    def _run(self, form, x, s0, t0):
        T = x.shape[0]
        eta = form["eta"]
        if eta.shape[0] != 1 and eta.shape[0] < t0 + T:
            raise ParameterError("input", f"has {t0 + T} steps but η has {eta.shape[0]} rows (one per time step)")
        c = torch.matmul(x, form["W"].t()) + form["b"]
        UT, alpha = form["U"].t(), form["alpha"]
        shared = eta[0].unbind(0) if eta.shape[0] == 1 else None
        K, g0prev, sign = int(self.K), self.g0 == "previous", float(self.sign)
        act, leak = self.activation, float(self.leak)
        h, outs = s0, []
        for t in range(T):
            ek = shared if shared is not None else eta[t0 + t].unbind(0)
            h = _ops.irnn_step(h, c[t], UT, ek, alpha, K, g0prev, sign, act, leak)
            outs.append(h)
        return _stack(outs), h

    def forward(self, input, hx=None):
        rows = self.eta.shape[0] if self.eta.dim() == 2 else 1
        steps = input.shape[1 if (self.batch_first and input.dim() == 3) else 0]
        if rows not in (1, steps):
            raise ParameterError("input", f"has {steps} steps but η has {rows} rows (one per time step)")
        return super().forward(input, hx)


class CTRNN(DynlabModule):
    """Continuous-time RNN τ ġ = −α g + φ(U g + W x(t) + b), x held over each interval Δt = ``dt``,
    integrated by ``substeps`` fixed steps of Euler or RK4 per interval.  Parameters ``U``, ``W``,
    ``b``, ``tau``, ``alpha``.  (scipy's adaptive methods are dynlab's reference only.)"""

    MODEL = "ctrnn"

    def _check(self, model):
        if model.method not in ("euler", "rk4"):
            raise ParameterError("method", f"is {model.method!r}, scipy's adaptive solver; a torch module integrates "
                                           f"with fixed steps: method='euler' or 'rk4' (with substeps=…)")

    def form(self):
        return {"U": self.U, "W": self.W, "b": self.b, "tau": self.tau, "alpha": self.alpha}

    def _run(self, form, x, s0, t0):
        c = torch.matmul(x, form["W"].t()) + form["b"]
        UT, tau, alpha = form["U"].t(), form["tau"], form["alpha"]
        dt, n, method = float(self.dt), int(self.substeps), self.method
        act, leak = self.activation, float(self.leak)
        g, outs = s0, []
        for t in range(x.shape[0]):
            g = _ops.ctrnn_step(g, c[t], UT, tau, alpha, dt, n, method, act, leak)
            outs.append(g)
        return _stack(outs), g


class _TorchGated(DynlabModule):
    def form(self):
        return {"W_ih": self.W_ih, "W_hh": self.W_hh, "b_ih": self.b_ih, "b_hh": self.b_hh}


class GRU(_TorchGated):
    """PyTorch's GRU cell (gates r, z, n) with φ = ``activation`` for the candidate n.  Parameters
    ``W_ih``, ``W_hh``, ``b_ih``, ``b_hh`` (gate blocks stacked as PyTorch stacks them)."""

    MODEL = "gru"

    def _run(self, form, x, s0, t0):
        gi = torch.matmul(x, form["W_ih"].t()) + form["b_ih"]
        W_hhT, b_hh = form["W_hh"].t(), form["b_hh"]
        act, leak = self.activation, float(self.leak)
        h, outs = s0, []
        for t in range(x.shape[0]):
            h = _ops.gru_step(h, gi[t], W_hhT, b_hh, act, leak)
            outs.append(h)
        return _stack(outs), h


class LSTM(_TorchGated):
    """PyTorch's LSTM cell (gates i, f, g, o) with φ = ``activation``, on the state s = [h; c]
    (``state_size`` = 2·hidden; the output is h).  Parameters ``W_ih``, ``W_hh``, ``b_ih``, ``b_hh``."""

    MODEL = "lstm"

    def _run(self, form, x, s0, t0):
        D = self.hidden_size
        gi = torch.matmul(x, form["W_ih"].t()) + form["b_ih"]
        W_hhT, b_hh = form["W_hh"].t(), form["b_hh"]
        act, leak = self.activation, float(self.leak)
        h, c = s0[:, :D], s0[:, D:]
        outs = []
        for t in range(x.shape[0]):
            h, c = _ops.lstm_step(h, c, gi[t], W_hhT, b_hh, act, leak)
            outs.append(h)
        return _stack(outs), torch.cat([h, c], dim=1)


#: dynlab registry name → module class (``dl.to_torch`` reads this).
CELLS = {cls.MODEL: cls for cls in (RNN, FastRNN, AntisymmetricRNN, RIN, IRNN, CTRNN, GRU, LSTM)}

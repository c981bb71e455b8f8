"""The incremental RNN (Kag, Zhang & Saligrama 2020, eq. 5); SiRNN is K = 1.

At time m, starting from g_0 (0 or h_{m-1}), K Euler steps

    g_k = g_{k-1} + η_m^k ( φ(U(g_{k-1} ± h_{m-1}) + W x_m + b) − α(g_{k-1} ± h_{m-1}) ),

and h_m = g_K.  With the + sign, s = g + h_{m-1} is driven toward the equilibrium
α s = φ(U s + W x_m + b) (the paper's equilibrium manifold), so ∂h_m/∂h_{m-1} → −I; the
− sign variant (eq. 3's ±) gives +I.  U is dense, or the paper's §3.2 low-rank form
U = I + V H with V (D×r), H (r×D).

The paper's experimental form (§3.2, eq. 9, "for all our experiments"; ``P="U"``):

    φ(P[U(h_m + h_{m-1}) + W x_m + b]) − (h_m + h_{m-1}) = 0,   P = U = I + V H,

solved by the same K Euler steps.  One step of it is the step of eq. 5 with the effective
matrices U' = P U, W' = P W, b' = P b (α = 1 in the paper), so the model hands every kernel
and analysis U', W', b' under the names ``U``, ``W``, ``b`` — no kernel knows the form —
while its *parameters* (``params()``: what is saved, loaded, put in Datasets and trained) are
the paper's V, H (or a dense U = P), W, b, η and α.  Training reaches them from the gradients
of U', W', b' by the chain rule written out in ``IRNN.pullback``.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .._validate import as_int, as_matrix, as_scalar
from ..errors import ParameterError
from .base import Model
from .forms import IRNNForm


@dataclasses.dataclass(frozen=True, eq=False, repr=False)  # repr: Model.__repr__
class IRNN(Model):
    """Incremental RNN with K inner Euler steps.

    Parameters
    ----------
    U : (D, D) array or None
        Dense recurrent matrix; None when ``V`` and ``H`` give the low-rank U = I + V H.
    W : (D, d) array;  b : (D,) array
    eta : float, (K,) or (T, K) array
        Step sizes η_m^k > 0: one for all, one per inner step k, or one per (time, k).
    alpha : float ≥ 0
    K : int ≥ 1
    g0 : "zero" or "previous"
    sign : +1 or −1, the ± in front of h_{m-1}.
    P : "I" (eq. 5, the default) or "U" (eq. 9: P = U applied to the whole argument of φ).

    Notes
    -----
    With ``P="U"`` the arrays given as ``U`` (dense) or ``V``, ``H`` (U = I + V H) and ``W``,
    ``b`` are the paper's parameters; after construction the fields ``U``, ``W``, ``b`` hold the
    effective U' = U U, W' = U W, b' = U b that the kernels use, the paper's own arrays are
    ``params()`` (and ``P_matrix``, ``W_param``, ``b_param``), and ``replace`` rebuilds from
    the paper's arrays.  Decision: one setting of the existing model rather than a new model,
    so that every analysis, kernel and backend carries eq. 9 without code of its own.
    """

    U: np.ndarray | None
    W: np.ndarray
    b: np.ndarray
    eta: float | np.ndarray = 1.0
    alpha: float = 1.0
    K: int = 1
    g0: str = "zero"
    sign: int = 1
    activation: str = "tanh"
    leak: float = 0.01
    V: np.ndarray | None = None
    H: np.ndarray | None = None
    seed: int | None = None
    weight_scale: float | None = None
    P: str = "I"

    name: ClassVar[str] = "irnn"
    FORM: ClassVar[type] = IRNNForm
    SETTINGS: ClassVar[tuple[str, ...]] = ("activation", "leak", "K", "g0", "sign", "lowrank", "P")
    #: the forms: P = I (eq. 5) or P = U (eq. 9)
    FORMS: ClassVar[tuple[str, ...]] = ("I", "U")
    DEFAULT_WEIGHT_SCALE: ClassVar[float] = 0.5
    #: α is fixed unless asked (the paper trains η, not α); η > 0 is trained in log space, so Adam's
    #: steps are relative (≈ lr·η), where steps of ≈ lr in η itself collapse a small η (0.1) in a
    #: few iterations; α ≥ 0.
    TRAIN_FROZEN: ClassVar[tuple[str, ...]] = ("alpha",)
    TRAIN_LOG: ClassVar[tuple[str, ...]] = ("eta",)
    TRAIN_LOWER: ClassVar[dict] = {"alpha": 0.0}
    DESCRIPTION: ClassVar[str] = ("incremental RNN: K Euler steps g_k = g_{k-1} + η(φ(U(g_{k-1}+h) + W x + b) − α(g_{k-1}+h)), "
                                  "h_m = g_K (SiRNN: K=1)")

    def __post_init__(self):
        D, _ = self._check_common()
        self._set("K", as_int(self.K, "K", low=1))
        from .._resources import check_memory, nbytes

        check_memory(nbytes(self.K), "K", f"the η table (K = {self.K} float64)")
        self._set("alpha", as_scalar(self.alpha, "alpha", low=0.0))
        if self.g0 not in ("zero", "previous"):
            raise ParameterError("g0", f"must be 'zero' or 'previous', got {self.g0!r}")
        sign = {"+": 1, "-": -1, "+1": 1, "-1": -1}.get(self.sign, self.sign) if isinstance(self.sign, str) else self.sign
        if sign not in (1, -1):
            raise ParameterError("sign", f"must be +1 or -1, got {self.sign!r}")
        self._set("sign", int(sign))
        if not isinstance(self.P, str) or str(self.P) not in self.FORMS:
            raise ParameterError("P", f"must be 'I' (eq. 5) or 'U' (eq. 9: P = U), got {self.P!r}")
        self._set("P", str(self.P))
        if self.V is not None or self.H is not None:
            if self.U is not None:
                raise ParameterError("U", "give either a dense U or the low-rank factors V and H, not both")
            if self.V is None or self.H is None:
                raise ParameterError("V" if self.V is None else "H", "the low-rank form U = I + V H needs both V and H")
            V = as_matrix(self.V, "V", (D, None))
            H = as_matrix(self.H, "H", (V.shape[1], D))
            self._set("V", V)
            self._set("H", H)
            U = np.eye(D) + V @ H
        else:
            if self.U is None:
                raise ParameterError("U", "is required (or the low-rank factors V and H)")
            U = as_matrix(self.U, "U", (D, D))
        # the paper's arrays (``params``); the fields U, W, b become what the kernels use
        U.setflags(write=False)
        self._set("_paper", (U, self.W, self.b))
        if self.P == "U":   # eq. 9: U' = P U, W' = P W, b' = P b with P = U
            with np.errstate(over="ignore", invalid="ignore"):
                eff = (U @ U, U @ self.W, U @ self.b)
            if not all(np.all(np.isfinite(a)) for a in eff):
                raise ParameterError("U", "the eq. 9 products P U, P W, P b overflow (P = U too large)")
            for a in eff:
                a.setflags(write=False)
            U, W, b = eff
            self._set("W", W)
            self._set("b", b)
        self._set("U", U)
        eta = as_matrix(self.eta, "eta")
        if eta.ndim > 2:
            raise ParameterError("eta", f"must be a scalar, a (K,) or a (T, K) array, got shape {eta.shape}")
        if eta.ndim >= 1 and eta.shape[-1] != self.K:
            raise ParameterError("eta", f"last axis must have length K={self.K}, got shape {eta.shape}")
        if eta.size == 0 or np.any(eta <= 0):
            raise ParameterError("eta", "every step size must be > 0")
        self._set("eta", float(eta) if eta.ndim == 0 else eta)

    @property
    def lowrank(self) -> int:
        """Rank r of the low-rank form, 0 for a dense U."""
        return 0 if self.V is None else int(self.V.shape[1])

    @property
    def P_matrix(self) -> np.ndarray:
        """The P of eq. 9: the paper's U (= I + V H, or dense) for ``P="U"``; the identity for ``P="I"``."""
        return self._paper[0] if self.P == "U" else np.eye(self.hidden)

    @property
    def W_param(self) -> np.ndarray:
        """The input weights as a parameter (before P; ``W`` itself for ``P="I"``)."""
        return self._paper[1]

    @property
    def b_param(self) -> np.ndarray:
        """The bias as a parameter (before P; ``b`` itself for ``P="I"``)."""
        return self._paper[2]

    @property
    def PARAM_LABELS(self) -> dict:
        """Dataset labels of the eq. 9 parameters, which are not the matrices the step uses."""
        if self.P != "U":
            return {}
        return {"U": ("the paper's U = P of eq. 9 (the step uses P U)", "1"),
                "V": ("low-rank factor V (P = U = I + V H)", "1"),
                "H": ("low-rank factor H (P = U = I + V H)", "1"),
                "W": ("input weights W of eq. 9 (the step uses P W)", "1"),
                "b": ("bias b of eq. 9 (the step uses P b)", "1")}

    def params(self):
        U, W, b = self._paper
        out = {"V": self.V, "H": self.H} if self.V is not None else {"U": U}
        out.update(W=W, b=b, eta=self.eta, alpha=self.alpha)
        return out

    def replace(self, **changes) -> "IRNN":
        """A copy with some fields changed, rebuilt from the parameters (the low-rank factors, and
        for ``P="U"`` the paper's U, W, b — never the derived matrices), validated again."""
        U, W, b = self._paper
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(U=None if self.V is not None else U, W=W, b=b)
        if "U" in changes and changes["U"] is not None:
            fields.update(V=None, H=None)
        if ("V" in changes or "H" in changes) and changes.get("V") is not None:
            fields["U"] = None
        fields.update(changes)
        return type(self)(**fields)

    def eta_table(self, steps: int) -> np.ndarray:
        """η as a (rows, K) float64 array, rows = 1 (shared over time) or ``steps``."""
        eta = np.asarray(self.eta, dtype=np.float64)
        if eta.ndim == 0:
            return np.full((1, self.K), float(eta))
        if eta.ndim == 1:
            return eta.reshape(1, self.K).copy()
        if eta.shape[0] not in (1, steps):
            raise ParameterError("eta", f"has {eta.shape[0]} rows (time steps) but the input has {steps} steps")
        return np.ascontiguousarray(eta)

    def check_steps(self, steps: int) -> None:
        self.eta_table(steps)  # a per-time η must have one row per step

    def for_steps(self, lo: int, hi: int) -> "IRNN":
        eta = np.asarray(self.eta)
        return self.replace(eta=eta[lo:hi]) if eta.ndim == 2 and eta.shape[0] > 1 else self

    def pullback(self, g):
        """The parameters' gradients from the form's (the cotangents of the U, W, b the step uses).

        ᾱ as it is; η̄ from the form's (rows, K) table to η's own shape (a scalar: the sum; (K,):
        the sum over time).  Eq. 5 (``P="I"``): Ū, W̄, b̄ as they are.  Eq. 9 (``P="U"``), with the
        paper's U_p (= I + V H or dense), W_p, b_p and the step's U = U_p U_p, W = U_p W_p,
        b = U_p b_p:

            Ū_p = Ū U_pᵀ + U_pᵀ Ū + W̄ W_pᵀ + b̄ b_pᵀ,   W̄_p = U_pᵀ W̄,   b̄_p = U_pᵀ b̄.

        Then for the low-rank U = I + V H (either equation): V̄ = Ū Hᵀ, H̄ = Vᵀ Ū.  (Checked against
        central differences in tests/test_backprop.py.)
        """
        e0 = np.asarray(self.eta)
        etab = g["eta"]
        eta = float(etab.sum()) if e0.ndim == 0 else (etab.sum(axis=0) if e0.ndim == 1 else
                                                      (etab.sum(axis=0, keepdims=True) if e0.shape[0] == 1 else etab))
        Ubar, Wbar, bbar = g["U"], g["W"], g["b"]
        if self.P == "U":
            Up, Wp, bp = self._paper
            Ubar = Ubar @ Up.T + Up.T @ Ubar + Wbar @ Wp.T + np.outer(bbar, bp)
            Wbar, bbar = Up.T @ Wbar, Up.T @ bbar
        out = {"W": Wbar, "b": bbar, "eta": eta, "alpha": g["alpha"]}
        if self.V is not None:
            out.update(V=Ubar @ self.H.T, H=self.V.T @ Ubar)
        else:
            out["U"] = Ubar
        return {k: out[k] for k in self.params()}

    def with_params(self, params):
        own = {k: v for k, v in params.items() if k in self.params()}
        if self.V is not None:
            own.setdefault("V", self.V)
            own.setdefault("H", self.H)
            own["U"] = None
        if "eta" in own:
            e = np.asarray(own["eta"], dtype=np.float64)
            own["eta"] = float(e) if e.ndim == 0 else e
        if "alpha" in own:
            own["alpha"] = float(np.asarray(own["alpha"]))
        return self.replace(**own)

    def _make_form(self):
        eta = np.asarray(self.eta, dtype=np.float64)
        return IRNNForm(self.activation, float(self.leak), U=self.U, W=self.W, b=self.b,
                        eta=self.eta_table(eta.shape[0] if eta.ndim == 2 else 1), alpha=float(self.alpha),
                        K=int(self.K), g0prev=self.g0 == "previous", sign=float(self.sign))

    def equilibrium_residual(self, s, x):
        """α s − φ(U s + W x + b), the residual of the equilibrium equation (batched rows): minus
        the right-hand side of the reference's cells (``dynlab.backends.reference.cells.rhs``)."""
        from ..backends.reference.cells import rhs
        s = np.asarray(s, dtype=np.float64)
        x = np.asarray(x, dtype=np.float64)
        return -rhs(s, s @ self.U.T + x @ self.W.T + self.b, self.alpha, self.activation, self.leak)

    @classmethod
    def random(cls, hidden, inputs, *, seed=None, weight_scale=None, K=1, eta=1.0, alpha=1.0,
               g0="zero", sign=1, rank=None, activation=None, leak=0.01, P="I"):
        """Random iRNN: U ~ N(0, weight_scale²/D) (default 0.5, so ‖U‖ < α = 1 typically, as
        the paper's small-variance initialisation intends); with ``rank=r`` the low-rank form
        U = I + V H, V ~ N(0, weight_scale²/D), H ~ N(0, 1/r).  W ~ N(0, 1/d), b ~ N(0, 0.1²).
        η = 1 and α = 1 make the inner recursion the Picard iteration s ← φ(U s + W x + b).
        ``P="U"``: the same draws as the paper's parameters of eq. 9 (P = U; the class docstring).
        """
        rng, D, d, seed, ws = cls._rng_and_sizes(hidden, inputs, seed, weight_scale, cls.DEFAULT_WEIGHT_SCALE)
        U, W, b = cls._gaussian_weights(rng, D, d, ws)
        V = H = None
        if rank is not None:
            r = as_int(rank, "rank", low=1)
            V = rng.standard_normal((D, r)) * (ws / np.sqrt(D))
            H = rng.standard_normal((r, D)) / np.sqrt(r)
            U = None
        return cls(U, W, b, eta=eta, alpha=alpha, K=K, g0=g0, sign=sign,
                   activation=activation or cls.DEFAULT_ACTIVATION, leak=leak, V=V, H=H,
                   seed=seed, weight_scale=ws, P=P)

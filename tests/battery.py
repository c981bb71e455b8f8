"""The common battery, declared once (as scikit-learn's ``check_estimator`` is): every registered
model's cases, every analysis, every backend, and the (model, analysis) pairs the library refuses.

``tests/test_battery.py`` runs every case × every analysis × every available backend against the
NumPy reference, and the reference against something independent.  The per-file case tables take
their cases from here (``conftest.MODEL_CASES``, ``test_jacobians``, ``test_backprop``,
``test_backprop_gated``, ``test_backends``, ``gpu_cases``, ``test_gated``, ``test_gated_kernels``,
``test_io``, ``test_torch_modules``): a variant added here is simulated, differentiated, trained and
compared on every backend by all of them.

* ``CASES`` — name → ``Case``: a registered model with its settings and seed, buildable at any size
  (``Case.build(hidden, inputs, steps, activation=…, **override)``; a per-(time, k) η table is drawn
  for the ``steps`` asked).  Weights are small (weight scale 0.5; 0.1 for the RIN, whose recurrence
  is U + I; PyTorch's initialisation for the gated cells) so that even the unbounded activations
  keep the states of a T ≈ 40 run of moderate size.  Every registered model has at least one case
  (``missing_models()``; the battery fails on a model registered without one).
* ``ANALYSES`` — every analysis the battery runs; ``BACKEND_ANALYSES`` those that take a backend.
* ``refusal(case, analysis, backend)`` — the one place that says which pairs are not supported:
  the ``ParameterError`` (its parameter and words) the library must raise for them.
"""
from __future__ import annotations

import dataclasses
import types

import numpy as np

#: The battery's own sizes (tiny: the checks run once per case × analysis × backend).
D, DIN, T, B = 3, 2, 5, 2

ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity", "leaky-relu", "abs")
#: Activations with partition codes (max-affine splines; identity has one piece).
MAX_AFFINE = ("relu", "leaky-relu", "abs", "identity")


@dataclasses.dataclass(frozen=True)
class PerStep:
    """A per-(time, k) η table: uniform(lo, hi) of shape (steps, K), from a generator seeded ``seed``."""

    K: int
    seed: int
    lo: float = 0.2
    hi: float = 1.0

    def table(self, steps: int) -> np.ndarray:
        return np.random.default_rng(self.seed).uniform(self.lo, self.hi, (steps, self.K))


@dataclasses.dataclass(frozen=True)
class Case:
    """One model variant.  ``family`` says which analyses apply (``refusal``): cell, irnn, ctrnn,
    ctrnn-scipy, implicit, gated, stack-cell (a stack of one-line cells), stack-gated."""

    name: str
    model: str
    family: str
    seed: int
    settings: types.MappingProxyType
    #: (hidden, inputs, seed, activation) → Model, for a model make_model cannot describe
    maker: object = None

    @property
    def activation(self) -> str:
        """The case's own activation (the model's default unless its settings name one)."""
        if "activation" in self.settings:
            return self.settings["activation"]
        import dynlab as dl

        return dl.model_options(self.model)["activation"] if not self.settings.get("identity_init") else "relu"

    def build(self, hidden: int = D, inputs: int = DIN, steps: int = T, *, activation=None, seed=None,
              **override):
        """The model at these sizes; ``activation``, ``seed`` and any setting may be overridden."""
        import dynlab as dl

        seed = self.seed if seed is None else seed
        if self.maker is not None:
            return self.maker(hidden, inputs, seed, activation)
        kw = dict(self.settings)
        kw.update(override)
        if activation is not None:
            kw["activation"] = activation
        if isinstance(kw.get("eta"), PerStep):
            kw["eta"] = kw["eta"].table(steps)
        return dl.make_model(self.model, hidden, inputs, seed=seed, **kw)


def _case(name, model, family, seed, maker=None, **settings):
    return name, Case(name, model, family, seed, types.MappingProxyType(settings), maker)


def _mixed_depth(hidden, inputs, seed, activation):
    """A three-layer LSTM stack whose middle layer has another activation (φ' per layer)."""
    import dynlab as dl

    act = activation or "tanh"
    return dl.Stack((dl.make_model("lstm", hidden, inputs, seed=seed, activation=act),
                     dl.make_model("lstm", hidden, hidden, seed=seed + 1, activation="identity"),
                     dl.make_model("lstm", hidden, hidden, seed=seed + 2, activation=act)))


def _irnn(name, seed=3, **kw):
    kw.setdefault("eta", 0.5)
    kw.setdefault("weight_scale", 0.5)
    return _case(name, "irnn", "irnn", seed, **kw)


CASES: dict[str, Case] = dict([
    # the one-line cells h = a h + γ φ(R h + W x + b); their activations spread over the max-affine ones
    _case("rnn", "rnn", "cell", 1, weight_scale=0.5, activation="tanh"),
    _case("rnn-identity-init", "rnn", "cell", 1, weight_scale=0.5, identity_init=True),      # ReLU, U = s·I
    _case("fastrnn", "fastrnn", "cell", 2, weight_scale=0.5, activation="sigmoid", alpha=-1.0, beta=2.0),
    _case("antisymmetric", "antisymmetric", "cell", 4, weight_scale=0.5, activation="leaky-relu", eps=0.2,
          gamma=0.05),
    _case("rin", "rin", "cell", 5, weight_scale=0.1),                                          # ReLU
    # the iRNN: K, g_0, the sign, η per k and per (time, k), low rank, the paper's eq. 9 (P = U)
    *[_irnn(f"irnn-K{K}-{g0}-{'plus' if s > 0 else 'minus'}", K=K, g0=g0, sign=s)
      for K in (1, 5) for g0 in ("zero", "previous") for s in (1, -1)],
    _irnn("irnn-K1-identity", seed=9, K=1, eta=0.7, activation="identity"),
    _irnn("irnn-K5-etaK", K=5, eta=np.linspace(0.3, 0.9, 5), sign=-1),
    _irnn("irnn-K5-etaTK", K=5, eta=PerStep(5, 11), g0="previous"),
    _irnn("irnn-K2-etaTK-relu", K=2, eta=PerStep(2, 7), activation="relu"),
    _irnn("irnn-K5-lowrank1", K=5, rank=1),
    _irnn("irnn-K3-eq9-lowrank2", K=3, rank=2, P="U", g0="previous", weight_scale=0.3, alpha=1.5),
    _irnn("irnn-K3-eq9-dense", K=3, P="U", eta=PerStep(3, 8, 0.2, 0.9), weight_scale=0.3, alpha=0.8),
    # the CTRNN: fixed steps, and a scipy adaptive solver (tight tolerances: its error enters every
    # derivative taken of it; Radau, whose implicit steps cost ~1 s a case here, is in test_jacobians)
    _case("ctrnn-euler", "ctrnn", "ctrnn", 6, weight_scale=0.5, method="euler", substeps=3, dt=0.3),
    _case("ctrnn-rk4", "ctrnn", "ctrnn", 6, weight_scale=0.5, method="rk4", substeps=3, dt=0.3),
    _case("ctrnn-DOP853", "ctrnn", "ctrnn-scipy", 6, weight_scale=0.5, method="DOP853", dt=0.3, rtol=1e-12,
          atol=1e-14),
    # implicit networks (static equilibria), one layer and two
    _case("implicit", "implicit", "implicit", 12),
    _case("implicit-2layer", "implicit", "implicit", 13, hidden2=2),
    # gated cells and stacks (PyTorch's initialisation)
    _case("gru", "gru", "gated", 7),
    _case("lstm", "lstm", "gated", 8),
    _case("stack-gru", "stack", "stack-gated", 10, cell="gru", layers=2),
    _case("stack-lstm", "stack", "stack-gated", 11, cell="lstm", layers=2),
    _case("stack-lstm-mixed", "stack", "stack-gated", 12, maker=_mixed_depth),
    _case("stack-rnn", "stack", "stack-cell", 5, cell="rnn", layers=2, weight_scale=0.5, activation="abs"),
])


def build(name: str, hidden: int = D, inputs: int = DIN, steps: int = T, **kw):
    """``CASES[name].build(...)``."""
    return CASES[name].build(hidden, inputs, steps, **kw)


def names(*families: str, exclude=()) -> list:
    """The case names of the given families (all when none is given), in table order."""
    return [n for n, c in CASES.items() if (not families or c.family in families) and n not in exclude]


def builders(selection, hidden: int = D, inputs: int = DIN, steps: int = T, **kw) -> dict:
    """name → a function of no argument building that case at these sizes (a file's CASES)."""
    return {n: (lambda n=n: build(n, hidden, inputs, steps, **kw)) for n in selection}


def close(got, want, rtol, where):
    """``got`` equals ``want``: integers exactly, non-finite entries in the same places, finite ones
    to |Δ| ≤ rtol·max(1, |want|) (complex: the modulus of the difference)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (where, got.shape, want.shape)
    if want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    g, w = got.astype(np.complex128), want.astype(np.complex128)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{where}: NaN positions")
    inf = np.isinf(w)
    np.testing.assert_array_equal(np.isinf(g), inf, err_msg=f"{where}: infinite positions")
    np.testing.assert_array_equal(g[inf], w[inf], err_msg=f"{where}: infinite values")
    ok = np.isfinite(w)
    err = np.abs(g[ok] - w[ok]) / np.maximum(1.0, np.abs(w[ok]))
    assert err.size == 0 or err.max() <= rtol, f"{where}: relative error {err.max():.3g} > {rtol:g}"


def missing_models() -> list:
    """Registered models without a case here (the battery must cover every one)."""
    import dynlab as dl

    return sorted(set(dl.MODELS) - {c.model for c in CASES.values()})


# ------------------------------------------------------------------------------ the analyses
#: Every analysis of the battery (``tests/test_battery.py`` has one check for each).
ANALYSES = ("simulate", "jacobians", "gradient_norms", "lyapunov", "spectrum", "equilibrium", "fixed_points",
            "continuation", "convergence", "partition", "bptt", "implicit_equilibrium", "to_torch")
#: Those that take ``backend=``: run on every available backend against the reference (numpy).
BACKEND_ANALYSES = ("simulate", "jacobians", "gradient_norms", "lyapunov", "spectrum", "equilibrium", "fixed_points",
                    "partition", "bptt", "implicit_equilibrium")
#: The public function each analysis calls (``dynlab.<name>``).
PUBLIC = {"simulate": "simulate", "jacobians": "jacobians", "gradient_norms": "gradient_norms",
          "lyapunov": "lyapunov", "spectrum": "spectrum", "equilibrium": "equilibrium",
          "fixed_points": "fixed_points", "continuation": "continuation", "convergence": "convergence",
          "partition": "partition", "bptt": "loss_and_grads", "implicit_equilibrium": "implicit_equilibrium",
          "to_torch": "to_torch"}
#: The public functions of ``dynlab.analysis`` the battery does not run, and where each is tested
#: (a new analysis fails ``test_battery`` until it is run here or named here).
ELSEWHERE = {
    "irnn_equilibrium": "test_equilibria.py (equilibrium's iRNN solve, which the battery runs)",
    "equilibrium_curve": "test_equilibria.py, test_figures.py (irnn-fig2-phase)",
    "jacobian_at": "the battery's jacobians check and test_jacobians.py (the point-wise form of jacobians)",
    "bifurcation_curve": "test_bifurcations.py (two-parameter curves from continuation's special points)",
    "implicit_vjp": "test_implicit.py, test_torch_modules.py",
    "implicit_jacobian": "test_implicit.py",
    "implicit_neuron": "test_implicit.py",
    "partition_codes": "the battery's partition check (partition's codes array alone)",
    "affine_form": "the battery's partition check, test_partition.py",
    "templates": "test_partition.py, gpu_cases api-templates",
    "initial_state_jacobian": "test_partition.py",
    "loss_gradient_h0": "test_partition.py",
    "random_h0_regulariser": "test_partition.py",
    "random_h0_monte_carlo": "test_partition.py",
    "hamming_distances": "test_partition.py",
    "count_regions": "test_partition.py",
    "embed_codes": "test_partition_data.py",
    "knn_accuracy": "test_partition_data.py",
}

_TRAJECTORY = ("simulate", "jacobians", "gradient_norms", "lyapunov")
_EQUILIBRIA = ("spectrum", "equilibrium", "fixed_points", "continuation")
_ALL_BUT = object()

#: The pairs the library refuses: (analyses, families refused, parameter named, words of the message).
#: A row whose families start with ``_ALL_BUT`` refuses every family but those listed.  Beside the
#: rows, one rule on the activation (``refusal``): a partition needs a max-affine spline.
REFUSED = (
    (_TRAJECTORY, ("implicit",), "model", "not a sequence model"),
    (_EQUILIBRIA, ("implicit",), "model", "equilibria are not defined"),
    (("bptt",), ("ctrnn", "ctrnn-scipy"), "model", "discrete models"),
    (("bptt",), ("implicit",), "model", "no backward pass"),
    (("convergence",), (_ALL_BUT, "irnn"), "model", "needs an irnn model"),
    (("partition",), (_ALL_BUT, "cell", "stack-cell"), "model", "MASO partition analysis takes"),
    (("implicit_equilibrium",), (_ALL_BUT, "implicit"), "model", "needs an implicit model"),
    (("to_torch",), ("ctrnn-scipy",), "method", "scipy's adaptive solver"),
)
#: Cases with no equilibrium at a generic input, where equilibrium, fixed_points and continuation
#: must say so (not converged, no root, ConvergenceError) rather than return a point.
NO_EQUILIBRIUM = {
    "rin": "h = relu((I + U) h + W x + b) with U small grows along every unit whose drive is positive",
}
#: Pairs refused on one backend only: the GPU runs neither scipy's solvers nor the training passes
#: (``GPUBackend.supports``).
BACKEND_REFUSED = {
    "cupy": ((tuple(a for a in BACKEND_ANALYSES if a not in ("equilibrium", "fixed_points")), ("ctrnn-scipy",),
              "backend", "has no"),      # a CTRNN's equilibria are its closed-form map's: host NumPy
             (("bptt",), (_ALL_BUT,), "backend", "has no train_forward")),
}


def _applies(families, family) -> bool:
    if families and families[0] is _ALL_BUT:
        return family not in families[1:]
    return family in families


def refusal(case: Case, analysis: str, backend: str = "numpy", activation=None):
    """(parameter, words) of the ParameterError the library raises for this case × analysis on
    ``backend``, or None where the pair runs."""
    act = activation or case.activation
    for analyses, families, param, words in REFUSED + BACKEND_REFUSED.get(backend, ()):
        if analysis in analyses and _applies(families, case.family):
            return param, words
    if analysis == "partition" and act not in MAX_AFFINE:
        return "activation", "not a max-affine spline"
    return None

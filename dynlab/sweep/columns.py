"""The ``gradient_norms`` target on a whole region at once: settings as arrays, no model per setting.

A region's points come as a ``grid.SettingsTable`` (one column per setting).  Most of a sweep's
settings do not change a model's arrays, only numbers the kernels read beside them, so the
region is built in three layers:

1. **Structure groups**: the points are split by every swept setting but ``weight_scale`` and
   ``IRNN_SCALARS``.  A group's model and input are built once (``model_and_input``: the public
   path, with its validation and random draws), and remembered for the rest of the sweep
   (``Memo``: later regions reuse them).
2. **Scalars** (iRNN): K, η, α, g₀ and σ change only the scalars of the form, and become rows of
   the ``TangentBatch`` in one vectorised step — η in columns 0..K−1 and 0 past K (an inner step
   with η = 0 leaves g and its tangent alone), K, α, g₀prev = (g₀ == "previous"), σ = ±1; a
   setting that is not swept takes the group model's value.  The map is checked at the group's
   first point against that model's own form; where it fails, the group is built point by point.
   The one-line cells have no such scalars (their settings all shape R or a, γ): a cell group is
   split by them too.
3. **Weight scale**: a random model's recurrent matrix is its Gaussian draw Z times s/√D
   (``Model._gaussian_weights``), and nothing else depends on s.  Built once at s = √D, the
   model's matrix *is* Z (s/√D = 1 exactly), so the matrix at any s is Z·(s/√D) — the very
   product the model computes, bit for bit.  Whether a model family works so is not assumed: it is
   checked once per structure (the model built at one swept s ≠ √D must equal Z·(s/√D) in its
   recurrent matrix and equal the unit model in every other array and scalar of its form, and
   its input); where it fails (a low-rank U = I + V H, eq. 9's U², the RIN's U + I, the
   AntisymmetricRNN's −γI, an identity initialisation) the weight scale is built like any other
   setting, one model per value.

The groups of one shape (kind, D, d, T, activation) form one ``TangentBatch`` — each distinct
matrix and input once, the settings' scalars per row — and one call of the backend's
``sweep_gradients``; the summaries are computed as arrays.  Forms the backend has no forward
tangents for (CTRNN, GRU, LSTM, stacks) go point by point through the public analysis.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..backends.base import TangentBatch
from ..errors import ParameterError

#: iRNN settings that change only the scalars of its form (not U, W, b or the input).
IRNN_SCALARS = ("K", "eta", "alpha", "g0", "sign")
#: The setting that scales the Gaussian recurrent draw (layer 3 of the module docstring).
SCALE = "weight_scale"


class Memo:
    """Models and inputs built during one sweep by ``build`` (run settings → (model, x):
    ``targets.model_and_input``), by their run settings, up to ``max_bytes`` of arrays (the oldest
    are let go first)."""

    def __init__(self, build, max_bytes: float = 256e6):
        self.build = build
        self.max_bytes = float(max_bytes)
        self.items = {}
        self.nbytes = 0
        self.checks = {}          # structure key → whether the weight scale may be applied to Z

    def get(self, settings: dict):
        """(form, x (T, d)) of the model and input of ``settings`` (run settings)."""
        key = tuple(sorted(settings.items()))
        hit = self.items.get(key)
        if hit is None:
            model, x = self.build(settings)
            form = model.form()
            x = np.asarray(x, dtype=np.float64).reshape(x.shape[0], -1)
            size = x.nbytes + sum(getattr(form, f.name).nbytes for f in dataclasses.fields(form)
                                  if isinstance(getattr(form, f.name), np.ndarray))
            while self.items and self.nbytes + size > self.max_bytes:
                self.nbytes -= self.items.pop(next(iter(self.items)))[2]
            hit = (form, x, size)
            self.items[key] = hit
            self.nbytes += size
        return hit[0], hit[1]


def _recurrent(form):
    return form.R if form.kind == "cell" else form.U


def _scales(unit, form, c: float, x_unit, x) -> bool:
    """Whether ``form`` is ``unit`` with its recurrent matrix times c and all else equal (and the
    same input)."""
    if type(form) is not type(unit) or not np.array_equal(x, x_unit):
        return False
    for f in dataclasses.fields(form):
        a, b = getattr(form, f.name), getattr(unit, f.name)
        if f.name == form.recurrent:
            if not np.array_equal(a, b * c):
                return False
        elif isinstance(a, np.ndarray):
            if not np.array_equal(a, b):
                return False
        elif a != b:
            return False
    return True


def _irnn_scalars(table, rows, form, built: dict, checks: dict):
    """(eta (n, K_max), K, alpha, g0prev, sign) of the points ``rows`` of an iRNN group whose
    model was built from the settings ``built`` into ``form``; None where the map of the module
    docstring does not give that form from those settings (checked once per ``built``, the
    answer kept in ``checks``)."""
    if form.eta.shape[0] != 1 or np.any(form.eta[0] != form.eta[0, 0]):
        return None
    own = {"K": form.K, "eta": form.eta[0, 0], "alpha": form.alpha, "g0": "previous" if form.g0prev else "zero",
           "sign": form.sign}

    def scalars(values):
        K = np.asarray(values["K"]).astype(np.int64)
        eta_v = np.asarray(values["eta"]).astype(np.float64)
        eta = np.where(np.arange(int(K.max()))[None, :] < K[:, None], eta_v[:, None], 0.0)
        return (eta, K, np.asarray(values["alpha"]).astype(np.float64), np.asarray(values["g0"]) == "previous",
                np.asarray(values["sign"]).astype(np.float64))

    try:
        key = ("scalars",) + tuple(sorted(built.items()))
        if key not in checks:
            eta, K, alpha, g0prev, sign = scalars({k: [built.get(k, own[k])] for k in own})
            checks[key] = bool(K[0] == form.K and np.array_equal(eta[0], form.eta[0]) and alpha[0] == form.alpha
                               and bool(g0prev[0]) == form.g0prev and sign[0] == form.sign)
        if not checks[key]:
            return None
        n = rows.shape[0]
        return scalars({k: table.column(k)[rows] if table.varies(k) else np.full(n, built.get(k, own[k]))
                        for k in own})
    except (TypeError, ValueError):
        return None


def _one_scalars(form):
    """The scalars of one form as 1-row arrays (eta, K, alpha, g0prev, sign)."""
    if form.kind == "irnn":
        return (form.eta[:1].copy(), np.array([form.K], dtype=np.int64), np.array([form.alpha]),
                np.array([form.g0prev]), np.array([form.sign]))
    return np.array([[form.gain]]), np.ones(1, dtype=np.int64), np.array([form.a]), np.zeros(1, dtype=np.bool_), \
        np.ones(1)


class _Region:
    """The batches of one region (``gradient_norms_columns``)."""

    def __init__(self, table, be, backend, target, memo):
        self.table, self.be, self.backend, self.target, self.memo = table, be, backend, target, memo
        #: the first swept value of each iRNN scalar: the structure models are built there
        self.canonical = {}
        for axis in table.spec.axes:
            for name, values in zip(axis.names, axis.values):
                if name in IRNN_SCALARS:
                    self.canonical[name] = values[0]
        n = table.n
        self.steps = np.zeros(n, dtype=np.int64)
        self.single = {}                # point → its result dict (the public analysis, point by point)
        self.batches = {}               # (kind, D, d, T, act, leak) → parts

    def run(self, i: int) -> dict:
        """The run settings of point i (the target's own options left out)."""
        return {k: v for k, v in self.table.point(int(i)).items() if k not in self.target.options}

    def by_point(self, rows):
        """Points the batches cannot take: the target's own per-point function."""
        for i in rows:
            point = self.table.point(int(i))
            opts = {k: v for k, v in point.items() if k in self.target.options}
            self.single[int(i)] = self.target.compute(self.run(i), opts, self.backend)

    def group(self, rows):
        """A structure group: the points ``rows`` share every setting but the weight scale and the
        iRNN's scalars; its model is built at the scalars' first swept values (one model per
        structure for the whole sweep)."""
        first = self.run(rows[0])
        canon = {**first, **self.canonical}
        form, x = self.memo.get(canon)
        self.steps[rows] = x.shape[0]
        if form.kind not in ("irnn", "cell") or not self.be.supports("sweep_gradients", form) or x.shape[0] < 2:
            self.by_point(rows)
            return
        if form.kind == "irnn":
            scalars = _irnn_scalars(self.table, rows, form, canon, self.memo.checks)
            if scalars is None:
                for i in rows:
                    f, xi = self.memo.get(self.run(i))
                    self.part(np.array([i]), f, xi, _one_scalars(f))
                return
            self.scaled(rows, canon, form, x, scalars)
            return
        names = [k for k in IRNN_SCALARS if self.table.varies(k)]
        for sub in (self.table.groups(names, rows) if names else [rows]):
            settings = self.run(sub[0])
            f, xs = self.memo.get(settings)
            self.scaled(sub, settings, f, xs, tuple(np.repeat(a, sub.shape[0], axis=0) for a in _one_scalars(f)))

    def scaled(self, rows, first, form, x, scalars):
        """Points that differ at most in the weight scale (layer 3 of the module docstring)."""
        ws = self.table.column(SCALE)[rows].astype(np.float64) if self.table.varies(SCALE) else None
        if ws is None or np.all(ws == ws[0]):
            self.part(rows, form, x, scalars)
            return
        D = form.hidden
        root = float(np.sqrt(D))
        key = tuple(sorted((k, v) for k, v in first.items() if k != SCALE))
        values, inverse = np.unique(ws, return_inverse=True)
        if key not in self.memo.checks:
            try:
                unit, x_unit = self.memo.get({**first, SCALE: root})
                probe = values[values != root][0]
                f, xp = self.memo.get({**first, SCALE: float(probe)})
                self.memo.checks[key] = _scales(unit, f, probe / np.sqrt(D), x_unit, xp)
            except ParameterError:      # no model at s = √D: each value its own
                self.memo.checks[key] = False
        if self.memo.checks[key]:
            unit, _ = self.memo.get({**first, SCALE: root})
            rec = _recurrent(unit)[None] * (values / np.sqrt(D))[:, None, None]
            self.part(rows, unit, x, scalars, rec, inverse)
            return
        for j, v in enumerate(values):
            at = inverse == j
            f, xv = self.memo.get({**first, SCALE: float(v)})
            self.part(rows[at], f, xv, tuple(a[at] for a in scalars))

    def part(self, rows, form, x, scalars, rec=None, inverse=None):
        """Add points to their shape's batch: recurrent matrices ``rec`` (m, D, D) with
        ``inverse`` (n,) saying whose each point is (default: the form's own, for all)."""
        T = x.shape[0]
        if rec is None:
            rec, inverse = _recurrent(form)[None], np.zeros(rows.shape[0], dtype=np.int64)
        key = (form.kind, form.hidden, form.inputs, T, form.act_id, form.leak)
        self.batches.setdefault(key, []).append((rows, rec, inverse, form, x, scalars))

    def compute(self):
        """Run every batch; (log1, logT, diverged) of every point, NaN/0 for the single points."""
        n = self.table.n
        log1, logT = np.full(n, np.nan), np.full(n, np.nan)
        bad = np.zeros(n, dtype=np.int64)
        with self.be:            # (nested in the driver's: its BLAS limit is already held)
            for key, parts in self.batches.items():
                rows, batch = _batch(parts, key[0] == "cell")
                log1[rows], logT[rows], bad[rows] = self.be.sweep_gradients(batch)
        return log1, logT, bad


def _batch(parts, gated):
    """One ``TangentBatch`` of parts (rows, rec (m, D, D), inverse (n,), form, x, scalars)."""
    rows = np.concatenate([p[0] for p in parts])
    S = rows.shape[0]
    G = sum(p[1].shape[0] for p in parts)
    f0, x0 = parts[0][3], parts[0][4]
    D, d, T = f0.hidden, f0.inputs, x0.shape[0]
    R, W, b, X = np.empty((G, D, D)), np.empty((G, D, d)), np.empty((G, D)), np.empty((G, T, d))
    Kmax = max(p[5][0].shape[1] for p in parts)
    eta = np.zeros((S, Kmax))
    group = np.empty(S, dtype=np.int64)
    lo = g = 0
    for r, rec, inverse, f, x, sc in parts:
        m, k = rec.shape[0], r.shape[0]
        R[g:g + m], W[g:g + m], b[g:g + m], X[g:g + m] = rec, f.W, f.b, x
        group[lo:lo + k] = inverse + g
        eta[lo:lo + k, :sc[0].shape[1]] = sc[0]
        lo += k
        g += m
    K, alpha, g0prev, sign = (np.concatenate([p[5][i] for p in parts]) for i in (1, 2, 3, 4))
    act = np.full(S, f0.act_id, dtype=np.int64)
    leak = np.full(S, f0.leak)
    return rows, TangentBatch(gated, R, W, b, X, group, eta, K, alpha, sign, g0prev, act, leak)


def tangent_norms(table, backend, target, memo) -> tuple:
    """ln‖∂h_T/∂h_1‖₂, ln‖∂h_T/∂h_{T−1}‖₂, the divergence step and T of every point of ``table``
    (module docstring), (n,) each, and {point: result dict} of the points computed one by one by
    ``target.compute`` (their entries in the arrays are NaN/0)."""
    from ..backends import get_backend

    region = _Region(table, get_backend(backend), backend, target, memo)
    swept = {name for axis in table.spec.axes for name in axis.names}
    for rows in table.groups(swept - {SCALE} - set(IRNN_SCALARS)):
        region.group(rows)
    log1, logT, bad = region.compute()
    return log1, logT, bad, region.steps, region.single

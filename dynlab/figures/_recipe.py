"""A figure recipe: compute a Dataset, draw from it alone, check the paper's claim on it."""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import time
from typing import Callable

#: The order of the figure list (docs/design.md, *Figures*); recipes not listed here follow in name order (``recipes()``, claims.json).
ORDER = (
    "irnn-fig2-phase", "irnn-fig3-add", "irnn-fig4-copy", "irnn-fig5-add-length", "irnn-ablation-baselines",
    "irnn-fig6-convergence", "irnn-fig7-eigenvalues", "irnn-fig8-gradnorm", "irnn-table1-pixel-digits",
    "irnn-table2-noisy-digits", "irnn-table11-activation",
    "maso-fig2-codes", "maso-fig3-templates", "maso-fig4-random-h0", "maso-fig5-neighbours", "maso-fig6-tsne",
    "maso-table1-h0", "maso-table4-grid",
    "implicit-fig1-derivative", "implicit-fig2-xor", "implicit-fig6-oscillator", "implicit-fig7-size",
    "implicit-a2-iterative", "implicit-s34-stepsize", "rin-gradients", "flipflop-fixed-points",
    "flipflop-bifurcation",
)

#: the scales a recipe runs at: ``quick`` (seconds, for tests), ``stand-in`` (the gallery's reduced
#: sizes, the default) and ``paper`` (the paper's sizes and budgets; the real data through ``data``)
SCALES = ("quick", "stand-in", "paper")
#: the settings every record carries for the paper and for us, side by side
SETTING_KEYS = ("data", "T", "D", "batch", "steps", "lr")
#: a paper's value that states nothing (the key is not compared)
NOT_STATED = "—"


@dataclasses.dataclass(frozen=True)
class Scale:
    """The scale a recipe's ``compute`` runs at: ``name`` (one of ``SCALES``) and ``data`` (a folder
    with the real data sets — MNIST's files, the "UCI HAR Dataset" folder —, or None).

    ``Scale.of(True)`` is the quick scale and ``Scale.of(False)`` the stand-in (the older
    ``compute(quick)`` calls)."""

    name: str = "stand-in"
    data: str | None = None

    def __post_init__(self):
        if self.name not in SCALES:
            from ..errors import ParameterError
            raise ParameterError("scale", f"must be one of {', '.join(SCALES)}, got {self.name!r}")

    @property
    def quick(self) -> bool:
        return self.name == "quick"

    @property
    def paper(self) -> bool:
        return self.name == "paper"

    @classmethod
    def of(cls, value) -> "Scale":
        if isinstance(value, cls):
            return value
        if isinstance(value, bool) or value is None:
            return cls("quick" if value else "stand-in")
        return cls(str(value))


#: The training engines a recipe may be run with (``dynlab figures make --engine``).
ENGINES = ("auto", "numba", "torch")
#: The engine the running recipe trains with and what it used (``train_model``, ``engine_for``).
_ENGINE: contextvars.ContextVar = contextvars.ContextVar("dynlab_figures_engine", default=None)


def choose_engine(scale, engine: str = "auto") -> dict:
    """The ``train_model`` keywords a recipe trains with at ``scale``.

    ``auto``: at paper scale, PyTorch's engine (``engine="torch"``, float64) on a CUDA GPU when torch
    is installed and sees one; everywhere else dynlab's own exact-gradient trainer (numba, CPU) —
    on a CPU it is the faster of the two (the ``train-torch`` workload: 2.3 s for dynlab against
    14.4 s for torch's float64 autograd per step of the paper's iRNN), and the stand-in and quick
    scales are what the gallery and the tests judge with it.  ``numba`` / ``torch`` force one
    (``torch`` on the CUDA GPU when there is one, else the CPU)."""
    from ..errors import ParameterError

    if engine not in ENGINES:
        raise ParameterError("engine", f"must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "numba":
        return {}
    try:
        import torch
    except ImportError:
        if engine == "torch":
            raise ParameterError("engine", "torch is not installed here: pip install 'dynlab[torch]'") from None
        return {}
    cuda = bool(torch.cuda.is_available())
    if engine == "torch" or (Scale.of(scale).paper and cuda):
        return {"engine": "torch", "device": "cuda" if cuda else "cpu", "dtype": "float64"}
    return {}


def engine_words(kw: dict) -> str:
    """How a record says which engine trained it."""
    from ..backends import resolve_backend

    if kw.get("engine") == "torch":
        return f"PyTorch autograd via dl.to_torch ({kw.get('dtype', 'float64')}, {kw.get('device', 'cpu')})"
    return f"dynlab exact-gradient BPTT ({resolve_backend(kw.get('backend'))}, CPU)"


@contextlib.contextmanager
def engine_for(scale, engine: str = "auto"):
    """Within: the recipes' ``train_model`` calls train with ``choose_engine(scale, engine)``; yields
    the list of the engines they used (in words)."""
    used: list = []
    token = _ENGINE.set((choose_engine(scale, engine), used))
    try:
        yield used
    finally:
        _ENGINE.reset(token)


def train_model(*args, **kwargs):
    """``dl.train_model`` with the engine of the running recipe (``engine_for``), noted for its
    record; outside ``engine_for``: dynlab's own trainer."""
    import dynlab as dl

    kw, used = _ENGINE.get() or ({}, None)
    merged = {**kw, **kwargs}
    if used is not None:
        words = engine_words(merged)
        if words not in used:
            used.append(words)
    return dl.train_model(*args, **merged)


def setting_value(v) -> str:
    """One setting's value as records print and compare it: ints as digits, floats by ``%g``, lists
    joined by ", ", None as ``NOT_STATED``."""
    if v is None:
        return NOT_STATED
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(setting_value(x) for x in v)
    return str(v)


def setting(**values) -> dict:
    """A setting (the paper's, on ``Recipe.paper``, or ours, in the Dataset's attrs via
    ``setting_attr``): ``SETTING_KEYS`` → printed values; keys left out are ``NOT_STATED``."""
    unknown = set(values) - set(SETTING_KEYS)
    if unknown:
        raise ValueError(f"unknown setting keys {sorted(unknown)}; use {SETTING_KEYS}")
    return {k: setting_value(values.get(k)) for k in SETTING_KEYS}


def setting_attr(**values) -> str:
    """``setting(**values)`` as the JSON a Dataset's ``attrs["setting"]`` holds (ours)."""
    return json.dumps(setting(**values), ensure_ascii=False)


def at_paper_scale(paper: dict, ours: dict) -> bool:
    """Whether our setting is the paper's: every key the paper states (not ``NOT_STATED``) equal.
    A paper that states nothing is matched by nothing (False)."""
    stated = [k for k in SETTING_KEYS if str(paper.get(k, NOT_STATED)) != NOT_STATED]
    return bool(stated) and all(str(ours.get(k, NOT_STATED)) == str(paper[k]) for k in stated)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One paper figure (docs/design.md, *Figures*).

    name     : ``irnn-fig6-convergence`` style; the module is the name with ``_`` for ``-``
    source   : the paper figure(s), e.g. ``"iRNN Fig. 6"``
    claim    : the claim, one line, as checked by ``check``
    compute  : ``compute(scale) -> xarray.Dataset`` through the public API (``scale``: a ``Scale``, or
               a bool for the quick / stand-in scales); its attrs carry ``scaling`` (how sizes
               differ from the paper) for the figure to print and ``setting`` (ours, ``setting_attr``)
    draw     : ``draw(ds) -> matplotlib.figure.Figure`` from the Dataset alone
    check    : ``check(ds) -> dict`` with ``passed`` (bool), the measured numbers, and
               ``control`` (always), ``per_seed`` (training claims), ``finding`` (when the
               claim does not hold) — the record contract below
    trains   : the claim is about a training outcome: ``check`` must report ``per_seed`` with
               ≥ 5 seeds in full mode (≥ 3 quick), and decide beyond 2 standard errors
               (``dynlab.figures._stats``)
    table    : the recipe reproduces a paper *table*: ``check`` must report ``table`` (below),
               built from the Dataset, with the paper's number beside ours
    quote    : the paper's claim in the paper's words, with where it stands (``claim`` is the
               check's restatement of it)
    gate     : the competence gate, declared here before anything runs: the level every arm the
               verdict compares must reach at each condition (above chance, the majority class, a
               named trivial predictor; for a numerical claim, the accuracy of the reference
               solution) before the claim is judged at all
    paper    : the paper's setting (``setting(data=, T=, D=, batch=, steps=, lr=)``), printed beside
               ours; a record is *at paper scale* when every key the paper states is ours too
    scales   : the scales ``compute`` runs (``SCALES``); ``paper`` only where the recipe knows the
               paper's sizes (and, for the real data, is given ``Scale.data``)
    paper_cost : where the paper scale is not run here: its estimated cost on two cores (timed
               steps, extrapolated), printed in the record and on the page
    beyond   : the item is not a claim of the four papers (the gallery's "beyond the papers")
    reads    : the real data set the paper scale trains on ("MNIST", "UCI HAR"), given by ``Scale.data``

    The common ending of every recipe is the Recipe's, so that a module says only what differs:

    title    : the figure's title line (its suptitle), a template filled from the Dataset — its
               attrs and sizes by name, ``{scaling}`` the scale-down of ``attrs["scaling"]``
               (``title_text``); None: the draw sets none
    title_wrap : the width (characters) the template's line holding ``{scaling}`` is wrapped to
               (``textwrap.fill``); 0: not wrapped
    title_size : the title's font size (points)
    style    : draw under the house style (``dynlab.plot.style.styled``); the module's ``draw``
               only draws its axes and returns the Figure
    one_blas_thread : ``compute`` runs with every linear-algebra call on one BLAS thread
               (``one_blas_thread``); the Recipe also stamps the Dataset's provenance
               (``figure``, ``dynlab_version``, ``command``) where ``compute`` did not

    The record contract (the gallery's rules; ``check_record`` enforces it):

    - ``control = {"setting": str, "measured": {...}, "passed": bool}`` — the same check applied
      where the paper's effect must be absent (untrained network, baseline cell, ablated part);
      it must *fail*.  A control that passes makes the record an error (the check cannot
      discriminate), whatever the claim says.
    - ``passed`` says whether the paper's claim held on our data.  A claim that does not hold is a
      finding, not an error: ``passed = False`` with ``finding`` stating what was measured instead.
    - ``per_seed``: a list with one entry (a dict of numbers, including ``"seed"``) per seed.
    - ``table`` (recipes with ``table=True``): ``{"title": str, "columns": [str, ...],
      "rows": [[cell, ...], ...], "note": str}`` — cells are numbers or short strings, every row
      as long as ``columns``; at least one column is the paper's number (its name starts with
      ``"paper"``, e.g. ``"paper (MNIST)"``; a cell is ``"—"`` where the paper gives none), and
      ``note`` names the data-set substitution.  The gallery prints it as a markdown table; the
      numbers come from the Dataset, which holds them as variables.
    - the Dataset's ``attrs["scaling"]`` states the scale-down against the paper (sizes, data set
      substitution, iterations); it is printed on the figure and copied into the record.
    - ``gate = {"met": bool, "measured": {...}}`` — the competence gate of ``Recipe.gate``
      measured on the data (``_stats.gate``); below it the verdict is *inconclusive*.
    - ``effect = {"name", "ours", "se", "n", "units", "paper"}`` — the headline effect ± SE over
      the ``n`` seeds (``_stats.effect``), the paper's number where it gives one.
    - ``seeds``: how many seeds (or independent networks) the verdict rests on.
    - ``parts`` (comparative claims): the ``_stats.comparison`` of every comparison the claim
      makes, each with the effect that matters, our SE and the seeds that would resolve it; they
      become the record's ``power`` and decide between *does not hold* and *underpowered*.

    ``run_recipe`` adds ``verdict`` (``_stats.decide``: holds / does not hold / inconclusive /
    underpowered) and keeps ``passed`` (= verdict is *holds*) for readers of the older records:
    deprecated — read ``verdict`` —, the record-level ``passed`` and the gallery's reading of records
    without a verdict (``_gallery.verdict_of``) go in dynlab 0.3 (``dynlab._deprecate.REMOVED_IN``).
    A check's own ``passed`` and a control's stay: they are what the verdict is decided from.
    """

    name: str
    source: str
    claim: str
    compute: Callable
    draw: Callable
    check: Callable
    trains: bool = False
    table: bool = False
    quote: str = ""
    gate: str = ""
    paper: dict = dataclasses.field(default_factory=dict)
    scales: tuple = ("quick", "stand-in")
    paper_cost: str = ""
    beyond: bool = False
    reads: str = ""
    title: str | None = None
    title_wrap: int = 0
    title_size: float = 7.0
    style: bool = True
    one_blas_thread: bool = False

    def __post_init__(self):
        # ``compute`` and ``draw`` as every caller uses them (``run_recipe``, the gallery, the tests):
        # the module's own functions with the common ending around them, wrapped once (``replace``
        # re-wraps what it is given, never a wrapper)
        object.__setattr__(self, "compute", _computing(self, _unwrapped(self.compute)))
        object.__setattr__(self, "draw", _drawing(self, _unwrapped(self.draw)))


def one_blas_thread(fn):
    """``fn(quick)`` — or ``fn(scale)`` for a function whose parameter is named ``scale`` — as a
    ``compute(scale)`` with every linear-algebra call on one BLAS thread (on a shared machine a
    multi-threaded eigh of the PCA took ~15× longer); ``Recipe(one_blas_thread=True)`` applies it."""
    import functools
    import inspect

    takes_scale = "scale" in inspect.signature(fn).parameters

    @functools.wraps(fn)
    def compute(scale):
        from ..backends import get_backend

        sc = Scale.of(scale)
        with get_backend(None):          # the default backend's thread policy for the whole recipe
            return fn(sc if takes_scale else sc.quick)

    return compute


def title_text(template: str, ds, wrap: int = 0) -> str:
    """A recipe's title line from ``template`` (``Recipe.title``): each line formatted with the
    Dataset's sizes and attrs by name (``{scaling}``: ``attrs["scaling"]``, "" when absent); the line
    holding ``{scaling}`` wrapped to ``wrap`` characters when ``wrap`` (``textwrap.fill``)."""
    import textwrap

    fields = {**{str(k): v for k, v in ds.sizes.items()}, **ds.attrs, "scaling": ds.attrs.get("scaling", "")}
    lines = []
    for line in template.split("\n"):
        text = line.format_map(fields)
        lines.append(textwrap.fill(text, wrap) if wrap and "{scaling}" in line else text)
    return "\n".join(lines)


def _unwrapped(fn):
    return getattr(fn, "_recipe_own", fn)


def _computing(recipe: "Recipe", fn):
    """``compute`` with the Recipe's thread policy and provenance around the module's ``fn``."""
    import functools

    inner = one_blas_thread(fn) if recipe.one_blas_thread else fn

    @functools.wraps(fn)
    def compute(scale):
        from .. import __version__

        ds = inner(scale)
        ds.attrs.setdefault("figure", recipe.name)
        ds.attrs.setdefault("dynlab_version", __version__)
        ds.attrs.setdefault("command", f"dynlab figures make {recipe.name} --scale {Scale.of(scale).name}")
        return ds

    compute._recipe_own = fn
    return compute


def _drawing(recipe: "Recipe", fn):
    """``draw`` with the Recipe's style and title line around the module's ``fn`` (its axes)."""
    import functools

    @functools.wraps(fn)
    def draw(ds):
        import matplotlib

        from ..plot.style import RC

        with matplotlib.rc_context(RC) if recipe.style else contextlib.nullcontext():
            fig = fn(ds)
            if recipe.title is not None:
                fig.suptitle(title_text(recipe.title, ds, recipe.title_wrap), fontsize=recipe.title_size)
        return fig

    draw._recipe_own = fn
    return draw


class RecipeError(Exception):
    """A recipe broke the record contract (no control, too few seeds, no finding for a failed claim)."""


def check_record(recipe: "Recipe", rec: dict, quick: bool) -> None:
    """Raise RecipeError when the claim record ``rec`` breaks the contract of ``Recipe``."""
    problems = []
    c = rec.get("control")
    if not isinstance(c, dict) or not {"setting", "measured", "passed"} <= set(c):
        problems.append('no negative control ("control": {"setting", "measured", "passed"})')
    elif not isinstance(c["setting"], str) or not c["setting"].strip() or not isinstance(c["measured"], dict):
        problems.append("the control must name its setting and report its measured numbers")
    if recipe.trains:
        need = 3 if quick else 5
        seeds = rec.get("per_seed")
        if not isinstance(seeds, list) or len(seeds) < need:
            got = len(seeds) if isinstance(seeds, list) else "no"
            problems.append(f"a training claim needs per_seed with >= {need} seeds ({got} given)")
    if recipe.table:
        problems += _table_problems(rec.get("table"))
    if not rec["passed"] and not rec.get("control_passed") and not str(rec.get("finding") or "").strip():
        problems.append('a claim that does not hold needs a "finding" stating what was measured instead')
    problems += _verdict_problems(recipe, rec)
    if not str(rec.get("scaling") or "").strip():
        problems.append('the Dataset must state its scale-down against the paper in attrs["scaling"]')
    st = rec.get("setting") or {}
    if not st.get("paper") or not st.get("ours"):
        problems.append("the record must carry the paper's setting (Recipe.paper) and ours (the Dataset's "
                        'attrs["setting"], setting_attr) side by side')
    if problems:
        raise RecipeError(f"figure {recipe.name}: " + "; ".join(problems))


def _verdict_problems(recipe: "Recipe", rec: dict) -> list[str]:
    """What is missing for a verdict: the paper's words, the declared gate and its measurement, the
    headline effect ± SE, the seeds, a verdict among ``VERDICTS`` that agrees with ``passed``."""
    from ._stats import VERDICTS

    out = []
    if not str(recipe.quote or "").strip():
        out.append("the recipe must quote the paper's claim in the paper's words (Recipe.quote)")
    if not str(recipe.gate or "").strip():
        out.append("the recipe must declare its competence gate before it runs (Recipe.gate)")
    g = rec.get("gate")
    if not isinstance(g, dict) or not {"met", "measured"} <= set(g):
        out.append('the check must report the gate it measured ("gate": {"met", "measured"})')
    e = rec.get("effect")
    if not isinstance(e, dict) or not {"name", "ours", "se"} <= set(e):
        out.append('the check must report its headline effect ("effect": {"name", "ours", "se", ...})')
    if not isinstance(rec.get("seeds"), int) or rec.get("seeds", 0) < 1:
        out.append('the check must report how many seeds the verdict rests on ("seeds")')
    if rec.get("verdict") not in VERDICTS:
        out.append(f"the verdict must be one of {', '.join(VERDICTS)}, got {rec.get('verdict')!r}")
    elif (rec["verdict"] == "holds") != bool(rec["passed"]) and not rec.get("control_passed"):
        out.append("the verdict and passed disagree")
    return out


def _table_problems(t) -> list[str]:
    """What is wrong with a record's ``table`` (``Recipe`` contract); [] when it is well formed."""
    if not isinstance(t, dict) or not {"title", "columns", "rows", "note"} <= set(t):
        return ['a table recipe needs "table": {"title", "columns", "rows", "note"}']
    cols, rows = t["columns"], t["rows"]
    out = []
    if not isinstance(cols, list) or not cols or not all(isinstance(c, str) and c.strip() for c in cols):
        return ["the table's columns must be a non-empty list of names"]
    if not isinstance(rows, list) or not rows:
        out.append("the table has no rows")
    elif any(not isinstance(r, list) or len(r) != len(cols) for r in rows):
        out.append(f"every table row must have {len(cols)} cells (one per column)")
    elif any(not isinstance(c, (str, int, float)) or isinstance(c, bool) for r in rows for c in r):
        out.append("table cells must be numbers or strings")
    if not any(c.lower().startswith("paper") for c in cols):
        out.append('the table needs a column with the paper\'s number (its name starts with "paper")')
    if not str(t.get("note") or "").strip():
        out.append("the table's note must name the data-set substitution")
    return out


def _plain(value):
    """JSON-safe version of a measured number (numpy scalars → Python)."""
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def record_of(recipe: Recipe, result: dict, scaling: str = "", *, setting_json: str | None = None,
              scale: str | None = None) -> dict:
    """The claim record of a check's ``result`` (the ``Recipe`` contract): the verdict decided from
    the gate, the check and its comparative parts (``_stats.decide``), the power of each part, the
    finding of an inconclusive record prefixed with the gate's numbers, and the scale: the paper's
    setting and ours (``setting_json``, the Dataset's ``attrs["setting"]``) side by side, whether
    ours is the paper's, and the verdict's words with it ("holds at this scale")."""
    from ._stats import decide

    measured = _plain(dict(result))
    passed = bool(measured.pop("passed"))
    # the negative control, the per-seed numbers, the finding, the gate… live in the record itself
    extra = {k: measured.pop(k) for k in ("control", "per_seed", "finding", "table", "gate", "effect", "seeds",
                                          "parts") if k in measured}
    parts = extra.pop("parts", None) or []
    rec = {"name": recipe.name, "source": recipe.source, "claim": recipe.claim, "quote": recipe.quote,
           "gate_level": recipe.gate, "passed": passed, "measured": measured, **extra, "scaling": str(scaling)}
    gate = rec.get("gate") if isinstance(rec.get("gate"), dict) else {"met": True}
    rec["verdict"] = decide(passed, bool(gate.get("met")), parts)
    ours = json.loads(setting_json) if setting_json else {}
    paper = dict(recipe.paper) if recipe.paper else {}
    rec["scale"] = str(scale or "stand-in")
    rec["setting"] = {"paper": paper, "ours": ours}
    rec["at_paper_scale"] = at_paper_scale(paper, ours)
    rec["beyond"] = bool(recipe.beyond)
    if recipe.paper_cost and not rec["at_paper_scale"]:
        rec["paper_cost"] = recipe.paper_cost
    if rec["verdict"] == "inconclusive":
        rec["passed"] = False
        if not gate.get("met", True):
            nums = "; ".join(f"{k} {v}" for k, v in gate.get("measured", {}).items())
            why = f"the competence gate ({recipe.gate}) was not met ({nums})"
        else:
            arms = sorted({a for p in parts if p.get("verdict") == "inconclusive" for a in p.get("not_competent", [])})
            why = ("an arm the claim says succeeds never reached its competence level (" + "; ".join(
                f"{a}: {gate.get('measured', {}).get(a + ' [arm]', 'not met')}" for a in arms) + ")")
        rec["finding"] = (f"inconclusive {scale_words(rec)}: {why}" + (f". {rec['finding']}" if rec.get("finding") else ""))
    rec["verdict_text"] = f"{rec['verdict']} {scale_words(rec)}"
    if parts:
        rec["power"] = [{k: p.get(k) for k in ("name", "mean", "se", "n", "interest", "paper", "units",
                                                "seeds_needed", "verdict")} for p in parts]
    if isinstance(rec.get("control"), dict):
        rec["control"]["passed"] = bool(rec["control"].get("passed"))
        if rec["control"]["passed"]:
            rec["passed"] = False
            rec["control_passed"] = True
            rec["error"] = ("the negative control passes the same check "
                            f"({rec['control'].get('setting', '')}): the check does not discriminate")
    return rec


def scale_words(rec: dict) -> str:
    """"at paper scale" when the record's setting is the paper's, else "at this scale"."""
    return "at paper scale" if rec.get("at_paper_scale") else "at this scale"


def file_stem(name: str, scale) -> str:
    """The files of a record: ``NAME`` at the quick and stand-in scales, ``NAME.paper`` at paper scale
    (so that both runs of an item stand in one gallery)."""
    return name + (".paper" if Scale.of(scale).paper else "")


def record_key(rec: dict) -> tuple:
    """The key of a record in claims.json: (name, "paper" or "")."""
    return rec["name"], "paper" if rec.get("scale") == "paper" else ""


def check_scale(recipe: Recipe, scale) -> None:
    """A ParameterError, before anything runs, when ``recipe`` does not run at ``scale`` here
    (naming ``scale``) or its paper scale needs a real data set that ``scale.data`` does not give
    (naming ``data``)."""
    from ..errors import ParameterError

    sc = Scale.of(scale)
    if sc.name not in recipe.scales:
        raise ParameterError("scale", f"{recipe.name} does not run at the {sc.name} scale here"
                             + (f" ({recipe.paper_cost})" if sc.paper and recipe.paper_cost else "")
                             + f"; its scales: {', '.join(recipe.scales)}")
    if sc.paper and recipe.reads and sc.data is None:
        raise ParameterError("data", f"{recipe.name} at paper scale trains on the real {recipe.reads}: give its "
                                     "folder with --data DIR")


def run_recipe(recipe: Recipe, out_dir, *, quick: bool = False, fmt: str = "png", scale=None, data=None,
               redraw: bool = False, engine: str = "auto") -> dict:
    """Compute, write ``NAME.nc``, draw ``NAME.<fmt>`` from the Dataset, check the claim.

    ``scale``: one of ``SCALES`` (default: quick when ``quick``, else stand-in); ``data``: the folder
    of the real data sets for the recipes that read them; ``redraw``: no computation — the
    Dataset is read back from ``NAME.nc`` in ``out_dir`` (a check or picture changed, the data did
    not; the record keeps the computing time of the run that wrote the file); ``engine``: what
    trains the recipe's networks (``choose_engine``; the record's ``engine`` names what did).

    Returns the claim record (``record_of``: ``{"name", "source", "claim", "quote", "gate_level",
    "gate", "effect", "seeds", "verdict", "verdict_text", "passed", "measured", "control", "scaling",
    "scale", "setting", "at_paper_scale", "seconds", "quick"}`` plus ``per_seed``, ``power``,
    ``table`` and ``finding`` when the check reports them), and ``error`` when the negative control
    passed (then ``passed`` is False: a check that passes where the effect is absent proves
    nothing).  The data is written before drawing, so nothing computed is lost if drawing fails; a
    record that breaks the contract (``Recipe``) raises RecipeError after the data and picture are
    written.  A scale the recipe does not run is a ParameterError naming ``scale``.
    """
    from ..errors import ParameterError
    from ..io import read_dataset, write_dataset
    from ..plot.style import save_figure

    sc = Scale(scale or ("quick" if quick else "stand-in"), data)
    if not redraw:
        check_scale(recipe, sc)
        choose_engine(sc, engine)       # a bad --engine fails before anything runs
    os.makedirs(out_dir, exist_ok=True)
    stem = file_stem(recipe.name, sc)
    nc = os.path.join(out_dir, f"{stem}.nc")
    t0 = time.perf_counter()
    seconds = None
    if redraw:
        if not os.path.exists(nc):
            raise ParameterError("redraw", f"no {nc} to redraw from: make the figure first")
        ds = read_dataset(nc)
        seconds = ds.attrs.get("compute_seconds")
    else:
        with engine_for(sc, engine) as used:
            ds = recipe.compute(sc)
        if used:
            ds.attrs["engine"] = "; ".join(used)
        ds.attrs.setdefault("figure", recipe.name)
        ds.attrs["quick"] = int(sc.quick)
        ds.attrs["scale"] = sc.name
        ds.attrs["compute_seconds"] = round(time.perf_counter() - t0, 2)
        write_dataset(ds, nc)
    rec = record_of(recipe, recipe.check(ds), ds.attrs.get("scaling", ""), setting_json=ds.attrs.get("setting"),
                    scale=ds.attrs.get("scale", sc.name))
    fig = recipe.draw(ds)
    save_figure(fig, os.path.join(out_dir, f"{stem}.{fmt}"))
    rec.update(seconds=float(seconds) if seconds is not None else float(ds.attrs["compute_seconds"]),
               quick=bool(int(ds.attrs.get("quick", sc.quick))), file=stem)
    if ds.attrs.get("engine"):
        rec["engine"] = str(ds.attrs["engine"])
    check_record(recipe, rec, rec["quick"])
    return rec


def write_claims(records: list, out_dir) -> str:
    """Write ``claims.json`` into ``out_dir``; returns its path.

    Records of figures already in an existing ``claims.json`` but not among ``records`` are
    kept (so ``dynlab figures make A`` into a gallery updates A's record and loses no other); a
    record is keyed by its name and whether it is the paper-scale run (``record_key``), so an item's
    stand-in and paper-scale records stand side by side;
    the file is written to a temporary name first and renamed, so it is never left half-written.
    """
    path = os.path.join(out_dir, "claims.json")
    merged = {}
    if os.path.exists(path):
        try:
            with open(path) as f:
                merged = {record_key(r): r for r in json.load(f) if isinstance(r, dict) and "name" in r}
        except (OSError, ValueError):
            merged = {}
    merged.update({record_key(r): r for r in records})
    rank = {n: i for i, n in enumerate(ORDER)}
    ordered = sorted(merged.values(), key=lambda r: (rank.get(r["name"], len(rank)), r["name"], record_key(r)[1]))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ordered, f, indent=2, ensure_ascii=False)
    os.replace(tmp, path)
    return path

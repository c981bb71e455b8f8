"""The package's layering, checked on the source so that it cannot silently regress.

Every module under ``dynlab/`` is parsed with :mod:`ast`; every ``import`` statement in it
(module level, inside functions, classes, ``try``/``if`` blocks; absolute and relative) is an
edge to the most specific dynlab module it names:

* ``import dynlab.a.b`` and ``from dynlab.a.b import name`` → ``dynlab.a.b``;
* ``from dynlab.a import b`` → ``dynlab.a.b`` when ``b`` is a module, else ``dynlab.a`` (the
  package's ``__init__``) — so a submodule that imports a name from its own package's
  ``__init__`` is an edge back to that ``__init__``.

The parents a Python import also executes (``dynlab/__init__``, ``dynlab/a/__init__``) are not
edges: every submodule would otherwise point at its package, and every package that re-exports
its submodules would be a "cycle".  Imports by string (``importlib.import_module``) are not
seen; that is deliberate: ``dynlab/__init__`` loads its public names lazily that way, and
``dynlab/runs.py`` (the old name of ``dynlab.commands``) is a deprecation shim that reaches it by string.

Checked:

(a) ``dynlab.plot`` draws only: it imports no analysis, model, backend, simulation, training,
    sweep, run, spec, io or task module;
(b) ``dynlab.backends`` sees forms and arrays only: it imports no model class, analysis,
    simulation, training, sweep, run, plot, spec, io or task module (the forms module and the
    errors it raises are all it knows of the rest); and, stricter, each of the two imports only
    its allowed neighbours: ``dynlab.plot`` itself, ``dynlab.errors`` and ``dynlab._dataset``;
    ``dynlab.backends`` itself, ``dynlab.config``, ``dynlab.activations``, ``dynlab.errors`` and
    ``dynlab._resources`` (the memory guards) and ``dynlab._progress`` (progress);
(b′) the cells' arithmetic (``dynlab.backends.cells``) imports nothing of dynlab, and the
    reference backend does not import Numba or another backend; the analyses (``dynlab.analysis``,
    ``dynlab.simulation``, ``dynlab.train``, ``dynlab.sweep``) import no backend's own modules —
    only the registry ``dynlab.backends``, the interface ``dynlab.backends.base`` and the
    reference's per-element arithmetic ``dynlab.backends.reference.cells`` (NumPy on arrays, no
    backend machinery: the one definition of a cell's values that a bound or a map evaluates);
(c) there is no import cycle among dynlab modules, except the one documented pair below;
(d) at run time, ``import dynlab.plot`` and drawing a saved Dataset load none of
    ``dynlab.analysis``, ``dynlab.backends``, ``dynlab.models``, ``dynlab.simulation``.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dynlab"

# The only import cycle allowed: the cli package's ``__init__`` and its ``commands`` module
# import each other (``main`` is defined in ``__init__`` and registers the commands; each
# command imports shared helpers from ``__init__``).  The cli is a leaf — nothing in dynlab
# imports it — and it is owned separately; any other cycle, or a larger one through this
# pair, fails.
ALLOWED_CYCLES = [frozenset({"dynlab.cli", "dynlab.cli.commands"})]

PLOT_FORBIDDEN = ("dynlab.analysis", "dynlab.spec", "dynlab.models", "dynlab.backends",
                  "dynlab.simulation", "dynlab.train", "dynlab.sweep", "dynlab.commands", "dynlab.runs",
                  "dynlab.io", "dynlab.tasks")
BACKENDS_FORBIDDEN = ("dynlab.models.base", "dynlab.models.cells", "dynlab.models.irnn", "dynlab.models.ctrnn",
                      "dynlab.models.gru_lstm", "dynlab.models.stack", "dynlab.models.implicit", "dynlab.analysis",
                      "dynlab.simulation", "dynlab.train", "dynlab.sweep", "dynlab.commands", "dynlab.runs", "dynlab.plot",
                      "dynlab.spec", "dynlab.io", "dynlab.tasks")
# What each of the two layers may import at all (besides the standard library and third-party
# packages): the forbidden lists above are the named rule, these the whole of what is allowed.
PLOT_ALLOWED = ("dynlab.plot", "dynlab.errors", "dynlab._dataset", "dynlab._palette")
BACKENDS_ALLOWED = ("dynlab.backends", "dynlab.config", "dynlab.activations", "dynlab.errors", "dynlab._resources",
                    "dynlab._progress")
#: The analyses reach a backend only through the registry and the interface.
ANALYSES = ("dynlab.analysis", "dynlab.simulation", "dynlab.train", "dynlab.sweep")
BACKEND_OWN = ("dynlab.backends.numba", "dynlab.backends.reference", "dynlab.backends.gpu", "dynlab.backends.cells")
#: The one module of a backend's own the analyses may import: the reference's cell arithmetic.
REFERENCE_CELLS = "dynlab.backends.reference.cells"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[tuple[str, int]]:
    """The dynlab modules that module ``name`` (at ``path``) imports, with line numbers."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[tuple[str, int]] = set()

    def most_specific(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _within(alias.name, "dynlab"):
                    target = most_specific(alias.name)
                    if target:
                        found.add((target, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not _within(source, "dynlab"):
                continue
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                target = candidate if candidate in modules else most_specific(source)
                if target:
                    found.add((target, node.lineno))
    found = {(t, line) for t, line in found if t != name}
    return found


def _graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    lines: dict[tuple[str, str], int] = {}
    for name, path in modules.items():
        for target, line in _imports(name, path, modules):
            graph[name].add(target)
            lines.setdefault((name, target), line)
    return graph, lines


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative; the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


def _violations(layer: str, forbidden=None, allowed=None) -> list[str]:
    """Every import of a module of ``layer`` that is in ``forbidden`` (or not in ``allowed``)."""
    graph, lines = _graph()
    bad = []
    for source in sorted(graph):
        if not _within(source, layer):
            continue
        for target in sorted(graph[source]):
            if (forbidden is not None and any(_within(target, f) for f in forbidden)) or \
                    (allowed is not None and not any(_within(target, a) for a in allowed)):
                path = _modules()[source].relative_to(ROOT)
                bad.append(f"{path}:{lines[(source, target)]}: {source} imports {target}")
    return bad


# -- the checker itself ---------------------------------------------------------------------


def test_graph_sees_every_kind_of_import(tmp_path, monkeypatch):
    """Absolute, relative, from-package, function-level and nested imports are all edges."""
    pkg = tmp_path / "dynlab"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .b import thing\n")
    (pkg / "sub" / "a.py").write_text(textwrap.dedent("""\
        import numpy
        from . import b
        from .. import top
        def f():
            import dynlab.other
            try:
                from dynlab.sub import helper
            except ImportError:
                pass
    """))
    (pkg / "sub" / "b.py").write_text("def thing():\n    from .a import f\n")
    (pkg / "top.py").write_text("")
    (pkg / "other.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    graph, _ = _graph()
    assert graph["dynlab.sub.a"] == {"dynlab.sub.b", "dynlab.top", "dynlab.other", "dynlab.sub"}
    assert graph["dynlab.sub.b"] == {"dynlab.sub.a"}
    assert graph["dynlab.sub"] == {"dynlab.sub.b"}
    components = _strongly_connected(graph)
    assert sorted(map(sorted, components)) == [["dynlab.sub", "dynlab.sub.a", "dynlab.sub.b"]]


# -- (a) and (b): the layers ----------------------------------------------------------------


def test_plot_imports_no_computing_layer():
    assert _violations("dynlab.plot", forbidden=PLOT_FORBIDDEN) == []


def test_backends_see_forms_and_arrays_only():
    assert _violations("dynlab.backends", forbidden=BACKENDS_FORBIDDEN) == []


@pytest.mark.parametrize("layer, allowed", [("dynlab.plot", PLOT_ALLOWED), ("dynlab.backends", BACKENDS_ALLOWED)])
def test_layer_imports_only_what_it_may(layer, allowed):
    assert _violations(layer, allowed=allowed) == []


@pytest.mark.parametrize("layer", ANALYSES)
def test_analyses_import_no_backend_internals(layer):
    bad = [v for v in _violations(layer, forbidden=BACKEND_OWN) if not v.endswith(f"imports {REFERENCE_CELLS}")]
    assert bad == []


def test_reference_cells_import_only_the_activations():
    """The module the analyses may reach stays plain arithmetic: it imports no other dynlab module
    than ``dynlab.activations``."""
    assert _violations(REFERENCE_CELLS, allowed=(REFERENCE_CELLS, "dynlab.activations")) == []


def test_cells_import_nothing_of_dynlab_and_the_reference_no_numba():
    assert _violations("dynlab.backends.cells", allowed=("dynlab.backends.cells",)) == []
    assert _violations("dynlab.backends.reference", forbidden=("dynlab.backends.numba", "dynlab.backends.gpu",
                                                                "dynlab.backends.cells")) == []
    for path in (PACKAGE / "backends" / "reference").glob("*.py"):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not any(m == "numba" or m.startswith("numba.") for m in names), path


def test_the_compiled_backends_do_not_import_each_other():
    """numba and the GPU share ``cells`` (and the reference, for what they hand over), never each
    other's kernels."""
    assert _violations("dynlab.backends.numba", forbidden=("dynlab.backends.gpu",)) == []
    assert _violations("dynlab.backends.gpu", forbidden=("dynlab.backends.numba",)) == []


# -- (c): no cycles ------------------------------------------------------------------------


def test_no_import_cycles():
    graph, lines = _graph()
    cycles = [c for c in _strongly_connected(graph) if frozenset(c) not in ALLOWED_CYCLES]
    described = []
    for component in cycles:
        edges = [f"{a} -> {b} (line {lines[(a, b)]})"
                 for a in sorted(component) for b in sorted(graph[a] & component)]
        described.append("; ".join(edges))
    assert described == []


def test_allowed_cycle_is_still_needed():
    """The exemption is exact: it names a cycle that exists, so it cannot outlive its reason."""
    components = [frozenset(c) for c in _strongly_connected(_graph()[0])]
    for allowed in ALLOWED_CYCLES:
        assert allowed in components, f"{sorted(allowed)} is no longer a cycle: drop it"


# -- (d): at run time -----------------------------------------------------------------------


_DRAW_SCRIPT = """
import sys

import matplotlib
matplotlib.use("Agg")
import xarray as xr

import dynlab.plot
from dynlab.plot import draw, save_figure

with xr.open_dataset(sys.argv[1]) as saved:
    figure = draw(saved.load())
save_figure(figure, sys.argv[2])
heavy = ("dynlab.analysis", "dynlab.backends", "dynlab.models", "dynlab.simulation")
print("LOADED", sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)))
"""


def test_import_plot_and_draw_loads_no_computing_layer(tmp_path):
    import numpy as np

    import dynlab

    model = dynlab.make_model("rnn", 3, 2, seed=0)
    x = np.random.default_rng(0).standard_normal((2, 6, 2))
    saved = dynlab.write_dataset(dynlab.simulate(model, x), tmp_path / "simulate.nc")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(
        [sys.executable, "-c", _DRAW_SCRIPT, str(saved), str(tmp_path / "states.png")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "states.png").stat().st_size > 0
    assert "LOADED []" in result.stdout, result.stdout

"""Pages generated from the tables the code uses, written before Sphinx reads the sources.

Each ``*_page`` function returns Markdown built from a registry — the public names
(``dynlab.__all__`` and the submodules' ``__all__``), the models (``dynlab.MODELS``), the sweep
targets (``dynlab.sweep.TARGETS``), the commands' help (click, as ``dynlab CMD --help`` prints
it), the papers' errata (``dynlab.figures._gallery.ERRATA``) and the gallery's claims
(``gallery/claims.json``) — so the docs cannot drift from the code.  ``write_all(docs)`` writes
them to ``docs/_generated/`` (not committed); the pages include them.  The test suite calls the
same functions (``tests/test_docs.py``).
"""
from __future__ import annotations

import json
import os
import re

#: Public API sections: (title, what) → the modules whose names they list.
API_SECTIONS = (
    ("Models", ("dynlab.models", "dynlab.models.stacked")),
    ("Simulation", ("dynlab.simulation",)),
    ("Gradient flow and Jacobians", ("dynlab.analysis.gradients", "dynlab.analysis.lyapunov",
                                     "dynlab.analysis.jacobians")),
    ("Equilibria, stability, convergence", ("dynlab.analysis.equilibria", "dynlab.analysis.fixed_points",
                                            "dynlab.analysis.spectra",
                                            "dynlab.analysis.convergence", "dynlab.analysis.continuation")),
    ("Implicit networks", ("dynlab.analysis.implicit", "dynlab.train.implicit")),
    ("MASO partitions", ("dynlab.analysis.partition", "dynlab.analysis.partition_h0",
                         "dynlab.analysis.partition_codes")),
    ("Tasks and training", ("dynlab.tasks", "dynlab.train.backprop", "dynlab.train.loop")),
    ("Files", ("dynlab.io", "dynlab.torch_import")),
    ("Errors", ("dynlab.errors",)),
)
#: Submodules documented by their own ``__all__``.
SUBMODULES = ("dynlab.plot", "dynlab.sweep", "dynlab.tasks", "dynlab.progress")
#: Submodules that need an optional package (the docs build has none of them): their ``__all__`` and
#: first docstring paragraph are read from the source, never imported; autodoc imports them with the
#: package mocked (``autodoc_mock_imports`` in conf.py).
OPTIONAL = {"dynlab.torch": "torch"}


def source_names(mod: str) -> tuple:
    """(``__all__``, docstring) of a package's ``__init__.py`` read with :mod:`ast` (not imported)."""
    import ast

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        *mod.split("."), "__init__.py")
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
    return names, ast.get_docstring(tree) or ""


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _callable_or_class(obj) -> bool:
    return callable(obj) or isinstance(obj, type)


def _autosummary(names, prefix: str) -> list:
    return ["```{eval-rst}", ".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""] + \
           [f"   {prefix}{n}" for n in names] + ["```", ""]


def api_page() -> str:
    """The API reference: every public name of ``dynlab`` (its ``_EXPORTS``) by section, then the
    public submodules; data (``MODELS``, ``ACTIVATIONS``) are listed in words."""
    import importlib

    import dynlab

    exports = dynlab._EXPORTS
    lines = ["# API reference", "",
             "Every public name, generated from the docstrings (`dynlab/__init__.py` lists them; "
             "`import dynlab as dl`).  The long calls take `progress=` (see {mod}`dynlab.progress`).", ""]
    seen = set()
    for title, modules in API_SECTIONS:
        names = [n for n, m in exports.items() if m in modules and _callable_or_class(getattr(dynlab, n))]
        if not names:
            continue
        seen.update(names)
        lines += [f"## {title}", ""] + _autosummary(names, "dynlab.")
    data = [n for n in exports if not _callable_or_class(getattr(dynlab, n))]
    rest = [n for n in exports if n not in seen and n not in data]
    if rest:
        lines += ["## Other", ""] + _autosummary(rest, "dynlab.")
    lines += ["## Registries", ""] + [f"- `dynlab.{n}`: {_cell(_registry_words(n))}" for n in data] + [""]
    for mod in SUBMODULES:
        module = importlib.import_module(mod)
        names = [n for n in getattr(module, "__all__", ()) if _callable_or_class(getattr(module, n, None))]
        lines += [f"## `{mod}`", "", f"{_first_line(module.__doc__)}", ""] + _autosummary(names, f"{mod}.")
    for mod, package in OPTIONAL.items():
        names, doc = source_names(mod)
        lines += [f"## `{mod}` (needs {package})", "", f"{_first_line(doc)}", ""] + _autosummary(names, f"{mod}.")
    return "\n".join(lines)


def _first_line(doc) -> str:
    return _cell((doc or "").strip().split("\n\n")[0])


def _registry_words(name: str) -> str:
    import dynlab

    value = getattr(dynlab, name)
    if isinstance(value, dict):
        return "a dict keyed by name: " + ", ".join(f"`{k}`" for k in value)
    return repr(value)


def models_page() -> str:
    """One row per registered model: its name, equation (``DESCRIPTION``) and settings with defaults."""
    import dynlab as dl

    lines = ["| model | update | settings (defaults) |", "|---|---|---|"]
    for name, cls in dl.MODELS.items():
        opts = ", ".join(f"`{k}={v}`" for k, v in dl.model_options(name).items() if k != "seed")
        lines.append(f"| `{name}` | {_cell(cls.DESCRIPTION)} | {_cell(opts)} |")
    return "\n".join(lines) + "\n"


def targets_page() -> str:
    """One row per sweep target: its variables (with their long names) and options (with defaults)."""
    from dynlab.sweep import TARGETS

    lines = ["| target | what | variables per point | options (defaults) |", "|---|---|---|---|"]
    for name, target in TARGETS.items():
        variables = target.variables if isinstance(target.variables, dict) else {}
        vs = "; ".join(f"`{v}`: {var.long_name}" for v, var in variables.items()) or "(depend on the settings)"
        opts = ", ".join(f"`{k}={d!r}`" for k, (d, _) in target.options.items()) or "—"
        lines.append(f"| `{name}` | {_cell(target.description)} | {_cell(vs)} | {_cell(opts)} |")
    return "\n".join(lines) + "\n"


def cli_page() -> str:
    """Every command's help, as ``dynlab CMD --help`` prints it."""
    from click.testing import CliRunner

    from dynlab.cli import main

    runner = CliRunner()

    def walk(cmd, path):
        yield path, cmd
        for name in sorted(getattr(cmd, "commands", {})):
            yield from walk(cmd.commands[name], path + [name])

    lines = ["# Command reference", "",
             "Generated from the commands themselves (`dynlab CMD --help`), so it always says what the "
             "installed `dynlab` does.", ""]
    for path, _ in walk(main, []):
        out = runner.invoke(main, path + ["--help"], terminal_width=100).output
        title = "dynlab " + " ".join(path) if path else "dynlab"
        lines += [f"## `{title}`", "", "```text", out.rstrip().replace("Usage: main", "Usage: dynlab"), "```", ""]
    return "\n".join(lines)


def errata_page() -> str:
    """The papers' statements that failed dynlab's checks, with the corrected forms and their tests."""
    from dynlab.figures._gallery import ERRATA

    lines = ["| paper, statement | what holds instead | checked by |", "|---|---|---|"]
    for where, what, test in ERRATA:
        lines.append(f"| {_cell(where)} | {_cell(what)} | `{test}` |")
    return "\n".join(lines) + "\n"


def claims_page(root: str) -> str:
    """The gallery's claims table, generated from ``gallery/claims.json`` (the same block the
    gallery helpers write)."""
    from dynlab.figures._gallery import readme_block

    with open(os.path.join(root, "gallery", "claims.json"), encoding="utf-8") as fh:
        return readme_block(json.load(fh)) + "\n"


def benchmarks_page() -> str:
    """The benchmark report (``BENCHMARKS.md``, written by ``python -m benchmarks.run --markdown``) as a page."""
    return "```{include} ../../BENCHMARKS.md\n```\n"


def pages(root: str) -> dict:
    """File name → content of every generated page."""
    return {"api.md": api_page(), "models.md": models_page(), "targets.md": targets_page(), "cli.md": cli_page(),
            "errata.md": errata_page(), "claims.md": claims_page(root), "benchmarks.md": benchmarks_page()}


#: ``|x|`` in a docstring: a norm or an absolute value, which reStructuredText would read as a
#: substitution reference; the pairs are escaped (``\|x\|``) before the docstring is parsed.
_BARS = re.compile(r"(?<![\\|`])\|(?=[^\s|])([^|`\n]*?[^\s|\\])\|(?![|_`])")


def escape_bars(lines: list) -> None:
    """Escape the ``|…|`` pairs of docstring lines in place (table rows, starting with |, are kept)."""
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(("|", "+")):
            lines[i] = _BARS.sub(lambda m: "\\|" + m.group(1) + "\\|", line)


def _on_docstring(app, what, name, obj, options, lines) -> None:
    escape_bars(lines)


#: Files outside the site that its sources link to (the design page's links work on GitHub):
#: the site page that stands for each.
OUTSIDE = {"README.md": "index.md", "BENCHMARKS.md": "_generated/benchmarks.md",
           "gallery/README.md": "howto/paper-gallery.md"}
_LINK = re.compile(r"\]\((\.\./[^)#\s]+)(#[^)\s]*)?\)")


def rewrite_outside_links(docname: str, text: str, srcdir: str) -> str:
    """Markdown links of ``docname`` that leave the site (``../README.md`` from ``design.md``) →
    the page that stands for the file, or a code span naming it."""
    here = os.path.dirname(os.path.join(srcdir, docname))
    root = os.path.dirname(os.path.abspath(srcdir))

    def fix(m):
        target = os.path.normpath(os.path.join(here, m.group(1)))
        if target.startswith(os.path.abspath(srcdir) + os.sep):
            return m.group(0)
        rel = os.path.relpath(target, root)
        if rel not in OUTSIDE:
            return m.group(0)   # unknown: left as it is, so the build's warning names it
        return f"]({os.path.relpath(os.path.join(srcdir, OUTSIDE[rel]), here)})"
    return _LINK.sub(fix, text)


def _on_source(app, docname, source) -> None:
    if os.fspath(app.env.doc2path(docname)).endswith(".md"):
        source[0] = rewrite_outside_links(docname + ".md", source[0], app.srcdir)


def write_all(docs: str) -> None:
    out = os.path.join(docs, "_generated")
    os.makedirs(out, exist_ok=True)
    for name, text in pages(os.path.dirname(os.path.abspath(docs))).items():
        path = os.path.join(out, name)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:   # unchanged files keep their time: Sphinx rereads only what changed
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)


class FigureScraper:
    """sphinx-gallery image scraper for dynlab's pictures: dynlab draws matplotlib ``Figure`` objects
    without pyplot, so the matplotlib scraper sees none.  After each code block every Figure bound
    to a name of the example that was not shown before is saved and shown (in order of creation)."""

    def __init__(self):
        self.shown = {}

    def __call__(self, block, block_vars, gallery_conf):
        from matplotlib.figure import Figure
        from sphinx_gallery.scrapers import figure_rst

        src = block_vars["src_file"]
        seen = self.shown.setdefault(src, set())
        new = [v for v in block_vars["example_globals"].values() if isinstance(v, Figure) and id(v) not in seen]
        paths = []
        for fig, path in zip(new, block_vars["image_path_iterator"]):
            fig.savefig(path, dpi=110)
            seen.add(id(fig))
            paths.append(path)
        return figure_rst(paths, gallery_conf["src_dir"])

    def __repr__(self):   # sphinx-gallery caches its configuration by repr
        return "dynlab_docs.FigureScraper()"


def _on_init(app) -> None:
    write_all(app.srcdir)
    # the API page is written now, after Sphinx listed the sources autosummary scans: its stubs are
    # generated here, as ``sphinx-autogen`` would
    from sphinx.ext.autodoc.mock import mock
    from sphinx.ext.autosummary.generate import generate_autosummary_docs

    with mock(app.config.autosummary_mock_imports):     # dynlab.torch without torch (conf.py)
        generate_autosummary_docs([os.path.join(app.srcdir, "_generated", "api.md")], app=app, overwrite=False)


def setup(app):
    app.connect("builder-inited", _on_init, priority=100)   # before autosummary looks for its directives
    app.connect("autodoc-process-docstring", _on_docstring)
    app.connect("source-read", _on_source)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

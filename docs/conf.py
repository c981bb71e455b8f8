"""Sphinx configuration of dynlab's documentation site.

Built with ``.ci/docs`` (or ``python -m sphinx -W --keep-going -b html docs docs/_build/html``):
Markdown pages (MyST), the API reference generated from the docstrings of the public names
(autosummary; numpy-style docstrings read by Sphinx's napoleon), the how-to examples executed at build time
(sphinx-gallery: their pictures are made from the code on the page, so they cannot go stale), and
tables generated from the registries the code uses (``_ext/dynlab_docs.py``).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))
from dynlab_docs import FigureScraper  # noqa: E402
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("DYNLAB_QUIET", "1")   # no progress bars in the build log

import dynlab  # noqa: E402

project = "dynlab"
author = "the dynlab developers"
copyright = "the dynlab developers"
release = version = dynlab.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.napoleon",
    "sphinx_gallery.gen_gallery",
    "dynlab_docs",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated/models.md", "_generated/targets.md", "_generated/errata.md",
                    "_generated/claims.md", "examples/README.rst", "**.ipynb_checkpoints",
                    "howto/gallery/*.ipynb", "howto/gallery/*.py", "howto/gallery/*.zip", "howto/gallery/*.md5",
                    "howto/gallery/*.codeobj.json"]
suppress_warnings = ["myst.header"]   # design.md starts at ## (its title is the page's # line)

myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"
# dynlab.torch needs PyTorch, which the docs build does not install: autodoc imports it with torch mocked
autodoc_mock_imports = ["torch"]
# numpy-style docstrings, read by napoleon (part of Sphinx): it takes dynlab's singular "Example"
# sections as numpydoc would take "Examples", so no docstring is rewritten for the site's sake.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "howto/gallery",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "min_reported_time": 10 ** 6,   # no per-example timings on the pages (they belong to one machine)
    "abort_on_example_error": True,
    "image_scrapers": (FigureScraper(),),   # dynlab draws Figures without pyplot
}

html_theme = "pydata_sphinx_theme"
html_title = f"dynlab {release}"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "navbar_align": "left",
}
html_show_sourcelink = False

"""The documentation site: its generated pages follow the registries, its examples run, its link
checker finds broken links.

The site itself is built by ``.ci/docs`` (Sphinx, warnings as errors, every link within it
checked); here, without Sphinx: the functions that write its generated pages
(``docs/_ext/dynlab_docs.py``) are checked against the registries, every how-to example is run as
a script, every Markdown link between the pages resolves, and the link checker is shown to fail
on a broken link (its negative control).
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import dynlab as dl

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _ext(name):
    spec = importlib.util.spec_from_file_location(name, DOCS / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages():
    return _ext("dynlab_docs").pages(str(ROOT))


def test_the_api_page_lists_every_public_callable(pages):
    listed = set(re.findall(r"^   dynlab\.(\w+)$", pages["api.md"], flags=re.M))
    public = {n for n in dl._EXPORTS if callable(getattr(dl, n))}
    assert public <= listed, public - listed
    for module in ("plot", "sweep", "tasks", "progress"):
        names = [n for n in getattr(dl, module).__all__ if callable(getattr(getattr(dl, module), n))]
        for n in names:
            assert f"   dynlab.{module}.{n}\n" in pages["api.md"], (module, n)
    torch_names, _ = _ext("dynlab_docs").source_names("dynlab.torch")    # listed without importing torch
    assert "IRNN" in torch_names and "to_torch" in torch_names
    for n in torch_names:
        assert f"   dynlab.torch.{n}\n" in pages["api.md"], n


def test_generated_tables_follow_the_registries(pages):
    assert [m for m in re.findall(r"^\| `([\w-]+)` \|", pages["models.md"], flags=re.M)] == list(dl.MODELS)
    assert [t for t in re.findall(r"^\| `([\w-]+)` \|", pages["targets.md"], flags=re.M)] == list(dl.sweep.TARGETS)
    for name, target in dl.sweep.TARGETS.items():
        for var in (target.variables if isinstance(target.variables, dict) else {}):
            assert f"`{var}`" in pages["targets.md"], (name, var)
    from dynlab.figures._gallery import ERRATA, readme_block

    assert len(re.findall(r"^\| (?!paper|---)", pages["errata.md"], flags=re.M)) == len(ERRATA)
    import json

    claims = json.loads((ROOT / "gallery" / "claims.json").read_text(encoding="utf-8"))
    assert pages["claims.md"] == readme_block(claims) + "\n"       # the gallery's own table, at build time
    for cmd in ("simulate", "phase", "gradients", "equilibria", "spectrum", "converge", "partition", "train",
                "sweep", "models", "figures make"):
        assert f"## `dynlab {cmd}`" in pages["cli.md"], cmd


def test_every_page_is_in_the_site_and_its_links_resolve():
    generated = set(_ext("dynlab_docs").pages(str(ROOT))) | {"generated"}
    for path in sorted(DOCS.rglob("*.md")):
        if "_build" in path.parts or "_generated" in path.parts or "gallery" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text):
            if target.startswith("../") and path == DOCS / "design.md":
                assert (path.parent / target).exists(), target   # GitHub links, mapped by the site
                continue
            resolved = (path.parent / target).resolve()
            if "_generated" in resolved.parts:
                assert resolved.name in generated, (path, target)
            else:
                assert resolved.exists() and DOCS in resolved.parents, (path, target)


def test_the_link_checker_fails_on_a_broken_link(tmp_path):
    check = _ext("check_links")
    site = tmp_path / "html"
    (site / "guide").mkdir(parents=True)
    (site / "index.html").write_text('<a href="guide/a.html#eq">a</a> <a href="https://example.org/x">x</a>'
                                     '<img src="img.png">')
    (site / "img.png").write_bytes(b"")
    (site / "guide" / "a.html").write_text('<h1 id="eq">A</h1><a href="../index.html">home</a><a href="#eq">here</a>')
    assert check.broken_links(str(site)) == []
    (site / "guide" / "a.html").write_text('<h1 id="other">A</h1><a href="../missing.html">gone</a>')
    bad = check.broken_links(str(site))
    assert sorted(why.split()[0] for _, _, why in bad) == ["no", "no"] and len(bad) == 2
    assert check.main([str(site)]) == 1


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(p.name for p in (DOCS / "examples").glob("plot_*.py")))
def test_every_how_to_example_runs(example, tmp_path):
    """Run as sphinx-gallery runs them — from their folder, not as ``__main__`` (so a Dask cluster's
    spawned workers do not re-run the script) —; their own asserts check what they say."""
    env = dict(os.environ, MPLBACKEND="Agg")
    code = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='dynlab_docs_example')"
    r = subprocess.run([sys.executable, "-c", code, str(DOCS / "examples" / example)], cwd=str(DOCS / "examples"),
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]

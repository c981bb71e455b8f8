"""The project documents itself: docs/design.md matches the code, and nothing cites a file
outside the repository.

The design page's tables (figures, benchmark workloads, ``attrs["result"]`` values, index
coordinates) are checked against the registries they describe, so a new figure, workload or
result kind that is not documented fails here.  These tests read the checkout's files (the
folder above ``tests/``); they import only the installed ``dynlab``.
"""
from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"


def _section(title: str) -> str:
    text = DESIGN.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _rows(section: str) -> list[list[str]]:
    """The cells of every table row whose first cell is a `name` (pipes inside cells are \\|)."""
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows.append(cells)
    return rows


def _repo_text_files():
    for folder in ("dynlab", "tests", "benchmarks", "docs", "gallery", ".ci"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".md", ".toml", ".cfg", ".txt", "") and "__pycache__" not in path.parts:
                yield path
    for name in ("README.md", "BENCHMARKS.md", "setup.cfg", "pyproject.toml"):
        if (ROOT / name).exists():
            yield ROOT / name


def test_no_reference_to_files_outside_the_repository():
    pattern = re.compile(r"DESIGN §|DESIGN\.md|\.\./shared|/work/shared")
    found = {}
    for path in _repo_text_files():
        if path == pathlib.Path(__file__).resolve():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits = [i + 1 for i, line in enumerate(text.splitlines()) if pattern.search(line)]
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert not found, found


def test_readme_links_the_design_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/design.md" in readme
    assert DESIGN.exists()


def test_figure_list_matches_the_recipes():
    """The design page's figure table is what ``dynlab figures list`` prints, in its order."""
    from dynlab.figures import recipes

    documented = [(r[0].strip("`"), r[1], r[2]) for r in _rows(_section("3. Figures"))]
    assert documented == [(r.name, r.source, r.claim) for r in recipes().values()]


def test_benchmark_table_matches_the_workloads():
    defined = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        defined += re.findall(r'Workload\(\s*"([^"]+)"', path.read_text(encoding="utf-8"))
    documented = []
    for row in _rows(_section("4. Benchmarks")):
        documented += re.findall(r"`([^`]+)`", row[0])
    assert sorted(documented) == sorted(defined)


def test_result_table_matches_the_pictures():
    from dynlab.plot import PICTURES

    rows = _rows(_section("2. Data contract"))
    documented = {r[0].strip("`"): r[-1].strip("`") for r in rows if len(r) == 3 and r[-1].startswith("`plot_")}
    assert documented == {k: f.__name__ for k, f in PICTURES.items()}


def test_index_coordinates_as_documented():
    """time, exponent, layer and eta_time count from 1; every other index from 0."""
    from dynlab._dataset import INDEX_COORDS

    ones = {d for d, (start, _, _) in INDEX_COORDS.items() if start == 1}
    assert ones == {"time", "exponent", "layer", "eta_time"}
    assert {start for start, _, _ in INDEX_COORDS.values()} == {0, 1}
    contract = _section("2. Data contract")
    for dim in INDEX_COORDS:
        assert f"`{dim}`" in contract, dim


@pytest.mark.parametrize("name", ["README.md", "docs/design.md"])
def test_relative_links_resolve(name):
    path = ROOT / name
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
        assert (path.parent / target).exists(), f"{name} links to {target}, which does not exist"


# ------------------------------------------------------------------ the committed gallery
CLAIMS = ROOT / "gallery" / "claims.json"


def _claims():
    import json

    return json.loads(CLAIMS.read_text(encoding="utf-8"))


def test_committed_gallery_is_full_mode_and_keeps_the_rules():
    """gallery/claims.json: one stand-in record per recipe (and, beside it, the paper-scale record of
    the items run at the paper's sizes), each keeping the record contract (a negative control that
    fails, ≥ 5 seeds for training claims, a finding where the claim does not hold, the scale-down
    stated, the paper's setting and ours side by side, the verdict with its scale)."""
    from dynlab.figures import get, recipes
    from dynlab.figures._recipe import check_record

    records = _claims()
    assert [r["name"] for r in records if r.get("scale") != "paper"] == list(recipes())
    assert all(r["scale"] in ("stand-in", "paper") for r in records)
    for r in records:
        assert r["quick"] is False, r["name"]
        assert r["verdict_text"] == f"{r['verdict']} at {'paper' if r['at_paper_scale'] else 'this'} scale"
        assert r.get("beyond", False) is get(r["name"]).beyond
        assert not r.get("error"), f"{r['name']}: {r.get('error')}"
        assert r["control"]["passed"] is False, r["name"]
        check_record(get(r["name"]), r, quick=False)


def test_the_claims_table_is_generated_from_claims_json_never_typed():
    """The gallery's numbers reach the docs' claims page only through ``readme_block(claims.json)``
    at build time (``docs/_ext/dynlab_docs.py``; its output is checked in tests/test_docs_site.py):
    no page keeps a typed copy."""
    from dynlab.figures._gallery import README_BEGIN

    page = (ROOT / "docs" / "background" / "claims.md").read_text(encoding="utf-8")
    assert "```{include} ../_generated/claims.md" in page
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if "_generated" not in path.parts and "_build" not in path.parts:
            assert README_BEGIN not in path.read_text(encoding="utf-8"), path

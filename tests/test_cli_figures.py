"""`dynlab figures`: list, make (quick), claims.json, and one-line errors with exit 2."""
import json

from click.testing import CliRunner

from dynlab.cli import main
from dynlab.figures import recipes


def run(args):
    return CliRunner().invoke(main, args)


def test_list_names_every_recipe_with_its_source():
    res = run(["figures", "list"])
    assert res.exit_code == 0
    for name, r in recipes().items():
        assert name in res.output and r.source in res.output


def test_make_writes_picture_data_and_claims(tmp_path):
    res = run(["figures", "make", "irnn-fig2-phase", "--quick", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert [c["name"] for c in claims] == ["irnn-fig2-phase"] and claims[0]["verdict"] in ("holds", "does not hold")
    assert claims[0]["measured"]["noise_eq5_frac_on_curve_unsaturated"] >= 0.9      # dynlab's eq. 5 variant
    assert claims[0]["control"]["passed"] is False
    assert (tmp_path / "irnn-fig2-phase.png").stat().st_size > 5000
    assert (tmp_path / "irnn-fig2-phase.nc").exists()


def test_pdf_format(tmp_path):
    res = run(["figures", "make", "irnn-fig2-phase", "--quick", "--format", "pdf", "--out", str(tmp_path)])
    assert res.exit_code == 0 and (tmp_path / "irnn-fig2-phase.pdf").read_bytes()[:4] == b"%PDF"


def test_unknown_figure_is_one_line_exit_2(tmp_path):
    res = run(["figures", "make", "no-such-figure", "--out", str(tmp_path)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "NAME" in lines[0] and "no-such-figure" in lines[0]
    assert not (tmp_path / "claims.json").exists()


def test_gallery_page_lists_records_and_errata(tmp_path):
    from dynlab.figures._gallery import ERRATA, write_gallery

    run(["figures", "make", "irnn-fig2-phase", "--quick", "--out", str(tmp_path)])
    records = json.loads((tmp_path / "claims.json").read_text())
    text = open(write_gallery(records, tmp_path, total_seconds=12.0)).read()
    assert "## irnn-fig2-phase" in text and "(irnn-fig2-phase.png)" in text
    assert "noise_irnn_frac_on_curve_unsaturated" in text and "--quick" in text
    assert "## Errata" in text and all(src in text for src, _, _ in ERRATA)


def test_make_keeps_the_other_records_of_claims_json(tmp_path):
    run(["figures", "make", "irnn-fig6-convergence", "--quick", "--out", str(tmp_path)])
    run(["figures", "make", "irnn-fig2-phase", "--quick", "--out", str(tmp_path)])
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert [c["name"] for c in claims] == ["irnn-fig2-phase", "irnn-fig6-convergence"]  # dynlab.figures.ORDER


def test_rebuild_gallery_from_claims_json_alone(tmp_path):
    """The page rewritten from claims.json equals the one written from the records, the total
    time being the sum of the records' seconds."""
    from dynlab.figures._gallery import rebuild_gallery, write_gallery

    run(["figures", "make", "irnn-fig2-phase", "--quick", "--out", str(tmp_path)])
    records = json.loads((tmp_path / "claims.json").read_text())
    expected = open(write_gallery(records, tmp_path, total_seconds=sum(r["seconds"] for r in records))).read()
    (tmp_path / "README.md").unlink()
    assert open(rebuild_gallery(tmp_path)).read() == expected


def test_scale_and_data_options_fail_in_one_line_before_anything_runs(tmp_path):
    """--scale paper where a recipe has no paper scale here, --quick with another scale, a paper scale
    that needs the real data without --data, a --data folder that does not exist, --redraw without the
    data file: one line naming the option, exit 2, nothing written."""
    cases = [(["irnn-fig2-phase", "--scale", "paper"], "--scale"),
             (["irnn-fig2-phase", "--quick", "--scale", "stand-in"], "--scale"),
             (["irnn-table1-pixel-digits", "--scale", "paper"], "--data"),
             (["irnn-fig2-phase", "--data", str(tmp_path / "nowhere")], "--data")]
    for args, option in cases:
        res = run(["figures", "make", *args, "--out", str(tmp_path)])
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert res.exit_code == 2 and len(lines) == 1 and option in lines[0], (args, res.output)
    assert not (tmp_path / "claims.json").exists()
    res = run(["figures", "make", "irnn-fig2-phase", "--redraw", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "redraw" in res.output and not (tmp_path / "claims.json").exists()


def test_quick_is_the_quick_scale_and_a_redraw_recomputes_nothing(tmp_path):
    res = run(["figures", "make", "irnn-fig2-phase", "--scale", "quick", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    first = json.loads((tmp_path / "claims.json").read_text())[0]
    assert first["quick"] is True and first["scale"] == "quick" and first["verdict_text"].endswith("at this scale")
    assert first["setting"]["paper"]["T"] == "1000" and first["setting"]["ours"]["T"] == "300"
    res = run(["figures", "make", "irnn-fig2-phase", "--redraw", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    again = json.loads((tmp_path / "claims.json").read_text())[0]
    assert again["measured"] == first["measured"] and again["seconds"] == first["seconds"]

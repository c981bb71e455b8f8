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
    res = run(["figures", "make", "rin-gradients", "--quick", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert [c["name"] for c in claims] == ["rin-gradients"] and claims[0]["passed"] is True
    assert claims[0]["measured"]["rnn_tanh_log10_at_t1"] < -6
    assert (tmp_path / "rin-gradients.png").stat().st_size > 5000
    assert (tmp_path / "rin-gradients.nc").exists()


def test_pdf_format(tmp_path):
    res = run(["figures", "make", "rin-gradients", "--quick", "--format", "pdf", "--out", str(tmp_path)])
    assert res.exit_code == 0 and (tmp_path / "rin-gradients.pdf").read_bytes()[:4] == b"%PDF"


def test_unknown_figure_is_one_line_exit_2(tmp_path):
    res = run(["figures", "make", "no-such-figure", "--out", str(tmp_path)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "NAME" in lines[0] and "no-such-figure" in lines[0]
    assert not (tmp_path / "claims.json").exists()


def test_gallery_page_lists_records_and_errata(tmp_path):
    from dynlab.figures._gallery import ERRATA, write_gallery

    run(["figures", "make", "rin-gradients", "--quick", "--out", str(tmp_path)])
    records = json.loads((tmp_path / "claims.json").read_text())
    text = open(write_gallery(records, tmp_path, total_seconds=12.0)).read()
    assert "## rin-gradients" in text and "(rin-gradients.png)" in text
    assert "rnn_tanh_log10_at_t1" in text and "--quick" in text
    assert "## Errata" in text and all(src in text for src, _, _ in ERRATA)


def test_make_keeps_the_other_records_of_claims_json(tmp_path):
    run(["figures", "make", "rin-gradients", "--quick", "--out", str(tmp_path)])
    run(["figures", "make", "irnn-fig2-phase", "--quick", "--out", str(tmp_path)])
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert [c["name"] for c in claims] == ["irnn-fig2-phase", "rin-gradients"]  # dynlab.figures.ORDER

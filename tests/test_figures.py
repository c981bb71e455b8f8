"""Every figure recipe (docs/design.md, *Figures*), in --quick mode: its record keeps the gallery's
contract (a negative control that fails, seeds for training claims, a finding when the claim does
not hold, the scale-down), the data round-trips through NetCDF, and the picture can be redrawn from
the saved file alone.  Then the contract itself, on toy recipes: it refuses what the rules forbid."""
import json
import os

import numpy as np
import matplotlib
import pytest
import xarray as xr

from dynlab.figures import Recipe, get, recipes, run_recipe
from dynlab.figures._recipe import RecipeError, check_record, setting, setting_attr, write_claims
from dynlab.figures._stats import (VERDICTS, beyond_2se, comparison, decide, gate, level_test, mean_se, paired,
                                   seeds_for)
from dynlab.io import read_dataset

matplotlib.use("Agg")
NAMES = list(recipes())


@pytest.mark.parametrize("name", NAMES)
def test_quick_recipe_keeps_the_contract_and_redraws_from_file(name, tmp_path):
    import dataclasses

    from conftest import quick_figure_dataset

    recipe = dataclasses.replace(get(name), compute=lambda quick: quick_figure_dataset(name))   # computed once
    record = run_recipe(recipe, tmp_path, quick=True)  # RecipeError if the contract is broken
    assert not record.get("error"), f"{name}: {record.get('error')}"
    assert record["control"]["passed"] is False
    assert record["measured"], f"{name}: a claim must report the numbers that decide it"
    assert record["passed"] or record["finding"]
    assert record["verdict"] in VERDICTS and record["quote"] and record["gate_level"]
    assert os.path.getsize(tmp_path / f"{name}.png") > 5000
    ds = read_dataset(tmp_path / f"{name}.nc")
    again = recipe.check(ds)
    assert bool(again["passed"]) == (record["passed"] or record["verdict"] == "inconclusive" and again["passed"]), \
        f"{name}: the check differs on the saved file"
    assert again["gate"]["met"] == record["gate"]["met"]
    assert bool(again["control"]["passed"]) is False
    fig = recipe.draw(ds)
    assert fig.axes, f"{name}: redraw from the file gave no axes"
    json.loads(json.dumps(record))  # claims.json must be able to hold it
    write_claims([record], tmp_path)


def test_unknown_figure_names_the_parameter():
    from dynlab.errors import ParameterError

    with pytest.raises(ParameterError, match="name"):
        get("no-such-figure")


# ------------------------------------------------------------------ the record contract, on toys
def _toy(check, *, trains=False, scaling="toy sizes", table=False, quote="a toy claim", gate_level="none"):
    import matplotlib.pyplot as plt

    def compute(quick):
        return xr.Dataset({"v": ("i", [1.0, 2.0])}, attrs={"scaling": scaling,
                                                            "setting": setting_attr(data="toy", T=10, D=4)})

    def draw(ds):
        fig, ax = plt.subplots()
        ax.plot(ds["v"].values)
        return fig

    def full(ds):          # the verdict's fields every check reports (gate, effect, seeds)
        out = check(ds)
        if isinstance(out, dict):
            out = {"gate": {"met": True, "measured": {}}, "effect": {"name": "x", "ours": 1.0, "se": 0.1},
                   "seeds": 1, **out}
        return out

    return Recipe(name="toy-claim", source="nowhere", claim="toy", compute=compute, draw=draw, check=full,
                  trains=trains, table=table, quote=quote, gate=gate_level, paper=setting(data="toy", T=100, D=4))


CONTROL_FAILS = {"setting": "untrained", "measured": {"x": 0.1}, "passed": False}


def test_a_claim_without_a_negative_control_is_refused(tmp_path):
    with pytest.raises(RecipeError, match="negative control"):
        run_recipe(_toy(lambda ds: {"passed": True, "x": 1.0}), tmp_path, quick=True)


def test_a_control_that_passes_turns_the_record_into_an_error(tmp_path):
    rec = run_recipe(_toy(lambda ds: {"passed": True, "x": 1.0,
                                      "control": {"setting": "untrained", "measured": {"x": 1.0}, "passed": True}}),
                     tmp_path, quick=True)
    assert rec["passed"] is False and "does not discriminate" in rec["error"]


def test_a_claim_that_does_not_hold_needs_its_finding(tmp_path):
    with pytest.raises(RecipeError, match="finding"):
        run_recipe(_toy(lambda ds: {"passed": False, "x": 1.0, "control": dict(CONTROL_FAILS)}), tmp_path, quick=True)
    rec = run_recipe(_toy(lambda ds: {"passed": False, "x": 1.0, "control": dict(CONTROL_FAILS),
                                      "finding": "x was 1.0, not 2"}), tmp_path, quick=True)
    assert rec["finding"] == "x was 1.0, not 2" and not rec.get("error")


@pytest.mark.parametrize("quick,seeds,ok", [(True, 3, True), (True, 2, False), (False, 4, False), (False, 5, True)])
def test_a_training_claim_needs_its_seeds(quick, seeds, ok, tmp_path):
    def check(ds):
        return {"passed": True, "x": 1.0, "control": dict(CONTROL_FAILS),
                "per_seed": [{"seed": s, "x": 1.0} for s in range(seeds)]}

    if ok:
        assert len(run_recipe(_toy(check, trains=True), tmp_path, quick=quick)["per_seed"]) == seeds
    else:
        with pytest.raises(RecipeError, match="seeds"):
            run_recipe(_toy(check, trains=True), tmp_path, quick=quick)


def test_the_scale_down_must_be_stated(tmp_path):
    with pytest.raises(RecipeError, match="scaling"):
        run_recipe(_toy(lambda ds: {"passed": True, "x": 1.0, "control": dict(CONTROL_FAILS)}, scaling=""),
                   tmp_path, quick=True)


def test_check_record_accepts_a_complete_record():
    rec = {"passed": True, "control": dict(CONTROL_FAILS), "scaling": "s", "per_seed": [{"seed": s} for s in range(5)],
           "gate": {"met": True, "measured": {}}, "effect": {"name": "x", "ours": 1.0, "se": 0.1}, "seeds": 5,
           "verdict": "holds", "setting": {"paper": setting(D=4), "ours": setting(D=4)}}
    check_record(_toy(None, trains=True), rec, quick=False)


@pytest.mark.parametrize("change,match", [
    ({"quote": ""}, "paper's words"), ({"gate_level": ""}, "competence gate"),
])
def test_a_recipe_must_quote_the_paper_and_declare_its_gate(change, match, tmp_path):
    with pytest.raises(RecipeError, match=match):
        run_recipe(_toy(lambda ds: {"passed": True, "x": 1.0, "control": dict(CONTROL_FAILS)}, **change), tmp_path,
                   quick=True)


def test_a_gate_that_is_not_met_makes_the_record_inconclusive(tmp_path):
    """Below the gate the check is not judged: the verdict is *inconclusive at this scale*, with
    the gate's numbers in the finding, whatever the check said."""
    g = gate([level_test("accuracy", [0.11, 0.1, 0.09], 0.1)])
    for passed in (True, False):
        rec = run_recipe(_toy(lambda ds: {"passed": passed, "x": 1.0, "control": dict(CONTROL_FAILS), "gate": g,
                                          "finding": "x"}), tmp_path, quick=True)
        assert rec["verdict"] == "inconclusive" and rec["passed"] is False
        assert rec["finding"].startswith("inconclusive at this scale") and "accuracy" in rec["finding"]


def test_comparison_verdicts_and_power_against_their_definitions():
    """holds: beyond 2 SE; does not hold: the effect of interest excluded (mean + 2 SE below it);
    underpowered otherwise; seeds_needed = ⌈n (Z SE / interest)²⌉ (Z = 2.84, 80 % power)."""
    vals = [1.0, 1.2, 0.8, 1.1, 0.9]
    m, se, n = mean_se(vals)
    assert comparison("a", vals, interest=0.5)["verdict"] == "holds"
    small = comparison("b", [0.01, -0.01, 0.02, -0.02, 0.0], interest=0.5)
    assert small["verdict"] == "does not hold"
    wide = comparison("c", [0.5, -0.5, 0.6, -0.4, 0.1], interest=0.3)
    assert wide["verdict"] == "underpowered"
    m, se, n = mean_se([0.5, -0.5, 0.6, -0.4, 0.1])
    assert wide["seeds_needed"] == int(np.ceil(n * (2.84 * se / 0.3) ** 2))
    neg = comparison("d", [-v for v in vals], interest=0.5, direction="negative")
    assert neg["verdict"] == "holds" and neg["mean"] < 0
    assert comparison("e", [1.0, float("nan")], interest=0.1)["verdict"] == "does not hold"
    # the record's verdict from the parts
    assert decide(True, True, []) == "holds" and decide(False, True, []) == "does not hold"
    assert decide(True, False, []) == "inconclusive"
    assert decide(False, True, [wide, small]) == "does not hold"
    assert decide(False, True, [wide, comparison("a", vals, interest=0.5)]) == "underpowered"


GOOD_TABLE = {"title": "Table 1 stand-in", "columns": ["model", "ours (digits)", "paper (MNIST)"],
              "rows": [["iRNN", 0.91, 98.13], ["LSTM", 0.85, "—"]], "note": "digits for MNIST"}


@pytest.mark.parametrize("change,match", [
    (None, None),
    ({"table": None}, "needs \"table\""),
    ({"columns": ["model", "ours", "theirs"]}, "paper"),
    ({"rows": [["iRNN", 0.91]]}, "3 cells"),
    ({"rows": []}, "no rows"),
    ({"rows": [["iRNN", [1, 2], 3.0]]}, "numbers or strings"),
    ({"note": " "}, "substitution"),
])
def test_a_table_recipe_needs_a_well_formed_table_with_the_papers_numbers(change, match, tmp_path):
    table = dict(GOOD_TABLE)
    if change and "table" in change:
        table = None
    elif change:
        table.update(change)

    def check(ds):
        out = {"passed": True, "x": 1.0, "control": dict(CONTROL_FAILS)}
        if table is not None:
            out["table"] = table
        return out

    if match is None:
        rec = run_recipe(_toy(check, table=True), tmp_path, quick=True)
        from dynlab.figures._gallery import write_gallery

        page = open(write_gallery([rec], tmp_path)).read()
        assert "**Table 1 stand-in**" in page and "| iRNN | 0.91 | 98.13 |" in page and "| LSTM | 0.85 | — |" in page
        assert "*digits for MNIST*" in page
    else:
        with pytest.raises(RecipeError, match=match):
            run_recipe(_toy(check, table=True), tmp_path, quick=True)


# ------------------------------------------------------------------ seed statistics
def test_seed_statistics_against_closed_forms():
    m, se, n = mean_se([1.0, 2.0, 3.0, 4.0])
    assert (m, n) == (2.5, 4) and se == pytest.approx((5 / 3) ** 0.5 / 2, rel=1e-15)
    assert beyond_2se([1.0, 1.1, 0.9, 1.05, 0.95])["passed"]
    assert not beyond_2se([1.0, -1.0, 0.5, -0.4, 0.2])["passed"]           # noise around 0
    assert beyond_2se([-1.0, -1.1, -0.9], direction="negative")["passed"]
    assert not beyond_2se([5.0])["passed"]                                  # one seed decides nothing
    assert not beyond_2se([1.0, float("nan"), 1.0])["passed"]               # a diverged seed
    # paired: a large common seed effect cancels; unpaired it would swamp the difference
    a, b = [10.0, 20.0, 30.0, 40.0, 50.0], [9.9, 19.8, 29.9, 39.85, 49.9]
    assert paired(a, b)["passed"] and not paired(a, b, larger="b")["passed"]
    assert paired(a, b)["diff_mean"] == pytest.approx(0.13, rel=1e-12)
    assert seeds_for(True) == [0, 1, 2] and seeds_for(False) == [0, 1, 2, 3, 4]


def test_cli_exit_status_follows_the_rules(tmp_path, monkeypatch):
    """A claim that does not hold: exit 0 with the finding; a control that passes or a broken
    recipe: exit 1, the other figures still written."""
    from click.testing import CliRunner

    import dynlab.figures as figs
    from dynlab.cli import main

    finding = _toy(lambda ds: {"passed": False, "x": 1.0, "control": dict(CONTROL_FAILS), "finding": "no effect"})
    bad_ctl = _toy(lambda ds: {"passed": True, "x": 1.0,
                               "control": {"setting": "u", "measured": {}, "passed": True}})
    broken = _toy(lambda ds: 1 / 0)
    table = {"a-finding": finding, "b-badcontrol": bad_ctl, "c-broken": broken}
    monkeypatch.setattr(figs, "get", lambda n: table[n])
    res = CliRunner().invoke(main, ["figures", "make", "a-finding", "--out", str(tmp_path), "--quick"])
    assert res.exit_code == 0, res.output
    assert "does not hold: no effect" in res.output and "FAIL" not in res.output
    for name in ("b-badcontrol", "c-broken"):
        res = CliRunner().invoke(main, ["figures", "make", "a-finding", name, "--out", str(tmp_path), "--quick"])
        assert res.exit_code == 1, res.output
        assert "broke" in res.output and "Traceback" not in res.output
        assert (tmp_path / "claims.json").exists()


# ------------------------------------------------------------------ issue 42: scale, gates on arms, minimum effects
def test_a_holds_needs_the_minimum_effect_declared_from_the_task():
    """Beyond 2 SE is not enough: a significant effect below the declared minimum does not hold (the
    data exclude the effect that matters), one that straddles it is underpowered."""
    tiny = [0.010, 0.011, 0.009, 0.0105, 0.0095]                # 0.01 ± 0.0003: beyond 2 SE, below 0.02
    assert beyond_2se(tiny)["passed"] and comparison("t", tiny, interest=0.02)["verdict"] == "does not hold"
    near = [0.015, 0.025, 0.02, 0.012, 0.028]                   # 0.02 ± 0.003: straddles 0.025
    assert comparison("n", near, interest=0.025)["verdict"] == "underpowered"
    assert comparison("h", near, interest=0.01)["verdict"] == "holds"


def test_matches_or_beats_is_one_sided():
    from dynlab.figures._stats import noninferior

    assert noninferior("beats", [8.0, 9.0, 7.5, 8.5, 8.2], margin=1.9)["verdict"] == "holds"      # far better
    assert noninferior("tie", [0.2, -0.3, 0.1, -0.1, 0.0], margin=1.9)["verdict"] == "holds"
    assert noninferior("worse", [-5.0, -5.5, -4.8, -5.2, -5.1], margin=1.9)["verdict"] == "does not hold"
    assert noninferior("wide", [-3.0, 1.0, -4.0, 2.0, -1.0], margin=1.9)["verdict"] == "underpowered"


def test_an_arm_that_did_not_learn_makes_its_comparison_inconclusive():
    from dynlab.figures._stats import gated, level_part

    learned = level_test("A learns", [0.05, 0.06, 0.04], 0.15, direction="below", scope="arm")
    idle = level_test("B learns", [0.16, 0.17, 0.165], 0.15, direction="below", scope="arm")
    part = comparison("A − B", [1.0, 1.1, 0.9], interest=0.5)
    assert gated(part, [learned])["verdict"] == "holds"
    g = gated(part, [learned, idle])
    assert g["verdict"] == "inconclusive" and not g["passed"] and g["not_competent"] == ["B learns"]
    report = gate([learned, idle])
    assert report["met"] and not report["arms_met"]              # arm items gate their parts, not the record
    bad = comparison("C − A", [-1.0, -1.1, -0.9], interest=0.5)
    assert decide(False, True, [g, bad]) == "does not hold" and decide(False, True, [g, part]) == "inconclusive"
    assert level_part("below", [0.05, 0.06, 0.04], 0.1)["verdict"] == "holds"
    assert level_part("above it", [0.5, 0.6, 0.55], 0.1)["verdict"] == "does not hold"


def test_scale_and_the_papers_setting_side_by_side(tmp_path):
    """Every record carries the paper's setting and ours; the verdict says at which scale; a paper that
    states a setting is matched only by ours equal in every stated key."""
    from dynlab.figures._recipe import SETTING_KEYS, Scale, at_paper_scale

    paper = setting(data="adding task", T=200, D=128, batch=128, steps=1000, lr=1e-2)
    assert at_paper_scale(paper, setting(data="adding task", T=200, D=128, batch=128, steps=1000, lr=0.01))
    assert not at_paper_scale(paper, setting(data="adding task", T=200, D=32, batch=128, steps=1000, lr=0.01))
    assert at_paper_scale(setting(D=2), setting(D=2, T=7)) and not at_paper_scale(setting(), setting(D=2))
    assert Scale.of(True).quick and Scale.of(False).name == "stand-in" and Scale.of("paper").paper
    rec = run_recipe(_toy(lambda ds: {"passed": True, "x": 1.0, "control": dict(CONTROL_FAILS)}), tmp_path, quick=True)
    assert set(rec["setting"]["paper"]) == set(SETTING_KEYS) == set(rec["setting"]["ours"])
    assert rec["at_paper_scale"] is False and rec["verdict_text"] == "holds at this scale"


def test_a_paper_scale_record_stands_beside_the_stand_in_one(tmp_path):
    """claims.json keys a record by its name and whether it is the paper-scale run; the page tallies
    them by scale and keeps the items beyond the papers apart."""
    import dataclasses

    from dynlab.figures._gallery import headline, write_gallery

    toy = _toy(lambda ds: {"passed": True, "x": 1.0, "control": dict(CONTROL_FAILS)})
    toy = dataclasses.replace(toy, scales=("quick", "stand-in", "paper"),
                              paper=setting(data="toy", D=4))           # ours (toy, D = 4) is the paper's
    a = run_recipe(toy, tmp_path, scale="stand-in")
    b = run_recipe(toy, tmp_path, scale="paper")
    assert (tmp_path / "toy-claim.png").exists() and (tmp_path / "toy-claim.paper.png").exists()
    write_claims([a], tmp_path)
    write_claims([b], tmp_path)
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert [c.get("scale") for c in claims] == ["stand-in", "paper"]
    beyond = dict(a, name="beyond-toy", beyond=True, at_paper_scale=False)
    text = headline(claims + [beyond])
    assert "at paper scale, 2: 2 hold" in text and "Beyond the papers: 1" in text
    page = open(write_gallery(claims + [beyond], tmp_path)).read()
    assert "# Beyond the papers" in page and "toy-claim at paper scale" in page and "full sizes" not in page
    with pytest.raises(Exception, match="scale"):
        run_recipe(_toy(lambda ds: {"passed": True}), tmp_path, scale="paper")   # the toy has no paper scale


def test_redraw_rechecks_the_saved_data_without_computing(tmp_path):
    import dataclasses

    calls = []
    toy = _toy(lambda ds: {"passed": True, "x": float(ds["v"].sum()), "control": dict(CONTROL_FAILS)})
    base = toy.compute
    toy = dataclasses.replace(toy, compute=lambda s: calls.append(s) or base(s))
    first = run_recipe(toy, tmp_path, quick=True)
    again = run_recipe(toy, tmp_path, quick=True, redraw=True)
    assert len(calls) == 1 and again["measured"]["x"] == first["measured"]["x"] == 3.0

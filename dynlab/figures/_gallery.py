"""The gallery page: ``README.md`` beside the rendered figures, written from the claim records."""
from __future__ import annotations

import os
import platform
import sys

#: The papers' statements that failed our checks, with the corrected forms (docs/design.md, *Figures*) and
#: the test that checks the corrected form.
ERRATA = (
    ("iRNN paper, Prop. 2",
     "printed as e_K ≤ ρ^K e_1 (with ‖g_1 − h_eq‖ on the right); what holds is the contraction bound "
     "e_K ≤ ρ^K e_0, ρ = 1 − αη + η‖U‖₂. The printed form fails for small K on a case the tests exhibit.",
     "tests/test_stability.py"),
    ("iRNN paper, SiRNN vs iRNN",
     "\"SiRNN run over K steps equals iRNN(K)\" is not an identity: for φ = identity, iRNN(K) maps h to "
     "(A^K − I) h with A = I + η(U − αI), while K SiRNN steps map h to (η(U − αI))^K h.",
     "tests/test_errata.py"),
    ("Implicit-networks paper, eq. 2",
     "eq. 2 as printed, ∂Y/∂W = f'(X) Y / (1 − f'(X̃) W), has f'(X) — at the external input X — in the "
     "numerator where f'(X̃), at the total input X̃ = W Y + Q X + T, belongs (only the tilde is missing): "
     "solving the paper's line above it, ∂Y/∂W = f'(X̃)(W ∂Y/∂W + Y), gives ∂Y/∂W = f'(X̃) Y / (1 − f'(X̃) W).",
     "tests/test_implicit.py"),
    ("MASO paper, Theorem 3",
     "the random-initial-state regulariser omits the output layer: for ½-MSE, E[L̃] − L = σ²/(2N) Σ ‖W_out 𝒜_h‖²_F; "
     "for cross-entropy the printed form is not the second-order term, which is "
     "σ²/(2N) Σ Tr(Mᵀ(diag p − ppᵀ)M), M = W_out 𝒜_h.",
     "tests/test_partition.py"),
)


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list) and len(v) <= 12 and all(isinstance(x, (int, float)) for x in v):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, (list, dict)):
        return f"({len(v)} values, see claims.json)"
    return str(v)


def _cell(text) -> str:
    """Text for a markdown table cell: pipes escaped, no line breaks."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def verdict_of(r: dict) -> str:
    """The record's verdict (``_stats.VERDICTS``); records written before verdicts existed read
    ``passed`` as *holds* / *does not hold* (until dynlab 0.3, ``dynlab._deprecate.REMOVED_IN``,
    which drops ``passed`` from the records)."""
    return r.get("verdict") or ("holds" if r["passed"] else "does not hold")


def result_word(r: dict) -> str:
    """The verdict as the gallery prints it (bold unless it holds), or ``ERROR`` (control passes)."""
    if r.get("error"):
        return "**ERROR**"
    v = verdict_of(r)
    return v if v == "holds" else f"**{v}**"


def effect_text(r: dict) -> str:
    """``name = ours ± SE (n seeds; paper P)`` of a record's headline effect ('' when it has none)."""
    e = r.get("effect")
    if not isinstance(e, dict) or not isinstance(e.get("ours"), (int, float)):
        return ""
    paper = f"; paper {_fmt(e['paper'])}" if isinstance(e.get("paper"), (int, float)) else ""
    units = f" {e['units']}" if e.get("units") else ""
    return (f"{e['name']} = {_fmt(float(e['ours']))} ± {_fmt(float(e['se']))}{units} "
            f"({r.get('seeds', e.get('n', '?'))} seed{'s' if r.get('seeds', e.get('n', 1)) != 1 else ''}{paper})")


def gate_text(r: dict) -> str:
    """Whether the record's competence gate was met, with its numbers."""
    g = r.get("gate")
    if not isinstance(g, dict):
        return "—"
    nums = "; ".join(f"{k}: {_fmt(v)}" for k, v in g.get("measured", {}).items())
    return ("met" if g.get("met") else "**not met**") + (f" ({nums})" if nums else "")


def tally(records: list) -> str:
    """``a hold, b do not hold, c inconclusive, d underpowered`` (and errors) over the records."""
    from ._stats import VERDICTS

    counts = {v: sum(1 for r in records if verdict_of(r) == v and not r.get("error")) for v in VERDICTS}
    words = {"holds": "hold", "does not hold": "do not hold", "inconclusive": "inconclusive",
             "underpowered": "underpowered"}
    text = ", ".join(f"{counts[v]} {words[v]}" for v in VERDICTS)
    errors = sum(1 for r in records if r.get("error"))
    return text + (f", {errors} with a control that passes (error)" if errors else "")


def papers_and_beyond(records: list) -> tuple[list, list]:
    """(the records of the four papers' claims, the records beyond the papers)."""
    return [r for r in records if not r.get("beyond")], [r for r in records if r.get("beyond")]


def tally_by_scale(records: list) -> str:
    """The tally split by scale: "at paper scale: …; at this (reduced) scale: …" (a part with no
    record is left out)."""
    paper = [r for r in records if r.get("at_paper_scale")]
    other = [r for r in records if not r.get("at_paper_scale")]
    out = []
    if paper:
        out.append(f"at paper scale, {len(paper)}: {tally(paper)}")
    if other:
        out.append(f"at this (reduced) scale, {len(other)}: {tally(other)}")
    return "; ".join(out)


def headline(records: list) -> str:
    """The page's headline: the papers' records tallied by scale, and the records beyond the papers."""
    mine, beyond = papers_and_beyond(records)
    items = len({r["name"] for r in mine})
    text = (f"The four papers: {len(mine)} records of {items} claims — {tally_by_scale(mine)}."
            if mine else "")
    if beyond:
        text += f" Beyond the papers: {len(beyond)} — {tally(beyond)}."
    return text.strip()


def anchor(r: dict) -> str:
    """The section anchor of a record (GitHub's: lower case, spaces to hyphens)."""
    return r["name"] + ("-at-paper-scale" if r.get("scale") == "paper" else "")


def heading(r: dict) -> str:
    return r["name"] + (" at paper scale" if r.get("scale") == "paper" else "")


def setting_cell(r: dict, key: str) -> str:
    """One setting of a record for the table: ours, with the paper's beside it where they differ."""
    st = r.get("setting") or {}
    ours, paper = (st.get("ours") or {}).get(key, "—"), (st.get("paper") or {}).get(key, "—")
    if paper in ("—", None) or paper == ours:
        return str(ours)
    return f"{ours} (paper {paper})"


def verdict_words(r: dict) -> str:
    """The verdict with its scale ("does not hold at this scale")."""
    from ._recipe import scale_words

    return r.get("verdict_text") or f"{verdict_of(r)} {scale_words(r)}"


def _seed_table(per_seed: list) -> list[str]:
    """A markdown table of the per-seed numbers (scalar columns only)."""
    if not per_seed or not isinstance(per_seed[0], dict):
        return [f"- per seed: {_fmt(per_seed)}"]
    cols = [k for k, v in per_seed[0].items() if isinstance(v, (int, float, bool))]
    cols = (["seed"] if "seed" in cols else []) + [c for c in cols if c != "seed"][:7]
    lines = ["", "| " + " | ".join(_cell(c) for c in cols) + " |", "|" + "---:|" * len(cols)]
    for row in per_seed:
        lines.append("| " + " | ".join(_cell(_fmt(row.get(c, ""))) for c in cols) + " |")
    return lines + [""]


def table_markdown(t: dict) -> list[str]:
    """The markdown lines of a record's ``table`` (``Recipe`` contract): title, table, note."""
    lines = [f"**{_cell(t['title'])}**", "", "| " + " | ".join(_cell(c) for c in t["columns"]) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(t["columns"]))) + "|"]
    for row in t["rows"]:
        lines.append("| " + " | ".join(_cell(_fmt(c)) for c in row) + " |")
    return lines + ["", f"*{_cell(t['note'])}*", ""]


TABLE_HEAD = ("| figure | source | claim | data | T | D | batch | steps | lr | gate | verdict | effect ± SE | "
              "control | time (s) |")


def _table_rows(records: list) -> list[str]:
    from ._recipe import SETTING_KEYS

    lines = [TABLE_HEAD, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---:|"]
    for r in records:
        c = r.get("control", {})
        ctl = "—" if not c else ("passes (**error**)" if c.get("passed") else "fails, as it must")
        g = r.get("gate")
        gw = "—" if not isinstance(g, dict) else ("met" if g.get("met") else "**not met**")
        if isinstance(g, dict) and g.get("met") and g.get("arms_met") is False:
            gw = "met; **an arm not**"
        word = result_word(r)
        from ._recipe import scale_words
        word = word + " " + scale_words(r) if not r.get("error") else word
        lines.append(f"| [`{heading(r)}`](#{anchor(r)}) | {_cell(r['source'])} | {_cell(r['claim'])} | "
                     + " | ".join(_cell(setting_cell(r, k)) for k in SETTING_KEYS)
                     + f" | {gw} | {word} | {_cell(effect_text(r))} | {ctl} | {r['seconds']:.1f} |")
    return lines


def _section(r: dict, fmt: str) -> list[str]:
    from ._recipe import SETTING_KEYS
    from . import get

    try:
        doc = (sys.modules[get(r["name"]).compute.__module__].__doc__ or "").strip()
    except Exception:  # a record of a recipe no longer present: its record alone
        doc = ""
    lines = ["", f"## {heading(r)}", "", f"**{r['source']}.** {doc}", ""]
    st = r.get("setting") or {}
    if st.get("ours"):
        lines += ["| setting | " + " | ".join(SETTING_KEYS) + " |", "|---|" + "---|" * len(SETTING_KEYS)]
        for who in ("paper", "ours"):
            lines.append(f"| {who} | " + " | ".join(_cell((st.get(who) or {}).get(k, "—")) for k in SETTING_KEYS)
                         + " |")
        lines += ["", f"Scale: **{'the paper' if r.get('at_paper_scale') else 'reduced'}** "
                      f"(`--scale {r.get('scale', 'stand-in')}`)"
                  + (f"; at paper scale: {r['paper_cost']}" if r.get("paper_cost") else "") + ".", ""]
    if r.get("scaling"):
        lines += [f"*Scale-down:* {r['scaling']}", ""]
    if r.get("engine"):
        lines += [f"*Trained with:* {r['engine']}", ""]
    lines += [f"![{r['name']}]({r.get('file', r['name'])}.{fmt})", ""]
    if r.get("quote"):
        lines += [f"The paper: *{r['quote']}*", ""]
    if r.get("gate_level"):
        lines += [f"Competence gate (declared before the run): {r['gate_level']} — {gate_text(r)}.", ""]
    lines += [f"Claim checked: {r['claim']} — **{verdict_words(r)}**"
              + (f"; {effect_text(r)}" if effect_text(r) else "") + ".", ""]
    if r.get("finding"):
        lines += [f"**Finding:** {r['finding']}", ""]
    if r.get("error"):
        lines += [f"**Error:** {r['error']}", ""]
    if r.get("power"):
        lines += ["Power of each comparison (the effect that matters is the minimum effect declared in the recipe "
                  "from the task; the paper's number beside it where it gives one):", "",
                  "| comparison | ours (mean ± SE) | effect that matters | seeds | seeds to resolve it | verdict |",
                  "|---|---:|---:|---:|---:|---|"]
        for p in r["power"]:
            lines.append(f"| {_cell(p['name'])} | {_fmt(p['mean'])} ± {_fmt(p['se'])} | "
                         f"{'—' if p.get('interest') is None else _fmt(p['interest'])}"
                         f"{' (paper ' + _fmt(p['paper']) + ')' if isinstance(p.get('paper'), (int, float)) else ''}"
                         f" | {p['n']} | {p['seeds_needed'] if p.get('seeds_needed') is not None else '—'} | "
                         f"{p['verdict']} |")
        lines += [""]
    if r.get("table"):
        lines += table_markdown(r["table"])
    lines += [f"- `{k}` = {_fmt(v)}" for k, v in r["measured"].items()]
    if r.get("per_seed"):
        lines += ["", f"Per seed ({len(r['per_seed'])} seeds):"] + _seed_table(r["per_seed"])
    if "control" in r:
        c = r["control"]
        lines += ["", f"Negative control — {c.get('setting', '')}: the same check "
                  f"{'**passes — the check does not discriminate**' if c.get('passed') else 'fails, as it must'}:", ""]
        lines += [f"- `{k}` = {_fmt(v)}" for k, v in c.get("measured", {}).items()]
    scale = r.get("scale", "stand-in")
    lines += ["", "```bash", f"dynlab figures make {r['name']}" + (" --quick" if r.get("quick") else "")
              + (f" --scale {scale}" if scale == "paper" else ""), "```"]
    return lines


def write_gallery(records: list, out_dir, *, fmt: str = "png", total_seconds: float | None = None) -> str:
    """Write ``out_dir/README.md``: the headline tallied by scale, the table (the paper's setting and
    ours in its columns), every figure of the four papers with its source, claim, setting, measured
    numbers, per-seed numbers, negative control and verdict "at this scale" / "at paper scale" (or the
    finding instead), the items beyond the papers in their own section, the paper-scale costs, then
    the errata.  Every number on the page comes from the records (``claims.json``).  Returns the path."""
    from .. import __version__

    quick = any(r.get("quick") for r in records)
    mine, beyond = papers_and_beyond(records)
    lines = ["# dynlab figure gallery", "",
             "Every reproducible figure of the four papers (listed in dynlab's docs/design.md, *Figures*),",
             "regenerated by one command from the library's public API, each with the paper's claim checked on the",
             "figure's own data, and the same check run on a negative control (a setting where the effect must be",
             "absent), which must fail:", "",
             "```bash", "dynlab figures all" + (f" --out {os.path.basename(os.path.normpath(out_dir)) or '.'} --quick"
                                               if quick else ""),
             "dynlab figures make irnn-fig3-add --scale paper --out gallery     # an item at the paper's sizes",
             "dynlab figures make irnn-table1-pixel-digits --scale paper --data ~/data --out gallery  # real MNIST",
             "```", "",
             f"Each figure also writes its data (`NAME.nc`, redrawable without recomputation: `--redraw`) and a record "
             f"in `claims.json`, from which this page is generated (dynlab {__version__}, "
             f"Python {platform.python_version()}, {os.cpu_count()} cores"
             + (f"; {total_seconds / 60:.1f} min in all" if total_seconds is not None else "") + ")"
             + (" in **--quick** mode (reduced sizes)." if quick else "."), "",
             "**Scale is part of every verdict.** Each record states the paper's setting and ours side by side (data, "
             "sequence length T, hidden size D, batch, training steps, learning rate; the table's columns show ours, "
             "with the paper's in brackets where it differs). A verdict is said *at paper scale* when our setting is "
             "the paper's in everything the paper states, and *at this scale* otherwise: a claim that does not hold "
             "at this scale may hold at the paper's. The papers' data sets (MNIST, Noisy-MNIST, HAR-2) are not on "
             "this machine, so scikit-learn's 8×8 digits and synthetic tasks stand in for them, as each record says; "
             "`--data DIR` gives a recipe the real files and `--scale paper` the paper's sizes and budgets (where "
             "an item was not run at paper scale, its record gives the cost estimated on two cores).", "",
             "Every record carries the paper's claim in its own words, restated as the paper means it (one-sided "
             "where it says \"matches\", its typical case where it says \"tends to\", the equation its own "
             "experiment used), a *competence gate* declared in the recipe before the run — the level every arm the "
             "verdict compares must reach at each condition (every T, every data set): above chance, the majority "
             "class, a named trivial predictor —, the headline effect ± SE over the seeds, and for each comparison its "
             "power (the minimum effect declared from the task, our SE, the seeds that would resolve it). The "
             "verdict: **holds** (beyond 2 SE, paired where two methods share seeds, and at least the minimum "
             "effect); **does not hold** (the data exclude the effect that matters); **inconclusive** (an arm "
             "that decides did not reach its gate: at this scale the networks do not learn enough for the "
             "comparison to mean anything); **underpowered** (the data agree both with no effect and with the "
             "effect that matters).", "",
             f"**{headline(records)}**", ""] + _table_rows(mine)
    for r in mine:
        lines += _section(r, fmt)
    if beyond:
        lines += ["", "# Beyond the papers", "",
                  "Items the four papers do not make, checked with the same rules (a gate, a negative control, "
                  "seeds) and kept out of the papers' tally:", ""] + _table_rows(beyond)
        for r in beyond:
            lines += _section(r, fmt)
    costs = [r for r in records if r.get("paper_cost") and not r.get("at_paper_scale")]
    if costs:
        lines += ["", "## The paper scale: estimated cost on two cores", "",
                  "The records not run at the paper's sizes, with the cost of `--scale paper` estimated on this "
                  "machine (a few steps timed at the paper's sizes, extrapolated to the paper's budget):", "",
                  "| figure | paper-scale run |", "|---|---|"]
        lines += [f"| [`{heading(r)}`](#{anchor(r)}) | {_cell(r['paper_cost'])} |" for r in costs]
    lines += ["", "## Errata", "",
              "Statements of the papers that failed our checks, and the corrected forms that the tests check:", ""]
    lines += [f"- **{src}**: {text} (checked in `{where}`)" for src, text, where in ERRATA]
    path = os.path.join(out_dir, "README.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def rebuild_gallery(out_dir, *, fmt: str = "png") -> str:
    """Rewrite ``out_dir/README.md`` from ``out_dir/claims.json`` alone (no recomputation); the
    total time is the sum of the records' seconds."""
    import json

    with open(os.path.join(out_dir, "claims.json")) as f:
        records = json.load(f)
    return write_gallery(records, out_dir, fmt=fmt, total_seconds=sum(r.get("seconds", 0.0) for r in records))


#: the markers of the generated block in the project README (``readme_block``)
README_BEGIN = "<!-- gallery-claims: generated from gallery/claims.json by dynlab.figures._gallery.readme_block; do not edit -->"
README_END = "<!-- /gallery-claims -->"


def readme_block(records: list) -> str:
    """The project README's gallery table, generated from the claim records: one line per figure
    with its verdict, gate, headline effect ± SE and control (so the README never types a number
    the gallery does not hold)."""
    lines = [README_BEGIN, "", headline(records), "",
             "| figure | scale-down | gate | verdict | effect ± SE | negative control |",
             "|---|---|---|---|---|---|"]
    for r in papers_and_beyond(records)[0] + papers_and_beyond(records)[1]:
        c = r.get("control", {})
        cn = ", ".join(f"{k} = {_fmt(v)}" for k, v in list(c.get("measured", {}).items())[:2]
                       if isinstance(v, (int, float)) and not isinstance(v, bool))
        g = r.get("gate")
        gw = "—" if not isinstance(g, dict) else ("met" if g.get("met") else "not met")
        lines.append(f"| `{heading(r)}`{' (beyond the papers)' if r.get('beyond') else ''} | "
                     f"{_cell(r.get('scaling', ''))} | {gw} | {_cell(verdict_words(r) if not r.get('error') else result_word(r))} | "
                     f"{_cell(effect_text(r))} | "
                     + _cell(f"{c.get('setting', '—')}: {'passes (error)' if c.get('passed') else 'fails'}"
                             + (f" ({cn})" if cn else "")) + " |")
    return "\n".join(lines + ["", README_END])


def update_readme(readme_path, records: list) -> bool:
    """Replace the generated block of ``readme_path`` with ``readme_block(records)``; True if changed."""
    text = open(readme_path).read()
    i, j = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    new = text[:i] + readme_block(records) + text[j:]
    if new != text:
        with open(readme_path, "w") as f:
            f.write(new)
    return new != text

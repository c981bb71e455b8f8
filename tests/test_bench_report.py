"""BENCHMARKS.md is one current report written by ``python -m benchmarks.run --markdown FILE``.

A run of two tiny workloads (injected in place of the real ones, so the test takes a second)
must replace FILE with one report: the date, the command, the machine and versions, one table
with a row per implementation of every workload run (speed against the workload's baseline,
agreement with its reference), the workloads' facts, and the workloads not run named.
"""
from __future__ import annotations

import re
import time

import numpy as np

from conftest import benchmarks_module


def _workloads():
    harness = benchmarks_module("harness")

    def build_a(quick):
        x = np.arange(4.0)
        return ([harness.Impl("ref", lambda: x * 2), harness.Impl("fast", lambda: x + x),
                 harness.Impl("wrong", lambda: x * 3)], {"sizes": "n=4", "ratios": [("fast / ref", "fast", "ref")]})

    def build_b(quick):
        return ([harness.Impl("slow", lambda: time.sleep(0.002) or 1.0), harness.Impl("quick", lambda: 1.0)], {})

    return {"tiny-a": harness.Workload("tiny-a", "two ways to double", build_a, baseline="ref", repeat=2),
            "tiny-b": harness.Workload("tiny-b", "sleep or not", build_b, baseline="slow", repeat=2),
            "tiny-c": harness.Workload("tiny-c", "never run", build_b, baseline="slow", repeat=2)}


def test_markdown_replaces_the_file_with_one_report(tmp_path, monkeypatch):
    run = benchmarks_module("run")
    monkeypatch.setattr(run, "all_workloads", _workloads)
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# an old lab notebook\n\nsession 1 …\n")
    assert run.main(["tiny-a", "tiny-b", "--markdown", str(out)]) == 0
    text = out.read_text()
    assert "old lab notebook" not in text and text.count("# dynlab benchmarks") == 1
    assert re.search(r"\*\*Date\*\*: \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    assert "**Command**: `python -m benchmarks.run tiny-a tiny-b --markdown" in text
    assert "**Machine**:" in text and "numpy " in text and "**Versions**:" in text
    assert "**Not run in this report**: `tiny-c`" in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| workload | implementation |") and len(table) == 1 + 5   # header + 5 rows
    assert len([line for line in text.splitlines() if line.startswith("| workload")]) == 1   # one table
    rows = {line.split("|")[2].strip(): line for line in table[1:]}
    assert "reference" in rows["ref (baseline)"] and "**MISMATCH**" in rows["wrong"]
    assert rows["fast"].rstrip().endswith("| 0.0e+00 |")                               # agrees exactly: x + x = 2x
    speed = float(re.search(r"\| ([0-9.e+]+)× \|", rows["quick"]).group(1))
    assert speed > 1.5                                                                # 2 ms sleep vs none: faster
    assert "- **`tiny-a`**: two ways to double. sizes: n=4; fast / ref:" in text

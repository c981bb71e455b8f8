"""Benchmarks (docs/design.md, *Benchmarks*): ``python -m benchmarks.run [workload ...] [--repeat N] [--markdown]``.

Timings are never pytest tests; results are recorded in BENCHMARKS.md.
"""

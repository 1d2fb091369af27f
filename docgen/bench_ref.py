"""The benchmark reference: the table of every result file in bench/results/ (bench.readme_table renders it), so
every figure on the benchmarks page is a result file's.

    python -m docgen        # writes docs/reference/benchmarks.md among the others
"""

from __future__ import annotations

from docgen.common import NOTE, Page


def render() -> Page:
    from bench.readme_table import load_all, table

    results = load_all()
    lines = ["# Benchmark table", "", NOTE, "",
             "One row per result file of `bench/results/` (`make bench` writes them; the schema is "
             "`bench/schema.py`): the figure the ratio is taken on, baseline and candidate measured in the same run, "
             "the ratio with its per-repeat range, the repeats and what \"better\" means. What each benchmark "
             "measures and how to read it: [benchmarks](../benchmarks.md).", "", table(results), ""]
    problems = [] if results else ["bench/results/ holds no result file"]
    return Page("reference/benchmarks.md", "\n".join(lines), problems)

"""The benchmark table (bench/readme_table.py) is generated from bench/results/*.json at every site build
(docs/reference/benchmarks.md, written by `python -m docgen`), so every figure in it is the JSON's; the table has a
row per result file and notices a changed figure.

    pytest -q tests/benchmarks/test_bench_table.py
"""

from __future__ import annotations

import doctest

import bench.common
import bench.readme_table as rt
import bench.schema
import bench.trajectory_grpo


def test_every_result_has_a_row_on_the_generated_page() -> None:
    from docgen.bench_ref import render

    page = render()
    results = rt.load_all()
    assert results and not page.problems
    for r in results:
        assert f"| `{r.benchmark}.json` |" in page.text, r.benchmark
    assert rt.table(results) in page.text


def test_a_changed_figure_changes_the_table() -> None:
    results = rt.load_all()
    r = results[0]
    m = r.arms[r.candidate].figures[r.metric]
    bumped = m.model_copy(update={"median": m.median * 3 + 1})
    arms = {**r.arms, r.candidate: r.arms[r.candidate].model_copy(
        update={"figures": {**r.arms[r.candidate].figures, r.metric: bumped}})}
    changed = [r.model_copy(update={"arms": arms}), *results[1:]]
    assert rt.table(changed) != rt.table(results)


def test_doctests() -> None:
    for module in (rt, bench.schema, bench.common, bench.trajectory_grpo):
        assert doctest.testmod(module).failed == 0

"""The README's benchmark table equals the one generated from bench/results/*.json (bench/readme_table.py), so
every figure in it is the JSON's; and the comparison notices a changed figure.

The two comparisons of the README with bench/results are `slow`: `make bench` rewrites those files, so in the fast
suite they would fail in a working tree between a benchmark run and its README commit (`make slow-test` runs
them). The generator's own behaviour stays fast.
"""

from __future__ import annotations

import doctest

import pytest

import bench.common
import bench.readme_table as rt
import bench.schema
import bench.trajectory_grpo


@pytest.mark.slow
def test_readme_table_matches_results() -> None:
    text = rt.README.read_text("utf-8")
    assert rt.current(text) == rt.table(rt.load_all()), "run `python -m bench.readme_table` and commit README.md"


@pytest.mark.slow
def test_every_result_has_a_row() -> None:
    body = rt.current(rt.README.read_text("utf-8"))
    for r in rt.load_all():
        assert f"`{r.benchmark}.json`" in body


def test_a_changed_figure_changes_the_table() -> None:
    results = rt.load_all()
    r = results[0]
    m = r.arms[r.candidate].figures[r.metric]
    bumped = m.model_copy(update={"median": m.median * 3 + 1})
    arms = {**r.arms, r.candidate: r.arms[r.candidate].model_copy(
        update={"figures": {**r.arms[r.candidate].figures, r.metric: bumped}})}
    changed = [r.model_copy(update={"arms": arms}), *results[1:]]
    assert rt.table(changed) != rt.table(results)


def test_splice_round_trip() -> None:
    text = f"intro\n{rt.START}\nold\n{rt.END}\noutro\n"
    new = rt.splice(text, "| new |")
    assert rt.current(new) == "| new |" and new.startswith("intro\n") and new.endswith("outro\n")


def test_doctests() -> None:
    for module in (rt, bench.schema, bench.common, bench.trajectory_grpo):
        assert doctest.testmod(module).failed == 0

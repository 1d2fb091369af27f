"""The report's outcome table (issue 29): runs, correct runs and accuracy per outcome, the selective reading
(accuracy over the runs that answered, and coverage), and the counterfactual in which every `forced` run abstained.

    .venv/bin/pytest tests/eval/test_outcome_table.py -q
"""

from __future__ import annotations

import pytest

from omnidecision.eval.report import build_report, render_markdown
from omnidecision.protocol.records import OUTCOMES, JudgeResult, RunRecord


def run(name: str, outcome: str, correct: bool | None, method: str = "lenient_match") -> RunRecord:
    return RunRecord(run_id=name, task_id=name, outcome=outcome, answer="a",
                     judge=JudgeResult(correct=correct, method=method))


RUNS = [
    run("acc-right", "accepted", True), run("acc-right2", "accepted", True), run("acc-wrong", "accepted", False),
    run("forced-right", "forced", True), run("forced-wrong", "forced", False), run("forced-wrong2", "forced", False),
    # a forced answer on a task without a gold answer: wrong as run, right had it abstained
    run("forced-nogold", "forced", None, method="no_gold"),
    run("forced-unanswerable", "forced", False, method="unanswerable"),
    run("abstain-nogold", "insufficient", None, method="no_gold"),  # abstained where it should: right
    run("abstain-gold", "insufficient", False),
    run("budget-right", "budget", True), run("stuck-wrong", "stuck", False),
    RunRecord(run_id="err", task_id="err", outcome="error", error="dead endpoint"),
]


def test_rows_per_outcome_recombine_to_the_overall_accuracy():
    rep = build_report(RUNS)
    rows = rep["outcome_table"]["rows"]
    assert set(rows) == set(OUTCOMES)
    assert {o: (r["runs"], r["correct"]) for o, r in rows.items()} == {
        "accepted": (3, 2), "insufficient": (2, 1), "forced": (5, 1), "budget": (1, 1), "stuck": (1, 0),
        "error": (1, 0)}
    assert sum(r["runs"] for r in rows.values()) == rep["n"] == len(RUNS)
    assert sum(r["correct"] for r in rows.values()) == rep["correct"] == 5
    # accuracy_by_outcome is read from the table
    assert rep["accuracy_by_outcome"] == {o: r["accuracy"] for o, r in rows.items()}
    assert rows["forced"]["accuracy"] == pytest.approx(1 / 5)


def test_selective_reading_and_forced_abstained_counterfactual():
    t = build_report(RUNS)["outcome_table"]
    n = len(RUNS)
    # as run: answered = every run but insufficient (2) and error (1)
    assert t["as_run"]["answered"] == n - 3 and t["as_run"]["coverage"] == pytest.approx((n - 3) / n)
    # correct answered: acc-right ×2, forced-right, budget-right (the right abstention is not an answer)
    assert t["as_run"]["selective_accuracy"] == pytest.approx(4 / (n - 3))
    assert t["as_run"]["accuracy"] == pytest.approx(5 / n)
    cf = t["forced_abstained"]
    assert (cf["forced"], cf["lost"], cf["gained"]) == (5, 1, 2)  # forced-right lost; no-gold and unanswerable gained
    assert cf["correct"] == 5 - 1 + 2 and cf["accuracy"] == pytest.approx(6 / n)
    assert cf["answered"] == n - 3 - 5 and cf["coverage"] == pytest.approx((n - 8) / n)
    assert cf["selective_accuracy"] == pytest.approx(3 / (n - 8))


def test_without_forced_runs_the_counterfactual_changes_nothing():
    rs = [r for r in RUNS if r.outcome != "forced"]
    t = build_report(rs)["outcome_table"]
    assert t["forced_abstained"]["accuracy"] == t["as_run"]["accuracy"]
    assert t["forced_abstained"]["selective_accuracy"] == t["as_run"]["selective_accuracy"]
    assert (t["forced_abstained"]["lost"], t["forced_abstained"]["gained"]) == (0, 0)


def test_markdown_shows_both_readings():
    md = render_markdown(build_report(RUNS))
    assert "| forced | 5 | 1 | 20.0% |" in md
    assert "| as run | 38.5% | 10 | 76.9% | 40.0% |" in md
    assert "| had every forced run abstained | 46.2% | 5 | 38.5% | 60.0% |" in md
    assert "Abstaining instead of the 5 forced answers would lose 1 right answers and gain 2" in md
    empty = build_report([])
    assert empty["outcome_table"]["as_run"]["coverage"] is None
    render_markdown(empty)

"""The report's outcome table, and what accuracy would be had every `forced` run abstained.

    python -m omnidecision.eval.report runs/eval/trajectories.jsonl --out runs/eval   # report.json: "outcome_table"

`outcome_table(records)` gives, per outcome (accepted, insufficient, forced, budget, stuck, error), the runs, the
correct runs and the accuracy within (the report's `accuracy_by_outcome` is read from it), and two readings:

- `as_run`: the runs as they ended. *Answered* runs submitted an answer (every outcome but `insufficient`, which
  abstains, and `error`, which has none); `coverage = answered / n`, `selective_accuracy = correct answered /
  answered` (accuracy where the agent chose to answer), next to `accuracy` over all runs;
- `forced_abstained`: the counterfactual in which every `forced` run (the finalizer's check failed to the end, and
  its best draft was submitted anyway) had abstained instead. An abstention is correct exactly on a task without a
  gold answer (judge method `no_gold` or `unanswerable`: the right move is to decline), else wrong: so a forced run
  that was right becomes wrong (`lost`), and one on an unanswerable task becomes right (`gained`). Its `accuracy`,
  `coverage` and `selective_accuracy` read as above with the forced runs moved to the abstentions.

Correctness is the report's (`eval.correctness.is_correct`: judged correct, or abstained on a task without an answer).

    >>> from omnidecision.protocol.records import JudgeResult, RunRecord
    >>> rs = [RunRecord(run_id="a", task_id="a", outcome="forced", judge=JudgeResult(correct=True, method="x")),
    ...       RunRecord(run_id="b", task_id="b", outcome="accepted", judge=JudgeResult(correct=True, method="x"))]
    >>> t = outcome_table(rs)
    >>> t["as_run"]["accuracy"], t["forced_abstained"]["accuracy"], t["forced_abstained"]["lost"]
    (1.0, 0.5, 1)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from omnidecision.eval.correctness import is_correct  # the one definition of a correct run
from omnidecision.protocol.records import OUTCOMES
from omnidecision.stats import rate

NO_ANSWER_METHODS = ("no_gold", "unanswerable")  # judge methods of tasks whose right move is to abstain
NOT_ANSWERED = ("insufficient", "error")  # outcomes that submit no answer


def abstention_correct(r: Any) -> bool:
    """Whether abstaining would be right on this run's task: it has no gold answer."""
    return r.judge is not None and r.judge.method in NO_ANSWER_METHODS


def _reading(answered: list[bool], correct: list[bool]) -> dict[str, Any]:
    n, k = len(correct), sum(correct)
    a = sum(answered)
    ka = sum(c for c, ans in zip(correct, answered, strict=True) if ans)
    return {"n": n, "correct": k, "accuracy": rate(k, n), "answered": a, "coverage": rate(a, n),
            "selective_accuracy": rate(ka, a)}


def outcome_table(records: Iterable[Any]) -> dict[str, Any]:
    """Rows per outcome and the `as_run` / `forced_abstained` readings (module docstring)."""
    rs = list(records)
    correct = [is_correct(r) for r in rs]
    rows = {o: {"runs": 0, "correct": 0} for o in OUTCOMES}
    for r, ok in zip(rs, correct, strict=True):
        rows[r.outcome]["runs"] += 1
        rows[r.outcome]["correct"] += ok
    for row in rows.values():
        row["accuracy"] = rate(row["correct"], row["runs"])
    answered = [r.outcome not in NOT_ANSWERED for r in rs]
    forced = [r.outcome == "forced" for r in rs]
    cf_correct = [abstention_correct(r) if f else ok for r, ok, f in zip(rs, correct, forced, strict=True)]
    cf_answered = [a and not f for a, f in zip(answered, forced, strict=True)]
    counterfactual = _reading(cf_answered, cf_correct)
    counterfactual.update({
        "forced": sum(forced),
        "lost": sum(ok and not cf for ok, cf in zip(correct, cf_correct, strict=True)),
        "gained": sum(cf and not ok for ok, cf in zip(correct, cf_correct, strict=True)),
    })
    return {"rows": rows, "as_run": _reading(answered, correct), "forced_abstained": counterfactual}


def outcome_lines(rep: dict[str, Any]) -> list[str]:
    """report.md's outcome section: the table, then the two readings side by side."""

    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.1f}%"

    table = rep["outcome_table"]
    lines = ["## Outcomes", "", "| outcome | runs | correct | accuracy within |", "|---|---|---|---|",
             *(f"| {o} | {row['runs']} | {row['correct']} | {pct(row['accuracy'])} |"
               for o, row in table["rows"].items())]
    run, cf = table["as_run"], table["forced_abstained"]
    lines += ["", "| reading | accuracy | answered | coverage | accuracy over answered (selective) |",
              "|---|---|---|---|---|",
              f"| as run | {pct(run['accuracy'])} | {run['answered']} | {pct(run['coverage'])} | "
              f"{pct(run['selective_accuracy'])} |",
              f"| had every forced run abstained | {pct(cf['accuracy'])} | {cf['answered']} | {pct(cf['coverage'])} "
              f"| {pct(cf['selective_accuracy'])} |",
              "", f"Abstaining instead of the {cf['forced']} forced answers would lose {cf['lost']} right answers and "
              f"gain {cf['gained']} (an abstention is right only on a task without a gold answer)."]
    return lines

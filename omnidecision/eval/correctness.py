"""What counts as a correct run: the one definition the report, the outcome table, `compare` and the progress audit
share (judged correct; on a task without a gold answer, declining with outcome `insufficient`).

    python -m omnidecision.eval.report runs/eval/trajectories.jsonl --out runs/eval   # report.json: "accuracy"

    >>> from omnidecision.protocol.records import JudgeResult, RunRecord
    >>> no_gold = JudgeResult(correct=None, method="no_gold")
    >>> [is_correct(RunRecord(run_id="a", task_id="a", outcome=o, judge=no_gold)) for o in ("insufficient", "forced")]
    [True, False]
"""

from __future__ import annotations

from omnidecision.protocol.records import RunRecord


def unanswerable(r: RunRecord) -> bool:
    return r.judge is not None and r.judge.method == "no_gold"


def is_correct(r: RunRecord) -> bool:
    if unanswerable(r):
        return r.outcome == "insufficient"
    return r.judge is not None and r.judge.correct is True


def is_correct_with_draft(r: RunRecord) -> bool:
    """Correct when an abstaining run's drafted answer is submitted instead: judged by its `draft_judge` (on a task
    without an answer, a submitted draft is a guess, so wrong). Other runs: as `is_correct`."""
    if r.outcome == "insufficient" and r.draft_answer is not None:
        return r.draft_judge is not None and r.draft_judge.correct is True
    return is_correct(r)


def judge_failed(r: RunRecord) -> bool:
    return not unanswerable(r) and (r.judge is None or r.judge.correct is None)

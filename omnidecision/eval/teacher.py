"""A trained planner against the teacher whose runs it learned from: the eval report's `teacher` block.

    omnidecision eval --config configs/eval/synthetic-tiny-local.yaml --teacher runs/eval/teacher

`--teacher` names the teacher's own eval of the same tasks (its output folder, or its trajectories.jsonl). The
planner's runs and the teacher's are paired by task (`stats.paired_in_loop`): a planner below its teacher is said
in report.md's headline and kept in report.json (`teacher.below`), never silently shipped. Tasks only one side ran
are left out and counted (`unpaired`); two evals that share no task are an error, not a comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnidecision.eval.correctness import is_correct
from omnidecision.preflight import Check
from omnidecision.protocol.records import RunRecord
from omnidecision.rollout.store import load_records
from omnidecision.stats import paired_in_loop, per_task

TRAJECTORIES = "trajectories.jsonl"


def teacher_runs_path(teacher: str | Path) -> Path:
    """The teacher eval's trajectories: `teacher` itself when it is a file, else `teacher/trajectories.jsonl`.
    A missing one is an error naming what was looked for."""
    path = Path(teacher)
    runs = path / TRAJECTORIES if path.is_dir() else path
    if not runs.is_file():
        raise FileNotFoundError(f"--teacher {teacher}: no teacher runs at {runs} (give the teacher's eval output "
                                f"folder or its {TRAJECTORIES})")
    return runs


@dataclass
class TeacherRuns:
    """The teacher's runs, read once by the checklist (`teacher_check`) for both the check and the report."""

    path: Path  # the trajectories file read (`teacher_runs_path`)
    records: list[RunRecord]


def read_teacher(teacher: str | Path) -> TeacherRuns:
    """The teacher's runs: every shard of its eval folder, or the one file named (`rollout.store.load_records`)."""
    runs = teacher_runs_path(teacher)
    return TeacherRuns(runs, load_records(teacher if Path(teacher).is_dir() else runs))


def teacher_check(teacher: str | Path | None, task_ids: set[str]) -> tuple[list[Check], TeacherRuns | None]:
    """The eval checklist's `teacher` check (its dry run and its run) and the runs it read: the teacher's runs are
    readable and share tasks with the tasks this eval selected; nothing without `teacher`."""
    if teacher is None:
        return [], None
    try:
        runs = read_teacher(teacher)
    except (OSError, ValueError) as exc:  # a missing file; a malformed line (TrajectoryFileError)
        return [Check(what="teacher", status="error", detail=str(exc))], None
    shared = {r.task_id for r in runs.records} & task_ids
    if not shared:
        return [Check(what="teacher", status="error",
                      detail=f"--teacher {teacher}: the teacher's runs share no task with the {len(task_ids)} tasks "
                             "of this eval (evaluate the teacher on the same tasks first)")], runs
    return [Check(what="teacher", status="ok",
                  detail=f"{teacher}: teacher runs on {len(shared)} of this eval's {len(task_ids)} tasks (the "
                         "report compares on those, paired by task)")], runs


def teacher_block(records: list[RunRecord], teacher: TeacherRuns) -> dict[str, Any]:
    """The planner's accuracy against the teacher's on the tasks both ran: {"teacher", "planner", "delta" (planner
    − teacher), "ci95" (paired task bootstrap), "p_value", "n" (shared tasks), "unpaired", "below", "runs"}.

    >>> from omnidecision.protocol.records import JudgeResult
    >>> def run(task, ok):
    ...     return RunRecord(run_id=task, task_id=task, outcome="accepted", answer="x",
    ...                      judge=JudgeResult(correct=ok, method="exact"))
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / TRAJECTORIES).write_text("".join(run(t, True).model_dump_json() + "\\n" for t in "abc"))
    >>> _, theirs = teacher_check(folder, {"a", "b", "c"})
    >>> block = teacher_block([run("a", True), run("b", False), run("c", False)], theirs)
    >>> block["teacher"], block["planner"], block["delta"], block["below"], block["n"]
    (1.0, 0.3333, -0.6667, True, 3)
    """
    runs = teacher.path
    mine = per_task((r.task_id, is_correct(r)) for r in records)
    theirs = per_task((r.task_id, is_correct(r)) for r in teacher.records)
    shared = sorted(set(mine) & set(theirs))
    if not shared:
        raise ValueError(f"--teacher {runs}: the teacher's runs share no task with this eval: a planner "
                         "is compared with its teacher on the same tasks (evaluate the teacher on them first)")
    pair = paired_in_loop({t: theirs[t] for t in shared}, {t: mine[t] for t in shared}, ("teacher", "planner"))
    teacher_acc = sum(theirs[t] for t in shared) / len(shared)
    planner_acc = sum(mine[t] for t in shared) / len(shared)
    return {"teacher": round(teacher_acc, 4), "planner": round(planner_acc, 4), "delta": pair["delta"],
            "ci95": pair["ci95"], "p_value": pair["p_value"], "n": pair["n"],
            "unpaired": len(set(mine) ^ set(theirs)), "below": planner_acc < teacher_acc, "runs": str(runs)}


def teacher_lines(block: dict[str, Any] | None) -> list[str]:
    """report.md's line for the `teacher` block (nothing without one)."""
    if not block:
        return []
    low, high = block["ci95"]
    verdict = "**Below its teacher**" if block["below"] else "At or above its teacher"
    unpaired = f"; {block['unpaired']} task(s) only one side ran left out" if block["unpaired"] else ""
    return [f"{verdict}: {block['planner']:.1%} against the teacher's {block['teacher']:.1%} on the same "
            f"{block['n']} task(s) (planner − teacher {block['delta']:+.3f}, paired 95% CI [{low:+.3f}, "
            f"{high:+.3f}]){unpaired}; the teacher's runs: {block['runs']}", ""]

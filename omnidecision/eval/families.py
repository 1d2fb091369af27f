"""Per-family accuracy of the noise-free scripted teacher (the rule planner), the teacher with habits (the demo's
collection teacher), the same teacher with its habits off (its i.i.d. noise only) and the copy-rule baseline planner
on a synthetic suite.

The copy rule ("the first actionable need with the tool its digest line lists", `backends.first_actionable`) solves
the original chains; the planning families exist to make it fail. Both planners share every other role (the
noise-free teacher's decompose, critic and finalizer) and the offline tools, so the table isolates planning.

    python -m omnidecision.eval.families --n 300 --seed 21 --out docs/results/synth-families.json

writes the JSON (per family: n and each planner's accuracy) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.backends.first_actionable import FirstActionableBackend
from omnidecision.backends.teacher import HABIT_TEACHER, TeacherBackend
from omnidecision.tasks.grading import judge_offline
from omnidecision.tasks.schema import Task
from omnidecision.tasks.synth import FAMILIES, PLANNING_FAMILIES, load_suite, write_suite


def _correct(task: Task, record: Any) -> bool:
    # an unanswerable task is solved by an `insufficient` stop, as in the demo's evaluation
    return judge_offline(task, record.answer).correct if task.answerable else record.outcome == "insufficient"


async def _run(tasks: list[Task], planner: TeacherBackend) -> list[bool]:
    teacher = TeacherBackend(noise=0.0)
    return [_correct(t, await run_task(t, AgentConfig(), {"default": teacher, "planner": planner})) for t in tasks]


def family_report(n: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        write_suite(n, seed, tmp)
        tasks = load_suite(tmp)
        noise_only = {**HABIT_TEACHER, "habits": 0.0}
        results = {name: asyncio.run(_run(tasks, planner)) for name, planner in
                   (("teacher", TeacherBackend(noise=0.0)), ("teacher_habits", TeacherBackend(**HABIT_TEACHER)),
                    ("teacher_noise_only", TeacherBackend(**noise_only)),
                    ("first_actionable", FirstActionableBackend()))}
    rows: dict[str, dict[str, Any]] = defaultdict(dict)
    for family in [*FAMILIES, "all"]:
        idx = [k for k, t in enumerate(tasks) if family in ("all", t.category)]
        rows[family] = {"n": len(idx), "planning": family in PLANNING_FAMILIES,
                        **{name: round(sum(r[k] for k in idx) / len(idx), 3) if idx else None
                           for name, r in results.items()}}
    return {"command": f"python -m omnidecision.eval.families --n {n} --seed {seed}", "n": n, "seed": seed,
            "families": dict(rows)}


def markdown(report: dict[str, Any]) -> str:
    lines = ["| family | planning | n | teacher (rule) | teacher with habits | habits off (noise only) | "
             "first-actionable |", "|---|---|---|---|---|---|---|"]
    for family, r in report["families"].items():
        lines.append(f"| {family} | {'yes' if r['planning'] else ''} | {r['n']} | {r['teacher']:.3f} | "
                     f"{r['teacher_habits']:.3f} | {r['teacher_noise_only']:.3f} | {r['first_actionable']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--seed", type=int, default=21)
    p.add_argument("--out", type=Path, default=None, help="write the JSON here")
    a = p.parse_args(argv)
    report = family_report(a.n, a.seed)
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()

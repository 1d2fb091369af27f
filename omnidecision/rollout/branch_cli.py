"""`omnidecision branch`: branch a recorded run at a step with a decision (mounted by `omnidecision/cli.py`).

The parent's task, agent config, environment and backends come from the collection's recipe: `manifest.json` next to
the trajectory file (what `omnidecision collect` and `omnidecision eval` write), or `--recipe`. Bad input (an unknown
run id, a step out of range, a decision that is not JSON or not an action, an edited record, a missing recipe) exits
2 with one line naming what was wrong. docs/rollout.md has the walk-through.

    omnidecision branch --trajectories runs/habits/trajectories.shard-0-of-1.jsonl --run-id syn-0-00003-s0-2c1bffea \
        --step 1 --decision '{"action": "finish"}' --policy teacher --out runs/branches.jsonl
    omnidecision branch --trajectories runs/habits/trajectories.shard-0-of-1.jsonl --run-id syn-0-00003-s0-2c1bffea \
        --step 1 --recorded --policy recorded --dry-run
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any, Optional

import typer

logger = logging.getLogger(__name__)


class BadInput(ValueError):
    """What the command refuses, in one line."""


def find_run(path: Path, run_id: str) -> Any:
    """The `RunRecord` with `run_id` in a trajectory JSONL file; only its line is validated (a malformed line
    elsewhere does not matter). Raises BadInput naming file:line and the field, or the ids the file holds."""
    from pydantic import ValidationError

    from omnidecision.protocol.records import RunRecord

    if not path.is_file():
        raise BadInput(f"{path}: no such trajectory file")
    seen = 0
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            seen += 1
            if run_id not in line:
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{lineno}: not JSON: {exc.msg}") from exc
            if not isinstance(data, dict) or data.get("run_id") != run_id:
                continue
            try:
                return RunRecord.model_validate(data)
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(x) for x in first.get("loc", ()))
                raise BadInput(f"{path}:{lineno}: field {loc or '<root>'}: {first.get('msg')}") from exc
    raise BadInput(f"{path}: no run with run_id {run_id!r} ({seen} records)")


def load_parent_recipe(trajectories: Path, recipe: Path | None, tasks: Path | None) -> Any:
    """The collection recipe of the parent: `--recipe`, else the `recipe` of `manifest.json` next to the trajectory
    file (fields a collect recipe does not have, such as eval's `serve:`, left out); `tasks` replaces tasks.path."""
    from omnidecision.collect.recipe import CollectRecipe, RecipeError, load_recipe, recipe_from_dict

    overrides = [f"tasks.path={tasks}"] if tasks is not None else []
    try:
        if recipe is not None:
            return load_recipe(recipe, overrides)
        manifest = trajectories.parent / "manifest.json"
        if not manifest.is_file():
            raise BadInput(f"{manifest}: no manifest next to the trajectory file; give --recipe (the collect recipe "
                           f"of the parent run)")
        try:
            data = json.loads(manifest.read_text("utf-8"))["recipe"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise BadInput(f"{manifest}: no readable recipe in it ({type(exc).__name__}: {exc})") from exc
        data = {k: v for k, v in data.items() if k in CollectRecipe.model_fields}
        return recipe_from_dict(data, str(manifest), overrides)
    except RecipeError as exc:
        raise BadInput(str(exc)) from exc


def _environment(recipe: Any, task_id: str) -> tuple[Any, Any]:
    """(the task, its tool services) from the recipe's task source and environment."""
    from omnidecision.collect.recipe import RecipeError
    from omnidecision.collect.runner import build_services, select_tasks

    try:
        _, selected = select_tasks(recipe.model_copy(update={"shard": "0/1"}))
    except (RecipeError, ValueError, OSError) as exc:
        raise BadInput(f"cannot load the recipe's tasks (tasks.path {recipe.tasks.path}): {exc}; run where the "
                       f"collection ran, or give --tasks") from exc
    task = next((t for t in selected if t.id == task_id), None)
    if task is None:
        raise BadInput(f"task {task_id!r} is not among the recipe's {len(selected)} tasks ({recipe.tasks.path})")
    services = build_services(recipe, selected)
    return task, services(task) if callable(services) else services


async def _judged(record: Any, task: Any, recipe: Any) -> Any:
    """Grade the branch as its collection graded its runs (the recipe's judge settings)."""
    from omnidecision.backends.factory import build_backend
    from omnidecision.collect.runner import judge_draft, judge_record

    if not recipe.judge.enabled:
        return record
    llm = build_backend(recipe.judge.llm) if recipe.judge.llm is not None else None
    record.judge = await judge_record(task, record, llm, recipe.judge.scorer)
    record.draft_judge = await judge_draft(task, record, llm, recipe.judge.scorer)
    return record


def _dry_run_report(parent: Any, step: int, task: Any, recipe: Any, policy: Any, reply: Any, seed: int, tools: str,
                    out: Path | None) -> dict[str, Any]:
    from omnidecision.ledger import actionable_need_indices, finish_available
    from omnidecision.rollout.branch import branch_id, decision_problem
    from omnidecision.rollout.resume import restore

    point = restore(parent, step, task, recipe.agent, policy.backends)
    state = point.ledger
    problem = decision_problem(state, task, recipe.agent, reply)
    return {"parent_run_id": parent.run_id, "task_id": task.id, "step": step, "parent_steps": len(parent.steps),
            "parent_outcome": parent.outcome,
            "state": {"step": state.step, "actionable_needs": actionable_need_indices(state),
                      "finish_available": finish_available(state), "tool_calls": dict(state.tool_call_counts),
                      "last_rejected": state.last_rejected.model_dump() if state.last_rejected else None,
                      "usage_so_far": point.run.usage.model_dump(), "invalid_so_far": point.run.invalid},
            "decision": reply.text, "recorded_decision": parent.steps[step].raw_output,
            "loop_accepts": problem is None, "rejection": problem,
            "policy": policy.name, "tools": tools, "seed": seed,
            "branch_run_id": branch_id(parent.run_id, step, reply.text, policy.name, seed),
            "out": str(out) if out is not None else None,
            "digest": parent.steps[step].planner_messages[-1]["content"]}


def branch(
    trajectories: Path = typer.Option(..., help="trajectory JSONL holding the parent run (a collect or eval shard)"),
    run_id: str = typer.Option(..., help="the parent run's run_id"),
    step: int = typer.Option(..., help="the step t to branch at (0-based): the planner's decision there is replaced"),
    decision: Optional[str] = typer.Option(  # noqa: UP045
        None, help='the decision applied at step t, as JSON: \'{"action": "call", "need": 1}\' or '
                   '\'{"action": "finish"}\' (exclusive with --recorded)'),
    recorded: bool = typer.Option(False, "--recorded", help="apply the parent's own decision at step t (a resume)"),
    policy: str = typer.Option("recorded", help="what decides after step t: recorded (the parent's role outputs "
                               "while on its path, then the recipe's backends), teacher, recipe (the parent's "
                               "backends), or a backends YAML file (a served or local planner, the teacher)"),
    tools: str = typer.Option("recorded", help="recorded: a call the parent made gets the parent's observation, "
                              "any other runs the real tool; live: every call runs again"),
    recipe: Optional[Path] = typer.Option(  # noqa: UP045
        None, help="the parent's collect recipe (default: manifest.json next to --trajectories)"),
    tasks: Optional[Path] = typer.Option(None, help="task file or folder (default: the recipe's tasks.path)"),  # noqa: UP045
    seed: int = typer.Option(0, min=0, help="0: the backends draw as in the parent; k > 0: another draw of the "
                             "same policy (recorded in the branch and its run id)"),
    out: Optional[Path] = typer.Option(  # noqa: UP045
        None, help="append the branch record to this JSONL file (required unless --dry-run)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="restore the state, check the decision against the state's "
                                 "action space and print what would run (JSON); run nothing"),
) -> None:
    """Branch a recorded run at step t: restore its exact state, apply a decision, continue with a policy, and
    append the branch (an ordinary run record naming its parent and step) to --out."""
    from omnidecision.rollout.branch import branch_run, build_policy, decision_reply
    from omnidecision.rollout.resume import ResumeError, verify_record

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if (decision is None) == (not recorded):
            raise BadInput("give exactly one of --decision JSON or --recorded")
        if tools not in ("recorded", "live"):
            raise BadInput(f"--tools {tools!r}: expected recorded or live")
        if out is None and not dry_run:
            raise BadInput("--out FILE is required (or --dry-run)")
        if out is not None and out.resolve() == trajectories.resolve():
            raise BadInput(f"--out {out} is the parent's trajectory file: write branches to a file of their own")
        given: Any = None
        if decision is not None:
            try:
                given = json.loads(decision)
            except json.JSONDecodeError as exc:
                raise BadInput(f"--decision is not JSON: {exc.msg} at char {exc.pos}: {decision[:80]!r}") from exc
            if not isinstance(given, dict):
                raise BadInput(f"--decision must be a JSON object (an action), got {type(given).__name__}")
        parent = find_run(trajectories, run_id)
        verify_record(parent)
        reply = decision_reply(parent, step, given)
        parent_recipe = load_parent_recipe(trajectories, recipe, tasks)
        task, services = _environment(parent_recipe, parent.task_id)
        chosen = build_policy(policy, parent, parent_recipe.backends)
        if dry_run:
            report = _dry_run_report(parent, step, task, parent_recipe, chosen, reply, seed, tools, out)
            typer.echo(json.dumps(report, indent=1, ensure_ascii=False))
            return
        record = asyncio.run(branch_run(parent, step, task, parent_recipe.agent, chosen, decision=given, seed=seed,
                                        services=services, tools=tools))  # type: ignore[arg-type]
        record = asyncio.run(_judged(record, task, parent_recipe))
    except (BadInput, ResumeError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    out.parent.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
    with out.open("a", encoding="utf-8") as fh:  # type: ignore[union-attr]
        fh.write(record.model_dump_json() + "\n")
    correct = record.judge.correct if record.judge is not None else None
    typer.echo(f"{record.run_id}: branch of {parent.run_id} at step {step} ({reply.text}), policy {chosen.name}: "
               f"outcome={record.outcome} answer={record.answer!r} correct={correct} steps={len(record.steps)} "
               f"({len(record.steps) - step} new; parent: {parent.outcome}, {len(parent.steps)} steps) -> {out}"
               + (f" error={record.error}" if record.error else ""))

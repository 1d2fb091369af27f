"""`omnidecision branch`: branch a recorded run at a step with a decision (mounted by `omnidecision/cli.py`).

The parent's task, agent config, environment and backends come from the collection's recipe: `manifest.json` next to
the trajectory file (what `omnidecision collect` and `omnidecision eval` write), or `--config`. Bad input (an unknown
run id, a step out of range, a decision that is not JSON or not an action, an edited record, a missing recipe) exits
2 with one line naming what was wrong. The branch is appended to --out under its lock (`outputs.exclusive`, held from
before the parent is read to the written line): a second process on the same file stops with one line naming the
holder, and so does its dry run (`outputs.check_free`, asked by both); a file that is not UTF-8 JSONL is refused
untouched (`store.append_record`). --out is a file outside the collection's `trajectories*.jsonl` glob; a branch
already in it (same parent, step, decision, policy, seed and tool mode: one run id) is skipped, not run again.
docs/rollout.md has the walk-through.

    omnidecision branch --trajectories runs/habits/trajectories.shard-0-of-1.jsonl --run-id syn-0-00003-s0-2c1bffea \
        --step 1 --decision '{"action": "finish"}' --policy teacher --out runs/branches.jsonl
    omnidecision branch --trajectories runs/habits/trajectories.shard-0-of-1.jsonl --run-id syn-0-00003-s0-2c1bffea \
        --step 1 --recorded --policy recorded --dry-run
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Optional

import typer

from omnidecision.branch.branch import branch_point, build_policy, decision_problem
from omnidecision.branch.parent import BadInput, load_parent
from omnidecision.branch.resume import ResumeError, ResumePoint, resume
from omnidecision.ledger import actionable_need_indices, finish_available
from omnidecision.outputs import check_free, exclusive, report_out
from omnidecision.rollout.store import SHARD_GLOB, append_record, read_records

logger = logging.getLogger(__name__)


def out_problem(out: Path, trajectories: Path) -> str | None:
    """Why `--out` cannot take branches (None: it can): the parent's own file, a folder, or a file the collection's
    own `trajectories*.jsonl` glob reads (next to the parent file, or in a folder with a collection's manifest):
    harvest, reports and merge would take the branches for collected runs."""
    if out.resolve() == trajectories.resolve():
        return f"--out {out} is the parent's trajectory file: write branches to a file of their own"
    if out.is_dir():
        return f"--out {out} is a folder: branches go to a JSONL file"
    folder = out.resolve().parent
    if fnmatch.fnmatchcase(out.name, SHARD_GLOB) and (folder == trajectories.resolve().parent
                                                     or (folder / "manifest.json").is_file()):
        return (f"--out {out} is read by the collection in {folder} as one of its {SHARD_GLOB}: name it otherwise "
                f"or write it elsewhere")
    return None


def written_before(out: Path | None, run_id: str) -> bool:
    """Whether `out` already holds the record `run_id` (a file that is not JSONL: TrajectoryFileError, file:line)."""
    return out is not None and out.is_file() and any(r.run_id == run_id for _, r in read_records(out))


def _dry_run_report(point: ResumePoint, tools: str, out: Path | None) -> dict[str, Any]:
    """What `branch --dry-run` prints: the branch's state as restored, whether the loop accepts its decision, its
    id and whether --out holds it already."""
    parent, step, run, record, reply = point.parent, point.step, point.run, point.record, point.decision
    state = point.ledger
    problem = decision_problem(state, run.task, run.config, reply)  # type: ignore[arg-type]
    return {"parent_run_id": parent.run_id, "task_id": run.task.id, "step": step, "parent_steps": len(parent.steps),
            "parent_outcome": parent.outcome,
            "state": {"step": state.step, "actionable_needs": actionable_need_indices(state),
                      "finish_available": finish_available(state), "tool_calls": dict(state.tool_call_counts),
                      "last_rejected": state.last_rejected.model_dump() if state.last_rejected else None,
                      "usage_so_far": run.usage.model_dump(), "invalid_so_far": run.invalid},
            "decision": record.branch_decision, "recorded_decision": parent.steps[step].raw_output,
            "loop_accepts": problem is None, "rejection": problem,
            "policy": record.branch_policy, "tools": tools, "seed": record.branch_seed,
            "branch_run_id": record.run_id, "out": str(out) if out is not None else None,
            "already_in_out": written_before(out, record.run_id),
            "digest": parent.steps[step].planner_messages[-1]["content"]}


def branch(
    trajectories: Path = typer.Option(..., help="trajectory JSONL holding the parent run (a collect or eval shard)"),
    run_id: str = typer.Option(..., help="the parent run's run_id"),
    step: int = typer.Option(..., help="the step t to branch at (0-based): the planner's decision there is replaced"),
    decision: Optional[str] = typer.Option(  # noqa: UP045
        None, help='the decision applied at step t, as JSON: \'{"action": "call", "need": 1}\' or '
                   '\'{"action": "finish"}\' (exclusive with --recorded)'),
    recorded: bool = typer.Option(False, "--recorded", metavar="(flag)",  # a flag: no value follows it
                                  help="apply the parent's own decision at step t (a resume)"),
    policy: str = typer.Option("recorded", help="what decides after step t: recorded (the parent's role outputs "
                               "while on its path, then the recipe's backends), teacher, recipe (the parent's "
                               "backends), or a backends YAML file (a served or local planner, the teacher)"),
    tools: str = typer.Option("recorded", help="recorded: a call the parent made gets the parent's observation, "
                              "any other runs the real tool; live: every call runs again"),
    recipe: Optional[Path] = typer.Option(  # noqa: UP045
        None, "--config", help="the parent's collect recipe (default: manifest.json next to --trajectories)"),
    tasks: Optional[Path] = typer.Option(None, help="task file or folder (default: the recipe's tasks.path)"),  # noqa: UP045
    seed: int = typer.Option(0, min=0, help="0: the backends draw as in the parent; k > 0: another draw of the "
                             "same policy (recorded in the branch and its run id)"),
    out: Optional[Path] = typer.Option(  # noqa: UP045
        None, help="append the branch record to this JSONL file (required unless --dry-run)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="restore the state, check the decision against the state's "
                                 "action space and --out (another process writing it too) and print what would run "
                                 "(JSON); run nothing"),
) -> None:
    """Branch a recorded run at step t: restore its exact state, apply a decision, continue with a policy, and
    append the branch (an ordinary run record naming its parent and step) to --out."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    held = ExitStack()
    try:
        if (decision is None) == (not recorded):
            raise BadInput("give exactly one of --decision JSON or --recorded")
        if tools not in ("recorded", "live"):
            raise BadInput(f"--tools {tools!r}: expected recorded or live")
        if out is None and not dry_run:
            raise BadInput("--out FILE is required (or --dry-run)")
        problem = out_problem(out, trajectories) if out is not None else None
        if problem:
            raise BadInput(problem)
        if out is not None:  # another process writing it (its holder named): asked by the run and its dry run
            check_free(out)
        if out is not None and not dry_run:  # one writer per output, from before the run to its line
            held.enter_context(exclusive(out))
        given: Any = None
        if decision is not None:
            try:
                given = json.loads(decision)
            except json.JSONDecodeError as exc:
                raise BadInput(f"--decision is not JSON: {exc.msg} at char {exc.pos}: {decision[:80]!r}") from exc
            if not isinstance(given, dict):
                raise BadInput(f"--decision must be a JSON object (an action), got {type(given).__name__}")
        # the parent found, verified and resolved once; the policy that continues it
        loaded = load_parent(trajectories, run_id, recipe, tasks)
        parent = loaded.record
        chosen = build_policy(policy, parent, loaded.recipe.backends)
        # the branch restored at its step with its decision: what the dry run shows is what the run starts from
        point = branch_point(parent, step, loaded.task, loaded.recipe.agent, chosen, decision=given, seed=seed,
                             services=loaded.services, tools=tools)  # type: ignore[arg-type]
        if dry_run:
            print(json.dumps(_dry_run_report(point, tools, out), indent=1, ensure_ascii=False), file=report_out())
            return
        if written_before(out, point.record.run_id):  # the same branch asked for again: found, not run or written
            typer.echo(f"{point.record.run_id}: already in {out} (the same branch of {parent.run_id} at step "
                       f"{step}); skipped")
            return
        record = asyncio.run(resume(point))
        record = asyncio.run(loaded.judge(record))
        append_record(out, record)  # type: ignore[arg-type]
    except (BadInput, ResumeError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        held.close()
    correct = record.judge.correct if record.judge is not None else None
    typer.echo(f"{record.run_id}: branch of {parent.run_id} at step {step} ({record.branch_decision}), "
               f"policy {chosen.name}: "
               f"outcome={record.outcome} answer={record.answer!r} correct={correct} steps={len(record.steps)} "
               f"({len(record.steps) - step} new; parent: {parent.outcome}, {len(parent.steps)} steps) -> {out}"
               + (f" error={record.error}" if record.error else ""))

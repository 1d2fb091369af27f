"""A recorded run with what it needs to run again: its record, task, collection recipe, tool services and judge.

The parent's task, agent config, environment and backends come from the collection's recipe: `manifest.json` next to
the trajectory file (what `omnidecision collect` and `omnidecision eval` write), or a recipe given. `branch` (the
command) and the grounded rewards (`omnidecision.grounding`) load parents here.

    python -c "from omnidecision.branch.parent import load_parent; help(load_parent)"
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from omnidecision.backends.factory import build_backend
from omnidecision.branch.resume import verify_record
from omnidecision.protocol.records import RunRecord
from omnidecision.rollout.recipe import RecipeError, RolloutRecipe, load_recipe, recipe_from_dict
from omnidecision.rollout.runner import judge_draft, judge_record
from omnidecision.rollout.selection import select_tasks
from omnidecision.rollout.services import build_services
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)


class BadInput(ValueError):
    """What the command refuses, in one line."""


def find_run(path: Path, run_id: str) -> Any:
    """The `RunRecord` with `run_id` in a trajectory JSONL file (`find_run_line`)."""
    return find_run_line(path, run_id)[0]


def find_run_line(path: Path, run_id: str) -> tuple[Any, int]:
    """(the `RunRecord` with `run_id` in a trajectory JSONL file, its line number); only its line is validated (a
    malformed line elsewhere does not matter). Raises BadInput naming file:line and the field, the ids the file
    holds, or both lines when two records carry the id (an edited copy: which one is the run is not for us to
    guess)."""
    if not path.is_file():
        raise BadInput(f"{path}: no such trajectory file")
    seen, found = 0, None
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
            if found is not None:
                raise BadInput(f"{path}:{found[1]} and {path}:{lineno}: two records with run_id {run_id!r}; "
                               f"keep one (a run is recorded once)")
            try:
                found = (RunRecord.model_validate(data), lineno)
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(x) for x in first.get("loc", ()))
                raise BadInput(f"{path}:{lineno}: field {loc or '<root>'}: {first.get('msg')}") from exc
    if found is None:
        raise BadInput(f"{path}: no run with run_id {run_id!r} ({seen} records)")
    return found


def task_mismatch(record: RunRecord, task: Task) -> str | None:
    """The first of the record's question and gold answer that differs from the task's, in words (None: they agree).
    A field the record's JSON leaves out is not compared (records written before it existed).

    >>> r = RunRecord(run_id="r", task_id="t", question="Who?", gold_answer="Ann", outcome="accepted")
    >>> task_mismatch(r, Task(id="t", question="Who?", answer="Bob"))
    "field gold_answer: the record's 'Ann', the task's 'Bob'"
    """
    for field, theirs in (("question", task.question), ("gold_answer", task.answer)):
        ours = getattr(record, field)
        if field in record.model_fields_set and ours != theirs:
            return f"field {field}: the record's {_short(ours)}, the task's {_short(theirs)}"
    return None


def _short(text: str | None, limit: int = 80) -> str:
    return repr(text if text is None or len(text) <= limit else text[:limit] + "...")


def load_parent_recipe(trajectories: Path, recipe: Path | None, tasks: Path | None) -> Any:
    """The collection recipe of the parent: `--config`, else the `recipe` of `manifest.json` next to the trajectory
    file (fields a collect recipe does not have, such as eval's `serve:`, left out); `tasks` replaces tasks.path."""
    overrides = [f"tasks.path={tasks}"] if tasks is not None else []
    try:
        if recipe is not None:
            return load_recipe(recipe, overrides)
        manifest = trajectories.parent / "manifest.json"
        if not manifest.is_file():
            raise BadInput(f"{manifest}: no manifest next to the trajectory file; give --config (the collect recipe "
                           f"of the parent run)")
        try:
            data = json.loads(manifest.read_text("utf-8"))["recipe"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise BadInput(f"{manifest}: no readable recipe in it ({type(exc).__name__}: {exc})") from exc
        data = {k: v for k, v in data.items() if k in RolloutRecipe.model_fields}
        return recipe_from_dict(data, str(manifest), overrides)
    except RecipeError as exc:
        raise BadInput(str(exc)) from exc


# recipe JSON -> (its tasks by id, its services): the parents of one collection share them (an audit or an executed
# reward loads many parents of the same collection; each would otherwise read the whole task suite again)
_ENVIRONMENTS: dict[str, tuple[dict[str, Task], Any]] = {}


def environment(recipe: Any, task_id: str) -> tuple[Any, Any]:
    """(the task, its tool services) from the recipe's task source and environment."""
    key = recipe.model_dump_json()
    if key not in _ENVIRONMENTS:
        try:
            _, selected = select_tasks(recipe.model_copy(update={"shard": "0/1"}))
        except (RecipeError, ValueError, OSError) as exc:
            raise BadInput(f"cannot load the recipe's tasks (tasks.path {recipe.tasks.path}): {exc}; run where the "
                           f"collection ran, or give --tasks") from exc
        _ENVIRONMENTS[key] = ({t.id: t for t in selected}, build_services(recipe, selected))
    by_id, services = _ENVIRONMENTS[key]
    task = by_id.get(task_id)
    if task is None:
        raise BadInput(f"task {task_id!r} is not among the recipe's {len(by_id)} tasks ({recipe.tasks.path})")
    return task, services(task) if callable(services) else services


async def judged(record: Any, task: Any, recipe: Any) -> Any:
    """Grade the branch as its collection graded its runs (the recipe's judge settings)."""
    if not recipe.judge.enabled:
        return record
    llm = build_backend(recipe.judge.llm) if recipe.judge.llm is not None else None
    record.judge = await judge_record(task, record, llm, recipe.judge.scorer)
    record.draft_judge = await judge_draft(task, record, llm, recipe.judge.scorer)
    return record




@dataclass
class ParentRun:
    """A recorded run ready to be resumed: the record (verified by replay), its task, recipe and tool services."""

    record: RunRecord
    task: Task
    recipe: RolloutRecipe
    services: Any

    async def judge(self, record: RunRecord) -> RunRecord:
        """Grade a branch of this run as its collection graded its runs."""
        return await judged(record, self.task, self.recipe)


def load_parent(trajectories: Path, run_id: str, recipe: Path | None = None, tasks: Path | None = None) -> ParentRun:
    """The run `run_id` of a trajectory file with its task, recipe and services; BadInput or ResumeError (both
    ValueError) name what is wrong. The task's question and gold answer must be the record's (a task file edited
    under the same ids would branch, and judge, another task), unless `tasks` names the task file explicitly: then
    a difference is a warning."""
    record, lineno = find_run_line(trajectories, run_id)
    verify_record(record)
    parent_recipe = load_parent_recipe(trajectories, recipe, tasks)
    task, services = environment(parent_recipe, record.task_id)
    mismatch = task_mismatch(record, task)
    if mismatch and tasks is None:
        raise BadInput(f"{trajectories}:{lineno}: run {run_id}: task {task.id} of {parent_recipe.tasks.path} is not "
                       f"the one recorded: {mismatch}; give --tasks to branch against that file anyway")
    if mismatch:
        logger.warning("%s:%d: run %s: task %s of --tasks %s is not the one recorded: %s", trajectories, lineno,
                       run_id, task.id, tasks, mismatch)
    return ParentRun(record, task, parent_recipe, services)

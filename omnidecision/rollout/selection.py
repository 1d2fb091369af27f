"""A rollout recipe's tasks, selected once: loaded (`tasks.loaders`), filtered by the recipe's ids, ids file,
levels, categories, offset and limit, given the environment's tools and block list, and split into shards
(`store.shard_of(task.id, n) == i`). `TaskSelection` holds the result, so the dry run's checks, the run's checks
and the engine (`engine.claimed`) read the one selection the run runs.

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --shard 0/4 --out runs/x --dry-run
"""

from __future__ import annotations

from omnidecision.rollout.live import apply_environment, fill_durations
from omnidecision.rollout.recipe import RecipeError, RolloutRecipe
from omnidecision.rollout.store import shard_of
from omnidecision.tasks.folds import read_ids_file
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.schema import Task


def select_tasks(recipe: RolloutRecipe) -> tuple[list[Task], list[Task]]:
    """(this shard's tasks, all selected tasks) after the recipe's filters, offset and limit."""
    src = recipe.tasks
    options = dict(src.options)
    if recipe.environment.media_root and "media_root" not in options:
        options["media_root"] = recipe.environment.media_root
    tasks = load_tasks(src.path, src.format, **options)
    if src.ids is not None:
        wanted = set(src.ids)
        tasks = [t for t in tasks if t.id in wanted]
    if src.ids_file is not None:
        try:
            wanted = set(read_ids_file(src.ids_file))
        except ValueError as exc:
            raise RecipeError(f"tasks.ids_file: {exc}") from exc
        tasks = [t for t in tasks if t.id in wanted]
    if src.levels is not None:
        tasks = [t for t in tasks if t.level in set(src.levels)]
    if src.categories is not None:
        tasks = [t for t in tasks if t.category in set(src.categories)]
    tasks = tasks[src.offset:]
    if src.limit is not None:
        tasks = tasks[:src.limit]
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise RecipeError(f"{src.path}: task id {dup!r} appears more than once (ids must be unique to resume)")

    apply_environment(recipe.environment, tasks)
    i, n = recipe.shard_index
    mine = [t for t in tasks if shard_of(t.id, n) == i]
    if recipe.environment.kind == "live":
        fill_durations(mine)
    return mine, tasks


class TaskSelection:
    """A recipe's tasks, selected once (`select_tasks`: this shard's, and every selected task) and shared by what
    follows: the checks of a dry run and of a run, and the engine, all read the one selection the run runs."""

    def __init__(self, recipe: RolloutRecipe) -> None:
        self.recipe = recipe
        self._tasks: tuple[list[Task], list[Task]] | None = None

    def __call__(self) -> tuple[list[Task], list[Task]]:
        if self._tasks is None:
            self._tasks = select_tasks(self.recipe)
        return self._tasks


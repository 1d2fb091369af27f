"""The rollout engine's one entry: a checked plan (`rollout.plan.plan_rollouts`: the recipe's tasks selected
once, the trajectory file named, the dry run's checklist made on both) run to its end by `run_plan`:

1. the plan's first failed check refused in its dry-run line (`checks.refuse`), before anything is written;
2. the trajectory file's lock taken (`output.one_writer`), held to the last record: a second process on the same
   file stops with one line naming the holder;
3. under it (`claimed`): the output asked again (`output.out_problems`: only under the lock is the answer still
   true), OUT/manifest.json written (a folder of another experiment refused), the tool services built;
4. the endpoints entered: the caller's (eval's `serve:` block: a vLLM server that lives only for the runs), else
   the plan's backends;
5. the backends and the judge built, and the runs made (`runner.run_tasks`: concurrent workers, the circuit
   breaker, one append-only writer, resumable).

`run_rollouts(recipe)` makes the plan and runs it in one call (`plan_rollouts(recipe, probe=False)`, then
`run_plan`): tests and benchmarks; `collect` and eval make the plan their dry runs print (eval inside its own
checklist, `eval.checklist`).

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/synth-teacher
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnidecision.backends.factory import build_backend, build_backends
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.checks import refuse
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import one_writer, out_problems, write_manifest
from omnidecision.rollout.plan import RolloutPlan, plan_rollouts
from omnidecision.rollout.recipe import RecipeError, RolloutRecipe
from omnidecision.rollout.runner import RolloutSummary, run_tasks
from omnidecision.rollout.selection import TaskSelection
from omnidecision.rollout.services import Services, build_services
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

Endpoints = AbstractContextManager[dict[str, BackendSpec]]


@dataclass
class Prepared:
    """A run made ready by `claimed`: this shard's tasks, every selected task, the tool services."""

    tasks: list[Task]
    selected: list[Task]
    services: Services


@contextmanager
def claimed(plan: RolloutPlan) -> Iterator[Prepared]:
    """Steps 2 and 3: the trajectory file's lock held for the block (`output.one_writer`), and under it an output
    the run cannot write refused (`out_problems`, in the dry run's first `out` error line), OUT/manifest.json
    written, the tool services built over every selected task."""
    recipe = plan.recipe
    tasks, selected = plan.selection()
    i, n = recipe.shard_index
    plan.out_file.parent.mkdir(parents=True, exist_ok=True)
    with one_writer(plan.out_file):
        if problems := out_problems(recipe, plan.out_file):
            raise RecipeError(f"out: {problems[0]}")
        write_manifest(recipe, Path(recipe.out), len(selected))
        logger.info("shard %d/%d: %d of %d tasks × %d samples → %s", i, n, len(tasks), len(selected),
                    recipe.samples, recipe.out)
        yield Prepared(tasks, selected, build_services(recipe, selected))


async def run_plan(plan: RolloutPlan, *, endpoints: Endpoints | None = None, tool_runner: Any = None,
                   progress: bool | None = None, desc: str | None = None) -> RolloutSummary:
    """Run a checked plan (see the module docstring). `endpoints`: a context that yields the role → spec map the
    backends are built from and lives only while the runs do (eval's served vLLM); default: the plan's backends.
    Raises `RecipeError` in the dry run's line for a failed check, `RolloutsStopped` when an endpoint stayed
    down (after writing every finished run)."""
    refuse(plan.checks)
    with claimed(plan) as ready, endpoints if endpoints is not None else nullcontext(plan.backends) as specs:
        recipe = plan.recipe
        options = RolloutOptions.from_plan(plan, progress=progress, desc=desc)
        backends = build_backends(specs)
        judge = recipe.judge
        judge_llm = build_backend(judge.llm) if judge.enabled and judge.llm is not None else None
        return await run_tasks(ready.tasks, recipe.agent, backends, options, judge_llm=judge_llm,
                               services=ready.services, tool_runner=tool_runner)


async def run_rollouts(recipe: RolloutRecipe, tool_runner: Any = None, *,
                       specs: dict[str, BackendSpec] | None = None, out_file: str | Path | None = None,
                       progress: bool | None = None, desc: str | None = None,
                       selection: TaskSelection | None = None) -> RolloutSummary:
    """Plan and run the recipe's shard: `plan_rollouts(recipe, specs, out_file=..., probe=False)` (its endpoints
    are contacted by the run itself), then `run_plan`. `specs` replaces the recipe's backends (served endpoints),
    `out_file` the shard file under `recipe.out`; `selection`: the tasks the caller already selected."""
    plan = plan_rollouts(recipe, specs, out_file=out_file, probe=False, selection=selection)
    return await run_plan(plan, tool_runner=tool_runner, progress=progress, desc=desc)

"""The checked plan of a rollout run (`plan_rollouts` → `RolloutPlan`): a recipe's tasks selected once
(`selection.TaskSelection`), its trajectory file named once (`output.records_file`), and the dry run's checklist
(`checks.rollout_checks`) made on both. The dry run prints the plan's checks; the run (`rollout.engine.run_plan`)
refuses the first failed one in its dry-run line and runs the very plan checked.

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/synth-teacher --dry-run
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from omnidecision.preflight import Check
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.checks import rollout_checks
from omnidecision.rollout.output import records_file
from omnidecision.rollout.recipe import RolloutRecipe
from omnidecision.rollout.selection import TaskSelection


@dataclass
class RolloutPlan:
    """A rollout recipe resolved once and checked (`plan_rollouts`): what its dry run prints and its run runs
    (`rollout.engine.run_plan`): the tasks selected once, the trajectory file named once, the checklist made on
    both."""

    recipe: RolloutRecipe
    selection: TaskSelection
    out_file: Path  # the trajectory file the run appends to, locks and resumes: the one `out` checked
    checks: list[Check]
    # role → spec of endpoints a caller serves itself (`ablate`, the grid): the backends the run builds
    specs: dict[str, BackendSpec] | None = None

    @property
    def backends(self) -> dict[str, BackendSpec]:
        """The role → spec map the run builds its backends from when no caller's endpoints replace it."""
        return self.specs if self.specs is not None else self.recipe.backends


def plan_rollouts(recipe: RolloutRecipe, specs: dict[str, BackendSpec] | None = None,
                  served_roles: Iterable[str] = (), out_file: str | Path | None = None,
                  empty_shard: str = "warning", probe: bool = True,
                  selection: TaskSelection | None = None) -> RolloutPlan:
    """The checked plan of a run of `recipe`: its tasks selected (`selection`, made here when None), its
    trajectory file named (`output.records_file`: `out_file`, or the shard's), and `rollout_checks` made on both.
    `specs` replace the recipe's backends (a caller's served endpoints); `served_roles`, `empty_shard`, `probe`: as
    in `rollout_checks` (a run passes `probe=False`). Writes nothing, starts nothing."""
    selection = selection or TaskSelection(recipe)
    file = records_file(recipe, out_file)
    checked = recipe if specs is None else recipe.model_copy(update={"backends": specs})
    return RolloutPlan(recipe, selection, file,
                       rollout_checks(checked, selection, served_roles, file, empty_shard, probe), specs)

"""One checklist per eval: the recipe resolved once into a `PreparedEval` (the tasks selected once, the environment
labelled, the served planner's training tasks, the teacher's runs and the price table read, the served roles named,
the server built), and the checks made on it, each in the module of its subject: the rollout engine's
(`rollout.plan.plan_rollouts`: tasks, backends, judge, services, output, a live environment's endpoints and media),
then eval's own (`eval.environment`, `eval.overlap`, `eval.teacher`, `eval.prices`; the server's by the server,
`eval.serve.served`). `eval --dry-run` lists exactly these checks (`eval.dryrun.dry_run_report`); the run
(`eval.runner.run_prepared`) refuses the first failed one in the dry run's error line (`eval.runner.refuse`), then
runs the very object checked.

    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --dry-run
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnidecision.eval.environment import label_and_checks
from omnidecision.eval.overlap import overlap_checks
from omnidecision.eval.prices import PriceTable, price_checks
from omnidecision.eval.serve import ServerPlan, served
from omnidecision.eval.teacher import TeacherRuns, teacher_check
from omnidecision.preflight import Check
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.plan import RolloutPlan, plan_rollouts
from omnidecision.rollout.recipe import EvalRecipe, RecipeError, load_recipe, recipe_from_dict
from omnidecision.rollout.selection import TaskSelection

TRAJECTORIES = "trajectories.jsonl"

# ---------------------------------------------------------------- recipe loading


def eval_recipe_from_dict(data: dict[str, Any], source: str = "<recipe>", overrides: list[str] | None = None
                          ) -> EvalRecipe:
    return recipe_from_dict(data, source, overrides, model=EvalRecipe)


def load_eval_recipe(path: str | Path, overrides: list[str] | None = None) -> EvalRecipe:
    """Read a YAML eval recipe and apply `key.path=value` overrides; errors name the file (and line) and field."""
    return load_recipe(path, overrides, model=EvalRecipe)


# ---------------------------------------------------------------- the prepared eval


def trajectories_path(out: str | Path, i: int = 0, n: int = 1) -> Path:
    """OUT/trajectories.jsonl, or the engine's shard file name when the eval is sharded (n > 1)."""
    return shard_path(out, i, n) if n > 1 else Path(out) / TRAJECTORIES


@dataclass
class PreparedEval:
    """An eval recipe resolved once: what its dry run checks and its run runs."""

    recipe: EvalRecipe
    # the rollout engine's checked plan: the tasks selected once, the trajectory file (`trajectories_path`), the
    # engine's checks on both; the run hands this very plan to `rollout.engine.run_plan`
    plan: RolloutPlan
    environment: str  # `environment_label`: what every report says about the runs' tools
    # the engine's, then environment, train/test, teacher, prices, the server's
    checks: list[Check] = field(default_factory=list)
    overlap: dict[str, Any] = field(default_factory=dict)  # `train_overlap`'s figures ({} when unreadable)
    prices: PriceTable | None = None
    served_roles: tuple[str, ...] = ()  # the roles the `serve:` block points at its own server
    # the `serve:` block's server, built and checked once (not started): its port (the block's, or a free one chosen
    # here) and command are what the dry run shows and the run starts; its checks are among `checks`
    server: ServerPlan | None = None
    teacher: TeacherRuns | None = None  # the teacher's runs, read once: the check's and the report's

    @property
    def selection(self) -> TaskSelection:
        """The tasks, selected once: the checks, the dry run and the run read it."""
        return self.plan.selection

    @property
    def specs(self) -> dict[str, BackendSpec] | None:
        """Role → spec of endpoints a caller serves itself for several evals (`ablate`, the grid): they replace the
        recipe's backends and its `serve:` block, and the backend checks ask them."""
        return self.plan.specs

    @property
    def out_file(self) -> Path:
        """The trajectory file the run appends to, locks and resumes (`trajectories_path`), the one its dry run's
        `out` checks read."""
        return self.plan.out_file


def prepare_eval(recipe: EvalRecipe, specs: dict[str, BackendSpec] | None = None, probe: bool = True
                 ) -> PreparedEval:
    """Resolve `recipe` once: the rollout engine's plan (its tasks selected, its checks made on the file the run
    writes, `trajectories_path`), its environment labelled, the served planner's training tasks, the teacher's runs
    and the price table read, the `serve:` block's server built, and eval's checks made on all of it (an unreadable
    task file or provenance is the train/test check's error). `specs`: endpoints the caller serves (see
    `PreparedEval.specs`). `probe`: ask each endpoint GET /models (a dry run); a run passes False, as it contacts
    them itself when it starts. Writes nothing, starts nothing."""
    # OUT/trajectories.jsonl; a shard's file is the engine's to name (`rollout.output.records_file`: the same
    # `shard_path` as `trajectories_path`), so that a sharded eval and a sharded collect share one naming
    out_file = Path(recipe.out) / TRAJECTORIES if recipe.shard_index[1] == 1 else None
    roles = tuple(recipe.serve.roles) if recipe.serve is not None and specs is None else ()
    # the engine's checks: a caller's served specs are the backends the run builds; a `serve:` role is asked only as
    # an endpoint (its server starts once these passed); a shard with none of the tasks is an error here: an eval
    # reports on the tasks it runs
    plan = plan_rollouts(recipe, specs, roles, out_file, empty_shard="error", probe=probe)
    label, checks = label_and_checks(recipe)
    try:
        overlap_list, overlap = overlap_checks(recipe, plan.selection)
        teacher_list, teacher = teacher_check(recipe.teacher, {t.id for t in plan.selection()[1]})
    except (RecipeError, ValueError, OSError) as exc:
        overlap_list, overlap = [Check(what="train/test", status="error", detail=str(exc))], {}
        teacher_list, teacher = [], None  # no tasks to pair the teacher's runs with: the train/test check names why
    prices_list, table = price_checks(recipe)
    server = served(recipe.serve) if recipe.serve is not None and specs is None else None
    server_list = server.checks if server is not None else []
    return PreparedEval(recipe, plan, label,
                        [*plan.checks, *checks, *overlap_list, *teacher_list, *prices_list, *server_list], overlap,
                        table, roles, server, teacher)

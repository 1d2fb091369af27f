"""Eval in the loop: a recipe (configs/eval/*.yaml) → trajectories.jsonl → report.json / report.md / plots.

The recipe (`rollout.recipe.EvalRecipe`) is a rollout recipe (tasks, backends, agent, samples, concurrency,
judge, environment, out) plus an optional `serve:` block: vLLM is started for the run (model dir + LoRA
adapters) and the roles listed in `serve.roles` (default: planner) are pointed at it, then it is stopped.
The recipe is resolved once (`eval.checklist.prepare_eval`: the tasks selected, the environment labelled, the training
tasks and prices read) and its checklist refused before anything is written or served; the dry run lists the same
checks on the same object. Runs go through the rollout engine's one entry (`rollout.engine.run_plan` of the
plan the checklist checked: OUT/manifest.json that refuses a second experiment in the folder, the services, the
server started only for the runs, concurrent workers, judge, single-writer append-only store) into
OUT/trajectories.jsonl, so a killed eval restarts
where it stopped: finished (task_id, sample) pairs are skipped, a torn last line is dropped. Tasks with annotated
subgoals (OmniGAIA) also get the progress audit of the failed runs (`eval.progress`, string scorer): OUT/progress.md.
One eval per output: the trajectory file's lock (`rollout.output.one_writer`) is held from before the manifest and any
server to the last report file; a second process on the same --out stops with one line naming the holder. The file
is `PreparedEval.out_file` (OUT/trajectories.jsonl unsharded): the run writes, locks and resumes the file its dry run
checks (`rollout.checks.out_checks`).

    omnidecision eval --config configs/eval/synthetic-tiny-vllm.yaml --samples 2
    python -m omnidecision.eval.runner configs/eval/synthetic-tiny-vllm.yaml
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from omnidecision.eval import environment, overlap
from omnidecision.eval.checklist import (
    TRAJECTORIES,
    PreparedEval,
    eval_recipe_from_dict,
    load_eval_recipe,
    prepare_eval,
    trajectories_path,
)
from omnidecision.eval.environment import OFFLINE_NO_TOOLS, environment_label
from omnidecision.eval.prices import PriceTableError
from omnidecision.eval.progress import StringScorer, audit, subgoals
from omnidecision.eval.progress_report import write_audit
from omnidecision.eval.report import write_report
from omnidecision.eval.serve import maybe_serve, planner_info
from omnidecision.eval.teacher import teacher_block
from omnidecision.preflight import Check
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.records import RunRecord, endpoint_models
from omnidecision.protocol.redaction import redact_text
from omnidecision.rollout.checks import first_refusal, refusal_line
from omnidecision.rollout.deprecated import aliases
from omnidecision.rollout.engine import run_plan
from omnidecision.rollout.output import one_writer
from omnidecision.rollout.recipe import (  # the eval recipe is the rollout layer's, so rounds can type theirs with it
    EvalRecipe,
    RecipeError,
    ServeSpec,
    cli_overrides,
)
from omnidecision.rollout.selection import TaskSelection
from omnidecision.rollout.store import load_records, write_json_redacted
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

__all__ = ["OFFLINE_NO_TOOLS", "TRAJECTORIES", "EvalRecipe", "ServeSpec", "TaskSelection", "environment_label",
           "eval_recipe_from_dict", "load_eval_recipe", "maybe_serve", "run_eval", "run_prepared", "trajectories_path"]


# ---------------------------------------------------------------- the run


def record_endpoint_models(out: Path, models: dict[str, list[str]]) -> None:
    """Add the models the endpoints reported to OUT/manifest.json (written by `rollout.engine.claimed`)."""
    path = out / "manifest.json"
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return  # no manifest to complete (prepare writes one before any run)
    manifest["endpoint_models"] = models
    write_json_redacted(path, manifest)


def progress_audit(out: Path, records: list[RunRecord], tasks: list[Task]) -> dict[str, Any]:
    """Tasks with annotated subgoals (OmniGAIA): the progress audit of the failed runs with the offline string scorer
    (eval/progress.py) → OUT/progress.json, progress.md, and its headline for the report; else nothing."""
    if not any(subgoals(t) for t in tasks):
        return {}
    res = audit(records, tasks, StringScorer())
    write_audit(out, res)
    keys = ("scorer", "evidence", "n_scored", "counts", "weighted_progress", "mean_subgoal_fraction", "scorer_errors")
    return {"progress": {**{k: res[k] for k in keys}, "failed_runs": res["runs"]["failed"],
                         "no_subgoals": res["runs"]["no_subgoals"], "file": "progress.md"}}


def refuse(checks: list[Check]) -> None:
    """The run's side of the checklist: the first failed check stops it in the dry run's error line (`what:
    detail`, with the count of the others, `rollout.checks.refusal_line`; a price table's as the `PriceTableError`
    that reading it raises, every other as a `RecipeError`). The
    output's checks are left to the engine, which asks the same `rollout.output.out_problems` under the trajectory
    file's lock (`rollout.engine.claimed`) and refuses in the same line: only there is the answer still true."""
    if (failed := first_refusal(checks)) is not None:
        raise (PriceTableError if failed.what == "prices" else RecipeError)(refusal_line(checks))


def run_eval(recipe: EvalRecipe, *, progress: bool = True, specs: dict[str, BackendSpec] | None = None
             ) -> dict[str, Any]:
    """The whole eval: tasks → (server) → runs → report files. Returns the report dict.

    `specs` (role → BackendSpec) replaces the recipe's backends and its `serve:` block (a caller that serves
    one model for several evals, like `ablate`, passes the served specs)."""
    return run_prepared(prepare_eval(recipe, specs, probe=False), progress=progress)


@dataclass
class EvalEndpoints:
    """An eval's endpoints as the engine enters them (`rollout.engine.run_plan`'s `endpoints`): under the trajectory
    file's lock, once OUT/manifest.json is written, OUT/recipe.yaml is written (a header value, a key: ***,
    protocol/redaction.py), then the caller's served specs are used or the `serve:` block's server (the one its dry
    run showed) is started for the runs only; `planner` keeps what the report says about the planner."""

    prepared: PreparedEval
    planner: dict[str, Any] = field(default_factory=dict)

    @contextlib.contextmanager
    def open(self) -> Iterator[dict[str, BackendSpec]]:
        recipe, specs, planned = self.prepared.recipe, self.prepared.specs, self.prepared.server
        recipe_text = yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)
        (Path(recipe.out) / "recipe.yaml").write_text(redact_text(recipe_text), "utf-8")
        server = planned.server if planned is not None else None  # the one its dry run showed
        with contextlib.nullcontext(specs) if specs is not None else maybe_serve(recipe, server) as role_specs:
            self.planner.update(planner_info(role_specs))
            yield role_specs


def run_prepared(prepared: PreparedEval, *, progress: bool = True) -> dict[str, Any]:
    """`run_eval` of a recipe resolved by `checklist.prepare_eval`: its checklist refused first (before anything is
    written or served: the engine's backends, services and live environment among it), then the very plan checked
    run by the engine (`rollout.engine.run_plan`: manifest, services, the served endpoints, the runs) and
    reported."""
    refuse(prepared.checks)
    recipe = prepared.recipe
    out = Path(recipe.out)
    endpoints = EvalEndpoints(prepared)
    # one writer per output: held from before the manifest and any server to the last report file
    with one_writer(prepared.out_file):
        t0 = time.perf_counter()
        summary = asyncio.run(run_plan(prepared.plan, endpoints=endpoints.open(),
                                       progress=progress and recipe.progress,
                                       desc=f"eval {recipe.name or out.name}"))
        wall = time.perf_counter() - t0
        # -- report over the records of these tasks (a resumed eval reports every finished run)
        tasks, all_tasks = prepared.selection()  # some: the checklist's `tasks` check refused none
        ids = {t.id for t in all_tasks}
        records = [r for r in load_records(out) if r.task_id in ids and r.sample < recipe.samples]
        replay = recipe.environment.kind == "replay" or any(t.meta.get("replay") for t in tasks)
        if replay:  # the store's records do not carry the label yet: the environment decides it
            records = [r if r.replay else r.model_copy(update={"replay": True}) for r in records]
        meta = {"name": recipe.name or out.name, "planner": endpoints.planner, "wall_s": round(wall, 3),
                "new_runs": summary.done, "skipped_runs": summary.skipped,
                "tasks": len(tasks), "samples": recipe.samples,
                "environment": "replay" if replay else prepared.environment, "train_overlap": prepared.overlap,
                "judge": {"enabled": recipe.judge.enabled, "scorer": recipe.judge.scorer,
                          "llm": recipe.judge.llm.model if recipe.judge.enabled and recipe.judge.llm else None},
                "budgets": {"step_budget": recipe.agent.step_budget, "max_tool_calls": recipe.agent.max_tool_calls}}
        meta["endpoint_models"] = endpoint_models(records)
        record_endpoint_models(out, meta["endpoint_models"])
        meta.update(progress_audit(out, records, all_tasks))
        if prepared.teacher is not None:  # read and checked by the checklist: sharing tasks with these
            meta["teacher"] = teacher_block(records, prepared.teacher)
        # the price table its checklist read and checked (a file edited since is not read again after the runs)
        rep = write_report(out, records, meta, plots=recipe.plots, prices=prepared.prices)
        logger.info("eval %s: accuracy %s over %d runs → %s", meta["name"], rep["accuracy"], rep["n"], out)
        return rep


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    a, extra = p.parse_known_args(argv)  # any recipe field: --key.path VALUE
    logging.basicConfig(level=logging.INFO)
    run_eval(load_eval_recipe(a.config, cli_overrides(extra)))


if __name__ == "__main__":
    main()


# the checklist's pieces, moved to the modules of their subjects (eval.environment, eval.overlap), one release
_MOVED = {f.__name__: f for f in (environment.task_format, environment.environment_problem,
                                  environment.environment_checks, overlap.planner_folders, overlap.training_tasks,
                                  overlap.train_overlap, overlap.overlap_problem, overlap.overlap_checks)}
__getattr__ = aliases(__name__, {name: f"{f.__module__}.{name}" for name, f in _MOVED.items()},
                      {f"{f.__module__}.{name}": f for name, f in _MOVED.items()})

"""The pre-flight checks of a rollout recipe that `collect --dry-run` and `eval --dry-run` share: the tasks (loaded,
filtered, this shard's share), the backends' endpoints (each asked GET /models with a short timeout, as the run will
ask them: one that does not answer is a warning that says so), the judge, the environment's services and the output
folder (`recipe_checks`), and with a live environment every endpoint asked (GET /models) and every media file looked
for (`live_checks`, through `rollout.live`). They run no agent and write nothing.

    omnidecision collect --config configs/collect/omnigaia-replay-api.yaml --shard 0/4 --out runs/collect --dry-run
    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --dry-run
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from omnidecision.preflight import DryRunReport, check_url
from omnidecision.rollout.live import probe_openai
from omnidecision.rollout.recipe import RecipeError, RolloutRecipe

PROBE_TIMEOUT_S = 3.0


def recipe_checks(report: DryRunReport, recipe: RolloutRecipe, selection: Any = None) -> None:
    """The checks `collect` and `eval` share: tasks, backends, judge, environment, output folder. `selection`: the
    run's `runner.TaskSelection` (made here when None)."""
    from omnidecision.rollout.runner import TaskSelection  # the runner loads the agent: only when a dry run checks
    from omnidecision.rollout.store import shard_path

    try:
        mine, selected = (selection or TaskSelection(recipe))()
    except (RecipeError, ValueError, OSError) as exc:
        report.add("tasks", "error", f"{recipe.tasks.path}: {exc}")
    else:
        i, n = recipe.shard_index
        status = "ok" if mine else "error"
        report.add("tasks", status, f"{recipe.tasks.path} ({recipe.tasks.format}): {len(selected)} tasks after the "
                                    f"filters; shard {i}/{n} runs {len(mine)} x {recipe.samples} samples")
    for role, spec in recipe.backends.items():
        backend_check(report, f"backends.{role}", spec)
    if recipe.judge.enabled and recipe.judge.llm is not None:
        backend_check(report, "judge.llm", recipe.judge.llm)
    for name, target in recipe.environment.services.items():
        module, _, attr = target.partition(":")
        try:
            getattr(importlib.import_module(module), attr or "build")
            report.add(f"environment.services.{name}", "ok", target)
        except (ImportError, AttributeError) as exc:
            report.add(f"environment.services.{name}", "error", f"cannot import {target!r}: {exc}")
    out = Path(recipe.out)
    i, n = recipe.shard_index
    shard = shard_path(out, i, n)
    report.add("out", "ok", f"{out}: resumes {shard.name} (finished runs are skipped)" if shard.exists()
               else f"{out} (created by the run)")


def backend_check(report: DryRunReport, what: str, spec) -> None:
    if spec.kind == "teacher":
        report.add(what, "ok", "scripted teacher (offline)")
    elif spec.kind == "openai":
        if spec.base_url is None:
            # filled in by eval's serve: block, or the OpenAI client's own default
            report.add(what, "ok", f"model {spec.model!r}; base_url set by the serve: block or OPENAI_BASE_URL")
            return
        check = check_url(spec.base_url, what)
        if check.status == "ok":
            key = spec.api_key_env
            check.detail = f"{spec.base_url} model {spec.model!r}, key from ${key}" + (
                "" if os.environ.get(key) else " (unset: sends EMPTY, enough for a vLLM server)")
            # contacted, as the run will (a short timeout): a server that is down is said here, not 110 s into
            # the run; a warning, since a job may start the server after its dry run (scripts/slurm)
            why = probe_openai(spec.base_url, key, what, PROBE_TIMEOUT_S)
            check.detail += f"; {why.removeprefix(what + ': ')}: the run needs it up" if why else \
                "; answers GET /models"
            check.status = "warning" if why else "ok"
        report.checks.append(check)
    else:
        # any other registered kind (replay, first-actionable, a user's own) runs in-process: nothing to ask
        from omnidecision.backends.factory import BACKEND_KINDS

        if spec.kind in BACKEND_KINDS:
            report.add(what, "ok", f"{spec.kind} backend (in-process)")
        else:
            report.add(what, "error", f"unknown backend kind {spec.kind!r} (registered: "
                                      f"{', '.join(BACKEND_KINDS.names())})")


def live_checks(report: DryRunReport, recipe: RolloutRecipe, selection: Any = None) -> None:
    """A live environment: every endpoint is asked (GET /models), every media file looked for, every key read (on
    the tasks of `selection`, the run's `runner.TaskSelection`, made here when None)."""
    if recipe.environment.kind != "live":
        return
    from omnidecision.rollout.live import live_problems
    from omnidecision.rollout.runner import TaskSelection  # the runner loads the agent: only when a dry run checks

    try:
        tasks, _ = (selection or TaskSelection(recipe))()
    except (RecipeError, ValueError, OSError):
        return  # recipe_checks reported it
    problems = live_problems(recipe, tasks, probe=True)
    for problem in problems:
        report.add("environment", "error", problem)
    if not problems:
        report.add("environment", "ok", "live: every endpoint answers and every media file is there")

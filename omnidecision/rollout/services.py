"""What a rollout run builds before its first job, and what refuses it there: the tool services of the recipe's
environment (`build_services`: replay, live, and each extra `environment.services` entry, `service_problem`) and
the backends it builds (`backend_specs`, each asked `factory.backend_problem` by the checks). The dry run's
checks (`rollout.checks`) ask the same functions, so a run refuses in the dry run's error line (`what: detail`).

    omnidecision collect --config configs/collect/omnigaia-live.yaml --dry-run
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.live import build_live_services
from omnidecision.rollout.recipe import RecipeError, RolloutRecipe
from omnidecision.tasks.replay_env import build_replay_services
from omnidecision.tasks.schema import Task

Services = dict[str, Any] | Callable[[Task], dict[str, Any]] | None


def build_services(recipe: RolloutRecipe, tasks: list[Task]) -> Services:
    """Tool services from the recipe's environment. kind "replay": the OmniGAIA replay environment built over all
    selected tasks (`omnidecision.tasks.replay_env.build_replay_services`, per-task services); kind "live": real
    perception endpoints, search API and page reader (`rollout.live.build_live_services`). Each extra
    `name: 'module:factory'` is called with `environment.options` and added to every run's services."""
    env = recipe.environment
    extra: dict[str, Any] = {}
    refuse_services(recipe)
    for name, target in env.services.items():
        module, _, attr = target.partition(":")
        extra[name] = getattr(importlib.import_module(module), attr or "build")(**env.options)
    if env.kind == "live":
        return {**build_live_services(env), **extra}
    if env.kind != "replay":
        return extra or None

    per_task = build_replay_services(tasks)

    def services_for(task: Task) -> dict[str, Any]:
        return {**per_task(task), **extra}

    return services_for


def service_problem(target: str, options: dict[str, Any]) -> str | None:
    """Why the run could not call an `environment.services` entry (`module:factory`) with `environment.options`: it
    does not import, or its signature does not take those options (a typo). The factory is not called: it may start
    what it serves (a server, a browser), which a dry run must not; what it raises when called is met by the run."""
    module, _, attr = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr or "build")
    except (ImportError, AttributeError) as exc:
        return f"cannot import {target!r}: {exc}"
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        return f"{target} cannot be called with environment.options {sorted(options)}: {exc}"
    except ValueError:  # no signature to read (a builtin): the call itself will say
        return None
    return None


def refuse_services(recipe: RolloutRecipe) -> None:
    """A `RecipeError` in the dry run's error line (`environment.services.NAME: detail`) for the first service
    entry `service_problem` refuses; nothing called, nothing written."""
    for name, target in recipe.environment.services.items():
        if (problem := service_problem(target, recipe.environment.options)) is not None:
            raise RecipeError(f"environment.services.{name}: {problem}")


def backend_specs(recipe: RolloutRecipe, specs: dict[str, BackendSpec] | None = None,
                  served_roles: Iterable[str] = ()) -> dict[str, BackendSpec]:
    """Every backend a run builds, by the recipe field that names it (`backends.ROLE`, `judge.llm` when the judge
    asks an LLM): `specs` (default: the recipe's backends) less `served_roles`, the roles a caller points at a server
    it starts itself (their specs are the served ones, made once it runs)."""
    served = set(served_roles)
    found = {f"backends.{role}": spec for role, spec in (specs or recipe.backends).items() if role not in served}
    if recipe.judge.enabled and recipe.judge.llm is not None:
        found["judge.llm"] = recipe.judge.llm
    return found

"""The pre-flight checks of a rollout recipe that `collect --dry-run` and `eval --dry-run` share: the tasks (loaded,
filtered, this shard's share), the backends' endpoints (each asked GET /models with a short timeout, as the run will
ask them: one that does not answer is a warning that says so), the judge, the environment's services and the output
folder (`engine_checks`), and with a live environment every endpoint asked (GET /models) and every media file looked
for (`environment_checks`, through `rollout.live`); `rollout_checks` is all of them, each a `preflight.Check`. They
run no agent and write nothing.

`collect` and `eval` make these checks before they run and refuse the first failed one in its dry-run line
(`refuse`, `first_refusal`; the output's again under the lock, below). Where the engine itself refuses before its
first write, the check here asks the engine's own function, and the engine refuses in the check's error line (`what:
detail`): a backend built in-process (`factory.backend_problem`: a local planner folder without a checkpoint, a
teacher option it does not take), the output (`output.out_problems`: the trajectory file another process holds, a
manifest.json of another experiment, a trajectory file that is not JSONL) on the file the run writes
(`output.records_file`; eval passes OUT/trajectories.jsonl), an environment service entry that does not import or
does not take `environment.options` (`services.service_problem`). The service factories themselves are
not called: a factory may start what it serves (a server, a browser), which a dry run must not.

    omnidecision collect --config configs/collect/omnigaia-replay-api.yaml --shard 0/4 --out runs/collect --dry-run
    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --dry-run
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omnidecision.backends.factory import backend_problem
from omnidecision.preflight import Check, check_url
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.live import live_problems, probe_openai
from omnidecision.rollout.output import out_problems, records_file
from omnidecision.rollout.recipe import RecipeError, RolloutRecipe
from omnidecision.rollout.selection import TaskSelection
from omnidecision.rollout.services import backend_specs, service_problem

PROBE_TIMEOUT_S = 3.0


def rollout_checks(recipe: RolloutRecipe, selection: TaskSelection | None = None,
                   served_roles: Iterable[str] = (), out_file: str | Path | None = None,
                   empty_shard: str = "warning", probe: bool = True) -> list[Check]:
    """Every check `collect --dry-run` and `eval --dry-run` share, in the order they print: tasks, backends, judge,
    environment services, output folder, and a live environment's endpoints and media files. `selection`: the run's
    `selection.TaskSelection` (made here when None); `served_roles`: the roles a caller points at a server it starts
    itself (eval's `serve:`), left out of the live environment's probes; `out_file`: the trajectory file the run
    writes when the caller names one (eval: `PreparedEval.out_file`), else the shard's; `empty_shard`: the status
    of a shard that runs none of the selected tasks (`task_checks`); `probe=False` (a run: it contacts its
    endpoints itself as it starts) asks no endpoint GET /models, the one thing a dry run adds."""
    selection = selection or TaskSelection(recipe)
    served = set(served_roles)
    probed = recipe.model_copy(update={"backends": {r: s for r, s in recipe.backends.items() if r not in served}})
    return engine_checks(recipe, selection, out_file, served, empty_shard, probe) + \
        environment_checks(probed, selection, probe)


def engine_checks(recipe: RolloutRecipe, selection: TaskSelection, out_file: str | Path | None = None,
                  served_roles: Iterable[str] = (), empty_shard: str = "warning", probe: bool = True) -> list[Check]:
    """Tasks, backends, judge, environment services, output folder (in that order). A served role's own spec is
    checked only as an endpoint: the run builds it from the server's spec, never from the recipe's kind."""
    # the checks that read only the recipe first; those that load files or ask endpoints after them
    services = [service_check(name, target, recipe.environment.options)
                for name, target in recipe.environment.services.items()]
    out = out_checks(recipe, out_file)
    tasks = task_checks(recipe, selection, empty_shard)
    served = {f"backends.{role}" for role in served_roles}
    backends = [backend_check(what, spec, probe) if what not in served or spec.kind == "openai" else
                Check(what=what, status="ok", detail="served by the `serve:` block (an OpenAI-compatible endpoint)")
                for what, spec in backend_specs(recipe).items()]
    return [*tasks, *backends, *services, *out]


def task_checks(recipe: RolloutRecipe, selection: TaskSelection, empty_shard: str = "warning") -> list[Check]:
    """The tasks load and the filters keep some (else an error); this shard runs some of them (else `empty_shard`:
    a warning for a collection, whose shard then writes its manifest and no run; eval makes it an error)."""
    try:
        mine, selected = selection()
    except (RecipeError, ValueError, OSError) as exc:
        # the loaders' errors name the file already (and its line): the path once
        named = str(exc).startswith(str(recipe.tasks.path))
        return [Check(what="tasks", status="error", detail=str(exc) if named else f"{recipe.tasks.path}: {exc}")]
    i, n = recipe.shard_index
    detail = (f"{recipe.tasks.path} ({recipe.tasks.format}): {len(selected)} tasks after the filters; "
              f"shard {i}/{n} runs {len(mine)} x {recipe.samples} samples")
    if not selected:  # a filter that matches nothing: a typo, whatever the shard
        return [Check(what="tasks", status="error", detail=detail)]
    if not mine:  # more shards than tasks: a collection shard has nothing to do; an eval has nothing to report
        return [Check(what="tasks", status=empty_shard, detail=detail + " (none in this shard)")]
    return [Check(what="tasks", status="ok", detail=detail)]


def service_check(name: str, target: str, options: dict[str, Any] | None = None) -> Check:
    """An extra `environment.services` entry (`module:factory`) imports and takes `environment.options`
    (`services.service_problem`, which the run asks too); the factory is not called (it may start what it serves)."""
    if (problem := service_problem(target, options or {})) is not None:
        return Check(what=f"environment.services.{name}", status="error", detail=problem)
    return Check(what=f"environment.services.{name}", status="ok", detail=target)


def out_checks(recipe: RolloutRecipe, out_file: str | Path | None = None) -> list[Check]:
    """The output: the file the run writes (`output.records_file`) and its folder, asked what the run refuses on
    before its first write (`output.out_problems`: one error each); else whether the run resumes that file."""
    out, file = Path(recipe.out), records_file(recipe, out_file)
    problems = out_problems(recipe, file)
    if problems:
        return [Check(what="out", status="error", detail=problem) for problem in problems]
    return [Check(what="out", status="ok", detail=f"{out}: resumes {file.name} (finished runs are skipped)"
                  if file.exists() else f"{out} (created by the run; records go to {file.name})")]


def backend_check(what: str, spec: BackendSpec, probe: bool = True) -> Check:
    """One backend: an OpenAI-compatible endpoint is asked GET /models (a short timeout; not with `probe=False`,
    where only its URL is read); a teacher or any other
    registered kind runs in-process: asked what the run's build refuses (`factory.backend_problem`: an unknown kind,
    a local planner folder without a checkpoint, an option the kind does not take), no weights loaded."""
    if spec.kind != "openai":
        if (problem := backend_problem(spec)) is not None:
            return Check(what=what, status="error", detail=problem)
        detail = "scripted teacher (offline)" if spec.kind == "teacher" else f"{spec.kind} backend (in-process)"
        return Check(what=what, status="ok", detail=detail)
    if spec.base_url is None:
        # filled in by eval's serve: block, or the OpenAI client's own default
        return Check(what=what, status="ok", detail=f"model {spec.model!r}; base_url set by the serve: block or "
                                                    "OPENAI_BASE_URL")
    check = check_url(spec.base_url, what)
    if check.status == "ok":
        key = spec.api_key_env
        check.detail = f"{spec.base_url} model {spec.model!r}, key from ${key}" + (
            "" if os.environ.get(key) else " (unset: sends EMPTY, enough for a vLLM server)")
        if not probe:
            return check
        # contacted, as the run will (a short timeout): a server that is down is said here, not 110 s into
        # the run; a warning, since a job may start the server after its dry run (scripts/slurm)
        why = probe_openai(spec.base_url, key, what, PROBE_TIMEOUT_S)
        check.detail += f"; {why.removeprefix(what + ': ')}: the run needs it up" if why else \
            "; answers GET /models"
        check.status = "warning" if why else "ok"
    return check


def environment_checks(recipe: RolloutRecipe, selection: TaskSelection, probe: bool = True) -> list[Check]:
    """A live environment: every endpoint is asked (GET /models; with `probe=False`, a run's plan, only configured:
    the run contacts its endpoints itself), every media file looked for, every key read (on the tasks of
    `selection`); nothing for another environment."""
    if recipe.environment.kind != "live":
        return []
    try:
        tasks, _ = selection()
    except (RecipeError, ValueError, OSError):
        return []  # the tasks check reported it
    problems = live_problems(recipe, tasks, probe=probe)
    ready = "every endpoint answers" if probe else "every endpoint is set"
    return [Check(what="environment", status="error", detail=p) for p in problems] or \
        [Check(what="environment", status="ok", detail=f"live: {ready} and every media file is there")]


def first_refusal(checks: list[Check]) -> Check | None:
    """The failed check a run stops on before its first write, in the dry run's order: the first error but the
    output's (`out`), which the engine asks again under the trajectory file's lock (`engine.claimed`),
    where the answer still holds, and refuses there in the same line."""
    return next((c for c in checks if c.status == "error" and c.what != "out"), None)


def refusal_line(checks: list[Check]) -> str | None:
    """The line a run stops with: `first_refusal`'s dry-run line (`what: detail`), and when other checks failed
    too, how many (a live environment may miss many media files: the dry run lists them all at once)."""
    if (failed := first_refusal(checks)) is None:
        return None
    more = sum(c.status == "error" and c.what != "out" for c in checks) - 1
    return f"{failed.what}: {failed.detail}" + (f" (and {more} more failed checks: --dry-run lists them)"
                                                 if more else "")


def refuse(checks: list[Check]) -> None:
    """A `RecipeError` with `refusal_line(checks)`: the run's side of one checklist (`collect`; eval's
    `eval.runner.refuse` adds its price table's error type)."""
    if (line := refusal_line(checks)) is not None:
        raise RecipeError(line)


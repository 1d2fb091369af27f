"""Run the agent over many (task, sample) jobs concurrently, judge each run, append records to a shard file.

`run_tasks(tasks, config, backends, options)` is the reusable core (`options` is a `rollout.options.RolloutOptions`,
from a recipe by `RolloutOptions.from_recipe`): a fixed pool of `concurrency` workers (`Rollouts.worker`) pulls jobs
from a queue, each job = `Rollouts.run_job` (`run_task`, then `Rollouts.judge_job`), every record goes to ONE
`RecordWriter` (flush + fsync per line) and is counted (`RolloutSummary.count`). One writer per shard: the shard's
lock (`outputs.exclusive`) is held from before the first read of what is done to the last record; a second process
on the same shard stops with one line naming the holder. Resumable: jobs whose (task_id, sample) already has a
complete record in the output file are skipped; a torn last line is cut away before appending. Runs that ended
with outcome `error` are not finished: a restart runs them again (their old records move to `errors-superseded*.jsonl`,
`store.supersede_errors`) unless `options.retry_errors` is False (`--no-retry-errors`). A progress bar (tqdm)
shows running accuracy and the outcome counts.

Endpoints are watched by a circuit breaker (`rollout/breaker.py`): a run that failed because its endpoint was
unreachable is not written (`Rollouts.requeue_after_endpoint_failure`); it runs again after the breaker's pause,
and when the endpoint stays down the rollouts stop with `RolloutsStopped` naming it (a restart of the same command
continues).

`run_rollouts(recipe)` is the engine's one entry (the collect command, eval and the on-policy rounds go through it): it
refuses a backend it could not build (`refuse_backends`), takes the shard's lock (`one_writer`), calls
`prepare(recipe)` (load + filter tasks, keep this shard's tasks (`shard_of(task.id, n) == i`), the live
environment's pre-flight, the output's checks (`out_problems`), `manifest.json`, the tool services), builds the
backends and runs. Each refusal before the first write is one function that the dry run (`rollout.checks`) asks too,
and the run refuses in the dry run's error line (`what: detail`).

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/synth-teacher
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.agent.runtime import config_digest
from omnidecision.backends.factory import backend_problem, build_backend, build_backends
from omnidecision.outputs import OutputBusy, exclusive
from omnidecision.protocol.chat import BackendSpec, ChatBackend
from omnidecision.protocol.records import OUTCOMES, JudgeResult, RunRecord
from omnidecision.protocol.redaction import redact_tree
from omnidecision.provenance import git_revision
from omnidecision.rollout.breaker import EndpointBreaker, RolloutsStopped, guard, start_job
from omnidecision.rollout.deprecated import aliases
from omnidecision.rollout.live import apply_environment, build_live_services, fill_durations, live_problems
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.recipe import RecipeError, RolloutRecipe
from omnidecision.rollout.store import (
    RecordWriter,
    TrajectoryFileError,
    busy_problem,
    finished_keys,
    repair_tail,
    resume_problem,
    shard_of,
    supersede_errors,
    write_json_atomic,
)
from omnidecision.tasks.folds import read_ids_file
from omnidecision.tasks.grading import judge_run
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.replay_env import build_replay_services
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

Services = dict[str, Any] | Callable[[Task], dict[str, Any]] | None


@dataclass
class RolloutSummary:
    """What one run of the engine did. `accuracy` counts judged answered runs only: error runs (no answer: a dead
    endpoint, a crash) are counted apart in `errors`, judge failures in `judge_failures`; neither is a wrong answer."""

    out_file: str
    jobs: int = 0
    skipped: int = 0  # already finished before this start
    retried_errors: int = 0  # error records of earlier starts moved aside (errors-superseded*.jsonl), run again
    done: int = 0
    requeued: int = 0  # runs that failed on an unreachable endpoint and were run again (not written as errors)
    outcomes: Counter = field(default_factory=Counter)
    correct: int = 0
    judged: int = 0
    judge_failures: int = 0
    errors: int = 0  # runs with outcome `error`: not judged as wrong answers
    wall_s: float = 0.0

    def count(self, record: RunRecord) -> None:
        """Count one written record: its outcome and its judgment."""
        self.done += 1
        self.outcomes[record.outcome] += 1
        if record.outcome == "error":  # no answer: counted apart, never as a wrong one
            self.errors += 1
        elif record.judge is not None:
            if record.judge.correct is None:
                self.judge_failures += 1
            else:
                self.judged += 1
                self.correct += int(record.judge.correct)

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.judged if self.judged else None

    def as_dict(self) -> dict[str, Any]:
        return {"out_file": self.out_file, "jobs": self.jobs, "skipped": self.skipped,
                "retried_errors": self.retried_errors, "done": self.done, "requeued": self.requeued,
                "outcomes": dict(self.outcomes), "correct": self.correct, "judged": self.judged,
                "judge_failures": self.judge_failures, "errors": self.errors, "accuracy": self.accuracy,
                "wall_s": round(self.wall_s, 3)}


async def judge_record(task: Task, record: RunRecord, llm: ChatBackend | None,
                       scorer: str = "lenient") -> JudgeResult:
    """`judge_run` on the record's answer; any judge crash is a judge failure (correct=None), never a crash."""
    try:
        return await judge_run(task, record.answer, llm, outcome=record.outcome, scorer=scorer)  # type: ignore[arg-type]
    except Exception as exc:  # the judge must not take a batch down
        logger.warning("judge failed on %s: %s: %s", record.run_id, type(exc).__name__, exc)
        return JudgeResult(correct=None, method="judge_error", prediction=record.answer,
                           detail=f"{type(exc).__name__}: {exc}"[:500])


async def judge_draft(task: Task, record: RunRecord, llm: ChatBackend | None,
                      scorer: str = "lenient") -> JudgeResult | None:
    """The judge on an abstaining run's draft (`record.draft_answer`), so reports can show accuracy with drafted
    answers next to the accuracy of what the agent submitted; None when the run has no draft."""
    if record.draft_answer is None:
        return None
    return await judge_record(task, record.model_copy(update={"answer": record.draft_answer, "outcome": "forced"}),
                              llm, scorer)


def _postfix(s: RolloutSummary) -> str:
    acc = f"{s.accuracy:.3f}" if s.accuracy is not None else "-"
    counts = " ".join(f"{o}={s.outcomes[o]}" for o in OUTCOMES if s.outcomes.get(o))
    errors = f" errors={s.errors}" if s.errors else ""
    return f"acc={acc} ({s.correct}/{s.judged} answered){errors} {counts}"


Job = tuple[Task, int, int]  # (task, sample, times requeued after an endpoint failure)


@dataclass
class Rollouts:
    """One start of `run_tasks`: what its workers share (the queue of jobs, the one writer, the summary, the
    breaker, the progress bar). A worker's loop is `worker`; each step of it is a method of its own."""

    config: AgentConfig
    backends: dict[str, ChatBackend]
    options: RolloutOptions
    summary: RolloutSummary
    writer: RecordWriter
    judge_llm: ChatBackend | None = None
    services: Services = None
    tool_runner: Any = None
    watch: EndpointBreaker | None = None
    bar: Any = None  # tqdm, or None without a progress bar
    queue: asyncio.Queue[Job] = field(default_factory=asyncio.Queue)

    @property
    def stopped(self) -> bool:
        """The breaker stopped the rollouts: workers write nothing more (the next start runs what is left)."""
        return self.watch is not None and self.watch.stopped is not None

    async def run_job(self, task: Task, sample: int) -> RunRecord:
        """Run the agent on one (task, sample), and judge the run."""
        svc = self.services(task) if callable(self.services) else self.services
        record = await run_task(task, self.config, self.backends, sample=sample, tool_runner=self.tool_runner,
                                services=svc)
        if self.options.judge:
            await self.judge_job(task, record)
        return record

    async def judge_job(self, task: Task, record: RunRecord) -> None:
        """Grade the run's answer (and an abstaining run's draft) in place."""
        record.judge = await judge_record(task, record, self.judge_llm, self.options.judge_scorer)
        record.draft_judge = await judge_draft(task, record, self.judge_llm, self.options.judge_scorer)

    def requeue_after_endpoint_failure(self, job: Job, failed: set[str], record: RunRecord) -> bool:
        """True when the record must not be written: the endpoint died under this run, so it says nothing about the
        agent. The job goes back in the queue (run again after the breaker's pause) while it has requeues left, else
        waits for the next start; past its requeues its `error` record is written (False)."""
        hurt = failed and (record.outcome == "error" or (record.judge is not None and record.judge.correct is None))
        if not hurt or self.watch is None:
            return False
        if self.stopped:
            return True
        task, sample, again = job
        if again < self.options.breaker.requeue:
            self.summary.requeued += 1
            self.queue.put_nowait((task, sample, again + 1))
            return True
        return False

    def show_progress(self) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(_postfix(self.summary), refresh=False)

    async def worker(self) -> None:
        """Take jobs until the queue is empty (or the breaker stopped the rollouts): run, judge, write, count."""
        while not self.stopped:
            try:
                job = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            failed = start_job()  # endpoints this job finds unreachable (set by the guarded backends)
            record = await self.run_job(job[0], job[1])
            if self.requeue_after_endpoint_failure(job, failed, record):
                if self.stopped:
                    return
                continue
            await self.writer.put(record)
            self.summary.count(record)
            self.show_progress()


async def run_tasks(tasks: list[Task], config: AgentConfig, backends: dict[str, ChatBackend],
                    options: RolloutOptions, *, judge_llm: ChatBackend | None = None, services: Services = None,
                    tool_runner: Any = None) -> RolloutSummary:
    """Run every (task, sample) not yet in `options.out_file`, `options.concurrency` at a time; append each judged
    record (`options.judge_scorer`: the string scorer, "gaia" or "lenient", see tasks/grading.py).
    `services`: one dict for every run, or a function task -> dict (per-task environments such as replay).
    `options.retry_errors`: runs recorded with outcome `error` are run again (their records moved aside first).
    `options.breaker`: the endpoint circuit breaker's settings (`enabled: false`: none). Raises `RolloutsStopped`
    (after writing every finished run) when an endpoint stayed unreachable."""
    out = Path(options.out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    # one writer per shard: the lock is held from before the first read of what is done to the last record
    with exclusive(out):
        return await _run_locked(tasks, config, backends, options, judge_llm=judge_llm, services=services,
                                 tool_runner=tool_runner)


async def _run_locked(tasks: list[Task], config: AgentConfig, backends: dict[str, ChatBackend],
                      options: RolloutOptions, *, judge_llm: ChatBackend | None, services: Services,
                      tool_runner: Any) -> RolloutSummary:
    """`run_tasks` under the shard's lock."""
    t0 = time.perf_counter()
    out = Path(options.out_file)
    # what is finished already: every complete line read first (a file that is not JSONL is refused untouched),
    # then a torn last line cut away, earlier error runs moved aside to run again
    if (problem := resume_problem(out)) is not None:
        raise TrajectoryFileError(problem)
    repair_tail(out)
    retried = supersede_errors(out) if options.retry_errors else 0
    done_keys = finished_keys(out)
    jobs = [(t, k) for t in tasks for k in range(options.samples)]
    todo = [(t, k) for t, k in jobs if (t.id, k) not in done_keys]
    summary = RolloutSummary(out_file=str(out), jobs=len(jobs), skipped=len(jobs) - len(todo), retried_errors=retried)
    if summary.skipped or retried:
        logger.info("%s: %d of %d runs already finished (%d earlier error runs to retry); %d to go", out,
                    summary.skipped, len(jobs), retried, len(todo))
    # endpoints behind the breaker
    watch = EndpointBreaker(options.breaker) if options.breaker.enabled else None
    backends = guard(backends, watch)
    if judge_llm is not None:
        judge_llm = guard({"judge": judge_llm}, watch)["judge"]
    bar = None
    if options.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), initial=summary.skipped, desc=options.desc, unit="run", dynamic_ncols=True)
    # the workers
    async with RecordWriter(out) as writer:
        run = Rollouts(config=config, backends=backends, options=options, summary=summary, writer=writer,
                       judge_llm=judge_llm, services=services, tool_runner=tool_runner, watch=watch, bar=bar)
        for t, k in todo:
            run.queue.put_nowait((t, k, 0))
        try:
            await asyncio.gather(*(run.worker() for _ in range(max(1, min(options.concurrency, len(todo))))))
        finally:
            if watch is not None:
                await watch.aclose()
    if bar is not None:
        bar.close()
    summary.wall_s = time.perf_counter() - t0
    if watch is not None and watch.stopped is not None:
        left = summary.jobs - summary.skipped - summary.done
        raise RolloutsStopped(watch.stopped.endpoint, (
            f"collection stopped: {watch.stopped.reason}. {summary.done} runs were written to {out} in this start "
            f"({summary.skipped} before it); the other {left} are not written. Run the same command again once "
            f"{watch.stopped.endpoint} answers: finished runs are kept, the rest run then."))
    return summary


# -- recipe plumbing ---------------------------------------------------------------------------------------
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


def manifest_identity(recipe: RolloutRecipe) -> dict[str, Any]:
    """What a restart into the same folder must keep (the fields of OUT/manifest.json it compares): the agent
    config's digest and the backends, as written (a header value, a key: ***), so that it compares like with like."""
    return {"config_digest": config_digest(recipe.agent),
            "backends": redact_tree({k: v.model_dump(mode="json") for k, v in sorted(recipe.backends.items())})}


def manifest_problem(recipe: RolloutRecipe) -> str | None:
    """Why a run of `recipe` is refused by the OUT/manifest.json already there: it records another agent config or
    other backends (the records would mix two experiments); names the fields that differ. None when there is no
    manifest, an unreadable one (the run replaces it), or one of this experiment. Writes nothing."""
    path = Path(recipe.out) / "manifest.json"
    if not path.is_file():
        return None
    try:
        old = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    old = old if isinstance(old, dict) else {}
    ours = manifest_identity(recipe)
    differ: list[str] = []
    if old.get("config_digest") not in (None, ours["config_digest"]):
        differ.append(f"agent (config_digest {old['config_digest']} there, {ours['config_digest']} in this recipe)")
    theirs = old.get("backends")
    if theirs not in (None, ours["backends"]):
        theirs = theirs if isinstance(theirs, dict) else {}
        roles = sorted(r for r in {*theirs, *ours["backends"]} if theirs.get(r) != ours["backends"].get(r))
        differ.append(", ".join(f"backends.{r}" for r in roles))
    if not differ:
        return None
    return (f"{Path(recipe.out)}: holds runs of a different agent config or backends ({path} differs in "
            f"{'; '.join(differ)}); collect into a new --out folder")


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


def write_manifest(recipe: RolloutRecipe, out_dir: Path, n_tasks: int) -> None:
    """OUT/manifest.json: the recipe, the agent config digest, the git revision. Every shard writes the same
    content (shard-specific fields left out; written atomically). A restart with a different agent config or
    backends into the same folder is refused (`manifest_problem`: the records would mix two experiments)."""
    if (problem := manifest_problem(recipe)) is not None:
        raise RecipeError(f"out: {problem}")
    manifest = {"recipe": recipe.model_dump(mode="json", exclude={"shard", "concurrency", "progress"}),
                **manifest_identity(recipe), "git_revision": git_revision(), "tasks": n_tasks}
    write_json_atomic(out_dir / "manifest.json", manifest)


def records_file(recipe: RolloutRecipe, out_file: str | Path | None = None) -> Path:
    """The trajectory file a run of `recipe` appends to and resumes: `out_file` when the caller names one (eval's
    OUT/trajectories.jsonl), else the shard's file under `recipe.out` (`RolloutOptions.from_recipe`)."""
    return RolloutOptions.from_recipe(recipe, out_file=out_file).out_file


def out_problems(recipe: RolloutRecipe, out_file: str | Path) -> list[str]:
    """Why a run of `recipe` writing `out_file` is refused before its first write, one line each: another process
    holds the file (`store.busy_problem`), the folder holds another experiment (`manifest_problem`), the file is not
    JSONL to resume (`store.resume_problem`). Writes nothing: the dry run lists them as `out` errors, `prepare`
    refuses on the first in that error line's words."""
    found = (busy_problem(out_file), manifest_problem(recipe), resume_problem(out_file))
    return [problem for problem in found if problem is not None]


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


def refuse_backends(recipe: RolloutRecipe, specs: dict[str, BackendSpec] | None = None,
                    served_roles: Iterable[str] = ()) -> None:
    """A `RecipeError` in the dry run's error line (`what: detail`) for the first backend of `backend_specs` that
    could not be built (`factory.backend_problem`: an unknown kind, a local planner folder without a checkpoint, a
    teacher option it does not take); loads no weights, writes nothing, so a run refuses before it makes --out."""
    for what, spec in backend_specs(recipe, specs, served_roles).items():
        if (problem := backend_problem(spec)) is not None:
            raise RecipeError(f"{what}: {problem}")


@contextmanager
def one_writer(out_file: str | Path) -> Iterator[None]:
    """The trajectory file's lock for the block (`outputs.exclusive`), refused first in the dry run's words when
    another process holds it (`store.busy_problem`; `exclusive` still refuses one that takes it in between)."""
    if (problem := busy_problem(out_file)) is not None:
        raise OutputBusy(f"out: {problem}")
    with exclusive(out_file):
        yield


class TaskSelection:
    """A recipe's tasks, selected once (`select_tasks`: this shard's, and every selected task) and shared by what
    follows: the checks of a dry run and of a run, and `prepare`, all read the one selection the run runs."""

    def __init__(self, recipe: RolloutRecipe) -> None:
        self.recipe = recipe
        self._tasks: tuple[list[Task], list[Task]] | None = None

    def __call__(self) -> tuple[list[Task], list[Task]]:
        if self._tasks is None:
            self._tasks = select_tasks(self.recipe)
        return self._tasks


@dataclass
class Prepared:
    """A collection made ready by `prepare`: this shard's tasks, every selected task, the tool services."""

    tasks: list[Task]
    selected: list[Task]
    services: Services


def prepare(recipe: RolloutRecipe, specs: dict[str, BackendSpec] | None = None,
            served_roles: Iterable[str] = (), selection: TaskSelection | None = None,
            out_file: str | Path | None = None) -> Prepared:
    """Select the tasks, check a live environment before the first run, refuse an output the run cannot write
    (`out_problems` on `records_file(recipe, out_file)`), write OUT/manifest.json, build the tool services. The
    pre-flight checks `specs` (default: the recipe's backends) except `served_roles`, the roles a caller points at a
    server it starts itself once this has passed (eval's `serve:`); `selection`: the tasks the caller's checks read
    (selected here when None)."""
    # tasks and shard; a live environment must have every endpoint and media file before the first run
    tasks, selected = (selection or TaskSelection(recipe))()
    if recipe.environment.kind == "live":
        served = set(served_roles)
        checked = {role: spec for role, spec in (specs or recipe.backends).items() if role not in served}
        problems = live_problems(recipe.model_copy(update={"backends": checked}), tasks)
        if problems:
            raise RecipeError("the live environment is not ready (run with --dry-run to check):\n  - "
                              + "\n  - ".join(problems))
    if problems := out_problems(recipe, records_file(recipe, out_file)):
        raise RecipeError(f"out: {problems[0]}")  # the dry run's first `out` error line
    refuse_services(recipe)  # before the manifest: a service entry the run cannot call leaves nothing behind
    i, n = recipe.shard_index
    out_dir = Path(recipe.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_manifest(recipe, out_dir, len(selected))
    logger.info("shard %d/%d: %d of %d tasks × %d samples → %s", i, n, len(tasks), len(selected), recipe.samples,
                out_dir)
    return Prepared(tasks, selected, build_services(recipe, selected))


async def run_rollouts(recipe: RolloutRecipe, tool_runner=None, *, prepared: Prepared | None = None,
                       specs: dict[str, BackendSpec] | None = None, out_file: str | Path | None = None,
                       progress: bool | None = None, desc: str | None = None,
                       selection: TaskSelection | None = None) -> RolloutSummary:
    """Run the recipe's shard (see the module docstring). A caller that needs the tasks before the runs (eval:
    to start its server only once the pre-flight passed) passes what `prepare` returned; `specs` replaces the
    recipe's backends (served endpoints), `out_file` the shard file under `recipe.out`; `selection`: the tasks the
    caller's checks read (`collect`), selected here when None."""
    options = RolloutOptions.from_recipe(recipe, out_file=out_file, progress=progress, desc=desc)
    refuse_backends(recipe, specs)  # before --out is made: a backend it cannot build leaves nothing behind
    # one writer per shard, from before the manifest and the services (a second start stops before any work)
    Path(options.out_file).parent.mkdir(parents=True, exist_ok=True)
    with one_writer(options.out_file):
        prepared = prepared if prepared is not None else prepare(recipe, specs, out_file=options.out_file,
                                                                 selection=selection)
        # backends, judge
        backends = build_backends(specs if specs is not None else recipe.backends)
        judge_llm = build_backend(recipe.judge.llm) if recipe.judge.enabled and recipe.judge.llm is not None else None
        # run
        return await run_tasks(prepared.tasks, recipe.agent, backends, options, judge_llm=judge_llm,
                               services=prepared.services, tool_runner=tool_runner)


# the engine's old names (collect's vocabulary), one release
__getattr__ = aliases(__name__, {"CollectSummary": "RolloutSummary", "collect": "run_rollouts",
                                 "collect_runs": "run_tasks"}, globals())

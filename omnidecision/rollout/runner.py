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

The engine's entry (`rollout.engine`: a checked plan, the lock, the manifest, the services, the endpoints) ends
here: `run_plan` hands this shard's tasks to `run_tasks`.

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/synth-teacher
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.outputs import exclusive
from omnidecision.protocol.chat import ChatBackend
from omnidecision.protocol.records import OUTCOMES, JudgeResult, RunRecord
from omnidecision.rollout.breaker import EndpointBreaker, RolloutsStopped, guard, start_job
from omnidecision.rollout.deprecated import aliases
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.services import Services
from omnidecision.rollout.store import (
    RecordWriter,
    TrajectoryFileError,
    finished_keys,
    repair_tail,
    resume_problem,
    supersede_errors,
)
from omnidecision.tasks.grading import judge_run
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)


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


# the engine's old names (collect's vocabulary), and the recipe plumbing moved to modules of one job each
# (`selection`, `output`, `services`, `engine`), one release
_MOVED = {
    "collect": "omnidecision.rollout.engine:run_rollouts", "run_rollouts": "omnidecision.rollout.engine:run_rollouts",
    "Prepared": "omnidecision.rollout.engine:Prepared",
    "select_tasks": "omnidecision.rollout.selection:select_tasks",
    "TaskSelection": "omnidecision.rollout.selection:TaskSelection",
    **{name: f"omnidecision.rollout.output:{name}" for name in (
        "manifest_identity", "manifest_problem", "write_manifest", "records_file", "out_problems", "one_writer")},
    **{name: f"omnidecision.rollout.services:{name}" for name in (
        "build_services", "service_problem", "refuse_services", "backend_specs")},
}
__getattr__ = aliases(__name__, {"CollectSummary": "RolloutSummary", "collect_runs": "run_tasks", **_MOVED},
                      globals())

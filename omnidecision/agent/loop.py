"""`run_task`: the agent on one task, in any mode, and its trajectory record.

The ledger mode runs the ledger loop (`omnidecision.agent.ledger_loop`, Algorithm 1); the react and memory
baselines run their history loop (`omnidecision.agent.baselines`) on the same `Run`. `run_task` never raises: a
dead backend or any bug ends the run with outcome `error` and the reason.

    omnidecision run --tasks tasks.jsonl --task-id t1 --teacher
"""

from __future__ import annotations

from omnidecision.agent.baselines import history_loop
from omnidecision.agent.config import AgentConfig

# continue_run, task_context and the loop's call and verdict rules lived here before `agent.ledger_loop`:
# importable from here this release (CHANGELOG.md)
from omnidecision.agent.ledger_loop import (  # noqa: F401
    Run,
    ToolRunner,
    config_digest,
    continue_run,
    end_with_error,
    gap_diagnosis,
    ledger_loop,
    resolve_call,
    task_context,
    verdict_events,
    why_rejected,
)
from omnidecision.protocol.chat import ChatBackend
from omnidecision.protocol.records import RunRecord


async def run_task(task, config: AgentConfig, backends: dict[str, ChatBackend], *, sample: int = 0,
                   tool_runner: ToolRunner | None = None, services: dict | None = None,
                   run_id: str | None = None) -> RunRecord:
    """Run the agent on one task and return its trajectory record. Never raises."""
    digest = config_digest(config)
    record = RunRecord(run_id=run_id or f"{task.id}-s{sample}-{digest[:8]}", task_id=task.id, sample=sample,
                       mode=config.mode, config_digest=digest, question=task.question, level=task.level,
                       category=task.category, source=task.source, gold_answer=task.answer, outcome="error")
    run: Run | None = None
    try:
        run = Run(task, config, backends, tool_runner, services, sample=sample, run_id=record.run_id)
        record.replay = bool(task.meta.get("replay") or (services or {}).get("replay"))
        if config.mode == "ledger":
            await ledger_loop(run, record)
        else:
            await history_loop(run, record)
    except Exception as exc:  # never crash a batch: the reason goes into the record
        end_with_error(record, run, exc)
    return record

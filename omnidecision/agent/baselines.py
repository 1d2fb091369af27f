"""The react and memory baselines: same tools, budgets and finalizer as the ledger agent, no typed ledger.

- react: the planner reads the question and the whole free-form history (actions + observations); the prompt
  grows with every step. The critic is not used; the finalizer drafts the answer from the history.
- memory: the same, but every `AgentConfig.memory_every` steps the summarizer condenses the history into a
  summary that replaces it in the prompt.

Outcomes: accepted (finalizer passed), forced (finalizer failed `revision_budget + 1` times), budget (step or
tool-call cap), error (dead backend). No ledger means no `insufficient`. Invalid planner outputs are counted in
`totals.invalid_actions` and `StepRecord.invalid` (there is no ledger to hold an event).

Their messages (the question and the growing history) are rendered here; a run's bookkeeping and its end are the
ledger loop's (`agent.ledger_loop.Run`, `close`), so the totals are counted the same way in every mode.

    omnidecision run --tasks tasks.jsonl --task-id t1 --teacher --mode react
"""

from __future__ import annotations

import json
import logging
from typing import Any

from omnidecision.agent.ledger_loop import Run, close, observation_text, task_line
from omnidecision.protocol.actions import CallAction, FinishAction, parse_finalizer_output, parse_planner_output
from omnidecision.protocol.chat import BackendError
from omnidecision.protocol.prompts import load_prompt
from omnidecision.protocol.records import Outcome, RoleCall, RunRecord, StepRecord
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import Observation
from omnidecision.tools.registry import arguments_for

logger = logging.getLogger(__name__)

MAX_HISTORY_OBSERVATION_CHARS = 600


async def history_loop(run: Run, record: RunRecord) -> None:
    config, task = run.config, run.task
    history: list[dict[str, Any]] = []
    summary: str | None = None
    since_summary = failures = 0
    best: str | None = None
    for n in range(config.step_budget):
        if config.max_tool_calls is not None and sum(run.tool_calls.values()) >= config.max_tool_calls:
            break
        step = StepRecord(step=n, planner_messages=react_messages(task.question, history, summary, n,
                                                                  config.step_budget))
        record.steps.append(step)
        resp = await run.chat("planner", step.planner_messages, _context(task, history, summary),
                              schema_role="react")
        step.raw_output, step.usage, step.latency_s = resp.text, resp.usage, resp.latency_s
        action, err = parse_planner_output(resp.text)
        if isinstance(action, CallAction) and action.tool is None:
            action, err = None, "react mode: a call must name its tool"
        if action is None:
            step.invalid = err
            run.invalid += 1
            history.append({"action": {"invalid": resp.text[:200]}, "observation": None, "error": err})
        elif isinstance(action, FinishAction):
            step.action = action.model_dump(exclude_none=True)
            passed, answer, diagnosis = await _finalize(run, step, history, summary)
            best = answer or best
            if passed:
                return _stop(run, record, "accepted", best)
            failures += 1
            history.append({"action": step.action, "observation": None, "error": f"finalizer: {diagnosis}"})
            if failures > config.revision_budget:
                return _stop(run, record, "forced", best)
        else:
            step.action = action.model_dump(exclude_none=True)
            query = action.query if action.query is not None else task.question
            obs = await run.run_tool(action.tool or "", arguments_for(action.tool or "", query, action.arguments))
            step.observation = obs.model_dump(mode="json")
            history.append({"action": step.action, "observation": step.observation})
        since_summary += 1
        if config.mode == "memory" and since_summary >= config.memory_every:
            resp = await run.chat("summarizer", summarizer_messages(task.question, history, summary),
                                  _context(task, history, summary))
            step.calls.append(Run.role_call("summarizer", resp))
            summary, history, since_summary = resp.text.strip(), [], 0
    if best is None and config.settings.draft_on_stop:
        try:
            _, best, _ = await _finalize(run, None, history, summary, record.final_calls)
        except BackendError as exc:
            record.final_calls.append(RoleCall(role="finalizer", error=exc.reason))
    return _stop(run, record, "budget", best)


async def _finalize(run: Run, step: StepRecord | None, history: list[dict[str, Any]], summary: str | None,
                    calls: list[RoleCall] | None = None) -> tuple[bool, str | None, str]:
    resp = await run.chat("finalizer", history_finalizer_messages(run.task.question, history, summary, run.task),
                          _context(run.task, history, summary))
    out, err = parse_finalizer_output(resp.text)
    (calls if calls is not None else step.calls).append(Run.role_call("finalizer", resp, err))  # type: ignore[union-attr]
    if out is None:
        run.invalid += 1
        return False, None, f"finalizer output invalid: {err}"
    answer = out.answer.strip() or None
    return out.check == "pass" and answer is not None, answer, out.diagnosis or "the finalizer's check failed"


def _context(task, history: list[dict[str, Any]], summary: str | None) -> dict[str, Any]:
    """What offline backends see: the task, the history since the last summary, and the summary (memory mode)."""
    ctx: dict[str, Any] = {"task": task, "history": list(history)}
    if summary is not None:
        ctx["summary"] = summary
    return ctx


def _stop(run: Run, record: RunRecord, outcome: Outcome, answer: str | None) -> None:
    record.answer = answer
    close(run, record, outcome)  # no ledger: the outcome, the totals and the planner's model


# -- the baselines' messages: the free-form history, growing with every step -------------------------------
def history_text(history: list[dict[str, Any]], summary: str | None = None) -> str:
    """The free-form history of the react/memory baselines: it grows with every step."""
    lines = []
    if summary:
        lines.append(f"SUMMARY OF EARLIER STEPS:\n{summary}")
    for i, h in enumerate(history):
        lines.append(f"STEP {i + 1} ACTION: {json.dumps(h['action'], ensure_ascii=False)}")
        obs = h.get("observation")
        if obs is not None:
            lines.append("OBSERVATION: " + observation_text(Observation.model_validate(obs),
                                                            MAX_HISTORY_OBSERVATION_CHARS))
        elif h.get("error"):
            lines.append(f"ERROR: {h['error']}")
    return "\n".join(lines)


def react_messages(question: str, history: list[dict[str, Any]], summary: str | None = None,
                   step: int = 0, step_budget: int = 15) -> list[dict[str, str]]:
    user = f"QUESTION: {question}\nstep={step:02d}/{step_budget:02d}\n{history_text(history, summary)}".rstrip()
    return [{"role": "system", "content": load_prompt("react")}, {"role": "user", "content": user}]


def history_finalizer_messages(question: str, history: list[dict[str, Any]], summary: str | None = None,
                               task: Task | None = None) -> list[dict[str, str]]:
    user = f"QUESTION: {question}\n{task_line(task)}\n{history_text(history, summary)}".rstrip()
    return [{"role": "system", "content": load_prompt("finalizer")}, {"role": "user", "content": user}]


def summarizer_messages(question: str, history: list[dict[str, Any]], summary: str | None = None) -> list[dict]:
    user = f"QUESTION: {question}\n{history_text(history, summary)}"
    return [{"role": "system", "content": load_prompt("summarizer")}, {"role": "user", "content": user}]

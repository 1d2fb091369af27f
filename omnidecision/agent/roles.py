"""Message renderers of the non-planner roles (decompose, critic, finalizer, summarizer, react).

The planner's messages come from `omnidecision.protocol.prompts.render_planner_messages` (train/serve parity);
this module renders the other roles' messages from their prompt files in `omnidecision/protocol/prompts/`. What
each role's reply must parse as (`role_schema`, `parse_role_output`) is the protocol's, in
`omnidecision.protocol.actions`.

    python -c "from omnidecision.agent.roles import decompose_messages; print(decompose_messages('Who?'))"
"""

from __future__ import annotations

import json
from typing import Any

from omnidecision.ledger import DigestBudget, Ledger, render_digest

# parse_role_output and role_schema moved to the protocol, beside the role output models: importable from here for
# one release (CHANGELOG.md)
from omnidecision.protocol.actions import CallAction, parse_role_output, role_schema  # noqa: F401
from omnidecision.protocol.prompts import load_prompt
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import Observation

MAX_OBSERVATION_CHARS = 2000
MAX_HISTORY_OBSERVATION_CHARS = 600


def _task_line(task: Task | None) -> str:
    if task is None:
        return ""
    parts = [f"answer_type: {task.answer_type}"]
    if task.options:
        parts.append("options: " + " | ".join(task.options))
    if task.assets:
        parts.append("assets: " + ", ".join(f"{a.id} ({a.type})" for a in task.assets))
    if task.tools is not None:
        parts.append("tools: " + (", ".join(task.tools) or "none"))
    return "\n".join(parts)


def decompose_messages(question: str, task: Task | None = None) -> list[dict[str, str]]:
    user = f"QUESTION: {question}\n{_task_line(task)}".rstrip()
    return [{"role": "system", "content": load_prompt("decompose")}, {"role": "user", "content": user}]


def observation_text(obs: Observation, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """A bounded text view of an observation (status, source, text, structured fields)."""
    head = f"tool={obs.tool} ok={'yes' if obs.ok else 'no'}"
    if obs.source is not None:
        head += f" source={obs.source.label()}"
    if obs.error:
        head += f" error={obs.error}"
    if obs.limit_hit:
        head += f" limit_hit={obs.limit_hit}"
    body = obs.text
    if obs.fields:
        body += "\nfields: " + json.dumps(obs.fields, ensure_ascii=False, default=str)
    body = body if len(body) <= limit else body[: limit - 1] + "…"
    return f"{head}\n{body}".rstrip()


def critic_messages(ledger: Ledger, action: CallAction, obs: Observation,
                    budget: DigestBudget | None = None) -> list[dict[str, str]]:
    target = f"need={action.need}" if action.slot is None else f"slot={action.slot}"
    user = (f"{render_digest(ledger, budget)}\n\nCALL: {target} tool={action.tool} "
            f"query={json.dumps(action.query or '', ensure_ascii=False)}\nOBSERVATION:\n{observation_text(obs)}")
    return [{"role": "system", "content": load_prompt("critic")}, {"role": "user", "content": user}]


def finalizer_messages(ledger: Ledger, task: Task | None = None,
                       budget: DigestBudget | None = None) -> list[dict[str, str]]:
    user = f"{render_digest(ledger, budget)}\n{_task_line(task)}".rstrip()
    return [{"role": "system", "content": load_prompt("finalizer")}, {"role": "user", "content": user}]


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
    user = f"QUESTION: {question}\n{_task_line(task)}\n{history_text(history, summary)}".rstrip()
    return [{"role": "system", "content": load_prompt("finalizer")}, {"role": "user", "content": user}]


def summarizer_messages(question: str, history: list[dict[str, Any]], summary: str | None = None) -> list[dict]:
    user = f"QUESTION: {question}\n{history_text(history, summary)}"
    return [{"role": "system", "content": load_prompt("summarizer")}, {"role": "user", "content": user}]

"""The ONE definition of the training rows: state-SFT rows and RL state rows, built and validated here.

Every producer (harvest of collected runs, the synthetic state generators, on-policy rounds) calls `sft_row` /
`rl_row`, so both datasets have one column set and one type per column (`SFT_COLUMNS`, `RL_COLUMNS`).

- SFT row: `messages` (system + user digest + assistant action), `task_id`, `run_id`, `step`, `sample`, `level`,
  `category`, `source`.
- RL row: `prompt` (the planner messages of the state), `ledger` (Ledger JSON), `question`, `actionable`,
  `blocked`, `finish_available`, `tool_call_counts` (JSON), `failed_calls` (JSON), `task_id`, `run_id`, `step`,
  `level`, `category`, `outcome`, `correct` (None where no run was judged), `label` (the rule decision's text,
  when the producer labels the state; "" otherwise).

    >>> from omnidecision.ledger import Ledger
    >>> sorted(rl_row(Ledger(question="q"), task_id="t", run_id="r")) == sorted(RL_COLUMNS)
    True
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from omnidecision.ledger import (
    DigestBudget,
    Ledger,
    actionable_need_indices,
    blocked_need_indices,
    finish_available,
)
from omnidecision.protocol.prompts import render_planner_messages


class Message(BaseModel):
    """One chat message.

    Attributes:
        role: system, user or assistant
        content: the message text
    """

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class _Meta(BaseModel):
    """Where a row came from.

    Attributes:
        task_id: the task of the run the row comes from
        run_id: the run the row comes from
        step: the planner step of that run
        level: the task's difficulty level
        category: the task's category (the synthetic family)
    """

    model_config = ConfigDict(extra="forbid")

    task_id: str
    run_id: str
    step: int
    level: str = ""
    category: str = ""


class SFTRow(_Meta):
    """A state-SFT row.

    Attributes:
        messages: the planner messages exactly as sent (system, user digest), then the decision as the assistant turn
        sample: which sample of the task the run was
        source: where the row came from (the collection, a relabelling)
    """

    messages: list[Message]
    sample: int = 0
    source: str = ""


class RLRow(_Meta):
    """An RL state row: one ledger state with the columns the rewards read.

    Attributes:
        prompt: the planner messages of the state (system, user digest): what GRPO samples decisions for
        ledger: the ledger the planner saw, as JSON (what the closure checks read)
        question: the task's question
        actionable: indices of the open needs whose dependencies are filled
        blocked: indices of the open needs still waiting on others
        finish_available: whether `finish` is a valid action in this state
        tool_call_counts: calls per tool so far, as JSON
        failed_calls: the (need, tool) calls that came back without the value, as JSON
        outcome: how the run this state comes from ended
        correct: whether that run was judged correct (None: not judged)
        label: the rule planner's decision here, when the producer labels the state ("" otherwise)
        decision: what the collected planner emitted in this state ("": invalid output)
        advanced: whether that decision's step moved the ledger (collect.harvest.advanced)
    """

    prompt: list[Message]
    ledger: str
    question: str
    actionable: list[int]
    blocked: list[int]
    finish_available: bool
    tool_call_counts: str
    failed_calls: str
    outcome: str | None = None
    correct: bool | None = None
    label: str = ""
    decision: str = ""  # what the collected planner emitted in this state (empty: invalid output)
    advanced: bool | None = None  # whether that decision's step moved the ledger (collect.harvest.advanced)


SFT_COLUMNS: tuple[str, ...] = tuple(SFTRow.model_fields)
RL_COLUMNS: tuple[str, ...] = tuple(RLRow.model_fields)


def sft_row(messages: list[dict[str, Any]], action_text: str, *, task_id: str, run_id: str, step: int,
            sample: int = 0, level: Any = "", category: str = "", source: str = "") -> dict[str, Any]:
    """One state-SFT row: the planner `messages` exactly as sent, then the assistant action text."""
    msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    msgs.append({"role": "assistant", "content": action_text})
    row = SFTRow(messages=msgs, task_id=task_id, run_id=run_id, step=step, sample=sample,  # type: ignore[arg-type]
                 level=str(level), category=category, source=source)
    return row.model_dump()


def rl_row(state: Ledger, *, task_id: str, run_id: str, step: int | None = None,
           prompt: list[dict[str, Any]] | None = None, budget: DigestBudget | None = None, level: Any = "",
           category: str = "", outcome: str | None = None, correct: bool | None = None,
           label: str = "") -> dict[str, Any]:
    """One RL state row for `state`; `prompt` defaults to `render_planner_messages(state, budget)`."""
    prompt = render_planner_messages(state, budget) if prompt is None else prompt
    row = RLRow(
        prompt=[{"role": str(m["role"]), "content": str(m["content"])} for m in prompt],  # type: ignore[misc]
        ledger=state.model_dump_json(), question=state.question,
        actionable=actionable_need_indices(state), blocked=blocked_need_indices(state),
        finish_available=finish_available(state),
        tool_call_counts=json.dumps(state.tool_call_counts, sort_keys=True),
        failed_calls=json.dumps([f.model_dump(mode="json") for f in state.failed_calls]),
        task_id=task_id, run_id=run_id, step=state.step if step is None else step, level=str(level),
        category=category, outcome=outcome, correct=correct, label=label,
    )
    return row.model_dump()

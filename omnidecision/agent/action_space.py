"""The planner's valid actions for one ledger state, as a JSON schema: ledger-constrained decoding.

The loop rejects a call on a need that is not actionable, a slot call on a slot that is not, a tool the task does
not allow, and any call once the tool budget is spent (`agent.ledger_loop._rejection`). With `AgentConfig.
constrain_decoding` the planner's request carries a schema that admits exactly the actions the loop accepts, so
a backend with structured outputs (vLLM: xgrammar; OpenAI `response_format`) can only emit one of them. The planner
still chooses: which actionable need, which of the allowed tools, a slot or finish (finish is always admitted: the
loop accepts it and the finalizer judges it). Offline backends (the scripted teacher) ignore the schema.
With `constrain_tools: listed` the loop accepts, and the schema admits, for a need only the tools of its listed
sources (`ledger.readiness.listed_tools`: the digest line's `sources=`) and for a slot code_executor: one
call option per distinct set of listed tools, so a need with one source has its tool fixed and a need with an
alternative leaves the planner the switch (docs/research/source-switch.md, "Listed tools").

    >>> from omnidecision.ledger.schema import Ledger
    >>> sorted(ledger_action_schema(Ledger(), None)["anyOf"][0]["properties"])
    ['action']
"""

from __future__ import annotations

from typing import Any

from omnidecision.agent.config import ToolScope
from omnidecision.ledger.readiness import (
    SLOT_TOOL,
    actionable_need_indices,
    actionable_slot_names,
    listed_tools,
    tool_budget_spent,
)
from omnidecision.ledger.schema import Ledger
from omnidecision.protocol.actions import tool_names
from omnidecision.tasks.schema import Task

_QUERY = {"type": "string", "maxLength": 2000}
_ARGUMENTS = {"type": "object"}


def allowed_tools(task: Task | None) -> list[str]:
    """The tools a call may name: the task's list when it has one, else every tool (`tool_names()`: the built-in
    ones in `TOOL_NAMES` order, then the user's registered tools, so constrained decoding admits them too)."""
    names = tool_names()
    if task is None or task.tools is None:
        return list(names)
    return [t for t in names if t in task.tools]


def _call(target: str, values: list[Any], tools: list[str]) -> dict[str, Any]:
    # `action` first and `need`/`slot` next: the field order of the training data (small models copy it)
    return {
        "type": "object",
        "properties": {"action": {"const": "call"}, target: {"enum": values}, "tool": {"enum": tools},
                       "query": _QUERY, "arguments": _ARGUMENTS},
        "required": ["action", target],
        "additionalProperties": False,
    }


def ledger_action_schema(state: Ledger, task: Task | None, max_tool_calls: int | None = None,
                         scope: ToolScope = "allowed") -> dict[str, Any]:
    """A JSON schema (`anyOf` of finish and the admissible calls) for `state`. `max_tool_calls`: the recipe's cap,
    on top of the ledger's own tool budget; when either is spent, only finish is admitted. `scope`: the agent's
    `constrain_tools` (`allowed` or `listed`)."""
    finish = {"type": "object", "properties": {"action": {"const": "finish"}}, "required": ["action"],
              "additionalProperties": False}
    options: list[dict[str, Any]] = [finish]
    tools = allowed_tools(task)
    if not tools or tool_budget_spent(state, max_tool_calls):
        return {"anyOf": options}
    needs = actionable_need_indices(state)
    if scope == "listed":
        # needs grouped by their admissible tools, in the order of the first need of each group
        groups: dict[tuple[str, ...], list[int]] = {}
        for i in needs:
            listed = tuple(t for t in listed_tools(state.needs[i]) if t in tools)
            if listed:
                groups.setdefault(listed, []).append(i)
        options += [_call("need", group, list(listed)) for listed, group in groups.items()]
    elif needs:
        options.append(_call("need", needs, tools))
    slots = actionable_slot_names(state)
    slot_tools = [t for t in tools if t == SLOT_TOOL] if scope == "listed" else tools
    if slots and slot_tools:
        options.append(_call("slot", slots, slot_tools))
    return {"anyOf": options}

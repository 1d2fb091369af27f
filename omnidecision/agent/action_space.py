"""The planner's valid actions for one ledger state: the loop's check of a call, the same rule as a JSON schema
(ledger-constrained decoding), and what an accepted call resolves to.

The loop rejects a call on a need that is not actionable, a slot call on a slot that is not, a tool the task does
not allow, and any call once the tool budget is spent (`why_rejected`; a rejected call is the planner's invalid
action); an accepted one runs the tool, query and arguments `resolve_call` fills in. With `AgentConfig.
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

from omnidecision.agent.config import AgentConfig, ToolScope
from omnidecision.ledger.readiness import (
    SLOT_TOOL,
    actionable_need_indices,
    actionable_slot_names,
    composed_query,
    listed_tools,
    slot_program,
    tool_budget_spent,
    tool_calls_made,
)
from omnidecision.ledger.schema import PERCEPTION_TOOLS, Ledger
from omnidecision.protocol.actions import CallAction, effective_tool, tool_names
from omnidecision.tasks.schema import Task
from omnidecision.tools.registry import arguments_for

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


def _rejection(state: Ledger, task: Task, action: CallAction, scope: ToolScope = "allowed") -> str | None:
    """Why the loop must not execute this call (None: it may). `scope` "listed": a tool outside the need's listed
    sources (a slot: other than code_executor) is rejected too (`AgentConfig.constrain_tools`)."""
    allowed = task.tools
    if action.slot is not None:
        slot = state.slot(action.slot)
        if slot is None or action.slot not in actionable_slot_names(state):
            why = ("unknown slot" if slot is None else f"slot {action.slot} is not actionable (verified="
                   f"{'yes' if slot.verified else 'no'}, needs {slot.needs} must be filled)")
            return f"{why}; actionable slots: {actionable_slot_names(state)}"
        tool = effective_tool(state, action)
        if scope == "listed" and tool != SLOT_TOOL:
            return f"tool {tool} does not compute a slot (slot {action.slot}: {SLOT_TOOL})"
    else:
        need = state.need(action.need)  # type: ignore[arg-type]
        if need is None or action.need not in actionable_need_indices(state):
            why = "unknown need" if need is None else f"need {action.need} is not actionable (status={need.status})"
            return f"{why}; actionable: {actionable_need_indices(state)}"
        tool = effective_tool(state, action)
        listed = listed_tools(need)
        if scope == "listed" and tool not in listed:
            return f"tool {tool} is not a listed source of need {action.need} (listed: {', '.join(listed)})"
    if allowed is not None and tool not in allowed:
        return f"tool {tool} is not allowed for this task (tools: {', '.join(allowed) or 'none'})"
    return None


def resolve_call(state: Ledger, action: CallAction) -> tuple[str, str, dict]:
    """The call's tool, query and arguments, with the defaults filled in: the need's tool and composed query (and
    its asset for a perception tool), or for a slot code_executor and the slot's program."""
    if action.slot is not None:
        tool = effective_tool(state, action)
        query = action.query if action.query is not None else slot_program(state, action.slot)
        return tool, query, arguments_for(tool, query, action.arguments)
    need = state.needs[action.need]  # type: ignore[index]
    tool = effective_tool(state, action)
    query = action.query if action.query is not None else composed_query(state, action.need)  # type: ignore[arg-type]
    arguments = arguments_for(tool, query, action.arguments)
    if need.asset_id is not None and tool in PERCEPTION_TOOLS and not arguments.get("asset_id"):
        arguments["asset_id"] = need.asset_id
    return tool, query, arguments


def why_rejected(state: Ledger, task: Task, action: CallAction, config: AgentConfig) -> str | None:
    """Why the loop would not execute this call at `state` (None: it would): the tool budget is spent, or
    `_rejection`'s reasons. A rejected call is still a decision: it becomes the planner's `InvalidAction`."""
    if tool_budget_spent(state, config.max_tool_calls):
        return f"the tool budget is spent ({tool_calls_made(state)} calls)"
    return _rejection(state, task, action, config.constrain_tools)

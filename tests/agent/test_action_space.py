"""The planner's per-state action space (`agent.action_space`) admits exactly the calls the loop accepts
(`agent.ledger_loop._rejection` and the tool budget), and finish always: checked with `jsonschema` over random
reachable ledgers, every need index (actionable or not), every tool, every slot, with and without a task tool list."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from omnidecision.agent.action_space import ledger_action_schema
from omnidecision.agent.ledger_loop import _rejection
from omnidecision.ledger.readiness import (
    SLOT_TOOL,
    actionable_need_indices,
    actionable_slot_names,
    listed_tools,
    need_tools,
    tool_budget_spent,
    tool_calls_made,
)
from omnidecision.protocol.actions import TOOL_NAMES, CallAction
from omnidecision.synthetic.states import random_ledger
from omnidecision.tasks.schema import Task


def admitted(schema: dict, action: dict) -> bool:
    try:
        jsonschema.validate(action, schema)
        return True
    except jsonschema.ValidationError:
        return False


# one combination in `make test`, the other three (about 40 s on 2 cores) in `make long-test`, which CI runs too
@pytest.mark.parametrize(("tools", "scope"), [
    (None, "allowed"),
    pytest.param(None, "listed", marks=pytest.mark.long),
    pytest.param(["web_search", "code_executor"], "allowed", marks=pytest.mark.long),
    pytest.param(["web_search", "code_executor"], "listed", marks=pytest.mark.long),
])
def test_the_schema_admits_exactly_the_calls_the_loop_accepts(tools, scope):
    rng = random.Random(7)
    task = Task(id="t", question="q", tools=tools)
    checked = accepted = 0
    for _ in range(80):
        state = random_ledger(rng)
        cap = rng.choice([None, tool_calls_made(state), tool_calls_made(state) + 1])
        schema = ledger_action_schema(state, task, cap, scope)
        json.dumps(schema)  # what a backend sends: plain JSON
        assert admitted(schema, {"action": "finish"})
        spent = cap is not None and tool_calls_made(state) >= cap or (
            state.max_tool_calls is not None and tool_calls_made(state) >= state.max_tool_calls)
        targets = [{"need": i} for i in range(len(state.needs) + 1)] + [{"slot": s.name} for s in state.slots]
        for target in targets:
            for tool in TOOL_NAMES:
                action = {"action": "call", **target, "tool": tool}
                ok = not spent and _rejection(state, task, CallAction.model_validate(action), scope) is None
                assert admitted(schema, action) == ok, (action, state.model_dump_json())
                checked += 1
                accepted += ok
    assert accepted > 15 and checked - accepted > 50  # both kinds of decision were exercised


def test_the_schema_leaves_query_optional_and_rejects_unknown_fields():
    state = random_ledger(random.Random(3), max_steps=0)
    task = Task(id="t", question="q")
    need = next(i for i in range(len(state.needs)) if _rejection(state, task, CallAction(need=i)) is None)
    schema = ledger_action_schema(state, task)
    assert admitted(schema, {"action": "call", "need": need})
    assert admitted(schema, {"action": "call", "need": need, "tool": "web_search", "query": "who"})
    assert not admitted(schema, {"action": "call", "need": need, "note": "x"})
    assert not admitted(schema, {"action": "finish", "need": need})


def test_listed_tools_fix_a_single_source_need_and_leave_the_switch_open():
    """`listed`: a need with one source admits only its tool, a need with an `alt` source admits both, a slot
    only code_executor; `allowed` admits every tool for each."""
    rng = random.Random(11)
    seen_single = seen_alt = 0
    for _ in range(60):
        state = random_ledger(rng)
        if tool_budget_spent(state):
            continue
        listed = ledger_action_schema(state, None, scope="listed")
        wide = ledger_action_schema(state, None)
        for i in actionable_need_indices(state):
            need = state.needs[i]
            def names(schema: dict, i: int = i) -> set[str]:
                return {t for t in TOOL_NAMES if admitted(schema, {"action": "call", "need": i, "tool": t})}
            assert names(listed) == set(listed_tools(need)), (i, need)
            assert names(wide) == set(TOOL_NAMES)
            seen_single += len(need_tools(need)) == 1
            seen_alt += len(need_tools(need)) > 1
        for slot in actionable_slot_names(state):
            admits = [t for t in TOOL_NAMES if admitted(listed, {"action": "call", "slot": slot, "tool": t})]
            assert admits == [SLOT_TOOL]
    assert seen_single > 10 and seen_alt > 5

"""One role call of the ledger loop is one `agent.ledger_loop.ask`: the reply (or a decision given in its place)
counted, parsed against the role's schema, and kept as the record's `RoleCall`; `agent.ledger_loop.close` writes the
run's end into its record.

    .venv/bin/pytest tests/agent/test_ask.py -q
"""

from __future__ import annotations

import asyncio

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.ledger_loop import Run, ask, close
from omnidecision.protocol.actions import FinishAction
from omnidecision.protocol.chat import ChatResponse, Usage
from omnidecision.protocol.records import RunRecord
from omnidecision.tasks.schema import Task

from .scripted import Scripted

TASK = Task(id="t", question="Who?", answer="Ann")


def _run(**replies: str) -> tuple[Run, Scripted]:
    backend = Scripted(**replies)
    return Run(TASK, AgentConfig(), {"default": backend}, None, None, run_id="r"), backend


def test_a_role_call_is_asked_counted_and_parsed():
    run, backend = _run(planner='{"action": "finish"}', critic="not json")
    reply = asyncio.run(ask(run, "planner", [{"role": "user", "content": "a b c"}], {"task": TASK}))
    assert isinstance(reply.output, FinishAction) and reply.error is None
    assert backend.requests[0].context["run_id"] == "r" and backend.requests[0].json_schema is not None
    assert run.usage.prompt_tokens == 3 and run.planner_prompt_tokens == 3 and run.planner_model == "scripted"
    bad = asyncio.run(ask(run, "critic", [{"role": "user", "content": "x"}], {"task": TASK}))
    assert bad.output is None and bad.error == "no JSON object found in the output"
    call = bad.call
    assert (call.role, call.raw, call.error, call.model) == ("critic", "not json", bad.error, "scripted")
    assert run.planner_prompt_tokens == 3  # only the planner's prompts count as the planner's


def test_a_given_decision_is_counted_as_the_roles_own_and_nothing_is_asked():
    run, backend = _run()
    given = ChatResponse(text='{"action": "finish"}', usage=Usage(prompt_tokens=7, completion_tokens=2), model="m",
                         cost=0.5)
    reply = asyncio.run(ask(run, "planner", [], {}, given=given))
    assert reply.response is given and isinstance(reply.output, FinishAction) and not backend.requests
    assert (run.usage.prompt_tokens, run.planner_prompt_tokens, run.cost, run.planner_model) == (7, 7, 0.5, "m")


def test_close_writes_the_end_of_the_run():
    run, _ = _run()
    record = RunRecord(run_id="r", task_id="t", outcome="error")
    run.invalid = 2
    close(run, record, "budget")
    assert record.outcome == "budget" and record.final_ledger is None and record.answer is None
    assert record.totals.invalid_actions == 2

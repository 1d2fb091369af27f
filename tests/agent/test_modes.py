"""react / memory baselines: same tools and budgets; the react prompt grows, the ledger prompt does not."""

from __future__ import annotations

import asyncio
import json

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.agent.replay import check_run
from omnidecision.protocol.chat import ChatRequest

from .scripted import Scripted, critic_from, decompose, echo_tool, greedy_planner
from .test_loop import TASK

ONE_HARD_NEED = decompose({"description": "author of Notes", "query_focus": "author of Notes"})


def react_planner(request: ChatRequest) -> str:
    return json.dumps({"action": "call", "need": 0, "tool": "web_search", "query": "author of Notes"})


def planner_lengths(mode: str, steps: int = 8) -> list[int]:
    b = Scripted(decompose=ONE_HARD_NEED, planner=greedy_planner if mode == "ledger" else react_planner,
                 critic=critic_from({}), finalizer='{"answer": "x", "check": "fail"}', summarizer="nothing found")
    r = asyncio.run(run_task(TASK, AgentConfig(mode=mode, step_budget=steps, max_attempts=9), {"default": b},
                             tool_runner=echo_tool))
    assert r.outcome == "budget" and len(r.steps) == steps and check_run(r) is None
    return [len(json.dumps(s.planner_messages)) for s in r.steps]


def test_react_prompt_grows_with_steps_while_the_ledger_prompt_does_not():
    react = planner_lengths("react")
    ledger = planner_lengths("ledger")
    assert all(b > a + 50 for a, b in zip(react, react[1:], strict=False))  # one more action + observation each step
    # same question, same tool results: the digest has fixed-width counters; only the first call changes the
    # tool-count line from "none" to "web_search=1" and adds the need's " tried=[web_search]"
    assert len(set(ledger[1:])) == 1 and abs(ledger[1] - ledger[0]) <= 30
    assert react[-1] > react[0] + 7 * 100 and react[-1] > ledger[-1]


def test_memory_mode_summarises_every_k_steps():
    b = Scripted(planner=react_planner, finalizer='{"answer": "x", "check": "fail"}', summarizer="SUMMARY-TEXT")
    r = asyncio.run(run_task(TASK, AgentConfig(mode="memory", step_budget=6, memory_every=2), {"default": b},
                             tool_runner=echo_tool))
    assert r.outcome == "budget"
    summarised = [s.step for s in r.steps if any(c.role == "summarizer" for c in s.calls)]
    assert summarised == [1, 3, 5]
    # after a summary the prompt holds the summary and only the steps since it: it stays bounded
    assert "SUMMARY-TEXT" in r.steps[2].planner_messages[1]["content"]
    assert "STEP 2 ACTION" not in r.steps[2].planner_messages[1]["content"]
    lengths = [len(json.dumps(s.planner_messages)) for s in r.steps]
    assert lengths[2] == lengths[4]


def test_react_finish_goes_to_the_finalizer_and_counts_invalid_outputs():
    replies = iter(['{"action": "call", "need": 0}', "garbage", react_planner(None)])
    b = Scripted(planner=lambda r: next(replies, '{"action": "finish"}'),
                 finalizer='{"answer": "Ada", "check": "pass"}')
    r = asyncio.run(run_task(TASK, AgentConfig(mode="react"), {"default": b}, tool_runner=echo_tool))
    assert (r.outcome, r.answer) == ("accepted", "Ada")
    assert r.totals.invalid_actions == 2 and r.totals.tool_calls == {"web_search": 1}
    assert "must name its tool" in r.steps[0].invalid and r.steps[1].invalid == "no JSON object found in the output"
    assert all(s.ledger is None and not s.events for s in r.steps)


def test_react_forced_after_failed_finalizer_checks_and_tool_cap():
    b = Scripted(planner='{"action": "finish"}', finalizer='{"answer": "Byron", "check": "fail"}')
    r = asyncio.run(run_task(TASK, AgentConfig(mode="react", revision_budget=1), {"default": b},
                             tool_runner=echo_tool))
    assert (r.outcome, r.answer, len(r.steps)) == ("forced", "Byron", 2)
    b2 = Scripted(planner=react_planner, finalizer='{"answer": "Ada", "check": "pass"}')
    r2 = asyncio.run(run_task(TASK, AgentConfig(mode="react", max_tool_calls=3), {"default": b2},
                              tool_runner=echo_tool))
    assert r2.outcome == "budget" and r2.totals.tool_calls == {"web_search": 3} and r2.answer == "Ada"

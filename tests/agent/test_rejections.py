"""Rejected planner decisions are part of the ledger: the digest shows them, K identical rejections stop the run
(outcome `stuck`, with the reason), a different decision clears the streak, and replay reproduces every snapshot."""

from __future__ import annotations

import asyncio
import json

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.agent.replay import check_run
from omnidecision.eval.attribution import attribute
from omnidecision.protocol.records import RunRecord
from omnidecision.tasks.schema import Task

from .scripted import Scripted, critic_from, decompose, echo_tool, finalizer_pass, greedy_planner

TASK = Task(id="t1", question="In which year was the author of 'Notes' born?", answer="1815")
TWO_HOPS = decompose({"description": "author of Notes", "query_focus": "author of Notes"},
                     {"description": "birth year", "query_focus": "birth year of {#0}", "depends_on": [0]})
BLOCKED_CALL = json.dumps({"action": "call", "need": 1, "tool": "web_search"})  # need 1 waits on need 0


def run(planner, config: AgentConfig) -> RunRecord:
    backend = Scripted(decompose=TWO_HOPS, planner=planner, critic=critic_from({0: "Ada", 1: "1815"}),
                       finalizer=finalizer_pass)
    record = asyncio.run(run_task(TASK, config, {"default": backend}, tool_runner=echo_tool))
    assert check_run(RunRecord.model_validate_json(record.model_dump_json())) is None  # replay is exact
    return record


def test_a_rejected_decision_changes_the_digest_and_the_same_one_repeated_stops_the_run():
    r = run(BLOCKED_CALL, AgentConfig(max_repeated_rejections=3))
    assert r.outcome == "stuck"
    assert len(r.steps) == 3  # stopped at the third identical rejection, not at the step budget (15)
    assert "repeated a rejected decision 3 times" in r.stop_reason and '"need":1' in r.stop_reason
    digests = [s.planner_messages[-1]["content"] for s in r.steps]
    assert "rejected" not in digests[0]
    assert digests[1] != digests[0] and "rejected x1:" in digests[1] and "waits_on" not in digests[1].split(
        "rejected x1:")[1].split("\n")[0]
    assert "need 1 is not actionable" in digests[1] and "actionable: [0]" in digests[1]
    assert "rejected x2:" in digests[2]
    assert r.final_ledger.last_rejected.streak == 3
    assert attribute(r.final_ledger, r.outcome) == "stuck_on_rejections"


def test_without_the_stop_rule_the_step_budget_ends_the_run():
    r = run(BLOCKED_CALL, AgentConfig(max_repeated_rejections=None, step_budget=5))
    assert (r.outcome, len(r.steps)) == ("budget", 5)
    assert attribute(r.final_ledger, r.outcome) == "stuck_on_rejections"


def test_a_different_decision_after_a_rejection_clears_it_and_the_run_recovers():
    def planner(request):  # one rejected decision, then the rule decision
        return BLOCKED_CALL if request.context["ledger"].step == 0 else greedy_planner(request)

    r = run(planner, AgentConfig(max_repeated_rejections=2))
    assert r.outcome == "accepted"
    assert r.steps[1].ledger.last_rejected is not None and r.steps[1].ledger.last_rejected.streak == 1
    assert r.steps[2].ledger.last_rejected is None  # the accepted call cleared it
    assert "rejected" not in r.steps[2].planner_messages[-1]["content"]


def test_different_rejected_decisions_do_not_extend_the_streak():
    outputs = iter([BLOCKED_CALL, "not json at all", BLOCKED_CALL, "not json at all"] * 4)
    r = run(lambda request: next(outputs), AgentConfig(max_repeated_rejections=2, step_budget=6))
    assert r.outcome == "budget"  # alternating rejections never reach a streak of 2
    assert max(s.ledger.last_rejected.streak for s in r.steps[1:]) == 1

"""The seed's stop rules, exact, in the real loop: the slot trap (filled needs and a computable unverified slot
advance through a code call on the slot), insufficient stops abstain (the draft kept apart and judged apart, reports
show accuracy with and without drafts), a contradicting "supports" raises a conflict, R0 reaches the planner, a
need's asset reaches its perception tool, and a tool the task does not allow is rejected with the reason."""

from __future__ import annotations

import asyncio
import json

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.ledger_loop import verdict_events
from omnidecision.eval.report import build_report
from omnidecision.ledger import ConflictRaised, InitLedger, Ledger, NeedSpec, NeedUpdated, SourceRef, reduce
from omnidecision.protocol.actions import NeedVerdict
from omnidecision.protocol.chat import ChatRequest
from omnidecision.protocol.records import ABSTAIN_ANSWER, JudgeResult, RunRecord
from omnidecision.protocol.rule import rule_decision_text
from omnidecision.rollout.runner import judge_draft, judge_record
from omnidecision.tasks.schema import Asset, Task
from omnidecision.tools.registry import run_tool

from .scripted import Scripted, critic_from, decompose, echo_tool, finalizer_pass
from .test_loop import TASK, TWO_HOPS, events, run


def rule_planner(request: ChatRequest) -> str:
    return rule_decision_text(request.context["ledger"])


def test_slot_trap_filled_needs_and_a_computable_slot_advance_to_an_answer():
    task = Task(id="span", question="How many years after the bridge opened did the ferry stop?", answer="69")
    plan = decompose({"description": "year the bridge opened", "query_focus": "bridge opened"},
                     {"description": "year the ferry stopped", "query_focus": "ferry stopped"},
                     slots=[{"name": "answer", "kind": "computation", "needs": [0, 1], "expression": "n1 - n0"}])

    def critic(request: ChatRequest) -> str:
        action, obs = request.context["action"], request.context["observation"]
        if action.slot is not None:  # the code call on the slot: verify it with what the code printed
            printed = obs.fields["stdout"].strip().splitlines()[-1]
            return json.dumps({"slots": [{"slot": action.slot, "value": printed, "verified": True}]})
        return critic_from({0: "1932", 1: "2001"})(request)  # fills needs, never verifies the slot

    def finalizer(request: ChatRequest) -> str:
        return json.dumps({"answer": request.context["ledger"].slot("answer").value, "check": "pass"})

    async def tools(name, arguments, ctx):
        return await (run_tool(name, arguments, ctx) if name == "code_executor" else echo_tool(name, arguments, ctx))

    b = Scripted(decompose=plan, planner=rule_planner, critic=critic, finalizer=finalizer)
    r = run(b, tool_runner=tools, task=task)
    assert (r.outcome, r.answer) == ("accepted", "69"), (r.outcome, r.stop_reason, r.error)
    slot_step = r.steps[2]
    # the trap: every need filled, the slot unverified, no actionable need, and still the ledger could advance
    assert all(n.status == "filled" for n in slot_step.ledger.needs) and not slot_step.ledger.slots[0].verified
    assert "actionable_slot_names=['answer']" in slot_step.planner_messages[1]["content"]
    assert slot_step.action == {"action": "call", "slot": "answer"}  # the short form: code_executor by default
    assert slot_step.observation["tool"] == "code_executor" and slot_step.observation["fields"]["stdout"] == "69\n"
    call = next(e for e in slot_step.events if e.kind == "tool_call")
    assert (call.slot, call.need, call.query) == ("answer", None, "n0 = 1932\nn1 = 2001\nprint(n1 - n0)")
    assert r.final_ledger.slots[0].verified and r.final_ledger.slots[0].value == "69"


def test_insufficient_stops_abstain_and_keep_the_draft_apart():
    b = Scripted(decompose=TWO_HOPS, planner=rule_planner, critic=critic_from({0: None}),
                 finalizer='{"answer": "1815", "check": "fail", "diagnosis": "need 0 open"}')
    r = run(b, AgentConfig(max_attempts=2))
    assert r.outcome == "insufficient"
    assert (r.answer, r.draft_answer) == (ABSTAIN_ANSWER, "1815")
    assert r.final_calls[0].role == "finalizer"
    # the old behaviour, on request: the draft is submitted
    r = run(b, AgentConfig(max_attempts=2, settings={"abstain_on_insufficient": False}))
    assert (r.outcome, r.answer, r.draft_answer) == ("insufficient", "1815", None)
    # a budget stop is not an abstention: its best value is the answer
    r = run(Scripted(decompose=TWO_HOPS, planner=rule_planner, critic=critic_from({0: None}),
                     finalizer='{"answer": "1815", "check": "fail"}'), AgentConfig(step_budget=1, max_attempts=3))
    assert (r.outcome, r.answer, r.draft_answer) == ("budget", "1815", None)


def test_drafts_are_judged_apart_and_reported_side_by_side():
    b = Scripted(decompose=TWO_HOPS, planner=rule_planner, critic=critic_from({0: None}),
                 finalizer='{"answer": "1815", "check": "fail"}')
    abstained = run(b, AgentConfig(max_attempts=1))
    abstained.judge = asyncio.run(judge_record(TASK, abstained, None))
    abstained.draft_judge = asyncio.run(judge_draft(TASK, abstained, None))
    assert abstained.judge.correct is False and abstained.draft_judge.correct is True
    accepted = RunRecord(run_id="b", task_id="t2", outcome="accepted", answer="x",
                         judge=JudgeResult(correct=True, method="exact_match"))
    wrong = RunRecord(run_id="c", task_id="t3", outcome="insufficient", answer=ABSTAIN_ANSWER, draft_answer="y",
                      judge=JudgeResult(correct=False), draft_judge=JudgeResult(correct=False))
    rep = build_report([abstained, accepted, wrong])
    assert (rep["accuracy"], rep["accuracy_with_drafts"]) == (1 / 3, 2 / 3)
    assert rep["drafts"] == {"abstained_with_draft": 2, "draft_correct": 1}
    assert asyncio.run(judge_draft(TASK, accepted, None)) is None  # nothing drafted, nothing judged


def test_a_supports_with_another_value_on_a_filled_need_raises_a_conflict():
    state = reduce(Ledger(), InitLedger(question="q", needs=[NeedSpec(description="author")]))
    state = reduce(state, NeedUpdated(need=0, status="filled", value="Ada Lovelace", filled_by="web_search"))
    src = SourceRef(tool="page_reader", url="https://b.org")
    events_ = verdict_events(state, NeedVerdict(need=0, verdict="supports", status="filled", value="Charles Babbage"),
                             src)
    assert [e.kind for e in events_] == ["conflict"]
    conflict: ConflictRaised = events_[0]
    assert [(v.value, v.source.tool) for v in conflict.values] == [("Ada Lovelace", "web_search"),
                                                                   ("Charles Babbage", "page_reader")]
    after = reduce(state, conflict)
    assert after.needs[0].status == "partial" and after.needs[0].value == "Ada Lovelace"  # never overwritten
    # the same value (case and spacing aside) is no conflict
    same = verdict_events(state, NeedVerdict(need=0, verdict="supports", value="ada  lovelace"), src)
    assert [e.kind for e in same] == ["need_update"]


def test_contradicting_supports_in_the_loop_keeps_both_values():
    def critic(request: ChatRequest) -> str:
        need = request.context["action"].need
        if need == 0:
            return critic_from({0: "Ada"})(request)
        # the call for need 1 also says something else about need 0
        return json.dumps({"verdicts": [{"need": 1, "verdict": "supports", "status": "filled", "value": "1815"},
                                        {"need": 0, "verdict": "supports", "status": "filled", "value": "Byron"}]})

    b = Scripted(decompose=TWO_HOPS, planner=rule_planner, critic=critic, finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=3))
    conflicts = [e for e in events(r) if e.kind == "conflict"]
    assert len(conflicts) == 1 and [v.value for v in conflicts[0].values] == ["Ada", "Byron"]
    assert "conflict#0 on need 0" in r.steps[2].planner_messages[1]["content"]


def test_r0_reaches_the_planner_and_a_needs_asset_reaches_its_tool():
    task = Task(id="mm", question="What does the guide say about the second video?", answer_type="text",
                assets=[Asset(id="video_a", type="video", duration=12.0), Asset(id="video_b", type="video")],
                tools=["subtitle_grounding", "clip_grounding", "code_executor"])
    plan = decompose({"description": "what the guide says", "preferred_source": "subtitle", "query_focus": "guide",
                      "asset_id": "video_b"},
                     {"description": "background", "query_focus": "guide history"})
    seen = []

    async def tools(name, arguments, ctx):
        seen.append((name, arguments))
        return await echo_tool(name, arguments, ctx)

    b = Scripted(decompose=plan, planner=rule_planner, critic=critic_from({0: "welcome"}), finalizer=finalizer_pass)
    r = run(b, AgentConfig(step_budget=3), tool_runner=tools, task=task)
    digest = r.steps[0].planner_messages[1]["content"].splitlines()
    assert digest[1:4] == ["ASSETS: video_a (video 12.0s); video_b (video)", "ANSWER_FORMAT: text",
                           "TOOLS: subtitle_grounding, clip_grounding, code_executor"]
    assert seen[0] == ("subtitle_grounding", {"query": "guide", "asset_id": "video_b"})
    # need 1 is a web need and the task allows no web tool: the call is rejected, with the reason, not run
    rejected = r.steps[1]
    assert rejected.invalid == "tool web_search is not allowed for this task (tools: subtitle_grounding, " \
                               "clip_grounding, code_executor)"
    assert [name for name, _ in seen] == ["subtitle_grounding"]
    assert "rejected x1" in r.steps[2].planner_messages[1]["content"]


def test_with_drafts_an_unanswerable_tasks_guess_is_wrong():
    declined = RunRecord(run_id="u", task_id="u1", outcome="insufficient", answer=ABSTAIN_ANSWER, draft_answer="1900",
                         judge=JudgeResult(correct=None, method="no_gold"),
                         draft_judge=JudgeResult(correct=None, method="no_gold"))
    rep = build_report([declined])
    assert (rep["accuracy"], rep["accuracy_with_drafts"]) == (1.0, 0.0)

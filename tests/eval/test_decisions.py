"""Decision-level diagnostics (eval/decisions.py) on hand-built runs whose rates are known: the repeat of a (need,
tool) that came back without the value while another listed source is untried, and finishing while a blocking need
can still advance. Each run is built through the reducer, so its snapshots are what a collection records."""

from __future__ import annotations

from omnidecision.eval.decisions import decision_diagnostics, decision_lines
from omnidecision.eval.report import build_report, render_markdown
from omnidecision.ledger import Ledger, reduce
from omnidecision.ledger.events import (
    FinishRequested,
    InitLedger,
    NeedSpec,
    NeedUpdated,
    ToolCalled,
)
from omnidecision.protocol.records import JudgeResult, RunRecord, StepRecord

AUDIO, SUBS, WEB = "audio_scouting", "subtitle_grounding", "web_search"


def run(run_id: str, decisions: list[tuple[dict, list]], *, category: str = "source_switch",
        needs: list[NeedSpec] | None = None, max_tool_calls: int | None = None) -> RunRecord:
    """A ledger run: each (action, events) is one planner step, its snapshot the state before its events."""
    needs = needs or [NeedSpec(description="narrator", preferred_source="audio", alt_sources=["subtitle"]),
                      NeedSpec(description="birth year", depends_on=[0])]
    init = InitLedger(question="q?", needs=needs, max_tool_calls=max_tool_calls)
    state = reduce(Ledger(), init)
    steps = []
    for k, (action, events) in enumerate(decisions):
        steps.append(StepRecord(step=k, ledger=state, planner_messages=[], action=action, events=events))
        for e in events:
            state = reduce(state, e)
    return RunRecord(run_id=run_id, task_id=run_id, category=category, initial_events=[init], steps=steps,
                     final_ledger=state, outcome="insufficient", judge=JudgeResult(correct=False))


def call(need: int, tool: str | None = None) -> dict:
    return {"action": "call", "need": need, **({"tool": tool} if tool else {})}


def empty(need: int, tool: str) -> list:
    """The call ran and the critic found nothing: the need stays unfilled."""
    return [ToolCalled(need=need, tool=tool), NeedUpdated(need=need, verdict="omits")]


def filled(need: int, tool: str, value: str) -> list:
    return [ToolCalled(need=need, tool=tool), NeedUpdated(need=need, status="filled", value=value)]


FINISH = ({"action": "finish"}, [FinishRequested()])


def test_repeat_after_empty_counts_the_same_need_and_tool_only():
    runs = [
        # audio empty, then audio again (a repeat, named tool), then no tool named but audio ran (its event: a repeat)
        run("a", [(call(0, AUDIO), empty(0, AUDIO)), (call(0, AUDIO), empty(0, AUDIO)), (call(0), empty(0, AUDIO))]),
        # audio empty, then the subtitles (the switch: no repeat), which fill it; no more such state
        run("b", [(call(0, AUDIO), empty(0, AUDIO)), (call(0, SUBS), filled(0, SUBS, "Ada")),
                  (call(1, WEB), filled(1, WEB, "1815"))]),
        # audio empty, then the planner finishes: not a repeat (but a finish while need 0 can still advance)
        run("c", [(call(0, AUDIO), empty(0, AUDIO)), FINISH]),
    ]
    diag = decision_diagnostics(runs)
    rep = diag["repeat_after_empty"]
    # qualifying states: a's steps 1 and 2, b's step 1, c's step 1 = 4; repeats: a's two
    assert (rep["states"], rep["events"], rep["rate"]) == (4, 2, 0.5)
    assert (rep["runs"], rep["runs_with_event"]) == (3, 1)
    assert diag["by_category"]["source_switch"]["repeat_after_empty"] == rep


def test_a_call_naming_no_tool_counts_as_the_tool_the_loop_would_run():
    """No ToolCalled event (the step recorded none) and no tool named: the call is the first of the need's
    `sources=`, the untried subtitles after an empty audio call, so it is not a repeat."""
    diag = decision_diagnostics([run("f", [(call(0, AUDIO), empty(0, AUDIO)), (call(0), [])])])
    assert (diag["repeat_after_empty"]["states"], diag["repeat_after_empty"]["events"]) == (1, 0)
    named = decision_diagnostics([run("g", [(call(0, AUDIO), empty(0, AUDIO)), (call(0, AUDIO), [])])])
    assert (named["repeat_after_empty"]["states"], named["repeat_after_empty"]["events"]) == (1, 1)


def test_no_untried_source_no_state_and_first_calls_do_not_count():
    # need 0 lists only audio: after an empty audio call there is no other source, so no such state at all
    only = [NeedSpec(description="narrator", preferred_source="audio")]
    diag = decision_diagnostics([run("d", [(call(0, AUDIO), empty(0, AUDIO)), (call(0, AUDIO), empty(0, AUDIO))],
                                     needs=only)])
    assert diag["repeat_after_empty"] == {"states": 0, "events": 0, "rate": None, "runs": 0, "runs_with_event": 0}
    # both sources tried and empty: nothing untried is left, a third call is not counted either
    two = run("e", [(call(0, AUDIO), empty(0, AUDIO)), (call(0, SUBS), empty(0, SUBS)),
                    (call(0, AUDIO), empty(0, AUDIO))])
    assert decision_diagnostics([two])["repeat_after_empty"]["states"] == 1  # only step 1 (subtitles untried)


def test_premature_finish_rate_over_states_where_a_blocking_need_can_advance():
    runs = [
        # step 0: need 0 actionable and blocking: a finish there is premature
        run("f", [FINISH]),
        # step 0 call; step 1 (need 1 actionable now) call; step 2: everything filled, finishing is sound
        run("g", [(call(0, AUDIO), filled(0, AUDIO, "Ada")), (call(1, WEB), filled(1, WEB, "1815")), FINISH]),
        # a spent tool budget: no call can be made, so finishing is not premature (no such state after the call)
        run("h", [(call(0, AUDIO), empty(0, AUDIO)), FINISH], max_tool_calls=1),
        # only a supplementary need is actionable: not a blocking one, not counted
        run("i", [FINISH], needs=[NeedSpec(description="sound", role="supplementary")], category="other"),
    ]
    diag = decision_diagnostics(runs)
    fin = diag["premature_finish"]
    # states: f0, g0, g1, h0 = 4; finishes among them: f0 only
    assert (fin["states"], fin["events"], fin["rate"]) == (4, 1, 0.25)
    assert (fin["runs"], fin["runs_with_event"]) == (3, 1)
    assert diag["by_category"]["other"]["premature_finish"]["states"] == 0


def test_every_report_carries_the_diagnostics_in_json_and_markdown():
    runs = [run("a", [(call(0, AUDIO), empty(0, AUDIO)), (call(0, AUDIO), empty(0, AUDIO)), FINISH])]
    rep = build_report(runs)
    assert rep["decisions"]["repeat_after_empty"]["rate"] == 0.5  # steps 1 (repeat) and 2 (finish)
    assert rep["decisions"]["premature_finish"]["rate"] == 0.3333 # steps 0 and 1 call, step 2 finishes
    md = render_markdown(rep)
    assert "repeats the same (need, tool)" in md and "**50.0%** of 2 states" in md
    assert "| source_switch | 50.0% | 2 | 33.3% | 3 |" in md
    # a report without any such state says so instead of a rate
    assert "no such state" in "\n".join(decision_lines(decision_diagnostics([])))

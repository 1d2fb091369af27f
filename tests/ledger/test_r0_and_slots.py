"""R0 in the digest (assets, options, answer format, allowed tools; bounded) and slots a call can verify (the slot
trap: every need filled, a computation slot unverified, the ledger can still advance)."""

from __future__ import annotations

import pytest

from omnidecision.ledger import (
    AssetRef,
    DigestBudget,
    EventRejected,
    InitLedger,
    Ledger,
    NeedSpec,
    NeedUpdated,
    Slot,
    SlotUpdated,
    TaskContext,
    ToolCalled,
    actionable_slot_names,
    can_advance,
    finish_available,
    ready,
    reduce,
    render_digest,
    replay,
    slot_program,
)
from omnidecision.protocol.rule import rule_action, rule_decision_text

from .builders import start

CONTEXT = TaskContext(assets=[AssetRef(id="video_x1", type="video", duration=62.5),
                              AssetRef(id="audio_a", type="audio")],
                      options=["A. Piano", "B. Drums", "C. Violin"], answer_format="mcq",
                      tools=["subtitle_grounding", "audio_scouting", "clip_grounding", "frame_confirmation"])


def init(**kw) -> Ledger:
    needs = kw.pop("needs", [NeedSpec(description="the instrument heard first", preferred_source="audio",
                                      asset_id="audio_a")])
    return start(question="Which instrument is heard first?", needs=needs, **kw)


def test_digest_starts_with_r0():
    lines = render_digest(init(context=CONTEXT)).splitlines()
    assert lines[:5] == [
        "QUESTION: Which instrument is heard first?",
        "ASSETS: video_x1 (video 62.5s); audio_a (audio)",
        "OPTIONS: A. Piano | B. Drums | C. Violin",
        "ANSWER_FORMAT: mcq",
        "TOOLS: subtitle_grounding, audio_scouting, clip_grounding, frame_confirmation",
    ]
    need_line = next(line for line in lines if line.startswith("[0]"))
    assert "asset=audio_a" in need_line and "status=actionable" in need_line
    # every tool allowed: no TOOLS line; no context at all: no R0 lines
    assert not any(x.startswith("TOOLS") for x in render_digest(init(context=CONTEXT.model_copy(
        update={"tools": None}))).splitlines())
    assert render_digest(init()).splitlines()[1].startswith("step=")


def test_r0_is_bounded_whatever_the_task():
    huge = TaskContext(assets=[AssetRef(id=f"video_{i:04d}_" + "x" * 40, type="video", duration=3600.0)
                               for i in range(200)],
                       options=[f"{chr(65 + i % 26)}. " + "a very long option text " * 20 for i in range(26)],
                       answer_format="mcq", tools=["code_executor"])
    state = init(context=huge, needs=[NeedSpec(description="n", asset_id="video_0199_" + "x" * 40)])
    b = DigestBudget(max_chars=1500)
    text = render_digest(state, b)
    assert len(text) <= 1500
    lines = text.splitlines()
    assert lines[1].startswith("ASSETS: video_0000") and len(lines[1]) <= b.max_line_chars
    assert lines[2].startswith("OPTIONS: A. a very long") and len(lines[2]) <= b.max_question_chars
    assert any(line.startswith("step=") for line in lines)  # the control lines still fit


def test_a_need_names_only_an_asset_of_the_task():
    with pytest.raises(EventRejected, match="names asset 'video_zz', not one of the task's: video_x1, audio_a"):
        init(context=CONTEXT, needs=[NeedSpec(description="x", preferred_source="clip", asset_id="video_zz")])


def _filled_with_slot(expression: str | None = "n1 - n0", kind: str = "computation") -> Ledger:
    s = init(needs=[NeedSpec(description="opened"), NeedSpec(description="closed")],
             slots=[Slot(name="answer", kind=kind, needs=[0, 1], expression=expression)])
    s = reduce(s, NeedUpdated(need=0, status="filled", value="1,932"))
    return reduce(s, NeedUpdated(need=1, status="filled", value="2001"))


def test_slot_trap_a_computable_unverified_slot_keeps_the_ledger_advancing():
    state = _filled_with_slot()
    assert not ready(state) and actionable_slot_names(state) == ["answer"]
    assert can_advance(state) and not finish_available(state)  # before the fix: "insufficient" here
    assert rule_decision_text(state) == '{"action":"call","slot":"answer"}'  # short form: code_executor
    assert slot_program(state, "answer") == "n0 = 1932\nn1 = 2001\nprint(n1 - n0)"
    digest = render_digest(state)
    assert "actionable_slot_names=['answer']" in digest
    assert "slot answer (computation) status=actionable tool=code_executor needs=[0, 1]" in digest
    # a code call on the slot spends the slot's attempts; the critic's verdict verifies it: ready
    called = reduce(state, ToolCalled(slot="answer", tool="code_executor", query=slot_program(state, "answer")))
    assert called.slots[0].attempts == 1 and called.step == state.step + 1
    done = reduce(called, SlotUpdated(slot="answer", value="69", verified=True, source="code_executor"))
    assert ready(done) and finish_available(done) and actionable_slot_names(done) == []


def test_slot_attempts_run_out_then_the_ledger_stops():
    state = _filled_with_slot()
    for _ in range(state.max_attempts):
        state = reduce(state, ToolCalled(slot="answer", tool="code_executor", ok=False, error="NameError"))
    assert actionable_slot_names(state) == [] and not can_advance(state) and finish_available(state)
    assert "failed: slot answer code_executor" in render_digest(state)


def test_a_slot_waits_for_its_needs_and_a_tool_call_names_one_target():
    state = init(needs=[NeedSpec(description="a"), NeedSpec(description="b")],
                 slots=[Slot(name="answer", needs=[0, 1])])
    state = reduce(state, NeedUpdated(need=0, status="filled", value="x"))
    assert actionable_slot_names(state) == []  # need 1 is open
    with pytest.raises(EventRejected, match="exactly one of `need` or `slot`"):
        reduce(state, ToolCalled(need=1, slot="answer", tool="web_search"))
    with pytest.raises(EventRejected, match="unknown slot 'nope'"):
        reduce(state, ToolCalled(slot="nope", tool="code_executor"))
    # a slot without expression restates its values (the critic verifies what it reads)
    state = reduce(state, NeedUpdated(need=1, status="filled", value="y"))
    assert slot_program(state, "answer") == 'n0 = "x"\nn1 = "y"\nprint(", ".join(str(v) for v in [n0, n1]))'
    assert rule_action(state).slot == "answer"


def test_replay_reproduces_slot_calls_and_context():
    events = [InitLedger(question="q", context=CONTEXT, needs=[NeedSpec(description="a", asset_id="video_x1")],
                         slots=[Slot(name="s", kind="computation", needs=[0], expression="n0 * 2")]),
              NeedUpdated(need=0, status="filled", value="21"),
              ToolCalled(slot="s", tool="code_executor", query="n0 = 21\nprint(n0 * 2)"),
              SlotUpdated(slot="s", value="42", verified=True)]
    states = replay(events)
    assert states[-1].context == CONTEXT and states[-1].needs[0].asset_id == "video_x1"
    assert Ledger.model_validate_json(states[-1].model_dump_json()) == states[-1] and ready(states[-1])

"""Reducer behaviour: rejection of invalid events, replay, determinism, readiness (properties + examples)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omnidecision.ledger import (
    EVENT_ADAPTER,
    ConflictRaised,
    ConflictResolved,
    ConflictValue,
    EventRejected,
    FinalizerChecked,
    InitLedger,
    Ledger,
    NeedSpec,
    NeedUpdated,
    Slot,
    SlotUpdated,
    SourceRef,
    ToolCalled,
    actionable_need_indices,
    blocked_need_indices,
    can_advance,
    ready,
    reduce,
    replay,
)

from .builders import accepted, start
from .strategies import event_sequences


@given(event_sequences())
@settings(max_examples=150, deadline=None)
def test_replay_reproduces_every_intermediate_state(seq):
    events, states = accepted(*seq)
    # Round-trip the events through JSON, as a trajectory file would.
    stored = [EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(e)) for e in events]
    replayed = replay(stored)
    assert [s.model_dump_json() for s in replayed] == [s.model_dump_json() for s in states]


@given(event_sequences())
@settings(max_examples=100, deadline=None)
def test_reducer_is_deterministic_and_never_mutates_its_input(seq):
    init, candidates = seq
    state = reduce(Ledger(), init)
    for ev in candidates:
        before = state.model_dump_json()
        try:
            a = reduce(state, ev)
        except EventRejected:
            assert state.model_dump_json() == before  # rejected: the state is unchanged
            continue
        b = reduce(state, ev)
        assert a.model_dump_json() == b.model_dump_json()
        assert state.model_dump_json() == before
        state = a


def _ready_by_the_three_conditions(s: Ledger) -> bool:
    """The paper's readiness, written from its three conditions over the stored JSON (not the model's helpers):
    (1) no blocking need is left without a value: each one is "filled" (an unfillable blocking need still stands
    between the ledger and an answer); (2) every slot is verified; (3) every conflict is resolved."""
    data = json.loads(s.model_dump_json())
    violations = 0
    for need in data["needs"]:
        violations += need["role"] == "blocking" and need["status"] != "filled"
    violations += sum(1 for slot in data["slots"] if slot["verified"] is not True)
    violations += sum(1 for conflict in data["conflicts"] if conflict["resolved"] is not True)
    return violations == 0


@given(event_sequences())
@settings(max_examples=150, deadline=None)
def test_ready_holds_exactly_when_the_definition_holds(seq):
    _, states = accepted(*seq)
    for s in states:
        assert ready(s) == _ready_by_the_three_conditions(s)
        act, blk = set(actionable_need_indices(s)), set(blocked_need_indices(s))
        assert not act & blk
        for i in act | blk:
            assert s.needs[i].status in ("unfilled", "partial")
        if act:
            assert can_advance(s)


def _base() -> Ledger:
    return start(
        question="Who spoke after the bell, and what year was she born?",
        needs=[NeedSpec(description="moment of the bell", preferred_source="audio", query_focus="bell"),
               NeedSpec(description="speaker", preferred_source="subtitle", depends_on=[0], query_focus="at {#0}")],
        slots=[Slot(name="speaker", needs=[1])])


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (ToolCalled(need=7, tool="web_search"), "unknown need index 7"),
        (NeedUpdated(need=-1, status="filled", value="x"), "unknown need index -1"),
        (SlotUpdated(slot="nope", value="1", verified=True), "unknown slot 'nope'"),
        (NeedUpdated(need=0, status="unfilled"), "status unfilled -> unfilled is not allowed"),
        (NeedUpdated(need=0, status="filled"), "cannot be filled without a value"),
        (NeedUpdated(need=0, add_depends_on=[1]), "makes a cycle"),
        (NeedUpdated(need=0, add_depends_on=[0]), "cannot depend on itself"),
        (ConflictResolved(conflict=0, value="x"), "unknown conflict 0"),
        (InitLedger(question="again", needs=[]), "already initialised"),
    ],
)
def test_invalid_event_is_rejected_with_a_clear_message_and_state_unchanged(event, message):
    state = _base()
    before = state.model_dump_json()
    with pytest.raises(EventRejected) as info:
        reduce(state, event)
    assert message in str(info.value)
    assert info.value.event is event
    assert state.model_dump_json() == before


def _with_conflict(resolved: bool = False) -> Ledger:
    state = _base()
    src = SourceRef(tool="subtitle_grounding", asset_id="v1")
    state = reduce(state, ConflictRaised(need=1, values=[ConflictValue(value="Ann", source=src),
                                                         ConflictValue(value="Bea", source=src)]))
    return reduce(state, ConflictResolved(conflict=0, value="Ann")) if resolved else state


@pytest.mark.parametrize(
    ("state", "event", "message"),
    [
        (Ledger(), InitLedger(question="q", needs=[NeedSpec(description="a")],
                              slots=[Slot(name="x", needs=[0]), Slot(name="x", needs=[0])]), "duplicate slot names"),
        (Ledger(), InitLedger(question="q", needs=[NeedSpec(description="a", depends_on=[3])]),
         "depends on unknown need 3"),
        (Ledger(), InitLedger(question="q", needs=[NeedSpec(description="a", depends_on=[1]),
                                                    NeedSpec(description="b", depends_on=[0])]), "form a cycle"),
        (Ledger(), InitLedger(question="q", needs=[NeedSpec(description="a")], slots=[Slot(name="x", needs=[2])]),
         "slot 'x' refers to unknown need 2"),
        (_base(), ConflictRaised(need=0, slot="speaker", values=[
            ConflictValue(value="1", source=SourceRef(tool="web_search")),
            ConflictValue(value="2", source=SourceRef(tool="web_search"))]), "exactly one of `need` or `slot`"),
        (_base(), ConflictRaised(values=[
            ConflictValue(value="1", source=SourceRef(tool="web_search")),
            ConflictValue(value="2", source=SourceRef(tool="web_search"))]), "exactly one of `need` or `slot`"),
        (_base(), ConflictRaised(slot="nope", values=[
            ConflictValue(value="1", source=SourceRef(tool="web_search")),
            ConflictValue(value="2", source=SourceRef(tool="web_search"))]), "unknown slot 'nope'"),
        (_with_conflict(resolved=True), ConflictResolved(conflict=0, value="Bea"), "conflict 0 is already resolved"),
        (_base(), SlotUpdated(slot="speaker", value=None, verified=True), "cannot be verified without a value"),
        (_base(), SlotUpdated(slot="speaker", value="", verified=True), "cannot be verified without a value"),
        (_base(), FinalizerChecked(passed=True), "must carry the answer"),
        (reduce(_base(), NeedUpdated(need=0, status="unfillable")), ToolCalled(need=0, tool="audio_scouting"),
         "need 0 is unfillable"),
        (reduce(_base(), NeedUpdated(need=0, status="unfillable")), ConflictRaised(need=0, values=[
            ConflictValue(value="1", source=SourceRef(tool="web_search")),
            ConflictValue(value="2", source=SourceRef(tool="web_search"))]), "nothing to conflict over"),
    ],
    ids=["duplicate-slots", "unknown-dependency", "cycle", "slot-unknown-need", "conflict-need-and-slot",
         "conflict-neither", "conflict-unknown-slot", "resolve-resolved", "verified-slot-no-value",
         "verified-slot-empty-value", "passed-check-no-answer", "call-unfillable", "conflict-unfillable"],
)
def test_more_rejections_name_the_reason_and_leave_the_state_unchanged(state, event, message):
    before = state.model_dump_json()
    with pytest.raises(EventRejected) as info:
        reduce(state, event)
    assert message in str(info.value) and info.value.event is event
    assert state.model_dump_json() == before


def _need(i: int, status: str, role: str = "blocking", value: str | None = "v") -> dict:
    return {"index": i, "description": f"n{i}", "role": role, "status": status,
            "value": value if status == "filled" else None}


# Readiness of small ledgers, labelled by hand from the three conditions (an oracle that shares no code with ready())
READY_CASES = [
    ({}, True),  # nothing asked, nothing open
    ({"needs": [_need(0, "filled"), _need(1, "filled")]}, True),
    ({"needs": [_need(0, "filled"), _need(1, "partial")]}, False),
    ({"needs": [_need(0, "filled"), _need(1, "unfilled")]}, False),
    ({"needs": [_need(0, "filled"), _need(1, "unfillable")]}, False),  # a blocking need no tool can fill
    ({"needs": [_need(0, "filled"), _need(1, "unfilled", role="supplementary")]}, True),
    ({"needs": [_need(0, "filled"), _need(1, "unfillable", role="supplementary")]}, True),
    ({"needs": [_need(0, "filled")], "slots": [{"name": "x", "needs": [0], "value": "v", "verified": True}]}, True),
    ({"needs": [_need(0, "filled")], "slots": [{"name": "x", "needs": [0], "value": "v", "verified": False}]}, False),
    ({"needs": [_need(0, "filled")], "conflicts": [{"id": 0, "need": 0, "resolved": False, "values": [
        {"value": "a", "source": {"tool": "web_search"}}, {"value": "b", "source": {"tool": "web_search"}}]}]}, False),
    ({"needs": [_need(0, "filled")], "conflicts": [{"id": 0, "need": 0, "resolved": True, "resolution": "a",
                                                    "values": [{"value": "a", "source": {"tool": "web_search"}},
                                                               {"value": "b", "source": {"tool": "web_search"}}]}]},
     True),
]


@pytest.mark.parametrize(("ledger", "expected"), READY_CASES)
def test_ready_on_hand_labelled_ledgers(ledger, expected):
    state = Ledger.model_validate({"question": "q", **ledger})
    assert ready(state) is expected and _ready_by_the_three_conditions(state) is expected


def test_unfillable_is_terminal_and_events_before_init_are_rejected():
    s = reduce(_base(), NeedUpdated(need=0, status="unfillable"))
    with pytest.raises(EventRejected, match="unfillable -> filled"):
        reduce(s, NeedUpdated(need=0, status="filled", value="3s"))
    with pytest.raises(EventRejected, match="not initialised"):
        reduce(Ledger(), ToolCalled(need=0, tool="web_search"))


def test_conflict_keeps_every_value_with_its_source_and_resolution_fills_the_need():
    s = reduce(_base(), NeedUpdated(need=0, status="filled", value="12s", filled_by="audio_scouting"))
    a, b = SourceRef(tool="audio_scouting", asset_id="v1", start=12, end=13), SourceRef(tool="web_search", url="u")
    values = [ConflictValue(value="12s", source=a), ConflictValue(value="40s", source=b)]
    s = reduce(s, ConflictRaised(need=0, values=values))
    assert s.needs[0].status == "partial" and not ready(s)
    assert [(v.value, v.source) for v in s.conflicts[0].values] == [("12s", a), ("40s", b)]
    s = reduce(s, ConflictResolved(conflict=0, value="12s", source=a))
    assert s.conflicts[0].resolved and s.needs[0].status == "filled" and s.needs[0].value == "12s"
    assert s.conflicts[0].values[1].value == "40s"  # the losing value is kept for the record


def test_dependencies_gate_actionability_and_attempts_exhaust_a_need():
    s = _base()
    assert actionable_need_indices(s) == [0] and blocked_need_indices(s) == [1]
    for _ in range(s.max_attempts):
        s = reduce(s, ToolCalled(need=0, tool="audio_scouting", ok=False, error="nothing"))
    assert actionable_need_indices(s) == [] and not can_advance(s) and not ready(s)
    assert s.step == s.max_attempts and len(s.failed_calls) == s.max_attempts
    assert s.tool_call_counts == {"audio_scouting": s.max_attempts}


@given(st.integers(0, 40))
def test_step_counter_counts_planner_decisions(n):
    s = _base()
    for _ in range(n):
        s = reduce(s, EVENT_ADAPTER.validate_python({"kind": "invalid_action", "role": "planner", "error": "x"}))
    assert s.step == n and s.invalid_counts.get("planner", 0) == n


def test_a_conflict_on_a_need_that_became_unfillable_does_not_count_as_advanceable():
    s = reduce(_base(), NeedUpdated(need=0, status="partial", value="12s"))
    src = SourceRef(tool="audio_scouting")
    s = reduce(s, ConflictRaised(need=0, values=[ConflictValue(value="12s", source=src),
                                                 ConflictValue(value="40s", source=src)]))
    assert can_advance(s)
    s = reduce(s, NeedUpdated(need=0, status="unfillable"))
    assert not can_advance(s) and not ready(s)
    with pytest.raises(EventRejected, match="unfillable"):
        reduce(s, ToolCalled(need=0, tool="audio_scouting"))


def test_a_failed_check_diagnosis_is_dropped_once_the_ledger_moves_on():
    s = reduce(_base(), FinalizerChecked(passed=False, diagnosis="need 0 is open"))
    assert s.gap_diagnosis == "need 0 is open" and s.finalizer_failures == 1
    s = reduce(s, NeedUpdated(need=0, verdict="omits"))
    assert s.gap_diagnosis == "need 0 is open"  # nothing changed: the diagnosis still holds
    s = reduce(s, NeedUpdated(need=0, status="filled", value="12s"))
    assert s.gap_diagnosis is None and s.finalizer_failures == 1

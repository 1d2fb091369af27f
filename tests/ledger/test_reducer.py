"""Reducer behaviour: rejection of invalid events, replay, determinism, readiness (properties + examples)."""

from __future__ import annotations

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

from .strategies import event_sequences


def _apply_valid(init, candidates):
    """Run candidates through the reducer, keeping only the events it accepts; returns (events, states)."""
    state = reduce(Ledger(), init)
    events, states = [init], [state]
    for ev in candidates:
        try:
            state = reduce(state, ev)
        except EventRejected:
            continue
        events.append(ev)
        states.append(state)
    return events, states


@given(event_sequences())
@settings(max_examples=150, deadline=None)
def test_replay_reproduces_every_intermediate_state(seq):
    events, states = _apply_valid(*seq)
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


def _ready_by_definition(s: Ledger) -> bool:
    blocking_met = all(n.status == "filled" for n in s.needs if n.role == "blocking")
    return blocking_met and all(sl.verified for sl in s.slots) and all(c.resolved for c in s.conflicts)


@given(event_sequences())
@settings(max_examples=150, deadline=None)
def test_ready_holds_exactly_when_the_definition_holds(seq):
    _, states = _apply_valid(*seq)
    for s in states:
        assert ready(s) == _ready_by_definition(s)
        act, blk = set(actionable_need_indices(s)), set(blocked_need_indices(s))
        assert not act & blk
        for i in act | blk:
            assert s.needs[i].status in ("unfilled", "partial")
        if act:
            assert can_advance(s)


def _base() -> Ledger:
    return reduce(Ledger(), InitLedger(
        question="Who spoke after the bell, and what year was she born?",
        needs=[NeedSpec(description="moment of the bell", preferred_source="audio", query_focus="bell"),
               NeedSpec(description="speaker", preferred_source="subtitle", depends_on=[0], query_focus="at {#0}")],
        slots=[Slot(name="speaker", needs=[1])]))


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

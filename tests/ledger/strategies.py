"""Hypothesis strategies for ledgers and event sequences (shared by the ledger property tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from omnidecision.ledger import (
    SOURCES,
    ConflictRaised,
    ConflictResolved,
    ConflictValue,
    EvidenceAdded,
    FinalizerChecked,
    FinishRequested,
    InitLedger,
    InvalidAction,
    NeedSpec,
    NeedUpdated,
    Slot,
    SlotUpdated,
    SourceRef,
    ToolCalled,
)

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
short = st.text(alphabet="abcdefghij 0123456789", min_size=1, max_size=12)
source_ref = st.builds(
    SourceRef, tool=st.sampled_from(["web_search", "subtitle_grounding", "code_executor"]),
    asset_id=st.none() | short, start=st.none() | st.floats(0, 100), end=st.none() | st.floats(0, 100),
)


@st.composite
def init_events(draw, max_needs: int = 6) -> InitLedger:
    n = draw(st.integers(1, max_needs))
    needs = []
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []  # acyclic by construction
        needs.append(NeedSpec(description=draw(text), role=draw(st.sampled_from(["blocking", "supplementary"])),
                              query_focus=draw(text), preferred_source=draw(st.sampled_from(SOURCES)),
                              depends_on=deps))
    slots = [Slot(name=f"s{j}", kind=draw(st.sampled_from(["fact", "computation"])),
                  needs=draw(st.lists(st.integers(0, n - 1), max_size=2, unique=True)))
             for j in range(draw(st.integers(0, 3)))]
    return InitLedger(question=draw(text), needs=needs, slots=slots, step_budget=draw(st.integers(1, 30)),
                      max_attempts=draw(st.integers(1, 4)))


def candidate_events(n_needs: int, n_slots: int):
    """Events that may or may not apply (indices can be out of range on purpose)."""
    need = st.integers(-1, n_needs)
    slot_name = st.sampled_from([f"s{j}" for j in range(n_slots + 1)])
    status = st.none() | st.sampled_from(["unfilled", "partial", "filled", "unfillable"])
    value = st.none() | short
    return st.one_of(
        st.builds(ToolCalled, need=need, tool=st.sampled_from(["web_search", "audio_scouting"]), query=value,
                  ok=st.booleans()),
        st.builds(InvalidAction, role=st.sampled_from(["planner", "critic"]), error=short),
        st.builds(NeedUpdated, need=need, verdict=st.sampled_from(["supports", "conflicts", "omits"]), status=status,
                  value=value, revised_query_focus=value,
                  revised_role=st.none() | st.sampled_from(["blocking", "supplementary"]),
                  add_depends_on=st.lists(need, max_size=1)),
        st.builds(EvidenceAdded, claim=text, source=source_ref, supports=st.lists(need, max_size=2)),
        st.builds(ConflictRaised, need=need, values=st.lists(st.builds(ConflictValue, value=short, source=source_ref),
                                                           min_size=2, max_size=3)),
        st.builds(ConflictResolved, conflict=st.integers(-1, 3), value=short),
        st.builds(SlotUpdated, slot=slot_name, value=value, verified=st.booleans()),
        st.builds(FinishRequested),
        st.builds(FinalizerChecked, passed=st.booleans(), answer=value, diagnosis=value),
    )


@st.composite
def event_sequences(draw, max_events: int = 25):
    """An init event plus a list of candidate events (some will be rejected by the reducer)."""
    init = draw(init_events())
    rest = draw(st.lists(candidate_events(len(init.needs), len(init.slots)), max_size=max_events))
    return init, rest

"""The need-status transition table, written from the ledger's definitions (DESIGN.md §1, the reducer's rules), not
read from `reducer.ALLOWED_TRANSITIONS`:

- `unfilled` is never a target: evidence that was seen cannot be un-seen, so no verdict sends a need back to it;
- `unfillable` is terminal: once no tool can fill a need, nothing revives it (no verdict, no conflict resolution);
- `filled` may be weakened to `partial` (a later verdict or a conflict disputes the value) or re-filled with a
  revised value, but never declared `unfillable` (a value was found);
- `unfilled` and `partial` may move to any of `partial`, `filled`, `unfillable`; `filled` needs a value.

Every cell of the 4 x 4 table is checked through `reduce`, and a property test checks that no sequence of events of
any kind breaks the two one-way rules.

    pytest -q tests/ledger/test_transitions.py
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from omnidecision.ledger import (
    ConflictRaised,
    ConflictResolved,
    ConflictValue,
    EventRejected,
    Ledger,
    NeedSpec,
    NeedUpdated,
    SourceRef,
    reduce,
)

from .builders import accepted, start
from .strategies import event_sequences

STATUSES = ("unfilled", "partial", "filled", "unfillable")
# (from, to) -> allowed, one line per source status; the reasons are in the module docstring
TABLE: dict[tuple[str, str], bool] = {
    ("unfilled", "unfilled"): False, ("unfilled", "partial"): True, ("unfilled", "filled"): True,
    ("unfilled", "unfillable"): True,
    ("partial", "unfilled"): False, ("partial", "partial"): True, ("partial", "filled"): True,
    ("partial", "unfillable"): True,
    ("filled", "unfilled"): False, ("filled", "partial"): True, ("filled", "filled"): True,
    ("filled", "unfillable"): False,
    ("unfillable", "unfilled"): False, ("unfillable", "partial"): False, ("unfillable", "filled"): False,
    ("unfillable", "unfillable"): False,
}
WEB = SourceRef(tool="web_search")


def _ledger_with_need_in(status: str) -> Ledger:
    """One blocking need brought to `status` by the events a run would commit."""
    s = start(question="q", needs=[NeedSpec(description="the year", query_focus="year")])
    if status == "partial":
        s = reduce(s, NeedUpdated(need=0, status="partial", value="1990s"))
    elif status == "filled":
        s = reduce(s, NeedUpdated(need=0, status="filled", value="1994"))
    elif status == "unfillable":
        s = reduce(s, NeedUpdated(need=0, status="unfillable"))
    assert s.needs[0].status == status
    return s


def test_the_table_covers_every_pair() -> None:
    assert set(TABLE) == {(a, b) for a in STATUSES for b in STATUSES}


@pytest.mark.parametrize(("src", "dst"), sorted(TABLE), ids=lambda x: x)
def test_need_status_transition(src: str, dst: str) -> None:
    state = _ledger_with_need_in(src)
    before = state.model_dump_json()
    event = NeedUpdated(need=0, status=dst, value="1995")
    if TABLE[(src, dst)]:
        new = reduce(state, event)
        assert new.needs[0].status == dst
        if dst == "filled":
            assert new.needs[0].value == "1995"
    else:
        with pytest.raises(EventRejected, match=f"{src} -> {dst}"):
            reduce(state, event)
    assert state.model_dump_json() == before  # the input state is never touched


def test_filled_needs_a_value() -> None:
    for src in ("unfilled", "partial"):
        state = _ledger_with_need_in(src)
        if state.needs[0].value is None:
            with pytest.raises(EventRejected, match="without a value"):
                reduce(state, NeedUpdated(need=0, status="filled"))
    # a partial value carries over: filling it with no new value keeps the one found
    assert reduce(_ledger_with_need_in("partial"), NeedUpdated(need=0, status="filled")).needs[0].value == "1990s"


def test_a_conflict_weakens_filled_to_partial_and_its_resolution_fills_it() -> None:
    s = _ledger_with_need_in("filled")
    s = reduce(s, ConflictRaised(need=0, values=[ConflictValue(value="1994", source=WEB),
                                                 ConflictValue(value="1995", source=SourceRef(tool="page_reader"))]))
    assert s.needs[0].status == "partial"
    s = reduce(s, ConflictResolved(conflict=0, value="1995", source=SourceRef(tool="page_reader")))
    assert (s.needs[0].status, s.needs[0].value) == ("filled", "1995")


def test_no_conflict_on_an_unfillable_need() -> None:
    with pytest.raises(EventRejected, match="unfillable"):
        reduce(_ledger_with_need_in("unfillable"), ConflictRaised(need=0, values=[
            ConflictValue(value="a", source=WEB), ConflictValue(value="b", source=WEB)]))


def test_resolving_a_conflict_does_not_revive_an_unfillable_need() -> None:
    """A need disputed, then declared unfillable: the conflict's later resolution settles the dispute (so it no
    longer holds the ledger back) but must not fill the need (found by this test: it used to)."""
    s = _ledger_with_need_in("filled")
    s = reduce(s, ConflictRaised(need=0, values=[ConflictValue(value="1994", source=WEB),
                                                 ConflictValue(value="1995", source=WEB)]))
    s = reduce(s, NeedUpdated(need=0, status="unfillable"))
    s = reduce(s, ConflictResolved(conflict=0, value="1995", source=WEB))
    assert s.conflicts[0].resolved and s.needs[0].status == "unfillable"


@given(event_sequences(max_events=40))
@settings(max_examples=50, deadline=None)  # ~2 s; the table above is the exhaustive part
def test_no_event_sequence_breaks_the_one_way_rules(seq) -> None:
    events, states = accepted(*seq)
    for event, old, new in zip(events[1:], states[:-1], states[1:], strict=True):
        for old_need, new_need in zip(old.needs, new.needs, strict=True):
            if old_need.status != "unfilled":
                assert new_need.status != "unfilled", (old_need.status, event)
            if old_need.status == "unfillable":
                assert new_need.status == "unfillable", event
            if old_need.status == "filled":
                assert new_need.status in ("filled", "partial"), event

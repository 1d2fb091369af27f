"""The digest: bounded for any ledger, constant length over steps, layout with actionable needs first."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omnidecision.ledger import (
    DigestBudget,
    EvidenceAdded,
    NeedSpec,
    NeedUpdated,
    SourceRef,
    reduce,
    render_digest,
)

from .builders import accepted, start
from .strategies import event_sequences, text


@given(event_sequences(max_events=40), st.integers(40, 2500))
@settings(max_examples=120, deadline=None)
def test_digest_stays_within_a_char_budget(seq, max_chars):
    for s in accepted(*seq)[1]:
        assert len(render_digest(s, DigestBudget(max_chars=max_chars))) <= max_chars


@given(event_sequences(max_events=30), st.integers(10, 400))
@settings(max_examples=60, deadline=None)
def test_digest_stays_within_a_token_budget(seq, max_tokens):
    def count(t: str) -> int:
        return len(t.split())

    budget = DigestBudget(max_tokens=max_tokens, count_tokens=count)
    for s in accepted(*seq)[1]:
        assert count(render_digest(s, budget)) <= max_tokens


@pytest.mark.long  # about 14 s on 2 cores; the char and token budgets above hold the cap in `make test`
@given(st.integers(5, 60), text)
@settings(max_examples=30, deadline=None)
def test_huge_ledger_is_capped(n_needs, question):
    needs = [NeedSpec(description=f"need {i} " * 30, query_focus="x" * 500) for i in range(n_needs)]
    s = start(question=question * 50, needs=needs)
    for i in range(200):
        s = reduce(s, EvidenceAdded(claim=f"claim {i} " * 20, source=SourceRef(tool="web_search"), supports=[0]))
    out = render_digest(s, DigestBudget(max_chars=1500))
    assert len(out) <= 1500
    assert "omitted for size" in out


@given(event_sequences(max_events=20), st.lists(st.integers(0, 99), min_size=2, max_size=10))
@settings(max_examples=60, deadline=None)
def test_digest_length_does_not_grow_with_the_step_count(seq, steps):
    fixed = accepted(*seq)[1][-1]
    lengths = {len(render_digest(fixed.model_copy(update={"step": k}))) for k in steps}
    assert len(lengths) == 1


@given(event_sequences(max_events=20), st.integers(1, 1000), st.data())
@settings(max_examples=60, deadline=None)
def test_digest_length_is_fixed_for_every_step_up_to_any_budget(seq, budget, data):
    fixed = accepted(*seq)[1][-1].model_copy(update={"step_budget": budget})
    steps = data.draw(st.lists(st.integers(0, budget), min_size=2, max_size=10) | st.just([0, budget]))
    lengths = {len(render_digest(fixed.model_copy(update={"step": k}))) for k in steps}
    assert len(lengths) == 1, (budget, steps)


def test_step_100_of_a_120_step_budget_is_as_wide_as_step_9():
    s = start(question="q", needs=[NeedSpec(description="a")], step_budget=120)
    lines = [render_digest(s.model_copy(update={"step": k})).splitlines()[1] for k in (9, 99, 100, 120)]
    assert [line.split()[0] for line in lines] == ["step=009/120", "step=099/120", "step=100/120", "step=120/120"]
    assert len({len(line) for line in lines}) == 1


@given(st.integers(2, 30), st.data())
@settings(max_examples=40, deadline=None)
def test_digest_length_is_fixed_whatever_the_attempts_up_to_their_cap(cap, data):
    """An actionable need (attempts below the cap) and an unfillable one (any attempts up to the cap) keep their
    lines' widths while only the attempt counts change."""
    s = start(question="q", max_attempts=cap, needs=[
        NeedSpec(description="a", query_focus="x"), NeedSpec(description="b", role="supplementary")])
    s = reduce(s, NeedUpdated(need=1, status="unfillable"))
    lengths = set()
    for a in data.draw(st.lists(st.integers(0, cap - 1), min_size=2, max_size=8)):
        needs = [s.needs[0].model_copy(update={"attempts": a}), s.needs[1].model_copy(update={"attempts": a + 1})]
        lengths.add(len(render_digest(s.model_copy(update={"needs": needs}))))
    assert len(lengths) == 1, cap


def test_layout_lists_actionable_needs_first_with_their_tool_and_composed_query():
    s = start(question="q", needs=[
        NeedSpec(description="bell moment", preferred_source="audio", query_focus="bell"),
        NeedSpec(description="speaker", preferred_source="subtitle", query_focus="speaker at {#0}", depends_on=[0]),
        NeedSpec(description="extra", role="supplementary", preferred_source="web", query_focus="context"),
    ])
    lines = render_digest(s).splitlines()
    need_lines = [ln for ln in lines if ln.startswith("[")]
    # an actionable line names its listed sources right after the index, the next to try first (the field a
    # planner copies)
    assert need_lines[0].startswith("[0] sources=[audio_scouting] ") and " status=actionable " in need_lines[0]
    assert need_lines[1].startswith("[2] sources=[web_search] status=actionable role=supplementary")
    assert need_lines[2].startswith("[1] status=blocked") and "waits_on=[0]" in need_lines[2]
    s = reduce(s, NeedUpdated(need=0, status="filled", value="00:42"))
    first = [ln for ln in render_digest(s).splitlines() if ln.startswith("[")][0]
    assert first.startswith("[1] sources=[subtitle_grounding] status=actionable")
    assert 'query="speaker at 00:42"' in first

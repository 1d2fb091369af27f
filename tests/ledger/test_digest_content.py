"""What the digest SHOWS, from its definition (DESIGN.md §1, the digest module's docstring), on one hand-built
ledger: R0 first, the control lines, actionable needs first with their tool and composed query, blocked needs with
what they wait on, filled values with their source, both values of a conflict with their sources, slots, tool call
counts, the gap diagnosis, the last failed calls; and, under a budget, the evidence kept NEWEST first, so what is
cut for size is the oldest evidence, never the newest.

    pytest -q tests/ledger/test_digest_content.py
"""

from __future__ import annotations

import re

import pytest

from omnidecision.ledger import (
    ConflictRaised,
    ConflictValue,
    DigestBudget,
    EvidenceAdded,
    FinalizerChecked,
    Ledger,
    NeedSpec,
    NeedUpdated,
    Slot,
    SourceRef,
    ToolCalled,
    reduce,
    render_digest,
)
from omnidecision.ledger.schema import AssetRef, TaskContext

from .builders import start

AUDIO = SourceRef(tool="audio_scouting", asset_id="v1", start=40.0, end=44.0)
WEB = SourceRef(tool="web_search", url="https://a.example")
PAGE = SourceRef(tool="page_reader", url="https://b.example")


def _ledger(n_evidence: int = 3, n_failed: int = 5) -> Ledger:
    s = start(
        question="Where was the person who speaks at the bell born?",
        context=TaskContext(assets=[AssetRef(id="v1", type="video", duration=120.0)], answer_format="a city name",
                            tools=["audio_scouting", "subtitle_grounding", "web_search"]),
        needs=[
            NeedSpec(description="moment the bell rings", preferred_source="audio", query_focus="bell"),
            NeedSpec(description="who speaks at the bell", preferred_source="subtitle",
                     query_focus="speaker at {#0}", depends_on=[0]),
            NeedSpec(description="birth city of the speaker", preferred_source="web",
                     query_focus="birthplace of {#1}", depends_on=[1]),
            NeedSpec(description="capacity of the venue", role="supplementary", query_focus="venue capacity"),
            NeedSpec(description="year of the event", query_focus="event year"),
        ],
        slots=[Slot(name="answer", needs=[2])], step_budget=15, max_attempts=9)
    s = reduce(s, ToolCalled(need=0, tool="audio_scouting", query="bell"))
    s = reduce(s, NeedUpdated(need=0, status="filled", value="00:42", filled_by="audio_scouting"))
    s = reduce(s, NeedUpdated(need=3, status="unfillable"))
    s = reduce(s, NeedUpdated(need=4, status="filled", value="1994", filled_by="web_search"))
    s = reduce(s, ConflictRaised(need=4, values=[ConflictValue(value="1994", source=WEB),
                                                 ConflictValue(value="1995", source=PAGE)]))
    for i in range(n_failed):
        s = reduce(s, ToolCalled(need=4, tool="web_search", query=f"failed query {i}", ok=False, error=f"error {i}"))
    for i in range(n_evidence):
        s = reduce(s, EvidenceAdded(claim=f"claim number {i}", source=AUDIO if i % 2 else WEB, supports=[0]))
    return reduce(s, FinalizerChecked(passed=False, diagnosis="need 2 (birth city) is still open"))


def test_each_section_shows_what_the_design_lists() -> None:
    lines = render_digest(_ledger(), DigestBudget(max_chars=20_000, max_failed_calls=4)).splitlines()
    # R0: the question, then the task's immutable context
    assert lines[:4] == ["QUESTION: Where was the person who speaks at the bell born?", "ASSETS: v1 (video 120.0s)",
                         "ANSWER_FORMAT: a city name", "TOOLS: audio_scouting, subtitle_grounding, web_search"]
    # control: 1 audio call + 5 failed web calls = step 6 of 15; need 2 is open, so not ready, and needs 1 and 4
    # (open, dependencies filled) can still advance
    assert lines[4].split() == ["step=06/15", "ready=no", "can_advance=yes", "finish_available=no"]
    assert "actionable_need_indices=[1, 4]" in lines and "blocked_need_indices=[2]" in lines
    need_lines = [ln for ln in lines if re.match(r"\[\d+\] ", ln)]
    # actionable needs first, each saying so, with its listed sources (nothing tried: preferred first) and the
    # composed query
    assert [ln.split()[0] for ln in need_lines[:2]] == ["[1]", "[4]"]
    assert all(" status=actionable " in ln for ln in need_lines[:2])
    assert "sources=[subtitle_grounding]" in need_lines[0] and 'query="speaker at 00:42"' in need_lines[0]
    assert "sources=[web_search]" in need_lines[1] and 'query="event year"' in need_lines[1]
    assert "attempts=0/9" in need_lines[0] and "attempts=5/9" in need_lines[1]
    assert "sources=[web_search] tried=1 " in need_lines[1]
    by_index = {ln.split()[0]: ln for ln in need_lines}
    assert " status=blocked " in by_index["[2]"] and "waits_on=[1]" in by_index["[2]"]
    assert " status=filled " in by_index["[0]"] and 'value="00:42"' in by_index["[0]"]
    assert "by=audio_scouting" in by_index["[0]"]
    assert " status=unfillable " in by_index["[3]"] and "role=supplementary" in by_index["[3]"]
    assert len(need_lines) == 5
    # the open conflict keeps both values, each with its source
    (conflict,) = [ln for ln in lines if ln.startswith("conflict#")]
    assert conflict.startswith("conflict#0 on need 4")
    assert '"1994" (web_search:https://a.example)' in conflict and '"1995" (page_reader:https://b.example)' in conflict
    (slot,) = [ln for ln in lines if ln.startswith("slot ")]
    assert slot.startswith("slot answer") and "verified=no" in slot
    assert "tool_call_counts: audio_scouting=1,web_search=5" in lines
    assert "gap_diagnosis: need 2 (birth city) is still open" in lines
    # the last max_failed_calls (4) failed calls, with their queries and errors: 1..4, not the first one
    failed = [ln for ln in lines if ln.startswith("failed: ")]
    assert [re.search(r'query="failed query (\d)"', ln).group(1) for ln in failed] == ["1", "2", "3", "4"]
    assert all(ln.startswith("failed: need 4 web_search") for ln in failed) and 'error="error 4"' in failed[-1]
    # the evidence, newest first, each with its source
    evidence = [ln for ln in lines if ln.startswith("evidence#")]
    assert evidence == ["evidence#2 [web_search:https://a.example] claim number 2",
                        "evidence#1 [audio_scouting:v1@40-44s] claim number 1",
                        "evidence#0 [web_search:https://a.example] claim number 0"]
    assert not any("omitted for size" in ln for ln in lines)


def _evidence_ids(text: str) -> list[int]:
    return [int(m) for m in re.findall(r"^evidence#(\d+) ", text, flags=re.M)]


@pytest.mark.parametrize("room", [1, 5, 17])
def test_under_a_budget_the_newest_evidence_is_kept(room: int) -> None:
    """Budget = the digest without evidence + room for `room` evidence lines and the size note: exactly the newest
    `room` atoms stay, newest first, and the note counts the rest."""
    n = 40
    state = _ledger(n_evidence=n)
    full = render_digest(state, DigestBudget(max_chars=100_000))
    assert _evidence_ids(full) == list(range(n - 1, -1, -1))
    lines = full.splitlines()
    head = [ln for ln in lines if not ln.startswith("evidence#")]
    ev = {int(ln.split()[0][len("evidence#"):]): ln for ln in lines if ln.startswith("evidence#")}
    newest = [ev[i] for i in range(n - 1, n - 1 - room, -1)]
    note = f"(+{n - room} lines omitted for size)"
    # lines are joined by newlines; the note's reserve is sized for a 4-digit count
    budget = len("\n".join([*head, *newest])) + len("\n(+9999 lines omitted for size)")
    text = render_digest(state, DigestBudget(max_chars=budget))
    assert len(text) <= budget
    assert _evidence_ids(text) == list(range(n - 1, n - 1 - room, -1))
    assert text.splitlines()[-1] == note
    assert [ln for ln in text.splitlines() if not ln.startswith("evidence#")][:-1] == head  # nothing else cut


def test_a_tight_budget_cuts_evidence_before_the_needs() -> None:
    """Evidence is the lowest priority: under a budget that cannot hold it all, every need line is still there."""
    state = _ledger(n_evidence=200)
    text = render_digest(state, DigestBudget(max_chars=2500))
    assert len(text) <= 2500
    assert len([ln for ln in text.splitlines() if re.match(r"\[\d+\] ", ln)]) == 5
    ids = _evidence_ids(text)
    assert ids and ids == list(range(199, 199 - len(ids), -1))  # a run of the newest, none of the oldest


def _three_actionable(question: str) -> Ledger:
    """Two short supplementary needs, then the long blocking one the rule calls, then a blocked one (tight_budget)."""
    return start(question=question, needs=[
        NeedSpec(description="colour of the van", role="supplementary", preferred_source="frame", query_focus="van"),
        NeedSpec(description="colour of the case", role="supplementary", preferred_source="frame", query_focus="case"),
        NeedSpec(description="the birth year of the guest introduced by the name spoken after the owl " * 2,
                 preferred_source="web", query_focus="guest born year"),
        NeedSpec(description="compute", depends_on=[2], preferred_source="code"),
    ])


@pytest.mark.parametrize("room", [0, 30, 90, 150])
def test_an_actionable_line_that_does_not_fit_is_clipped_not_dropped(room: int) -> None:
    """A budget too small for every actionable line whole: the one that does not fit is cut to the room left (its
    index, status, role and tool first), never dropped for a shorter line of lower priority (the blocked need);
    with less than MIN_CLIPPED_LINE characters of room it is dropped as before. The digest stays within budget."""
    from omnidecision.ledger.digest import MIN_CLIPPED_LINE

    state = _three_actionable("How far apart are the two numbers?")
    full = render_digest(state, DigestBudget(max_chars=100_000)).splitlines()
    long_line = next(ln for ln in full if ln.startswith("[2] "))
    before = "\n".join(full[: full.index(long_line)])
    budget = len(before) + len("\n(+9999 lines omitted for size)") + 1 + room
    text = render_digest(state, DigestBudget(max_chars=budget))
    assert len(text) <= budget
    lines = text.splitlines()
    kept = [ln for ln in lines if ln.startswith("[2] ")]
    if room >= MIN_CLIPPED_LINE:
        assert kept and kept[0].endswith("…") and long_line.startswith(kept[0][:-1])
        assert "sources=[web_search]" in kept[0]
        assert not any(ln.startswith("[3] ") for ln in lines)  # the blocked line came after it: no room left
    else:
        assert not kept


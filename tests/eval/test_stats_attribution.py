"""Wilson CI and failure attribution against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from omnidecision.eval.attribution import CATEGORIES, attribute, attribution_counts, stalled_need
from omnidecision.ledger.schema import Conflict, ConflictValue, Ledger, Need, Slot, SourceRef
from omnidecision.stats import mean, overlap, rate, wilson


# ---------------------------------------------------------------- Wilson
# Hand computation with the closed form (2k + z² ± z·sqrt(z² + 4k(n-k)/n)) / (2(n + z²)), z = 1.959964, z² = 3.841459:
#   7/10:   (17.841459 ± z·sqrt(12.241459) = 6.857477) / 27.682918 → [0.396778, 0.892209]
#   0/10:   (3.841459 ± z·sqrt(3.841459) = 3.841459) / 27.682918 → [0, 0.277532]; 10/10 is its mirror image.
#   50/100: (103.841459 ± z·sqrt(103.841459) = 19.972540) / 207.682918 → [0.403832, 0.596168]
@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (7, 10, 0.396778, 0.892209),
    (0, 10, 0.0, 0.277532),
    (10, 10, 0.722468, 1.0),
    (50, 100, 0.403832, 0.596168),
])
def test_wilson_hand_cases(k, n, low, high):
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=2e-6)
    assert hi == pytest.approx(high, abs=2e-6)
    assert lo <= k / n <= hi


def test_wilson_edges():
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="k=3, n=2"):
        wilson(3, 2)
    # narrower with more data at the same rate; symmetric around 0.5 for k = n/2
    assert wilson(30, 60)[1] - wilson(30, 60)[0] < wilson(5, 10)[1] - wilson(5, 10)[0]
    lo, hi = wilson(5, 10)
    assert math.isclose(0.5 - lo, hi - 0.5)


def test_small_helpers():
    assert mean([None, 2, 4]) == 3
    assert mean([None]) is None
    assert rate(0, 0) is None and rate(1, 4) == 0.25
    assert overlap((0.1, 0.4), (0.4, 0.9)) and not overlap((0.1, 0.3), (0.31, 0.9))


# ---------------------------------------------------------------- attribution
def led(*needs: Need, conflicts=(), slots=()) -> Ledger:
    return Ledger(initialized=True, question="q", needs=list(needs), conflicts=list(conflicts), slots=list(slots))


def need(i, source="web", status="unfilled", role="blocking", deps=(), attempts=0, value=None) -> Need:
    return Need(index=i, description=f"n{i}", preferred_source=source, status=status, role=role,
                depends_on=list(deps), attempts=attempts, value=value)


def test_stalled_media_need_behind_a_filled_one():
    # n0 (web) filled, n1 (audio) open with its dependency filled, n2 (code) blocked on n1: audio stalled the run
    s = led(need(0, "web", "filled", value="x"), need(1, "audio", deps=[0], attempts=3), need(2, "code", deps=[1]))
    assert stalled_need(s) == 1
    assert attribute(s, "budget") == "media_perception"
    assert attribute(s, "insufficient") == "media_perception"


@pytest.mark.parametrize(("source", "kind"), [("subtitle", "media_perception"), ("clip", "media_perception"),
                                              ("frame", "media_perception"), ("web", "external_retrieval"),
                                              ("code", "computation")])
def test_source_kinds(source, kind):
    assert attribute(led(need(0, source, attempts=3)), "insufficient") == kind


def test_supplementary_needs_do_not_count():
    s = led(need(0, "web", "filled", value="x"), need(1, "audio", role="supplementary"))
    assert attribute(s, "accepted") == "closed_but_wrong"


def test_premature_stop_only_when_the_ledger_could_advance():
    s = led(need(0, "clip"))  # open, actionable (attempts 0 < 3)
    assert attribute(s, "forced") == "premature_stop"
    assert attribute(s, "budget") == "budget"  # the budget ran out before a call reached it: not perception
    exhausted = led(need(0, "clip", attempts=3))
    assert attribute(exhausted, "forced") == "media_perception"  # nothing could advance: not premature


def test_conflict_and_unverified_slots():
    src = SourceRef(tool="web_search")
    c = Conflict(id=0, need=0, values=[ConflictValue(value="a", source=src), ConflictValue(value="b", source=src)])
    s = led(need(0, "web", "filled", value="a", attempts=3), conflicts=[c])
    assert attribute(s, "insufficient") == "verification_conflict"
    fact = led(need(0, "web", "filled", value="a"), slots=[Slot(name="f", kind="fact", needs=[0])])
    assert attribute(fact, "forced") == "verification_conflict"
    comp = led(need(0, "web", "filled", value="a"), slots=[Slot(name="c", kind="computation", needs=[0])])
    assert attribute(comp, "forced") == "computation"


def test_no_ledger_and_counts():
    assert attribute(None, "error") == "no_ledger"
    assert attribute(Ledger(), "error") == "no_ledger"
    counts = attribution_counts([(None, "error"), (led(need(0, "web", attempts=3)), "insufficient"),
                                 (led(need(0, "web")), "forced")])
    assert set(counts) == set(CATEGORIES)
    assert counts["no_ledger"] == 1 and counts["external_retrieval"] == 1 and counts["premature_stop"] == 1
    assert sum(counts.values()) == 3

"""Failure attribution: for a run judged incorrect, which kind of evidence stayed open in its final ledger.

Categories, checked in this order:

- `stuck_on_rejections`: the run stopped on a repeated rejected planner decision (outcome `stuck`), or ran out
  of budget while its planner's decisions were being rejected (the last rejection stands in the final ledger) —
  the planner, not the evidence, is what failed;
- `premature_stop`: the run finished (accepted) or was forced while a blocking need was open and the ledger
  could still advance — the planner gave up on evidence it could have gathered;
- `verification_conflict`: an unresolved conflict remains, or a fact slot is unverified;
- `media_perception` / `external_retrieval` / `computation`: the kind of the open blocking need that stalled
  the run (the first open blocking need whose dependencies are filled, else the first open blocking need):
  subtitle/audio/clip/frame → media perception, web → external retrieval, code → computation; an unverified
  computation slot (no open need) is also `computation`;
- `closed_but_wrong`: the ledger was complete and ready, yet the answer was judged wrong (a wrong value was
  accepted as evidence);
- `no_ledger`: react/memory runs and runs that died before decomposition (nothing to inspect).

    >>> from omnidecision.ledger.schema import Ledger, Need
    >>> led = Ledger(initialized=True, needs=[Need(index=0, description="d", preferred_source="audio")])
    >>> attribute(led, "budget")
    'media_perception'
    >>> attribute(led, "forced")
    'premature_stop'
"""

from __future__ import annotations

from omnidecision.ledger import can_advance, unmet_blocking, unresolved_conflicts
from omnidecision.ledger.schema import Ledger

CATEGORIES: tuple[str, ...] = ("stuck_on_rejections", "media_perception", "external_retrieval",
                               "verification_conflict", "computation", "premature_stop", "closed_but_wrong",
                               "no_ledger")
SOURCE_KIND: dict[str, str] = {"subtitle": "media_perception", "audio": "media_perception",
                               "clip": "media_perception", "frame": "media_perception",
                               "web": "external_retrieval", "code": "computation"}


def stalled_need(state: Ledger) -> int | None:
    """The open blocking need that stalled the run: the first whose dependencies are all filled, else the first."""
    open_blocking = unmet_blocking(state)
    for i in open_blocking:
        need = state.needs[i]
        if all(state.needs[d].status == "filled" for d in need.depends_on):
            return i
    return open_blocking[0] if open_blocking else None


def attribute(state: Ledger | None, outcome: str) -> str:
    """The attribution category of one incorrect run from its final ledger and stop outcome."""
    if state is None or not state.initialized:
        return "no_ledger"
    if outcome == "stuck" or (outcome == "budget" and state.last_rejected is not None):
        return "stuck_on_rejections"
    open_blocking = unmet_blocking(state)
    if outcome in ("accepted", "forced") and open_blocking and can_advance(state):
        return "premature_stop"
    if unresolved_conflicts(state) or any(s.kind == "fact" and not s.verified for s in state.slots):
        return "verification_conflict"
    stalled = stalled_need(state)
    if stalled is not None:
        return SOURCE_KIND.get(state.needs[stalled].preferred_source, "external_retrieval")
    if any(s.kind == "computation" and not s.verified for s in state.slots):
        return "computation"
    return "closed_but_wrong"


def attribution_counts(items: list[tuple[Ledger | None, str]]) -> dict[str, int]:
    """Counts per category (every category present, zeros included) over (final ledger, outcome) pairs."""
    counts = dict.fromkeys(CATEGORIES, 0)
    for state, outcome in items:
        counts[attribute(state, outcome)] += 1
    return counts

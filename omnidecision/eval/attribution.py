"""Failure attribution: for a run judged incorrect, which need stayed open and why, decided from its final ledger
and its steps (the method's diagnosis: perception, retrieval, verification, computation, premature stop, stuck,
budget).

Categories, checked in this order (the first that holds):

- `stuck_on_rejections`: the run stopped on a repeated rejected planner decision (outcome `stuck`), or ran out
  of budget while its planner's decisions were being rejected (the last rejection stands in the final ledger) —
  the planner, not the evidence, is what failed;
- `premature_stop`: the run finished (accepted, or forced after the finalizer's revisions) or abstained
  (insufficient) while a blocking need was open and the ledger could still advance — the planner gave up on
  evidence it could have gathered;
- `verification_conflict`: a conflict stayed open (raised, never resolved);
- `computation`: a computation failed — a failed call aimed at a slot or at a code need, an open blocking need
  whose source is code, or a computation slot left unverified once its needs were filled;
- `media_perception` / `external_retrieval`: the open blocking need that stalled the run (the first whose
  dependencies are filled, else the first) came back without evidence as often as the ledger allows
  (`max_attempts`): its perception tools returned nothing usable (subtitle/audio/clip/frame), or its retrieval
  tools came back empty (web);
- `budget`: the step (or tool-call) budget ran out while the stalled need had not been exhausted — too few calls
  reached it (the reason says how many calls went to supplementary needs);
- then, for the remaining stops: the stalled need's kind (as above) without the exhaustion evidence, else a fact
  slot left unverified with its needs filled (`verification_conflict`);
- `closed_but_wrong`: the ledger was complete and ready, yet the answer was judged wrong (a wrong value was
  accepted as evidence);
- `no_ledger`: react/memory runs and runs that died before decomposition (nothing to inspect).

`diagnose(state, outcome, steps)` returns the category with the need and the reason in words (the report lists
them per run); `attribute(state, outcome)` is its category from the ledger alone.

    >>> from omnidecision.ledger.schema import Ledger, Need
    >>> led = Ledger(initialized=True, needs=[Need(index=0, description="d", preferred_source="audio", attempts=3,
    ...                                             tried=["audio_scouting"])])
    >>> attribute(led, "budget")
    'media_perception'
    >>> attribute(led.model_copy(update={"needs": [Need(index=0, description="d")]}), "forced")
    'premature_stop'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from omnidecision.ledger import can_advance, unmet_blocking, unresolved_conflicts
from omnidecision.ledger.events import ToolCalled
from omnidecision.ledger.schema import PERCEPTION_TOOLS, SOURCE_TOOL, WEB_TOOLS, Ledger

CATEGORIES: tuple[str, ...] = ("stuck_on_rejections", "media_perception", "external_retrieval",
                               "verification_conflict", "computation", "premature_stop", "budget",
                               "closed_but_wrong", "no_ledger")
SOURCE_KIND: dict[str, str] = {"subtitle": "media_perception", "audio": "media_perception",
                               "clip": "media_perception", "frame": "media_perception",
                               "web": "external_retrieval", "code": "computation"}
TOOL_KIND: dict[str, str] = {**dict.fromkeys(PERCEPTION_TOOLS, "media_perception"),
                             **dict.fromkeys(WEB_TOOLS, "external_retrieval"), "code_executor": "computation"}
STOPS = ("accepted", "forced", "insufficient")  # the run ended on the planner's finish or abstention


class Attribution(BaseModel):
    """One incorrect run's diagnosis: its category, the need it is about (if any) and why, in words."""

    category: str
    need: int | None = None
    reason: str = ""


def stalled_need(state: Ledger) -> int | None:
    """The open blocking need that stalled the run: the first whose dependencies are all filled, else the first."""
    open_blocking = unmet_blocking(state)
    for i in open_blocking:
        need = state.needs[i]
        if all(state.needs[d].status == "filled" for d in need.depends_on):
            return i
    return open_blocking[0] if open_blocking else None


def _calls(steps: Iterable[Any]) -> list[ToolCalled]:
    """Every tool call the run's steps recorded (ledger mode), in order."""
    return [e for step in steps for e in getattr(step, "events", []) if isinstance(e, ToolCalled)]


def _empty_calls(state: Ledger, i: int, calls: Sequence[ToolCalled]) -> Counter[str]:
    """tool → how many calls on need `i` came back without evidence. The need is still open, so none of its calls
    filled it: from the steps when they are there, else from the ledger (`attempts`, over the tools `tried`)."""
    mine = Counter(c.tool for c in calls if c.need == i)
    if mine:
        return mine
    need = state.needs[i]
    if need.attempts:
        # the ledger counts attempts per need, not per tool: several tools tried are one joint key (none recorded:
        # the tool of its preferred source)
        return Counter({"+".join(need.tried or [SOURCE_TOOL[need.preferred_source]]): need.attempts})
    return Counter()


def _stalled_reason(state: Ledger, i: int, empty: Counter[str]) -> str:
    need = state.needs[i]
    if not empty:
        return f"need {i} ({need.preferred_source}) stayed {need.status}: never reached by a tool call"
    tool, k = empty.most_common(1)[0]
    perception = all(t in PERCEPTION_TOOLS for t in tool.split("+"))
    what = "returned nothing usable" if perception else "came back empty"
    same = f"{tool} {what} {k} time(s)" + (
        f" (also tried: {', '.join(t for t in empty if t != tool)})" if len(empty) > 1 else " on the same source")
    return f"need {i} ({need.preferred_source}) stayed {need.status}: {same}"


def diagnose(state: Ledger | None, outcome: str, steps: Sequence[Any] = ()) -> Attribution:
    """The attribution of one incorrect run from its final ledger, stop outcome and (optionally) its steps; see the
    module docstring for the categories and their order."""
    if state is None or not state.initialized:
        return Attribution(category="no_ledger",
                           reason="no ledger to inspect (react/memory mode, or no decomposition)")
    if outcome == "stuck" or (outcome == "budget" and state.last_rejected is not None):
        rej = state.last_rejected
        why = f"rejected {rej.streak}x: {rej.decision} ({rej.reason})" if rej is not None else "repeated rejections"
        return Attribution(category="stuck_on_rejections", reason=why)
    open_blocking = unmet_blocking(state)
    stalled = stalled_need(state)
    if outcome in STOPS and open_blocking and can_advance(state):
        return Attribution(category="premature_stop", need=stalled, reason=(
            f"{outcome} with blocking need(s) {open_blocking} open while the ledger could still advance"))
    open_ids = set(unresolved_conflicts(state))
    conflicts = [c for c in state.conflicts if c.id in open_ids]
    if conflicts:
        c = conflicts[0]
        where = f"need {c.need}" if c.need is not None else f"slot {c.slot}"
        values = " vs ".join(v.value for v in c.values)
        return Attribution(category="verification_conflict", need=c.need,
                           reason=f"conflict {c.id} on {where} stayed open ({values})")
    calls = _calls(steps)
    failed = [f for f in state.failed_calls if f.slot is not None or f.tool == "code_executor"]
    if failed:
        f = failed[-1]
        return Attribution(category="computation", need=f.need, reason=(
            f"{f.tool} failed on {'slot ' + f.slot if f.slot else f'need {f.need}'}: {(f.error or '')[:120]}"))
    if stalled is not None and state.needs[stalled].preferred_source == "code":
        return Attribution(category="computation", need=stalled,
                           reason=_stalled_reason(state, stalled, _empty_calls(state, stalled, calls)))
    filled = {n.index for n in state.needs if n.status == "filled"}
    unverified = [s for s in state.slots if not s.verified]
    comp = [s for s in unverified if s.kind == "computation" and set(s.needs) <= filled]
    if stalled is None and comp:
        return Attribution(category="computation", reason=f"computation slot {comp[0].name} never verified "
                                                          "although its needs were filled")
    if stalled is not None:
        empty = _empty_calls(state, stalled, calls)
        reason = _stalled_reason(state, stalled, empty)
        if sum(empty.values()) >= state.max_attempts:
            tool = empty.most_common(1)[0][0]  # the tool called most: whose evidence never came
            kind = TOOL_KIND.get(tool, SOURCE_KIND.get(state.needs[stalled].preferred_source, "external_retrieval"))
            return Attribution(category=kind, need=stalled, reason=reason)
        if outcome == "budget":
            roles = {n.index: n.role for n in state.needs}
            extra = sum(1 for c in calls if c.need is not None and roles.get(c.need) == "supplementary")
            spent = f"; {extra} of {len(calls)} tool calls went to supplementary needs" if calls else ""
            return Attribution(category="budget", need=stalled, reason=f"budget ran out: {reason}{spent}")
        return Attribution(category=SOURCE_KIND.get(state.needs[stalled].preferred_source, "external_retrieval"),
                           need=stalled, reason=reason)
    if comp:
        return Attribution(category="computation", reason=f"computation slot {comp[0].name} never verified")
    facts = [s for s in unverified if s.kind == "fact" and set(s.needs) <= filled]
    if facts:
        return Attribution(category="verification_conflict",
                           reason=f"fact slot {facts[0].name} never verified although its needs were filled")
    if outcome == "budget":
        return Attribution(category="budget", reason="budget ran out with every blocking need filled")
    return Attribution(category="closed_but_wrong", reason="every blocking need filled and checked, answer wrong")


def attribute(state: Ledger | None, outcome: str) -> str:
    """The attribution category of one incorrect run from its final ledger and stop outcome alone."""
    return diagnose(state, outcome).category


def attribute_run(record: Any) -> Attribution:
    """`diagnose` on a RunRecord: its final ledger, outcome and steps."""
    return diagnose(record.final_ledger, record.outcome, record.steps)


def attribution_counts(items: list[tuple[Ledger | None, str]]) -> dict[str, int]:
    """Counts per category (every category present, zeros included) over (final ledger, outcome) pairs."""
    counts = dict.fromkeys(CATEGORIES, 0)
    for state, outcome in items:
        counts[attribute(state, outcome)] += 1
    return counts

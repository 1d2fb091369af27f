"""The pure reducer: `reduce(state, event) -> state`, the only writer of the ledger, and `replay(events)`.

An event that does not apply raises `EventRejected` (a `ValueError`) and the input state is untouched:
the reducer works on a deep copy and only returns it once every check passed.

    >>> from omnidecision.ledger import reduce, Ledger
    >>> from omnidecision.ledger.events import InitLedger, NeedSpec
    >>> s = reduce(Ledger(), InitLedger(question="q?", needs=[NeedSpec(description="who")]))
    >>> s.needs[0].status
    'unfilled'
"""

from __future__ import annotations

from collections.abc import Iterable

from omnidecision.ledger.events import (
    ConflictRaised,
    ConflictResolved,
    EvidenceAdded,
    FinalizerChecked,
    FinishRequested,
    InitLedger,
    InvalidAction,
    LedgerEvent,
    NeedUpdated,
    SlotUpdated,
    ToolCalled,
)
from omnidecision.ledger.schema import Conflict, EvidenceAtom, FailedCall, Ledger, Need, Rejection

MAX_RAW_CHARS = 500  # what an InvalidAction keeps of an output (the loop cuts its error and raw text to it too)

# Status changes the critic may make. "unfilled" is never a target (evidence cannot be un-seen) and
# "unfillable" is terminal: once no tool can fill a need, a later verdict cannot quietly revive it.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    "unfilled": frozenset({"partial", "filled", "unfillable"}),
    "partial": frozenset({"partial", "filled", "unfillable"}),
    "filled": frozenset({"partial", "filled"}),
    "unfillable": frozenset(),
}


class EventRejected(ValueError):
    """An event that does not apply to the state; `reason` says why, `event` is the offending event."""

    def __init__(self, event: LedgerEvent, reason: str) -> None:
        super().__init__(f"{event.kind} event rejected: {reason}")
        self.event = event
        self.reason = reason


def _need(state: Ledger, event: LedgerEvent, index: int) -> Need:
    if not 0 <= index < len(state.needs):
        raise EventRejected(event, f"unknown need index {index} (the ledger has {len(state.needs)} needs)")
    return state.needs[index]


def _check_deps(event: LedgerEvent, owner: int, deps: Iterable[int], n_needs: int) -> None:
    for d in deps:
        if not 0 <= d < n_needs:
            raise EventRejected(event, f"need {owner} depends on unknown need {d}")
        if d == owner:
            raise EventRejected(event, f"need {owner} cannot depend on itself")


def _has_cycle(needs: list[Need]) -> bool:
    state = [0] * len(needs)  # 0 new, 1 on stack, 2 done

    def visit(i: int) -> bool:
        state[i] = 1
        for d in needs[i].depends_on:
            if state[d] == 1 or (state[d] == 0 and visit(d)):
                return True
        state[i] = 2
        return False

    return any(state[i] == 0 and visit(i) for i in range(len(needs)))


def _open_target(state: Ledger, event: ToolCalled | ConflictRaised, names: str, why_not: str) -> Need | None:
    """The need `event` targets, or None when it targets a slot: exactly one of the two (else "`names` exactly
    one of ..."), and a need that is not unfillable (else "need i is unfillable; `why_not`")."""
    if (event.need is None) == (event.slot is None):
        raise EventRejected(event, f"{names} exactly one of `need` or `slot`")
    if event.need is None:
        return None
    need = _need(state, event, event.need)
    if need.status == "unfillable":
        raise EventRejected(event, f"need {event.need} is unfillable; {why_not}")
    return need


def _require_init(state: Ledger, event: LedgerEvent) -> None:
    if not state.initialized:
        raise EventRejected(event, "the ledger is not initialised yet (the first event must be `init`)")


def reduce(state: Ledger, event: LedgerEvent) -> Ledger:
    """Apply one event and return the new state; never mutates `state`."""
    if isinstance(event, InitLedger):
        return _init(state, event)
    _require_init(state, event)
    new = state.model_copy(deep=True)
    if isinstance(event, ToolCalled):
        need = _open_target(new, event, "a tool call targets", "no tool call can target it")
        if need is not None:
            need.attempts += 1
            if event.tool not in need.tried:
                need.tried.append(event.tool)
        else:
            slot = new.slot(event.slot or "")
            if slot is None:
                raise EventRejected(event, f"unknown slot {event.slot!r} (slots: {[s.name for s in new.slots]})")
            slot.attempts += 1
        new.step += 1
        new.last_rejected = None
        new.tool_call_counts[event.tool] = new.tool_call_counts.get(event.tool, 0) + 1
        if not event.ok:
            new.failed_calls.append(FailedCall(need=event.need, slot=event.slot, tool=event.tool, query=event.query,
                                               error=event.error))
    elif isinstance(event, InvalidAction):
        new.invalid_counts[event.role] = new.invalid_counts.get(event.role, 0) + 1
        if event.role == "planner":
            new.step += 1
            # the same decision (its canonical text, else the raw output) rejected again extends the streak
            decision = event.decision or " ".join(event.raw.split())[:MAX_RAW_CHARS] or "<empty output>"
            prev = state.last_rejected
            streak = prev.streak + 1 if prev is not None and prev.decision == decision else 1
            new.last_rejected = Rejection(decision=decision, reason=event.error, streak=streak)
    elif isinstance(event, NeedUpdated):
        _apply_need_update(new, event)
    elif isinstance(event, EvidenceAdded):
        for i in event.supports:
            _need(new, event, i)
        new.evidence.append(EvidenceAtom(id=len(new.evidence), claim=event.claim, source=event.source,
                                         supports=list(event.supports)))
    elif isinstance(event, ConflictRaised):
        _apply_conflict(new, event)
    elif isinstance(event, ConflictResolved):
        _apply_resolution(new, event)
    elif isinstance(event, SlotUpdated):
        slot = new.slot(event.slot)
        if slot is None:
            raise EventRejected(event, f"unknown slot {event.slot!r} (slots: {[s.name for s in new.slots]})")
        if event.verified and not event.value:
            raise EventRejected(event, f"slot {event.slot!r} cannot be verified without a value")
        slot.value, slot.verified, slot.source = event.value, event.verified, event.source
    elif isinstance(event, FinishRequested):
        new.step += 1
        new.last_rejected = None
        new.finish_requests += 1
    elif isinstance(event, FinalizerChecked):
        if event.passed:
            if not event.answer:
                raise EventRejected(event, "a passed finalizer check must carry the answer")
            new.answer, new.gap_diagnosis = event.answer, None
        else:
            new.finalizer_failures += 1
            new.gap_diagnosis = event.diagnosis or "finalizer check failed"
            if event.answer:
                new.answer = event.answer  # kept as the best value for a forced stop
    else:  # pragma: no cover - the union is closed
        raise EventRejected(event, f"unknown event kind {getattr(event, 'kind', '?')!r}")
    return new


def _init(state: Ledger, event: InitLedger) -> Ledger:
    if state.initialized:
        raise EventRejected(event, "the ledger is already initialised")
    needs = []
    for i, spec in enumerate(event.needs):
        _check_deps(event, i, spec.depends_on, len(event.needs))
        needs.append(Need(index=i, **spec.model_dump()))
    if _has_cycle(needs):
        raise EventRejected(event, "the needs' depends_on form a cycle")
    names = [s.name for s in event.slots]
    if len(set(names)) != len(names):
        raise EventRejected(event, f"duplicate slot names in {names}")
    for s in event.slots:
        for i in s.needs:
            if not 0 <= i < len(needs):
                raise EventRejected(event, f"slot {s.name!r} refers to unknown need {i}")
    if event.context is not None and event.context.assets:
        known = [a.id for a in event.context.assets]
        for n in needs:
            if n.asset_id is not None and n.asset_id not in known:
                shown = ", ".join(known[:8]) + (f", … ({len(known)} in all)" if len(known) > 8 else "")
                raise EventRejected(event, f"need {n.index} names asset {n.asset_id!r}, not one of the task's: "
                                           f"{shown}")
    context = event.context.model_copy(deep=True) if event.context is not None else None
    return Ledger(question=event.question, context=context, needs=needs,
                  slots=[s.model_copy(deep=True) for s in event.slots], step_budget=event.step_budget,
                  max_attempts=event.max_attempts, max_tool_calls=event.max_tool_calls,
                  initialized=True)


def _apply_need_update(new: Ledger, event: NeedUpdated) -> None:
    need = _need(new, event, event.need)
    if event.status is not None:
        if event.status not in ALLOWED_TRANSITIONS[need.status]:
            raise EventRejected(event, f"need {event.need}: status {need.status} -> {event.status} is not allowed")
        if event.status == "filled" and not (event.value or need.value):
            raise EventRejected(event, f"need {event.need} cannot be filled without a value")
    if event.add_depends_on:
        _check_deps(event, event.need, event.add_depends_on, len(new.needs))
        need.depends_on = sorted(set(need.depends_on) | set(event.add_depends_on))
        if _has_cycle(new.needs):
            raise EventRejected(event, f"need {event.need}: depending on {event.add_depends_on} makes a cycle")
    if event.status is not None:
        if event.status != need.status:
            new.gap_diagnosis = None  # the last failed check described a ledger that has moved on
        need.status = event.status
    if event.value is not None:
        need.value = event.value
    if event.filled_by is not None:
        need.filled_by = event.filled_by
    if event.revised_query_focus:
        need.query_focus = event.revised_query_focus
    if event.revised_role is not None:
        need.role = event.revised_role


def _apply_conflict(new: Ledger, event: ConflictRaised) -> None:
    need = _open_target(new, event, "a conflict names", "nothing to conflict over")
    if need is not None:
        if need.status == "filled":
            need.status = "partial"  # a filled value under dispute is no longer settled
    elif new.slot(event.slot or "") is None:
        raise EventRejected(event, f"unknown slot {event.slot!r}")
    else:
        new.slot(event.slot or "").verified = False  # type: ignore[union-attr]
    new.conflicts.append(Conflict(id=len(new.conflicts), need=event.need, slot=event.slot,
                                  values=[v.model_copy() for v in event.values]))


def _apply_resolution(new: Ledger, event: ConflictResolved) -> None:
    if not 0 <= event.conflict < len(new.conflicts):
        raise EventRejected(event, f"unknown conflict {event.conflict} (the ledger has {len(new.conflicts)})")
    conflict = new.conflicts[event.conflict]
    if conflict.resolved:
        raise EventRejected(event, f"conflict {event.conflict} is already resolved")
    conflict.resolved, conflict.resolution = True, event.value
    new.gap_diagnosis = None
    if conflict.need is not None:
        need = new.needs[conflict.need]
        if need.status == "unfillable":
            return  # the dispute is settled, but "unfillable" is terminal: a resolution does not revive the need
        need.value, need.status = event.value, "filled"
        if event.source is not None:
            need.filled_by = event.source.tool
    else:
        slot = new.slot(conflict.slot or "")
        if slot is not None:
            slot.value, slot.verified = event.value, True


def replay(events: Iterable[LedgerEvent], initial: Ledger | None = None) -> list[Ledger]:
    """Apply events in order from `initial` (an empty ledger by default); returns the state after each event."""
    state = initial if initial is not None else Ledger()
    states = []
    for event in events:
        state = reduce(state, event)
        states.append(state)
    return states

"""Ledgers built through the reducer, as a run builds them (shared by the ledger tests and the planning families'):
a started ledger, and the part of an event sequence the reducer accepts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from omnidecision.ledger import EventRejected, InitLedger, Ledger, LedgerEvent, reduce


def start(**init: Any) -> Ledger:
    """An empty ledger after `InitLedger(**init)`, through the reducer (its checks included)."""
    return reduce(Ledger(), InitLedger(**init))


def accepted(init: InitLedger, candidates: Iterable[LedgerEvent]) -> tuple[list[LedgerEvent], list[Ledger]]:
    """The events the reducer accepts, in order (`init` first; a rejected candidate is skipped and leaves the state
    as it was), and the state after each."""
    state = reduce(Ledger(), init)
    events, states = [init], [state]
    for event in candidates:
        try:
            state = reduce(state, event)
        except EventRejected:
            continue
        events.append(event)
        states.append(state)
    return events, states

"""Control derived from the ledger only: open/actionable/blocked needs, `ready`, `can_advance`.

    >>> from omnidecision.ledger import Ledger, ready
    >>> ready(Ledger())
    True
"""

from __future__ import annotations

from omnidecision.ledger.schema import OPEN_STATUSES, Ledger, Need


def is_open(need: Need) -> bool:
    """Still to be worked on: unfilled or partial."""
    return need.status in OPEN_STATUSES


def unmet_blocking(state: Ledger) -> list[int]:
    """Blocking needs that are not filled (open or unfillable): each one stands between the ledger and an answer."""
    return [n.index for n in state.needs if n.role == "blocking" and n.status != "filled"]


def _deps_filled(state: Ledger, need: Need) -> bool:
    return all(state.needs[d].status == "filled" for d in need.depends_on)


def actionable_need_indices(state: Ledger) -> list[int]:
    """Open needs whose dependencies are all filled and whose attempt budget is not spent."""
    return [
        n.index for n in state.needs if is_open(n) and _deps_filled(state, n) and n.attempts < state.max_attempts
    ]


def blocked_need_indices(state: Ledger) -> list[int]:
    """Open needs waiting on a dependency that is not filled yet."""
    return [n.index for n in state.needs if is_open(n) and not _deps_filled(state, n)]


def exhausted_need_indices(state: Ledger) -> list[int]:
    """Open needs with filled dependencies whose attempt budget is spent."""
    return [n.index for n in state.needs if is_open(n) and _deps_filled(state, n) and n.attempts >= state.max_attempts]


def unblocks(state: Ledger, index: int) -> list[int]:
    """Open needs that wait on need `index` directly (filling it moves them toward actionable)."""
    return [n.index for n in state.needs if index in n.depends_on and is_open(n)]


def tool_calls_made(state: Ledger) -> int:
    return sum(state.tool_call_counts.values())


def unresolved_conflicts(state: Ledger) -> list[int]:
    return [c.id for c in state.conflicts if not c.resolved]


def ready(state: Ledger) -> bool:
    """No open blocking need, every slot verified, no open conflict.

    A blocking need counts as met only when filled: an unfillable blocking need keeps the ledger unready.
    """
    return not unmet_blocking(state) and all(s.verified for s in state.slots) and not unresolved_conflicts(state)


def can_advance(state: Ledger) -> bool:
    """Some action can still reduce an open need or resolve a conflict.

    Both take a tool call on an actionable need: the reducer reopens a filled need when a conflict is raised on
    it, so a conflict that can still be worked on always sits on an actionable need. A conflict on an unfillable,
    blocked or exhausted need cannot be worked on by any call the loop would execute.
    A spent tool budget (the ledger's `max_tool_calls`) means no call can be executed: nothing can advance.
    """
    if state.max_tool_calls is not None and tool_calls_made(state) >= state.max_tool_calls:
        return False
    return bool(actionable_need_indices(state))


def finish_available(state: Ledger) -> bool:
    """Finishing is a sound decision: the ledger is ready, or nothing can advance any more."""
    return ready(state) or not can_advance(state)


def composed_query(state: Ledger, index: int) -> str:
    """The need's `query_focus` with filled upstream values substituted for `{#i}` placeholders.

    This is the query a tool runs when the planner names a need but leaves the query out.

    >>> from omnidecision.ledger.schema import Ledger, Need
    >>> s = Ledger(needs=[Need(index=0, description="a", status="filled", value="Ada"),
    ...                   Need(index=1, description="b", query_focus="birth year of {#0}", depends_on=[0])])
    >>> composed_query(s, 1)
    'birth year of Ada'
    """
    text = state.needs[index].query_focus
    for dep in state.needs:
        token = "{#%d}" % dep.index
        if token in text and dep.value is not None:
            text = text.replace(token, dep.value)
    return text

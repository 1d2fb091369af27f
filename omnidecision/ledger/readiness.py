"""Control derived from the ledger only: open/actionable/blocked needs, `ready`, `can_advance`.

    >>> from omnidecision.ledger import Ledger, ready
    >>> ready(Ledger())
    True
"""

from __future__ import annotations

import json
import re

from omnidecision.ledger.schema import OPEN_STATUSES, SOURCE_TOOL, Ledger, Need

# The tool that works on a slot: a code call computes (or, without an expression, restates) it from its needs.
SLOT_TOOL = "code_executor"
_NUMBER = re.compile(r"[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?|[-+]?\.\d+")


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


def tool_budget_spent(state: Ledger, cap: int | None = None) -> bool:
    """The tool calls allowed are made: the ledger's own budget (the task's) or `cap` (a recipe's
    `max_tool_calls`, for budget-matched comparisons), whichever is lower."""
    caps = [c for c in (cap, state.max_tool_calls) if c is not None]
    return bool(caps) and tool_calls_made(state) >= min(caps)


def unresolved_conflicts(state: Ledger) -> list[int]:
    return [c.id for c in state.conflicts if not c.resolved]


def ready(state: Ledger) -> bool:
    """No open blocking need, every slot verified, no open conflict.

    A blocking need counts as met only when filled: an unfillable blocking need keeps the ledger unready.
    """
    return not unmet_blocking(state) and all(s.verified for s in state.slots) and not unresolved_conflicts(state)


def actionable_slot_names(state: Ledger) -> list[str]:
    """Unverified slots a call can still verify: every need they are built from is filled, they are built from
    something (needs or an expression), no conflict on them is open, and their attempt budget is not spent.

    This is what frees the "slot trap": with every need filled and a computation slot unverified, a code call
    aimed at the slot (`{"action": "call", "slot": name}`) computes it and the critic verifies it.

    >>> from omnidecision.ledger.schema import Ledger, Need, Slot
    >>> s = Ledger(needs=[Need(index=0, description="a", status="filled", value="3")],
    ...            slots=[Slot(name="answer", kind="computation", needs=[0], expression="n0 * 2")])
    >>> actionable_slot_names(s), can_advance(s)
    (['answer'], True)
    """
    disputed = {c.slot for c in state.conflicts if c.slot is not None and not c.resolved}
    return [
        s.name for s in state.slots
        if not s.verified and (s.needs or s.expression) and s.name not in disputed and s.attempts < state.max_attempts
        and all(0 <= i < len(state.needs) and state.needs[i].status == "filled" for i in s.needs)
    ]


def can_advance(state: Ledger) -> bool:
    """Some action can still reduce an open need, verify a slot or resolve a conflict.

    Needs and conflicts take a tool call on an actionable need: the reducer reopens a filled need when a conflict
    is raised on it, so a conflict that can still be worked on always sits on an actionable need. A conflict on an
    unfillable, blocked or exhausted need cannot be worked on by any call the loop would execute. An unverified
    slot whose needs are all filled takes a call aimed at the slot (`actionable_slot_names`). A spent tool budget
    (the ledger's `max_tool_calls`) means no call can be executed: nothing can advance.
    """
    if state.max_tool_calls is not None and tool_calls_made(state) >= state.max_tool_calls:
        return False
    return bool(actionable_need_indices(state)) or bool(actionable_slot_names(state))


def need_tools(need: Need) -> list[str]:
    """The tools of the need's listed sources in order (preferred source first, then `alt_sources`, no repeats).

    >>> need_tools(Need(index=0, description="x", preferred_source="audio", alt_sources=["subtitle", "audio"]))
    ['audio_scouting', 'subtitle_grounding']
    """
    out: list[str] = []
    for source in (need.preferred_source, *need.alt_sources):
        if SOURCE_TOOL[source] not in out:
            out.append(SOURCE_TOOL[source])
    return out


def sources_to_try(need: Need) -> list[str]:
    """The tools of the need's listed sources not tried on it yet, in listed order; all of them (preferred first)
    once every one was tried. The first is the tool to call next: the digest shows the list as `sources=[…]` and a
    call that names no tool gets the first (`agent.loop`).

    >>> n = Need(index=0, description="x", preferred_source="audio", alt_sources=["subtitle"])
    >>> sources_to_try(n), sources_to_try(n.model_copy(update={"tried": ["audio_scouting"]}))
    (['audio_scouting', 'subtitle_grounding'], ['subtitle_grounding'])
    >>> sources_to_try(n.model_copy(update={"tried": ["audio_scouting", "subtitle_grounding"]}))
    ['audio_scouting', 'subtitle_grounding']
    """
    tools = need_tools(need)
    return [t for t in tools if t not in need.tried] or tools


# a tool that serves a source's need without being its listed tool: page_reader reads a page a web search found
STAND_IN_TOOLS: dict[str, tuple[str, ...]] = {"web_search": ("page_reader",)}


def listed_tools(need: Need) -> list[str]:
    """The tools a call on `need` may name when calls keep to the need's listed sources (`AgentConfig.
    constrain_tools: listed`): `need_tools` in order, each followed by its stand-ins.

    >>> listed_tools(Need(index=0, description="x", preferred_source="web", alt_sources=["frame"]))
    ['web_search', 'page_reader', 'frame_confirmation']
    """
    return [t for tool in need_tools(need) for t in (tool, *STAND_IN_TOOLS.get(tool, ()))]


def calls_required(state: Ledger) -> int:
    """A lower bound on the tool calls the ledger still needs to become ready: one per open blocking need, plus one
    per unverified computation slot that only a call on the slot itself computes (not one of its own code needs).

    >>> from omnidecision.ledger.schema import Slot
    >>> s = Ledger(needs=[Need(index=0, description="a"), Need(index=1, description="b", role="supplementary")],
    ...            slots=[Slot(name="answer", kind="computation", needs=[0], expression="n0 + 1")])
    >>> calls_required(s)
    2
    """
    slots = sum(1 for s in state.slots if s.kind == "computation" and not s.verified and s.expression
                and not any(0 <= i < len(state.needs) and state.needs[i].preferred_source == "code" for i in s.needs))
    return len(unmet_blocking(state)) + slots


def tool_calls_left(state: Ledger, cap: int | None = None) -> int | None:
    """Tool calls the budget still allows (the task's `max_tool_calls` or `cap`, whichever is lower); None: no cap."""
    caps = [c for c in (cap, state.max_tool_calls) if c is not None]
    return None if not caps else max(0, min(caps) - tool_calls_made(state))


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


def _literal(value: str | None) -> str:
    """A need's value as a Python literal: a number when it reads as one (commas allowed), else a string."""
    text = (value or "").strip()
    plain = text.replace(",", "")
    digits = plain.lstrip("+-").split(".")[0]
    if _NUMBER.fullmatch(text) and not (len(digits) > 1 and digits.startswith("0")):  # 007 is not a Python literal
        return plain
    return json.dumps(text, ensure_ascii=False)


def slot_program(state: Ledger, name: str) -> str:
    """The code a call on slot `name` runs when the planner leaves the code out: the slot's needs bound to
    `n<i>` (numbers as numbers; with the filled needs its expression names), then its expression printed (a slot
    without one prints its values joined by ", ").

    >>> from omnidecision.ledger.schema import Ledger, Need, Slot
    >>> s = Ledger(needs=[Need(index=0, description="a", status="filled", value="1,200"),
    ...                   Need(index=1, description="b", status="filled", value="Ada")],
    ...            slots=[Slot(name="x", kind="computation", needs=[0], expression="n0 / 4"),
    ...                   Slot(name="y", needs=[1])])
    >>> print(slot_program(s, "x"))
    n0 = 1200
    print(n0 / 4)
    >>> print(slot_program(s, "y"))
    n1 = "Ada"
    print(", ".join(str(v) for v in [n1]))
    """
    slot = state.slot(name)
    if slot is None:
        return ""
    # the slot's needs, plus any filled need its expression names (`n3`)
    named = {int(m) for m in re.findall(r"\bn(\d+)\b", slot.expression or "")}
    bound = [i for i in sorted(set(slot.needs) | named) if 0 <= i < len(state.needs)
             and (i in slot.needs or state.needs[i].status == "filled")]
    lines = [f"n{i} = {_literal(state.needs[i].value)}" for i in bound]
    if slot.expression:
        lines.append(f"print({slot.expression})")
    else:
        lines.append('print(", ".join(str(v) for v in [' + ", ".join(f"n{i}" for i in slot.needs) + "]))")
    return "\n".join(lines)

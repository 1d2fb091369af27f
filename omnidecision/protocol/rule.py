"""The rule planner: THE rule decision for a ledger state (one copy for the whole project).

- `finish` when the ledger allows it (`finish_available`: ready, or nothing can advance). A ready ledger with
  actionable supplementary needs finishes: they are not worth a call (and a tight tool budget may not allow one).
- Otherwise the actionable blocking need that unblocks the most open needs (ties: the lowest index), then a
  supplementary one: under a tight tool budget the need on the answer's path goes first.
- With no actionable need, the first slot a code call can verify (`actionable_slot_names`): a computation
  whose inputs are filled is computed with `code_executor` before finishing.
- The tool: the first of the need's sources (its preferred source, then `alt_sources`) not yet tried on it; when
  all were tried, the preferred one. So a need whose listed source came back without the value switches to the
  next source, and a conflict raised from one source goes to an independent one.
The query is written only with `explicit_query=True`: by default the tool layer composes it from the need's
`query_focus` and the filled upstream values, the short form a tiny planner learns in minutes
(docs/research/tiny-planner.md). The decision's text (`rule_decision_text`) leaves out the tool too when it is the one
the loop defaults to (`protocol.actions.short_form`); `rule_action` always names it.

Users: the scripted teacher (`backends.teacher`, which adds its noise on top), the closure checks and held-out
scoring (`rewards`, `sft.heldout`), the synthetic state generators (`synthetic.states`) and the on-policy
relabelling of visited states (`rounds`).

    >>> from omnidecision.ledger import Ledger
    >>> render_action(rule_action(Ledger()))
    '{"action":"finish"}'
"""

from __future__ import annotations

from omnidecision.ledger import (
    SLOT_TOOL,
    Ledger,
    Need,
    actionable_need_indices,
    actionable_slot_names,
    composed_query,
    finish_available,
    need_tools,
    slot_program,
    sources_to_try,
    unblocks,
)
from omnidecision.protocol.actions import CallAction, FinishAction, render_action, short_form


def rule_need(state: Ledger) -> int | None:
    """The need the rule planner calls on, or None when it finishes or calls a slot."""
    if finish_available(state):
        return None
    actionable = actionable_need_indices(state)
    blocking = [i for i in actionable if state.needs[i].role == "blocking"]
    pool = blocking or actionable
    if not pool:  # no actionable need: a slot can still be verified (readiness.can_advance)
        return None
    return min(pool, key=lambda i: (-len(unblocks(state, i)), i))


def candidate_tools(need: Need) -> list[str]:
    """The tools of the need's sources in order of preference (preferred source first, no repeats)."""
    return need_tools(need)


def rule_tool(need: Need) -> str:
    """The first candidate tool not tried on the need yet; the preferred one when every candidate was tried (the
    first of the digest's `sources=[…]`)."""
    return sources_to_try(need)[0]


def rule_action(state: Ledger, explicit_query: bool = False) -> CallAction | FinishAction:
    """The rule decision for `state` (see the module docstring)."""
    i = rule_need(state)
    if i is None and not finish_available(state):  # no actionable need: a slot can still be verified
        name = actionable_slot_names(state)[0]
        return CallAction(slot=name, tool=SLOT_TOOL, query=slot_program(state, name) if explicit_query else None)
    if i is None:
        return FinishAction()
    return CallAction(need=i, tool=rule_tool(state.needs[i]),
                      query=composed_query(state, i) if explicit_query else None)


def rule_decision_text(state: Ledger, explicit_query: bool = False) -> str:
    """The rule decision as the canonical text a planner is trained to emit: the short form (no query, no tool
    the state defaults to: `short_form`), or with `explicit_query` the long form a strong planner writes (tool and
    query)."""
    action = rule_action(state, explicit_query)
    return render_action(action if explicit_query else short_form(state, action))

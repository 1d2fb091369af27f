"""The rule planner: THE rule decision for a ledger state (one copy for the whole project).

`finish` when the ledger allows it (`finish_available`); otherwise the first actionable blocking need (then the
first actionable supplementary one), with the tool of its preferred source; with no actionable need, the first slot
a code call can verify (`actionable_slot_names`). The query is written only with
`explicit_query=True`: by default the tool layer composes it from the need's `query_focus` and the filled
upstream values, the short form a tiny planner learns in minutes (docs/findings.md, "tiny planner").

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
    SOURCE_TOOL,
    Ledger,
    actionable_need_indices,
    actionable_slot_names,
    composed_query,
    finish_available,
    slot_program,
)
from omnidecision.protocol.actions import CallAction, FinishAction, render_action


def rule_need(state: Ledger) -> int | None:
    """The need the rule planner calls on, or None when it finishes or calls a slot."""
    if finish_available(state):
        return None
    actionable = actionable_need_indices(state)
    blocking = [i for i in actionable if state.needs[i].role == "blocking"]
    return (blocking or actionable or [None])[0]


def rule_action(state: Ledger, explicit_query: bool = False) -> CallAction | FinishAction:
    """The rule decision for `state` (see the module docstring)."""
    i = rule_need(state)
    if i is None and not finish_available(state):  # no actionable need: a slot can still be verified
        name = actionable_slot_names(state)[0]
        return CallAction(slot=name, tool=SLOT_TOOL, query=slot_program(state, name) if explicit_query else None)
    if i is None:
        return FinishAction()
    return CallAction(need=i, tool=SOURCE_TOOL[state.needs[i].preferred_source],
                      query=composed_query(state, i) if explicit_query else None)


def rule_decision_text(state: Ledger, explicit_query: bool = False) -> str:
    """The rule decision as the canonical text a planner is trained to emit."""
    return render_action(rule_action(state, explicit_query))

"""The evidence-ledger core: schema, typed events, the pure reducer, readiness and the bounded digest.

Pure Python + pydantic; imports nothing from the agent, tools or training code.

    python -c "from omnidecision.ledger import Ledger, render_digest; print(render_digest(Ledger(question='q')))"
"""

from omnidecision.ledger.digest import DigestBudget, render_digest
from omnidecision.ledger.events import (
    EVENT_ADAPTER,
    ConflictRaised,
    ConflictResolved,
    EvidenceAdded,
    FinalizerChecked,
    FinishRequested,
    InitLedger,
    InvalidAction,
    LedgerEvent,
    NeedSpec,
    NeedUpdated,
    SlotUpdated,
    ToolCalled,
    parse_event,
)
from omnidecision.ledger.readiness import (
    SLOT_TOOL,
    actionable_need_indices,
    actionable_slot_names,
    blocked_need_indices,
    calls_required,
    can_advance,
    composed_query,
    exhausted_need_indices,
    finish_available,
    is_open,
    listed_tools,
    need_tools,
    ready,
    slot_program,
    sources_to_try,
    tool_budget_spent,
    tool_calls_left,
    tool_calls_made,
    unblocks,
    unmet_blocking,
    unresolved_conflicts,
)
from omnidecision.ledger.reducer import MAX_RAW_CHARS, EventRejected, reduce, replay
from omnidecision.ledger.schema import (
    SOURCE_TOOL,
    SOURCES,
    AssetRef,
    Conflict,
    ConflictValue,
    EvidenceAtom,
    FailedCall,
    Ledger,
    Need,
    Rejection,
    Slot,
    SourceRef,
    TaskContext,
)

__all__ = [
    "MAX_RAW_CHARS",
    "calls_required",
    "listed_tools",
    "need_tools",
    "sources_to_try",
    "tool_calls_left",
    "EVENT_ADAPTER", "SLOT_TOOL", "SOURCES", "SOURCE_TOOL", "AssetRef", "Conflict", "ConflictRaised",
    "ConflictResolved", "ConflictValue", "DigestBudget", "EventRejected", "EvidenceAdded", "EvidenceAtom",
    "FailedCall", "FinalizerChecked", "FinishRequested", "InitLedger", "InvalidAction", "Ledger", "LedgerEvent",
    "Need", "NeedSpec", "NeedUpdated", "Rejection", "Slot", "SlotUpdated", "SourceRef", "TaskContext", "ToolCalled",
    "actionable_need_indices", "actionable_slot_names", "blocked_need_indices", "can_advance", "composed_query",
    "exhausted_need_indices", "finish_available", "is_open", "parse_event", "ready", "reduce", "render_digest",
    "replay", "slot_program", "tool_budget_spent", "tool_calls_made", "unblocks", "unmet_blocking",
    "unresolved_conflicts",
]

"""Typed ledger events: the only way a ledger changes (a pydantic discriminated union on `kind`).

    >>> from omnidecision.ledger.events import parse_event
    >>> parse_event({"kind": "finish"}).kind
    'finish'
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from omnidecision.ledger.schema import ConflictValue, NeedRole, NeedStatus, Slot, Source, SourceRef, TaskContext


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NeedSpec(_Event):
    """A need as the decomposer proposes it (the reducer assigns the index)."""

    description: str
    role: NeedRole = "blocking"
    query_focus: str = ""
    preferred_source: Source = "web"
    depends_on: list[int] = Field(default_factory=list)
    alt_sources: list[Source] = Field(default_factory=list)
    asset_id: str | None = None  # the asset this need's perception calls look at (one of R0's assets)


class InitLedger(_Event):
    """Decompose's output: the initial needs and slots, before any tool call, and the task's context R0."""

    kind: Literal["init"] = "init"
    question: str
    context: TaskContext | None = None
    needs: list[NeedSpec]
    slots: list[Slot] = Field(default_factory=list)
    step_budget: int = Field(15, ge=1)
    max_attempts: int = Field(3, ge=1)
    max_tool_calls: int | None = Field(None, ge=0)


class ToolCalled(_Event):
    """The planner called `tool` for `need`, or for the slot `slot` (one planner step); `ok=False` records a failed
    call. Exactly one of `need` and `slot` is set."""

    kind: Literal["tool_call"] = "tool_call"
    need: int | None = None
    slot: str | None = None
    tool: str
    query: str | None = None
    ok: bool = True
    error: str | None = None


class InvalidAction(_Event):
    """A role's output was rejected (failed its schema, or a planner call on a need that is not actionable);
    counted, and a planner one still spends a step and becomes the ledger's `last_rejected` decision.
    `decision` is the parsed decision's canonical text when the output parsed (how repeats are recognised)."""

    kind: Literal["invalid_action"] = "invalid_action"
    role: str
    error: str
    raw: str = ""
    decision: str | None = None


class NeedUpdated(_Event):
    """The critic's verdict on one need."""

    kind: Literal["need_update"] = "need_update"
    need: int
    verdict: Literal["supports", "conflicts", "omits"] = "supports"
    status: NeedStatus | None = None
    value: str | None = None
    filled_by: str | None = None
    revised_query_focus: str | None = None
    revised_role: NeedRole | None = None
    add_depends_on: list[int] = Field(default_factory=list)


class EvidenceAdded(_Event):
    kind: Literal["evidence"] = "evidence"
    claim: str
    source: SourceRef
    supports: list[int] = Field(default_factory=list)


class ConflictRaised(_Event):
    """Two or more competing values for a need or a slot; the need is reopened (partial)."""

    kind: Literal["conflict"] = "conflict"
    need: int | None = None
    slot: str | None = None
    values: list[ConflictValue] = Field(min_length=2)


class ConflictResolved(_Event):
    kind: Literal["resolve_conflict"] = "resolve_conflict"
    conflict: int
    value: str
    source: SourceRef | None = None


class SlotUpdated(_Event):
    kind: Literal["slot_update"] = "slot_update"
    slot: str
    value: str | None = None
    verified: bool = False
    source: str | None = None


class FinishRequested(_Event):
    """The planner chose `finish` (one planner step)."""

    kind: Literal["finish"] = "finish"


class FinalizerChecked(_Event):
    """The finalizer's check of its drafted answer against the ledger; a failure carries its diagnosis."""

    kind: Literal["finalizer_check"] = "finalizer_check"
    passed: bool
    answer: str | None = None
    diagnosis: str | None = None


LedgerEvent = Annotated[
    InitLedger
    | ToolCalled
    | InvalidAction
    | NeedUpdated
    | EvidenceAdded
    | ConflictRaised
    | ConflictResolved
    | SlotUpdated
    | FinishRequested
    | FinalizerChecked,
    Field(discriminator="kind"),
]

EVENT_ADAPTER: TypeAdapter[LedgerEvent] = TypeAdapter(LedgerEvent)


def parse_event(data: dict | str) -> LedgerEvent:
    """Validate one event from a dict or a JSON string (raises pydantic.ValidationError)."""
    if isinstance(data, str):
        return EVENT_ADAPTER.validate_json(data)
    return EVENT_ADAPTER.validate_python(data)

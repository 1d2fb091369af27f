"""The evidence ledger S = {U, F, E, C}: needs, slots, evidence atoms, conflicts.

Plain pydantic records; the reducer (`omnidecision.ledger.reducer`) is the only code that builds new states.

    >>> from omnidecision.ledger import Ledger
    >>> Ledger().needs
    []
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

NeedRole = Literal["blocking", "supplementary"]
NeedStatus = Literal["unfilled", "partial", "filled", "unfillable"]
Source = Literal["subtitle", "audio", "clip", "frame", "web", "code"]
SlotKind = Literal["fact", "computation"]

SOURCES: tuple[str, ...] = ("subtitle", "audio", "clip", "frame", "web", "code")

# The built-in tool names, defined once here, at the lowest layer that needs them (a need's source implies a tool;
# the prompts' tool list, the tiny model's vocabulary and the reference show them). The tools registry cannot be
# imported from here (docs/architecture.md), so `tests/architecture/test_registries.py` checks that the package's
# registered tools agree. A user's own tool (registered from a plugin module, docs/guide/own-tasks.md) is not here:
# the names a planner's call may use are `protocol.actions.tool_names()`, these and the registered ones.
ToolName = Literal[
    "subtitle_grounding",
    "audio_scouting",
    "clip_grounding",
    "frame_confirmation",
    "web_search",
    "page_reader",
    "code_executor",
]
TOOL_NAMES: tuple[str, ...] = get_args(ToolName)
# The tools that look at one of the task's assets (they take `asset_id`), and the tools that reach the web.
PERCEPTION_TOOLS: tuple[str, ...] = ("subtitle_grounding", "audio_scouting", "clip_grounding", "frame_confirmation")
WEB_TOOLS: tuple[str, ...] = ("web_search", "page_reader")
OPEN_STATUSES: frozenset[str] = frozenset({"unfilled", "partial"})


class _Record(BaseModel):
    # Unknown fields are errors: a typo in a recorded ledger must not silently vanish on replay.
    model_config = ConfigDict(extra="forbid")


class SourceRef(_Record):
    """Where a piece of evidence came from: the tool, the asset or URL, and an optional time span (seconds)."""

    tool: str
    asset_id: str | None = None
    url: str | None = None
    start: float | None = None
    end: float | None = None

    def label(self) -> str:
        where = self.asset_id or self.url or ""
        span = f"@{self.start:g}-{self.end:g}s" if self.start is not None and self.end is not None else ""
        return f"{self.tool}:{where}{span}" if where else f"{self.tool}{span}"


class AssetRef(_Record):
    """One asset of the task as the planner sees it (R0): id, type and duration when known."""

    id: str
    type: str
    duration: float | None = None


class TaskContext(_Record):
    """The task's immutable context R0, shown at the top of every digest: the assets, the options of a
    multiple-choice question, the answer format, and the tools this task allows (None: every tool)."""

    assets: list[AssetRef] = Field(default_factory=list)
    options: list[str] | None = None
    answer_format: str | None = None
    tools: list[str] | None = None


class Need(_Record):
    """An evidence need: what must be found, from which source, after which other needs; `asset_id` names the
    asset its perception calls look at (None: the tool's default asset)."""

    index: int
    description: str
    role: NeedRole = "blocking"
    status: NeedStatus = "unfilled"
    query_focus: str = ""
    preferred_source: Source = "web"
    depends_on: list[int] = Field(default_factory=list)
    # other sources that can answer the need, in order of preference after `preferred_source`
    alt_sources: list[Source] = Field(default_factory=list)
    filled_by: str | None = None
    value: str | None = None
    attempts: int = 0
    asset_id: str | None = None
    tried: list[str] = Field(default_factory=list)  # tools called on this need so far (first-call order, no repeats)


class Slot(_Record):
    """A fact or computation slot; `needs` are the needs whose values it is built from. `attempts` counts the
    tool calls aimed at the slot itself (a code call that computes it once its needs are filled)."""

    name: str
    kind: SlotKind = "fact"
    needs: list[int] = Field(default_factory=list)
    expression: str | None = None
    value: str | None = None
    verified: bool = False
    source: str | None = None
    attempts: int = 0


class EvidenceAtom(_Record):
    """A confirmed claim with its source and the needs it supports."""

    id: int
    claim: str
    source: SourceRef
    supports: list[int] = Field(default_factory=list)


class ConflictValue(_Record):
    value: str
    source: SourceRef


class Conflict(_Record):
    """Competing values for one need or slot; every value is kept with its source until resolved."""

    id: int
    need: int | None = None
    slot: str | None = None
    values: list[ConflictValue]
    resolved: bool = False
    resolution: str | None = None


class FailedCall(_Record):
    """A tool call that returned an error or nothing useful; the planner should not repeat it verbatim.
    It targeted a need, or (`need` None) the slot `slot`."""

    need: int | None = None
    slot: str | None = None
    tool: str
    query: str | None = None
    error: str | None = None


class Rejection(_Record):
    """The planner's last rejected decision: what it was, why the loop rejected it, how many times in a row."""

    decision: str
    reason: str
    streak: int = 1


class Ledger(_Record):
    """The whole per-question state. `step` counts planner decisions committed so far."""

    question: str = ""
    context: TaskContext | None = None
    needs: list[Need] = Field(default_factory=list)
    slots: list[Slot] = Field(default_factory=list)
    evidence: list[EvidenceAtom] = Field(default_factory=list)
    conflicts: list[Conflict] = Field(default_factory=list)
    failed_calls: list[FailedCall] = Field(default_factory=list)
    tool_call_counts: dict[str, int] = Field(default_factory=dict)
    invalid_counts: dict[str, int] = Field(default_factory=dict)
    step: int = 0
    step_budget: int = 15
    max_attempts: int = 3
    max_tool_calls: int | None = None  # the task's tool-call budget (R0), shown in the digest; None: no cap
    finish_requests: int = 0
    finalizer_failures: int = 0
    gap_diagnosis: str | None = None
    last_rejected: Rejection | None = None  # cleared by the next accepted decision (a tool call or a finish)
    answer: str | None = None
    initialized: bool = False

    def need(self, index: int) -> Need | None:
        return self.needs[index] if 0 <= index < len(self.needs) else None

    def slot(self, name: str) -> Slot | None:
        return next((s for s in self.slots if s.name == name), None)


# The tool a need's preferred source implies (pure data: the ledger does not import the tools package).
SOURCE_TOOL: dict[str, ToolName] = {
    "subtitle": "subtitle_grounding",
    "audio": "audio_scouting",
    "clip": "clip_grounding",
    "frame": "frame_confirmation",
    "web": "web_search",
    "code": "code_executor",
}

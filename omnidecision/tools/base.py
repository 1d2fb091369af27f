"""What every tool shares: the observation record, the per-run tool context, and the tool protocol.

A tool never raises into the agent loop: errors and timeouts come back as `Observation(ok=False, error=...)`,
which the critic sees like any other observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.ledger.schema import SourceRef
from omnidecision.tasks.schema import Task


class Observation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str
    ok: bool = True
    text: str = ""
    fields: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    source: SourceRef | None = None
    limit_hit: str | None = None  # e.g. "timeout", "memory", "output" for the code executor


@dataclass
class ToolContext:
    """Everything a tool may use for one run: the task, the environment's services, settings.

    `services` holds backends keyed by name (e.g. "search", "perception", "replay"); the environment
    (offline surrogates, OmniGAIA replay, real APIs) decides what is there.
    """

    task: Task
    services: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


class Tool(Protocol):
    name: str
    args_model: type[BaseModel]

    async def run(self, args: BaseModel, ctx: ToolContext) -> Observation: ...


class SearchHit(BaseModel):
    url: str
    title: str = ""
    snippet: str = ""
    score: float = 0.0


class SearchService(Protocol):
    """Web search + page reading (offline: BM25 over the task's pages/corpus; replay: over OmniGAIA sources)."""

    async def search(self, query: str, k: int = 5) -> list[SearchHit]: ...

    async def read(self, url: str) -> str | None: ...


class MediaService(Protocol):
    """Answers a perception tool's request about an asset: a multimodal model over decoded frames/audio, or the
    OmniGAIA replay environment. Returning None lets the tool fall back to the asset's text surrogates."""

    async def perceive(
        self, tool: str, asset: Any, query: str, start: float | None = None, end: float | None = None
    ) -> Observation | None: ...


class ToolError(Exception):
    """A clean, expected tool failure (missing asset, unknown URL, blocked domain); the registry turns it into
    `Observation(ok=False, error=str(exc))`."""


@dataclass
class DecodedFrame:
    """One video frame decoded at a requested timestamp (`t` is the frame's own presentation time)."""

    requested_t: float
    t: float
    jpeg: bytes
    width: int
    height: int


class FrameMediaService(MediaService, Protocol):
    """A media service that can look at decoded frames (a multimodal model behind an API).

    Tools with a real video decode frames with `av` at the asked timestamps and call this when the service has it;
    otherwise they call `perceive` and let the service decide.
    """

    async def perceive_frames(
        self, tool: str, asset: Any, query: str, frames: list[DecodedFrame]
    ) -> Observation | None: ...

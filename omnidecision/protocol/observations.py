"""What a tool call returns (`Observation`) and what a search service returns (`SearchHit`): the data contract
between the tools, the environments that answer them (offline, OmniGAIA replay, live) and the agent's records.

Defined here, below `tasks`, `tools` and `backends`, so an environment (`tasks.replay_env`) or a backend
(`backends.perception`) can build observations without importing the tools package (docs/architecture.md).

    >>> Observation(tool="web_search", ok=False, error="blocked").ok
    False
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.ledger.schema import SourceRef


class Observation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str
    ok: bool = True
    text: str = ""
    fields: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    source: SourceRef | None = None
    limit_hit: str | None = None  # e.g. "timeout", "memory", "output" for the code executor


class SearchHit(BaseModel):
    url: str
    title: str = ""
    snippet: str = ""
    score: float = 0.0

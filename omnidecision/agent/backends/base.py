"""One small async interface for every model backend (OpenAI-compatible endpoints, scripted teacher, replay).

A backend gets a `ChatRequest` (role, messages, optional JSON schema) and returns a `ChatResponse`.
`context` carries the run's task, ledger and latest observation: LLM backends ignore it, offline
backends (the scripted teacher) use it. A backend failure raises `BackendError` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel

Role = Literal["decompose", "planner", "critic", "finalizer", "judge", "perception", "summarizer"]


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens)


@dataclass
class ChatRequest:
    role: Role
    messages: list[dict[str, Any]]
    json_schema: dict[str, Any] | None = None
    schema_name: str = "output"
    context: dict[str, Any] = field(default_factory=dict)


class ChatResponse(BaseModel):
    text: str
    usage: Usage = Usage()
    latency_s: float = 0.0
    model: str = ""
    cost: float | None = None  # set when the backend's prices are configured


class BackendError(Exception):
    """The backend could not produce a reply (after its retries); `reason` is what a report shows."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ChatBackend(Protocol):
    async def chat(self, request: ChatRequest) -> ChatResponse: ...

"""Agent run settings and per-role backend specs (parsed from the `agent:` / `backends:` parts of recipes)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.agent.trajectory import Mode


class BackendSpec(BaseModel):
    """Where one role's model lives. kind="openai": any OpenAI-compatible endpoint (vLLM, OpenAI, Gemini);
    kind="teacher": the scripted teacher (synthetic tasks); other kinds are registered by name."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "openai"
    base_url: str | None = None
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    timeout_s: float = 60.0
    max_retries: int = 3
    structured_output: bool = True  # send response_format json_schema
    enable_thinking: bool = False  # must match training (train/serve parity)
    price_per_1k_prompt: float | None = None
    price_per_1k_completion: float | None = None
    max_concurrency: int = 64
    options: dict[str, Any] = Field(default_factory=dict)  # kind-specific (e.g. teacher noise knobs)


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Mode = "ledger"
    step_budget: int = Field(15, ge=1, description="T: planner steps before the run stops with outcome `budget`")
    revision_budget: int = Field(2, ge=0, description="failed finalizer checks before a `forced` stop")
    max_tool_calls: int | None = Field(None, ge=0, description="hard tool-call cap for budget-matched comparisons")
    max_attempts: int = Field(3, ge=1, description="tool calls per need before it stops being actionable")
    digest_max_chars: int = Field(3000, ge=200)
    tool_timeout_s: float = 30.0
    memory_every: int = Field(4, ge=1, description="memory mode: summarise the history every k steps")
    settings: dict[str, Any] = Field(default_factory=dict)


Roles = Literal["decompose", "planner", "critic", "finalizer", "judge", "perception", "summarizer"]

"""Agent run settings (parsed from the `agent:` part of recipes; per-role backends: `protocol.chat.BackendSpec`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.protocol.records import Mode


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Mode = "ledger"
    step_budget: int = Field(15, ge=1, description="T: planner steps before the run stops with outcome `budget`")
    revision_budget: int = Field(2, ge=0, description="failed finalizer checks before a `forced` stop")
    max_tool_calls: int | None = Field(None, ge=0, description="hard tool-call cap for budget-matched comparisons")
    max_attempts: int = Field(3, ge=1, description="tool calls per need before it stops being actionable")
    max_repeated_rejections: int | None = Field(
        3, ge=1, description="stop (outcome `stuck`) when the planner repeats the same rejected decision this many "
                             "times in a row; None: never (the step budget ends the run)")
    constrain_decoding: bool = Field(
        False, description="send the planner a per-state JSON schema of the actions the loop accepts "
                           "(agent.action_space; needs a backend with structured outputs, e.g. vLLM)")
    planner_system_prompt: bool = Field(
        True, description="send the planner its instructions as a system turn; false for a planner fine-tuned on "
                          "rows collected without them (protocol.prompts; the same setting at collection and "
                          "serving)")
    digest_max_chars: int = Field(3000, ge=200)
    tool_timeout_s: float = 30.0
    memory_every: int = Field(4, ge=1, description="memory mode: summarise the history every k steps")
    settings: dict[str, Any] = Field(default_factory=dict)


Roles = Literal["decompose", "planner", "critic", "finalizer", "judge", "perception", "summarizer"]

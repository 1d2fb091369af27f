"""Agent run settings (parsed from the `agent:` part of recipes; per-role backends: `protocol.chat.BackendSpec`).

    >>> AgentConfig.model_validate({"settings": {"draft_on_stop": False}}).settings.draft_on_stop
    False
    >>> AgentConfig().tool_settings().tool_timeout_s
    30.0
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
)

from omnidecision.protocol.records import Mode
from omnidecision.tools.base import ToolSettings

ToolScope = Literal["allowed", "listed"]


class AgentSettings(ToolSettings):
    """`agent.settings` of a recipe: the tools' settings (`tools.base.ToolSettings`) and the loop's stop rules,
    every default here (an unknown name is an error)."""

    draft_on_stop: bool = Field(True, description="a run stopped without an answer asks the finalizer for a draft")
    abstain_on_insufficient: bool = Field(
        True, description="an `insufficient` stop abstains (its draft is kept apart); false: submit the draft")


class AgentConfig(BaseModel):
    """`agent` of a recipe: the loop's mode, budgets and what the planner is sent.

    Attributes:
        mode: ledger (the evidence ledger), react (growing history) or memory (summarised history): the baselines
        digest_max_chars: size bound of the digest the planner reads, in characters (it never grows with the steps)
        tool_timeout_s: seconds before a tool call times out
    """

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
    constrain_tools: ToolScope = Field(
        "allowed", description="the tools a call may name: `allowed`, any the task allows; `listed`, for a need "
                               "only the tools of its listed sources (the line's `sources=`, page_reader beside "
                               "web_search) and for a slot code_executor. The loop rejects the others and the "
                               "action schema leaves them out (docs/research/source-switch.md, \"Listed tools\")")
    planner_system_prompt: bool = Field(
        True, description="send the planner its instructions as a system turn; false for a planner fine-tuned on "
                          "rows collected without them (protocol.prompts; the same setting at collection and "
                          "serving)")
    digest_max_chars: int = Field(3000, ge=200)
    tool_timeout_s: float = 30.0
    memory_every: int = Field(4, ge=1, description="memory mode: summarise the history every k steps")
    settings: AgentSettings = Field(default_factory=AgentSettings, description="tool and stop-rule settings")

    @field_serializer("settings")
    def _settings_as_given(self, settings: AgentSettings) -> dict[str, Any]:
        # Only what differs from the defaults: the config digest (runtime.config_digest) of a run written before
        # the settings were typed stays the same, and so do manifests and records.
        return settings.model_dump(mode="json", exclude_defaults=True)

    @model_serializer(mode="wrap")
    def _scope_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # `constrain_tools` only when it is not the default, as for `settings`: configs written before the field
        # existed keep their digest
        out = handler(self)
        if isinstance(out, dict) and out.get("constrain_tools") == "allowed":
            out.pop("constrain_tools")
        return out

    def tool_settings(self) -> ToolSettings:
        """The tools' settings of a run: `tool_timeout_s` is the agent's unless `settings` sets its own."""
        given = self.settings.model_dump(exclude_unset=True, include=set(ToolSettings.model_fields))
        return ToolSettings.model_validate({"tool_timeout_s": self.tool_timeout_s, **given})


Roles = Literal["decompose", "planner", "critic", "finalizer", "judge", "perception", "summarizer"]

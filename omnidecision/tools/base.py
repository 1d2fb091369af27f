"""What every tool shares: the tool registry and protocol, the per-run tool context and its typed settings.

A built-in tool is one module of this package with a class decorated `@register_tool("name")` (its name one of
`ledger.schema.ToolName`, the list prompts and the reference show); the registry imports every module of the
package the first time it is read, then the user's plugin modules (`OMNIDECISION_PLUGINS`, entry points of the group
`omnidecision.plugins`: `protocol.registry.load_plugins`), where a tool of one's own is registered with the same
decorator under any new name (docs/guide/own-tasks.md). A tool never raises into the agent loop: errors and
timeouts come back as `Observation(ok=False, error=...)`, which the critic sees like any other observation.

    >>> TOOLS["web_search"].name
    'web_search'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.protocol.actions import HOW_TO_ADD_A_TOOL, use_tool_registry
from omnidecision.protocol.observations import Observation, SearchHit
from omnidecision.protocol.registry import Registry
from omnidecision.tasks.schema import Task

__all__ = ["TOOLS", "DecodedFrame", "FrameMediaService", "MediaService", "Observation", "SearchHit",
           "SearchService", "Tool", "ToolContext", "ToolError", "ToolSettings", "register_tool"]


class ToolSettings(BaseModel):
    """The tools' knobs, with their defaults in one place (`agent.settings` in a recipe; a typo is an error)."""

    model_config = ConfigDict(extra="forbid")

    tool_timeout_s: float = Field(30.0, gt=0, description="a tool call's time limit (the registry's timeout)")
    blocked_domains: list[str] = Field(default_factory=list, description="added to every task's web block list")
    frame_tolerance_s: float = Field(2.0, ge=0, description="frame_confirmation: nearest caption within this")
    frame_max_side: int = Field(512, ge=1, description="longer side (pixels) of frames sent to a media service")
    clip_frames: int = Field(8, ge=1, description="clip_grounding: frames sampled from a window by default")
    # Checked when the code executor runs (an error observation, as for any bad tool input), not here.
    sandbox: dict[str, int | float] = Field(default_factory=dict,
                                            description="code_executor limits (SandboxLimits field -> value)")
    sandbox_python: str | None = Field(None, description="the interpreter the sandbox runs (None: found)")
    sandbox_site: bool = Field(False, description="let sandboxed code import site-packages")
    sandbox_method: str = Field("auto", description="auto | bubblewrap | namespaces")
    sandbox_bwrap: str | None = Field(None, description="the bwrap executable (None: on PATH)")
    # Degraded perception for backend-swap grids (eval/grid.py): a weak perception backend as a knob of the tools.
    perception_drop: float = Field(
        0.0, ge=0.0, le=1.0, description="the chance that a perception tool returns nothing usable, drawn once per "
        "(task, tool) (tools.registry.perception_dropped): every planner and every rerun see the same drops")
    perception_drop_seed: int = Field(0, description="seed of the perception_drop draws")


@dataclass
class ToolContext:
    """Everything a tool may use for one run: the task, the environment's services, settings.

    `services` holds backends keyed by name (e.g. "search", "perception", "replay"); the environment
    (offline surrogates, OmniGAIA replay, real APIs) decides what is there.
    """

    task: Task
    services: dict[str, Any] = field(default_factory=dict)
    settings: ToolSettings = field(default_factory=ToolSettings)

    def __post_init__(self) -> None:
        if isinstance(self.settings, Mapping):  # a plain mapping (tests, the tool CLI) is validated here
            self.settings = ToolSettings.model_validate(dict(self.settings))


class Tool(Protocol):
    name: str
    args_model: type[BaseModel]

    async def run(self, args: BaseModel, ctx: ToolContext) -> Observation: ...


TOOLS: Registry[Tool] = Registry("tool", package="omnidecision.tools", plugins=True, how_to_add=HOW_TO_ADD_A_TOOL)
# the planner's action schema checks a call's tool against what is registered here (it may not import this package)
use_tool_registry(TOOLS.registered_names)
ToolClass = TypeVar("ToolClass", bound=type)
_TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def register_tool(name: str) -> Callable[[ToolClass], ToolClass]:
    """Class decorator: sets `cls.name` and registers one instance of the tool under `name` (letters, digits and
    `_`, starting with a letter: a name the planner writes in JSON and a tokenizer splits plainly).

    >>> register_tool("my tool")
    Traceback (most recent call last):
    ...
    ValueError: tool name 'my tool': letters, digits and _, starting with a letter (at most 64)
    """
    if not _TOOL_NAME.fullmatch(name):
        raise ValueError(f"tool name {name!r}: letters, digits and _, starting with a letter (at most 64)")

    def add(cls: ToolClass) -> ToolClass:
        cls.name = name  # type: ignore[attr-defined]
        TOOLS.register(name)(cls())
        return cls

    return add


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

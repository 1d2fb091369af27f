"""The tool registry: names → tools, argument validation, timeouts, and the default offline tool context.

`run_tool` never raises: unknown tools, bad arguments (the error names the field), timeouts and any exception
come back as `Observation(ok=False, error=...)`, which the critic sees like any other observation.

    python -c "import asyncio; from omnidecision.tools.registry import *; from omnidecision.tasks.schema import Task; \
print(asyncio.run(run_tool('code_executor', {'code': 'print(6*7)'}, build_tool_context(Task(id='t', question='?')))))"
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ValidationError

from omnidecision.protocol.actions import PRIMARY_FIELD
from omnidecision.tasks.schema import Task
from omnidecision.tools.audio import AudioScouting
from omnidecision.tools.base import Observation, Tool, ToolContext, ToolError
from omnidecision.tools.clips import ClipGrounding
from omnidecision.tools.code import CodeExecutor
from omnidecision.tools.frames import FrameConfirmation
from omnidecision.tools.pages import PageReader
from omnidecision.tools.search import OfflineSearch, PageIndex, corpus_index
from omnidecision.tools.subtitles import SubtitleGrounding
from omnidecision.tools.web import WebSearch

logger = logging.getLogger(__name__)

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        SubtitleGrounding(),
        AudioScouting(),
        ClipGrounding(),
        FrameConfirmation(),
        WebSearch(),
        PageReader(),
        CodeExecutor(),
    )
}

# The tools that look at one of the task's assets (they take `asset_id`).
PERCEPTION_TOOLS: frozenset[str] = frozenset({"subtitle_grounding", "audio_scouting", "clip_grounding",
                                              "frame_confirmation"})
WEB_TOOLS: frozenset[str] = frozenset({"web_search", "page_reader"})


def arguments_for(tool: str, query: str | None, arguments: dict | None) -> dict:
    """The tool's arguments: the planner's explicit `arguments`, with `query` filling the primary field if unset.

    >>> arguments_for("page_reader", "https://a.org", None), arguments_for("web_search", "x", {"query": "y", "k": 2})
    ({'url': 'https://a.org'}, {'query': 'y', 'k': 2})
    """
    args = dict(arguments or {})
    field = PRIMARY_FIELD.get(tool, "query")
    if query is not None and not args.get(field):
        args[field] = query
    return args


def _field_errors(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "arguments"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


async def run_tool(name: str, arguments: dict, ctx: ToolContext) -> Observation:
    """Validate the arguments, run the tool under its timeout, and turn every failure into an observation."""
    tool = TOOLS.get(name)
    if tool is None:
        return Observation(tool=name, ok=False, error=f"unknown tool {name!r}; known: {', '.join(TOOLS)}")
    if not isinstance(arguments, dict):
        return Observation(tool=name, ok=False, error=f"arguments: expected an object, got {type(arguments).__name__}")
    try:
        args = tool.args_model.model_validate(arguments)
    except ValidationError as exc:
        return Observation(tool=name, ok=False, error=f"invalid arguments for {name}: {_field_errors(exc)}")
    timeout = float(ctx.settings.get("tool_timeout_s", 30))
    try:
        obs = await asyncio.wait_for(tool.run(args, ctx), timeout=timeout)
    except asyncio.TimeoutError:
        return Observation(
            tool=name, ok=False, error=f"timeout: {name} did not finish within {timeout:g}s", limit_hit="timeout"
        )
    except ToolError as exc:
        return Observation(tool=name, ok=False, error=str(exc))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool bug or a backend failure must not crash the run
        logger.warning("tool %s failed: %s", name, exc, exc_info=True)
        return Observation(tool=name, ok=False, error=f"{type(exc).__name__}: {exc}")
    if not isinstance(obs, Observation):
        return Observation(tool=name, ok=False, error=f"{name} returned {type(obs).__name__}, not an Observation")
    return obs


def default_search(task: Task, settings: dict[str, Any]) -> OfflineSearch:
    """BM25 over the task's own pages plus its corpus file (indexed once per process and shared)."""
    indices = [PageIndex(task.pages)] if task.pages else []
    corpus = task.resolve(task.corpus)
    if corpus is not None:
        indices.append(corpus_index(corpus))
    return OfflineSearch(indices, [*task.blocked_domains, *settings.get("blocked_domains", [])])


def build_tool_context(task: Task, services: dict | None = None, settings: dict | None = None) -> ToolContext:
    """A tool context with the given services, filling in the default offline search service."""
    settings = dict(settings or {})
    services = dict(services or {})
    if "search" not in services:
        services["search"] = default_search(task, settings)
    return ToolContext(task=task, services=services, settings=settings)

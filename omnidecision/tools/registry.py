"""Running a tool by name: argument validation, timeouts, and the default offline tool context.

The names come from the registry `TOOLS` (`tools.base`: each tool module registers its class with
`@register_tool("name")`; nothing here lists them).

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
from omnidecision.protocol.registry import UnknownName
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import TOOLS, Observation, ToolContext, ToolError, ToolSettings
from omnidecision.tools.search import OfflineSearch, PageIndex, corpus_index

__all__ = ["TOOLS", "arguments_for", "build_tool_context", "default_search", "run_tool"]

logger = logging.getLogger(__name__)


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
    try:
        tool = TOOLS[name]
    except UnknownName as exc:
        return Observation(tool=name, ok=False, error=str(exc))
    if not isinstance(arguments, dict):
        return Observation(tool=name, ok=False, error=f"arguments: expected an object, got {type(arguments).__name__}")
    try:
        args = tool.args_model.model_validate(arguments)
    except ValidationError as exc:
        return Observation(tool=name, ok=False, error=f"invalid arguments for {name}: {_field_errors(exc)}")
    timeout = ctx.settings.tool_timeout_s
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


def default_search(task: Task, settings: ToolSettings) -> OfflineSearch:
    """BM25 over the task's own pages plus its corpus file (indexed once per process and shared)."""
    indices = [PageIndex(task.pages)] if task.pages else []
    corpus = task.resolve(task.corpus)
    if corpus is not None:
        indices.append(corpus_index(corpus))
    return OfflineSearch(indices, [*task.blocked_domains, *settings.blocked_domains])


def build_tool_context(task: Task, services: dict | None = None,
                       settings: ToolSettings | dict[str, Any] | None = None) -> ToolContext:
    """A tool context with the given services, filling in the default offline search service; `settings` as a
    mapping is validated (an unknown name is an error)."""
    if not isinstance(settings, ToolSettings):
        settings = ToolSettings.model_validate(dict(settings or {}))
    services = dict(services or {})
    if "search" not in services:
        services["search"] = default_search(task, settings)
    return ToolContext(task=task, services=services, settings=settings)

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
import hashlib
import logging
from typing import Any

from pydantic import BaseModel, ValidationError

from omnidecision.ledger.schema import PERCEPTION_TOOLS
from omnidecision.protocol.actions import PRIMARY_FIELD
from omnidecision.protocol.registry import UnknownName
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import TOOLS, Observation, ToolContext, ToolError, ToolSettings
from omnidecision.tools.search import OfflineSearch, PageIndex, corpus_index

__all__ = ["TOOLS", "BadArguments", "arguments_for", "build_tool_context", "default_search", "perception_dropped",
           "run_tool", "validated_arguments"]

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


class BadArguments(ValueError):
    """Arguments a tool refuses before it runs; the message names the tool and each field."""


def validated_arguments(name: str, arguments: object) -> BaseModel:
    """`arguments` validated by the tool's own `args_model`: the one check of a tool's arguments, which `run_tool`
    makes before it runs the tool and `omnidecision tool --dry-run` makes instead. `UnknownName` for a tool that is
    not registered; `BadArguments` for arguments that are not an object or that its model refuses."""
    tool = TOOLS[name]
    if not isinstance(arguments, dict):
        raise BadArguments(f"arguments: expected an object, got {type(arguments).__name__}")
    try:
        return tool.args_model.model_validate(arguments)
    except ValidationError as exc:
        raise BadArguments(f"invalid arguments for {name}: {_field_errors(exc)}") from None


async def run_tool(name: str, arguments: dict, ctx: ToolContext) -> Observation:
    """Validate the arguments, run the tool under its timeout, and turn every failure into an observation."""
    try:
        tool = TOOLS[name]
        args = validated_arguments(name, arguments)
    except (UnknownName, BadArguments) as exc:
        return Observation(tool=name, ok=False, error=str(exc))
    drop = ctx.settings.perception_drop
    if drop > 0.0 and perception_dropped(ctx.task.id, name, drop, ctx.settings.perception_drop_seed):
        return dropped_observation(name, args)
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


def perception_dropped(task_id: str, tool: str, p: float, seed: int = 0) -> bool:
    """Degraded perception (`agent.settings.perception_drop` = p): whether the perception tool `tool` returns nothing
    usable on task `task_id`. A Bernoulli(p) draw from a hash of (seed, task id, tool), never from global random
    state: each (task, tool) is dropped or not for every call, sample, planner and rerun, so a backend-swap grid's
    cells stay paired per task and calling the same source again never helps (another source may). Web search, page
    reading and code are never dropped.

    >>> perception_dropped("t1", "web_search", 1.0), perception_dropped("t1", "subtitle_grounding", 1.0)
    (False, True)
    >>> perception_dropped("t1", "subtitle_grounding", 0.0)
    False
    """
    if p <= 0.0 or tool not in PERCEPTION_TOOLS:
        return False
    digest = hashlib.sha256(f"{seed}|{task_id}|{tool}|perception_drop".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < p


def dropped_observation(tool: str, args: Any) -> Observation:
    """What a dropped perception call returns: a well-formed, empty result (as a weak perception model that saw
    nothing relevant), marked `perception_dropped` in its fields for analysis."""
    asset = getattr(args, "asset_id", None)
    what = f"asset {asset}" if asset else "the asset"
    query = getattr(args, "query", "")
    return Observation(tool=tool, text=f"Nothing usable was perceived in {what} for {query!r}.",
                       fields={"asset_id": asset, "matches": [], "perception_dropped": True})


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

"""web_search: top-k hits (url, title, snippet) from the context's "search" service, minus blocked domains.

Offline the service is BM25 over the task's pages and its JSONL corpus (tools/search.py); a real search API plugs in
as any object with `async search(query, k)` and `async read(url)`.

    omnidecision tool web_search --args '{"query": "year the bridge opened"}' --tasks tasks.jsonl --task-id t1
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.ledger.schema import SourceRef
from omnidecision.tools.base import Observation, SearchHit, ToolContext, ToolError, register_tool
from omnidecision.tools.search import is_blocked

logger = logging.getLogger(__name__)


class WebSearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., min_length=1, max_length=2000, description="the search query")
    k: int = Field(5, ge=1, le=20, description="how many hits")


def blocked_domains(ctx: ToolContext) -> list[str]:
    return [*ctx.task.blocked_domains, *ctx.settings.blocked_domains]


def search_service(ctx: ToolContext) -> Any:
    service = ctx.services.get("search")
    if service is None:
        raise ToolError("no search service in this environment")
    return service


@register_tool("web_search")
class WebSearch:
    name: str  # set by @register_tool
    args_model = WebSearchArgs

    async def run(self, args: WebSearchArgs, ctx: ToolContext) -> Observation:
        blocked = blocked_domains(ctx)
        # Ask for a few extra hits: a real search API knows nothing of our block list.
        raw: list[SearchHit] = await search_service(ctx).search(args.query, args.k + len(blocked))
        hits = [h for h in raw if not is_blocked(h.url, blocked)][: args.k]
        if not hits:
            return Observation(tool=self.name, text=f"No web results for {args.query!r}.", fields={"hits": []})
        lines = [f"{i + 1}. {h.title or h.url} <{h.url}>\n   {h.snippet}" for i, h in enumerate(hits)]
        return Observation(
            tool=self.name,
            text=f"Results for {args.query!r}:\n" + "\n".join(lines),
            fields={"hits": [h.model_dump() for h in hits]},
            source=SourceRef(tool=self.name, url=hits[0].url),
        )

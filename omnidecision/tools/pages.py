"""page_reader: read a page by URL from the "search" service; if the argument is not a known URL, read the best
search hit for it instead (so a planner that passes keywords still gets a page).

    omnidecision tool page_reader --args '{"url": "https://example.org/bridge"}' --tasks tasks.jsonl --task-id t1
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.ledger.schema import SourceRef
from omnidecision.tools.base import Observation, ToolContext, ToolError, register_tool
from omnidecision.tools.search import is_blocked
from omnidecision.tools.web import blocked_domains, search_service

logger = logging.getLogger(__name__)


class PageArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(..., min_length=1, max_length=2000, description="a URL, or keywords to find a page")
    max_chars: int = Field(4000, ge=100, le=50_000, description="truncate the page text to this many characters")


@register_tool("page_reader")
class PageReader:
    name: str  # set by @register_tool
    args_model = PageArgs

    async def run(self, args: PageArgs, ctx: ToolContext) -> Observation:
        service = search_service(ctx)
        blocked = blocked_domains(ctx)
        target = args.url.strip()
        if is_blocked(target, blocked):
            raise ToolError(f"url: domain of {target} is blocked in this environment")
        text = await service.read(target)
        via = None
        if text is None:
            hits = [h for h in await service.search(target, 3 + len(blocked)) if not is_blocked(h.url, blocked)]
            errors = []
            for hit in hits:
                try:
                    text = await service.read(hit.url)
                except ToolError as exc:  # a live page that cannot be read: try the next hit
                    errors.append(str(exc))
                    continue
                if text is not None:
                    via, target = target, hit.url
                    break
            if text is None and errors:
                raise ToolError(f"url: no readable page for {args.url!r} ({'; '.join(errors[:3])})")
        if text is None:
            raise ToolError(f"url: no page found for {args.url!r}")
        canonical = getattr(service, "canonical_url", None)
        target = (canonical(target) if canonical else None) or target
        truncated = len(text) > args.max_chars
        body = text[: args.max_chars] + ("\n[… truncated]" if truncated else "")
        head = f"Page {target}" + (f" (best match for {via!r})" if via else "") + ":\n"
        return Observation(
            tool=self.name,
            text=head + body,
            fields={"url": target, "requested": args.url, "truncated": truncated, "chars": len(text)},
            source=SourceRef(tool=self.name, url=target),
        )

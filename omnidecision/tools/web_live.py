"""The live web service: a real search API (`tools/search_apis.py`) plus the real page reader (`tools/page_fetch.py`)
behind the `SearchService` interface the web_search and page_reader tools already use.

`read(url)` fetches http(s) URLs (None for anything else, so page_reader falls back to searching the words it was
given); a page that cannot be read raises `ToolError` with the reason (status, content type, block list), which
the critic sees as a failed observation. The environment's block list hides hits and refuses reads, per host and
path prefix, in the normal form the reader requests (`tools.search.is_blocked`, `tools/urls.py`).

    python -c "import asyncio; from omnidecision.tools.web_live import LiveWeb; \
from omnidecision.tools.search_apis import SearchSpec; \
w = LiveWeb.from_specs(SearchSpec(kind='searxng', base_url='http://127.0.0.1:8888')); \
print(asyncio.run(w.search('bridge opened', 3)))"
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib.parse import urlparse

from omnidecision.tools.base import SearchHit, ToolError
from omnidecision.tools.page_fetch import FetchError, PageFetcher, PageReaderSpec
from omnidecision.tools.search import is_blocked
from omnidecision.tools.search_apis import ApiSearch, SearchError, SearchSpec

logger = logging.getLogger(__name__)


class LiveWeb:
    """`SearchService` over a real search backend and the real page reader."""

    def __init__(self, engine: ApiSearch | None, fetcher: PageFetcher, blocked_domains: Iterable[str] = ()) -> None:
        self.engine = engine
        self.blocked_domains = sorted({d for d in blocked_domains if d})
        self.fetcher = fetcher
        self.fetcher.is_blocked = self.is_blocked

    @classmethod
    def from_specs(cls, search: SearchSpec | None, pages: PageReaderSpec | None = None,
                   blocked_domains: Iterable[str] = ()) -> LiveWeb:
        return cls(ApiSearch(search) if search is not None else None, PageFetcher(pages), blocked_domains)

    def is_blocked(self, url: str) -> bool:
        return is_blocked(url, self.blocked_domains)

    async def search(self, query: str, k: int = 5) -> list[SearchHit]:
        if self.engine is None:
            raise ToolError("no search backend in this environment (environment.search is not set)")
        try:
            hits = await self.engine.search(query, k + len(self.blocked_domains))
        except SearchError as exc:
            raise ToolError(str(exc)) from None
        return [h for h in hits if not self.is_blocked(h.url)][:k]

    async def read(self, url: str) -> str | None:
        if urlparse(url.strip()).scheme not in ("http", "https"):
            return None  # keywords: page_reader searches them and reads the best hit
        try:
            return await self.fetcher.fetch(url.strip())
        except FetchError as exc:
            raise ToolError(str(exc)) from None

    async def aclose(self) -> None:
        if self.engine is not None:
            await self.engine.aclose()
        await self.fetcher.aclose()

"""The real page reader: fetch a URL with httpx (size, time and content-type limits) and extract its readable text
with trafilatura; answers are cached per URL (in memory, and on disk when a cache folder is given).

Limits: `max_bytes` (the body is streamed and cut there), `timeout_s` (connect + read), content types (HTML/XHTML and
plain text; anything else is refused with its type), at most `max_redirects` redirects, http(s) only. A blocked
URL (the environment's block list, checked again after redirects) is never fetched.

    python -m omnidecision.tools.page_fetch https://example.org/
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sys
from collections import OrderedDict
from pathlib import Path
from urllib.parse import urlparse

import httpx
from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")


class FetchError(RuntimeError):
    """A page that cannot be read: the message says why (status, type, size, block list, network)."""


class PageReaderSpec(BaseModel):
    """Limits of the live page reader (the `environment.pages` part of a recipe)."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(15.0, gt=0, description="connect + read timeout per page")
    max_bytes: int = Field(2_000_000, ge=1024, description="bytes of a page body read at most")
    max_redirects: int = Field(5, ge=0, description="redirects followed at most")
    max_concurrency: int = Field(8, ge=1, description="pages fetched at once")
    cache_dir: str | None = Field(None, description="folder for the extracted texts (None: memory only)")
    cache_entries: int = Field(512, ge=0, description="pages kept in memory")
    user_agent: str = Field("Mozilla/5.0 (compatible; omnidecision page_reader)", description="User-Agent header")


def extract_text(html: str, url: str | None = None) -> str:
    """The readable text of an HTML page (title first, main content, no navigation or boilerplate)."""
    import trafilatura

    text = trafilatura.extract(html, url=url, include_comments=False, include_tables=True, favor_recall=True)
    meta = trafilatura.extract_metadata(html, default_url=url)
    title = (meta.title or "").strip() if meta is not None else ""
    body = (text or "").strip()
    if title and not body.startswith(title):
        body = f"{title}\n\n{body}" if body else title
    return body


class PageFetcher:
    """`await fetch(url)` → the page's text (see the module docstring). `is_blocked(url)` comes from the
    environment (its block list); a blocked URL, or a redirect onto one, raises `FetchError`."""

    def __init__(self, spec: PageReaderSpec | None = None, is_blocked=None,  # type: ignore[no-untyped-def]
                 client: httpx.AsyncClient | None = None) -> None:
        self.spec = spec or PageReaderSpec()
        self.is_blocked = is_blocked or (lambda url: False)
        self._client = client
        self._semaphore: asyncio.Semaphore | None = None
        self._memory: OrderedDict[str, str] = OrderedDict()
        self.cache_dir = Path(self.spec.cache_dir) if self.spec.cache_dir else None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.spec.timeout_s, follow_redirects=False,
                                             headers={"User-Agent": self.spec.user_agent,
                                                      "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9"})
        return self._client

    # -- cache ------------------------------------------------------------------------------------------------
    def _disk_path(self, url: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:32]}.json"

    def cached(self, url: str) -> str | None:
        if url in self._memory:
            self._memory.move_to_end(url)
            return self._memory[url]
        path = self._disk_path(url)
        if path is not None and path.is_file():
            try:
                text = json.loads(path.read_text("utf-8"))["text"]
            except (OSError, ValueError, KeyError):
                return None
            self._remember(url, text)
            return text
        return None

    def _remember(self, url: str, text: str) -> None:
        if self.spec.cache_entries:
            self._memory[url] = text
            self._memory.move_to_end(url)
            while len(self._memory) > self.spec.cache_entries:
                self._memory.popitem(last=False)

    def _store(self, url: str, text: str) -> None:
        self._remember(url, text)
        path = self._disk_path(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"url": url, "text": text}, ensure_ascii=False), "utf-8")
            tmp.replace(path)

    # -- fetching ---------------------------------------------------------------------------------------------
    async def fetch(self, url: str) -> str:
        """The text of `url`, from the cache or fetched and extracted now."""
        if urlparse(url).scheme not in ("http", "https"):
            raise FetchError(f"url: {url!r} is not an http(s) URL")
        if self.is_blocked(url):
            raise FetchError(f"url: {url} is blocked in this environment")
        hit = self.cached(url)
        if hit is not None:
            return hit
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.spec.max_concurrency)
        async with self._semaphore:
            final, ctype, body = await self._get(url)
        if ctype == "text/plain":
            text = body.decode("utf-8", errors="replace").strip()
        else:
            text = await asyncio.to_thread(extract_text, body.decode("utf-8", errors="replace"), final)
        if not text:
            raise FetchError(f"{url}: no readable text on the page")
        self._store(url, text)
        return text

    async def _get(self, url: str) -> tuple[str, str, bytes]:
        current = url
        for _ in range(self.spec.max_redirects + 1):
            try:
                async with self.client.stream("GET", current) as response:
                    if response.is_redirect:
                        target = str(response.url.join(response.headers.get("location", "")))
                        if self.is_blocked(target):
                            raise FetchError(f"{url}: redirects to {target}, which is blocked in this environment")
                        current = target
                        continue
                    if response.status_code >= 400:
                        raise FetchError(f"{current}: HTTP {response.status_code}")
                    ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
                    if ctype not in TEXT_TYPES:
                        raise FetchError(f"{current}: content type {ctype or 'unknown'!r} is not a readable page "
                                         f"(accepted: {', '.join(TEXT_TYPES)})")
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) >= self.spec.max_bytes:  # a page past the cap is read up to it
                            logger.info("%s: body cut at %d bytes", current, self.spec.max_bytes)
                            del body[self.spec.max_bytes:]
                            break
                    return str(response.url), ctype, bytes(body)
            except httpx.TimeoutException as exc:
                raise FetchError(f"{current}: no answer within {self.spec.timeout_s:g}s") from exc
            except httpx.HTTPError as exc:
                raise FetchError(f"{current}: {type(exc).__name__}: {exc}") from exc
        raise FetchError(f"{url}: more than {self.spec.max_redirects} redirects")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


if __name__ == "__main__":
    print(asyncio.run(PageFetcher().fetch(sys.argv[1]))[:3000])

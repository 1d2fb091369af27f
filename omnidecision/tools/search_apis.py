"""Real web search backends behind one small interface: `ApiSearch(spec).search(query, k) -> list[SearchHit]`.

Kinds (`SearchSpec.kind`):
- "searxng": a SearxNG instance's JSON API (`GET {base_url}/search?q=…&format=json`; self-hostable, no key; the
  instance must list `json` under `search.formats` in its settings.yml);
- "tavily": `POST https://api.tavily.com/search` with `Authorization: Bearer <key>`;
- "brave": `GET https://api.search.brave.com/res/v1/web/search` with `X-Subscription-Token: <key>`;
- "serper": `POST https://google.serper.dev/search` with `X-API-KEY: <key>`.

Each kind has a pure parser (`parse_searxng`, …) from the API's JSON reply to `SearchHit`s: tests feed them
recordings of each API's response format (tests/data/web/). Requests go through httpx with tenacity retries on
connection errors, timeouts, 429 and 5xx, a concurrency cap, and a clear `SearchError` naming the backend, the URL
and the status otherwise. Keys come from the environment variable the spec names, never from the recipe.

    python -m omnidecision.tools.search_apis searxng http://127.0.0.1:8888 "year the bridge opened"
"""

from __future__ import annotations

import asyncio
import html
import logging
import os
import re
import sys
from collections.abc import Callable
from typing import Any, Literal

import httpx
from pydantic import ConfigDict, Field
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from omnidecision.protocol.secrets import EndpointSecrets, redact, secrets_from_env
from omnidecision.tools.base import SearchHit

logger = logging.getLogger(__name__)

_TAG = re.compile(r"<[^>]+>")
SearchKind = Literal["searxng", "tavily", "brave", "serper"]
DEFAULT_URLS: dict[str, str] = {
    "tavily": "https://api.tavily.com",
    "brave": "https://api.search.brave.com",
    "serper": "https://google.serper.dev",
}
KEY_ENVS: dict[str, str] = {"tavily": "TAVILY_API_KEY", "brave": "BRAVE_API_KEY", "serper": "SERPER_API_KEY"}


class SearchError(RuntimeError):
    """A search backend could not answer (after its retries); the message names the backend and the reason."""


class SearchSpec(EndpointSecrets):
    """One search backend of a live environment (the `environment.search` part of a recipe)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # a refused key is never echoed

    kind: SearchKind = Field(..., description="searxng | tavily | brave | serper")
    base_url: str | None = Field(None, description="API root (searxng: the instance's URL; others: their "
                                 "default); no credential in it (userinfo, ?api_key=, ?token=, ...: refused; the "
                                 "key goes in api_key_env)")
    api_key_env: str | None = Field(None, description="env var holding the key (default per kind; searxng: none)")
    timeout_s: float = Field(20.0, gt=0, description="per request")
    max_retries: int = Field(3, ge=0, description="retries on connection errors, timeouts, 429 and 5xx")
    max_concurrency: int = Field(8, ge=1, description="requests in flight at once")
    options: dict[str, Any] = Field(default_factory=dict, description="extra request parameters of the API")


    def url(self) -> str | None:
        return (self.base_url or DEFAULT_URLS.get(self.kind) or "").rstrip("/") or None

    def key_env(self) -> str | None:
        return self.api_key_env or KEY_ENVS.get(self.kind)

    def problems(self) -> list[str]:
        """What is missing before this backend can answer (an empty list: nothing)."""
        out = []
        if self.url() is None:
            out.append(f"search ({self.kind}): base_url is not set (the URL of the {self.kind} instance)")
        env = self.key_env()
        if env and not os.environ.get(env):
            out.append(f"search ({self.kind}): environment variable {env} (the API key) is not set")
        return out


# ---------------------------------------------------------------- parsers: one per API reply format


def _hits(items: Any, url_key: str, title_key: str, text_key: str, score: Callable[[int, dict], float],
          where: str) -> list[SearchHit]:
    if not isinstance(items, list):
        raise SearchError(f"{where}: expected a list of results, got {type(items).__name__}")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not item.get(url_key):
            continue  # answers/infoboxes mixed into a list, or a result without a link: nothing to read
        text = html.unescape(_TAG.sub("", str(item.get(text_key) or "")))  # Brave marks matches with <strong>
        out.append(SearchHit(url=str(item[url_key]), title=html.unescape(_TAG.sub("", str(item.get(title_key) or ""))),
                             snippet=" ".join(text.split()), score=score(i, item)))
    return out


def _rank_score(i: int, _item: dict) -> float:
    return round(1.0 / (i + 1), 4)  # the API's own order, as a decreasing score


def _api_score(i: int, item: dict) -> float:
    """The API's own `score` when it gives a number, else the rank score."""
    score = item.get("score")
    return float(score) if isinstance(score, int | float) else _rank_score(i, item)


def parse_searxng(data: Any) -> list[SearchHit]:
    """SearxNG `format=json`: `results[]` with url, title, content (and engine, score, …)."""
    if not isinstance(data, dict):
        raise SearchError(f"searxng: expected a JSON object, got {type(data).__name__}")
    return _hits(data.get("results", []), "url", "title", "content", _api_score, "searxng: results")


def parse_tavily(data: Any) -> list[SearchHit]:
    """Tavily `/search`: `results[]` with title, url, content, score."""
    if not isinstance(data, dict):
        raise SearchError(f"tavily: expected a JSON object, got {type(data).__name__}")
    return _hits(data.get("results", []), "url", "title", "content", _api_score, "tavily: results")


def parse_brave(data: Any) -> list[SearchHit]:
    """Brave web search: `web.results[]` with title, url, description (no `web` key: no web results)."""
    if not isinstance(data, dict):
        raise SearchError(f"brave: expected a JSON object, got {type(data).__name__}")
    web = data.get("web") or {}
    return _hits(web.get("results", []), "url", "title", "description", _rank_score, "brave: web.results")


def parse_serper(data: Any) -> list[SearchHit]:
    """Serper (Google): `organic[]` with title, link, snippet, position."""
    if not isinstance(data, dict):
        raise SearchError(f"serper: expected a JSON object, got {type(data).__name__}")
    return _hits(data.get("organic", []), "link", "title", "snippet",
                 lambda i, r: round(1.0 / float(r["position"]), 4) if isinstance(r.get("position"), int)
                 and r["position"] > 0 else _rank_score(i, r), "serper: organic")


PARSERS: dict[str, Callable[[Any], list[SearchHit]]] = {
    "searxng": parse_searxng, "tavily": parse_tavily, "brave": parse_brave, "serper": parse_serper,
}


# ---------------------------------------------------------------- the client


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):  # connection refused/reset, timeouts
        return True
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return False


def build_request(spec: SearchSpec, query: str, k: int) -> dict[str, Any]:
    """The httpx request (method, url, params/json, headers) for one query, per the API's documented shape."""
    base, env = spec.url(), spec.key_env()
    key = os.environ.get(env, "") if env else ""
    if spec.kind == "searxng":
        params = {"q": query, "format": "json", **spec.options}
        return {"method": "GET", "url": f"{base}/search", "params": params, "headers": {}}
    if spec.kind == "tavily":
        body = {"query": query, "max_results": k, **spec.options}
        return {"method": "POST", "url": f"{base}/search", "json": body, "headers": {"Authorization": f"Bearer {key}"}}
    if spec.kind == "brave":
        params = {"q": query, "count": min(k, 20), **spec.options}
        return {"method": "GET", "url": f"{base}/res/v1/web/search", "params": params,
                "headers": {"X-Subscription-Token": key, "Accept": "application/json"}}
    body = {"q": query, "num": k, **spec.options}
    return {"method": "POST", "url": f"{base}/search", "json": body, "headers": {"X-API-KEY": key}}


class ApiSearch:
    """`search(query, k)` against one real search API (see the module docstring)."""

    def __init__(self, spec: SearchSpec, client: httpx.AsyncClient | None = None, retry_wait_s: float = 0.5) -> None:
        missing = spec.problems()
        if missing:
            raise SearchError("; ".join(missing))
        self.spec = spec
        self._client = client
        self._semaphore: asyncio.Semaphore | None = None
        self.retry_wait_s = retry_wait_s

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.spec.timeout_s, follow_redirects=True,
                                             headers={"User-Agent": "omnidecision/0.1 (+web_search tool)"})
        return self._client

    async def search(self, query: str, k: int = 5) -> list[SearchHit]:
        if self._semaphore is None:  # created inside the running loop
            self._semaphore = asyncio.Semaphore(self.spec.max_concurrency)
        request = build_request(self.spec, query, k)
        try:
            async with self._semaphore:
                async for attempt in AsyncRetrying(stop=stop_after_attempt(self.spec.max_retries + 1),
                                                   wait=wait_exponential(multiplier=self.retry_wait_s, max=8.0),
                                                   retry=retry_if_exception(_retryable), reraise=True):
                    with attempt:
                        response = await self.client.request(**request)
                        response.raise_for_status()
        except httpx.HTTPStatusError as exc:  # the reply's text scrubbed of the key (a server may echo it)
            raise SearchError(redact(f"{self.spec.kind} search at {request['url']}: HTTP "
                                     f"{exc.response.status_code}: {exc.response.text[:200]}",
                                     secrets_from_env([self.spec.key_env()]))) from exc
        except httpx.HTTPError as exc:
            raise SearchError(redact(f"{self.spec.kind} search at {request['url']}: {type(exc).__name__}: {exc}",
                                     secrets_from_env([self.spec.key_env()]))) from exc
        try:
            data = response.json()
        except ValueError as exc:
            raise SearchError(f"{self.spec.kind} search at {request['url']}: the reply is not JSON "
                              f"({response.headers.get('content-type', '?')})") from exc
        return PARSERS[self.spec.kind](data)[:k]

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


if __name__ == "__main__":
    kind, url, *words = sys.argv[1:]
    engine = ApiSearch(SearchSpec(kind=kind, base_url=url))  # type: ignore[arg-type]
    for hit in asyncio.run(engine.search(" ".join(words), 5)):
        print(f"{hit.score:6.3f}  {hit.url}\n        {hit.title}: {hit.snippet[:150]}")

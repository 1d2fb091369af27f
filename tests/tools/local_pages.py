"""A local HTTP server on 127.0.0.1 for the tests (`serving`, any handler: the page reader's pages, a stub chat
endpoint), and what the page reader's tests share: the handler (one page, redirects, every request counted), the
module's `port` fixture, the patched resolver, one read."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from omnidecision.tools import page_fetch
from omnidecision.tools.page_fetch import PageFetcher


class PageHandler(BaseHTTPRequestHandler):
    """Serves `page` at every path but those in `redirects()` (path -> Location: 302), and records each request in
    `hits` (path, Host header). Subclasses set `page`, `hits` and `redirects`."""

    page: bytes = b"<html><body><p>page</p></body></html>"
    hits: list[tuple[str, str]] = []

    def redirects(self) -> dict[str, str]:
        return {}

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.hits.append((self.path, self.headers.get("Host", "")))
        location = self.redirects().get(self.path)
        self.send_response(302 if location else 200)
        if location:
            self.send_header("Location", location)
        else:
            self.send_header("Content-Type", "text/html")
        body = b"" if location else self.page
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """The handler served on a free port of 127.0.0.1 (the port), shut down afterwards."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def port_fixture(handler: type[BaseHTTPRequestHandler]) -> Any:
    """A module-scoped fixture `port`: `handler` served on 127.0.0.1 for the module's tests (`port =
    port_fixture(Handler)` in the test module)."""

    @pytest.fixture(scope="module")
    def port() -> Iterator[int]:
        with serving(handler) as p:
            yield p

    return port


def patch_resolver(monkeypatch: pytest.MonkeyPatch, table: Mapping[str, list[str]]) -> list[str]:
    """Patch the page reader's one resolver (`page_fetch.resolve_host`): a name of `table` resolves to its
    addresses, any other is no such host (no DNS, no network). Returns the list each looked-up name is appended to."""
    lookups: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        if host not in table:
            raise OSError(f"no such host {host}")
        return table[host]

    monkeypatch.setattr(page_fetch, "resolve_host", resolve)
    return lookups


def read_once(url: str, fetcher: PageFetcher | None = None) -> str:
    """The page text `fetcher` (default: a fresh one) reads at `url`; the fetcher is closed afterwards."""

    async def go() -> str:
        f = fetcher or PageFetcher()
        try:
            return await f.fetch(url)
        finally:
            await f.aclose()

    return asyncio.run(go())

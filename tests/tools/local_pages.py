"""A local HTTP server on 127.0.0.1 for the page reader's tests: one page, redirects, and every request counted."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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

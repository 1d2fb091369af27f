"""The live web tools: the page reader fetches and extracts real HTML from a local HTTP server this test starts
(httpx + trafilatura, no stub of the reader); the search backends parse recordings of each API's reply format
(tests/data/web/README.md) and the SearxNG client talks to a local server serving one (a first 503 injects a fault);
the block list applies per host and path prefix as written (github.com is not blocked wholesale)."""

from __future__ import annotations

import asyncio
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from omnidecision.tasks.loaders.omnigaia import BLOCKED_DOMAINS
from omnidecision.tasks.schema import Task
from omnidecision.tools.page_fetch import ALLOW_ENV, FetchError, PageFetcher, PageReaderSpec
from omnidecision.tools.registry import build_tool_context, run_tool
from omnidecision.tools.search import is_blocked
from omnidecision.tools.search_apis import (
    PARSERS,
    ApiSearch,
    SearchError,
    SearchSpec,
    build_request,
    parse_searxng,
)
from omnidecision.tools.web_live import LiveWeb

from .local_pages import read_once as fetch
from .local_pages import serving

WEB = Path(__file__).resolve().parents[1] / "data" / "web"

ARTICLE = """<!doctype html><html><head><title>The Harbour Bridge</title>
<script>var tracking = "SHOULD-NOT-APPEAR";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About us</a> | <a href="/shop">Shop</a></nav>
<article><h1>The Harbour Bridge</h1>
<p>The Harbour Bridge was opened to traffic in 1932 after eight years of construction.</p>
<p>Its steel arch spans 503 metres and carries eight lanes of road traffic and two railway lines.</p>
<p>Local engineers still call it the coat hanger because of its distinctive arch shape.</p>
</article>
<footer>Copyright 2024 Example Harbour Trust. All rights reserved.</footer></body></html>"""


class Site(BaseHTTPRequestHandler):
    """A small real website: an article, a redirect, a redirect onto a blocked host, a PDF, plain text, a 404, a
    large page, and a SearxNG endpoint serving the recorded reply (503 on its first call)."""

    hits: dict[str, int] = {}
    searx_calls: list[dict] = []

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _send(self, code: int, ctype: str, body: bytes, headers: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        Site.hits[url.path] = Site.hits.get(url.path, 0) + 1
        if url.path == "/bridge.html":
            self._send(200, "text/html; charset=utf-8", ARTICLE.encode())
        elif url.path == "/old-bridge":
            self._send(301, "text/html", b"", {"Location": "/bridge.html"})
        elif url.path == "/to-hf":
            self._send(302, "text/html", b"", {"Location": "https://huggingface.co/datasets/RUC-NLPIR/OmniGAIA"})
        elif url.path == "/report.pdf":
            self._send(200, "application/pdf", b"%PDF-1.4 not a page")
        elif url.path == "/notes.txt":
            self._send(200, "text/plain; charset=utf-8", b"Opening day: 19 March 1932.")
        elif url.path == "/big.html":
            para = "<p>" + "The bridge is painted grey and repainted every few years. " * 40 + "</p>"
            self._send(200, "text/html", ("<html><body><article>" + para * 200 + "</article></body></html>").encode())
        elif url.path == "/search":
            Site.searx_calls.append(parse_qs(url.query))
            if len(Site.searx_calls) == 1:  # fault injection: the instance is briefly overloaded
                self._send(503, "text/plain", b"busy")
            else:
                self._send(200, "application/json", (WEB / "searxng.json").read_bytes())
        else:
            self._send(404, "text/html", b"<html><body>not here</body></html>")


@pytest.fixture(scope="module")
def site():
    with serving(Site) as port, pytest.MonkeyPatch.context() as mp:  # the reader refuses loopback unless allowed
        mp.setenv(ALLOW_ENV, f"127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------- the page reader over real HTTP


def test_page_reader_extracts_the_article_and_drops_boilerplate(site):
    text = fetch(f"{site}/bridge.html")
    assert text.startswith("The Harbour Bridge")
    assert "opened to traffic in 1932" in text and "503 metres" in text
    assert "SHOULD-NOT-APPEAR" not in text and "About us" not in text  # script and navigation are gone


def test_page_reader_follows_redirects_and_reads_plain_text(site):
    assert "opened to traffic in 1932" in fetch(f"{site}/old-bridge")
    assert fetch(f"{site}/notes.txt") == "Opening day: 19 March 1932."


@pytest.mark.parametrize(("path", "pattern"), [
    ("/report.pdf", "content type 'application/pdf' is not a readable page"),
    ("/missing.html", "HTTP 404"),
    ("/to-hf", "redirects to https://huggingface.co/datasets/RUC-NLPIR/OmniGAIA, which is blocked"),
])
def test_page_reader_refusals_say_why(site, path, pattern):
    fetcher = PageFetcher(is_blocked=lambda u: is_blocked(u, BLOCKED_DOMAINS))
    with pytest.raises(FetchError, match=pattern.replace("(", r"\(").replace(".", r"\.")):
        fetch(f"{site}{path}", fetcher)


def test_page_reader_size_cap_and_cache(site, tmp_path):
    spec = PageReaderSpec(max_bytes=4096, cache_dir=str(tmp_path / "cache"))
    before = Site.hits.get("/big.html", 0)
    text = fetch(f"{site}/big.html", PageFetcher(spec))
    assert 0 < len(text) < 4096  # read up to the cap, not the 500 kB page
    again = fetch(f"{site}/big.html", PageFetcher(spec))  # a new reader: the disk cache answers
    assert again == text and Site.hits["/big.html"] == before + 1
    with pytest.raises(FetchError, match="not an http"):
        fetch("file:///etc/passwd")


def test_page_reader_tool_reads_a_live_page_with_its_source(site):
    web = LiveWeb(None, PageFetcher(), BLOCKED_DOMAINS)
    task = Task(id="t", question="When did the bridge open?", blocked_domains=list(BLOCKED_DOMAINS))
    ctx = build_tool_context(task, {"search": web})
    obs = asyncio.run(run_tool("page_reader", {"url": f"{site}/bridge.html"}, ctx))
    assert obs.ok, obs.error
    assert "1932" in obs.text and obs.source.url == f"{site}/bridge.html" and obs.source.tool == "page_reader"
    obs = asyncio.run(run_tool("page_reader", {"url": f"{site}/report.pdf"}, ctx))
    assert not obs.ok and "application/pdf" in obs.error
    obs = asyncio.run(run_tool("page_reader", {"url": "https://hf.co/datasets/x"}, ctx))
    assert not obs.ok and "blocked" in obs.error


# ---------------------------------------------------------------- search APIs: recorded replies


@pytest.mark.parametrize("kind", ["searxng", "tavily", "brave", "serper"])
def test_parsers_read_each_apis_recorded_reply(kind):
    hits = PARSERS[kind](json.loads((WEB / f"{kind}.json").read_text("utf-8")))
    assert len(hits) == 3
    first = hits[0]
    assert first.url == "https://www.example-ski.com/news/marker-k2-binding-partnership"
    assert first.title == "Marker and K2 extend their binding partnership"
    assert first.snippet == "K2 skis ship with Marker bindings as part of the integrated system range."
    assert hits[0].score > hits[1].score > hits[2].score  # the API's ranking is kept
    assert hits[2].url == "https://github.com/marker-dev/binding-catalogue"


def test_parsers_reject_a_reply_of_the_wrong_shape():
    with pytest.raises(SearchError, match="searxng: expected a JSON object"):
        parse_searxng(["not", "an", "object"])
    with pytest.raises(SearchError, match=r"searxng: results: expected a list"):
        parse_searxng({"results": {"url": "x"}})


def test_block_list_applies_as_written_github_is_not_blocked_wholesale():
    assert BLOCKED_DOMAINS == ["huggingface.co", "hf.co", "github.com/RUC-NLPIR/OmniGAIA"]
    blocked = [u for u in ("https://huggingface.co/datasets/RUC-NLPIR/OmniGAIA", "https://hf.co/x",
                           "https://github.com/RUC-NLPIR/OmniGAIA/issues/1", "https://github.com/marker-dev/x",
                           "https://github.com/RUC-NLPIR/other-project", "https://docs.github.com/en")
               if is_blocked(u, BLOCKED_DOMAINS)]
    assert blocked == ["https://huggingface.co/datasets/RUC-NLPIR/OmniGAIA", "https://hf.co/x",
                       "https://github.com/RUC-NLPIR/OmniGAIA/issues/1"]


def test_web_search_over_a_local_searxng_retries_and_filters_blocked_hits(site):
    Site.searx_calls.clear()
    spec = SearchSpec(kind="searxng", base_url=site, max_retries=2)
    web = LiveWeb(ApiSearch(spec, retry_wait_s=0.01), PageFetcher(), BLOCKED_DOMAINS)
    task = Task(id="t", question="?", blocked_domains=list(BLOCKED_DOMAINS))
    obs = asyncio.run(run_tool("web_search", {"query": "Marker ski bindings K2 partnership", "k": 5},
                               build_tool_context(task, {"search": web})))
    assert obs.ok, obs.error
    assert [h["url"] for h in obs.fields["hits"]] == ["https://www.example-ski.com/news/marker-k2-binding-partnership",
                                                     "https://github.com/marker-dev/binding-catalogue"]
    assert len(Site.searx_calls) == 2  # the 503 was retried
    assert Site.searx_calls[-1] == {"q": ["Marker ski bindings K2 partnership"], "format": ["json"]}


def test_search_failure_becomes_a_clear_observation(site):
    spec = SearchSpec(kind="searxng", base_url=f"{site}/nowhere", max_retries=0)
    web = LiveWeb(ApiSearch(spec), PageFetcher())
    obs = asyncio.run(run_tool("web_search", {"query": "x"}, build_tool_context(Task(id="t", question="?"),
                                                                                 {"search": web})))
    assert not obs.ok and "searxng search at" in obs.error and "HTTP 404" in obs.error


def test_keyed_requests_carry_the_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
    monkeypatch.setenv("BRAVE_API_KEY", "brave-test")
    monkeypatch.setenv("SERPER_API_KEY", "serper-test")
    tav = build_request(SearchSpec(kind="tavily"), "q1", 4)
    assert (tav["method"], tav["url"], tav["json"]) == ("POST", "https://api.tavily.com/search",
                                                         {"query": "q1", "max_results": 4})
    assert tav["headers"] == {"Authorization": "Bearer tvly-test"}
    brave = build_request(SearchSpec(kind="brave"), "q2", 30)
    assert brave["url"].endswith("/res/v1/web/search") and brave["params"] == {"q": "q2", "count": 20}
    assert brave["headers"]["X-Subscription-Token"] == "brave-test"
    serper = build_request(SearchSpec(kind="serper"), "q3", 5)
    assert serper["json"] == {"q": "q3", "num": 5} and serper["headers"] == {"X-API-KEY": "serper-test"}
    monkeypatch.delenv("SERPER_API_KEY")
    with pytest.raises(SearchError, match="environment variable SERPER_API_KEY"):
        ApiSearch(SearchSpec(kind="serper"))
    with pytest.raises(SearchError, match="base_url is not set"):
        ApiSearch(SearchSpec(kind="searxng"))

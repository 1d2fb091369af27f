"""The benchmark's block list holds against every spelling of a blocked page (issue 55): each spelling, and an
allowed page redirecting onto a blocked one, goes through the page reader (the `page_reader` tool over `LiveWeb`,
and the fetcher on its own) against a real local HTTP server configured with the OmniGAIA block list; the server
counts what reaches it. No blocked spelling gets there; the canonical spellings of allowed pages still do, and the
server sees the normal form the block list judged.

The benchmark's hosts are mapped onto the local server by patching the reader's one resolver
(`page_fetch.resolve_host`) and allowing those names on the server's port only: no DNS, no network."""

from __future__ import annotations

import asyncio

import pytest

from omnidecision.tasks.loaders.omnigaia import BLOCKED_DOMAINS
from omnidecision.tasks.schema import Task
from omnidecision.tools.page_fetch import ALLOW_ENV, FetchError, PageFetcher, PageReaderSpec
from omnidecision.tools.registry import build_tool_context, run_tool
from omnidecision.tools.search import is_blocked
from omnidecision.tools.web_live import LiveWeb

from .local_pages import PageHandler, patch_resolver, port_fixture, read_once

PAGE = b"<html><head><title>Page</title></head><body><article><p>The bridge opened in 1932.</p></article></body>"
HOSTS = ("huggingface.co", "hf.co", "github.com", "www.github.com", "raw.example.org")
REPO = "RUC-NLPIR/OmniGAIA/blob/main/test_metadata.json"

# every spelling of issue 55, then a few more of the same kinds ({p}: the server's port)
BLOCKED_SPELLINGS = [
    "http://huggingface.co.:{p}/datasets/RUC-NLPIR/OmniGAIA",
    "http://hf.co.:{p}/datasets/RUC-NLPIR/OmniGAIA",
    "http://huggingface\u3002co:{p}/datasets/RUC-NLPIR/OmniGAIA",
    "http://huggingface\uff0eco:{p}/datasets/RUC-NLPIR/OmniGAIA",
    "http://hf\uff61co:{p}/datasets/RUC-NLPIR/OmniGAIA",
    "http://github.com:{p}/RUC-NLPIR/x/../OmniGAIA/blob/main/test_metadata.json",
    "http://github.com:{p}/RUC-NLPIR/./OmniGAIA/blob/main/test_metadata.json",
    "http://github.com:{p}//RUC-NLPIR/OmniGAIA/blob/main/test_metadata.json",
    "http://github.com:{p}/RUC-NLPIR/%4FmniGAIA/blob/main/test_metadata.json",
    "http://github.com:{p}/RUC-NLPIR%2FOmniGAIA/blob/main/test_metadata.json",
    "http://github.com.:{p}/RUC-NLPIR/OmniGAIA/blob/main/test_metadata.json",
    # more of the same kinds
    "HTTP://WWW.GitHub.COM:{p}/ruc-nlpir/omnigaia",
    "http://github.com:{p}\\RUC-NLPIR\\OmniGAIA",
    "http://github.com:{p}/RUC-NLPIR/%2E%2E/RUC-NLPIR/OmniGAIA",
    "http://github.com:{p}/RUC-NLPIR/x%2F..%2FOmniGAIA",
    "http://github.com:{p}/RUC-NLPIR%252FOmniGAIA",
    "http://github.com:{p}/RUC-NLPIR/OmniGAIA/x%2F..%2F..",
    "http://hugging%66ace.co:{p}/datasets",
    "http://\uff48\uff46.co:{p}/x",
    "http://hf.co..:{p}/x",
    "http://hugging\tface.co:{p}/x",
    "http://user@hf.co:{p}/x",
]
# allowed pages redirecting onto a blocked one: the redirecting page is the only request that arrives
REDIRECTS = [
    "/to-hf",  # an absolute location on a blocked host
    "/to-repo-dotted",  # a relative location, another spelling of the repository
    "/to-repo-backslash",  # backslashes, which browsers read as slashes
]
# allowed pages: (spelling, the path the server must see)
ALLOWED = [
    ("http://github.com:{p}/marker-dev/binding-catalogue", "/marker-dev/binding-catalogue"),
    ("http://github.com:{p}/RUC-NLPIR/other-project", "/RUC-NLPIR/other-project"),
    ("http://github.com:{p}/RUC-NLPIR/OmniGAIA-extra", "/RUC-NLPIR/OmniGAIA-extra"),
    ("http://raw.example.org:{p}/RUC-NLPIR/OmniGAIA", "/RUC-NLPIR/OmniGAIA"),  # the same path on another host
    ("http://github.com.:{p}/a/./b/../c//d/%7Euser", "/a/c/d/~user"),  # what is fetched is the normal form
]


class Counting(PageHandler):
    page = PAGE
    hits: list[tuple[str, str]] = []  # (path, Host header) of every request that reached the server

    def redirects(self) -> dict[str, str]:
        port = self.server.server_address[1]
        return {"/to-hf": f"http://huggingface.co:{port}/datasets/RUC-NLPIR/OmniGAIA",
                "/to-repo-dotted": "/RUC-NLPIR/x/../OmniGAIA", "/to-repo-backslash": "\\RUC-NLPIR\\OmniGAIA"}


port = port_fixture(Counting)


@pytest.fixture(autouse=True)
def benchmark_hosts_on_the_local_server(monkeypatch):
    patch_resolver(monkeypatch, dict.fromkeys(HOSTS, ["127.0.0.1"]))
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    Counting.hits.clear()


def reader(port: int) -> PageFetcher:
    return PageFetcher(PageReaderSpec(allow=[f"{h}:{port}" for h in HOSTS]))


def read_with_tool(url: str, port: int):
    web = LiveWeb(None, reader(port), BLOCKED_DOMAINS)
    ctx = build_tool_context(Task(id="t", question="q", blocked_domains=list(BLOCKED_DOMAINS)), {"search": web})

    async def go():
        try:
            return await run_tool("page_reader", {"url": url}, ctx)
        finally:
            await web.aclose()

    return asyncio.run(go())


def read_with_fetcher(url: str, port: int) -> str:
    fetcher = reader(port)
    fetcher.is_blocked = lambda u: is_blocked(u, BLOCKED_DOMAINS)
    return read_once(url, fetcher)


def refused_twice(url: str, port: int) -> str:
    """Read `url` with the tool, then with the fetcher on its own (no tool check before it): both refuse it as
    blocked; the tool's error is returned."""
    obs = read_with_tool(url, port)
    assert not obs.ok and "blocked in this environment" in obs.error, obs.error
    with pytest.raises(FetchError, match="blocked in this environment"):
        read_with_fetcher(url, port)
    return obs.error


@pytest.mark.parametrize("spelling", BLOCKED_SPELLINGS)
def test_no_spelling_of_a_blocked_page_reaches_the_server(port, spelling):
    refused_twice(spelling.format(p=port), port)
    assert Counting.hits == []


@pytest.mark.parametrize("path", REDIRECTS)
def test_a_redirect_onto_a_blocked_page_is_refused_before_it_is_followed(port, path):
    error = refused_twice(f"http://github.com:{port}{path}", port)
    assert "redirects to" in error
    assert Counting.hits == [(path, f"github.com:{port}")] * 2  # the allowed page only, once per reader


@pytest.mark.parametrize(("spelling", "path"), ALLOWED)
def test_allowed_pages_still_reach_the_server_in_their_normal_form(port, spelling, path):
    url = spelling.format(p=port)
    obs = read_with_tool(url, port)
    assert obs.ok and "1932" in obs.text, obs.error
    assert "1932" in read_with_fetcher(url, port)
    host = url.split("//")[1].split(":")[0].rstrip(".")
    assert Counting.hits == [(path, f"{host}:{port}")] * 2  # the server saw exactly the form that was judged


def test_every_blocked_spelling_is_judged_blocked_and_its_canonical_neighbours_are_not():
    """The same list through the block list alone (no server): the issue's spellings are blocked, and the block
    list does not grow into what it should leave open (github.com, other repositories, look-alike names)."""
    for spelling in BLOCKED_SPELLINGS:
        assert is_blocked(spelling.format(p=80), BLOCKED_DOMAINS), spelling
    for spelling, _ in ALLOWED:
        assert not is_blocked(spelling.format(p=80), BLOCKED_DOMAINS), spelling
    for url in ("https://docs.github.com/en", "https://nothuggingface.co/x", "https://hf.com/x", "bridge opened 1932"):
        assert not is_blocked(url, BLOCKED_DOMAINS), url

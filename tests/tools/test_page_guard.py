"""Request forgery: the page reader refuses URLs whose host is (or resolves to) a loopback, private, link-local,
multicast or reserved address, on the first request and on every redirect, and connects to the address it checked.

A real local HTTP server counts what reached it (a refused URL must never get there); `httpx.MockTransport` records
what the reader would have sent where no server may be contacted (169.254.169.254, public addresses). The resolver
the reader uses (`page_fetch.resolve_host`) is patched for host names: no DNS, no network."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from omnidecision.tasks.schema import Task
from omnidecision.tools import page_fetch
from omnidecision.tools.page_fetch import ALLOW_ENV, FetchError, PageFetcher, PageReaderSpec, UrlGuard
from omnidecision.tools.registry import build_tool_context, run_tool
from omnidecision.tools.web_live import LiveWeb

from .local_pages import PageHandler, patch_resolver, port_fixture
from .local_pages import read_once as fetch

PAGE = b"<html><head><title>Harbour</title></head><body><article><p>The bridge opened in 1932.</p></article></body>"


class Local(PageHandler):
    page = PAGE
    hits: list[tuple[str, str]] = []  # (path, Host header)

    def redirects(self) -> dict[str, str]:  # an allowed host redirecting onto an internal address
        return {"/to-loopback": f"http://127.0.0.1:{self.server.server_address[1]}/page"}


port = port_fixture(Local)


@pytest.fixture(autouse=True)
def no_env_allow(monkeypatch):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    Local.hits.clear()


@pytest.fixture
def dns(monkeypatch):
    """Patch the reader's resolver: name -> addresses; records every lookup."""
    table: dict[str, list[str]] = {}
    return table, patch_resolver(monkeypatch, table)


def recording_client(sent: list[httpx.Request]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, headers={"Content-Type": "text/html"}, content=PAGE)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def refused_unsent(url: str, why: str) -> None:
    """The reader refuses `url` for `why` (a pattern) and sends no request anywhere."""
    sent: list[httpx.Request] = []
    with pytest.raises(FetchError, match=f"refused.*({why})"):
        fetch(url, PageFetcher(client=recording_client(sent)))
    assert sent == []


@pytest.mark.parametrize(("url", "why"), [
    ("http://127.0.0.1:{port}/page", "127.0.0.1 is a loopback address"),
    ("http://[::1]:{port}/page", "::1 is a loopback address"),
    ("http://169.254.169.254/latest/meta-data/iam/", "169.254.169.254 is a link-local address"),
    ("http://10.1.2.3/", "private"), ("http://[fd00::1]/", "private"), ("http://0.0.0.0:{port}/", "unspecified"),
    ("http://224.0.0.1/", "multicast"), ("http://240.0.0.1/", "reserved"), ("http://[::ffff:127.0.0.1]/", "loopback"),
])
def test_internal_addresses_are_refused_before_any_connection(port, url, why):
    sent: list[httpx.Request] = []
    with pytest.raises(FetchError, match=f"refused.*{why}") as info:
        fetch(url.format(port=port), PageFetcher(client=recording_client(sent)))
    assert sent == [] and Local.hits == []  # nothing was sent anywhere
    assert ALLOW_ENV in str(info.value)  # the refusal says how to allow it


def test_a_public_looking_name_resolving_to_loopback_is_refused(port, dns):
    table, lookups = dns
    table["news.example.com"] = ["127.0.0.1"]
    with pytest.raises(FetchError, match="news.example.com resolves to 127.0.0.1, which is a loopback address"):
        fetch(f"http://news.example.com:{port}/page", PageFetcher())
    table["mixed.example.com"] = ["93.184.216.34", "10.0.0.5"]  # one internal answer among public ones
    with pytest.raises(FetchError, match="resolves to 10.0.0.5, which is a private address"):
        fetch(f"http://mixed.example.com:{port}/page", PageFetcher())
    assert Local.hits == [] and lookups == ["news.example.com", "mixed.example.com"]


def test_the_connection_goes_to_the_checked_address_with_the_name_kept(dns):
    """DNS rebinding: one lookup per request, and the request goes to that address (Host header and TLS SNI keep the
    name), so a second answer pointing at an internal address is never asked for."""
    table, lookups = dns
    table["rebind.example"] = ["93.184.216.34"]
    sent: list[httpx.Request] = []
    assert "1932" in fetch("https://rebind.example/a?b=1", PageFetcher(client=recording_client(sent)))
    (req,) = sent
    assert (req.url.host, req.url.path, req.url.query) == ("93.184.216.34", "/a", b"b=1")
    assert req.headers["host"] == "rebind.example" and req.extensions["sni_hostname"] == "rebind.example"
    assert lookups == ["rebind.example"]


def test_an_allowed_local_host_is_fetched_and_its_redirect_to_loopback_refused(port, dns):
    table, _ = dns
    table["site.test"] = ["127.0.0.1"]
    fetcher = PageFetcher(PageReaderSpec(allow=[f"site.test:{port}"]))
    assert "1932" in fetch(f"http://site.test:{port}/page", fetcher)
    assert Local.hits == [("/page", f"site.test:{port}")]  # reached through the pinned address, Host kept
    with pytest.raises(FetchError, match=rf"redirects to http://127\.0\.0\.1:{port}/page: refused.*loopback"):
        fetch(f"http://site.test:{port}/to-loopback", PageFetcher(PageReaderSpec(allow=[f"site.test:{port}"])))
    assert [p for p, _ in Local.hits] == ["/page", "/to-loopback"]  # the redirect target was never requested


def test_networks_allowed_through_the_environment(port, monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, f"192.0.2.0/24, 127.0.0.0/8:{port}")
    assert "1932" in fetch(f"http://127.0.0.1:{port}/page", PageFetcher())
    with pytest.raises(FetchError, match="loopback"):  # ::1 is not in the allowed networks
        fetch(f"http://[::1]:{port}/page", PageFetcher())
    with pytest.raises(ValueError, match="'10.0.0.0/33' is neither a host name nor an address"):
        UrlGuard(["10.0.0.0/33"])


def test_the_page_reader_observation_says_why(port):
    web = LiveWeb(None, PageFetcher())
    ctx = build_tool_context(Task(id="t", question="q"), {"search": web})
    obs = asyncio.run(run_tool("page_reader", {"url": "http://169.254.169.254/latest/meta-data/"}, ctx))
    assert not obs.ok and "request forgery guard" in obs.error and "link-local" in obs.error
    assert Local.hits == []


# ---------------------------------------------------------------- wrapped addresses, special-purpose ranges, cache


@pytest.mark.parametrize(("host", "why"), [
    ("[2002:a9fe:a9fe::]", "6to4 address wrapping 169.254.169.254, a link-local"),  # the metadata service
    ("[2002:7f00:1::]", "6to4 address wrapping 127.0.0.1, a loopback"),
    ("[2002:0a00:0001::1]", "6to4 address wrapping 10.0.0.1, a private"),
    # Teredo 2001:0:SERVER:FLAGS:PORT:~CLIENT: client 127.0.0.1 (obfuscated 80ff:fffe), server public 65.54.227.120
    ("[2001:0:4136:e378:8000:63bf:80ff:fffe]", "Teredo client address wrapping 127.0.0.1, a loopback"),
    ("[64:ff9b::a9fe:a9fe]", "NAT64 address wrapping 169.254.169.254, a link-local"),
    ("[64:ff9b:1::1]", "NAT64 local-use|reserved"),
    ("[fec0::1]", "site-local"), ("[3fff::1]", "documentation"), ("[fc00::1]", "private|unique-local"),
    ("192.0.0.9", "IETF protocol assignments"), ("192.0.0.170", "private|IETF protocol assignments"),
    ("192.31.196.1", "AS112"), ("192.88.99.1", "6to4 relay anycast"), ("100.64.0.1", "carrier-grade NAT"),
    ("198.18.0.1", "private|benchmarking"), ("[2620:4f:8000::1]", "AS112"),
])
def test_wrapped_and_special_purpose_addresses_are_refused(host, why):
    refused_unsent(f"http://{host}/latest/meta-data/", why)


def test_a_name_resolving_to_a_6to4_wrapped_metadata_address_is_refused(dns):
    table, _ = dns
    table["v6.example.com"] = ["2002:a9fe:a9fe::1"]
    with pytest.raises(FetchError, match="resolves to 2002:a9fe:a9fe::1, which is a 6to4 address wrapping "
                                         "169.254.169.254"):
        fetch("http://v6.example.com/", PageFetcher())


def test_public_addresses_still_pass():
    from ipaddress import ip_address

    for text in ("93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "2002:808:808::1"):  # 6to4 of a public v4
        assert page_fetch.address_problem(ip_address(text)) is None, text


def test_the_cache_is_read_only_after_the_guard_admits_the_url(port, dns, tmp_path):
    """A page fetched under an allow entry and cached on disk is not served to a reader without that entry (the
    guard runs first, and the cache key covers the allow list); under the same allow list the cache answers."""
    table, _ = dns
    table["intranet.test"] = ["127.0.0.1"]
    url = f"http://intranet.test:{port}/page"
    cache = str(tmp_path / "cache")
    assert "1932" in fetch(url, PageFetcher(PageReaderSpec(allow=[f"intranet.test:{port}"], cache_dir=cache)))
    assert len(Local.hits) == 1 and len(list((tmp_path / "cache").glob("*.json"))) == 1
    with pytest.raises(FetchError, match="refused.*loopback"):  # no allow entry: refused, cache or not
        fetch(url, PageFetcher(PageReaderSpec(cache_dir=cache)))
    assert "1932" in fetch(url, PageFetcher(PageReaderSpec(allow=[f"intranet.test:{port}"], cache_dir=cache)))
    assert len(Local.hits) == 1  # the same policy: the cache answered, nothing fetched again
    # an entry written under one allow list is not found under another that also admits the URL
    other = PageFetcher(PageReaderSpec(allow=[f"intranet.test:{port}", f"127.0.0.0/8:{port}"], cache_dir=cache))
    assert other.cached(url) is None
    assert "1932" in fetch(url, other) and len(Local.hits) == 2


# ---------------------------------------------------------------- translated addresses, allow-list ports


@pytest.mark.parametrize(("host", "address"), [
    ("[::ffff:8.8.8.8]", "::ffff:808:808"),  # IPv4-mapped: the socket speaks IPv4 to 8.8.8.8
    ("[64:ff9b::808:808]", "64:ff9b::808:808"),  # NAT64: an IPv6-only cluster reaching 8.8.8.8 through DNS64
])
def test_translated_forms_of_a_public_address_are_admitted(host, address):
    sent: list[httpx.Request] = []
    assert "1932" in fetch(f"http://{host}/page", PageFetcher(client=recording_client(sent)))
    (req,) = sent
    assert req.url.host == address and req.url.path == "/page"


@pytest.mark.parametrize(("host", "why"), [
    ("[::ffff:127.0.0.1]", "loopback"), ("[::ffff:169.254.169.254]", "link-local"),
    ("[64:ff9b::7f00:1]", "NAT64 address wrapping 127.0.0.1, a loopback"), ("[64:ff9b::a00:1]", "private"),
])
def test_translated_forms_of_an_internal_address_are_refused(host, why):
    refused_unsent(f"http://{host}/page", why)


def test_an_allow_entry_opens_only_the_port_it_names(port, dns):
    table, _ = dns
    table["site.test"] = ["127.0.0.1"]
    # no port named: the scheme's default port only, never the server's port
    with pytest.raises(FetchError, match=rf"loopback address on port {port}.*names it only as site\.test: .*add "
                                         rf"site\.test:{port}"):
        fetch(f"http://site.test:{port}/page", PageFetcher(PageReaderSpec(allow=["site.test"])))
    with pytest.raises(FetchError, match=f"refused.*port {port}"):  # the same for an address or a network
        fetch(f"http://127.0.0.1:{port}/page", PageFetcher(PageReaderSpec(allow=["127.0.0.0/8"])))
    with pytest.raises(FetchError, match=f"refused.*port {port}"):  # another port named
        fetch(f"http://site.test:{port}/page", PageFetcher(PageReaderSpec(allow=[f"site.test:{port + 1}"])))
    assert Local.hits == []
    # the named port is open, under either form of entry
    assert "1932" in fetch(f"http://site.test:{port}/page", PageFetcher(PageReaderSpec(allow=[f"site.test:{port}"])))
    assert "1932" in fetch(f"http://127.0.0.1:{port}/page", PageFetcher(PageReaderSpec(allow=[f"127.0.0.0/8:{port}"])))
    assert len(Local.hits) == 2
    # an entry without a port opens the default port of the URL's scheme: 80 for http, 443 for https, not 80 for https
    guard = UrlGuard(["site.test"])
    assert asyncio.run(guard.pin("http://site.test/x")) == "127.0.0.1"
    assert asyncio.run(guard.pin("https://site.test/x")) == "127.0.0.1"
    with pytest.raises(FetchError, match="port 80"):
        asyncio.run(guard.pin("https://site.test:80/x"))


@pytest.mark.parametrize(("entry", "why"), [
    ("site.test:0", "not a port"), ("site.test:http", "not a port"), ("[::1]:99999", "not a port"),
    ("10.0.0.0/33", "neither a host name nor an address"), ("bad_host!:80", "not a valid host name"),
])
def test_bad_allow_entries_are_refused_naming_the_entry(entry, why):
    with pytest.raises(ValueError, match=f"page reader allow list: {entry!r}.*{why}".replace("[", r"\[")):
        UrlGuard([entry])

"""The real page reader: fetch a URL with httpx (size, time and content-type limits) and extract its readable text
with trafilatura; answers are cached per URL (in memory, and on disk when a cache folder is given).

Limits: `max_bytes` (the body is streamed and cut there), `timeout_s` (connect + read), content types (HTML/XHTML and
plain text; anything else is refused with its type), at most `max_redirects` redirects, http(s) only. Every URL, the
first and each redirect target, is normalised once (`tools/urls.py`: IDNA host, no trailing dot, dot segments and
repeated slashes removed, unreserved escapes decoded) and that normal form is both what the block list judges and
what is requested: a blocked page cannot be reached by another spelling of it. A blocked URL (the environment's
block list, checked again on every redirect) is never fetched. The cache is read only after the guard below has
admitted the URL, and its entries are keyed by the normal URL and the allow list they were fetched under.

Request forgery: a model chooses the URL, so before each request (the first and every redirect) the host is resolved
once (`resolve_host`) and refused when any address is loopback, private, link-local (169.254.169.254: a cloud node's
metadata service), multicast, reserved, unspecified, in one of the IANA special-purpose ranges (`SPECIAL_PURPOSE`),
or an IPv6 address wrapping such an IPv4 address (6to4, Teredo). An IPv4-mapped or NAT64 (64:ff9b::/96) address is
judged by the IPv4 address it wraps alone: translated, the packets go there (so `[::ffff:8.8.8.8]` is read and
`[::ffff:127.0.0.1]` refused, and an IPv6-only cluster behind DNS64 reads IPv4-only sites). The request then goes to
the exact address that was checked (the URL's host replaced by it, the Host header and TLS SNI/certificate check kept
on the name), so a second DNS answer cannot swap in an internal address (DNS rebinding). Hosts or networks that may
be fetched anyway are listed in `environment.pages.allow` or `OMNIDECISION_PAGE_READER_ALLOW` (comma-separated: exact
host names, addresses or CIDR networks, each with an optional port: `mirror.internal:8080`, `127.0.0.1:8000`,
`10.0.0.0/8:443`, `[fd00::/8]:8080`; e.g. a local mirror, or a test's server on 127.0.0.1). An entry opens the port
it names, or the default port of the URL's scheme (80 for http, 443 for https) when it names none; never every port
of its host.

    python -m omnidecision.tools.page_fetch https://example.org/
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import logging
import os
import re
import socket
import sys
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse

import httpx
from pydantic import BaseModel, ConfigDict, Field

from omnidecision.tools.urls import DEFAULT_PORTS, UrlError, normalize, normalize_host

logger = logging.getLogger(__name__)

TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
ALLOW_ENV = "OMNIDECISION_PAGE_READER_ALLOW"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


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
    allow: list[str] = Field(
        default_factory=list, description="hosts (exact names), addresses or CIDR networks the reader may fetch "
        "although they are not public (loopback, private, link-local, …), each on the port it names (host:port, "
        f"[v6]:port, net/len:port) or else on the scheme's default port; {ALLOW_ENV} adds comma-separated ones")


# IANA special-purpose ranges (iana-ipv4/ipv6-special-registry) refused whatever the running Python's tables say:
# `ipaddress` calls several of them global (3.11: 192.0.0.8-10, AS112, AMT, the 6to4 relay anycast, 3fff::/20,
# fec0::/10) and its tables change between patch releases. Addresses wrapping an IPv4 address (6to4, Teredo, NAT64,
# IPv4-mapped) are judged by the address they wrap; a translated one (IPv4-mapped, NAT64) by that address alone.
SPECIAL_PURPOSE: dict[str, tuple[str, ...]] = {
    "this network": ("0.0.0.0/8",),
    "shared address space (carrier-grade NAT)": ("100.64.0.0/10",),
    "IETF protocol assignments": ("192.0.0.0/24", "2001::/23"),
    "documentation": ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20"),
    "AS112 / AMT anycast": ("192.31.196.0/24", "192.52.193.0/24", "192.175.48.0/24", "2620:4f:8000::/48"),
    "6to4 relay anycast": ("192.88.99.0/24",),
    "benchmarking": ("198.18.0.0/15", "2001:2::/48"),
    "reserved": ("240.0.0.0/4", "255.255.255.255/32"),
    "NAT64 local-use": ("64:ff9b:1::/48",),
    "discard / dummy prefix": ("100::/64", "100:0:0:1::/64"),
    "segment routing SIDs": ("5f00::/16",),
    "unique-local": ("fc00::/7",),
    "site-local (deprecated)": ("fec0::/10",),
}
_SPECIAL = [(label, ipaddress.ip_network(net)) for label, nets in SPECIAL_PURPOSE.items() for net in nets]
NAT64 = ipaddress.ip_network("64:ff9b::/96")


def wrapped_ipv4(ip: IPAddress) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, with the mechanism's name (IPv4-mapped, 6to4, Teredo server and
    client, NAT64).

    >>> wrapped_ipv4(ipaddress.ip_address("2002:a9fe:a9fe::"))
    [('6to4', IPv4Address('169.254.169.254'))]
    """
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    out: list[tuple[str, ipaddress.IPv4Address]] = []
    if ip.ipv4_mapped is not None:
        out.append(("IPv4-mapped", ip.ipv4_mapped))
    if ip.sixtofour is not None:
        out.append(("6to4", ip.sixtofour))
    if ip.teredo is not None:
        server, client = ip.teredo
        out += [("Teredo client", client), ("Teredo server", server)]
    if ip in NAT64:
        out.append(("NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
    return out


def address_problem(ip: IPAddress) -> str | None:
    """Why an address must not be fetched (None: a public address).

    >>> address_problem(ipaddress.ip_address("169.254.169.254"))
    'link-local'
    >>> address_problem(ipaddress.ip_address("::ffff:10.0.0.1")), address_problem(ipaddress.ip_address("1.1.1.1"))
    ('private', None)
    >>> address_problem(ipaddress.ip_address("2002:7f00:1::"))
    '6to4 address wrapping 127.0.0.1, a loopback'
    >>> [address_problem(ipaddress.ip_address(a)) for a in ("::ffff:8.8.8.8", "64:ff9b::808:808")]
    [None, None]
    >>> address_problem(ipaddress.ip_address("192.0.0.9")), address_problem(ipaddress.ip_address("fec0::1"))
    ('special-purpose (IETF protocol assignments)', 'special-purpose (site-local (deprecated))')
    """
    for how, inner in wrapped_ipv4(ip):
        problem = address_problem(inner)
        if how == "IPv4-mapped":  # the socket speaks IPv4 to `inner`: it alone decides
            return problem
        if how == "NAT64":  # the translator forwards to `inner`: it alone decides (64:ff9b::/96 is global)
            return None if problem is None else f"{how} address wrapping {inner}, a {problem}"
        if problem is not None:
            return f"{how} address wrapping {inner}, a {problem}"
    for name in ("unspecified", "loopback", "link_local", "multicast", "reserved", "private"):
        if getattr(ip, f"is_{name}"):
            return name.replace("_", "-")
    for label, net in _SPECIAL:
        if ip.version == net.version and ip in net:
            return f"special-purpose ({label})"
    return None if ip.is_global else "non-public (special-purpose)"


async def resolve_host(host: str, port: int) -> list[str]:
    """The addresses of `host` (the one lookup the page reader makes per request; tests patch this function)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_BRACKETED = re.compile(r"\[([^\]]+)\](?::(.*))?")


def parse_allow_entry(entry: str) -> tuple[str | Network, int | None]:
    """(normalised host name or network, port or None for the scheme's default) of an allow-list entry.

    >>> parse_allow_entry("Mirror.Internal.:8080"), parse_allow_entry("127.0.0.1")
    (('mirror.internal', 8080), (IPv4Network('127.0.0.1/32'), None))
    >>> parse_allow_entry("10.0.0.0/8:443"), parse_allow_entry("[fd00::/8]:8080"), parse_allow_entry("::1")
    ((IPv4Network('10.0.0.0/8'), 443), (IPv6Network('fd00::/8'), 8080), (IPv6Network('::1/128'), None))
    """
    text = entry.strip()
    port_text: str | None = None
    if m := _BRACKETED.fullmatch(text):
        text, port_text = m.group(1), m.group(2)
    elif text.count(":") == 1:  # host:port or net/len:port (two or more colons: a bare IPv6 address)
        text, _, port_text = text.partition(":")
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"page reader allow list: {entry!r}: {port_text!r} is not a port (1-65535)")
        port = int(port_text)
    try:
        return ipaddress.ip_network(text, strict=False), port
    except ValueError:
        pass
    if "/" in text or ":" in text:
        raise ValueError(f"page reader allow list: {entry!r} is neither a host name nor an address or CIDR network")
    try:
        return normalize_host(text), port
    except UrlError as exc:
        raise ValueError(f"page reader allow list: {entry!r}: {exc}") from None


def _show(target: str | Network, port: int | None) -> str:
    if port is None:
        return str(target)
    v6 = isinstance(target, ipaddress.IPv6Network | ipaddress.IPv6Address)
    return f"[{target}]:{port}" if v6 else f"{target}:{port}"


class UrlGuard:
    """Checks where a URL's host resolves and returns the address to connect to (see the module docstring)."""

    def __init__(self, allow: Iterable[str] = (), timeout_s: float = 15.0) -> None:
        self.names: list[tuple[str, int | None]] = []
        self.networks: list[tuple[Network, int | None]] = []
        self.timeout_s = timeout_s
        for entry in (e.strip() for e in allow):
            if not entry:
                continue
            target, port = parse_allow_entry(entry)
            if isinstance(target, str):
                self.names.append((target, port))
            else:
                self.networks.append((target, port))

    @classmethod
    def from_spec(cls, spec: PageReaderSpec) -> UrlGuard:
        extra = os.environ.get(ALLOW_ENV, "").split(",")
        return cls([*spec.allow, *extra], spec.timeout_s)

    def policy(self) -> str:
        """The allow list as one canonical string ("" when none: public addresses only)."""
        return ",".join(sorted({_show(n, p) for n, p in self.names} | {_show(n, p) for n, p in self.networks}))

    def allowed(self, host: str, ip: IPAddress, port: int, scheme: str = "http") -> bool:
        """Whether an entry admits `host` (normalised) at `ip` on `port`: an entry without a port admits the
        scheme's default port only."""
        def port_ok(entry_port: int | None) -> bool:
            return port == (entry_port if entry_port is not None else DEFAULT_PORTS.get(scheme))

        return (any(host == name and port_ok(p) for name, p in self.names)
                or any(ip in net and port_ok(p) for net, p in self.networks))

    def _listed(self, host: str, ip: IPAddress) -> list[str]:
        """The entries naming `host` or `ip` on any port (to say which port to add when the port is refused)."""
        return [_show(n, p) for n, p in self.names if n == host] + [_show(n, p) for n, p in self.networks if ip in n]

    async def pin(self, url: str) -> str:
        """The address `url` must be fetched from; FetchError saying why when its host is not public."""
        try:
            norm = normalize(url)
        except UrlError as exc:
            raise FetchError(f"{url}: refused: {exc}") from None
        host, port = norm.host.strip("[]"), norm.effective_port
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = await asyncio.wait_for(resolve_host(host, port), self.timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:
                raise FetchError(f"{url}: cannot resolve {host}: {exc or type(exc).__name__}") from None
            if not addresses:
                raise FetchError(f"{url}: cannot resolve {host}: no address")
        for text in addresses:  # every answer must pass: one internal address among public ones is refused too
            ip = ipaddress.ip_address(text.split("%")[0])
            problem = address_problem(ip)
            if problem is not None and not self.allowed(host, ip, port, norm.scheme):
                where = f"{host} is" if literal is not None else f"{host} resolves to {ip}, which is"
                listed = self._listed(host, ip)
                how = (f"the allow list names it only as {', '.join(listed)}: an entry opens the port it names, or "
                       f"the scheme's default port; add {_show(host, port) if literal is None else _show(ip, port)}"
                       if listed else "allow a host or network explicitly")
                raise FetchError(f"{url}: refused (request forgery guard): {where} a {problem} address on port "
                                 f"{port}; the page reader fetches public addresses only ({how} with "
                                 f"environment.pages.allow or {ALLOW_ENV})")
        return addresses[0].split("%")[0]


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
        self.guard = UrlGuard.from_spec(self.spec)
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
    # An entry is keyed by the URL AND the allow list it was fetched under: a page reached only through an allow
    # entry (its first hop or a redirect) is never served to a fetcher whose policy lacks that entry. And the cache
    # is read only after the guard has admitted the URL under the current policy (`fetch`).
    def _key(self, url: str) -> str:
        policy = self.guard.policy()
        return url if not policy else f"{url}\nallow={policy}"

    def _disk_path(self, url: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{hashlib.sha256(self._key(url).encode()).hexdigest()[:32]}.json"

    def cached(self, url: str) -> str | None:
        key = self._key(url)
        if key in self._memory:
            self._memory.move_to_end(key)
            return self._memory[key]
        path = self._disk_path(url)
        if path is not None and path.is_file():
            try:
                entry = json.loads(path.read_text("utf-8"))
                text = entry["text"]
            except (OSError, ValueError, KeyError):
                return None
            if entry.get("url") != url or entry.get("allow", "") != self.guard.policy():
                return None  # a hash collision or an entry of another policy
            self._remember(url, text)
            return text
        return None

    def _remember(self, url: str, text: str) -> None:
        if self.spec.cache_entries:
            key = self._key(url)
            self._memory[key] = text
            self._memory.move_to_end(key)
            while len(self._memory) > self.spec.cache_entries:
                self._memory.popitem(last=False)

    def _store(self, url: str, text: str) -> None:
        self._remember(url, text)
        path = self._disk_path(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            entry = {"url": url, "allow": self.guard.policy(), "text": text}
            tmp.write_text(json.dumps(entry, ensure_ascii=False), "utf-8")
            tmp.replace(path)

    # -- fetching ---------------------------------------------------------------------------------------------
    async def fetch(self, url: str) -> str:
        """The text of `url` (read as its normal form, `tools/urls.py`), from the cache or fetched and extracted
        now."""
        if urlparse(url.strip()).scheme.lower() not in ("http", "https"):
            raise FetchError(f"url: {url!r} is not an http(s) URL")
        try:
            url = normalize(url).url  # what the block list judges is what is requested
        except UrlError as exc:
            raise FetchError(f"url: {exc}") from None
        if self.is_blocked(url):
            raise FetchError(f"url: {url} is blocked in this environment")
        # the guard first, under the current policy: a cached page is no way around it (the checked address is the
        # one the first request then goes to: one lookup per request)
        first = await self.guard.pin(url)
        hit = self.cached(url)
        if hit is not None:
            return hit
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.spec.max_concurrency)
        async with self._semaphore:
            final, ctype, body = await self._get(url, first)
        if ctype == "text/plain":
            text = body.decode("utf-8", errors="replace").strip()
        else:
            text = await asyncio.to_thread(extract_text, body.decode("utf-8", errors="replace"), final)
        if not text:
            raise FetchError(f"{url}: no readable text on the page")
        self._store(url, text)
        return text

    def _redirect_target(self, url: str, current: str, location: str) -> str:
        """The normal form of where `current` redirects to; FetchError when it is not http(s), not a URL, or
        blocked (the block list is checked on every hop, on the form that is then requested)."""
        # WHATWG: "\" is "/" in an http(s) reference too (a location "\\host/x" names another host)
        try:
            target = str(httpx.URL(current).join(location.strip().replace("\\", "/")))
        except (httpx.InvalidURL, ValueError) as exc:
            raise FetchError(f"{url}: redirects to {location!r}, which is not a URL ({exc})") from None
        if urlparse(target).scheme not in ("http", "https"):
            raise FetchError(f"{url}: redirects to {target}, which is not an http(s) URL")
        try:
            target = normalize(target).url
        except UrlError as exc:
            raise FetchError(f"{url}: redirects to {exc}") from None
        if self.is_blocked(target):
            raise FetchError(f"{url}: redirects to {target}, which is blocked in this environment")
        return target

    async def _pinned(self, url: str, ip: str | None = None) -> tuple[httpx.URL, dict[str, str], dict[str, str]]:
        """(URL with the checked address as host, Host header, request extensions): what `_get` sends; `ip`: the
        address the guard already admitted for `url`."""
        ip = ip or await self.guard.pin(url)
        logical = httpx.URL(url)
        headers = {"Host": logical.netloc.decode("ascii")}
        # TLS: SNI and the certificate check stay on the name, the connection goes to the checked address
        extensions = {"sni_hostname": logical.raw_host.decode("ascii")} if logical.scheme == "https" else {}
        return logical.copy_with(host=ip), headers, extensions

    async def _get(self, url: str, first: str | None = None) -> tuple[str, str, bytes]:
        current = url
        for _ in range(self.spec.max_redirects + 1):
            try:
                try:
                    target_url, headers, extensions = await self._pinned(current, first if current == url else None)
                except FetchError as exc:
                    if current == url:
                        raise
                    raise FetchError(f"{url}: redirects to {exc}") from None
                async with self.client.stream("GET", target_url, headers=headers, extensions=extensions) as response:
                    if response.is_redirect:
                        current = self._redirect_target(url, current, response.headers.get("location", ""))
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
                    return current, ctype, bytes(body)
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

"""The one URL normaliser of the web tools: the page reader fetches `normalize(url).url`, and the block list compares
`normalize(url).host_key` and `.path_keys`, so what is compared is what is fetched (issue 55: a block list that
compared raw spellings let `huggingface.co.`, `hf｡co`, `/x/../OmniGAIA` or `%4FmniGAIA` through).

What a URL becomes (WHATWG URL parsing for http(s), RFC 3986 §6.2.2 normalisation):
- tabs and new lines removed, `\\` read as `/`, no scheme read as https;
- host: percent-decoded, IDNA (UTS #46: the unicode full stops U+3002, U+FF0E, U+FF61 are dots, full-width letters
  are letters, upper case is lower case) to ASCII, trailing dots dropped; an IPv6 literal in its compressed form;
- port: dropped when it is the scheme's default; userinfo and fragment dropped (neither is sent as a path);
- path: percent-encoding of unreserved characters decoded (`%4F` → `O`), other escapes upper-cased, non-ASCII
  characters encoded as UTF-8, dot segments (`/./`, `/x/../`) removed, repeated slashes collapsed, `/` when empty.

The comparison keys go further, so that a server reading a spelling more loosely than the fetcher sends it still
cannot reach a blocked page: `host_key` drops a leading `www.`; `path_keys` are the path as sent and the path after
each round of decoding every escape (`%2F` too, then double encodings), each with dot segments and repeated slashes
removed again, lower case: a block list refuses a URL when any of them falls under an entry.

    python -m omnidecision.tools.urls 'https://huggingface。co./datasets/RUC-NLPIR/x/../%4FmniGAIA'
"""

from __future__ import annotations

import ipaddress
import re
import sys
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

import idna

DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 3986 unreserved characters: their percent-encoding means the character itself
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_ASCII_LABEL = re.compile(r"[a-z0-9_-]+")
# characters that stay as they are in a path (RFC 3986 pchar + "/", and "%" of escapes already checked)
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):[/\\]*")
_LONE_PERCENT = re.compile(r"%(?![0-9A-F]{2})")


class UrlError(ValueError):
    """A URL that cannot be normalised (no host, a bad port, a host that is not a domain name or address)."""


@dataclass(frozen=True)
class NormalUrl:
    """A normalised http(s) URL: `url` is what is requested, `host_key` / `path_key` what block lists compare."""

    scheme: str
    host: str  # ASCII; an IPv6 address in brackets
    port: int | None  # None: the scheme's default
    path: str
    query: str

    @property
    def url(self) -> str:
        port = f":{self.port}" if self.port is not None else ""
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{self.host}{port}{self.path}{query}"

    @property
    def effective_port(self) -> int:
        return self.port if self.port is not None else DEFAULT_PORTS.get(self.scheme, 0)

    @property
    def host_key(self) -> str:
        return self.host.removeprefix("www.")

    @property
    def path_keys(self) -> tuple[str, ...]:
        return path_keys(self.path)


def normalize_host(host: str) -> str:
    """The ASCII form of a host name or address literal (see the module docstring).

    >>> [normalize_host(h) for h in ["HuggingFace.co.", "huggingface。co", "hf｡co", "ｈｆ．co", "bücher.de"]]
    ['huggingface.co', 'huggingface.co', 'hf.co', 'hf.co', 'xn--bcher-kva.de']
    >>> normalize_host("[0:0:0:0:0:ffff:808:808]"), normalize_host("my_host.local")
    ('[::ffff:808:808]', 'my_host.local')
    """
    text = unquote(host.strip())
    if text.startswith("[") and text.endswith("]"):
        try:
            return f"[{ipaddress.IPv6Address(text[1:-1].split('%')[0]).compressed}]"
        except ValueError:
            raise UrlError(f"{host!r} is not an IPv6 address") from None
    if ":" in text:  # an IPv6 address given without brackets (a block or allow entry)
        try:
            return f"[{ipaddress.IPv6Address(text.split('%')[0]).compressed}]"
        except ValueError:
            raise UrlError(f"{host!r} is not a host name or address") from None
    try:
        mapped = idna.uts46_remap(text, std3_rules=False, transitional=False)
    except idna.IDNAError as exc:
        raise UrlError(f"{host!r} is not a valid host name ({exc})") from None
    labels = mapped.rstrip(".").split(".")
    if not labels or any(not label for label in labels):
        raise UrlError(f"{host!r} is not a valid host name (empty label)")
    out = []
    for label in labels:
        if label.isascii():  # ASCII labels as DNS takes them (underscores included), IDNA for the others
            if not _ASCII_LABEL.fullmatch(label):
                raise UrlError(f"{host!r} is not a valid host name (label {label!r})")
            out.append(label)
            continue
        try:
            out.append(idna.alabel(label).decode("ascii"))
        except idna.IDNAError as exc:
            raise UrlError(f"{host!r} is not a valid host name ({exc})") from None
    return ".".join(out)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, with repeated slashes collapsed; always starts with "/".

    >>> [remove_dot_segments(p) for p in ("//RUC-NLPIR/x/../OmniGAIA/./data/", "/a/b/..", "")]
    ['/RUC-NLPIR/OmniGAIA/data/', '/a/', '/']
    """
    segments = path.split("/")
    out: list[str] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "..":
            if out:
                out.pop()
        elif seg not in (".", ""):
            out.append(seg)
        if last and (seg in (".", "..", "") and i > 0):
            out.append("")  # a trailing "/", "/." or "/..": the result ends with "/"
    return "/" + "/".join(out)


def _normalize_escapes(segment: str) -> str:
    """Unreserved characters decoded, other escapes upper-cased, anything else outside pchar percent-encoded."""
    def fix(m: re.Match[str]) -> str:
        char = chr(int(m.group(1), 16))
        return char if char in _UNRESERVED else f"%{m.group(1).upper()}"

    return _LONE_PERCENT.sub("%25", quote(_ESCAPE.sub(fix, segment), safe=_PATH_SAFE))


def path_keys(path: str) -> tuple[str, ...]:
    """The forms block lists compare: the path as sent, then after each round of decoding every escape (until none
    is left), `\\` as `/`, dot segments and repeated slashes removed again; lower case. Every reading counts: a
    server may decode `%2F` before routing, or not.

    >>> path_keys("/RUC-NLPIR%2FOmniGAIA"), path_keys("/a%252Fb")
    (('/ruc-nlpir%2fomnigaia', '/ruc-nlpir/omnigaia'), ('/a%252fb', '/a%2fb', '/a/b'))
    >>> path_keys("/RUC-NLPIR/OmniGAIA/x%2F..%2F..")
    ('/ruc-nlpir/omnigaia/x%2f..%2f..', '/ruc-nlpir/')
    """
    keys = [remove_dot_segments(path).lower()]
    text = path
    for _ in range(4):  # %25 nests: %252F -> %2F -> /
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
        keys.append(remove_dot_segments(text.replace("\\", "/")).lower())
    return tuple(dict.fromkeys(keys))


def normalize(url: str) -> NormalUrl:
    """The normal form of an http(s) URL or of a bare `host/path` (read as https).

    >>> normalize("HTTPS://huggingface．co.:443/datasets/./RUC-NLPIR//x/../%4FmniGAIA#top").url
    'https://huggingface.co/datasets/RUC-NLPIR/OmniGAIA'
    >>> n = normalize("github.com./RUC-NLPIR%2FOmniGAIA"); n.url, n.path_keys
    ('https://github.com/RUC-NLPIR%2FOmniGAIA', ('/ruc-nlpir%2fomnigaia', '/ruc-nlpir/omnigaia'))
    """
    text = re.sub(r"[\t\n\r]", "", url).strip()
    m = _SCHEME.match(text)
    if m and m.group(1).lower() in DEFAULT_PORTS:  # WHATWG: "http:host", "http:\\host" mean "http://host"
        scheme, rest = m.group(1).lower(), text[m.end():]
    elif "://" in text:  # another scheme: kept (the page reader refuses it by its scheme)
        scheme, _, rest = text.partition("://")
    else:  # a bare host/path (block-list entries, "hf.co/x")
        scheme, rest = "https", text.lstrip("/\\")
    try:
        parts = urlsplit(f"{scheme}://{rest.replace(chr(92), '/')}")  # WHATWG: "\\" is "/" in http(s) URLs
        port = parts.port
    except ValueError as exc:
        raise UrlError(f"{url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    netloc = parts.netloc.rpartition("@")[2]
    raw_host = netloc
    if netloc.startswith("["):
        raw_host = netloc[: netloc.find("]") + 1]
    elif ":" in netloc:
        raw_host = netloc.rpartition(":")[0]
    if not raw_host:
        raise UrlError(f"{url!r}: no host in the URL")
    try:
        host = normalize_host(raw_host)
    except UrlError as exc:
        raise UrlError(f"{url!r}: host {exc}") from None
    if port == DEFAULT_PORTS.get(scheme):
        port = None
    path = remove_dot_segments("/".join(_normalize_escapes(seg) for seg in parts.path.split("/")))
    return NormalUrl(scheme=scheme, host=host, port=port, path=path, query=parts.query)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        n = normalize(arg)
        print(f"{arg}\n  fetched:  {n.url}\n  compared: " + " | ".join(n.host_key + k for k in n.path_keys))

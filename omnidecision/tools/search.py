"""Offline web search and page reading: BM25 (rank_bm25) over the task's pages and a shared JSONL page corpus.

A corpus shared by many tasks is indexed once per process (cached by path, size and mtime), so a collection of
1000 tasks over one corpus pays for one index. A domain block list (e.g. the benchmark's own host) hides pages from
both search and reading.

    python -c "import asyncio; from omnidecision.tools.search import OfflineSearch, PageIndex; \
from omnidecision.tasks.schema import Page; s = OfflineSearch([PageIndex([Page(url='https://a.org/x', \
text='The bridge opened in 1932.')])]); print(asyncio.run(s.search('bridge opened')))"
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from rank_bm25 import BM25Plus

from omnidecision.tasks.schema import Page
from omnidecision.tools.base import SearchHit
from omnidecision.tools.text import tokens
from omnidecision.tools.urls import UrlError, normalize

logger = logging.getLogger(__name__)

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class CorpusError(ValueError):
    """A page corpus file is malformed; the message names the file, the line and the field."""


def normalize_url(url: str) -> str:
    """Compare URLs without scheme, `www.`, port of the scheme, fragment or trailing slash (the normal form of
    `tools/urls.py`; a string that is no URL is compared as written)."""
    try:
        n = normalize(url)
    except UrlError:
        return url.strip()
    return f"{n.host_key}{n.path.rstrip('/')}" + (f"?{n.query}" if n.query else "")


def host_of(url: str) -> str:
    try:
        return normalize(url).host_key
    except UrlError:
        return ""


@functools.lru_cache(maxsize=1024)
def _block_rule(entry: str) -> tuple[str, str]:
    """(host, path prefix) of a block-list entry: "hf.co", "github.com/RUC-NLPIR/OmniGAIA" or a full URL, in the
    compared form of `tools/urls.py`."""
    try:
        n = normalize(entry)
    except UrlError as exc:
        raise ValueError(f"block list entry {entry!r}: {exc}") from None
    return n.host_key, n.path_keys[-1].rstrip("/")


def is_blocked(url: str, blocked: Iterable[str]) -> bool:
    """True when the URL falls under a block-list entry: a bare host blocks that host and its subdomains; a host
    with a path blocks only that path prefix (whole segments; case-insensitive). Both sides are compared in the
    normal form the page reader requests (`tools/urls.py`: IDNA host without trailing dot or `www.`; the path as sent
    and with every escape decoded, dot segments and repeated slashes removed: blocked when any reading falls under
    the entry), so no other spelling of a blocked page passes.
    A string that is no URL (keywords) is not blocked: nothing can be requested by it.

    >>> rules = ["huggingface.co", "github.com/RUC-NLPIR/OmniGAIA"]
    >>> is_blocked("https://hf-mirror.huggingface.co/x", rules), is_blocked("https://nothuggingface.co", rules)
    (True, False)
    >>> is_blocked("https://github.com/ruc-nlpir/OmniGAIA/blob/x", rules), is_blocked("https://github.com/a/b", rules)
    (True, False)
    >>> is_blocked("https://github.com/RUC-NLPIR/OmniGAIA-extra", rules)
    False
    >>> [is_blocked(u, rules) for u in ("https://huggingface。co./x", "https://github.com.//RUC-NLPIR%2F%4FmniGAIA")]
    [True, True]
    """
    try:
        n = normalize(url)
    except UrlError:
        return False
    host, paths = n.host_key, n.path_keys
    for entry in blocked:
        d, prefix = _block_rule(entry)
        if not d or not (host == d or host.endswith("." + d)):
            continue
        if not prefix or any(path == prefix or path.startswith(prefix + "/") for path in paths):
            return True
    return False


def snippet(text: str, query: str, max_chars: int = 300) -> str:
    """The sentence (plus its neighbour) of `text` that shares most tokens with the query."""
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    if not sentences:
        return ""
    q = set(tokens(query))
    best = max(range(len(sentences)), key=lambda i: (len(q & set(tokens(sentences[i], True))), -i))
    out = sentences[best]
    if best + 1 < len(sentences) and len(out) < max_chars // 2:
        out += " " + sentences[best + 1]
    return out if len(out) <= max_chars else out[: max_chars - 1] + "…"


class PageIndex:
    """BM25 over a fixed list of pages."""

    def __init__(self, pages: Sequence[Page]):
        self.pages = list(pages)
        self._tokens = [tokens(f"{p.title} {p.text}", keep_stopwords=True) for p in self.pages]
        self._bm25 = BM25Plus(self._tokens) if self.pages else None
        self._by_url = {normalize_url(p.url): p for p in self.pages}

    def __len__(self) -> int:
        return len(self.pages)

    def search(self, query: str, k: int, blocked: Sequence[str] = ()) -> list[SearchHit]:
        q = tokens(query)
        if not q or self._bm25 is None:
            return []
        scores = self._bm25.get_scores(q)
        qs = set(q)
        order = sorted(range(len(self.pages)), key=lambda i: (-scores[i], i))
        hits: list[SearchHit] = []
        for i in order:
            page = self.pages[i]
            if not qs & set(self._tokens[i]) or is_blocked(page.url, blocked):
                continue
            hits.append(
                SearchHit(url=page.url, title=page.title, snippet=snippet(page.text, query), score=float(scores[i]))
            )
            if len(hits) >= k:
                break
        return hits

    def get(self, url: str) -> Page | None:
        return self._by_url.get(normalize_url(url))


def load_corpus(path: str | Path) -> list[Page]:
    """Read a JSONL page corpus (one `Page` per line: url, title, text); errors name file, line and field."""
    path = Path(path)
    pages: list[Page] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise CorpusError(f"{path}:{lineno}: expected a JSON object with url/title/text")
            try:
                pages.append(Page(**{k: record[k] for k in ("url", "title", "text") if k in record}))
            except Exception as exc:  # pydantic ValidationError: name the field
                fields = ", ".join(".".join(map(str, e["loc"])) for e in getattr(exc, "errors", lambda: [])())
                raise CorpusError(f"{path}:{lineno}: invalid page (field: {fields or '?'})") from None
    return pages


_CACHE: dict[tuple[str, int, int], PageIndex] = {}
_CACHE_LOCK = threading.Lock()


def corpus_index(path: str | Path) -> PageIndex:
    """The BM25 index of a corpus file, built once per (path, size, mtime) in this process."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    with _CACHE_LOCK:
        index = _CACHE.get(key)
        if index is None:
            logger.info("indexing page corpus %s", p)
            index = _CACHE[key] = PageIndex(load_corpus(p))
        return index


class OfflineSearch:
    """`SearchService` over one or more page indices (task pages first, then shared corpora)."""

    def __init__(self, indices: Sequence[PageIndex], blocked_domains: Iterable[str] = ()):
        self.indices = [ix for ix in indices if len(ix)]
        self.blocked_domains = sorted({d for d in blocked_domains if d})

    def is_blocked(self, url: str) -> bool:
        return is_blocked(url, self.blocked_domains)

    async def search(self, query: str, k: int = 5) -> list[SearchHit]:
        merged: dict[str, SearchHit] = {}
        for ix in self.indices:
            for hit in ix.search(query, k, self.blocked_domains):
                key = normalize_url(hit.url)
                if key not in merged or merged[key].score < hit.score:
                    merged[key] = hit
        return sorted(merged.values(), key=lambda h: -h.score)[:k]

    def canonical_url(self, url: str) -> str | None:
        """The stored URL of the page `url` names (scheme, `www.` and trailing slash aside), if any."""
        for ix in self.indices:
            page = ix.get(url)
            if page is not None:
                return page.url
        return None

    async def read(self, url: str) -> str | None:
        if self.is_blocked(url):
            return None
        for ix in self.indices:
            page = ix.get(url)
            if page is not None:
                return f"{page.title}\n\n{page.text}" if page.title else page.text
        return None

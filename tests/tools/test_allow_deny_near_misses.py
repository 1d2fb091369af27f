"""Near misses of the two allow/deny checks of the web tools (issue 65 item 7: a look-alike of an allowed entry was
planted and the whole fast suite passed): for each entry, what it must match and its look-alikes it must not —
names with the entry as a suffix or prefix without a label boundary, other TLDs, the entry inside a longer host or
path, addresses whose text starts like an allowed one, other ports.

- the block list (`tools.search.is_blocked`: the web search and the page reader's block list);
- the page reader's allow list (`UrlGuard`: which non-public hosts, addresses and ports it may fetch), through
  `UrlGuard.pin` with the resolver patched (no DNS, no connection): every host here resolves to a private address,
  so only an allow entry can admit it.

    .venv/bin/pytest -q tests/tools/test_allow_deny_near_misses.py
"""

from __future__ import annotations

import asyncio

import pytest

from omnidecision.tools import page_fetch
from omnidecision.tools.page_fetch import ALLOW_ENV, FetchError, UrlGuard
from omnidecision.tools.search import is_blocked

BLOCK = ["huggingface.co", "hf.co", "github.com/RUC-NLPIR/OmniGAIA"]
BLOCKED = ["https://huggingface.co/x", "https://cdn.huggingface.co/x", "https://HuggingFace.CO/x",
           "https://www.hf.co/x", "https://github.com/RUC-NLPIR/OmniGAIA", "https://github.com/RUC-NLPIR/OmniGAIA/",
           "https://github.com/RUC-NLPIR/OmniGAIA/tree/main", "https://github.com/RUC-NLPIR/OmniGAIA?tab=readme"]
NOT_BLOCKED = [
    "https://nothuggingface.co/x", "https://xhf.co/x",  # the entry as a suffix, no label boundary
    "https://huggingface.co.evil.com/x", "https://hf.co.uk/x",  # the entry as a prefix of another host
    "https://huggingface.com/x", "https://hf.com/x", "https://huggingface-co.org/x", "https://huggingfaceco/x",
    "https://github.com/RUC-NLPIR/OmniGAIA-extra", "https://github.com/RUC-NLPIR/OmniGAI",  # path look-alikes
    "https://github.com/RUC-NLPIR", "https://github.com/RUC-NLPIR/", "https://github.com/RUC-NLPIRx/OmniGAIA",
    "https://github.com/x/RUC-NLPIR/OmniGAIA",  # the entry's path inside a longer one
    "https://github.com/search?q=RUC-NLPIR/OmniGAIA",  # ... or in the query
    "https://github.co/RUC-NLPIR/OmniGAIA", "https://notgithub.com/RUC-NLPIR/OmniGAIA",
    "https://github.com.evil.com/RUC-NLPIR/OmniGAIA",
]


@pytest.mark.parametrize("url", BLOCKED)
def test_the_block_list_blocks_its_entries(url: str) -> None:
    assert is_blocked(url, BLOCK)


@pytest.mark.parametrize("url", NOT_BLOCKED)
def test_the_block_list_leaves_look_alikes_open(url: str) -> None:
    assert not is_blocked(url, BLOCK)


ALLOW = ["site.test", "mirror.internal:8080", "10.0.0.0/8", "127.0.0.1", "[fd00::1]"]
ADMITTED = ["http://site.test/p", "https://site.test/p", "http://SITE.test./p", "http://mirror.internal:8080/p",
            "http://10.1.2.3/p", "http://127.0.0.1/p", "http://[fd00::1]/p"]
REFUSED = [
    "http://evilsite.test/p", "http://sub.site.test/p",  # a name entry admits that host only
    "http://site.test.evil.example/p", "http://site.tes/p", "http://site.testx/p",
    "http://site.test:8080/p",  # no port named: the scheme's default only
    "http://mirror.internal/p", "http://mirror.internal:8081/p", "http://xmirror.internal:8080/p",
    "http://mirror.internal.evil:8080/p",
    "http://100.64.0.1/p",  # starts like 10.0.0.0/8, outside it (shared address space: not public)
    "http://127.0.0.10/p", "http://127.0.0.12/p",  # start like 127.0.0.1
    "http://127.0.0.1:8080/p", "http://10.1.2.3:8080/p",  # another port than the default
    "http://[fd00::10]/p", "http://[fd00::1]:8080/p",
]


@pytest.fixture
def guard(monkeypatch: pytest.MonkeyPatch) -> UrlGuard:
    """The allow list above; every name resolves to a private address (so only an entry can admit it)."""
    monkeypatch.delenv(ALLOW_ENV, raising=False)

    async def resolve(host: str, port: int) -> list[str]:
        return ["192.168.7.7"]

    monkeypatch.setattr(page_fetch, "resolve_host", resolve)
    return UrlGuard(ALLOW)


@pytest.mark.parametrize("url", ADMITTED)
def test_the_allow_list_admits_its_entries(url: str, guard: UrlGuard) -> None:
    assert asyncio.run(guard.pin(url))


@pytest.mark.parametrize("url", REFUSED)
def test_the_allow_list_refuses_look_alikes(url: str, guard: UrlGuard) -> None:
    with pytest.raises(FetchError, match="refused"):
        asyncio.run(guard.pin(url))

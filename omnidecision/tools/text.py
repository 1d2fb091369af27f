"""Keyword matching shared by the offline tools: tokenize, light stemming, token-overlap scoring.

Queries are composed from a need's `query_focus` ("year the bridge in the clip was built"), so matching is
multi-word, case-insensitive and scored by weighted token overlap, not exact substring.

    >>> tokens("The Dogs were RUNNING!")
    ['dog', 'run']
    >>> [i for i, _ in rank("red car parked", ["a red car", "blue sky", "car parks here"])]
    [0, 2]
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or but is are was were be been being it its this that these
    those what which who whom whose when where why how do does did has have had as into about than then there
    their they them he she his her him we our you your i me my not no so if any all some can could would should
    will shall may might must""".split()
)


def stem(word: str) -> str:
    """A deliberately tiny suffix stripper: enough to match 'dogs'/'dog', 'running'/'run', 'parked'/'park'."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2]:
                word = word[:-1]  # running -> runn -> run
            return word
    return word


def tokens(text: str, keep_stopwords: bool = False) -> list[str]:
    """Lower-cased, stemmed word tokens; stopwords dropped unless that would leave nothing."""
    words = [w.lower() for w in _WORD.findall(text or "")]
    kept = words if keep_stopwords else [w for w in words if w not in STOPWORDS]
    return [stem(w) for w in (kept or words)]


def rank(query: str, docs: Sequence[str], k: int | None = None) -> list[tuple[int, float]]:
    """Indices of `docs` that share tokens with `query`, best first, with scores in (0, 1].

    Score = idf-weighted fraction of the query's distinct tokens found in the doc, plus a small bonus when the
    query appears verbatim. Ties keep document order (e.g. time order of cues).
    """
    q = list(dict.fromkeys(tokens(query)))
    if not q:
        return []
    doc_tokens = [set(tokens(d, keep_stopwords=True)) for d in docs]
    df = Counter(t for toks in doc_tokens for t in set(q) & toks)
    n = len(docs)
    weight = {t: math.log(1.0 + (n + 1) / (df[t] + 0.5)) for t in q}
    total = sum(weight.values())
    phrase = query.strip().lower()
    scored: list[tuple[int, float]] = []
    for i, toks in enumerate(doc_tokens):
        hit = sum(weight[t] for t in q if t in toks)
        if hit <= 0:
            continue
        score = 0.9 * hit / total + (0.1 if phrase and phrase in docs[i].lower() else 0.0)
        scored.append((i, round(score, 4)))
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored[:k] if k is not None else scored

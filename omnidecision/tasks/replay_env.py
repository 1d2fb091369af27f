"""OmniGAIA replay environment: search, page reading and perception answered from the benchmark's annotations.

Without the media files (or a multimodal model), an OmniGAIA run can still exercise planning:
- web search is BM25+ (rank_bm25) over the `key_information` of the web sources of ALL loaded records (the other
  records act as distractors); `read(url)` returns that URL's key information;
- perception tools get the annotated-solution steps and media sources that describe the asked asset, never a step
  that concludes or that states the gold answer (or a number of it) as a computed result;
- code runs for real (the code tool's sandbox; nothing here).
Every task handed to `build_replay_services` is labelled `task.meta["replay"] = True`, and the services dict
carries "replay": True, so runs and reports can say the results come from replay.

The rule-based backend that drives replay runs offline is a backend kind: `backends.replay.ReplayBackend`
(`kind: replay`).

    python -m omnidecision.tasks.replay_env tests/data/omnigaia_dev/dev_metadata.json "Mirabel Quebec coordinates"
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rank_bm25 import BM25Plus

from omnidecision.ledger.schema import SourceRef
from omnidecision.protocol.observations import Observation, SearchHit
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.schema import Asset, Task

logger = logging.getLogger(__name__)

_TOKEN = re.compile(r"\w+", re.UNICODE)
_STEP_PREFIX = re.compile(r"^\s*(?:step\s*\d+\s*[:.)-]|\d+[.)])\s*", re.I)
_VIDEO = re.compile(
    r"\b(videos?|watch\w*|scenes?|footage|clips?|frames?|timestamps?|segments?|screen)\b|视频|画面", re.I
)
_AUDIO = re.compile(
    r"\b(audio|listen\w*|hear\w*|speakers?|narrat\w*|transcript\w*|spoken|says|said|voice|songs?|lyrics)\b|音频|录音",
    re.I,
)
_IMAGE = re.compile(r"\b(images?|photo\w*|pictures?|pictured|captions?)\b|图片|图像|照片", re.I)
_ORDINAL = re.compile(r"\b(first|second|third|fourth|1st|2nd|3rd|4th)\s+(video|audio|image|photo\w*|picture)", re.I)
_ORDINALS = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3}
_COMPUTED = re.compile(
    r"=|≈|×|÷|\b(calculat\w*|comput\w*|round\w*|results?|resulting|total\w*|difference|subtract\w*|multipl\w*|"
    r"divid\w*|yields?|ratio|sum|minus|plus|equals?|haversine|formula|percentage)\b",
    re.I,
)
_RESEARCH = re.compile(
    r"\b(web[_ ]?search\w*|search\w*|research\w*|online|according to|page[_ ]browser|wikipedia|look(?:ed)? up)\b", re.I
)
_CONCLUSION = re.compile(
    r"\b(conclu\w*|final answer|the answer|answer part|answer is|therefore|thus|hence|in summary)\b|结论|答案", re.I
)
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![A-Za-z0-9_.])[-+]?\d+(?:\.\d+)?")
MAX_ITEM_CHARS = 600
MAX_OBS_CHARS = 2500


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


# ---------------------------------------------------------------- what states the answer


def _numbers(text: str) -> list[float]:
    out = []
    for m in _NUMBER.findall(text):
        try:
            out.append(float(m.replace(",", "")))
        except ValueError:
            continue
    return out


def _norm(text: str) -> str:
    return " ".join(tokenize(text))


def answer_fragments(answer: str | None) -> tuple[list[str], list[float]]:
    """The answer's text pieces and numbers that a leaking step could state: the whole answer, and for a list or
    multi-part answer its short items and its numbers (a lone small integer counts only as the whole answer)."""
    if not answer or not answer.strip():
        return [], []
    texts = [_norm(answer)]
    items = [_STEP_PREFIX.sub("", x) for x in re.split(r"\s*(?:;|\n|,)\s*", answer) if x.strip()]
    if len(items) > 1 and all(len(x.split()) <= 6 for x in items):  # a real list, not clauses of a sentence
        texts += [_norm(x) for x in items]
    numbers = _numbers(answer)
    whole_number = len(numbers) == 1 and re.fullmatch(r"[-+$]?[\d,.]+%?", answer.strip())
    if not whole_number:
        numbers = [n for n in numbers if abs(n) >= 10 or n != int(n)]  # skip "1)", "2." list numbering
    return [t for t in texts if t], numbers


def mentions_answer(text: str, answer: str | None) -> bool:
    """Whether `text` contains the gold answer or one of its parts (numbers compared as numbers: 11,386 = 11386)."""
    texts, numbers = answer_fragments(answer)
    body = _STEP_PREFIX.sub("", text)
    norm = f" {_norm(body)} "
    if any(f" {t} " in norm for t in texts):
        return True
    found = _numbers(body)
    return any(abs(n - f) < 1e-9 for n in numbers for f in found)


def leaks_answer(text: str, answer: str | None, last: bool = False) -> bool:
    """A step/source the replay must not show: it concludes, or it mentions the answer (or a part of it) while
    computing, while reporting research, or as the solution's last step.

    >>> leaks_answer("Step 5: Calculate 1913 - 1621 = 292 years.", "292")
    True
    >>> leaks_answer("Step 1: Listen to the audio: 'get your vitamin C from kale'.", "kale")
    False
    """
    if _CONCLUSION.search(text):
        return True
    if not mentions_answer(text, answer):
        return False
    body = _STEP_PREFIX.sub("", text)
    return last or bool(_COMPUTED.search(body) or _RESEARCH.search(body))


# ---------------------------------------------------------------- which assets a text describes


_MEDIA_KINDS = ("video", "audio", "image", "frame", "clip", "subtitle", "transcript", "visual", "caption", "photo")
_WEB_KINDS = ("web", "search", "page", "browse", "research", "url", "wiki", "google", "site")


def classify_source(src: dict[str, Any]) -> str:
    """"web", "media" or "code" for a normalised source (see `loaders.omnigaia.normalize_sources`)."""
    kind = str(src.get("type") or "")
    if src.get("code") or "code" in kind or "calc" in kind or "comput" in kind:
        return "code"
    if any(k in kind for k in _MEDIA_KINDS):
        return "media"
    if any(k in kind for k in _WEB_KINDS) or (src.get("url") or "").startswith("http"):
        return "web"
    return "media" if _VIDEO.search(src.get("text", "")) or _AUDIO.search(src.get("text", "")) else "web"


def _asset_names(asset: Asset) -> list[str]:
    names = [asset.id]
    prefix = f"{asset.type}_"
    if asset.id.startswith(prefix) and len(asset.id) > len(prefix) + 3:
        names.append(asset.id[len(prefix):])
    return names


def _by_type(task: Task, kind: str) -> list[Asset]:
    return [a for a in task.assets if a.type == kind]


def described_assets(text: str, task: Task, kind_hint: str = "") -> list[str]:
    """The ids of the task's assets a step or media source describes: named by id, by ordinal ("second image"),
    or by modality words (audio words fall back to videos when the task has no audio asset)."""
    named = [a.id for a in task.assets if any(n in text for n in _asset_names(a))]
    if named:
        return named
    out: list[str] = []
    for m in _ORDINAL.finditer(text):
        kind = m.group(2).lower()
        kind = "image" if kind.startswith(("photo", "picture")) else kind
        same = _by_type(task, kind)
        idx = _ORDINALS[m.group(1).lower()]
        if idx < len(same):
            out.append(same[idx].id)
    if out:
        return list(dict.fromkeys(out))
    probe = f"{kind_hint.replace('_', ' ')} {text}"
    kinds = []
    if _IMAGE.search(probe):
        kinds.append("image")
    if _VIDEO.search(probe):
        kinds.append("video")
    if _AUDIO.search(probe):
        kinds.append("audio" if _by_type(task, "audio") else "video")
    return list(dict.fromkeys(a.id for k in kinds for a in _by_type(task, k)))


# ---------------------------------------------------------------- services


@dataclass
class ReplayDoc:
    url: str
    title: str
    text: str
    task_id: str


class ReplaySearch:
    """SearchService over the web sources of every loaded OmniGAIA record (BM25)."""

    def __init__(self, docs: list[ReplayDoc]) -> None:
        self.docs = docs
        self._tokens = [set(tokenize(f"{d.title} {d.text}")) for d in docs]
        # BM25+ keeps idf positive, so a small index (a few records) still ranks; non-matching documents are dropped.
        self._bm25 = BM25Plus([tokenize(f"{d.title} {d.text}") or ["_"] for d in docs]) if docs else None
        self._by_url: dict[str, list[str]] = {}
        for d in docs:
            texts = self._by_url.setdefault(d.url, [])
            if d.text not in texts:
                texts.append(d.text)

    async def search(self, query: str, k: int = 5) -> list[SearchHit]:
        return self.search_sync(query, k)

    def search_sync(self, query: str, k: int = 5) -> list[SearchHit]:
        terms = tokenize(query or "")
        if self._bm25 is None or not terms:
            return []
        scores = self._bm25.get_scores(terms)
        order = sorted(range(len(self.docs)), key=lambda i: (-scores[i], i))
        hits: list[SearchHit] = []
        seen: set[tuple[str, str]] = set()
        for i in order:
            d = self.docs[i]
            if len(hits) >= k:
                break
            if (d.url, d.text) in seen or not self._tokens[i] & set(terms):
                continue
            seen.add((d.url, d.text))
            hits.append(SearchHit(url=d.url, title=d.title, snippet=d.text[:400], score=float(scores[i])))
        return hits

    async def read(self, url: str) -> str | None:
        texts = self._by_url.get((url or "").strip())
        return "\n".join(texts) if texts else None


@dataclass
class MediaItem:
    text: str
    origin: str  # "step" or "source"
    start: float | None = None
    end: float | None = None


class ReplayMedia:
    """MediaService for one task: what the record's annotations say about each asset."""

    def __init__(self, task: Task, items: dict[str, list[MediaItem]]) -> None:
        self.task = task
        self.items = items

    async def perceive(
        self, tool: str, asset: Any, query: str, start: float | None = None, end: float | None = None
    ) -> Observation | None:
        aid = asset.id if isinstance(asset, Asset) else str(asset)
        items = list(self.items.get(aid, []))
        if start is not None and end is not None:
            items = [it for it in items if it.start is None or it.end is None or (it.start <= end and it.end >= start)]
        source = SourceRef(tool=tool, asset_id=aid, start=start, end=end)
        if not items:
            real = self.task.asset(aid)
            if real is not None and (real.subtitles or real.transcript or real.frame_captions or real.audio_events):
                return None  # let the tool read the asset's own surrogates
            return Observation(tool=tool, ok=False, source=source, fields={"replay": True},
                               error=f"replay: no annotation describes asset {aid!r} (in that time window)")
        terms = set(tokenize(query or ""))
        ranked = sorted(items, key=lambda it: -len(terms & set(tokenize(it.text))))
        lines, size = [], 0
        for it in ranked:
            line = "- " + it.text[:MAX_ITEM_CHARS]
            if size + len(line) > MAX_OBS_CHARS and lines:
                break
            lines.append(line)
            size += len(line) + 1
        text = f"[replay] what the annotations say about {aid}:\n" + "\n".join(lines)
        return Observation(tool=tool, ok=True, text=text, source=source,
                           fields={"replay": True, "asset_id": aid, "items": len(lines)})


def _source_url(task: Task, i: int, src: dict[str, Any]) -> tuple[str, str]:
    url = (src.get("url") or "").strip()
    title = str(src.get("query") or "")
    if url.startswith("http"):
        return url, title or url
    return f"replay://omnigaia/{task.id}/source/{i}", title or url or "annotation"


def media_items(task: Task) -> dict[str, list[MediaItem]]:
    """Per asset id: the record's media sources and the annotated-solution steps describing it, minus leaks."""
    items: dict[str, list[MediaItem]] = {a.id: [] for a in task.assets}
    for src in task.meta.get("sources", []):
        if classify_source(src) != "media" or not src.get("text"):
            continue
        if leaks_answer(src["text"], task.answer):
            continue
        hint = "video" if "frame" in src.get("type", "") else src.get("type", "")
        for aid in described_assets(src["text"], task, kind_hint=hint) or [a.id for a in task.assets]:
            items[aid].append(MediaItem(src["text"], "source", src.get("start"), src.get("end")))
    steps = task.meta.get("annotated_solution", [])
    for k, step in enumerate(steps):
        if leaks_answer(step, task.answer, last=k == len(steps) - 1):
            continue
        text = _STEP_PREFIX.sub("", step).strip()
        for aid in described_assets(text, task):
            items[aid].append(MediaItem(text, "step"))
    return items


def web_docs(tasks: list[Task]) -> list[ReplayDoc]:
    docs: list[ReplayDoc] = []
    for task in tasks:
        for i, src in enumerate(task.meta.get("sources", [])):
            if classify_source(src) != "web" or not src.get("text"):
                continue
            if leaks_answer(src["text"], task.answer) and _COMPUTED.search(src["text"]):
                continue  # a "search result" that is really the record's computation
            url, title = _source_url(task, i, src)
            docs.append(ReplayDoc(url=url, title=title, text=src["text"], task_id=task.id))
    return docs


def build_replay_services(tasks: list[Task]) -> Callable[[Task], dict[str, Any]]:
    """Build the shared search index once; return `services_for(task)` → {"search", "media", "replay": True}.
    Labels every given task `meta["replay"] = True`."""
    search = ReplaySearch(web_docs(tasks))
    cache: dict[str, dict[str, list[MediaItem]]] = {}
    for task in tasks:
        task.meta["replay"] = True
    logger.info("replay environment: %d web documents from %d records", len(search.docs), len(tasks))

    def services_for(task: Task) -> dict[str, Any]:
        task.meta["replay"] = True
        if task.id not in cache:
            cache[task.id] = media_items(task)
        return {"search": search, "media": ReplayMedia(task, cache[task.id]), "replay": True}

    return services_for


def main(argv: list[str]) -> None:
    tasks = load_tasks(argv[0], fmt="omnigaia")
    search = build_replay_services(tasks)(tasks[0])["search"]
    for hit in search.search_sync(" ".join(argv[1:]) or tasks[0].question, k=5):
        print(f"{hit.score:6.2f}  {hit.url}\n        {hit.snippet[:150]}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main(sys.argv[1:])

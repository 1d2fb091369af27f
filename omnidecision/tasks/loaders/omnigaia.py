"""OmniGAIA loader: the benchmark's `test_metadata.json` format (a JSON list of records) → `Task`s.

Records are irregular (see ../shared/data/omnigaia/README.md): `sources` may be a string or a list mixing dicts
(with `url`, `query`, `code`, `time_span`, ... next to `key_information`) and strings; `required_external_tools`,
`total_steps` or `task_type` may be missing or None; `omni_modal_input` lists 1-3+ assets. Every record is kept:
the raw record stays in `task.meta["raw"]`, the normalised sources in `task.meta["sources"]`.

Scoring (the benchmark's protocol, `OmniGaiaFormat.score`): the prediction is the last `<answer>…</answer>` (else
the last 20 words); lower-cased, whitespace-collapsed exact match is correct; otherwise the LLM judge decides
(`tasks.grading.judge_run`), and without one the string scorer stands in, labelled "…_offline".

    python -c "from omnidecision.tasks.loaders import load_tasks; \
        print(len(load_tasks('tests/data/omnigaia_dev/dev_metadata.json', fmt='omnigaia')))"
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from omnidecision.protocol.records import JudgeResult
from omnidecision.tasks.formats import TaskFormat, register_format
from omnidecision.tasks.grading import SCORER_METHODS, extract_prediction, get_scorer, normalize_em
from omnidecision.tasks.loaders.errors import TaskFileError, read_utf8, validate_task
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

ASSET_TYPES = ("video", "audio", "image")
# Where the benchmark's answers live: the Hugging Face domains (as the seed blocks them) and the benchmark's own
# repository. Entries apply per host and path prefix, to every spelling of them (tools/search.py `is_blocked`, which
# compares the normal form the page reader requests): github.com as a whole stays reachable.
BLOCKED_DOMAINS = ["huggingface.co", "hf.co", "github.com/RUC-NLPIR/OmniGAIA"]

_NUMBER = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?%?$")
_LIST_SPLIT = re.compile(r"\s*(?:;|\n)\s*")


def infer_answer_type(answer: str | None) -> str:
    """"number" if the answer parses as a number (commas, a leading $ or a trailing % allowed), "list" for short
    items separated by ';' or new lines (or ',' when every item is a short phrase), else "text".

    >>> [infer_answer_type(a) for a in ["1,930", "46.31%", "433 Eros", "a; b; c", "Kale, Broccoli, Orange"]]
    ['number', 'number', 'text', 'list', 'list']
    """
    if answer is None:
        return "text"
    s = answer.strip().lstrip("$").strip()
    if s and any(c.isdigit() for c in s) and _NUMBER.match(s):
        return "number"
    items = [x for x in _LIST_SPLIT.split(s) if x]
    if len(items) >= 2 and all(len(x.split()) <= 25 for x in items):
        return "list"
    items = [x.strip() for x in s.split(",") if x.strip()]
    if len(items) >= 2 and all(len(x.split()) <= 4 and not re.search(r"[.!?]\s", x) for x in items):
        return "list"
    return "text"


def _source_text(src: dict[str, Any]) -> str:
    parts = [str(src[k]) for k in ("description", "key_information", "content", "reference") if src.get(k)]
    return " — ".join(parts)


def _span(src: dict[str, Any]) -> tuple[float | None, float | None]:
    span = src.get("time_span")
    if isinstance(span, (list, tuple)) and len(span) == 2:
        try:
            return float(span[0]), float(span[1])
        except (TypeError, ValueError):
            return None, None
    return None, None


def normalize_sources(raw: Any) -> list[dict[str, Any]]:
    """The record's `sources` as a list of {"type", "text", "url", "query", "start", "end"} dicts, whatever shape
    they came in: a string (split on new lines), strings "Kind: text" in a list, or dicts with varying keys.

    >>> normalize_sources("Web_search result: 'X launched in 2023.'")[0]["type"]
    'web_search'
    """
    if raw is None:
        return []
    items = [line for line in raw.splitlines() if line.strip()] if isinstance(raw, str) else list(raw)
    if not isinstance(raw, (str, list)):
        items = [raw]
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict):
            start, end = _span(item)
            urls = item.get("urls") if isinstance(item.get("urls"), list) else []
            url = item.get("url") or (urls[0] if urls else None)
            out.append({
                "type": str(item.get("type") or "unknown").strip().lower(),
                "text": _source_text(item),
                "url": str(url) if url else None,
                "query": item.get("query"),
                "code": item.get("code"),
                "timestamp": item.get("timestamp"),
                "start": start,
                "end": end,
            })
        elif item is not None:
            text = str(item).strip()
            head, sep, rest = text.partition(":")
            kind = head.strip().lower().replace(" ", "_") if sep and len(head) <= 60 else "unknown"
            kind = "web_search" if kind.startswith("web_search") else kind
            out.append({"type": kind, "text": rest.strip() if sep else text, "url": None, "query": None, "code": None,
                        "timestamp": None, "start": None, "end": None})
    return out


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def omnigaia_task(rec: Any, index: int, path: str | Path, media_dir: str | Path | None = None) -> Task:
    """One benchmark record → Task. Raises `TaskFileError` naming the record and the raw field on bad input."""
    if not isinstance(rec, dict):
        raise TaskFileError(path, f"record {index}", None, f"expected a JSON object, got {type(rec).__name__}")
    rid = rec.get("id")
    record = f"record {index}" + (f" (id {rid})" if rid is not None else "")
    if rid is None or (isinstance(rid, str) and not rid.strip()):
        raise TaskFileError(path, record, "id", "missing record id")
    question = rec.get("question")
    if not isinstance(question, str) or not question.strip():
        raise TaskFileError(path, record, "question", "missing or empty question")
    answer = rec.get("answer")
    if answer is not None and not isinstance(answer, (str, int, float)):
        raise TaskFileError(path, record, "answer", f"expected a string, got {type(answer).__name__}")
    answer = None if answer is None else str(answer)

    inputs = rec.get("omni_modal_input") or []
    if isinstance(inputs, dict):
        inputs = [inputs]
    if not isinstance(inputs, list):
        raise TaskFileError(path, record, "omni_modal_input", f"expected a list, got {type(inputs).__name__}")
    assets: list[dict[str, Any]] = []
    windows: dict[str, list[float | None]] = {}
    missing_media: list[str] = []
    for i, item in enumerate(inputs):
        where = f"omni_modal_input.{i}"
        if not isinstance(item, dict):
            raise TaskFileError(path, record, where, f"expected an object, got {type(item).__name__}")
        kind = str(item.get("type") or "").strip().lower()
        if kind not in ASSET_TYPES:
            raise TaskFileError(path, record, f"{where}.type", f"unknown asset type {item.get('type')!r}")
        raw_path = item.get("path")
        aid = str(item.get("id") or (f"{kind}_{Path(raw_path).stem}" if raw_path else f"{kind}_{i}"))
        media: str | None = None
        if media_dir is not None and raw_path:
            candidate = Path(media_dir) / str(raw_path)
            if candidate.is_file():
                media = str(candidate.resolve())
            else:
                missing_media.append(str(raw_path))
        if item.get("t_start") is not None or item.get("t_end") is not None:
            windows[aid] = [item.get("t_start"), item.get("t_end")]
        assets.append({"id": aid, "type": kind, "path": media})

    tools = rec.get("required_external_tools")
    total_steps = rec.get("total_steps")
    data = {
        "id": str(rid),
        "question": question,
        "answer": answer,
        "answer_type": infer_answer_type(answer),
        "level": str(rec.get("Level") or rec.get("level") or "unknown").strip().lower(),
        "category": str(rec.get("category") or "unknown"),
        "source": "omnigaia",
        "assets": assets,
        "blocked_domains": list(BLOCKED_DOMAINS),
        "base_dir": str(Path(media_dir).resolve()) if media_dir is not None else None,
        "meta": {
            "raw": rec,
            "record_index": index,
            "task_type": rec.get("task_type"),
            "required_external_tools": _str_list(tools),
            "total_steps": total_steps if isinstance(total_steps, int) else None,
            "annotated_solution": [str(s) for s in (rec.get("annotated_solution") or []) if s is not None],
            "sources": normalize_sources(rec.get("sources")),
            "asset_windows": windows,
            "missing_media": missing_media,
            "replay": False,
        },
    }
    if isinstance(rec.get("annotated_solution"), str):
        data["meta"]["annotated_solution"] = [s for s in rec["annotated_solution"].splitlines() if s.strip()]
    return validate_task(data, path, record)


def load_omnigaia(path: str | Path, media_dir: str | Path | None = None) -> list[Task]:
    """All records of a `test_metadata.json`-format file (a list, or a dict of records keyed by id)."""
    path = Path(path)
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise TaskFileError(path, None, None, f"invalid JSON: {exc.msg} at line {exc.lineno}") from exc
    records = list(data.values()) if isinstance(data, dict) else data
    if not isinstance(records, list):
        raise TaskFileError(path, None, None, f"expected a list of records, got {type(data).__name__}")
    tasks = [omnigaia_task(rec, i, path, media_dir) for i, rec in enumerate(records)]
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise TaskFileError(path, f"record {ids.index(dup)} (id {dup})", "id", f"duplicate record id {dup!r}")
    missing = sum(1 for t in tasks if t.meta["missing_media"])
    if media_dir is not None and missing:
        logger.warning("%d of %d records have media files missing under %s", missing, len(tasks), media_dir)
    logger.info("loaded %d OmniGAIA records from %s", len(tasks), path)
    return tasks


@register_format("omnigaia")
class OmniGaiaFormat(TaskFormat):
    """`test_metadata.json`: a JSON list (or dict) of records with `omni_modal_input` / `annotated_solution`."""

    options = frozenset({"media_dir", "media_root"})
    needs_tools = True  # perception over the media files and web search: meaningless offline

    def detect(self, path: Path, first: dict[str, Any] | None) -> bool:
        return first is not None and ("omni_modal_input" in first or "annotated_solution" in first)

    def load(self, path: Path, **options: Any) -> list[Task]:
        root = options.pop("media_root", None)  # the recipe's environment.media_root is OmniGAIA's media_dir
        options.setdefault("media_dir", root)
        return load_omnigaia(path, **options)

    def score(self, task: Task, prediction: str | None, scorer: str) -> JudgeResult:
        pred = extract_prediction(prediction)
        if not pred:
            return JudgeResult(correct=False, method="empty_prediction", prediction=pred)
        if normalize_em(pred) == normalize_em(task.answer):
            return JudgeResult(correct=True, method="exact_match", prediction=pred)
        method = SCORER_METHODS[scorer]
        return JudgeResult(correct=get_scorer(scorer)(pred, task.answer or ""), method=f"{method}_offline",
                           prediction=pred,
                           detail=f"no LLM judge given: the {scorer} string scorer ({method}) stands in")

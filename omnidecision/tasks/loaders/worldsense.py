"""WorldSense loader: `worldsense_qa.json` (a dict keyed by video id; questions under `task0`…`taskN`, each with
`question`, `candidates` ["A. …", …], a letter `answer`, `task_domain`, `task_type`) → multiple-choice `Task`s.

Each video's `<video_id>.srt` (looked up in `srt_dir`, else next to the JSON file or in its `subtitles/` folder)
becomes the video asset's subtitles surrogate; `<video_id>.mp4` in `video_dir` (optional) its media file.
Scoring: the option letter extracted from the prediction equals the gold letter (no LLM judge).

    python -c "from omnidecision.tasks.loaders import load_tasks; \
        print(len(load_tasks('tests/data/worldsense/worldsense_qa.json')))"
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from omnidecision.protocol.records import JudgeResult
from omnidecision.tasks.formats import TaskFormat, register_format
from omnidecision.tasks.grading import score_choice
from omnidecision.tasks.loaders.errors import TaskFileError, read_utf8, validate_task
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

_TASK_KEY = re.compile(r"^task(\d+)$")
_CANDIDATE = re.compile(r"^\s*\(?([A-Z])[.):]\s*")
_VIDEO_EXTS = (".mp4", ".mkv", ".webm", ".mov")


def _find(folders: list[Path], name: str, exts: tuple[str, ...]) -> Path | None:
    for folder in folders:
        for ext in exts:
            p = folder / f"{name}{ext}"
            if p.is_file():
                return p.resolve()
    return None


def _duration(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def worldsense_task(
    video_id: str, key: str, q: Any, video: dict[str, Any], path: Path, subtitles: Path | None, media: Path | None
) -> Task:
    record = f"key {video_id!r}.{key}"
    if not isinstance(q, dict):
        raise TaskFileError(path, record, None, f"expected an object, got {type(q).__name__}")
    question = q.get("question")
    if not isinstance(question, str) or not question.strip():
        raise TaskFileError(path, record, "question", "missing or empty question")
    candidates = q.get("candidates")
    if not isinstance(candidates, list) or len(candidates) < 2 or not all(isinstance(c, str) for c in candidates):
        raise TaskFileError(path, record, "candidates", "expected a list of at least two strings")
    letters = []
    for i, cand in enumerate(candidates):
        m = _CANDIDATE.match(cand)
        letters.append(m.group(1) if m else chr(ord("A") + i))
    answer = q.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise TaskFileError(path, record, "answer", "missing answer letter")
    letter = answer.strip().strip("().").upper()[:1]
    if letter not in letters:
        raise TaskFileError(path, record, "answer", f"answer {answer!r} is not one of the options {letters}")
    data = {
        "id": f"{video_id}-{key}",
        "question": question.strip(),
        "answer": letter,
        "answer_type": "mcq",
        "options": candidates,
        "level": str(video.get("duration_level") or video.get("level") or "unrated"),
        "category": str(q.get("task_domain") or video.get("domain") or "unknown"),
        "source": "worldsense",
        "assets": [{
            "id": video_id,
            "type": "video",
            "path": str(media) if media else None,
            "duration": _duration(video.get("duration")),
            "subtitles": str(subtitles) if subtitles else None,
        }],
        "base_dir": str(path.resolve().parent),
        "meta": {
            "video_id": video_id,
            "question_key": key,
            "task_type": q.get("task_type"),
            "task_domain": q.get("task_domain"),
            "video": {k: v for k, v in video.items() if not _TASK_KEY.match(k)},
            "replay": False,
        },
    }
    return validate_task(data, path, record)


def load_worldsense(
    path: str | Path, srt_dir: str | Path | None = None, video_dir: str | Path | None = None,
    media_root: str | Path | None = None,
) -> list[Task]:
    """Every question of a `worldsense_qa.json`. Subtitles are looked up in `srt_dir`, else `media_root` (and its
    subtitles/, srt/), else next to the JSON file; videos in `video_dir`, else `media_root` (and its videos/),
    else next to the JSON file (and its videos/)."""
    path = Path(path)
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise TaskFileError(path, None, None, f"invalid JSON: {exc.msg} at line {exc.lineno}") from exc
    if not isinstance(data, dict):
        raise TaskFileError(path, None, None, f"expected an object keyed by video id, got {type(data).__name__}")
    folder = path.resolve().parent
    roots = [Path(media_root)] if media_root is not None else []
    srt_folders = [Path(srt_dir)] if srt_dir is not None else [
        *(r / sub for r in roots for sub in ("", "subtitles", "srt")), folder, folder / "subtitles", folder / "srt"]
    video_folders = [Path(video_dir)] if video_dir is not None else [
        *(r / sub for r in roots for sub in ("", "videos")), folder, folder / "videos"]
    tasks: list[Task] = []
    no_subs = no_video = 0
    for video_id, video in data.items():
        if not isinstance(video, dict):
            raise TaskFileError(path, f"key {video_id!r}", None, f"expected an object, got {type(video).__name__}")
        keys = sorted((k for k in video if _TASK_KEY.match(k)), key=lambda k: int(_TASK_KEY.match(k).group(1)))
        if not keys:
            raise TaskFileError(path, f"key {video_id!r}", "task0", "no questions (task0, task1, ...) for this video")
        subtitles = _find(srt_folders, video_id, (".srt", ".vtt"))
        no_subs += subtitles is None
        media = _find(video_folders, video_id, _VIDEO_EXTS)
        no_video += media is None
        batch = [worldsense_task(video_id, k, video[k], video, path, subtitles, media) for k in keys]
        if media is None and (media_root is not None or video_dir is not None):
            for t in batch:  # a media folder was given: the file it lacks is named (the live dry run lists it)
                t.meta["missing_media"] = [f"{video_id}{{{','.join(_VIDEO_EXTS)}}}"]
        tasks.extend(batch)
    if no_video and (media_root is not None or video_dir is not None):
        logger.warning("%d of %d videos have no video file (looked in %s)", no_video, len(data), video_folders)
    if no_subs:
        logger.warning("%d of %d videos have no subtitle file (looked in %s)", no_subs, len(data), srt_folders)
    logger.info("loaded %d WorldSense questions over %d videos from %s", len(tasks), len(data), path)
    return tasks


@register_format("worldsense")
class WorldSenseFormat(TaskFormat):
    """`worldsense_qa.json` (or its folder): videos keyed by id, questions under task0…taskN."""

    options = frozenset({"srt_dir", "video_dir", "media_root"})
    needs_tools = True  # perception over the videos (frames, audio): meaningless offline
    llm_judge = False  # a letter is right or wrong

    def detect(self, path: Path, first: dict[str, Any] | None) -> bool:
        if first is None:
            return path.is_dir() and (path / "worldsense_qa.json").is_file()
        return any(k.startswith("task") and k[4:].isdigit() for k in first)

    def load(self, path: Path, **options: Any) -> list[Task]:
        if path.is_dir():
            path = path / "worldsense_qa.json"
        return load_worldsense(path, **options)

    def score(self, task: Task, prediction: str | None, scorer: str) -> JudgeResult:
        return score_choice(task, prediction)

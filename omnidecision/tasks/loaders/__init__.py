"""Task loaders: `load_tasks(path, fmt="auto", **options)` for every supported format.

Formats: "jsonl" (one Task per line), "omnigaia" (`test_metadata.json`; option `media_dir`), "worldsense"
(`worldsense_qa.json` + one .srt per video; options `srt_dir`, `video_dir`), both taking `media_root` (the folder of
the downloaded media: OmniGAIA's `media_dir`; WorldSense's videos and subtitles, also in its videos/, subtitles/),
"synthetic" (a folder with tasks.jsonl and corpus.jsonl). "auto" picks by what the path is. Bad input raises
`TaskFileError` (file, record, field).

    python -c "from omnidecision.tasks.loaders import load_tasks; \
        print(len(load_tasks('tests/data/omnigaia_dev/dev_metadata.json')))"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnidecision.tasks.loaders.errors import TaskFileError, read_utf8
from omnidecision.tasks.loaders.jsonl import load_jsonl, load_synthetic_dir
from omnidecision.tasks.loaders.omnigaia import load_omnigaia
from omnidecision.tasks.loaders.worldsense import load_worldsense
from omnidecision.tasks.schema import Task

FORMATS: tuple[str, ...] = ("auto", "jsonl", "omnigaia", "worldsense", "synthetic")

__all__ = ["FORMATS", "TaskFileError", "detect_format", "load_tasks"]


def detect_format(path: str | Path) -> str:
    """The format of `path`: a folder with tasks.jsonl → synthetic (with worldsense_qa.json → worldsense);
    *.jsonl → jsonl; a JSON list of records with `omni_modal_input`/`annotated_solution` → omnigaia; a JSON object
    of videos with `task0`… → worldsense."""
    path = Path(path)
    if path.is_dir():
        if (path / "tasks.jsonl").is_file():
            return "synthetic"
        if (path / "worldsense_qa.json").is_file():
            return "worldsense"
        raise TaskFileError(path, None, None, "cannot detect the format of this folder (no tasks.jsonl)")
    if not path.is_file():
        raise TaskFileError(path, None, None, "no such file")
    if path.suffix == ".jsonl":
        return "jsonl"
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise TaskFileError(path, None, None, f"cannot detect the format: not JSON ({exc})") from exc
    records = list(data.values()) if isinstance(data, dict) else data if isinstance(data, list) else []
    first = next((r for r in records if isinstance(r, dict)), {})
    if "omni_modal_input" in first or "annotated_solution" in first:
        return "omnigaia"
    if any(k.startswith("task") and k[4:].isdigit() for k in first):
        return "worldsense"
    raise TaskFileError(path, None, None, f"cannot detect the format; pass fmt= (one of {', '.join(FORMATS[1:])})")


def load_tasks(path: str | Path, fmt: str = "auto", **options: Any) -> list[Task]:
    """Load every task of `path`. Options: media_dir (omnigaia); srt_dir, video_dir (worldsense)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown task format {fmt!r}; expected one of {', '.join(FORMATS)}")
    path = Path(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt != "synthetic" and not path.exists():
        raise TaskFileError(path, None, None, "no such file")
    allowed = {"omnigaia": {"media_dir", "media_root"},
               "worldsense": {"srt_dir", "video_dir", "media_root"}}.get(fmt, set())
    unknown = set(options) - allowed
    if unknown:
        raise ValueError(f"option(s) {sorted(unknown)} do not apply to format {fmt!r}")
    if fmt == "jsonl":
        return load_jsonl(path)
    if fmt == "synthetic":
        return load_synthetic_dir(path)
    if fmt == "omnigaia":
        root = options.pop("media_root", None)
        options.setdefault("media_dir", root)
        return load_omnigaia(path, **options)
    if path.is_dir():
        path = path / "worldsense_qa.json"
    return load_worldsense(path, **options)

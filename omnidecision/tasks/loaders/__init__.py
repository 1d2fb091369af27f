"""Task loaders: `load_tasks(path, fmt="auto", **options)` for every registered format.

Each format is a `tasks.formats.TaskFormat` in one module of this package, registered by name: "jsonl" (one Task
per line), "synthetic" (a folder with tasks.jsonl and corpus.jsonl), "omnigaia" (`test_metadata.json`; option
`media_dir`), "worldsense" (`worldsense_qa.json` + one .srt per video; options `srt_dir`, `video_dir`), both taking
`media_root` (the folder of the downloaded media). "auto" asks each format whether it recognises the path. Bad
input raises `TaskFileError` (file, record, field).

    python -c "from omnidecision.tasks.loaders import load_tasks; \
        print(len(load_tasks('tests/data/omnigaia_dev/dev_metadata.json')))"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnidecision.tasks.formats import TASK_FORMATS
from omnidecision.tasks.loaders.errors import TaskFileError, read_utf8
from omnidecision.tasks.schema import Task

__all__ = ["TaskFileError", "detect_format", "format_names", "load_tasks"]


def format_names() -> tuple[str, ...]:
    """"auto" and every registered format."""
    return ("auto", *TASK_FORMATS)


def detect_format(path: str | Path) -> str:
    """The format of `path`: the first registered format that recognises it by the path alone (a folder, a
    suffix), else by the first record of the JSON file."""
    path = Path(path)
    found = next((name for name, fmt in TASK_FORMATS.items() if fmt.detect(path, None)), None)
    if found is not None:
        return found
    if path.is_dir():
        raise TaskFileError(path, None, None, "cannot detect the format of this folder (no tasks.jsonl)")
    if not path.is_file():
        raise TaskFileError(path, None, None, "no such file")
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise TaskFileError(path, None, None, f"cannot detect the format: not JSON ({exc})") from exc
    records = list(data.values()) if isinstance(data, dict) else data if isinstance(data, list) else []
    first = next((r for r in records if isinstance(r, dict)), {})
    found = next((name for name, fmt in TASK_FORMATS.items() if fmt.detect(path, first)), None)
    if found is None:
        raise TaskFileError(path, None, None,
                            f"cannot detect the format; pass fmt= (one of {', '.join(TASK_FORMATS)})")
    return found


def load_tasks(path: str | Path, fmt: str = "auto", **options: Any) -> list[Task]:
    """Load every task of `path` in format `fmt` (a registered name, or "auto"); `options` go to the format's
    loader (the ones it does not take are an error)."""
    if fmt != "auto" and fmt not in TASK_FORMATS:
        raise ValueError(f"unknown task format {fmt!r}; expected one of {', '.join(sorted(format_names()))}")
    path = Path(path)
    if fmt == "auto":
        fmt = detect_format(path)
    loader = TASK_FORMATS[fmt]
    if loader.must_exist and not path.exists():
        raise TaskFileError(path, None, None, "no such file")
    unknown = set(options) - loader.options
    if unknown:
        raise ValueError(f"option(s) {sorted(unknown)} do not apply to format {fmt!r}")
    return loader.load(path, **options)

"""Generic JSONL task files (format "jsonl"): one `Task` (omnidecision.tasks.schema) per line; a synthetic-suite
folder (format "synthetic"). Their tasks are scored by the generic grading of `tasks.grading`.

Relative paths in a record (assets' media and surrogates, `corpus`, `base_dir`) resolve against the file's folder.

    python -c "from omnidecision.tasks.loaders import load_tasks; print(len(load_tasks('tests/data/tasks.jsonl')))"
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omnidecision.tasks.formats import TaskFormat, register_format
from omnidecision.tasks.loaders.errors import TaskFileError, not_utf8, validate_task
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

_ASSET_PATH_FIELDS = ("path", "subtitles", "transcript")


def _absolute(value: str | None, folder: Path) -> str | None:
    if not value or "://" in value:
        return value
    p = Path(value)
    return str(p if p.is_absolute() else (folder / p).resolve())


def resolve_paths(task: Task, folder: Path) -> Task:
    """A copy of `task` whose relative paths are absolute, resolved against `base_dir` (itself resolved against
    `folder`) or `folder`."""
    base = Path(_absolute(task.base_dir, folder) or folder)
    assets = [
        a.model_copy(update={f: _absolute(getattr(a, f), base) for f in _ASSET_PATH_FIELDS}) for a in task.assets
    ]
    return task.model_copy(update={"assets": assets, "corpus": _absolute(task.corpus, base), "base_dir": str(base)})


def load_jsonl(path: str | Path) -> list[Task]:
    """One task per non-blank line. Raises `TaskFileError` (file, "line N", field) on the first bad record."""
    path = Path(path)
    folder = path.resolve().parent
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise not_utf8(path, raw, exc, line=lineno) from exc
            if not line.strip():
                continue
            record = f"line {lineno}"
            try:
                data: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskFileError(path, record, None, f"invalid JSON: {exc.msg} at column {exc.colno}") from exc
            if not isinstance(data, dict):
                raise TaskFileError(path, record, None, f"expected a JSON object, got {type(data).__name__}")
            task = resolve_paths(validate_task(data, path, record), folder)
            if task.id in seen:
                first = seen[task.id]
                raise TaskFileError(path, record, "id", f"duplicate task id {task.id!r} (first on line {first})")
            seen[task.id] = lineno
            tasks.append(task)
    logger.info("loaded %d tasks from %s", len(tasks), path)
    return tasks


def load_synthetic_dir(folder: str | Path) -> list[Task]:
    """A synthetic-suite folder (`omnidecision tasks synth --out DIR`): DIR/tasks.jsonl, and DIR/corpus.jsonl as the
    page corpus of every task that names none. The suite's own DIR/tasks.jsonl stands for its folder."""
    folder = Path(folder)
    if folder.is_file() and folder.name == "tasks.jsonl":
        folder = folder.parent
    elif folder.is_file():
        raise TaskFileError(folder, None, None, "a synthetic suite is a folder holding tasks.jsonl (and corpus.jsonl),"
                            " not another file: pass that folder, or format jsonl to load this file as plain tasks")
    elif not folder.is_dir():
        raise TaskFileError(folder, None, None, "no such synthetic suite folder")
    tasks_file = folder / "tasks.jsonl"
    if not tasks_file.is_file():
        raise TaskFileError(folder, None, None, "not a synthetic task folder: tasks.jsonl is missing (write one with "
                            "`omnidecision tasks synth --out FOLDER`)")
    tasks = load_jsonl(tasks_file)
    corpus = folder / "corpus.jsonl"
    if corpus.is_file():
        tasks = [t if t.corpus else t.model_copy(update={"corpus": str(corpus.resolve())}) for t in tasks]
    return tasks


@register_format("jsonl")
class JsonlFormat(TaskFormat):
    """*.jsonl: one Task per line."""

    def detect(self, path: Path, first: dict[str, Any] | None) -> bool:
        return path.is_file() and path.suffix == ".jsonl"

    def load(self, path: Path, **options: Any) -> list[Task]:
        return load_jsonl(path)


@register_format("synthetic")
class SyntheticFormat(TaskFormat):
    """A folder with tasks.jsonl (and corpus.jsonl), as `omnidecision tasks synth` writes it."""

    must_exist = False  # load_synthetic_dir names a missing folder and how to write one

    def detect(self, path: Path, first: dict[str, Any] | None) -> bool:
        return path.is_dir() and (path / "tasks.jsonl").is_file()

    def load(self, path: Path, **options: Any) -> list[Task]:
        return load_synthetic_dir(path)

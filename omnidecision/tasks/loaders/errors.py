"""The one error every loader raises for a bad file or record, naming the file, the record and the field.

    >>> str(TaskFileError("tasks.jsonl", "line 3", "answer_type", "unknown answer type 'x'"))
    "tasks.jsonl: line 3: field 'answer_type': unknown answer type 'x'"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from omnidecision.tasks.schema import Task


class TaskFileError(ValueError):
    """A task file or one of its records is invalid. `record` is e.g. "line 3", "record 7 (id 35)" or
    "key 'abc'.task2"; `field` is the dotted field path (e.g. "assets.0.type"), None for whole-record errors."""

    def __init__(
        self, path: str | Path, record: str | None = None, field: str | None = None, message: str = ""
    ) -> None:
        self.path = str(path)
        self.record = record
        self.field = field
        self.message = message
        super().__init__(self.describe())

    def describe(self) -> str:
        parts = [self.path]
        if self.record is not None:
            parts.append(self.record)
        if self.field:
            parts.append(f"field {self.field!r}")
        return ": ".join([*parts, self.message]) if self.message else ": ".join(parts)


def loc_to_field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc)


def validate_task(data: dict[str, Any], path: str | Path, record: str) -> Task:
    """`Task.model_validate(data)`, turning a pydantic error into a `TaskFileError` naming the first bad field."""
    try:
        return Task.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = loc_to_field(first.get("loc", ())) or None
        extra = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise TaskFileError(path, record, field, f"{first.get('msg', 'invalid')}{extra}") from exc

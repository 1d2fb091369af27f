r"""The one error every loader raises for a bad file or record, naming the file, the record and the field.

    >>> str(TaskFileError("tasks.jsonl", "line 3", "answer_type", "unknown answer type 'x'"))
    "tasks.jsonl: line 3: field 'answer_type': unknown answer type 'x'"
    >>> try:
    ...     b"ok\n\xff".decode()
    ... except UnicodeDecodeError as exc:
    ...     print(not_utf8("t.jsonl", b"ok\n\xff", exc))
    t.jsonl: line 2: not UTF-8 text: byte 0xff at column 1 (invalid start byte); save the file as UTF-8
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


def not_utf8(path: str | Path, raw: bytes, exc: UnicodeDecodeError, line: int | None = None) -> TaskFileError:
    """The error for bytes that are not UTF-8: the line (counted in `raw` unless given) and the column of the bad
    byte. `raw` is the whole file, or the one line when `line` is given."""
    start = exc.start
    if line is None:
        line = raw.count(b"\n", 0, start) + 1
    column = start - (raw.rfind(b"\n", 0, start) + 1) + 1
    return TaskFileError(path, f"line {line}", None,
                         f"not UTF-8 text: byte 0x{raw[start]:02x} at column {column} ({exc.reason}); "
                         "save the file as UTF-8")


def read_utf8(path: str | Path) -> str:
    """The text of a UTF-8 file; `TaskFileError` naming the line and column of the first byte that is not UTF-8."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(path, raw, exc) from exc


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

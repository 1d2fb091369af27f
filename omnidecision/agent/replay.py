"""Replay check of trajectories: re-apply each run's events with the reducer and compare every snapshot.

Order: `initial_events`, then per step its `events` (the step's `ledger` must equal the state before them),
then `final_events`; `final_ledger` must equal the end state. Comparison is byte for byte on `model_dump_json`.

    omnidecision replay runs/trajectories.jsonl
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from omnidecision.ledger import EventRejected, Ledger, LedgerEvent, reduce
from omnidecision.protocol.records import RunRecord


@dataclass
class Mismatch:
    run_id: str
    step: int | str  # a step number, "initial", "final"
    reason: str

    def __str__(self) -> str:
        return f"run {self.run_id} step {self.step}: {self.reason}"


def _first_diff(a: str, b: str) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo, hi = max(0, i - 40), i + 40
    return f"first difference at char {i}: recorded {a[lo:hi]!r} vs replayed {b[lo:hi]!r}"


def _apply(state: Ledger, events: list[LedgerEvent], run_id: str, step: int | str) -> tuple[Ledger, Mismatch | None]:
    for k, event in enumerate(events):
        try:
            state = reduce(state, event)
        except EventRejected as exc:
            return state, Mismatch(run_id, step, f"event {k} ({event.kind}) rejected on replay: {exc.reason}")
    return state, None


def check_run(record: RunRecord) -> Mismatch | None:
    """The first snapshot that replay does not reproduce, or None when the whole run replays exactly."""
    state, bad = _apply(Ledger(), record.initial_events, record.run_id, "initial")
    if bad:
        return bad
    for step in record.steps:
        if step.ledger is not None:
            recorded, replayed = step.ledger.model_dump_json(), state.model_dump_json()
            if recorded != replayed:
                return Mismatch(record.run_id, step.step, "snapshot differs; " + _first_diff(recorded, replayed))
        state, bad = _apply(state, step.events, record.run_id, step.step)
        if bad:
            return bad
    state, bad = _apply(state, record.final_events, record.run_id, "final")
    if bad:
        return bad
    if record.final_ledger is not None:
        recorded, replayed = record.final_ledger.model_dump_json(), state.model_dump_json()
        if recorded != replayed:
            return Mismatch(record.run_id, "final", "final ledger differs; " + _first_diff(recorded, replayed))
    return None


class MalformedLine(ValueError):
    pass


def iter_records(path: str | Path) -> Iterator[tuple[int, RunRecord]]:
    """(line number, record) for each non-empty line; a malformed line raises MalformedLine naming file:line: a
    line that is not UTF-8 (binary, UTF-16) is named as such before any JSON is read from it."""
    p = Path(path)
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            problem = _not_text(raw, lineno)
            if problem:
                raise MalformedLine(f"{p}:{lineno}: {problem}; a trajectory file is UTF-8 JSONL")
            if not raw.strip():
                continue
            try:
                yield lineno, RunRecord.model_validate_json(raw)
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(x) for x in first.get("loc", ()))
                raise MalformedLine(f"{p}:{lineno}: {loc or '<root>'}: {first.get('msg')}") from exc


def _not_text(raw: bytes, lineno: int) -> str | None:
    """Why a line's bytes are not a UTF-8 text line (None: they are).

    >>> _not_text("{}".encode("utf-16"), 1), _not_text(b"\\x00\\x01", 3), _not_text(b'{"a": 1}', 1)
    ('UTF-16 text (a byte-order mark)', 'NUL bytes: a binary or UTF-16 file', None)
    """
    if lineno == 1 and raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text (a byte-order mark)"
    if b"\x00" in raw:
        return "NUL bytes: a binary or UTF-16 file"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start + 1} of the line: {raw[exc.start:exc.start + 1]!r})"
    return None


def check_file(path: str | Path) -> tuple[int, Mismatch | None]:
    """Check every run of a JSONL file; stops at the first mismatch. Returns (runs checked, mismatch); a file with
    no record (empty, blank lines only) raises MalformedLine: nothing checked is not an ok."""
    n = 0
    for _, record in iter_records(path):
        n += 1
        bad = check_run(record)
        if bad is not None:
            return n, bad
    if n == 0:
        raise MalformedLine(f"{path}: no records (an empty file): nothing to replay")
    return n, None

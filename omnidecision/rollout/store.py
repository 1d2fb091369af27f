"""The trajectory store: append-only JSONL shard files, one `RunRecord` per line, safe to kill at any moment.

- `shard_of(task_id, n)`: a stable hash (sha256), the same on every machine and Python process.
- `repair_tail(path)`: a file killed mid-write ends without a newline; the torn bytes are cut away before
  appending (a complete line, i.e. one ending in a newline, is never touched). Bytes that cannot be the start of a
  cut JSON line (binary, UTF-16, not UTF-8) are refused with the file untouched; callers read every complete line
  first (`finished_keys`), so a file that is not UTF-8 JSONL is refused before a byte of it is cut.
- One writer per shard: `RecordWriter` and `supersede_errors` hold the shard's lock (`outputs.exclusive`); the
  runner takes it before it reads what is done, so a second process on the same shard stops with one line
  (`busy_problem`: the same words, asked without taking the lock, by a dry run and by the run before it locks).
- `resume_problem(path)`: why a restart over a trajectory file would be refused (a complete line that is not a
  record, a last line that is not a cut JSON line), read without changing a byte: the run and its dry run ask it.
- `RecordWriter`: ONE writer task fed by a queue; each record is written as a single line, flushed and fsynced
  before the next, so lines never interleave and a finished run survives a SIGKILL. Every secret is hidden in what
  it writes, as in `merge` and `write_json_redacted` (protocol/redaction.py: a server's error body may echo a key).
- `read_records` / `finished_keys` / `trajectory_files` / `merge`: reading for resume, harvest and merge.
  A malformed line raises `TrajectoryFileError` naming file:line and the field.
- `supersede_errors(path)`: before a restart retries the runs that ended with outcome `error`, their records move to
  `errors-superseded*.jsonl` next to the shard (outside `trajectories*.jsonl`, so harvest, reports, the viewer and
  merge never read them and never see two records of one run).

    python -c "from omnidecision.rollout.store import shard_of; print(shard_of('synth-0001', 4))"
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import BinaryIO

from pydantic import ValidationError

from omnidecision.outputs import OutputBusy, check_free, exclusive, write_text_atomic
from omnidecision.protocol.records import RunRecord, run_key
from omnidecision.protocol.redaction import redact_text
from omnidecision.rollout.deprecated import aliases

logger = logging.getLogger(__name__)

SHARD_GLOB = "trajectories*.jsonl"
SUPERSEDED_PREFIX = "errors-superseded"


class TrajectoryFileError(ValueError):
    """A trajectory line that does not parse; the message names file:line and the field."""


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def shard_of(task_id: str, n: int) -> int:
    """The shard (0..n-1) of a task id; stable across processes and machines.

    >>> shard_of("t1", 1)
    0
    >>> shard_of("synth-0001", 4) == shard_of("synth-0001", 4)
    True
    """
    return stable_hash(task_id) % n


def torn_tail_problem(tail: bytes) -> str | None:
    """Why `tail` (the bytes after a file's last newline) is not the start of a JSON line cut by a kill, or None.

    >>> torn_tail_problem(b'{"run_id": "t1", "ques'), torn_tail_problem('{"a": "\u00e9'.encode()[:-1])
    (None, None)
    >>> torn_tail_problem("{".encode("utf-16"))
    'not UTF-8 JSON (a binary or UTF-16 file?)'
    """
    start = tail.lstrip()
    if b"\x00" in tail or (start and not start.startswith(b"{")):
        return "not UTF-8 JSON (a binary or UTF-16 file?)"
    try:
        tail.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data":  # a character cut in two by the kill is a torn line
            return f"not UTF-8 ({exc.reason} at byte {exc.start})"
    return None


def _tail(fh: BinaryIO, size: int) -> tuple[int, str | None]:
    """(where the bytes after the last newline start, why they are not a cut JSON line or None) of an open file."""
    # scan back from the end for the last newline, in blocks
    pos, block, cut = size, 1 << 16, 0
    while pos > 0:
        start = max(0, pos - block)
        fh.seek(start)
        chunk = fh.read(pos - start)
        k = chunk.rfind(b"\n")
        if k >= 0:
            cut = start + k + 1
            break
        pos = start
    if cut == size:
        return cut, None
    fh.seek(cut)
    problem = torn_tail_problem(fh.read(min(size - cut, 1 << 16)))
    if problem is None:
        return cut, None
    return cut, (f"{fh.name}: its last {size - cut} bytes (after the last newline) are {problem}; refused, nothing "
                 "changed")


def tail_problem(path: str | Path) -> str | None:
    """Why `repair_tail(path)` would refuse the file (its words), read without changing a byte; None when the file
    ends in a newline, ends in a cut JSON line (cut away by the run), or does not exist."""
    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return None
    with p.open("rb") as fh:
        return _tail(fh, p.stat().st_size)[1]


def repair_tail(path: str | Path) -> int:
    """Cut a torn last line (bytes after the final newline) away; returns the number of bytes dropped. Tail bytes
    that are not a cut JSON line raise `TrajectoryFileError` and nothing is cut (read every complete line first:
    `finished_keys`)."""
    p = Path(path)
    if not p.is_file():
        return 0
    size = p.stat().st_size
    if size == 0:
        return 0
    with p.open("rb+") as fh:
        cut, problem = _tail(fh, size)
        dropped = size - cut
        if problem:
            raise TrajectoryFileError(problem)
        if dropped:
            fh.truncate(cut)
            fh.flush()
            os.fsync(fh.fileno())
            logger.warning("%s: dropped a torn last line (%d bytes)", p, dropped)
    return dropped


def resume_problem(path: str | Path) -> str | None:
    """Why a restart over the trajectory file `path` is refused before it writes (the words of the
    `TrajectoryFileError` that reading it raises): a complete line that is not a record (`finished_keys`: file:line
    and the field), a last line that is not a JSON line cut by a kill (`tail_problem`); None when it resumes or does
    not exist. Reads every line, changes nothing: the run asks it before its first write, a dry run to say so."""
    try:
        finished_keys(path)
    except TrajectoryFileError as exc:
        return str(exc)
    return tail_problem(path)


def busy_problem(target: str | Path) -> str | None:
    """Why a run that writes `target` (a shard or trajectory file) would stop at its lock: another process holds it
    (`outputs.check_free`, through `holder_of`: it writes nothing), in the words `outputs.exclusive` refuses with;
    None when it is free or this process holds it. The run asks it before it locks (`rollout.output.one_writer`), a
    dry run to say so."""
    try:
        check_free(target)
    except OutputBusy as exc:
        return str(exc)
    return None


def parse_line(line: str | bytes, path: str | Path, lineno: int) -> RunRecord:
    """One trajectory line → RunRecord, or TrajectoryFileError naming file:line and the field."""
    try:
        return RunRecord.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ())) or "<root>"
        if first.get("type") == "json_invalid":
            raise TrajectoryFileError(f"{path}:{lineno}: not valid JSON: {first.get('msg')}") from exc
        raise TrajectoryFileError(f"{path}:{lineno}: field {loc}: {first.get('msg')}") from exc


def read_records(path: str | Path, *, skip_bad: bool = False, bad: list[str] | None = None
                 ) -> Iterator[tuple[int, RunRecord]]:
    """(line number, record) for each non-empty line. A malformed line raises TrajectoryFileError, or with
    `skip_bad` is skipped (its message appended to `bad`). A torn last line (no newline: a write cut short) is
    always skipped, and its message appended to `bad` as well (a reader that counts what it skipped counts it)."""
    p = Path(path)
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            if not raw.endswith(b"\n"):
                logger.warning("%s:%d: torn last line ignored (%d bytes)", p, lineno, len(raw))
                if bad is not None:
                    bad.append(f"{p}:{lineno}: torn last line skipped ({len(raw)} bytes, no newline)")
                continue
            try:
                yield lineno, parse_line(raw, p, lineno)
            except TrajectoryFileError as exc:
                if not skip_bad:
                    raise
                if bad is not None:
                    bad.append(str(exc))


def finished_keys(path: str | Path) -> set[tuple[str, int]]:
    """`run_key` of every complete record in `path`: (task_id, sample), a branch's own run id for its task id (empty
    when the file does not exist)."""
    p = Path(path)
    if not p.is_file():
        return set()
    return {run_key(r) for _, r in read_records(p)}


def load_records(out: str | Path) -> list[RunRecord]:
    """Every complete record under OUT/trajectories*.jsonl (or in OUT itself, a trajectories file), first one per
    `run_key` ((task_id, sample); a branch of a run is its own)."""
    seen: dict[tuple[str, int], RunRecord] = {}
    files = [Path(out)] if Path(out).is_file() else sorted(Path(out).glob("trajectories*.jsonl"))
    for f in files:
        for _, r in read_records(f):
            seen.setdefault(run_key(r), r)
    return list(seen.values())


def superseded_path(path: str | Path) -> Path:
    """Where `supersede_errors` moves the error records of a shard file: a name outside `SHARD_GLOB`.

    >>> superseded_path("runs/x/trajectories.shard-0-of-4.jsonl").name
    'errors-superseded.shard-0-of-4.jsonl'
    >>> superseded_path("runs/x/trajectories.jsonl").name
    'errors-superseded.jsonl'
    """
    p = Path(path)
    rest = p.name[len("trajectories"):] if p.name.startswith("trajectories") else f".{p.name}"
    return p.with_name(SUPERSEDED_PREFIX + rest)


def supersede_errors(path: str | Path) -> int:
    """Move every record with outcome `error` out of `path` into `superseded_path(path)`, so that a restart runs
    those (task_id, sample) pairs again and readers never see two records of one run. Returns how many moved.

    Crash-safe in this order: the error lines are appended (fsynced) to the side file first, then the shard is
    rewritten without them through a temp file and a rename. A kill in between leaves them in both places; the next
    start moves them again (the side file is a log of what was retried, never read as results). Lines are moved
    byte for byte. A malformed line raises `TrajectoryFileError` (as `finished_keys` does) and nothing moves."""
    p = Path(path)
    if not p.is_file():
        return 0
    with exclusive(p):  # no appender between the read and the rename (its lines would go with the old inode)
        return _supersede(p)


def _supersede(p: Path) -> int:
    keep: list[bytes] = []
    moved: list[bytes] = []
    with p.open("rb") as fh:  # every complete line parsed before the torn tail is cut: a bad file stays untouched
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip() or not raw.endswith(b"\n"):
                continue
            (moved if parse_line(raw, p, lineno).outcome == "error" else keep).append(raw)
    repair_tail(p)
    if not moved:
        return 0
    side = superseded_path(p)
    with side.open("ab") as fh:
        fh.write(b"".join(moved))
        fh.flush()
        os.fsync(fh.fileno())
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        fh.write(b"".join(keep))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)
    logger.info("%s: %d error records moved to %s (their runs are retried)", p, len(moved), side)
    return len(moved)


def trajectory_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files given directly, plus every `trajectories*.jsonl` inside each folder given (sorted)."""
    files: list[Path] = []
    for item in paths:
        p = Path(item)
        if p.is_dir():
            found = sorted(p.glob(SHARD_GLOB))
            if not found:
                raise TrajectoryFileError(f"{p}: no {SHARD_GLOB} files in this folder")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise TrajectoryFileError(f"{p}: no such file or folder")
    return files


def merge(paths: Iterable[str | Path], out_file: str | Path) -> tuple[int, int]:
    """Concatenate the records of every shard into `out_file` (written to a temp file, then renamed), keeping the
    first record per (task_id, sample). Returns (records written, duplicates dropped)."""
    out = Path(out_file)
    dropped = [0]
    records = merge_records(paths, out, dropped)  # refuses a bad --out before anything is written
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    written = 0
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(redact_text(rec.model_dump_json()) + "\n")
                written += 1
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)  # a bad line stops the merge: no temp file left
    return written, dropped[0]


def merge_records(paths: Iterable[str | Path], out_file: str | Path, dropped: list[int]) -> Iterator[RunRecord]:
    """The records `merge` writes, in order: the first per (task_id, sample) of every shard file but `out_file`;
    `dropped[0]` counts the duplicates as they are read. An `out_file` that is one of the files given, or a folder,
    is refused here, before anything is read (`collect merge --dry-run` counts the records through this)."""
    out = Path(out_file)
    paths = list(paths)
    given = [p for p in map(Path, paths) if p.is_file() and p.resolve() == out.resolve()]
    if given:  # its records would be skipped as the output, then replaced by the others': lost
        raise TrajectoryFileError(f"--out {out} is one of the files to merge ({given[0]}); choose another --out")
    if out.is_dir():
        raise TrajectoryFileError(f"--out {out} is a folder: the merged trajectory file is a file")

    def records() -> Iterator[RunRecord]:
        seen: set[tuple[str, int]] = set()
        for f in trajectory_files(paths):
            if f.resolve() == out.resolve():
                continue
            for _, rec in read_records(f):
                key = run_key(rec)
                if key in seen:
                    dropped[0] += 1
                    continue
                seen.add(key)
                yield rec

    return records()


class RecordWriter:
    """The single writer of one shard file: `await put(record)` from any task; lines never interleave.

        async with RecordWriter(path) as w:
            await w.put(record)
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.queue: asyncio.Queue[RunRecord | None] = asyncio.Queue()
        self.written = 0
        self._task: asyncio.Task[None] | None = None
        self._fh = None
        self._lock: AbstractContextManager[Path] = nullcontext(self.path)

    async def __aenter__(self) -> RecordWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = exclusive(self.path)  # one appender per shard, across processes
        self._lock.__enter__()
        try:
            repair_tail(self.path)
            self._fh = self.path.open("ab")
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        self._task = asyncio.create_task(self._run())
        return self

    async def put(self, record: RunRecord) -> None:
        if self._task is not None and self._task.done():
            self._task.result()  # re-raise the writer's failure (disk full, …)
        await self.queue.put(record)

    def _write(self, data: bytes) -> None:
        assert self._fh is not None
        self._fh.write(data)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    async def _run(self) -> None:
        while True:
            record = await self.queue.get()
            if record is None:
                return
            data = (redact_text(record.model_dump_json()) + "\n").encode("utf-8")  # no key in a record
            await asyncio.to_thread(self._write, data)
            self.written += 1

    async def __aexit__(self, *exc: object) -> None:
        await self.queue.put(None)
        try:
            if self._task is not None:
                await self._task
        finally:
            if self._fh is not None:
                self._fh.close()
            self._lock.__exit__(None, None, None)


def append_record(path: str | Path, record: RunRecord) -> None:
    """Append one record to a trajectory file outside a collection (a branch): under the file's lock, after every
    complete line parsed and a torn tail cut (a file that is not JSONL is refused untouched), redacted, fsynced."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(p):
        finished_keys(p)
        repair_tail(p)
        with p.open("ab") as fh:
            fh.write((redact_text(record.model_dump_json()) + "\n").encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())


def write_json_redacted(path: str | Path, data: object) -> None:
    """Write JSON to `path` atomically (`outputs.write_text_atomic`), every secret hidden (protocol/redaction.py):
    `outputs.write_json_atomic` with the redaction its name says (it was `write_json_atomic` here, the name of the
    writer that hides nothing)."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    write_text_atomic(path, redact_text(text) + "\n")  # no key in a manifest


# moved or renamed, one release (CHANGELOG.md): the shard file's name beside the other names of a run's output; the
# redacting writer named for what it adds to `outputs.write_json_atomic`
__getattr__ = aliases(__name__, {"shard_path": "omnidecision.rollout.output:shard_path",
                                 "write_json_atomic": "write_json_redacted"}, globals())

"""Where commands write: one writer per output, outputs that never overwrite their inputs, files never half-written.

- `write_text_atomic` / `write_json_atomic`: a temp sibling, fsynced, renamed into place: a kill at any moment leaves
  the old content or the new one, never an empty or torn file (a restart reads state files back).
- `exclusive(target)`: an exclusive `fcntl.flock` on a lock file next to `target` (`.NAME.lock`), held until the
  block ends, re-entrant within one process. A second process gets `OutputBusy`, one line naming the holder (host,
  pid, since: written into the lock file). The lock file is never deleted: deleting it would let a third process
  lock a fresh inode while the second still holds the old one.
- `output_problems` / `check_output`: an `--out` folder that is, contains or is inside one of the command's inputs is
  refused (even with `replace`); so is a non-empty folder this project did not write (no `MARKER` file in it), unless
  the user said `replace`. `overlap_problems`: the overlap part alone (a trainer's `output_dir`, written in place
  and resumed, is checked with it).
- `staged_output(out, inputs, command=...)`: the checks, then a temp sibling folder to write into, renamed into place
  when the block ends without an error (the old output moved aside first, then removed; a failure removes only the
  temp folder). Nothing the command did not create is removed, except an old output the checks allowed to replace.

- `dry_run_stdout()` / `report_out()`: while a `--dry-run` runs, stdout carries its report alone (what libraries
  print goes to stderr): scripts parse it.

    python -c "from omnidecision.outputs import output_problems; print(output_problems('data/h', ['data']))"
"""

from __future__ import annotations

import contextvars
import datetime as _dt
import fcntl
import json
import logging
import os
import shutil
import socket
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import TextIO

logger = logging.getLogger(__name__)

# left in every folder a command writes through `staged_output`; no data suffix, so dataset loaders never read it
MARKER = ".omnidecision-out"


class OutputError(ValueError):
    """An output the command refuses to write; the message is one line naming the path."""


class OutputBusy(OutputError):
    """Another process holds the output's lock; the message names it (host, pid, since)."""


# -- atomic files ------------------------------------------------------------------------------------------------
def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temp sibling (unique per process: shards on other nodes may write the same
    file), fsynced, then renamed: readers and restarts see the old content or the new, never a half-written file."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomic(path: str | Path, data: object, *, indent: int | None = 2) -> None:
    """`data` as JSON (UTF-8, a final newline) written by `write_text_atomic`."""
    write_text_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False, default=str) + "\n")


# -- one writer per output ---------------------------------------------------------------------------------------
_HELD: dict[Path, list[int]] = {}  # lock file -> [fd, depth]: the same process may enter twice (collect → runner)
_HELD_GUARD = threading.Lock()


def lock_path(target: str | Path) -> Path:
    """The lock file of an output file or folder: `.NAME.lock` beside it (in the output folder for a shard file).

    >>> lock_path("runs/x/trajectories.shard-0-of-1.jsonl").as_posix()
    'runs/x/.trajectories.shard-0-of-1.jsonl.lock'
    """
    p = Path(target)
    return p.with_name(f".{p.name}.lock")


def _holder(fd: int) -> str:
    """What the holder wrote into its lock file, as words; the holder may not have written it yet."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
    except (OSError, ValueError):
        info = {}
    if not info:
        return "another process (it has not written its name yet)"
    return f"host {info.get('host')}, pid {info.get('pid')}, since {info.get('since')}"


@contextmanager
def exclusive(target: str | Path, what: str = "--out") -> Iterator[Path]:
    """Hold the exclusive lock of `target` (an output file or folder) for the block; `OutputBusy` when another
    process holds it. Re-entrant in one process (the lock is the process's, not the block's)."""
    lock = lock_path(target).absolute()
    lock.parent.mkdir(parents=True, exist_ok=True)
    with _HELD_GUARD:
        held = _HELD.get(lock)
        if held is not None:
            held[1] += 1
        else:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)  # never O_TRUNC: the holder's name is in it
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise _busy(target, what, holder, lock) from None
            since = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": since}).encode(), 0)
            _HELD[lock] = [fd, 1]
    try:
        yield lock
    finally:
        with _HELD_GUARD:
            held = _HELD[lock]
            held[1] -= 1
            if held[1] == 0:
                del _HELD[lock]
                os.close(held[0])  # closing the last descriptor releases the flock


def _busy(target: str | Path, what: str, holder: str, lock: Path) -> OutputBusy:
    return OutputBusy(f"{target}: another process is writing this {what} ({holder}; lock {lock}); one writer per "
                      f"output: wait for it to end or choose another {what}")


def check_free(target: str | Path, what: str = "--out") -> None:
    """`OutputBusy`, in `exclusive`'s words, when another process holds `target`'s lock now; writes nothing (a dry
    run asks this where its run takes the lock)."""
    holder = holder_of(target)
    if holder is not None:
        raise _busy(target, what, holder, lock_path(target).absolute())


def holder_of(target: str | Path) -> str | None:
    """Who holds `target`'s lock now (as `exclusive`'s refusal names them), None when nobody does; writes nothing,
    so a dry run can say that its run would be refused."""
    lock = lock_path(target).absolute()
    if not lock.exists() or lock in _HELD:
        return None
    try:
        fd = os.open(lock, os.O_RDONLY)  # flock needs no write access; the holder's name stays as it is
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder(fd)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# -- outputs never overwrite inputs ------------------------------------------------------------------------------
def _overlap(out: Path, source: Path) -> str | None:
    """How `out` overlaps `source` (both resolved), or None.

    >>> _overlap(Path("/d"), Path("/d/harvest"))
    'contains'
    >>> _overlap(Path("/d/harvest/x"), Path("/d/harvest")), _overlap(Path("/d/a"), Path("/d/ab"))
    ('is inside', None)
    """
    if out == source:
        return "is"
    if out in source.parents:
        return "contains"
    if source in out.parents:
        return "is inside"
    return None


def overlap_problems(out: str | Path, inputs: Iterable[str | Path | None], *, what: str = "--out",
                     ways: tuple[str, ...] = ("is", "contains", "is inside")) -> list[str]:
    """One line per input that `out` overlaps in one of `ways` ("is", "contains", "is inside"); a name that is not
    a local path (a hub id) overlaps nothing it does not name."""
    dst = Path(out).resolve()
    problems: list[str] = []
    for item in inputs:
        if item is None or str(item) == "":
            continue
        how = _overlap(dst, Path(item).resolve())
        if how in ways:
            problems.append(f"{what} {out} {how} the input {item}: writing it would destroy what it reads; "
                            "choose a folder outside every input")
    return problems


def output_problems(out: str | Path, inputs: Iterable[str | Path | None], *, replace: bool = False) -> list[str]:
    """Why `out` (a folder the command writes whole) must not be written, one line each; empty when it may be.
    `inputs`: what the command reads (a name that is not a local path, e.g. a hub id, never overlaps)."""
    dst = Path(out).resolve()
    problems = overlap_problems(out, inputs)
    if dst.exists() and not dst.is_dir():
        problems.append(f"--out {out} is a file, not a folder")
    elif dst.is_dir() and not replace and not (dst / MARKER).is_file() and any(dst.iterdir()):
        problems.append(f"--out {out} is a non-empty folder this project did not write (no {MARKER} in it); "
                        "choose a new folder, or pass --replace to replace it")
    return problems


def check_output(out: str | Path, inputs: Iterable[str | Path | None], *, replace: bool = False) -> None:
    """`OutputError` with the first of `output_problems`, before anything is read or written."""
    problems = output_problems(out, inputs, replace=replace)
    if problems:
        raise OutputError(problems[0])


def _remove_ours(path: Path) -> None:
    """Remove a folder this module made (a temp or an old output moved aside by `staged_output`)."""
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def staged_output(out: str | Path, inputs: Iterable[str | Path | None] = (), *, command: str,
                  replace: bool = False) -> Iterator[Path]:
    """Check `out` (`check_output`), yield a fresh temp sibling folder to write into, and on success mark it
    (`MARKER`, naming `command`) and rename it to `out`; on failure only the temp folder goes."""
    dst = Path(out)
    check_output(dst, inputs, replace=replace)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.parent / f".{dst.name}.tmp-{os.getpid()}"
    _remove_ours(tmp)  # a leftover of a killed run with this pid: ours by its name
    tmp.mkdir()
    try:
        yield tmp
        # same content on every run (a rerun's folder compares equal byte for byte)
        (tmp / MARKER).write_text(json.dumps({"written_by": f"omnidecision {command}"}) + "\n", encoding="utf-8")
        old = dst.parent / f".{dst.name}.old-{os.getpid()}"
        if dst.exists():
            os.replace(dst, old)
        os.replace(tmp, dst)
        _remove_ours(old)  # an earlier output of this project, an empty folder, or one the user said to replace
    finally:
        _remove_ours(tmp)


# Where a dry run's report goes while `dry_run_stdout` holds stdout for it (None: sys.stdout).
_REPORT_OUT: contextvars.ContextVar[TextIO | None] = contextvars.ContextVar("report_out", default=None)


@contextmanager
def dry_run_stdout(active: bool = True) -> Iterator[None]:
    """While a dry run runs, stdout carries its report alone (preflight.emit, `report_out`) and whatever else is
    printed on stdout goes to stderr: DeepSpeed logs "Setting accelerator to CPU" on stdout when it is imported, C
    extensions print banners, and scripts parse the report (scripts/slurm/grpo.slurm reads the plan's
    `generation_server` with json.load; users pipe it to `jq`). At the file-descriptor level where stdout is a real
    file, so writes from C move too, and so does a logging handler bound to `sys.stdout` at import; elsewhere
    (click's CliRunner) Python-level prints only. The `omnidecision` group enters it for every command given
    `--dry-run` (cli.py)."""
    if not active or _REPORT_OUT.get() is not None:  # off, or already held by an outer dry run
        yield
        return
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        fd = None
    if fd is None:
        token = _REPORT_OUT.set(sys.stdout)
        try:
            with redirect_stdout(sys.stderr):
                yield
        finally:
            _REPORT_OUT.reset(token)
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    out = os.fdopen(os.dup(saved), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), fd)
    token = _REPORT_OUT.set(out)
    try:
        yield
    finally:
        _REPORT_OUT.reset(token)
        out.close()
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)


def report_out() -> TextIO:
    """The stream a dry run prints its report, plan or script on: stdout, held for it by `dry_run_stdout`."""
    return _REPORT_OUT.get() or sys.stdout

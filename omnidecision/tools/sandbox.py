"""Run model-written Python in a confined child process (never in the agent's process).

Confinement (see _sandbox_launch.py): separate process group, empty network namespace, private /tmp, CPU-time,
address-space, process-count, file-size and open-file limits, a throwaway unprivileged uid when the host runs as
root, no_new_privs, a fresh scratch working directory removed afterwards, a minimal environment (no API keys), and
`python -I -S`. The host enforces the wall-time limit and the output cap and kills every process of the run.

    python -m omnidecision.tools.sandbox 'print(sum(range(10)))'
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import shutil
import signal
import stat
import sys
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

logger = logging.getLogger(__name__)

LAUNCHER = Path(__file__).with_name("_sandbox_launch.py")
MARKER = b"\x00OMNIDECISION-SANDBOX "
LimitHit = str  # "timeout" | "cpu" | "memory" | "output" | "nproc" | "file_size"


@dataclass
class SandboxLimits:
    wall_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 512
    nproc: int = 32
    fsize_kb: int = 16 * 1024
    nofile: int = 64
    output_bytes: int = 64_000

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> SandboxLimits:
        """Limits from `settings["sandbox"]` (a dict of the field names), defaults elsewhere."""
        given = dict(settings.get("sandbox", {}))
        unknown = set(given) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"settings.sandbox: unknown limit(s) {sorted(unknown)}")
        return cls(**given)


class SandboxResult(BaseModel):
    stdout: str = ""
    stderr: str = ""
    exit_status: int | None = None
    limit_hit: LimitHit | None = None
    truncated: bool = False
    isolation: dict[str, str] = Field(default_factory=dict)
    error: str | None = None


def _world_executable(path: Path) -> bool:
    try:
        if not path.stat().st_mode & stat.S_IXOTH:
            return False
        return all(p.stat().st_mode & stat.S_IXOTH for p in path.parents)
    except OSError:
        return False


@lru_cache(maxsize=4)
def sandbox_python(preferred: str | None = None) -> str:
    """An interpreter the sandbox user can execute: the host's own when reachable, else the system python3."""
    if preferred:
        return preferred
    if os.geteuid() != 0:
        return sys.executable
    candidates = [sys.executable, getattr(sys, "_base_executable", ""), "/usr/bin/python3", shutil.which("python3")]
    for c in candidates:
        if c and _world_executable(Path(c).resolve()) and _world_executable(Path(c).resolve().parent.parent / "lib"):
            return str(Path(c).resolve())
    raise RuntimeError("no python interpreter reachable by an unprivileged user; set settings.sandbox_python")


def _processes_of(uid: int) -> list[int]:
    """Live (non-zombie) processes whose owner is `uid`."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    state = fh.read().rpartition(b")")[2].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                pids.append(int(entry))
    return pids


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of the throwaway uid until none is left (a fork bomb may respawn in between)."""
    for _ in range(200):
        pids = _processes_of(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    logger.warning("sandbox uid %d still has processes after cleanup", uid)


def _kill_run(pgid: int, uid: int | None) -> None:
    """Kill the run's process group, then (as root) every process of its throwaway uid."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid is not None:
        _kill_uid(uid)


def _pick_uid() -> int:
    while True:
        uid = random.randint(1_000_000, 1_999_999)
        if not _processes_of(uid):
            return uid


async def _read_capped(stream: asyncio.StreamReader, cap: int, sink: bytearray, over: asyncio.Event) -> None:
    while chunk := await stream.read(65536):
        room = cap - len(sink)
        if room > 0:
            sink += chunk[:room]
        if len(chunk) > room:
            over.set()
            return


def _classify(rc: int | None, stderr: str, limits: SandboxLimits) -> LimitHit | None:
    if rc is None:
        return None
    if rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return "cpu"
    if rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or "File too large" in stderr:
        return "file_size"
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        return "memory"
    if "BlockingIOError" in stderr or "Resource temporarily unavailable" in stderr:
        return "nproc"
    return None


async def run_python(
    code: str, limits: SandboxLimits | None = None, python: str | None = None, site: bool = False
) -> SandboxResult:
    """Run `code` as a script in the sandbox and return its (capped) output, exit status and any limit hit."""
    limits = limits or SandboxLimits()
    root = os.geteuid() == 0
    uid = _pick_uid() if root else None
    scratch = Path(tempfile.mkdtemp(prefix="od-sandbox-"))
    try:
        (scratch / "main.py").write_text(code, encoding="utf-8")
        if uid is not None:
            for p in (scratch, scratch / "main.py"):
                os.chown(p, uid, uid)
        nproc = limits.nproc if uid is not None else len(_processes_of(os.getuid())) + limits.nproc
        cfg = {
            "scratch": str(scratch),
            "uid": uid,
            "python": sandbox_python(python),
            "site": site,
            "cpu_s": limits.cpu_s,
            "memory_mb": limits.memory_mb,
            "nproc": nproc,
            "fsize_kb": limits.fsize_kb,
            "nofile": limits.nofile,
            "env": {
                "PATH": "/usr/bin:/bin",
                "HOME": "/tmp/work" if root else str(scratch),
                "TMPDIR": "/tmp" if root else str(scratch),
                "LANG": "C.UTF-8",
                "LC_ALL": "C.UTF-8",
            },
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", str(LAUNCHER), json.dumps(cfg),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, env={"PATH": "/usr/bin:/bin"}, cwd=str(scratch),
        )  # fmt: skip
        out, err, over = bytearray(), bytearray(), asyncio.Event()
        readers = asyncio.ensure_future(
            asyncio.gather(
                _read_capped(proc.stdout, limits.output_bytes, out, over),  # type: ignore[arg-type]
                _read_capped(proc.stderr, limits.output_bytes, err, over),  # type: ignore[arg-type]
            )
        )
        over_wait = asyncio.ensure_future(over.wait())
        limit_hit: LimitHit | None = None
        try:
            done, _ = await asyncio.wait({over_wait, readers}, timeout=limits.wall_s, return_when="FIRST_COMPLETED")
            if over.is_set():
                limit_hit = "output"
            elif not done:
                limit_hit = "timeout"
        finally:  # also on cancellation (registry timeout): nothing of the run survives
            _kill_run(proc.pid, uid)
            over_wait.cancel()
            readers.cancel()
        try:
            rc = await asyncio.wait_for(proc.wait(), timeout=5)
        except asyncio.TimeoutError:
            rc = None
        isolation: dict[str, str] = {}
        if err.startswith(MARKER):
            line, _, rest = bytes(err).partition(b"\n")
            isolation = json.loads(line[len(MARKER) :].decode())
            err = bytearray(rest)
        stderr = err.decode("utf-8", "replace")
        if limit_hit is None:
            limit_hit = _classify(rc, stderr, limits)
        setup_error = None
        if rc == 125 and not isolation:
            setup_error = stderr.strip() or "sandbox setup failed"
        return SandboxResult(
            stdout=out.decode("utf-8", "replace"),
            stderr=stderr,
            exit_status=None if limit_hit in ("timeout", "output") else rc,
            limit_hit=limit_hit,
            truncated=limit_hit == "output",
            isolation=isolation,
            error=setup_error,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def describe(limits: SandboxLimits) -> dict[str, Any]:
    return asdict(limits)


if __name__ == "__main__":
    print(asyncio.run(run_python(sys.argv[1])).model_dump_json(indent=2))

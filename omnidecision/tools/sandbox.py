"""Run model-written Python in a confined child process (never in the agent's process).

Confinement (details in _sandbox_launch.py): bubblewrap when the host has `bwrap` (the Debian/Ubuntu/Fedora package
`bubblewrap`), else the same layout built with unprivileged user + mount namespaces; if neither can be set up the code
is refused (`SandboxResult.error` says what is missing), never run unconfined. Either way the program sees a
read-only minimal root (/usr, the interpreter), a private /tmp and a scratch dir as its only writable host path, no
network, its own pid namespace, a cleared environment, and CPU-time, address-space, process-count, file-size and
open-file limits; as root it also runs under a throwaway unprivileged uid. The host enforces the wall-time limit and
the output cap and kills every process of the run. `SandboxResult.isolation` reports what was applied.

    python -m omnidecision.tools.sandbox 'print(sum(range(10)))' [auto|bubblewrap|namespaces]
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
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

logger = logging.getLogger(__name__)

LAUNCHER = Path(__file__).with_name("_sandbox_launch.py")
LAUNCHER_SOURCE = LAUNCHER.read_text(encoding="utf-8")  # read once: a caller that drops privileges may not reach it
MARKER = b"\x00OMNIDECISION-SANDBOX "
LimitHit = str  # "timeout" | "cpu" | "memory" | "output" | "nproc" | "file_size"
Method = Literal["auto", "bubblewrap", "namespaces"]
METHODS = ("auto", "bubblewrap", "namespaces")


class SandboxUnavailable(RuntimeError):
    """The requested confinement cannot be set up on this host (the message says what is missing)."""


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
    def from_settings(cls, settings: Any) -> SandboxLimits:
        """Limits from the tool settings' `sandbox` (a dict of the field names; the settings as a `ToolSettings`
        or a mapping), defaults elsewhere."""
        given = dict(settings.get("sandbox", {}) if isinstance(settings, dict) else settings.sandbox)
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
    limits: dict[str, float | int] = Field(default_factory=dict)
    error: str | None = None


def _world_executable(path: Path) -> bool:
    try:
        if not path.stat().st_mode & stat.S_IXOTH:
            return False
        return all(p.stat().st_mode & stat.S_IXOTH for p in path.parents)
    except OSError:
        return False


def _usable(path: str, root: bool) -> bool:
    """Can the sandbox user run this interpreter? As root that user is a throwaway uid: world-executable only."""
    try:
        p = Path(path).resolve()
        if not p.is_file():
            return False
        if root:
            return _world_executable(p) and _world_executable(p.parent.parent / "lib")
        return os.access(p, os.X_OK)
    except OSError:  # a folder on the way is closed to this user
        return False


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


@lru_cache(maxsize=8)
def _default_python(euid: int, site: bool, home: str) -> str:
    base = str(Path(sys.executable).resolve())
    if site:  # the venv's interpreter: its site-packages come with it
        candidates = [sys.executable]
    else:  # an interpreter outside the home first: nothing of the home needs to be visible in the sandbox
        outside = [base] if not _under(Path(base), Path(home)) else []
        candidates = [*outside, "/usr/bin/python3", shutil.which("python3") or "", base]
    for c in candidates:
        if c and _usable(c, euid == 0):
            return c if site else str(Path(c).resolve())
    raise SandboxUnavailable("no python interpreter the sandbox user can execute; set settings.sandbox_python")


def sandbox_python(preferred: str | None = None, site: bool = False) -> str:
    """The interpreter for the sandboxed code: `preferred`, else this process's base interpreter when it lives
    outside the home, else the system python3, else this process's (its venv's when `site` asks for site-packages),
    whichever the sandbox user can execute."""
    if preferred:
        return preferred
    return _default_python(os.geteuid(), site, str(Path.home()))


def python_binds(python: str, site: bool) -> list[str]:
    """Host folders the interpreter needs read-only inside the sandbox (its prefix, and the venv when `site`), beyond
    /usr which is always there. Refuses a folder that holds the caller's home or working directory."""
    real = Path(python).resolve()
    roots = {real.parent.parent}
    if site and (Path(python).absolute().parent.parent / "pyvenv.cfg").is_file():
        roots.add(Path(python).absolute().parent.parent)
    binds = []
    for r in sorted(roots):
        if _under(r, Path("/usr")):
            continue
        for private in (Path.home(), Path.cwd()):
            if _under(private, r):
                raise SandboxUnavailable(
                    f"the interpreter {python} lives in {r}, which holds {private}: binding it would expose that "
                    "folder to the sandbox; set settings.sandbox_python to an interpreter installed elsewhere"
                )
        binds.append(str(r))
    return binds


def find_bwrap(path: str | None = None) -> str | None:
    """The bubblewrap executable: `path` if given ("" means none), else `bwrap` on PATH or in /usr/bin."""
    if path is not None:
        return shutil.which(path) if path else None
    return shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")


@lru_cache(maxsize=4)
def bwrap_features(path: str) -> tuple[str, bool]:
    """(version, supports --disable-userns) of a bwrap executable."""
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"bubblewrap at {path} does not run: {exc}") from exc
    return version or "bubblewrap", "--disable-userns" in usage


def resolve_method(method: str = "auto", bwrap: str | None = None) -> tuple[str, str | None]:
    """("bubblewrap", its path) or ("namespaces", None) for a requested method; SandboxUnavailable if impossible."""
    if method not in METHODS:
        raise ValueError(f"settings.sandbox_method: {method!r} is not one of {', '.join(METHODS)}")
    path = find_bwrap(bwrap)
    if method == "bubblewrap" and path is None:
        raise SandboxUnavailable(
            f"settings.sandbox_method is 'bubblewrap' but no bwrap executable was found ({bwrap or 'bwrap on PATH'}):"
            " install the bubblewrap package (apt-get install bubblewrap)"
        )
    if method == "namespaces" or path is None:
        return "namespaces", None
    return "bubblewrap", path


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
    """Kill the run's process group (the launcher and the sandbox's pid 1: the kernel then kills every process of the
    sandbox's pid namespace), then (as root) every process of its throwaway uid."""
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
    """Keep up to `cap` bytes, set `over` past it, and drain the rest to EOF (so the pipe closes cleanly)."""
    while chunk := await stream.read(65536):
        room = cap - len(sink)
        if room > 0:
            sink += chunk[:room]
        if len(chunk) > room:
            over.set()


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


def _launch_config(scratch: Path, uid: int | None, limits: SandboxLimits, python: str, site: bool, method: str,
                   bwrap: str | None) -> dict[str, Any]:  # fmt: skip
    version, disable_userns = bwrap_features(bwrap) if bwrap else ("", False)
    # RLIMIT_NPROC counts every process of the uid: the throwaway uid has none, the caller's others are added
    others = 0 if uid is not None else len(_processes_of(os.getuid()))
    return {
        "scratch": str(scratch),
        "uid": uid,
        "python": python,
        "site": site,
        "ro_binds": python_binds(python, site),
        "method": method,
        "method_label": version if method == "bubblewrap" else "namespaces",
        "bwrap": bwrap,
        "bwrap_disable_userns": disable_userns,
        "limits": asdict(limits),
        "nproc_outside": others + limits.nproc + 3,  # + the launcher, the sandbox's pid 1 and the program
        "tmp_kb": limits.fsize_kb * 2,
        "env": {"PATH": "/usr/bin:/bin", "HOME": "/tmp/work", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                "LC_ALL": "C.UTF-8"},  # fmt: skip
    }


async def run_python(
    code: str,
    limits: SandboxLimits | None = None,
    python: str | None = None,
    site: bool = False,
    method: str = "auto",
    bwrap: str | None = None,
) -> SandboxResult:
    """Run `code` as a script in the sandbox and return its (capped) output, exit status and any limit hit.

    `method`: "auto" (bubblewrap when installed, else namespaces), "bubblewrap" or "namespaces"; `bwrap`: the
    bubblewrap executable (default: on PATH; "" for none). A sandbox that cannot be set up returns `error` and the
    code does not run."""
    limits = limits or SandboxLimits()
    # the confinement this host allows, and the interpreter to confine
    try:
        method, bwrap_path = resolve_method(method, bwrap)
        interpreter = sandbox_python(python, site)
    except SandboxUnavailable as exc:
        return SandboxResult(error=f"sandbox unavailable: {exc}", limits=asdict(limits))
    root = os.geteuid() == 0
    uid = _pick_uid() if root else None
    scratch = Path(tempfile.mkdtemp(prefix="od-sandbox-"))
    try:
        # the program in its scratch folder, the launcher's configuration
        _write_program(scratch, code, uid)
        try:
            cfg = _launch_config(scratch, uid, limits, interpreter, site, method, bwrap_path)
        except SandboxUnavailable as exc:
            return SandboxResult(error=f"sandbox unavailable: {exc}", limits=asdict(limits))
        # run it under the wall-time limit and the output cap, then kill every process of the run
        proc = await asyncio.create_subprocess_exec(
            interpreter, "-I", "-S", "-c", LAUNCHER_SOURCE, json.dumps(cfg),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, env={"PATH": "/usr/bin:/bin"}, cwd=str(scratch),
        )  # fmt: skip
        out, err, rc, limit_hit = await _supervise(proc, uid, limits)
        # what it printed, how it ended, and what confined it
        return _result(out, err, rc, limit_hit, limits)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write_program(scratch: Path, code: str, uid: int | None) -> None:
    """Write `code` as scratch/main.py, both owned by the throwaway `uid` when there is one (running as root)."""
    (scratch / "main.py").write_text(code, encoding="utf-8")
    if uid is not None:
        for p in (scratch, scratch / "main.py"):
            os.chown(p, uid, uid)


async def _supervise(proc: asyncio.subprocess.Process, uid: int | None,
                     limits: SandboxLimits) -> tuple[bytearray, bytearray, int | None, LimitHit | None]:
    """Read the run's capped stdout and stderr until it ends, its output passes the cap or the wall time is up; then
    kill every process of the run and reap it. Returns (stdout, stderr, exit status or None, "output" | "timeout" |
    None). Cancelled (a registry timeout), it kills the run and leaves no task pending."""
    out, err, over = bytearray(), bytearray(), asyncio.Event()
    readers = [
        asyncio.ensure_future(_read_capped(proc.stdout, limits.output_bytes, out, over)),  # type: ignore[arg-type]
        asyncio.ensure_future(_read_capped(proc.stderr, limits.output_bytes, err, over)),  # type: ignore[arg-type]
    ]
    over_wait = asyncio.ensure_future(over.wait())
    limit_hit: LimitHit | None = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.wall_s
    try:
        while not over.is_set() and not all(r.done() for r in readers) and loop.time() < deadline:
            pending = {over_wait, *(r for r in readers if not r.done())}
            await asyncio.wait(pending, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED)
        if over.is_set():
            limit_hit = "output"
        elif not all(r.done() for r in readers):
            limit_hit = "timeout"
    except BaseException:  # cancelled (registry timeout): nothing of the run survives, no task is left pending
        _kill_run(proc.pid, uid)
        for task in (over_wait, *readers):
            task.cancel()
        raise
    _kill_run(proc.pid, uid)
    over_wait.cancel()
    # every process of the run is dead: the pipes reach EOF; the readers drain them, then the transport closes
    _, stuck = await asyncio.wait(readers, timeout=5)
    for task in stuck:
        task.cancel()
    await asyncio.gather(over_wait, *readers, return_exceptions=True)
    try:
        rc = await asyncio.wait_for(proc.wait(), timeout=5)
    except asyncio.TimeoutError:
        rc = None
    return out, err, rc, limit_hit


def _result(out: bytearray, err: bytearray, rc: int | None, limit_hit: LimitHit | None,
            limits: SandboxLimits) -> SandboxResult:
    """The SandboxResult of a finished run: the isolation report the launcher put first on stderr (without it the
    code never ran: a setup error), the limit hit (from the exit status and stderr when the host did not stop it)."""
    isolation: dict[str, str] = {}
    if err.startswith(MARKER):
        line, _, rest = bytes(err).partition(b"\n")
        isolation = json.loads(line[len(MARKER) :].decode())
        err = bytearray(rest)
    stderr = err.decode("utf-8", "replace")
    setup_error = None
    if not isolation:  # the marker comes from inside the sandbox: without it the code never ran
        setup_error = stderr.strip() or f"sandbox setup failed (exit status {rc})"
        limit_hit = None
    elif limit_hit is None:
        limit_hit = _classify(rc, stderr, limits)
    return SandboxResult(
        stdout=out.decode("utf-8", "replace"),
        stderr=stderr,
        exit_status=None if limit_hit in ("timeout", "output") or setup_error else rc,
        limit_hit=limit_hit,
        truncated=limit_hit == "output",
        isolation=isolation,
        limits=asdict(limits),
        error=setup_error,
    )


def describe(limits: SandboxLimits) -> dict[str, Any]:
    return asdict(limits)


if __name__ == "__main__":
    method = sys.argv[2] if len(sys.argv) > 2 else "auto"
    print(asyncio.run(run_python(sys.argv[1], method=method)).model_dump_json(indent=2))

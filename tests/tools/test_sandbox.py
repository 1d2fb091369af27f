"""The code sandbox against hostile programs, run as root and as an ordinary user, with each confinement method.

Each hostile kind (network and DNS, fork bomb, memory bomb, infinite loop, huge output, huge file, environment leak,
reading the home / the project / other repositories, writing outside the scratch dir) is contained and reported as a
tool error or limit, and the host is unaffected: no surviving process, no file written outside the scratch dir, no
secret leaked, no asyncio error logged. As root the suite creates an ordinary user (useradd) and runs the sandbox's
host side as that user in a forked child; `make test` runs every hostile program as that user, `make long-test`
repeats them as root, and CI (root) runs both:

    pytest -q tests/tools/test_sandbox.py                 # as the ordinary user
    pytest -q -m long tests/tools/test_sandbox.py         # the root repeats
"""

from __future__ import annotations

import ast
import asyncio
import gc
import json
import logging
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from omnidecision.tasks.schema import Task
from omnidecision.tools.registry import build_tool_context, run_tool
from omnidecision.tools.sandbox import SandboxLimits, _processes_of, find_bwrap, python_binds, run_python

LIMITS = {"wall_s": 3, "cpu_s": 2, "memory_mb": 256, "nproc": 16, "output_bytes": 10_000, "fsize_kb": 1024}
ROOT = os.geteuid() == 0
PROJECT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SECRET = "sk-test-" + uuid.uuid4().hex


@dataclass(frozen=True)
class Who:
    """Whose process runs the sandbox's host side: this process (uid None) or a forked child as `uid`."""

    name: str
    uid: int | None
    gid: int | None
    home: Path


USER_PREFIX = "odsbx"  # + the pid of the pytest process that created the user


def _remove_stale_users() -> None:
    """Users an earlier run created but could not remove (it was killed): their creating pid is gone."""
    for entry in pwd.getpwall():
        tail = entry.pw_name[len(USER_PREFIX):]
        if entry.pw_name.startswith(USER_PREFIX) and tail.isdigit() and not Path(f"/proc/{tail}").exists():
            subprocess.run(["userdel", "--remove", entry.pw_name], check=False, capture_output=True)


@pytest.fixture(scope="session")
def ordinary_user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Who]:
    """An ordinary (non-root) user with secrets in its home: created with useradd when the suite runs as root, and
    removed afterwards (also when the set-up or a test fails; a user left by a killed run is removed next time)."""
    if not ROOT:
        yield Who("user", None, None, Path.home())
        return
    name = f"{USER_PREFIX}{os.getpid()}"
    created = False
    try:
        if shutil.which("useradd"):
            _remove_stale_users()
            subprocess.run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", name], check=True)
            created = True
            pw = pwd.getpwnam(name)
            uid, gid, home = pw.pw_uid, pw.pw_gid, Path(pw.pw_dir)
        else:  # no passwd tools: a bare uid with a home of its own is the same to the kernel
            uid = gid = 2_000_000 + os.getpid() % 100_000
            home = tmp_path_factory.mktemp("home")
            os.chown(home, uid, gid)
        for rel in (".cache/huggingface/token", ".ssh/id_ed25519"):
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).write_text(SECRET)
        subprocess.run(["chown", "-R", f"{uid}:{gid}", str(home)], check=True)
        # the user's runs are children forked from this process, and the user cannot read root's Python (/root is
        # 0700): the modules the code tool imports on its first call are imported here, by one plain run as root
        warm, _ = _in_process(lambda: asyncio.run(run_tool("code_executor", {"code": "print(1)"}, build_tool_context(
            Task(id="warm-up", question="?"), settings={"sandbox": LIMITS}))), {})
        assert warm.ok, f"the warm-up run as root failed: {warm.error}"  # type: ignore[attr-defined]
        yield Who("user", uid, gid, home)
        _wait_gone(uid)
    finally:
        if created:
            res = subprocess.run(["userdel", "--remove", name], check=False, capture_output=True, text=True)
            try:
                pwd.getpwnam(name)
            except KeyError:
                pass  # removed
            else:
                pytest.fail(f"could not remove the test user {name}: {res.stderr.strip()}")


# the ordinary user is a cluster user's case and runs in `make test`; the root repeats run in `make long-test` (CI runs
# both), ~45 s of the fast suite on 2 cores
@pytest.fixture(params=[pytest.param("root", marks=pytest.mark.long), "user"])
def who(request: pytest.FixtureRequest, ordinary_user: Who) -> Who:
    if request.param == "user":
        return ordinary_user
    if not ROOT:
        pytest.skip("the root mode needs the suite to run as root (CI does)")
    return Who("root", None, None, Path("/root"))


@pytest.fixture(params=["bubblewrap", "namespaces"])
def method(request: pytest.FixtureRequest) -> str:
    if request.param == "bubblewrap" and find_bwrap() is None:
        message = "bubblewrap is not installed (`make install` as root installs it; or apt-get install bubblewrap)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return request.param


def _sandbox_processes(uid: int) -> list[int]:
    """Processes of `uid` that belong to a sandbox run: bwrap, the launcher or the program (`... -I -S main.py`)."""
    found = []
    for pid in _processes_of(uid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"main.py" in argv or any(b"OMNIDECISION-SANDBOX" in a or a.endswith(b"bwrap") for a in argv):
            found.append(pid)
    return found


def _wait_gone(uid: int, timeout: float = 5.0, only_sandbox: bool = False) -> list[int]:
    """Processes of `uid` (only the sandbox's when the uid is this suite's own) still alive after `timeout` (the
    kernel tears a pid namespace down asynchronously)."""
    find = _sandbox_processes if only_sandbox else _processes_of
    end = time.monotonic() + timeout
    while (left := find(uid)) and time.monotonic() < end:
        time.sleep(0.05)
    return left


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _in_process(job: Callable[[], object], env: dict[str, str]) -> tuple[object, list[str]]:
    """Run `job` with asyncio's error log collected (an unretrieved future is logged when collected)."""
    handler = _Collect()
    logging.getLogger("asyncio").addHandler(handler)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = job()
        gc.collect()
    finally:
        logging.getLogger("asyncio").removeHandler(handler)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return result, handler.messages


def _reply_and_exit(write: int, work: Callable[[], str]) -> NoReturn:
    """The end of a forked child: `work()`'s JSON (or {"crashed": the traceback}) sent through the pipe `write`, then
    an exit that never returns into pytest."""
    try:
        payload = work()
    except BaseException:
        payload = json.dumps({"crashed": traceback.format_exc()})
    with os.fdopen(write, "w") as fh:
        fh.write(payload)
    os._exit(0)


def _reply(read: int, pid: int) -> Any:
    """The forked child's JSON reply, read from the pipe `read` once the child is reaped; a crash fails the test with
    the child's traceback."""
    with os.fdopen(read) as fh:
        data = json.loads(fh.read())
    os.waitpid(pid, 0)
    assert "crashed" not in data, data
    return data


def as_who(who: Who, job: Callable[[], object], env: dict[str, str] | None = None) -> tuple[object, list[str]]:
    """`job()` (JSON-serialisable result) run by `who`: here, or in a child forked from this process that drops to
    the ordinary user first (the package is already imported, so it needs no read access to the checkout)."""
    env = dict(env or {})
    if who.uid is None:
        return _in_process(job, env)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        def drop_and_run() -> str:
            os.close(read)
            os.setgroups([])
            os.setgid(who.gid)  # type: ignore[arg-type]
            os.setuid(who.uid)
            os.chdir(who.home)
            return json.dumps(_in_process(job, env | {"HOME": str(who.home)}))

        _reply_and_exit(write, drop_and_run)
    os.close(write)
    result, errors = _reply(read, pid)
    assert _wait_gone(who.uid) == [], "processes of the ordinary user outlived the run"
    return result, errors


@dataclass
class Run:
    ok: bool
    text: str
    error: str | None
    limit_hit: str | None
    fields: dict
    asyncio_errors: list[str]


def execute(who: Who, code: str, method: str = "auto", env: dict[str, str] | None = None, **overrides) -> Run:
    """The code tool on `code`, run by `who` with the suite's limits (+ overrides) and the given method."""
    settings = {"sandbox": LIMITS | overrides, "sandbox_method": method}

    def job() -> dict:
        ctx = build_tool_context(Task(id="t", question="?"), settings=settings)
        return asyncio.run(run_tool("code_executor", {"code": code}, ctx)).model_dump(mode="json")

    obs, errors = as_who(who, job, env)
    assert isinstance(obs, dict)
    run = Run(obs["ok"], obs["text"], obs["error"], obs["limit_hit"], obs["fields"], errors)
    user = run.fields.get("isolation", {}).get("user", "")
    if "(throwaway)" in user:
        uid = int(user.split()[1])
        assert _wait_gone(uid) == [], f"sandboxed processes of uid {uid} outlived their run"
    elif who.uid is None:  # the caller's own uid also runs this suite: look for the sandbox's processes only
        assert _wait_gone(os.getuid(), only_sandbox=True) == [], "sandboxed processes outlived their run"
    return run


def test_plain_code_runs_and_reports_isolation_and_limits(who: Who, method: str):
    run = execute(who, "import math\nprint(math.factorial(10))", method)
    assert run.ok and run.text == "3628800" and run.fields["exit_status"] == 0 and run.limit_hit is None
    iso = run.fields["isolation"]
    assert iso["method"].startswith("bubblewrap" if method == "bubblewrap" else "namespaces")
    assert iso["filesystem"].startswith("minimal read-only root")
    assert (iso["network"], iso["pid"], iso["proc"]) == ("none", "private", "private")
    assert iso["environment"] == "cleared: HOME LANG LC_ALL PATH TMPDIR"
    if who.name == "root":
        assert iso["user"].endswith("(throwaway)") and int(iso["user"].split()[1]) >= 1_000_000
    else:
        assert iso["user"] == f"uid {who.uid if who.uid is not None else os.getuid()} (caller)"
    assert run.fields["limits"] == SandboxLimits(**LIMITS).__dict__ and run.asyncio_errors == []


def test_error_exit_is_a_tool_error(who: Who):
    run = execute(who, "raise ValueError('bad input')")
    assert not run.ok and run.fields["exit_status"] == 1 and "ValueError: bad input" in run.error


def test_network_and_dns_refused_even_to_localhost(who: Who, method: str):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = f"""
import socket
for host in ("127.0.0.1", "1.1.1.1"):
    try:
        socket.create_connection((host, {port}), timeout=1)
        print("CONNECTED", host)
    except OSError as exc:
        print("refused", host, type(exc).__name__)
try:
    print("RESOLVED", socket.getaddrinfo("example.com", 443))
except OSError as exc:
    print("no dns", type(exc).__name__)
import os
print("interfaces", sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else "none")
"""
    run = execute(who, code, method)
    try:
        with pytest.raises(TimeoutError):
            server.accept()  # nothing reached the host's listening socket
    finally:
        server.close()
    assert "CONNECTED" not in run.text and run.text.count("refused") == 2, run.text
    assert "RESOLVED" not in run.text and "no dns" in run.text


def test_fork_bomb_is_contained_and_cleaned_up(who: Who, method: str):
    run = execute(who, "import os\nwhile True:\n    os.fork()", method)
    assert not run.ok and run.limit_hit in {"nproc", "timeout"} and run.asyncio_errors == []
    # A patient bomb that also leaves its session (setsid): count how many forks succeed; none may survive.
    code = """
import os, sys, time
n = 0
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.setsid()
        time.sleep(60)
        os._exit(0)
    n += 1
print("forked", n, flush=True)
time.sleep(60)
"""
    run = execute(who, code, method)
    assert not run.ok and run.limit_hit == "timeout" and run.asyncio_errors == []
    forked = int(run.fields["stdout"].split()[1])
    # the program plus at most nproc - 1 children (a previous run's processes may still be counted while they exit)
    assert LIMITS["nproc"] // 2 <= forked <= LIMITS["nproc"] - 1


def test_memory_bomb_is_contained(who: Who):
    run = execute(who, "x = bytearray(4 * 1024 ** 3)\nprint('allocated')")
    assert not run.ok and run.limit_hit == "memory" and "allocated" not in run.text
    run = execute(who, "chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))")
    assert not run.ok and run.limit_hit == "memory"


def test_infinite_loop_stopped_by_cpu_and_by_wall_time(who: Who):
    run = execute(who, "while True:\n    pass", wall_s=30)
    assert not run.ok and run.limit_hit == "cpu"
    run = execute(who, "import time\ntime.sleep(60)", wall_s=1)
    assert not run.ok and run.limit_hit == "timeout" and run.fields["exit_status"] is None


def test_huge_output_truncated_without_asyncio_errors(who: Who, method: str):
    run = execute(who, "while True:\n    print('x' * 1000)", method)
    assert not run.ok and run.limit_hit == "output" and run.fields["truncated"]
    assert len(run.fields["stdout"]) <= LIMITS["output_bytes"] and run.asyncio_errors == []
    run = execute(who, "import sys\nwhile True:\n    sys.stderr.write('y' * 1000)", method)
    assert run.limit_hit == "output" and run.asyncio_errors == []


def test_huge_file_stopped_by_file_size_limit(who: Who):
    run = execute(who, "with open('big.bin', 'wb') as f:\n    f.write(b'0' * (50 * 1024 * 1024))")
    assert not run.ok and run.limit_hit == "file_size"
    run = execute(who, "for i in range(100):\n    open(f'/tmp/f{i}', 'wb').write(b'0' * 1000 * 1024)")
    assert not run.ok and "No space left on device" in run.error  # the private /tmp is size-capped too


def test_parent_environment_not_visible(who: Who, method: str):
    code = """
import os
print(sorted(os.environ))
print(os.environ.get("OPENAI_API_KEY"))
for pid in ["self", str(os.getppid()), "1"] + [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        print(open(f"/proc/{pid}/environ", "rb").read())
    except OSError as exc:
        print("denied", pid, type(exc).__name__)
"""
    run = execute(who, code, method, env={"OPENAI_API_KEY": SECRET, "HF_TOKEN": SECRET})
    assert run.ok, run.error
    assert SECRET not in run.text and SECRET not in run.fields["stderr"]
    assert "OPENAI_API_KEY" not in run.fields["stdout"] and "HF_TOKEN" not in run.fields["stdout"]


def test_home_project_and_other_repositories_are_invisible(who: Who, method: str, request):
    private = [who.home / ".cache/huggingface/token", who.home / ".ssh/id_ed25519", who.home, PROJECT,
               PROJECT / "pyproject.toml", PROJECT / ".git", Path("/root"), Path("/home"), Path("/etc/passwd"),
               Path("/etc/shadow"), Path("/var"), Path("/sys"), Path("/run")]  # fmt: skip
    if PROJECT.parent != Path("/"):
        # where other repositories live: a sibling made here (the folder itself may be /tmp, which the sandbox
        # provides privately, so its mere existence says nothing)
        sibling = PROJECT.parent / f".other-repo-{os.getpid()}"
        sibling.mkdir(exist_ok=True)
        request.addfinalizer(lambda: sibling.rmdir())
        private.append(sibling)
    code = f"""
import os
for p in {[str(p) for p in private]!r}:
    print("VISIBLE" if os.path.lexists(p) else "absent", p)
print("root", sorted(os.listdir("/")))
print("etc", sorted(os.listdir("/etc")))
print("tmp", sorted(os.listdir("/tmp")), sorted(os.listdir("/tmp/work")))
"""
    run = execute(who, code, method)
    assert run.ok, run.error
    assert "VISIBLE" not in run.text, run.text
    listed = (line.split(" ", 1) for line in run.text.splitlines())
    lines = {k: v for k, v in listed if k in {"root", "etc", "tmp"}}
    iso = run.fields["isolation"]
    binds = iso["filesystem"].split(" + ")[1:]
    assert binds == python_binds(iso["python"], False)  # only the interpreter's own prefix, if outside /usr
    minimal = {"usr", "bin", "sbin", "lib", "lib64", "lib32", "libx32", "etc", "proc", "dev", "tmp"}
    assert set(ast.literal_eval(lines["root"])) <= minimal | {Path(b).parts[1] for b in binds}, lines["root"]
    assert ast.literal_eval(lines["etc"]) in ([], ["ld.so.cache"])
    assert lines["tmp"] == "['work'] ['main.py']"


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A world-writable folder every user can reach (pytest's own tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="odsbx-open-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_writing_outside_scratch_is_refused_or_harmless(who: Who, method: str, open_dir: Path):
    name = f"evil-{uuid.uuid4().hex}"
    shared = open_dir
    targets = [shared / name, Path("/tmp") / name, Path("/var/tmp") / name, Path("/dev/shm") / name,
               PROJECT / name, who.home / name, Path("/") / name]  # fmt: skip
    code = (
        "import os\nfor p in %r:\n    try:\n        os.makedirs(os.path.dirname(p), exist_ok=True)\n"
        "        open(p, 'w').write('x')\n        print('wrote', p)\n"
        "    except OSError as exc:\n        print('refused', p, type(exc).__name__)\n"
        "open('inside.txt', 'w').write('fine')\nprint('cwd ok', os.path.exists('inside.txt'), os.getcwd())"
        % ([str(t) for t in targets])
    )
    run = execute(who, code, method)
    assert run.ok and "cwd ok True /tmp/work" in run.text, run.text
    for t in targets:
        assert not t.exists(), f"the sandbox wrote {t} on the host"
    assert not list(Path("/tmp").glob("od-sandbox-*/inside.txt"))  # the scratch dir is removed afterwards


def test_concurrent_runs_are_independent(who: Who):
    def job() -> list[dict]:
        async def many() -> list:
            return await asyncio.gather(*(run_python(f"print({i} * 2)", SandboxLimits(wall_s=20)) for i in range(4)))

        return [r.model_dump(mode="json") for r in asyncio.run(many())]

    results, errors = as_who(who, job)
    assert [r["stdout"] for r in results] == [f"{i * 2}\n" for i in range(4)] and errors == []  # type: ignore[index]
    if who.name == "root":
        assert len({r["isolation"]["user"] for r in results}) == 4  # type: ignore[index]  # one throwaway uid each


def test_limits_from_settings_and_unknown_names():
    res = asyncio.run(run_python("print('hi')", SandboxLimits(wall_s=5)))
    assert res.stdout == "hi\n" and res.exit_status == 0 and res.limits["wall_s"] == 5
    with pytest.raises(ValueError, match="unknown limit"):
        SandboxLimits.from_settings({"sandbox": {"wall": 1}})
    ctx = build_tool_context(Task(id="t", question="?"), settings={"sandbox": {"wall": 1}})
    obs = asyncio.run(run_tool("code_executor", {"code": "print(1)"}, ctx))
    assert not obs.ok and "unknown limit" in obs.error
    ctx = build_tool_context(Task(id="t", question="?"), settings={"sandbox_method": "chroot"})
    obs = asyncio.run(run_tool("code_executor", {"code": "print(1)"}, ctx))
    assert not obs.ok and "sandbox_method" in obs.error and "chroot" in obs.error


UNCONFINED = "print('ran', flush=True)\ntry:\n    open({!r}, 'w').write('unconfined')\nexcept OSError:\n    pass"


def test_missing_bubblewrap_is_named_or_replaced_by_namespaces(open_dir: Path):
    marker = open_dir / "ran"
    code = UNCONFINED.format(str(marker))
    res = asyncio.run(run_python(code, SandboxLimits(wall_s=5), method="bubblewrap", bwrap=""))
    assert res.error is not None and "bubblewrap" in res.error and "apt-get install bubblewrap" in res.error
    assert res.stdout == "" and res.isolation == {} and not marker.exists()
    res = asyncio.run(run_python(code, SandboxLimits(wall_s=5), method="auto", bwrap=str(open_dir / "no-bwrap")))
    assert res.isolation["method"] == "namespaces" and res.stdout == "ran\n" and not marker.exists()


@pytest.mark.skipif(not ROOT, reason="forbidding user namespaces for one process tree needs root")
def test_no_bubblewrap_and_no_user_namespaces_refuses_to_run(ordinary_user: Who, open_dir: Path):
    """An ordinary user where the kernel refuses new user namespaces (max_user_namespaces = 0 inside a user namespace
    made for this test; the host's setting is untouched) and bwrap is absent: the code is refused, never run."""
    marker = open_dir / "ran"
    code = UNCONFINED.format(str(marker))
    read, write = os.pipe()
    go_r, go_w = os.pipe()
    ns_r, ns_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        def unshare_and_run() -> str:
            os.close(read)
            os.close(go_w)
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            assert libc.unshare(0x10000000) == 0  # CLONE_NEWUSER; the parent writes the uid/gid maps
            os.write(ns_w, b"x")
            os.read(go_r, 1)
            Path("/proc/sys/user/max_user_namespaces").write_text("0")
            os.setgroups([])
            os.setgid(ordinary_user.gid)  # type: ignore[arg-type]
            os.setuid(ordinary_user.uid)  # type: ignore[arg-type]
            os.environ["HOME"] = str(ordinary_user.home)
            return asyncio.run(run_python(code, SandboxLimits(wall_s=5), method="auto", bwrap="")).model_dump_json()

        _reply_and_exit(write, unshare_and_run)
    os.close(write)
    os.close(go_r)
    os.close(ns_w)
    assert os.read(ns_r, 1) == b"x"
    os.close(ns_r)
    u, g = ordinary_user.uid, ordinary_user.gid
    Path(f"/proc/{pid}/uid_map").write_text(f"0 0 1\n{u} {u} 1\n")
    Path(f"/proc/{pid}/gid_map").write_text(f"0 0 1\n{g} {g} 1\n")
    os.write(go_w, b"x")
    os.close(go_w)
    data = _reply(read, pid)
    assert data["stdout"] == "" and data["isolation"] == {} and not marker.exists()
    assert "bubblewrap" in data["error"] and "user namespaces" in data["error"], data["error"]
    assert Path("/proc/sys/user/max_user_namespaces").read_text().strip() != "0"  # the host is untouched

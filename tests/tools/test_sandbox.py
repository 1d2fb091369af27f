"""The code sandbox against hostile programs: each is contained, reported as a tool error/limit, and the host is
unaffected (no surviving processes, no files written outside the scratch directory, no secrets leaked)."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from pathlib import Path

import pytest

from omnidecision.tasks.schema import Task
from omnidecision.tools.registry import build_tool_context, run_tool
from omnidecision.tools.sandbox import SandboxLimits, _processes_of, run_python

LIMITS = {"wall_s": 3, "cpu_s": 2, "memory_mb": 256, "nproc": 16, "output_bytes": 10_000, "fsize_kb": 1024}
ROOT = os.geteuid() == 0


USED_UIDS: list[int] = []


def execute(code: str, **overrides):
    ctx = build_tool_context(Task(id="t", question="?"), settings={"sandbox": LIMITS | overrides})
    obs = asyncio.run(run_tool("code_executor", {"code": code}, ctx))
    user = obs.fields.get("isolation", {}).get("user", "")
    if user.startswith("uid "):
        USED_UIDS.append(int(user.split()[1]))
    return obs


@pytest.fixture(autouse=True)
def _host_unaffected():
    USED_UIDS.clear()
    yield
    survivors = {uid: _processes_of(uid) for uid in USED_UIDS if _processes_of(uid)}
    assert survivors == {}, f"sandboxed processes outlived their run: {survivors}"


def test_plain_code_runs_and_reports_isolation():
    obs = execute("import math\nprint(math.factorial(10))")
    assert obs.ok and obs.text == "3628800" and obs.fields["exit_status"] == 0 and obs.limit_hit is None
    iso = obs.fields["isolation"]
    assert iso["network"] in ({"netns"} if ROOT else {"netns", "userns+netns", "audit-hook"})
    if ROOT:
        assert iso["user"].startswith("uid ") and iso["mounts"] == "private-tmp"


def test_error_exit_is_a_tool_error():
    obs = execute("raise ValueError('bad input')")
    assert not obs.ok and obs.fields["exit_status"] == 1 and "ValueError: bad input" in obs.error


def test_network_refused_even_to_localhost():
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
"""
    obs = execute(code)
    try:
        with pytest.raises(TimeoutError):
            server.accept()  # nothing reached the host's listening socket
    finally:
        server.close()
    assert "CONNECTED" not in obs.text and obs.text.count("refused") == 2
    obs = execute(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)")
    assert not obs.ok and "exit status 1" in obs.error


def test_fork_bomb_is_contained():
    obs = execute("import os\nwhile True:\n    os.fork()")
    assert not obs.ok and obs.limit_hit in {"nproc", "timeout"}
    # A patient bomb: keep the children alive and count how many forks succeed.
    code = """
import os, sys, time
n = 0
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print("forked", n, flush=True)
time.sleep(60)
"""
    obs = execute(code)
    assert not obs.ok and obs.limit_hit == "timeout"
    forked = int(obs.fields["stdout"].split()[1])
    assert forked < LIMITS["nproc"] if ROOT else forked < 1000


def test_memory_bomb_is_contained():
    obs = execute("x = bytearray(4 * 1024 ** 3)\nprint('allocated')")
    assert not obs.ok and obs.limit_hit == "memory" and "allocated" not in obs.text
    obs = execute("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))")
    assert not obs.ok and obs.limit_hit == "memory"


def test_infinite_loop_stopped_by_cpu_and_by_wall_time():
    obs = execute("while True:\n    pass", wall_s=30)
    assert not obs.ok and obs.limit_hit == "cpu"
    obs = execute("import time\ntime.sleep(60)", wall_s=1)
    assert not obs.ok and obs.limit_hit == "timeout" and obs.fields["exit_status"] is None


def test_writing_outside_scratch_is_refused_or_harmless(tmp_path: Path):
    name = f"evil-{uuid.uuid4().hex}"
    targets = [tmp_path / name, Path("/tmp") / name, Path.cwd() / name, Path("/dev/shm") / name]
    code = (
        "import os\nfor p in %r:\n    try:\n        open(p, 'w').write('x')\n        print('wrote', p)\n"
        "    except OSError as exc:\n        print('refused', p, type(exc).__name__)\n"
        "open('inside.txt', 'w').write('fine')\nprint('cwd ok', os.path.exists('inside.txt'))"
        % ([str(t) for t in targets])
    )
    obs = execute(code)
    assert obs.ok and "cwd ok True" in obs.text
    if not ROOT:
        pytest.skip("host-side isolation of /tmp needs root (mount namespace)")
    for t in targets:
        assert not t.exists(), f"sandbox wrote {t} on the host"


def test_parent_environment_not_visible(monkeypatch):
    secret = "sk-test-" + uuid.uuid4().hex
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    code = """
import os
print(sorted(os.environ))
print(os.environ.get("OPENAI_API_KEY"))
for pid in ("self", str(os.getppid()), "1"):
    try:
        print(open(f"/proc/{pid}/environ", "rb").read())
    except OSError as exc:
        print("denied", pid, type(exc).__name__)
"""
    obs = execute(code)
    assert secret not in obs.text and secret not in obs.fields["stderr"]
    assert "OPENAI_API_KEY" not in obs.fields["stdout"]


def test_huge_output_truncated():
    obs = execute("while True:\n    print('x' * 1000)")
    assert not obs.ok and obs.limit_hit == "output" and obs.fields["truncated"]
    assert len(obs.fields["stdout"]) <= LIMITS["output_bytes"]


def test_huge_file_stopped_by_file_size_limit():
    obs = execute("with open('big.bin', 'wb') as f:\n    f.write(b'0' * (50 * 1024 * 1024))")
    assert not obs.ok and obs.limit_hit == "file_size"


def test_run_python_direct_and_limits_from_settings():
    res = asyncio.run(run_python("print('hi')", SandboxLimits(wall_s=5)))
    assert res.stdout == "hi\n" and res.exit_status == 0
    with pytest.raises(ValueError, match="unknown limit"):
        SandboxLimits.from_settings({"sandbox": {"wall": 1}})
    obs = execute("print(1)", wall=1)
    assert not obs.ok and "unknown limit" in obs.error


def test_concurrent_runs_are_independent():
    async def many():
        return await asyncio.gather(*(run_python(f"print({i} * 2)", SandboxLimits(wall_s=10)) for i in range(4)))

    results = asyncio.run(many())
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(4)]
    if ROOT:
        assert len({r.isolation["user"] for r in results}) == 4  # one throwaway uid per run

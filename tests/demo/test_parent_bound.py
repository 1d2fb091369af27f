"""Children started through `procs.parent_bound` get SIGTERM when the thread that started them dies, with no Python run
between fork and exec: the launcher asks Linux for the signal after exec, and refuses to run a command whose parent
is already gone.

    .venv/bin/pytest -q tests/demo/test_parent_bound.py
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from omnidecision.procs import group_alive, parent_bound

ROOT = Path(__file__).resolve().parents[2]
linux = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")

# what the child reads back: prctl(PR_GET_PDEATHSIG) (2), the signal it will get when its parent thread dies
READ_SIGNAL = ("import ctypes, ctypes.util; libc = ctypes.CDLL(ctypes.util.find_library('c')); "
               "sig = ctypes.c_int(); libc.prctl(2, ctypes.byref(sig), 0, 0, 0); print(sig.value)")

# a parent that starts a bound `sleep` from a thread, prints its pid, then waits to be killed
PARENT = """
import subprocess, sys, threading, time
from omnidecision.procs import parent_bound
def start():
    proc = subprocess.Popen(parent_bound(["sleep", "300"]), start_new_session=True)
    print(proc.pid, flush=True)
    proc.wait()
threading.Thread(target=start).start()
time.sleep(300)
"""


def test_no_child_process_is_started_with_a_preexec_fn():
    # Python runs a preexec_fn in the child between fork and exec, where a lock held by another thread of the
    # parent at the fork stays held for ever; the plan runner starts its steps from a thread pool
    calls = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "omnidecision").rglob("*.py"))
             for n, line in enumerate(p.read_text("utf-8").splitlines(), 1) if re.search(r"preexec_fn\s*=", line)]
    assert calls == [], f"Popen(preexec_fn=...) hangs children of a threaded parent; use procs.parent_bound: {calls}"


@linux
def test_the_command_runs_with_sigterm_as_its_parent_death_signal():
    done = subprocess.run(parent_bound([sys.executable, "-c", READ_SIGNAL]), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == signal.SIGTERM
    plain = subprocess.run([sys.executable, "-c", READ_SIGNAL], capture_output=True, text=True, timeout=60)
    assert int(plain.stdout) == 0  # without the launcher: no signal asked for


@linux
def test_a_launcher_whose_parent_is_not_the_one_named_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    argv = parent_bound([sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    assert argv[3].isdigit()
    argv[3] = str(int(argv[3]) + 1_000_000)  # not this process: as if the parent had died and the child was adopted
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 128 + signal.SIGTERM
    assert not marker.exists()


@linux
def test_a_command_that_cannot_run_is_named():
    done = subprocess.run(parent_bound(["/nonexistent/od-tool", "--x"]), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "cannot run '/nonexistent/od-tool'" in done.stderr


@linux
def test_kill_9_of_a_threaded_parent_stops_the_bound_child():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _within(30, lambda: _runs(child, "sleep")), "the launcher did not exec sleep"
        parent.kill()
        parent.wait()
        assert _within(30, lambda: not group_alive(child)), "the bound child outlived its parent"
    finally:
        parent.kill()


def _runs(pid: int, name: str) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == name
    except OSError:
        return False


def _within(seconds: float, holds: Callable[[], bool]) -> bool:
    """Whether `holds()` comes true within `seconds` (asked every 50 ms)."""
    deadline = time.monotonic() + seconds
    while not holds():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True

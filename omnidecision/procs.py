"""Child processes that do not outlive their parent: what the plan runner and the vLLM server use so that a killed
`omnidecision demo|experiment` (even `kill -9`) leaves none of its steps, and none of their servers, running.

- `parent_bound(cmd)`: the argv that runs `cmd` so that Linux sends it SIGTERM when the thread that started it dies
  (prctl PR_SET_PDEATHSIG, asked by this module's launcher in the child, which then execs `cmd`); elsewhere `cmd`
  itself. Not a `preexec_fn`: Python runs one in the child between fork and exec, where a lock another thread of
  the parent held at the fork is never released, and the runner starts its steps from a thread pool (a fast-suite
  run hung there, both job slots waiting in `Popen` for children that never reached exec).
- `stop_group_on_sigterm`: in a step that leads its own process group, SIGTERM stops the whole group (the
  accelerate launcher and its training process, a collect's sandboxes) and exits 143, so context managers run (an
  eval's vLLM server stops with them).
- `stop_group`: SIGTERM to a process group, SIGKILL after a grace period: what a restarted runner does to a step
  that a killed runner left behind, before it runs that step again.

    python -c "from omnidecision.procs import group_alive; import os; print(group_alive(os.getpgrp()))"
    python -m omnidecision.procs "$$" sleep 60   # sleep, SIGTERM'd when this shell dies
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True) if sys.platform == "linux" else None


def die_with_parent() -> None:
    """SIGTERM to this process when the thread that started it exits (Linux; a no-op elsewhere). It holds across
    exec."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def parent_bound(cmd: Sequence[str]) -> list[str]:
    """The argv that runs `cmd` as a child that gets SIGTERM when the thread that starts it dies: this module's
    launcher asks for it, checks that its parent is still the one that started it, then execs `cmd` (same pid, so
    a process group or session made by `Popen` is `cmd`'s). Elsewhere than on Linux: `cmd`."""
    if _LIBC is None:
        return list(cmd)
    return [sys.executable, "-m", "omnidecision.procs", str(os.getpid()), *cmd]


def _exec_bound(argv: list[str]) -> NoReturn:
    """The launcher (`python -m omnidecision.procs PARENT_PID CMD...`): the parent-death signal, then exec."""
    if len(argv) < 2 or not argv[0].isdigit():
        sys.exit("usage: python -m omnidecision.procs PARENT_PID CMD [ARG...]")
    die_with_parent()
    if os.getppid() != int(argv[0]):  # the parent died before the request: no signal would ever come
        sys.exit(128 + signal.SIGTERM)
    try:
        os.execvp(argv[1], argv[1:])
    except OSError as exc:  # what Popen would have raised: the command, and why it cannot run
        sys.exit(f"cannot run {argv[1]!r}: {exc.strerror}")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a group of another user's: alive, not ours to stop
        return True
    return True


def stop_group(pgid: int, grace_s: float = 15.0) -> bool:
    """SIGTERM to the process group, SIGKILL to what is left after `grace_s`; whether anything was running."""
    if not group_alive(pgid):
        return False
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(0.2)
    if group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)
    return True


def stop_group_on_sigterm() -> None:
    """In a process that leads its own group: on SIGTERM, pass it to the whole group and exit 143."""
    if os.getpid() != os.getpgrp():
        return

    def _stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM reaches this process too
        os.killpg(os.getpgrp(), signal.SIGTERM)
        raise SystemExit(128 + signal.SIGTERM)

    signal.signal(signal.SIGTERM, _stop)


if __name__ == "__main__":
    _exec_bound(sys.argv[1:])

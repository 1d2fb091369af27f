"""Child processes that do not outlive their parent: what the plan runner and the vLLM server use so that a killed
`omnidecision demo|experiment` (even `kill -9`) leaves none of its steps, and none of their servers, running.

- `die_with_parent`: a `preexec_fn` that asks Linux to send the child SIGTERM when the thread that started it dies
  (prctl PR_SET_PDEATHSIG); elsewhere a no-op.
- `stop_group_on_sigterm`: in a step that leads its own process group, SIGTERM stops the whole group (the
  accelerate launcher and its training process, a collect's sandboxes) and exits 143, so context managers run (an
  eval's vLLM server stops with them).
- `stop_group`: SIGTERM to a process group, SIGKILL after a grace period: what a restarted runner does to a step
  that a killed runner left behind, before it runs that step again.

    python -c "from omnidecision.procs import group_alive; import os; print(group_alive(os.getpgrp()))"
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import time

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
# resolved once, in the parent: the child between fork and exec must not load libraries
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True) if sys.platform == "linux" else None


def die_with_parent() -> None:
    """`preexec_fn`: SIGTERM to this child when its parent thread exits (Linux; a no-op elsewhere)."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


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

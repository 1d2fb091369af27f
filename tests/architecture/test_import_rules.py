"""The import rules of DESIGN.md §5 as a table: for each package, the `omnidecision.*` packages that importing it
(and every module inside it) may load. Measured from `sys.modules` in a fresh interpreter, so lazy imports inside
functions do not count, but any module-level import (direct or through another package) does.

Breaking a rule on purpose (e.g. `from omnidecision.agent import loop` at the top of
`omnidecision/rewards/checks.py`) makes `test_package_loads_only_what_it_may[rewards]` fail, naming the extra
package.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LEDGER = {"ledger"}
PROTOCOL = LEDGER | {"protocol"}
TASKS = PROTOCOL | {"tasks"}
TOOLS = TASKS | {"tools"}  # tools read task records
# package -> the omnidecision packages (and top-level modules) its modules may load at import time
ALLOWED: dict[str, set[str]] = {
    "ledger": LEDGER,
    "protocol": PROTOCOL,
    "synthetic": PROTOCOL | {"synthetic"},
    "tools": TOOLS,
    "tasks": TASKS,
    "backends": TOOLS | {"backends"},  # the perception backend decodes frames with the tools' media helpers
    "agent": TOOLS | {"backends", "agent"},
    "rewards": PROTOCOL | {"rewards"},  # never agent, never tasks: rewards score ledger states only
    "sft": PROTOCOL | {"sft", "rewards", "synthetic", "checkpoints", "modeling", "preflight"},
    "rl": PROTOCOL | {"rl", "rewards", "synthetic", "checkpoints", "modeling", "stats", "preflight"},
    "collect": TOOLS | {"backends", "agent", "collect", "preflight"},
    "eval": TOOLS | {"backends", "agent", "collect", "eval", "serving", "stats", "preflight"},
    "onpolicy": TOOLS | {"backends", "agent", "collect", "onpolicy"},
    "serving": {"serving"},
    "view": PROTOCOL | {"view"},
}

_PROBE = """
import importlib, json, pkgutil, sys
name = "omnidecision." + sys.argv[1]
pkg = importlib.import_module(name)
for info in pkgutil.walk_packages(pkg.__path__, name + "."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
print(json.dumps(sorted({k.split(".")[1] for k in sys.modules if k.startswith("omnidecision.")})))
"""


def loaded_by(package: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, package], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"importing omnidecision.{package} failed:\n{out.stderr[-2000:]}"
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_loads_only_what_it_may(package: str) -> None:
    extra = loaded_by(package) - ALLOWED[package]
    assert not extra, f"omnidecision.{package} loads {sorted(extra)}, which DESIGN.md §5 forbids"


def test_every_package_has_a_rule() -> None:
    from pathlib import Path

    import omnidecision

    root = Path(omnidecision.__file__).parent
    packages = {p.parent.name for p in root.glob("*/__init__.py")}
    assert packages - set(ALLOWED) == set(), "a new package needs its row in ALLOWED"

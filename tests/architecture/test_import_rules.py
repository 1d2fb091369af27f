"""The import rules (docs/architecture.md, "Layers and import direction") as a table: for each package, the
`omnidecision.*` packages that importing it (and every module inside it) may load. Measured from `sys.modules` in a
fresh interpreter, so lazy imports inside functions do not count, but any module-level import (direct or through
another package) does. `python tests/architecture/test_import_rules.py` prints the table the doc shows.

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
    # the demo and the experiment are lists of commands: every other package only inside functions (lazily)
    "pipeline": {"pipeline"},
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
    assert not extra, f"omnidecision.{package} loads {sorted(extra)}, which docs/architecture.md forbids"


def render_table() -> str:
    """ALLOWED as the Markdown table docs/architecture.md shows (rows and cells in layer order)."""
    order = ["ledger", "protocol", "tasks", "tools", "backends", "agent", "collect", "eval", "onpolicy", "rewards",
             "sft", "rl", "synthetic", "serving", "view", "pipeline"]
    rank = {name: i for i, name in enumerate(order)}
    lines = ["| package | may load at import time (besides itself) |", "| --- | --- |"]
    for package in sorted(ALLOWED, key=lambda p: rank.get(p, len(order))):
        others = sorted(ALLOWED[package] - {package}, key=lambda p: (rank.get(p, len(order)), p))
        lines.append(f"| {package} | {', '.join(others) or '—'} |")
    return "\n".join(lines)


def test_architecture_doc_shows_this_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text("utf-8")
    assert render_table() in doc, "docs/architecture.md: paste the table `python tests/architecture/" \
        "test_import_rules.py` prints"


def test_every_package_has_a_rule() -> None:
    from pathlib import Path

    import omnidecision

    root = Path(omnidecision.__file__).parent
    packages = {p.parent.name for p in root.glob("*/__init__.py")}
    assert packages - set(ALLOWED) == set(), "a new package needs its row in ALLOWED"


if __name__ == "__main__":
    print(render_table())

"""The closure rubric is not the rule planner in disguise: importing every module of `omnidecision.rewards` never loads
`omnidecision.protocol.rule` (DESIGN.md §5: rewards never import the rule planner). Measured in a fresh interpreter
from `sys.modules`, so an import through another module counts too."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import importlib, pkgutil, sys
import omnidecision.rewards as pkg
for info in pkgutil.walk_packages(pkg.__path__, "omnidecision.rewards."):
    importlib.import_module(info.name)
print("LOADED" if "omnidecision.protocol.rule" in sys.modules else "CLEAN")
"""


def test_rewards_never_load_the_rule_planner() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "CLEAN", "omnidecision.rewards loads omnidecision.protocol.rule"


def test_the_probe_sees_the_rule_when_it_is_loaded() -> None:
    """The same probe, with the rule planner imported first, reports it: the check above can fail."""
    probe = "import omnidecision.protocol.rule\n" + _PROBE
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "LOADED"

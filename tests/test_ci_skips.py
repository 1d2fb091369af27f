"""The skip policy of tests/conftest.py: under CI=true a test whose dependency is missing FAILS instead of skipping
(only `gpu` and `slow` tests may skip); without CI it skips. Checked in a pytest subprocess that runs this
repository's conftest.py over small test files, with `trl` made unimportable by a `trl.py` that raises ImportError
placed first on the path (what a missing package raises).

    pytest -q tests/test_ci_skips.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

CONFTEST = Path(__file__).resolve().with_name("conftest.py")

MARKED = '''
import pytest

@pytest.mark.requires("trl")
def test_needs_trl():
    import trl  # noqa: F401

@pytest.mark.requires("json")
def test_needs_json():
    import json
    assert json.loads("1") == 1

@pytest.mark.slow
@pytest.mark.requires("trl")
def test_slow_needs_trl():
    pass

@pytest.mark.gpu
def test_gpu_only():
    pytest.skip("no CUDA device")

@pytest.fixture
def tool():
    pytest.skip("the tool is not installed")

def test_missing_tool(tool):
    pass
'''

MODULE_LEVEL = '''
import pytest

pytest.importorskip("trl")

def test_hidden_by_a_module_level_skip():
    pass
'''


def _run(tmp_path: Path, ci: bool) -> tuple[int, dict[str, str], str]:
    """Run pytest over the two files; (exit code, test name -> passed|failed|skipped, output)."""
    files = {"conftest.py": CONFTEST.read_text("utf-8"), "test_marked.py": MARKED,
             "test_module_level.py": MODULE_LEVEL,
             "pytest.ini": "[pytest]\nmarkers =\n    slow: long\n",
             "trl.py": "raise ModuleNotFoundError('trl made unimportable by tests/test_ci_skips.py')\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, "utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci:
        env["CI"] = "true"
    xml = tmp_path / f"ci-{ci}.xml"
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "--continue-on-collection-errors", f"--junitxml={xml}", "test_marked.py",
                          "test_module_level.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    outcomes = {}
    for case in ET.parse(xml).iter("testcase"):
        kinds = {child.tag for child in case}
        name = case.get("name") or ""
        outcomes[name] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds
                          else "passed")
    return res.returncode, outcomes, res.stdout + res.stderr


def test_ci_turns_a_missing_dependency_into_a_failure(tmp_path: Path) -> None:
    code, outcomes, out = _run(tmp_path, ci=True)
    assert code != 0, out
    assert outcomes["test_needs_trl"] == "failed", out
    assert outcomes["test_missing_tool"] == "failed", out  # a fixture's skip (a missing tool) too
    assert outcomes["test_needs_json"] == "passed", out
    assert outcomes["test_gpu_only"] == "skipped" and outcomes["test_slow_needs_trl"] == "skipped", out
    # the module-level importorskip is a collection error, not a silent skip
    assert "test_hidden_by_a_module_level_skip" not in outcomes and "test_module_level.py" in out, out
    assert "CI=true: this skip fails the run" in out and "trl made unimportable" in out, out


def test_without_ci_a_missing_dependency_skips(tmp_path: Path) -> None:
    code, outcomes, out = _run(tmp_path, ci=False)
    assert code == 0, out
    assert outcomes["test_needs_trl"] == "skipped" and outcomes["test_missing_tool"] == "skipped", out
    assert outcomes["test_needs_json"] == "passed", out


def test_no_guard_on_the_projects_own_modules() -> None:
    """A failing import of omnidecision itself is a bug to see, never a reason to skip."""
    guards = ("importorskip(\"omnidecision", "importorskip('omnidecision", "find_spec(\"omnidecision",
              "find_spec('omnidecision")
    here = Path(__file__).resolve()
    found = [f"{path}: {g}" for path in sorted(here.parent.rglob("*.py")) if path != here
             for g in guards if g in path.read_text("utf-8")]
    assert not found, found

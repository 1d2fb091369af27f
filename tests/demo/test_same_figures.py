"""scripts/analysis/same_figures.py: two demo summaries compared figure by figure, timings and provenance left out."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/analysis/same_figures.py"
SUMMARY = ROOT / "docs/results/demo-summary.json"


def _compare(tmp_path: Path, second: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(second), "utf-8")
    return subprocess.run([sys.executable, str(SCRIPT), str(SUMMARY), str(path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_other_timings_and_provenance_are_the_same_figures(tmp_path):
    other = json.loads(SUMMARY.read_text("utf-8"))
    other["total_wall_s"] *= 1.6
    other["stage_wall_s"]["sft"] += 90.0
    other["provenance"]["cpu"] = "another host"
    done = _compare(tmp_path, other)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 differences of figures" in done.stdout


def test_a_changed_accuracy_and_a_missing_arm_are_named_by_their_path(tmp_path):
    summary = json.loads(SUMMARY.read_text("utf-8"))
    other = copy.deepcopy(summary)
    arm = sorted(other["planners"])[0]
    other["planners"][arm]["accuracy"] = summary["planners"][arm]["accuracy"] + 0.025
    gone = sorted(other["planners"])[-1]
    del other["planners"][gone]
    done = _compare(tmp_path, other)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"planners.{arm}.accuracy: " in done.stdout
    assert f"planners: keys only in the first: {gone}" in done.stdout
    assert "2 differences of figures" in done.stdout


def test_a_file_that_is_not_json_exits_2_naming_it(tmp_path):
    bad = tmp_path / "summary.json"
    bad.write_text('{"planners": ', "utf-8")
    done = subprocess.run([sys.executable, str(SCRIPT), str(SUMMARY), str(bad)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert str(bad) in done.stderr

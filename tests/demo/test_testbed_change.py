"""scripts/analysis/testbed_change.py: one arm before and after a change, per family and overall, paired by start and
task."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("testbed_change", ROOT / "scripts/analysis/testbed_change.py")
testbed_change = importlib.util.module_from_spec(spec)
spec.loader.exec_module(testbed_change)


def test_per_family_and_overall_differences_over_the_common_starts():
    before = {"0": {"r0": {"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0}}, "1": {"r0": {"a": 1.0, "b": 0.0, "c": 1.0,
                                                                                "d": 1.0}},
              "9": {"r0": {"a": 0.0, "b": 0.0}}}  # a start only one side holds is not compared
    after = {"0": {"r0": {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}}, "1": {"r0": {"a": 1.0, "b": 1.0, "c": 1.0,
                                                                               "d": 0.0}}}
    fam = {"a": "switch", "b": "switch", "c": "other", "d": "other"}
    out = testbed_change.compare(before, after, {"0": fam, "1": fam})
    assert out["switch"]["starts"] == ["0", "1"] and out["switch"]["tasks"] == 4
    assert out["switch"]["before"]["estimate"] == pytest.approx(0.25)  # (0/2 + 1/2) / 2
    assert out["switch"]["after"]["estimate"] == pytest.approx(1.0)
    assert out["switch"]["after-before"]["estimate"] == pytest.approx(0.75)
    assert out["other"]["after-before"]["estimate"] == pytest.approx(-0.25)  # (0 + (-1/2)) / 2
    assert out["all"]["after-before"]["estimate"] == pytest.approx(0.25)  # (2/4 + 0/4) / 2
    with pytest.raises(SystemExit, match="no start in common"):
        testbed_change.compare({"5": before["0"]}, after, {"0": fam, "1": fam})

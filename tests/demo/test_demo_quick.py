"""The whole pipeline end to end (`omnidecision demo --quick`): every stage runs as its own command and the
summary has, for each planner, the fields the README promises. Slow (three vLLM start-ups): `make slow-test`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


@pytest.mark.timeout(1200)
def test_quick_demo_writes_a_complete_summary(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-c", "from omnidecision.cli import app; app()", "demo", "--quick",
                           "--out", str(out)], capture_output=True, text=True, timeout=1150)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    for name in ("untrained", "sft", "grpo", "teacher"):
        p = summary[name]
        assert set(p) >= {"accuracy", "ci95", "n", "outcomes", "heldout_closure_reward"}
        assert sum(p["outcomes"].values()) == p["n"] > 0
        assert p["ci95"][0] <= p["accuracy"] <= p["ci95"][1]
        assert (p["heldout_closure_reward"] is None) == (name == "teacher")
    assert summary["teacher"]["accuracy"] == 1.0  # the noise-free teacher solves its own suite
    assert {"synth", "collect", "harvest", "sft", "grpo", "export"} <= set(summary["stage_wall_s"])
    assert (out / "compare" / "compare.md").exists()

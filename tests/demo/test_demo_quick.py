"""The whole pipeline end to end (`omnidecision demo --quick`): every stage runs as its own command and the
summary has, for each planner, the fields the README promises. Slow (four vLLM start-ups): `make slow-test`."""

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
    for name in ("sft", "sft_plus", "rounds", "grpo", "teacher"):
        p = summary["planners"][name]
        assert set(p) >= {"accuracy", "ci95", "n", "outcomes", "invalid_action_rate", "heldout_closure_reward"}
        assert sum(p["outcomes"].values()) == p["n"] == summary["suites"]["test"]["n"]
        assert p["ci95"][0] <= p["accuracy"] <= p["ci95"][1]
        assert (p["heldout_closure_reward"] is None) == (name == "teacher")
    assert summary["planners"]["teacher"]["accuracy"] >= 0.95  # the noise-free teacher solves its own suite
    assert summary["best"] in ("sft", "sft_plus", "rounds", "grpo")
    assert len(summary["paired_in_loop"]) >= 3
    assert {"synth-train", "collect-train", "sft", "rounds", "grpo", "sft-plus"} <= set(summary["stage_wall_s"])
    assert (out / "compare" / "compare.md").exists()
    # the on-policy round relabelled the planner's own states
    round1 = json.loads((out / "rounds" / "round-1" / "round.json").read_text())
    assert round1["relabel"]["states"] > 0

"""The whole pipeline end to end (`omnidecision demo --quick`): every stage runs as its own command and the
summary has, for each planner, the fields docs/guide/demo.md lists. Slow (seven vLLM start-ups): `make slow-test`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from omnidecision.pipeline.arms import pairs, planners

PLANNERS = planners()

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


@pytest.mark.timeout(1200)
def test_quick_demo_writes_a_complete_summary(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-c", "from omnidecision.cli import app; app()", "demo", "--quick",
                           "--out", str(out)], capture_output=True, text=True, timeout=1150)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    for name in PLANNERS:
        p = summary["planners"][name]
        assert set(p) >= {"accuracy", "ci95", "n", "outcomes", "invalid_action_rate", "data"}
        assert sum(p["outcomes"].values()) == p["n"] == summary["config"]["test_tasks"]
        assert p["ci95"][0] <= p["accuracy"] <= p["ci95"][1]
    assert summary["planners"]["rule"]["accuracy"] >= 0.95  # the rule planner solves its own suite
    assert len(summary["paired_in_loop"]) == len(pairs())
    assert {"collect-train", "harvest", "sft", "judge-train", "grpo_judge.r0", "rft.r0", "sft_plus.r0", "collect-own",
            "harvest-own", "grpo_own.r0", "rft_own.r0-select", "rft_own.r0"} <= set(summary["stage_wall_s"])
    # every control consumed its reference's rows (within one of its batches), read from trainer_state.json
    controls = {k: v for k, v in summary["budget"].items() if "reference" in v}
    assert {"rft.r0", "sft_plus.r0", "rft_own.r0"} <= set(controls) and all(v["matched"] for v in controls.values()), (
        controls)
    assert controls["rft_own.r0"]["reference"] == ["judge-train", "grpo_own.r0"]
    # the SFT planner's own runs were harvested with no label: RL rows only, from every run
    own = summary["own_states"]
    assert own["runs"] > 0 and own["rl_rows"]["train"] > 0 and "sft" not in own
    # every evaluated planner's report carried its decision rates into the summary
    assert all(summary["planners"][n]["decisions"] is not None for n in PLANNERS)
    assert summary["provenance"]["cpu"] and summary["provenance"]["libraries"]["torch"]
    assert all(r["threads"] == 1 for r in summary["provenance"]["steps"].values())
    assert (out / "compare" / "compare.md").exists()
    # every planner was decoded in-process; the SFT planner also served by vLLM took the same decision at every step
    parity = summary["serving_parity"]
    assert parity["runs"] == summary["config"]["test_tasks"] and parity["steps"] > 0
    assert parity["steps_identical"] == parity["steps"], parity["first_differences"]
    # the harvest kept the teacher's emitted decisions of its judge-correct runs only, and the judge was trained
    assert 0 < summary["harvest"]["correct_runs"] < summary["harvest"]["runs"]
    assert summary["judge_eval"]["n"] > 0
    assert json.loads((out / "models" / "judge" / "judge_train.json").read_text())["pairs"] > 0

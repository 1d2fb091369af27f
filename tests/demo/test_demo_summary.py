"""The demo's summary.json and results table from finished eval reports and closure evaluations (fast; the whole
demo runs in tests/demo/test_demo_quick.py, slow)."""

from __future__ import annotations

import json

from omnidecision.demo import DemoConfig, summarise, table
from omnidecision.rl.evaluate import paired_comparison, spread


def _report(folder, correct, n, outcomes):
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({
        "accuracy": correct / n, "ci95": [max(0.0, correct / n - 0.1), min(1.0, correct / n + 0.1)], "n": n,
        "outcomes": outcomes, "invalid_action_rate": 0.1}))
    return folder


def test_summary_has_every_planner_field_and_the_paired_lines(tmp_path):
    evals = {"untrained": _report(tmp_path / "u", 0, 4, {"budget": 4}),
             "sft": _report(tmp_path / "s", 2, 4, {"accepted": 2, "budget": 2}),
             "grpo": _report(tmp_path / "g", 3, 4, {"accepted": 3, "insufficient": 1}),
             "teacher": _report(tmp_path / "t", 4, 4, {"accepted": 4})}
    per_state = {"untrained": [0.0, 0.0, 0.0], "sft": [1.0, 0.375, 1.0], "grpo": [1.0, 1.0, 1.0]}
    closure = {k: {"closure": spread(v), "per_state": v, "valid_rate": 1.0} for k, v in per_state.items()}
    paired = {"sft_vs_untrained": paired_comparison(per_state["untrained"], per_state["sft"]),
              "grpo_vs_sft": paired_comparison(per_state["sft"], per_state["grpo"])}
    summary = summarise(tmp_path, evals, closure, {"sft": 12.0, "grpo": 8.0}, DemoConfig.quick(), paired)

    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved == summary
    for name in ("untrained", "sft", "grpo", "teacher"):
        assert set(saved[name]) >= {"accuracy", "ci95", "n", "outcomes", "heldout_closure_reward"}
    assert saved["teacher"]["heldout_closure_reward"] is None
    assert saved["grpo"]["heldout_closure_reward"] == 1.0
    assert saved["sft"]["heldout_closure_reward"] == round((2.375) / 3, 4)
    assert saved["heldout_closure_paired"]["grpo_vs_sft"]["wins"] == 1
    assert saved["total_wall_s"] == 20.0

    text = table(summary)
    assert "| grpo | 0.750 |" in text and "| teacher | 1.000 |" in text
    assert "grpo vs sft on the same 3 states: per-state Δ +0.208" in text
    assert "1 better / 0 worse / 2 same" in text

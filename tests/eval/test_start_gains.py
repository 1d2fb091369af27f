"""scripts/analysis/start_gains.py: per-start gains over SFT, and the split-half correlation that shares no test task
between the SFT level and the gain."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("start_gains", ROOT / "scripts/analysis/start_gains.py")
start_gains = importlib.util.module_from_spec(spec)
spec.loader.exec_module(start_gains)


def _pooled(sft_correct: list[int], arm_correct: list[int], n: int = 10) -> dict:
    """Start s: SFT solves the first sft_correct[s] of n tasks, every RL arm the first arm_correct[s]."""
    def run(k: int) -> dict[str, float]:
        return {f"syn-2000-{i:05d}": float(i < k) for i in range(n)}

    starts = list(range(len(sft_correct)))
    outcomes = {"sft": {str(s): {"r0": run(k)} for s, k in zip(starts, sft_correct, strict=True)}}
    for arm in start_gains.ARMS:
        outcomes[arm] = {str(s): {"r0": run(k), "r1": run(k)} for s, k in zip(starts, arm_correct, strict=True)}
    acc = {name: [k / n for k in sft_correct] for name in ("sft", "oracle_sft", "teacher")}
    return {"seeds": starts, "outcomes": outcomes, "per_seed_accuracy": acc}


def test_gains_per_start_and_their_correlation_with_the_sft_level(tmp_path, capsys):
    path = tmp_path / "pooled.json"
    # the weaker the SFT start, the larger the gain: every arm lifts every start to 9 of 10
    path.write_text(json.dumps(_pooled([4, 6, 8], [9, 9, 9])), "utf-8")
    start_gains.main(str(path))
    out = capsys.readouterr().out
    assert "| 0 | 0.400 | 0.400 | 0.400 | +0.500 |" in out and "| 2 | 0.800 | 0.800 | 0.800 | +0.100 |" in out
    assert "- grpo: -1.00; split-half -1.00" in out


def test_a_constant_gain_has_no_correlation_to_report(tmp_path, capsys):
    path = tmp_path / "pooled.json"
    # a constant gain of one task per start whatever the SFT level: the gain is the same at every start
    path.write_text(json.dumps(_pooled([4, 6, 8, 5], [5, 7, 9, 6])), "utf-8")
    start_gains.main(str(path))
    out = capsys.readouterr().out
    assert "| 3 | 0.500 | 0.500 | 0.500 | +0.100 |" in out
    assert "- grpo_judge: n/a (no spread); split-half" in out  # (each half's gain still varies by start)


def test_the_planned_contrasts_are_also_read_family_wise(tmp_path, capsys):
    pooled = _pooled([4, 6, 8], [9, 9, 9])
    pooled["contrasts"] = {"planned": {"a-b": {"estimate": 0.04, "low": 0.01, "high": 0.07, "p_value": 0.01},
                                       "c-d": {"estimate": 0.01, "low": -0.01, "high": 0.03, "p_value": 0.04}}}
    path = tmp_path / "pooled.json"
    path.write_text(json.dumps(pooled), "utf-8")
    start_gains.main(str(path))
    out = capsys.readouterr().out
    # Holm step-down: 0.01 x 2 = 0.02, then max(0.02, 0.04 x 1) = 0.04
    assert "- a-b: +0.040 [+0.010, +0.070] p 0.01, Holm 0.02" in out
    assert "- c-d: +0.010 [-0.010, +0.030] p 0.04, Holm 0.04" in out

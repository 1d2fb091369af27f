"""The executed reward in GRPO (grounding/reward.py, configs/grpo/tiny-cpu-exec.yaml, the grpo_exec arm): a real
TRL GRPO run of 2 steps on a harvest of real teacher runs, rewarded by executing each candidate; its cost written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnidecision.grounding.reward import get_executed_reward, harvest_sources

pytestmark = pytest.mark.requires("trl")
RECIPE = Path(__file__).resolve().parents[2] / "configs" / "grpo" / "tiny-cpu-exec.yaml"


def test_the_reward_scores_each_candidate_by_its_executed_return(habits_runs, tmp_path):
    assert harvest_sources(habits_runs["data"] / "rl") == [habits_runs["collect"]]
    reward = get_executed_reward(dataset=str(habits_runs["data"] / "rl"), output_dir=str(tmp_path))
    from datasets import load_dataset

    rows = load_dataset("parquet", data_files=[str(p) for p in (habits_runs["data"] / "rl").glob("train-*")],
                        split="train")
    rows = [r for r in rows if r["decision"]][:6]
    recorded = reward([r["decision"] for r in rows], run_id=[r["run_id"] for r in rows],
                      step=[r["step"] for r in rows])
    # the decision the teacher made there, executed with the teacher: the recorded run's judged outcome
    assert recorded == [1.0 if r["correct"] else 0.0 for r in rows]
    garbage = reward(["not an action"] * 2, run_id=[rows[0]["run_id"]] * 2, step=[rows[0]["step"]] * 2)
    assert all(v is not None and 0.0 <= v <= 1.0 for v in garbage)  # an invalid output is executed, not crashed
    cost = json.loads((tmp_path / "executed_cost.json").read_text())
    assert cost["executions"] == len({(r["run_id"], r["step"], r["decision"]) for r in rows}) + 1  # duplicates once
    assert cost["calls"] == 2


def test_grpo_exec_trains_two_steps_and_records_its_cost(habits_runs, tiny_planner, tmp_path):
    from omnidecision.grounding.grpo import main, parse_args

    out = tmp_path / "grpo_exec"
    report = main(*parse_args([
        "--config", str(RECIPE), "--model_name_or_path", str(tiny_planner), "--dataset_name",
        str(habits_runs["data"] / "rl"), "--output_dir", str(out), "--max_steps", "2", "--num_generations", "4",
        "--per_device_train_batch_size", "4", "--generation_batch_size", "8", "--max_completion_length", "16",
        "--eval_closure_n", "4", "--checkpoint_dev_n", "4", "--select_states", "all", "--logging_steps", "1"]))
    assert report["steps"] == 2
    logged = {k for row in json.loads((out / "log_history.json").read_text()) for k in row}
    assert "rewards/executed_reward/mean" in logged, sorted(logged)
    cost = json.loads((out / "executed_cost.json").read_text())
    # one generation batch of 8 candidates (2 states × 4) serves both steps; each distinct (state, decision) once
    assert cost["candidates"] == 8 and 1 <= cost["executions"] <= 8 and cost["policy"] == "teacher"
    assert cost["cpu_s"] > 0
    assert (out / "executed_returns.sqlite").is_file()


def test_the_old_reward_path_still_reads_with_a_warning(tmp_path, capsys):
    """A recipe naming the executed reward by its old import path is read as `executed` (CHANGELOG.md, Deprecated),
    its keyword arguments with it; decision-level GRPO's checks know no `executed` and refuse an environment."""
    from omnidecision.grounding.grpo import REWARDS, parse_args, runs_the_agent
    from omnidecision.rl.config import parse_args as parse_decision_args
    from omnidecision.rl.dryrun import grpo_checks

    old = "omnidecision.grounding.reward.get_executed_reward"
    base = ["--config", str(RECIPE), "--model_name_or_path", str(tmp_path), "--dataset_name", str(tmp_path)]
    script, training, model = parse_args([*base, "--reward_funcs", old, "format",
                                          "--reward_kwargs", json.dumps({old: {"policy": "teacher"}})])
    assert script.reward_funcs == ["executed", "format"]
    assert script.reward_kwargs == {"executed": {"policy": "teacher"}}
    assert f"reward `{old}` is deprecated, use `executed`" in capsys.readouterr().err
    assert runs_the_agent(script) and REWARDS["executed"] is get_executed_reward
    refused = {c.what: c.detail for c in grpo_checks(script, training, model) if c.status == "error"}
    assert "unknown reward 'executed'" in refused["reward_funcs"]
    assert "reward_funcs" not in {c.what for c in grpo_checks(script, training, model, rewards=REWARDS)
                                  if c.status == "error"}
    env_recipe = str(RECIPE.with_name("tiny-cpu-env.yaml"))
    env, training, model = parse_decision_args(["--config", env_recipe, *base[2:]])
    refused = {c.what: c.detail for c in grpo_checks(env, training, model) if c.status == "error"}
    assert "omnidecision grpo-agent" in refused["environment"]

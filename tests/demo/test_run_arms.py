"""scripts/analysis/run_arms.py: the experiment's plan cut to some arms keeps every step their test evaluations read
from and nothing else; per-family means cut each arm's outcomes to one family's tasks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from omnidecision.pipeline.experiment import load_experiment
from omnidecision.pipeline.plan import build_plan

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("run_arms", ROOT / "scripts/analysis/run_arms.py")
run_arms = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_arms)


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    recipe = load_experiment(ROOT / "configs/experiment/default.yaml", ["starts=[0]"])
    return build_plan(recipe.start_config(0), tmp_path_factory.mktemp("arms") / "seed-0")


def test_the_cut_plan_holds_what_the_arms_evaluations_read_and_nothing_else(plan):
    names = [s.name for s in run_arms.needed(plan, {"oracle_sft"})]
    # oracle_sft: its own harvest, the untrained planner (whose tokenizer is built from the teacher's rows: harvest)
    for step in ("synth-train", "synth-dev", "synth-test", "collect-train", "collect-dev", "harvest",
                 "harvest-oracle", "tiny-planner", "oracle_sft", "export-oracle_sft", "eval-oracle_sft"):
        assert step in names, (step, names)
    assert not [n for n in names if n in ("sft", "export-sft", "judge-train") or n.startswith(("grpo", "rft"))]
    assert names == [s.name for s in plan if s.name in names]  # plan order kept
    # every path a kept step reads is written by a kept step (or by none in the plan)
    written = {w for s in plan if s.name in names for w in s.writes}
    every = {w for s in plan for w in s.writes}
    for s in (s for s in plan if s.name in names):
        for path in s.reads:
            owners = {w for w in every if path == w or path.startswith(w + "/")}
            assert owners <= written, (s.name, path)


def test_a_grpo_arm_pulls_in_the_sft_planner_and_an_unknown_arm_is_refused(plan):
    names = {s.name for s in run_arms.needed(plan, {"grpo"})}
    assert {"sft", "export-sft", "eval-grpo.r0"} <= names and "oracle_sft" not in names
    with pytest.raises(SystemExit, match="no evaluation step"):
        run_arms.needed(plan, {"no_such_arm"})


def test_family_means_cut_each_start_to_the_familys_tasks():
    outcomes = {"oracle_sft": {"0": {"r0": {"a": 1.0, "b": 0.0, "c": 1.0, "f": 1.0}},
                               "1": {"r0": {"d": 1.0, "g": 1.0, "e": 1.0}}}}
    families = {"0": {"a": "switch", "b": "switch", "c": "other", "f": "other"},
                "1": {"d": "switch", "g": "switch", "e": "other"}}
    means = run_arms.family_means(outcomes, families)
    # switch: start 0 has 1 of 2, start 1 has 2 of 2 → the mean of per-start means is 0.75
    assert means["switch"]["oracle_sft"]["estimate"] == pytest.approx(0.75)
    assert means["switch"]["oracle_sft"]["n_starts"] == 2 and means["switch"]["oracle_sft"]["starts_left_out"] == []
    # other: start 1 has one task only, so only start 0 counts (and is named as left out)
    assert means["other"]["oracle_sft"]["estimate"] == pytest.approx(1.0)
    assert means["other"]["oracle_sft"]["n_starts"] == 1 and means["other"]["oracle_sft"]["starts_left_out"] == ["1"]


def test_planned_contrasts_are_those_of_the_recipe_whose_arms_both_ran():
    recipe = load_experiment(ROOT / "configs/experiment/default.yaml", ["starts=[0]"])
    arms = tuple(a for a in run_arms.ARMS if a.name in {"sft", "grpo_judge", "grpo_own", "rft_own"})
    planned = run_arms.planned_among(recipe.contrasts(), arms)
    # grpo_judge-rft, grpo_judge-grpo_shuffled, grpo-sft name arms that did not run: dropped; the rest kept, in order
    assert planned == [("sft", "grpo_judge"), ("grpo_judge", "grpo_own"), ("sft", "grpo_own"), ("rft_own", "grpo_own")]
    assert run_arms.planned_among(recipe.contrasts(), arms[:1]) == []

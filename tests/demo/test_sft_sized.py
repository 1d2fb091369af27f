"""SFT sized to its data in the pipeline, and a planner below its teacher reported.

- `sft_epochs` turns the sft arm's fixed step count into an epoch budget with early stopping on the dev loss; the
  sft_fixed arm (listed by a recipe, never in the demo) keeps the fixed steps; both argument lists parse with the
  SFT stage's own parser (what its dry run and its run read).
- The summary and the experiment name every trained planner whose test accuracy is below the teacher's (whose runs
  it learned from) and count the replicates the checkpoint policy ended at their start.

    .venv/bin/pytest tests/demo/test_sft_sized.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnidecision.pipeline.arms import ALL_ARMS, ARMS, below_teacher
from omnidecision.pipeline.experiment import ExperimentRecipe, pool
from omnidecision.pipeline.plan import DemoConfig, build_plan
from omnidecision.pipeline.summary import summarise, table
from tests.demo.test_demo_summary import CORRECT, _demo_folder

ROOT = Path(__file__).resolve().parents[2]


def _sft_steps(cfg: DemoConfig, arms=ARMS) -> dict[str, list[str]]:
    return {s.name: s.argv for s in build_plan(cfg, Path("/tmp/od-plan"), arms) if s.argv[0] == "sft"
            and s.name in ("sft", "sft_fixed")}


def test_sized_sft_trains_epochs_with_early_stopping_and_sft_fixed_keeps_the_steps():
    cfg = DemoConfig.quick()
    fixed = _sft_steps(cfg)["sft"]
    assert fixed[fixed.index("--max_steps") + 1] == str(cfg.sft_steps) and "--num_train_epochs" not in fixed
    cfg.sft_epochs, cfg.sft_patience = 40.0, 3
    steps = _sft_steps(cfg, ALL_ARMS)
    sized, kept = steps["sft"], steps["sft_fixed"]
    for flag, value in (("--max_steps", "-1"), ("--num_train_epochs", "40"), ("--early_stopping_patience", "3"),
                        ("--eval_strategy", "epoch"), ("--save_strategy", "epoch")):
        assert sized[sized.index(flag) + 1] == value, (flag, sized)
    assert kept[kept.index("--max_steps") + 1] == str(cfg.sft_steps) and "--early_stopping_patience" not in kept
    assert kept[kept.index("--output_dir") + 1].endswith("/models/sft_fixed-run")
    # the demo never runs sft_fixed
    assert "sft_fixed" not in {s.name for s in build_plan(DemoConfig.quick(), Path("/tmp/od-plan"))}


@pytest.mark.requires("trl")
def test_the_planned_sft_arguments_parse_as_the_sft_stage_reads_them():
    from omnidecision.sft.config import parse_args

    cfg = DemoConfig.quick()
    cfg.sft_epochs = 40.0
    for name, argv in _sft_steps(cfg, ALL_ARMS).items():
        script, training, _ = parse_args(argv[1:])
        if name == "sft":
            assert (training.max_steps, training.num_train_epochs, script.early_stopping_patience) == (-1, 40.0, 5)
            assert training.load_best_model_at_end  # the recipe keeps the best dev loss; early stopping reads it
        else:
            assert training.max_steps == cfg.sft_steps and script.early_stopping_patience is None


def test_a_recipe_with_sft_fixed_must_size_its_sft():
    base = {"starts": [0], "replicates": 1, "test_tasks": 8, "planned": ["sft-sft_fixed"],
            "arms": ["teacher", "sft", "sft_fixed"]}
    with pytest.raises(ValueError, match="set sft_epochs"):
        ExperimentRecipe(**base)
    recipe = ExperimentRecipe(**base, sft_epochs=60)
    assert [a.name for a in recipe.arm_table()] == ["teacher", "sft", "sft_fixed"]
    assert recipe.start_config(2).sft_epochs == 60
    assert "sft_fixed" not in {a.name for a in ExperimentRecipe(**{**base, "arms": [], "planned": ["sft-teacher"]})
                               .arm_table()}


def test_below_teacher_names_the_planners_that_learned_from_it():
    flag = below_teacher({"teacher": 0.6, "sft": 0.45, "grpo_judge": 0.7, "rft": 0.6, "oracle_sft": 0.3,
                          "rule": 0.2})
    assert flag == {"teacher": 0.6, "below": {"sft": -0.15}}  # oracle_sft learns rule labels; rule is no student
    assert below_teacher({"sft": 0.1}) is None


def test_the_summary_and_the_experiment_report_a_planner_below_its_teacher(tmp_path):
    cfg = DemoConfig.quick()
    correct = {**CORRECT, "teacher": [True, True, False, True], "sft": [True, False, False, False]}
    _demo_folder(tmp_path, correct, cfg)
    run = tmp_path / "models" / "grpo_judge.r0-run"
    run.mkdir(parents=True)
    (run / "checkpoint_selection.json").write_text(json.dumps({"policy": "dev_closure", "chosen_step": 0}))
    summary = summarise(tmp_path, cfg, {})
    below = summary["below_teacher"]["below"]
    assert below["sft"] == -0.5 and "grpo_judge" not in below and "oracle_sft" not in below
    assert set(below) == {n for n, c in correct.items() if n not in ("teacher", "rule", "oracle_sft")
                          and sum(c) < sum(correct["teacher"])}
    assert "**Below the teacher** (0.750, whose runs they learned from)" in table(summary)
    assert "sft -0.500" in table(summary)
    assert summary["planners"]["grpo_judge"]["chosen_step"] == {"r0": 0}
    pooled = pool([summary], [tmp_path])
    assert pooled["below_teacher"]["0"]["below"]["sft"] == -0.5
    assert pooled["ended_at_start"]["grpo_judge"] == 1 and pooled["ended_at_start"]["rft"] == 0

"""Adding an arm is one row of the arm table plus its recipe (issue 35): a toy arm is planned, run and summarised.

The toy `rule_short` is the rule planner under a 5-step budget (a reference arm: its recipe is an evaluation
recipe written here). Its plan is run for real (the suite and the two evaluations: seconds, no model), then the
summary has its row, its per-task outcomes and its pair. A trained toy arm (kind `sft` with its own recipe) is
planned from the same row with its SFT, export and served evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from omnidecision.pipeline.arms import ARMS, Arm, by_name, pairs
from omnidecision.pipeline.plan import CONFIGS, DemoConfig, build_plan, needed
from omnidecision.pipeline.scheduler import run_plan
from omnidecision.pipeline.summary import summarise, table


def _toy_recipe(tmp_path: Path) -> Path:
    recipe = yaml.safe_load((CONFIGS / "eval" / "synthetic-rule.yaml").read_text())
    recipe["name"], recipe["agent"]["step_budget"] = "rule_short", 5
    path = tmp_path / "rule-short.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_a_toy_reference_arm_is_planned_run_and_summarised(tmp_path):
    toy = Arm(name="rule_short", kind="reference", recipe=str(_toy_recipe(tmp_path)), baseline=True)
    arms = (*ARMS, toy)  # the one row
    plan = build_plan(DemoConfig.quick(), tmp_path / "demo", arms)
    names = [s.name for s in plan]
    assert "eval-rule_short" in names
    step = plan[names.index("eval-rule_short")]
    assert step.argv[step.argv.index("--config") + 1] == str(tmp_path / "rule-short.yaml")
    assert ("rule_short", "grpo_judge") in pairs(arms)  # a baseline row: every served arm is compared with it
    assert all(s.group == "eval" for s in plan if s.name.startswith("eval-"))

    # run it (quick): the toy and the rule planner it is compared with, and what they need
    small = (by_name()["rule"], toy)
    cfg = DemoConfig.quick()
    out = tmp_path / "demo"
    sub = needed(build_plan(cfg, out, small), ["eval-rule", "eval-rule_short"])
    assert [s.name for s in sub] == ["synth-test", "eval-rule", "eval-rule_short"]
    times = run_plan(sub, out, jobs=2)
    assert {"synth-test", "eval-rule", "eval-rule_short"} <= set(times)
    summary = summarise(out, cfg, times, small)
    row = summary["planners"]["rule_short"]
    assert row["n"] == cfg.test_tasks and sum(row["outcomes"].values()) == cfg.test_tasks
    assert set(summary["outcomes_by_replicate"]["rule_short"]["0"]["r0"]) == set(
        summary["outcomes_by_replicate"]["rule"]["0"]["r0"])
    assert "| rule_short | - |" in table(summary)
    assert summary["provenance"]["steps"]["eval-rule_short"]["threads"] == 1


def test_a_toy_trained_arm_is_one_row_plus_its_recipe(tmp_path):
    recipe = tmp_path / "sft-toy.yaml"
    recipe.write_text((CONFIGS / "sft" / "tiny-cpu.yaml").read_text().replace("learning_rate: 3.0e-3",
                                                                               "learning_rate: 1.0e-3"))
    toy = Arm(name="sft_slow", kind="sft", recipe=str(recipe), data="data/sft", provenance="emitted", group="sft")
    plan = build_plan(DemoConfig(), tmp_path, (*ARMS, toy))
    names = [s.name for s in plan]
    assert {"sft_slow", "export-sft_slow", "eval-sft_slow"} <= set(names)
    assert plan[names.index("sft_slow")].group == "sft"  # beside sft and oracle_sft
    assert ("sft_plus", "sft_slow") in pairs((*ARMS, toy)) and ("teacher", "sft_slow") in pairs((*ARMS, toy))
    eval_step = plan[names.index("eval-sft_slow")]
    assert eval_step.argv[eval_step.argv.index("--backends.planner.model") + 1] == f"{tmp_path}/models/sft_slow"


def test_a_restart_records_the_revision_each_step_ran_at(tmp_path):
    """A restarted plan keeps finished steps with the code revision of the run that made them, and records the
    current revision for the steps it runs again: a result file built over a restart says which code made what."""
    import shutil

    from omnidecision.provenance import git_revision

    cfg, out = DemoConfig.quick(), tmp_path / "demo"
    sub = needed(build_plan(cfg, out, (by_name()["rule"],)), ["eval-rule"])
    run_plan(sub, out, jobs=1)
    steps_file = out / "steps.json"
    earlier = json.loads(steps_file.read_text())
    assert {r["git_revision"] for r in earlier["steps"].values()} == {git_revision()}
    earlier["git_revision"] = "0" * 40  # as if the first run had been at another commit
    for record in earlier["steps"].values():
        del record["git_revision"]  # and recorded before steps carried their own
    steps_file.write_text(json.dumps(earlier))
    shutil.rmtree(out / "eval" / "rule")
    run_plan(sub, out, jobs=1)
    records = json.loads(steps_file.read_text())["steps"]
    assert records["synth-test"]["git_revision"] == "0" * 40
    assert records["eval-rule"]["git_revision"] == git_revision()

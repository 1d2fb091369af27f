"""`eval --teacher`: a planner below the teacher whose runs it learned from is said in the report (issue 64).

The "teacher" is the scripted teacher with its full step budget; the "student" is the same teacher cut to 4 steps,
which runs out of steps on multi-hop tasks: a planner worse than the runs it is compared with, on the same tasks.
"""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.eval.runner import run_eval
from tests.refusals import same_refusal

from .conftest import teacher_recipe

runner = CliRunner()


def _recipe_file(synth_dir, tmp_path, name, **agent):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(teacher_recipe(synth_dir, tmp_path / name, **agent).model_dump(mode="json")))
    return path


def test_a_planner_below_its_teacher_is_said_in_the_headline_and_kept_in_the_file(synth_dir, tmp_path):
    teacher = run_eval(teacher_recipe(synth_dir, tmp_path / "teacher", step_budget=15), progress=False)
    res = runner.invoke(app, ["eval", "--config", str(_recipe_file(synth_dir, tmp_path, "student", step_budget=4)),
                              "--no-progress", "--teacher", str(tmp_path / "teacher")])
    assert res.exit_code == 0, res.output
    student = json.loads((tmp_path / "student" / "report.json").read_text())
    block = student["teacher"]
    # the figures are the two reports' own (every task shared, two samples each)
    assert block["teacher"] == round(teacher["accuracy"], 4) and block["planner"] == round(student["accuracy"], 4)
    assert student["accuracy"] < teacher["accuracy"], "the set-up must give a weaker student"
    assert block["below"] is True and block["n"] == 16 and block["unpaired"] == 0
    assert block["delta"] == round(student["accuracy"] - teacher["accuracy"], 4)
    assert block["ci95"][0] <= block["delta"] <= block["ci95"][1]
    md = (tmp_path / "student" / "report.md").read_text()
    assert "**Below its teacher**" in md
    assert f"{block['planner']:.1%} against the teacher's {block['teacher']:.1%}" in md

    # the other way round: the full-budget run against the cut one is at or above it, and says so
    res = runner.invoke(app, ["eval", "--config", str(_recipe_file(synth_dir, tmp_path, "again", step_budget=15)),
                              "--no-progress", "--teacher", str(tmp_path / "student" / "trajectories.jsonl")])
    assert res.exit_code == 0, res.output
    again = json.loads((tmp_path / "again" / "report.json").read_text())
    assert again["teacher"]["below"] is False and "At or above its teacher" in (tmp_path / "again" / "report.md"
                                                                                  ).read_text()


def test_a_teacher_that_shares_no_task_is_refused_by_the_dry_run_and_the_run_alike(synth_dir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    # a teacher eval of another task: a real record, of a task this eval does not select
    run_eval(teacher_recipe(synth_dir, tmp_path / "teacher", step_budget=15), progress=False)
    line = (tmp_path / "teacher" / "trajectories.jsonl").read_text().splitlines()[0]
    (other / "trajectories.jsonl").write_text(line.replace('"task_id":"', '"task_id":"elsewhere-') + "\n")
    config = _recipe_file(synth_dir, tmp_path, "student", step_budget=4)
    # one error line, the dry run's `what: detail`, from the dry run and the run alike
    args = ["eval", "--config", str(config), "--no-progress", "--teacher", str(other)]
    line = same_refusal(args, names="share no task with the 16 tasks")
    assert line.startswith(f"error: teacher: --teacher {other}: "), line
    assert not (tmp_path / "student" / "trajectories.jsonl").exists()  # refused before the first run

    missing = ["eval", "--config", str(config), "--no-progress", "--teacher", str(tmp_path / "nope")]
    assert same_refusal(missing, names="no teacher runs at").startswith("error: teacher: ")

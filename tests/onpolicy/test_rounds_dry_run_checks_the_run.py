"""`omnidecision rounds --dry-run` checks the recipe and inputs the run uses (one function each, called by both):
- round 1's eval as the run builds it (`rounds.round_collect_recipe`: written to round-1/collect, the planner's own
  training tasks allowed): the dry run no longer refuses a train/test overlap the run never raises;
- a done round is one with its round.json (`rounds.finished_round`), not a folder: the dry run resumes where the run
  does and checks the eval of the round the run starts, serving the last done round's planner;
- the labeller backend the run builds (`rounds.build_labeller`) and the RL run's GRPO-recipe check
  (`rl_round.check_rl_recipe`): refused by both, the run's error line the dry run's.

    .venv/bin/pytest -q -p no:cacheprovider tests/onpolicy/test_rounds_dry_run_checks_the_run.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.synth import write_suite

ROOT = Path(__file__).resolve().parents[2]


def _planner(folder: Path, trained_on: list[str]) -> Path:
    """A planner folder as export leaves it, enough for every check (config.json, provenance with its tasks)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3", "dtype": "float32"}))
    (folder / "provenance.json").write_text(json.dumps(
        {"stage": "sft", "training_tasks": {"ids": trained_on, "n": len(trained_on), "sources": ["test"]}}))
    return folder


@pytest.fixture
def recipe(tmp_path: Path) -> dict:
    """An SFT rounds recipe whose start planner was trained on the very tasks the rounds collect on (as every
    round's planner is, from round 2 on)."""
    tasks = write_suite(3, 0, tmp_path / "tasks")
    ids = sorted(t.id for t in load_tasks(tasks, "synthetic"))
    (tmp_path / "sft").mkdir()
    return {"rounds": 2, "start_model": str(_planner(tmp_path / "start", ids)), "base_sft_data": str(tmp_path / "sft"),
            "sft_config": str(ROOT / "configs/sft/tiny-cpu.yaml"), "out": str(tmp_path / "out"),
            "collect": {"tasks": {"path": str(tasks.parent), "format": "synthetic"},
                        "serve": {"roles": ["planner"]},
                        "backends": {"default": {"kind": "teacher"}, "planner": {"kind": "openai"}}}}


def _write(tmp_path: Path, recipe: dict) -> Path:
    path = tmp_path / "rounds.yaml"
    path.write_text(yaml.safe_dump(recipe), "utf-8")
    return path


def _dry(config: Path) -> tuple[int, dict, list[str]]:
    res = CliRunner().invoke(app, ["rounds", "--config", str(config), "--dry-run"])
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    return res.exit_code, json.loads(res.stdout), errors


def _check(report: dict, what: str) -> dict:
    return next(c for c in report["checks"] if c["what"] == what)


@pytest.mark.requires("vllm")  # the served round's vLLM arguments are parsed by the installed vLLM
def test_the_dry_run_checks_the_eval_the_round_runs(tmp_path: Path, recipe: dict) -> None:
    code, report, errors = _dry(_write(tmp_path, recipe))
    assert code == 0 and not errors, errors  # before: exit 2, "3 of the 3 evaluated tasks are among the ... training"
    overlap = _check(report, "train/test")
    assert overlap["status"] == "warning" and "--allow-train-overlap" in overlap["detail"]
    assert report["extra"]["vllm_command"][report["extra"]["vllm_command"].index("--model") + 1] == \
        recipe["start_model"]
    assert not (tmp_path / "out").exists()


@pytest.mark.requires("vllm")
def test_a_round_is_done_when_its_round_json_is_there_not_its_folder(tmp_path: Path, recipe: dict) -> None:
    config = _write(tmp_path, recipe)
    (tmp_path / "out" / "round-1" / "collect").mkdir(parents=True)  # started, killed before its round.json
    code, report, _ = _dry(config)
    assert "resumes after" not in _check(report, "rounds out")["detail"]  # before: "resumes after round-1"
    assert "round-1 started, not done" in _check(report, "rounds out")["detail"]
    assert report["would_run"][0].startswith("round 1: serve + eval")
    # round 1 done: the dry run checks round 2's eval, serving round 1's planner, as the run's loop does
    round_1 = _planner(tmp_path / "out" / "round-1" / "model", [])
    (tmp_path / "out" / "round-1" / "round.json").write_text(json.dumps(
        {"round": 1, "model": str(round_1), "accuracy_on_train_tasks": 0.5}))
    code, report, errors = _dry(config)
    assert code == 0 and not errors, errors
    assert "resumes after round-1" in _check(report, "rounds out")["detail"]
    assert report["would_run"][0].startswith("round 1: skipped")
    command = report["extra"]["vllm_command"]
    assert command[command.index("--model") + 1] == str(round_1)
    # the run reads the same mark: with one round asked for, it skips round 1 and serves nothing
    res = CliRunner().invoke(app, ["rounds", "--config", str(config), "--rounds", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["final_model"] == str(round_1)


@pytest.mark.parametrize(("change", "says"), [
    ({"labeller": {"kind": "no-such-kind"}}, "error: labeller: unknown backend kind"),
    ({"labeller": {"kind": "local", "model": "MISSING"}}, "error: labeller: "),
    ({"mode": "rl", "judge_refresh": True, "grpo_config": str(ROOT / "configs/grpo/tiny-cpu.yaml")},
     "error: judge_refresh: the GRPO recipe"),
])
def test_the_dry_run_refuses_what_the_run_refuses_before_round_1(tmp_path: Path, recipe: dict, change: dict,
                                                                 says: str) -> None:
    change = json.loads(json.dumps(change).replace("MISSING", str(tmp_path / "none")))
    config = _write(tmp_path, {**recipe, **change})
    code, _report, errors = _dry(config)
    run = CliRunner().invoke(app, ["rounds", "--config", str(config)])
    ran = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert code == 2 and run.exit_code == 1, run.output
    assert len(ran) == 1 and ran[0].startswith(says) and ran[0] in errors, (ran, errors)
    assert not (tmp_path / "out").exists()  # refused before round 1

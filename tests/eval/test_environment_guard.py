"""An evaluation whose benchmark needs tools refuses the offline environment (issue 29, item 1).

OmniGAIA in `environment.kind: offline` has no perception model and searches no pages: `eval` refuses it unless
`--allow-offline` (recipe field `allow_offline`), and then every report says "offline: no tools"; the dry run says
the same, and for the shipped live recipe (configs/eval/qwen3-8b-sft.yaml) names every unset variable.

    .venv/bin/pytest tests/eval/test_environment_guard.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.eval.runner import OFFLINE_NO_TOOLS, environment_label, eval_recipe_from_dict, run_eval
from omnidecision.rollout.recipe import RecipeError

ROOT = Path(__file__).resolve().parents[2]
SFT_RECIPE = ROOT / "configs" / "eval" / "qwen3-8b-sft.yaml"
DEV = ROOT / "tests" / "data" / "omnigaia_dev" / "dev_metadata.json"
LIVE_VARS = ("OD_MEDIA_ROOT", "OD_PERCEPTION_URL", "OD_PERCEPTION_MODEL", "OD_SEARXNG_URL")


def _report(res) -> dict:
    assert "{" in res.stdout, res.output[-2000:]
    return json.loads(res.stdout[res.stdout.index("{"):])


def _errors(report: dict, what: str) -> list[str]:
    return [c["detail"] for c in report["checks"] if c["status"] == "error" and c["what"] == what]


@pytest.fixture
def no_live_vars(monkeypatch):
    for var in LIVE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OD_OMNIGAIA", str(DEV))


def test_live_recipe_dry_run_names_the_unset_variables(no_live_vars):
    res = CliRunner().invoke(app, ["eval", "--config", str(SFT_RECIPE), "--dry-run"])
    assert res.exit_code == 2, res.output[-2000:]
    errors = _errors(_report(res), "recipe")
    for var in LIVE_VARS:
        assert any(var in e for e in errors), (var, errors)
    # one failed check per variable, each naming the field that needs it
    assert any(e.startswith("environment.media_root:") for e in errors), errors


def test_shipped_recipe_is_live():
    text = SFT_RECIPE.read_text("utf-8")
    assert "kind: live" in text and "${OD_PERCEPTION_URL}" in text


def test_offline_dry_run_refuses_without_the_flag(no_live_vars):
    args = ["eval", "--config", str(SFT_RECIPE), "--dry-run", "--environment", "{kind: offline}"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2
    report = _report(res)
    assert not _errors(report, "recipe"), report["checks"]  # the variables were the live block's only
    (why,) = _errors(report, "environment")
    assert "needs tools" in why and "--allow-offline" in why and str(DEV) in why
    assert report["extra"]["environment"] == OFFLINE_NO_TOOLS

    allowed = _report(CliRunner().invoke(app, [*args, "--allow-offline"]))
    assert not _errors(allowed, "environment")
    (warning,) = [c for c in allowed["checks"] if c["what"] == "environment"]
    assert warning["status"] == "warning" and OFFLINE_NO_TOOLS in warning["detail"]


def _recipe(out: Path, **extra) -> dict:
    return {"name": "guard", "tasks": {"path": str(DEV), "format": "omnigaia", "limit": 2},
            "backends": {"default": {"kind": "teacher", "options": {"noise": 0.0, "seed": 0}}},
            "agent": {"step_budget": 4}, "samples": 1, "out": str(out), "progress": False, "plots": False, **extra}


def test_offline_eval_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "eval"
    with pytest.raises(RecipeError, match="allow-offline"):
        run_eval(eval_recipe_from_dict(_recipe(out)))
    assert not out.exists()


def test_allowed_offline_eval_is_labelled_in_every_report(tmp_path):
    from omnidecision.eval.compare import load_report, write_compare

    rep = run_eval(eval_recipe_from_dict(_recipe(tmp_path / "eval", allow_offline=True)))
    assert rep["environment"] == OFFLINE_NO_TOOLS and rep["n"] == 2
    assert json.loads((tmp_path / "eval" / "report.json").read_text())["environment"] == OFFLINE_NO_TOOLS
    assert "**offline: no tools**" in (tmp_path / "eval" / "report.md").read_text()
    write_compare([load_report(tmp_path / "eval")], tmp_path / "cmp", plot=False)
    assert "guard (offline: no tools)" in (tmp_path / "cmp" / "compare.md").read_text()


def test_replay_eval_is_labelled_replay(tmp_path):
    rep = run_eval(eval_recipe_from_dict(_recipe(tmp_path / "eval", environment={"kind": "replay"})))
    assert rep["environment"] == "replay" and rep["replay"] is True
    assert "replay mode" in (tmp_path / "eval" / "report.md").read_text()


def test_a_benchmark_without_tools_runs_offline(synth_dir, tmp_path):
    from .conftest import teacher_recipe

    recipe = teacher_recipe(synth_dir, tmp_path / "eval")
    assert environment_label(recipe) == "offline"


def test_the_manifest_records_the_models_the_endpoints_reported(synth_dir, tmp_path):
    from .conftest import teacher_recipe

    rep = run_eval(teacher_recipe(synth_dir, tmp_path / "eval").model_copy(update={"plots": False}), progress=False)
    manifest = json.loads((tmp_path / "eval" / "manifest.json").read_text())
    # the scripted teacher answers every role under its own name; the manifest lists what each role's replies said
    assert manifest["endpoint_models"]["planner"] == ["scripted-teacher"]
    assert {"decompose", "critic", "finalizer"} <= set(manifest["endpoint_models"])
    assert rep["endpoint_models"] == manifest["endpoint_models"]

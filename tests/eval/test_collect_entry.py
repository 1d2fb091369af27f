"""Eval goes through the engine's one entry (`rollout.runner.prepare` + `collect`): it writes collect's manifest and
refuses a second experiment in the same folder, and a live eval passes collect's pre-flight before any server
starts (the served roles are checked by the server, not by the pre-flight).

    pytest -q tests/eval/test_collect_entry.py
"""

from __future__ import annotations

import json

import pytest

from omnidecision.eval.runner import eval_recipe_from_dict, run_eval
from omnidecision.rollout.recipe import RecipeError

from .conftest import teacher_recipe


def test_eval_writes_the_manifest_and_refuses_a_second_experiment(synth_dir, tmp_path):
    recipe = teacher_recipe(synth_dir, tmp_path).model_copy(update={"samples": 1, "plots": False})
    rep = run_eval(recipe, progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text("utf-8"))
    assert manifest["tasks"] == rep["n"] and manifest["recipe"]["agent"]["step_budget"] == 15
    assert (tmp_path / "trajectories.jsonl").is_file()  # eval keeps its own file name (not a shard file)
    other = recipe.model_copy(update={"agent": recipe.agent.model_copy(update={"step_budget": 4})})
    with pytest.raises(RecipeError, match="different agent config"):
        run_eval(other, progress=False)


def test_a_live_eval_is_checked_before_its_server_starts(synth_dir, tmp_path):
    def recipe(model):
        return eval_recipe_from_dict({
            "tasks": {"path": str(synth_dir), "format": "synthetic", "limit": 2},
            "backends": {"default": {"kind": "teacher"}, "planner": {"kind": "openai"}},
            "environment": {"kind": "live", "tools": ["code_executor"]},
            "serve": {"model": str(model)},  # never started: a check fails first
            "out": str(tmp_path / "out"), "progress": False,
        })
    # the served model is the checklist's (the dry run's) check: a missing one is refused first
    with pytest.raises(RecipeError, match="no-such-model: no such folder"):
        run_eval(recipe(tmp_path / "no-such-model"), progress=False)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    with pytest.raises(RecipeError, match="live environment is not ready") as err:
        run_eval(recipe(model), progress=False)
    assert "environment.media_root" in str(err.value)
    assert "backends.planner" not in str(err.value)  # served: its endpoint exists once the server runs

"""Eval goes through the engine's one entry (`rollout.engine.run_plan` of its checklist's plan): it writes the engine's
manifest and refuses a second experiment in the same folder, and a live eval is refused on the engine's checks, in
its checklist, before any server starts (the served roles are checked by the server, not by the pre-flight).

    pytest -q tests/eval/test_collect_entry.py
"""

from __future__ import annotations

import json

import pytest

from omnidecision.eval.checklist import prepare_eval
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
    # one checklist, in the dry run's order: the engine's live environment check, then the server's model; the run
    # refuses its first failed check in the dry run's error line, before any server starts
    missing = tmp_path / "no-such-model"
    errors = [c for c in prepare_eval(recipe(missing)).checks if c.status == "error"]
    assert [c.what for c in errors][-1] == "model" and {c.what for c in errors[:-1]} == {"environment"}, errors
    assert "environment.media_root" in errors[0].detail and "no-such-model: no such folder" in errors[-1].detail
    assert not any("backends.planner" in c.detail for c in errors)  # served: its endpoint exists once the server runs
    with pytest.raises(RecipeError) as err:
        run_eval(recipe(missing), progress=False)
    assert str(err.value) == (f"environment: {errors[0].detail} (and {len(errors) - 1} more failed checks: "
                              "--dry-run lists them)")  # the server's model among them
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert {c.what for c in prepare_eval(recipe(model)).checks if c.status == "error"} == {"environment"}
    assert not (tmp_path / "out").exists()

"""One checklist per eval run (docs/architecture.md, "Layers"): the recipe is resolved once (`eval.checklist.
prepare_eval`: the rollout engine's checks, then environment, train/test, prices on one `TaskSelection`), the dry run
lists those checks and the run refuses on them in the dry run's error line, so the tasks are selected once per dry
run and once per run, and what the dry run checks is the very selection the run prepares."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnidecision.eval import overlap
from omnidecision.eval import runner as eval_runner
from omnidecision.eval.checklist import prepare_eval
from omnidecision.eval.dryrun import dry_run_report, eval_dry_run
from omnidecision.preflight import Check
from omnidecision.rollout import selection
from omnidecision.rollout.recipe import RecipeError, ServeSpec

from .conftest import teacher_recipe


@pytest.fixture
def counted(monkeypatch):
    """Every `select_tasks` call counted; the served planner's training tasks known (so train/test reads the
    evaluated tasks too: before, the dry run selected them three times over for a live recipe)."""

    calls: list[str] = []
    select = selection.select_tasks

    def counting(recipe):
        calls.append(recipe.tasks.path)
        return select(recipe)

    monkeypatch.setattr(selection, "select_tasks", counting)
    monkeypatch.setattr(overlap, "training_tasks", lambda recipe: ({"p/provenance.json": {"nope"}},
                                                                   {"p/provenance.json": "sft"}, []))
    return calls


def test_the_dry_run_selects_the_tasks_once(synth_dir, tmp_path, counted):

    report = eval_dry_run(teacher_recipe(synth_dir, tmp_path / "eval"), Path("recipe.yaml"), 0)
    checks = {c.what: c for c in report.checks}
    assert checks["tasks"].status == "ok" and checks["train/test"].status == "ok"
    assert "none of the 16 evaluated tasks" in checks["train/test"].detail
    assert len(counted) == 1


def test_the_run_selects_once_and_refuses_in_the_dry_runs_words(synth_dir, tmp_path, counted, monkeypatch):

    recipe = teacher_recipe(synth_dir, tmp_path / "eval").model_copy(update={"samples": 1, "plots": False})
    rep = eval_runner.run_eval(recipe, progress=False)
    assert rep["train_overlap"]["evaluated"] == 16 and len(counted) == 1
    # a planner trained on two of the tasks: the dry run's error line is the run's refusal
    ids = sorted(t.id for t in eval_runner.TaskSelection(recipe)()[1])[:2]
    monkeypatch.setattr(overlap, "training_tasks", lambda recipe: ({"p/provenance.json": set(ids)},
                                                                   {"p/provenance.json": "sft"}, []))
    error = next(c for c in eval_dry_run(recipe, Path("recipe.yaml"), 0).checks if c.status == "error")
    with pytest.raises(RecipeError) as refused:
        eval_runner.run_eval(recipe.model_copy(update={"out": str(tmp_path / "eval2")}), progress=False)
    assert error.what == "train/test" and str(refused.value) == f"train/test: {error.detail}"


def test_the_dry_run_lists_the_checks_the_run_prepared(synth_dir, tmp_path, counted):
    """The dry run reports the prepared eval's own checklist, not a second one made from the recipe."""

    prepared = prepare_eval(teacher_recipe(synth_dir, tmp_path / "eval"))
    planted = Check(what="planted", status="error", detail="only in the prepared checklist")
    prepared.checks.append(planted)
    report = dry_run_report(prepared, Path("recipe.yaml"), 0)
    assert planted in report.checks and len(counted) == 1
    # the recipe line, then the checklist as the run holds it (the engine's checks among it), then the server
    assert report.checks[1:-1] == prepared.checks and report.checks[-1].what == "serve"
    assert {"tasks", "backends.default", "out", "environment", "train/test"} <= {c.what for c in prepared.checks}


def test_the_run_refuses_the_engines_checks_from_its_checklist(synth_dir, tmp_path, counted):
    """A backend the run could not build (a teacher option it does not take) is the checklist's error, printed by
    the dry run and refused by the run in that line, before --out is made."""

    recipe = teacher_recipe(synth_dir, tmp_path / "eval")
    planner = recipe.backends["default"].model_copy(update={"options": {"no_such_option": 1}})
    recipe = recipe.model_copy(update={"backends": {**recipe.backends, "planner": planner}})
    prepared = prepare_eval(recipe)
    error = next(c for c in prepared.checks if c.status == "error")
    assert error.what == "backends.planner", prepared.checks
    assert error in dry_run_report(prepared, Path("recipe.yaml"), 0).checks
    with pytest.raises(RecipeError) as refused:
        eval_runner.run_prepared(prepared, progress=False)
    assert str(refused.value) == f"backends.planner: {error.detail}"
    assert not (tmp_path / "eval").exists() and len(counted) == 1


def test_the_served_model_is_checked_once_and_the_run_keeps_the_server_its_dry_run_showed(synth_dir, tmp_path,
                                                                                          counted):
    """The `serve:` block's server is built and checked by the checklist: the dry run shows its port and command,
    and the run refuses on its checks in the same words before anything starts (an adapter is no servable model)."""

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"base_model_name_or_path": "Qwen/Qwen3-0.6B", "r": 8}')
    recipe = teacher_recipe(synth_dir, tmp_path / "eval").model_copy(
        update={"serve": ServeSpec(model=str(adapter)), "plots": False})
    prepared = prepare_eval(recipe)
    assert prepared.server is not None
    report = dry_run_report(prepared, Path("recipe.yaml"), 0)
    error = next(c for c in report.checks if c.status == "error")
    assert error.what == "model" and "is a LoRA adapter" in error.detail
    assert report.extra["base_url"] == prepared.server.server.base_url  # the port the run would serve on
    assert report.would_run == [prepared.server.would_run]
    with pytest.raises(RecipeError) as refused:
        eval_runner.run_prepared(prepared, progress=False)
    assert str(refused.value) == f"model: {error.detail}"  # the dry run's error line
    assert prepared.server.server.proc is None and not (tmp_path / "eval" / "recipe.yaml").exists()
    assert len(counted) == 1

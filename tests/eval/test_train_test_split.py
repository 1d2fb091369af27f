"""Train/test separation (issue 29, item 3): `tasks split` deals a benchmark into disjoint folds covering every task;
a harvest writes the task ids it drew from, SFT and export carry them into the planner's provenance.json, and
`eval` refuses to evaluate that planner on them (or, with `--allow-train-overlap`, marks the report).

    .venv/bin/pytest tests/eval/test_train_test_split.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.eval.runner import eval_recipe_from_dict, load_records, run_eval
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.recipe import RecipeError
from omnidecision.rollout.selection import select_tasks
from omnidecision.tasks.loaders import load_tasks

from .conftest import teacher_recipe

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "tests" / "data" / "omnigaia_dev" / "dev_metadata.json"


# ---------------------------------------------------------------- tasks split


def _split(out: Path, seed: int, folds: int = 5) -> dict:
    res = CliRunner().invoke(app, ["tasks", "split", str(DEV), "--folds", str(folds), "--seed", str(seed),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    return json.loads((out / "folds.json").read_text())


def test_folds_are_disjoint_and_cover_every_task(tmp_path):
    ids = {t.id for t in load_tasks(DEV, "omnigaia")}
    doc = _split(tmp_path / "a", seed=3)
    folds = [set(f) for f in doc["fold_ids"]]
    assert len(folds) == 5 and set().union(*folds) == ids and sum(map(len, folds)) == len(ids) == 72
    assert all(not (folds[i] & folds[j]) for i in range(5) for j in range(i + 1, 5))
    assert max(map(len, folds)) - min(map(len, folds)) <= 1
    for i, fold in enumerate(folds):
        test = set(json.loads((tmp_path / "a" / f"fold-{i}" / "test_ids.json").read_text())["ids"])
        train = set(json.loads((tmp_path / "a" / f"fold-{i}" / "train_ids.json").read_text())["ids"])
        assert test == fold and train == ids - fold
    assert _split(tmp_path / "b", seed=3)["fold_ids"] == doc["fold_ids"]  # the seed decides
    assert _split(tmp_path / "c", seed=4)["fold_ids"] != doc["fold_ids"]


def test_split_errors_name_the_problem(tmp_path):
    res = CliRunner().invoke(app, ["tasks", "split", str(DEV), "--folds", "100", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "72 tasks cannot fill 100 folds" in res.output
    res = CliRunner().invoke(app, ["tasks", "split", str(tmp_path / "none.json"), "--out", str(tmp_path)])
    assert res.exit_code == 1 and "none.json" in res.output


def test_a_recipe_keeps_the_tasks_of_an_ids_file(tmp_path):

    doc = _split(tmp_path / "folds", seed=0)
    recipe = eval_recipe_from_dict({"tasks": {"path": str(DEV), "format": "omnigaia",
                                              "ids_file": str(tmp_path / "folds" / "fold-2" / "test_ids.json")},
                                    "backends": {"default": {"kind": "teacher"}}})
    assert {t.id for t in select_tasks(recipe)[1]} == set(doc["fold_ids"][2])
    bad = recipe.model_copy(update={"tasks": recipe.tasks.model_copy(update={"ids_file": str(tmp_path / "x")})})
    with pytest.raises(RecipeError, match=r"tasks.ids_file: .*x: cannot read"):
        select_tasks(bad)


# ---------------------------------------------------------------- harvest → SFT → export → eval


@pytest.fixture(scope="module")
def harvested(synth_dir, tmp_path_factory):
    """A teacher collection over half the synthetic suite, harvested: the training tasks of a planner."""
    from omnidecision.collect.harvest import run_harvest

    work = tmp_path_factory.mktemp("harvest")
    train_ids = sorted(t.id for t in load_tasks(synth_dir, "synthetic"))[:8]
    data = {**teacher_recipe(synth_dir, work / "collect").model_dump(mode="json"), "samples": 1, "plots": False}
    data["tasks"]["ids"] = train_ids
    data["backends"] = {"default": {"kind": "teacher", "options": {"noise": 0.0, "seed": 0}}}  # correct runs: SFT rows
    recipe = eval_recipe_from_dict(data)
    run_eval(recipe, progress=False)
    run_harvest([str(work / "collect" / "trajectories.jsonl")], work / "data")
    return work, set(train_ids)


def test_harvest_writes_the_task_ids_it_drew_from(harvested):
    work, train_ids = harvested
    doc = json.loads((work / "data" / "task_ids.json").read_text())
    assert set(doc["ids"]) == train_ids == {r.task_id for r in load_records(work / "collect")}
    assert set(doc["splits"]["train"]) | set(doc["splits"]["validation"]) == train_ids
    assert json.loads((work / "data" / "stats.json").read_text())["task_ids_file"] == "task_ids.json"


def test_sft_and_export_carry_the_training_tasks(harvested, tmp_path):
    from omnidecision.export import export
    from omnidecision.provenance import training_tasks
    from omnidecision.sft.data import load_sft_splits
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    work, train_ids = harvested
    tt = training_tasks(work / "data" / "sft", load_sft_splits(work / "data" / "sft")).model_dump()
    assert set(tt["ids"]) == train_ids and tt["n"] == len(train_ids)
    assert any(s.endswith("task_ids.json") for s in tt["sources"])
    # an SFT output folder (its run card as sft/train.py writes it) exported: provenance.json has the ids
    ckpt = build_tiny_planner(tmp_path / "sft", texts=list(default_corpus(n=20)), hidden=16, layers=1, heads=2,
                              vocab_size=256)
    (ckpt / "sft_run.json").write_text(json.dumps({"data": {"train": {"rows": 3}, "training_tasks": tt}}))
    prov = json.loads((export(ckpt, tmp_path / "export") / "provenance.json").read_text())
    assert set(prov["training_tasks"]["ids"]) == train_ids and prov["data"] == {"train": {"rows": 3}}
    assert f"Trained on {len(train_ids)} task ids" in (tmp_path / "export" / "PROVENANCE.md").read_text()


def _planner(folder: Path, ids: set[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "provenance.json").write_text(json.dumps({"training_tasks": {"ids": sorted(ids), "n": len(ids)}}))
    (folder / "config.json").write_text("{}")  # a model folder to the served model's check (never started here)
    return folder


def test_eval_refuses_a_planner_on_its_training_tasks(harvested, synth_dir, tmp_path):
    _, train_ids = harvested
    planner = _planner(tmp_path / "planner", train_ids)
    recipe = eval_recipe_from_dict({**teacher_recipe(synth_dir, tmp_path / "eval").model_dump(mode="json"),
                                    "serve": {"model": str(planner)}, "plots": False})
    with pytest.raises(RecipeError, match=r"8 of the 16 evaluated tasks are among the served planner's training"):
        run_eval(recipe, progress=False)
    assert not (tmp_path / "eval").exists()
    # the dry run says the same
    cfg = tmp_path / "recipe.yaml"
    cfg.write_text(json.dumps(recipe.model_dump(mode="json")))
    res = CliRunner().invoke(app, ["eval", "--config", str(cfg), "--dry-run"])
    report = json.loads(res.stdout[res.stdout.index("{"):])
    (check,) = [c for c in report["checks"] if c["what"] == "train/test"]
    assert check["status"] == "error" and "--allow-train-overlap" in check["detail"] and res.exit_code == 2

    # with the flag it runs (the served planner stood in by the teacher's specs) and the report marks it
    allowed = recipe.model_copy(update={"allow_train_overlap": True})
    rep = run_eval(allowed, progress=False, specs={"default": BackendSpec(kind="teacher", options={"seed": 1})})
    assert rep["train_overlap"]["overlap"] == 8 and rep["train_overlap"]["evaluated"] == 16
    assert "8 of the 16 evaluated tasks are training tasks" in (tmp_path / "eval" / "report.md").read_text()


def test_eval_on_held_out_tasks_runs(harvested, synth_dir, tmp_path):
    _, train_ids = harvested
    planner = _planner(tmp_path / "planner", train_ids)
    held_out = sorted({t.id for t in load_tasks(synth_dir, "synthetic")} - train_ids)
    recipe = teacher_recipe(synth_dir, tmp_path / "eval")
    data = {**recipe.model_dump(mode="json"), "serve": {"model": str(planner)}, "plots": False, "samples": 1}
    data["tasks"]["ids"] = held_out
    rep = run_eval(eval_recipe_from_dict(data), progress=False,
                   specs={"default": BackendSpec(kind="teacher", options={"seed": 1})})
    assert rep["train_overlap"]["known"] and rep["train_overlap"]["overlap"] == 0 and rep["n"] == 8


def test_eval_refuses_an_in_process_planner_on_its_training_tasks(harvested, synth_dir, tmp_path):
    """A planner decoded in-process (backend kind `local`) is checked like a served one."""
    _, train_ids = harvested
    planner = _planner(tmp_path / "planner", train_ids)
    data = teacher_recipe(synth_dir, tmp_path / "eval").model_dump(mode="json")
    data["backends"]["planner"] = {"kind": "local", "model": str(planner)}
    with pytest.raises(RecipeError, match=r"8 of the 16 evaluated tasks are among the served planner's training"):
        run_eval(eval_recipe_from_dict({**data, "plots": False}), progress=False)
    assert not (tmp_path / "eval").exists()

"""The data card a harvest writes (issue 29): runs and pass rate, rows per task, row lengths (tokens with a tokenizer,
else characters, and which), the collecting models from the collection manifests, the task files and ids drawn;
every figure checked against the datasets and records themselves.

    .venv/bin/pytest tests/collect/test_data_card.py -q
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from omnidecision.collect.datacard import DATA_CARD_JSON, DATA_CARD_MD
from omnidecision.collect.harvest import HarvestOptions, run_harvest
from omnidecision.rollout.engine import run_rollouts
from omnidecision.rollout.recipe import load_recipe
from omnidecision.rollout.store import read_records, trajectory_files
from omnidecision.tasks.synth import write_suite

from .conftest import teacher_recipe


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> tuple[Path, Path]:
    """(synthetic suite, a collection folder with its manifest.json): the scripted teacher through `collect`."""
    root = tmp_path_factory.mktemp("card")
    suite = root / "suite"
    write_suite(12, 3, suite)
    recipe = root / "collect.yaml"
    recipe.write_text(teacher_recipe(suite, root / "runs"))
    asyncio.run(run_rollouts(load_recipe(recipe), progress=False))
    return suite, root / "runs"


def rows_of(folder: Path) -> list[dict]:
    return [r for f in sorted(folder.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def records_of(folder: Path):
    return [rec for f in trajectory_files([str(folder)]) for _, rec in read_records(f)]


def test_card_figures_match_the_datasets_and_the_records(collection, tmp_path):
    suite, runs = collection
    out = tmp_path / "h"
    run_harvest([str(runs)], out, HarvestOptions(val_fraction=0.25))
    card = json.loads((out / DATA_CARD_JSON).read_text())
    recs = records_of(runs)
    correct = sum(r.judge is not None and r.judge.correct is True for r in recs)
    assert card["runs"] == len(recs) == 12 * 2 and card["correct_runs"] == correct
    assert card["pass_rate"] == pytest.approx(correct / len(recs), abs=1e-4)
    assert 0 < correct < len(recs), "noise should make some runs fail"
    for kind, key in (("sft", "messages"), ("rl", "prompt")):
        rows = rows_of(out / kind)
        per = Counter(r["task_id"] for r in rows)
        c = card["rows"][kind]
        assert c["total"] == len(rows) == c["train"] + c["validation"]
        assert c["per_task"] == {"tasks": len(per), "mean": round(len(rows) / len(per), 2), "max": max(per.values())}
        chars = [sum(len(m["content"]) for m in r[key]) for r in rows]
        assert c["length"]["total"] == sum(chars) and c["length"]["max"] == max(chars)
    assert card["length_unit"] == "chars" and card["tokenizer"] is None
    # the models: what the recipe asked for (teacher for every role) and what the endpoints reported
    assert card["models"]["requested"] == {"default": ["teacher:-"]}
    assert card["models"]["reported"]["planner"] == sorted({r.planner_model for r in recs})
    # the task file and the ids (task_ids.json, the same count)
    ids = json.loads((out / "task_ids.json").read_text())
    assert card["tasks"]["n"] == len(ids["ids"]) == 12 and card["tasks"]["ids_file"] == "task_ids.json"
    assert card["tasks"]["splits"] == {s: len(ids["splits"][s]) for s in ("train", "validation")}
    assert [(t["path"], t["format"]) for t in card["tasks"]["task_files"]] == [(str(suite), "synthetic")]
    md = (out / DATA_CARD_MD).read_text()
    assert f"**{len(recs)} runs**, {correct} judged correct" in md
    assert f"| sft | {card['rows']['sft']['train']} | {card['rows']['sft']['validation']} |" in md
    assert f"- `{suite}` (synthetic), collected into `{runs}`" in md
    assert "characters of the messages (no tokenizer at hand" in md


def test_reported_models_prefer_the_manifest_and_unknown_task_files_are_said(collection, tmp_path):
    _, runs = collection
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["endpoint_models"] = {"planner": ["served-planner"], "critic": ["gpt-4.1-mini-2025-04-14"]}
    (copy / "manifest.json").write_text(json.dumps(manifest))
    run_harvest([str(copy)], tmp_path / "h")
    card = json.loads((tmp_path / "h" / DATA_CARD_JSON).read_text())
    assert card["models"]["reported"] == {"critic": ["gpt-4.1-mini-2025-04-14"], "planner": ["served-planner"]}
    (copy / "manifest.json").unlink()
    run_harvest([str(copy)], tmp_path / "h2")
    card = json.loads((tmp_path / "h2" / DATA_CARD_JSON).read_text())
    assert card["tasks"]["task_files"] == [] and card["models"]["requested"] == {}
    assert card["models"]["reported"]["planner"]  # from the records themselves
    assert "no collection manifest found" in (tmp_path / "h2" / DATA_CARD_MD).read_text()


def test_tokens_with_the_given_or_the_served_tokenizer(collection, tmp_path, tiny_planner):
    from transformers import AutoTokenizer

    from omnidecision.rollout.parity import conversation_ids

    _, runs = collection
    out = tmp_path / "h"
    run_harvest([str(runs)], out, HarvestOptions(tokenizer=str(tiny_planner)))
    card = json.loads((out / DATA_CARD_JSON).read_text())
    tok = AutoTokenizer.from_pretrained(tiny_planner)
    tokens = [len(conversation_ids(tok, r["messages"])) for r in rows_of(out / "sft")]
    assert card["length_unit"] == "tokens" and card["tokenizer_from"] == "--tokenizer"
    assert card["rows"]["sft"]["length"]["total"] == sum(tokens)
    assert "tokens, counted with the tokenizer" in (out / DATA_CARD_MD).read_text()
    # no --tokenizer, but the collection served a local planner with a tokenizer: that one counts
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["recipe"]["serve"] = {"model": str(tiny_planner)}
    (copy / "manifest.json").write_text(json.dumps(manifest))
    run_harvest([str(copy)], tmp_path / "h2")
    card2 = json.loads((tmp_path / "h2" / DATA_CARD_JSON).read_text())
    assert card2["length_unit"] == "tokens" and card2["tokenizer"] == str(tiny_planner)
    assert card2["tokenizer_from"] == "the planner the collection served"
    assert card2["rows"]["sft"]["length"]["total"] == sum(tokens)

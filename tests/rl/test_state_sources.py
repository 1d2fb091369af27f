"""GRPO on the planner's own states (issue 37): an own-states harvest (every run of an imperfect planner, no label) is
a source of training states, alone or mixed with others by weight (`state_sources`), from a recipe; balanced state
selection works on it as on the teacher's states."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest

from omnidecision.rl.sources import SOURCE_COLUMN, load_state_sources, parse_state_sources, shares
from omnidecision.rollout.output import shard_path

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "grpo" / "tiny-cpu.yaml"
OWN_RECIPE = ROOT / "configs" / "grpo" / "tiny-cpu-judge-own.yaml"


@pytest.fixture(scope="module")
def own_states(tmp_path_factory) -> Path:
    """`harvest --label none` of an imperfect planner's runs (the teacher with its habits on, 2 samples per task)."""
    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.factory import build_backends
    from omnidecision.collect.harvest import HarvestOptions, run_harvest
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.rollout.options import RolloutOptions
    from omnidecision.rollout.runner import run_tasks
    from omnidecision.tasks.loaders import load_tasks
    from omnidecision.tasks.synth import write_suite

    root = tmp_path_factory.mktemp("own")
    write_suite(16, 21, root / "tasks")
    specs = {"default": BackendSpec(kind="teacher", options={"noise": 0.0, "seed": 0}),
             "planner": BackendSpec(kind="teacher", options={"habits": 1.0, "habit_rate": 0.6, "noise": 0.1,
                                                             "seed": 3})}
    asyncio.run(run_tasks(load_tasks(root / "tasks", "synthetic"), AgentConfig(digest_max_chars=1000),
                             build_backends(specs), RolloutOptions(out_file=shard_path(root / "runs", 0, 1),
                                                                   samples=2, concurrency=8, progress=False)))
    stats = run_harvest([str(root / "runs")], root / "data", HarvestOptions(label="none", val_fraction=0.25))
    assert stats["sft"]["train"] == 0 and stats["rl"]["train"] > 0 and stats["rl"]["validation"] > 0
    return root / "data"


def test_sources_parse_from_yaml_or_json_and_bad_entries_name_the_field():
    parsed = parse_state_sources([{"path": "a/rl", "weight": 3}, {"path": "b", "name": "teacher"}])
    assert [(s.label(), s.weight) for s in parsed] == [("a", 3.0), ("teacher", 1.0)]
    assert parse_state_sources(json.dumps([{"path": "x"}]))[0].path == "x"
    with pytest.raises(ValueError, match=r"state_sources\[1\]\.weight"):
        parse_state_sources([{"path": "a"}, {"path": "b", "weight": -1}])
    with pytest.raises(ValueError, match=r"state_sources\[0\]\.path"):
        parse_state_sources([{"weight": 1}])
    with pytest.raises(ValueError, match=r"state_sources\[0\]\.wieght"):
        parse_state_sources([{"path": "a", "wieght": 1}])
    with pytest.raises(ValueError, match="share a name"):
        parse_state_sources([{"path": "x/own"}, {"path": "y/own"}])
    with pytest.raises(ValueError, match="non-empty list"):
        parse_state_sources([])
    assert shares([7, 5], [1.0, 3.0]) == [3, 9] and sum(shares([3, 4, 5], [0.2, 0.3, 0.5])) == 12


def test_the_mix_draws_each_source_by_its_weight(own_states, rl_dir):
    import datasets

    own_n = datasets.load_dataset(str(own_states / "rl"), split="train").num_rows
    rule_n = 24  # rl_dir: 24 rule-generated train states, 8 validation
    splits, stats = load_state_sources(parse_state_sources([{"path": str(own_states), "weight": 3.0, "name": "own"},
                                                            {"path": str(rl_dir), "weight": 1.0, "name": "rule"}]),
                                       seed=0)
    train, heldout = splits["train"], splits["validation"]
    want = shares([own_n, rule_n], [3.0, 1.0])
    assert Counter(train[SOURCE_COLUMN]) == {"own": want[0], "rule": want[1]} and len(train) == own_n + rule_n
    by = {s["name"]: s for s in stats["sources"]}
    assert by["own"]["repeated"] == max(0, want[0] - own_n) and by["rule"]["repeated"] == max(0, want[1] - rule_n)
    # the rule source has fewer rows than its share: all of them are in, the rest are repeats of its own rows
    assert set(train.filter(lambda r: r[SOURCE_COLUMN] == "rule")["ledger"]) <= set(
        datasets.load_dataset("json", data_files=str(rl_dir / "rl" / "train.jsonl"), split="train")["ledger"])
    # held out: every source's validation split, shuffled (the first rows are not all one source's)
    assert Counter(heldout[SOURCE_COLUMN]) == {"own": by["own"]["validation"], "rule": 8}
    order = heldout[SOURCE_COLUMN]  # not concatenated in source order: the rule rows are not one block at an end
    rule_at = [i for i, name in enumerate(order) if name == "rule"]
    assert rule_at != list(range(len(order) - 8, len(order))) and rule_at != list(range(8))
    # seeded: the same mix again
    again, _ = load_state_sources(parse_state_sources([{"path": str(own_states), "weight": 3.0, "name": "own"},
                                                       {"path": str(rl_dir), "weight": 1.0, "name": "rule"}]), seed=0)
    assert again["train"]["ledger"] == train["ledger"]


def _grpo(model: Path, out: Path, sources: list[dict], *extra: str, recipe: Path = RECIPE):
    from omnidecision.rl.config import parse_args
    from omnidecision.rl.train import main

    args = parse_args([
        "--config", str(recipe), "--model_name_or_path", str(model), "--state_sources", json.dumps(sources),
        "--output_dir", str(out), "--max_steps", "2", "--num_generations", "4", "--per_device_train_batch_size", "4",
        "--generation_batch_size", "8", "--max_completion_length", "16", "--eval_closure_n", "4",
        "--logging_steps", "1", "--save_strategy", "no", "--weight_average", "false", *extra])
    return main(*args)


@pytest.mark.requires("trl")
def test_grpo_trains_on_own_states_alone_with_balanced_selection(tiny_planner, own_states, tmp_path):
    out = tmp_path / "grpo-own"
    report = _grpo(tiny_planner, out, [{"path": str(own_states), "name": "own"}], "--select_states", "balanced")
    assert report["steps"] == 2 and (out / "model.safetensors").exists()
    saved = json.loads((out / "closure_eval.json").read_text())
    assert saved["state_sources"]["sources"][0]["name"] == "own" and saved["dataset"] is None
    sel = saved["selection"]
    # selection ran on the own states: every state decoded, the wrong ones kept (plus as many right ones)
    assert sel["mode"] == "balanced" and sel["decoded"] == saved["state_sources"]["train"]
    assert sel["wrong"] > 0 and sel["by_source"] == {"own": sel["kept"]}
    assert saved["start"]["closure"]["n"] == 4


@pytest.mark.requires("trl")
def test_grpo_trains_on_a_mix_of_own_and_other_states(tiny_planner, own_states, rl_dir, tmp_path):
    out = tmp_path / "grpo-mix"
    report = _grpo(tiny_planner, out, [{"path": str(own_states), "weight": 0.5, "name": "own"},
                                       {"path": str(rl_dir), "weight": 0.5, "name": "teacher"}])
    assert report["steps"] == 2
    mix = json.loads((out / "closure_eval.json").read_text())["state_sources"]
    assert [s["name"] for s in mix["sources"]] == ["own", "teacher"]
    assert abs(mix["sources"][0]["train"] - mix["sources"][1]["train"]) <= 1  # equal weights, equal shares
    assert report["selection"]["by_source"] == {"own": mix["sources"][0]["train"],
                                                "teacher": mix["sources"][1]["train"]}


@pytest.mark.requires("trl")
def test_the_shipped_own_states_recipe_names_its_sources(tiny_planner, tmp_path):
    from omnidecision.rl.config import parse_args

    script, _, _ = parse_args(["--config", str(OWN_RECIPE), "--model_name_or_path", str(tiny_planner),
                               "--output_dir", str(tmp_path / "o")])
    assert script.state_sources == [{"path": "runs/demo/data-own/rl", "weight": 1.0, "name": "own"}]
    assert script.dataset_name is None and script.judge_weight is not None  # grpo_judge's recipe on own states
    with pytest.raises(ValueError, match="dataset_name.*or `state_sources`"):
        from omnidecision.rl.config import GRPOScriptArguments

        GRPOScriptArguments()

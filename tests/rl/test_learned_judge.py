"""The learned reward judge and the rft control on harvested data of the teacher with habits: labels from what
followed each decision, a RewardTrainer run, scores of (state, decision) pairs, the placebo shuffle, the AUROC
evaluation, and rft-select's best-of-K rows."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import datasets
import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.collect.harvest import HarvestOptions, run_harvest
from omnidecision.ledger import Ledger, finish_available
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rewards import get_judge_reward
from omnidecision.rl.judge_train import judge_eval_rows, judge_label, judge_pairs
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.runner import run_tasks
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.synth import write_suite

CLI = [sys.executable, "-m", "omnidecision.cli"]
HABITS = {"habits": 0.5, "habit_rate": 0.6, "noise": 0.02, "seed": 0}


@pytest.fixture(scope="module")
def harvest(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("judge")
    write_suite(40, 5, root / "tasks")
    tasks = load_tasks(root / "tasks", "synthetic")
    backends = build_backends({"default": BackendSpec(kind="teacher", options=HABITS)})
    asyncio.run(run_tasks(tasks, AgentConfig(digest_max_chars=1000, planner_system_prompt=False), backends,
                             RolloutOptions(out_file=shard_path(root / "runs", 0, 1), samples=2, concurrency=8,
                                            progress=False)))
    run_harvest([str(root / "runs")], root / "h", HarvestOptions(val_fraction=0.25))
    return root / "h"


@pytest.fixture(scope="module")
def planner(harvest: Path, tmp_path_factory) -> Path:
    from omnidecision.synthetic.tiny import build_tiny_planner

    ds = datasets.load_dataset(str(harvest / "sft"), split="train")
    texts = [m["content"] for row in ds for m in row["messages"]]
    return build_tiny_planner(tmp_path_factory.mktemp("tiny"), texts=texts, hidden=32, layers=1, heads=2,
                              vocab_size=600)


def test_labels_come_from_what_followed_each_decision(harvest: Path):
    rows = list(datasets.load_dataset(str(harvest / "rl"), split="train"))
    labels = Counter(judge_label(r) for r in rows)
    assert labels[True] > 0 and labels[False] > 0
    for r in rows:
        if judge_label(r) is True:  # moved the ledger in a run that ended correct
            assert r["advanced"] and r["correct"]
        elif r["decision"] and r["advanced"] is False:
            assert judge_label(r) is False
    # the habit teacher's premature finishes are there, and labelled negative: the finalizer's check failed
    early = [r for r in rows if '"finish"' in r["decision"] and not finish_available(Ledger.model_validate_json(
        r["ledger"]))]
    assert early and all(judge_label(r) is False for r in early)
    pairs = judge_pairs(rows, seed=0)
    assert all(judge_label(p) is True and judge_label(n) is False for p, n in pairs)
    assert len(pairs) == labels[True] + labels[False]


def test_the_judge_trains_on_harvested_rows_and_scores_decisions(harvest: Path, planner: Path, tmp_path: Path):
    out = tmp_path / "judge"
    proc = subprocess.run([*CLI, "judge", "train", "--dataset_name", str(harvest / "rl"), "--model_name_or_path",
                           str(planner), "--output_dir", str(out), "--max_steps", "8",
                           "--per_device_train_batch_size", "8"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((out / "judge_train.json").read_text())
    assert summary["pairs"] > 0 and summary["train_loss"] is not None
    assert (out / "train_results.json").exists() and (out / "trainer_state.json").exists()  # the trainer's own files
    prov = json.loads((out / "provenance.json").read_text())  # omnidecision/provenance.py, as every trained stage
    assert prov["stage"] == "judge" and prov["lineage"]["start_model"] == str(planner)
    assert set(prov["training_tasks"]["ids"]) == set(json.loads((harvest / "task_ids.json").read_text())["ids"])
    # the demo's spellings (--max-steps, --batch-size) are aliases of the recipe's fields; what it consumed
    consumed = json.loads((out / "consumed.json").read_text())
    assert consumed["stage"] == "judge" and consumed["optimizer_steps"] == 8 and consumed["rows"] == 8 * 8
    assert consumed["row_unit"] == "pairs" and consumed["seed"] == 0 and consumed["threads"] >= 1

    rows = list(datasets.load_dataset(str(harvest / "rl"), split="validation"))[:6]
    reward = get_judge_reward(path=str(out))
    completions = [r["decision"] or '{"action": "finish"}' for r in rows] + ["not an action"]
    scores = reward(completions, ledger=[r["ledger"] for r in rows] + [rows[0]["ledger"]],
                    prompts=[r["prompt"] for r in rows] + [rows[0]["prompt"]])
    assert all(0.0 <= s <= 1.0 for s in scores[:-1]) and scores[-1] is None
    # the placebo: the same scores, permuted among the completions of each state only
    ledgers = [rows[0]["ledger"]] * 3 + [rows[1]["ledger"]] * 3
    group = [rows[0]["decision"], '{"action":"finish"}', rows[1]["decision"]] * 2
    prompts = [rows[0]["prompt"]] * 3 + [rows[1]["prompt"]] * 3
    plain = reward(group, ledger=ledgers, prompts=prompts)
    shuffled = get_judge_reward(path=str(out), shuffle=True, shuffle_seed=3)(group, ledger=ledgers, prompts=prompts)
    assert sorted(shuffled[:3]) == sorted(plain[:3]) and sorted(shuffled[3:]) == sorted(plain[3:])

    res = judge_eval_rows(list(datasets.load_dataset(str(harvest / "rl"), split="validation")), str(out))
    assert res["n"] == res["positive"] + res["negative"] > 0
    assert 0.0 <= res["auroc_judge"] <= 1.0 and 0.0 <= res["auroc_closure"] <= 1.0


@pytest.mark.long  # 14 s on 2 cores (a CLI process loading a planner); rft-select itself runs in make test
# (tests/rl/test_rft_select_keeps_input.py)
def test_rft_select_refuses_a_planner_that_writes_no_action(harvest: Path, planner: Path, tmp_path: Path):
    """An untrained planner writes no well-formed action: rft-select says so instead of writing an empty dataset."""
    proc = subprocess.run([*CLI, "rft-select", "--config", str(Path(__file__).resolve().parents[2] / "configs" /
                                                               "grpo" / "tiny-cpu.yaml"),
                           "--model_name_or_path", str(planner), "--dataset_name", str(harvest / "rl"), "--out",
                           str(tmp_path / "rft"), "--num_generations", "2", "--max-states", "4"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode != 0
    assert "no decision" in (proc.stdout + proc.stderr) and not (tmp_path / "rft").exists()

"""The planner's own states (issue 37): the shipped own-states recipe collects K runs per task, `harvest --label none`
keeps the RL state of every run it visited (failed runs and correct ones alike, with what followed each decision),
and writes no SFT rows. The planner here is the scripted teacher with its habits, standing in for the served SFT
planner (the rounds test serves a real one with vLLM): an imperfect planner, so runs both fail and succeed."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import datasets

from omnidecision.collect.harvest import HarvestOptions, run_harvest
from omnidecision.ledger import Ledger
from omnidecision.rollout.store import read_records, trajectory_files

from .conftest import CLI

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "collect" / "own-states-vllm.yaml"
# an imperfect planner in place of the served one: the teacher with every habit on (retry an empty source, finish
# early, ...), so some runs fail and some succeed
STAND_IN = "{kind: teacher, options: {habits: 1.0, habit_rate: 0.6, noise: 0.1, seed: 5}}"


def test_own_states_harvest_keeps_failed_and_correct_runs_with_no_label(synth_dir: Path, tmp_path: Path) -> None:
    runs = tmp_path / "own"
    cmd = [*CLI, "collect", "--config", str(RECIPE), "--tasks.path", str(synth_dir), "--tasks.limit", "20",
           "--out", str(runs), "--no-progress", "--backends.planner", STAND_IN, "--samples", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [rec for f in trajectory_files([str(runs)]) for _, rec in read_records(f)]
    assert len(records) == 40  # K = 2 samples of 20 tasks
    correct = {r.run_id: r.judge is not None and r.judge.correct is True for r in records}
    assert 0 < sum(correct.values()) < len(records), "the stand-in planner must both fail and succeed"

    out = tmp_path / "data"
    done = subprocess.run([*CLI, "harvest", str(runs), "--out", str(out), "--label", "none", "--val-fraction", "0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    stats = json.loads((out / "stats.json").read_text())
    # no SFT rows at all: no label was needed
    assert stats["sft"]["train"] == stats["sft"]["validation"] == 0 and not list((out / "sft").glob("*.parquet"))
    assert stats["options"]["label"] == "none"
    rl = datasets.load_dataset(str(out / "rl"), split="train")
    # every (state, decision) any run visited is there once, failed runs and correct runs alike (a second sample
    # that made the same decision in the same state adds nothing)
    def decision(s):
        return s.raw_output if s.action is not None and s.invalid is None else ""

    visited = {(s.ledger.model_dump_json(), decision(s)) for r in records for s in r.steps}
    assert {(row["ledger"], row["decision"]) for row in rl} == visited and len(rl) == len(visited)
    by_correct = Counter(rl["correct"])
    assert by_correct[True] > 0 and by_correct[False] > 0
    assert len({o for o in rl["outcome"]}) >= 2
    assert all(label == "" for label in rl["label"])  # nothing was labelled
    # what followed each decision is in the row: the decision, whether its step moved the ledger, the run's end
    assert all(a is not None for a in rl["advanced"]) and any(rl["advanced"]) and not all(rl["advanced"])
    steps = {(r.run_id, s.step): s for r in records for s in r.steps}
    for row in rl.select(range(0, len(rl), 7)):
        step = steps[(row["run_id"], row["step"])]
        assert row["decision"] == decision(step)
        assert Ledger.model_validate_json(row["ledger"]).model_dump_json() == step.ledger.model_dump_json()
        assert row["correct"] == correct[row["run_id"]]
    # the same rows as a teacher harvest's RL split: the own-states mode changes the SFT side only
    emitted = run_harvest([str(runs)], tmp_path / "emitted", HarvestOptions(val_fraction=0.0))
    assert emitted["rl"]["train"] == len(rl) and emitted["sft"]["train"] > 0

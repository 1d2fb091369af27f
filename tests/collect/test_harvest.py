"""Harvest: state-SFT rows from judge-correct runs, RL states rebuilt by replay, splits by task, parity."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from pathlib import Path

import datasets
import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.collect.harvest import HarvestError, HarvestOptions, run_harvest
from omnidecision.ledger import (
    Ledger,
    actionable_need_indices,
    blocked_need_indices,
    finish_available,
    reduce,
    sources_to_try,
)
from omnidecision.ledger.events import (
    ConflictRaised,
    ConflictResolved,
    EvidenceAdded,
    FinalizerChecked,
    FinishRequested,
    InitLedger,
    NeedSpec,
    NeedUpdated,
    SlotUpdated,
    ToolCalled,
)
from omnidecision.ledger.schema import ConflictValue, Slot, SourceRef
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.prompts import render_planner_messages
from omnidecision.protocol.records import JudgeResult, RunRecord, StepRecord
from omnidecision.protocol.rule import rule_decision_text
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.parity import check_row_parity, planner_prompt_ids
from omnidecision.rollout.runner import run_tasks
from omnidecision.rollout.store import read_records
from omnidecision.tasks.loaders import load_tasks

from .conftest import CLI


def _runs(teacher_runs: Path) -> dict[str, object]:
    return {r.run_id: r for _, r in read_records(shard_path(teacher_runs, 0, 1))}


def test_both_datasets_load_with_train_and_validation_split_by_task(harvested: Path) -> None:
    for kind in ("sft", "rl"):
        ds = datasets.load_dataset(str(harvested / kind))
        assert set(ds) == {"train", "validation"}
        assert ds["train"].num_rows > 0 and ds["validation"].num_rows > 0
        assert not set(ds["train"]["task_id"]) & set(ds["validation"]["task_id"])
    sft, rl = datasets.load_dataset(str(harvested / "sft")), datasets.load_dataset(str(harvested / "rl"))
    for split in ("train", "validation"):  # a task sits on the same side in both datasets
        assert set(sft[split]["task_id"]) <= set(rl[split]["task_id"])
    stats = json.loads((harvested / "stats.json").read_text())
    assert stats["sft"]["train"] == sft["train"].num_rows and stats["rl"]["validation"] == rl["validation"].num_rows
    assert stats["runs"] == 120 and sum(stats["outcomes"].values()) == 120


def test_sft_rows_come_from_correct_runs_with_the_recorded_messages(harvested: Path, teacher_runs: Path) -> None:
    runs = _runs(teacher_runs)
    ds = datasets.load_dataset(str(harvested / "sft"), split="train")
    assert any(r.judge.correct is False for r in runs.values())  # the noisy teacher makes some mistakes
    for row in ds:
        rec = runs[row["run_id"]]
        assert rec.judge.correct is True
        step = next(s for s in rec.steps if s.step == row["step"])
        assert step.invalid is None
        assert row["messages"][:-1] == step.planner_messages  # system + user exactly as sent
        assert row["messages"][-1] == {"role": "assistant", "content": step.raw_output}
        assert check_row_parity(row["messages"], step.planner_messages) == []


def test_parity_token_ids_with_the_tiny_planner_template(harvested: Path, teacher_runs: Path,
                                                         tiny_planner: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_planner)
    runs = _runs(teacher_runs)
    ds = datasets.load_dataset(str(harvested / "sft"), split="validation")
    for row in ds.select(range(min(10, ds.num_rows))):
        step = next(s for s in runs[row["run_id"]].steps if s.step == row["step"])
        assert planner_prompt_ids(tok, row["messages"]) == planner_prompt_ids(tok, step.planner_messages)
        assert check_row_parity(row["messages"], step.planner_messages, tok) == []
    # the check can fail: a changed digest is caught
    tampered = [dict(m) for m in ds[0]["messages"]]
    tampered[1]["content"] += " "
    assert check_row_parity(tampered, ds[0]["messages"], tok)


def test_rl_rows_are_rebuilt_states_with_reward_columns(harvested: Path) -> None:
    ds = datasets.load_dataset(str(harvested / "rl"), split="train")
    # a (state, decision) pair is kept once: a state repeats only with a different decision made in it
    pairs = list(zip(ds["ledger"], ds["decision"], strict=True))
    assert len(set(pairs)) == ds.num_rows
    assert len(set(ds["ledger"])) < ds.num_rows  # the noisy teacher decided differently in some identical states
    assert set(ds["outcome"]) - {"accepted"}  # all runs, not only correct ones
    for row in ds.select(range(0, ds.num_rows, max(1, ds.num_rows // 25))):
        state = Ledger.model_validate_json(row["ledger"])
        assert row["prompt"] == render_planner_messages(state)
        assert row["question"] == state.question
        assert row["actionable"] == actionable_need_indices(state)
        assert row["blocked"] == blocked_need_indices(state)
        assert row["finish_available"] == finish_available(state)
        assert json.loads(row["tool_call_counts"]) == state.tool_call_counts
        assert [f["need"] for f in json.loads(row["failed_calls"])] == [f.need for f in state.failed_calls]
        assert row["advanced"] in (True, False) and isinstance(row["decision"], str)


def test_options_advancing_only_dedup_and_cap(teacher_runs: Path, tmp_path: Path) -> None:
    all_rows = run_harvest([str(teacher_runs)], tmp_path / "a", HarvestOptions(val_fraction=0.0))
    opts = HarvestOptions(val_fraction=0.0, advancing_only=True, dedup=True, max_rows_per_task=3)
    some = run_harvest([str(teacher_runs)], tmp_path / "b", opts)
    assert not (tmp_path / "b" / "sft" / "validation-00000.parquet").exists()  # no empty split files
    assert 0 < some["sft"]["train"] < all_rows["sft"]["train"]
    assert some["skipped"]["sft_not_advancing"] > 0 and some["skipped"]["sft_duplicate_state"] > 0
    ds = datasets.load_dataset(str(tmp_path / "b" / "sft"), split="train")
    users = [row["messages"][1]["content"] for row in ds]
    assert len(users) == len(set(users))
    assert max(ds.to_pandas()["task_id"].value_counts()) <= 3
    assert any(json.loads(r["messages"][-1]["content"])["action"] == "finish" for r in ds)  # finishes are kept


def test_rule_labels_cover_every_visited_state_with_the_rule_decision(teacher_runs: Path, tmp_path: Path) -> None:
    """`label="rule"`: one SFT row per RL state (incorrect runs too), its assistant turn the rule decision of that
    state; the states after a noisy decision are kept with the recovery as label."""
    emitted = run_harvest([str(teacher_runs)], tmp_path / "e", HarvestOptions(val_fraction=0.0))
    ruled = run_harvest([str(teacher_runs)], tmp_path / "r", HarvestOptions(val_fraction=0.0, label="rule"))
    # every visited state (RL rows keep identical states once, SFT rows once per visit)
    assert ruled["sft"]["train"] >= ruled["rl"]["train"] and ruled["sft"]["train"] > emitted["sft"]["train"]
    sft = datasets.load_dataset(str(tmp_path / "r" / "sft"), split="train")
    rl = {row["prompt"][-1]["content"]: row for row in datasets.load_dataset(str(tmp_path / "r" / "rl"),
                                                                             split="train")}
    runs = _runs(teacher_runs)
    assert {r.outcome for r in runs.values() if r.run_id in set(sft["run_id"])} > {"accepted"}
    differs = 0
    for srow in sft:
        rrow = rl[srow["messages"][-2]["content"]]
        state = Ledger.model_validate_json(rrow["ledger"])
        label = srow["messages"][-1]["content"]
        assert label == rrow["label"] == rule_decision_text(state)
        assert srow["messages"][:-1] == rrow["prompt"]
        step = next(s for s in runs[srow["run_id"]].steps if s.step == srow["step"])
        differs += step.raw_output != label  # the collected (noisy) decision at that state
    assert differs > 0
    with pytest.raises(ValueError, match="label"):
        HarvestOptions(label="teacher")


def test_switch_copies_repeat_the_train_rows_that_leave_a_tried_source(teacher_runs: Path, tmp_path: Path) -> None:
    """`switch_copies=K` (rule labels): a train row whose rule decision calls a need already called with a tool it
    has not tried (after an empty return, or a conflict's second source) appears K times; every other row, and
    every validation row, once."""
    once = run_harvest([str(teacher_runs)], tmp_path / "k1",
                       HarvestOptions(val_fraction=0.3, label="rule", dedup=True))
    thrice = run_harvest([str(teacher_runs)], tmp_path / "k3",
                         HarvestOptions(val_fraction=0.3, label="rule", dedup=True, switch_copies=3))
    rl = {row["prompt"][-1]["content"]: Ledger.model_validate_json(row["ledger"])
          for split in ("train", "validation")
          for row in datasets.load_dataset(str(tmp_path / "k1" / "rl"), split=split)}

    second: list[str] = []  # a conflict's second source (the need partial): a switch row too

    def switches(split: str) -> tuple[list[str], list[str]]:
        """(states whose label leaves a tried source, the others) of the once-harvest's split, from the ledgers."""
        yes, no = [], []
        for row in datasets.load_dataset(str(tmp_path / "k1" / "sft"), split=split):
            user, label = row["messages"][-2]["content"], json.loads(row["messages"][-1]["content"])
            need = rl[user].needs[label["need"]] if label.get("need") is not None else None
            # the short form names no tool where the loop's default (the first of the line's sources=) is meant
            tool = (label.get("tool") or sources_to_try(need)[0]) if need is not None else None
            (yes if need is not None and need.tried and tool not in need.tried else no).append(user)
            if split == "train" and need is not None and need.status == "partial" and need.tried and \
                    tool not in need.tried:
                second.append(user)
        return yes, no

    train_yes, train_no = switches("train")
    val_yes, _ = switches("validation")
    assert train_yes and train_no and len(set(train_yes)) == len(train_yes)  # dedup: one row per state
    assert once["sft"]["switch_rows"] == {"train": len(train_yes), "validation": len(val_yes)}
    assert thrice["sft"]["switch_rows"] == once["sft"]["switch_rows"]
    assert thrice["sft"]["train"] == once["sft"]["train"] + 2 * len(train_yes)
    assert thrice["sft"]["validation"] == once["sft"]["validation"]
    counts = Counter(row["messages"][-2]["content"]
                     for row in datasets.load_dataset(str(tmp_path / "k3" / "sft"), split="train"))
    assert {counts[u] for u in train_yes} == {3} and {counts[u] for u in train_no} == {1}
    assert second and {counts[u] for u in second} == {3}
    assert thrice["options"]["switch_copies"] == 3 and once["rl"] == thrice["rl"]
    with pytest.raises(ValueError, match="label='rule'"):
        HarvestOptions(switch_copies=2)
    with pytest.raises(ValueError, match=">= 1"):
        HarvestOptions(label="rule", switch_copies=0)


# A hand-built run whose advancing steps are known by construction (the oracle for `advancing_only`): each step's
# events, and whether they move the ledger toward an answer (a need's status/value, a verified slot, a resolved
# conflict, the accepted finish) or not (a failed call, evidence only, an unchanged need, a failed finalizer check).
SRC = SourceRef(tool="web_search", url="https://example.org/a")
HAND_STEPS: list[tuple[dict, list, bool]] = [
    ({"action": "call", "need": 0, "tool": "web_search"},
     [ToolCalled(need=0, tool="web_search"), NeedUpdated(need=0, status="filled", value="1887")], True),
    ({"action": "call", "need": 1, "tool": "web_search"},
     [ToolCalled(need=1, tool="web_search", ok=False, error="timeout")], False),
    ({"action": "call", "need": 1, "tool": "web_search"},
     [ToolCalled(need=1, tool="web_search"), EvidenceAdded(claim="a page about harbours", source=SRC)], False),
    ({"action": "call", "need": 1, "tool": "web_search"},  # two values for a need still unfilled: nothing settled
     [ToolCalled(need=1, tool="web_search"),
      ConflictRaised(need=1, values=[ConflictValue(value="Maria", source=SRC),
                                     ConflictValue(value="Ana", source=SRC)])],
     False),
    ({"action": "call", "need": 1, "tool": "web_search"},
     [ToolCalled(need=1, tool="web_search"), ConflictResolved(conflict=0, value="Maria", source=SRC)], True),
    ({"action": "finish"}, [FinishRequested(), FinalizerChecked(passed=False, diagnosis="slot not verified")], False),
    ({"action": "call", "need": 1, "tool": "web_search"},
     [ToolCalled(need=1, tool="web_search"), SlotUpdated(slot="answer", value="Maria 1887", verified=True)], True),
    ({"action": "finish"}, [FinishRequested(), FinalizerChecked(passed=True, answer="Maria, 1887")], True),
]


def _hand_run(folder: Path) -> Path:
    init = InitLedger(question="Who kept the light, and since when?",
                      needs=[NeedSpec(description="year built"), NeedSpec(description="keeper's name")],
                      slots=[Slot(name="answer", kind="fact", needs=[0, 1])])
    state = reduce(Ledger(), init)
    steps = []
    for i, (action, events, _) in enumerate(HAND_STEPS):
        steps.append(StepRecord(step=i, ledger=state, planner_messages=render_planner_messages(state),
                                raw_output=json.dumps(action), action=action, events=events))
        for e in events:
            state = reduce(state, e)
    rec = RunRecord(run_id="hand-s0", task_id="hand", outcome="accepted", initial_events=[init], steps=steps,
                    final_ledger=state, answer="Maria, 1887", judge=JudgeResult(correct=True, method="hand"))
    folder.mkdir(parents=True)
    shard_path(folder, 0, 1).write_text(rec.model_dump_json() + "\n", encoding="utf-8")
    return folder


def test_advancing_only_keeps_exactly_the_steps_known_to_advance(tmp_path: Path) -> None:
    runs = _hand_run(tmp_path / "runs")
    stats = run_harvest([str(runs)], tmp_path / "all", HarvestOptions(val_fraction=0.0))
    assert stats["sft"]["train"] == len(HAND_STEPS)
    stats = run_harvest([str(runs)], tmp_path / "adv", HarvestOptions(val_fraction=0.0, advancing_only=True))
    kept = sorted(datasets.load_dataset(str(tmp_path / "adv" / "sft"), split="train")["step"])
    assert kept == [i for i, (_, _, advances) in enumerate(HAND_STEPS) if advances] == [0, 4, 6, 7]
    assert stats["skipped"]["sft_not_advancing"] == 4


def test_rl_labels_are_the_values_of_what_followed_each_decision(tmp_path: Path) -> None:
    """The RL rows' labels, value by value, on runs whose truth is known by construction: `advanced` is what the
    step's events did (HAND_STEPS), `decision` the planner's raw output ("" for a malformed one), `correct` and
    `outcome` the run's judged result (None when unjudged), `ledger` the state the planner saw at that step."""
    runs = _hand_run(tmp_path / "runs")
    rec = next(r for _, r in read_records(shard_path(runs, 0, 1)))
    bad_step = rec.steps[1].model_copy(update={"raw_output": "call need one", "action": None,
                                               "invalid": "no JSON object"})
    variants = {
        "hand-s0": rec,
        "wrong-s0": rec.model_copy(update={"run_id": "wrong-s0", "task_id": "wrong", "outcome": "forced",
                                           "judge": JudgeResult(correct=False, method="hand")}),
        "unjudged-s0": rec.model_copy(update={"run_id": "unjudged-s0", "task_id": "unjudged", "judge": None,
                                              "steps": [rec.steps[0], bad_step, *rec.steps[2:]]}),
    }
    rows = []
    for name, run in variants.items():  # one harvest each: a harvest keeps a (state, decision) pair once
        folder = tmp_path / name
        folder.mkdir()
        shard_path(folder, 0, 1).write_text(run.model_dump_json() + "\n", "utf-8")
        run_harvest([str(folder)], tmp_path / f"h-{name}", HarvestOptions(val_fraction=0.0))
        rows += list(datasets.load_dataset(str(tmp_path / f"h-{name}" / "rl"), split="train"))
    assert len(rows) == 3 * len(HAND_STEPS)
    want_correct = {"hand-s0": True, "wrong-s0": False, "unjudged-s0": None}
    for row in rows:
        run = variants[row["run_id"]]
        step = run.steps[row["step"]]
        action, _, advances = HAND_STEPS[row["step"]]
        assert row["advanced"] is advances, (row["run_id"], row["step"])
        assert row["decision"] == ("" if step.invalid else json.dumps(action)), (row["run_id"], row["step"])
        assert row["correct"] is want_correct[row["run_id"]] and row["outcome"] == run.outcome
        assert Ledger.model_validate_json(row["ledger"]) == step.ledger  # the state before the step
        assert row["task_id"] == run.task_id


def test_bad_trajectory_line_names_file_and_line(teacher_runs: Path, tmp_path: Path) -> None:
    lines = shard_path(teacher_runs, 0, 1).read_text(encoding="utf-8").splitlines(keepends=True)[:5]
    rec = json.loads(lines[2])
    rec["outcome"] = "exploded"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:2]) + json.dumps(rec) + "\n" + "".join(lines[3:]), encoding="utf-8")
    out = tmp_path / "h"
    proc = subprocess.run([*CLI, "harvest", str(bad), "--out", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "bad.jsonl:3" in proc.stderr and "outcome" in proc.stderr, proc.stderr
    assert not out.exists()  # nothing half-written
    proc = subprocess.run([*CLI, "harvest", str(bad), "--out", str(out), "--skip-bad"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["skipped_bad_lines"] == 1 and stats["runs"] == 4


def test_a_torn_last_line_is_counted_in_skipped_bad_lines(teacher_runs: Path, tmp_path: Path) -> None:
    """A collection killed mid-write leaves a last line without its newline: harvest skips it (with or without
    --skip-bad) and says so in skipped_bad_lines, next to the malformed lines --skip-bad skipped."""
    lines = shard_path(teacher_runs, 0, 1).read_text(encoding="utf-8").splitlines(keepends=True)[:4]
    torn = tmp_path / "torn" / "trajectories.jsonl"
    torn.parent.mkdir()
    torn.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2], encoding="utf-8")
    stats = run_harvest([str(torn)], tmp_path / "h", HarvestOptions(val_fraction=0.0))
    assert stats["runs"] == 3 and stats["skipped_bad_lines"] == 1
    assert stats["bad_lines"] == [f"{torn}:4: torn last line skipped ({len(lines[3]) // 2} bytes, no newline)"]
    rec = json.loads(lines[1])
    rec["outcome"] = "exploded"  # and one malformed line as well, skipped with skip_bad
    torn.write_text(lines[0] + json.dumps(rec) + "\n" + lines[2] + lines[3][:40], encoding="utf-8")
    stats = run_harvest([str(torn)], tmp_path / "h2", HarvestOptions(val_fraction=0.0, skip_bad=True))
    assert stats["runs"] == 2 and stats["skipped_bad_lines"] == 2
    assert [b.split(": ")[0] for b in stats["bad_lines"]] == [f"{torn}:2", f"{torn}:4"]


def test_a_snapshot_that_does_not_replay_is_an_error_and_keeps_the_old_output(teacher_runs: Path,
                                                                             tmp_path: Path) -> None:
    lines = shard_path(teacher_runs, 0, 1).read_text(encoding="utf-8").splitlines(keepends=True)
    rec = json.loads(lines[0])
    rec["steps"][-1]["ledger"]["question"] = "a different question"
    f = tmp_path / "t.jsonl"
    f.write_text(lines[1] + json.dumps(rec) + "\n", encoding="utf-8")
    out = tmp_path / "h"
    run_harvest([str(shard_path(teacher_runs, 0, 1))], out)
    before = sorted(p.name for p in out.rglob("*"))
    with pytest.raises(HarvestError, match=r"t\.jsonl:2: run .* field steps\.ledger"):
        run_harvest([str(f)], out)
    assert sorted(p.name for p in out.rglob("*")) == before


def test_a_collection_without_the_system_turn_harvests_rows_without_it(synth_dir: Path, tmp_path: Path) -> None:
    """`AgentConfig.planner_system_prompt=False`: the agent sends the digest alone, the harvest rebuilds every
    state's prompt in that same form (no fallback to the recorded text), the SFT data stats count no system
    turn, and serving a planner trained on it with the system turn is flagged by the parity check."""
    from omnidecision.rollout.parity import system_prompt_mismatch
    from omnidecision.sft.data import data_stats, load_sft_splits

    tasks = load_tasks(synth_dir, "synthetic")[:12]
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": 0.15, "seed": 0})})
    runs = tmp_path / "runs"
    asyncio.run(run_tasks(tasks, AgentConfig(planner_system_prompt=False), backends, RolloutOptions(
        out_file=shard_path(runs, 0, 1), samples=1, concurrency=4, progress=False)))
    stats = run_harvest([str(runs)], tmp_path / "h", HarvestOptions(val_fraction=0.0, label="rule"))
    assert stats["sft"]["train"] > 0 and "rl_prompt_rerender_differs" not in stats.get("skipped", {})
    sft = datasets.load_dataset(str(tmp_path / "h" / "sft"), split="train")
    assert {tuple(m["role"] for m in msgs) for msgs in sft["messages"]} == {("user", "assistant")}
    train = data_stats(load_sft_splits(str(tmp_path / "h" / "sft")))["train"]
    assert train["system_prompt_rows"] == 0 and train["rows"] == len(sft)

    model = tmp_path / "model"
    model.mkdir()
    (model / "provenance.json").write_text(json.dumps({"data": {"train": train}}))
    assert "without a system turn" in system_prompt_mismatch(model, planner_system_prompt=True)
    assert system_prompt_mismatch(model, planner_system_prompt=False) is None
    assert system_prompt_mismatch(tmp_path / "no-such-model", planner_system_prompt=True) is None

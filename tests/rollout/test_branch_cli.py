"""`omnidecision branch` on a trajectory written by `omnidecision collect` (the shipped habits recipe over a few
synthetic tasks): --dry-run, a branch with another decision, a resume with the recorded decision and outputs, a
backends file as the policy, and bad input (exit 2, one line naming what was wrong).

    .venv/bin/pytest tests/rollout/test_branch_cli.py -q
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.protocol.records import RunRecord
from omnidecision.rollout.store import read_records, shard_path
from omnidecision.tasks.synth import write_suite

ROOT = Path(__file__).resolve().parents[2]
HABITS = ROOT / "configs" / "collect" / "synthetic-habits.yaml"


def _invoke(args: list[str]):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trajectory file of `omnidecision collect --config configs/collect/synthetic-habits.yaml` over 10 tasks."""
    root = tmp_path_factory.mktemp("branch-cli")
    write_suite(10, 5, root / "synth")
    res = _invoke(["collect", "--config", HABITS, "--tasks.path", root / "synth", "--out", root / "habits",
                   "--samples", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    return shard_path(root / "habits", 0, 1)


@pytest.fixture(scope="module")
def parent(collected: Path) -> RunRecord:
    """A collected run with at least three steps whose step 1 was a call."""
    return next(r for _, r in read_records(collected) if len(r.steps) >= 3 and (r.steps[1].action or {}).get(
        "action") == "call")


def _base(collected: Path, parent: RunRecord, step: int = 1) -> list:
    return ["branch", "--trajectories", collected, "--run-id", parent.run_id, "--step", step]


def test_dry_run_prints_the_state_and_the_check_and_runs_nothing(collected, parent, tmp_path):
    out = tmp_path / "b.jsonl"
    res = _invoke([*_base(collected, parent), "--decision", '{"action": "finish"}', "--policy", "teacher",
                   "--out", out, "--dry-run"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["parent_run_id"] == parent.run_id and report["step"] == 1 and report["loop_accepts"] is True
    assert report["state"]["step"] == 1 and report["decision"] == '{"action":"finish"}'
    assert report["recorded_decision"] == parent.steps[1].raw_output
    assert report["branch_run_id"].startswith(parent.run_id + "~b1-") and not out.exists()
    filled = next(n.index for n in parent.steps[1].ledger.needs if n.status == "filled")
    res = _invoke([*_base(collected, parent), "--decision", json.dumps({"action": "call", "need": filled}),
                   "--dry-run"])
    report = json.loads(res.stdout)
    assert res.exit_code == 0 and report["loop_accepts"] is False and "not actionable" in report["rejection"]


def test_a_branch_with_another_decision_is_written_and_replays(collected, parent, tmp_path):
    out = tmp_path / "branches.jsonl"
    res = _invoke([*_base(collected, parent), "--decision", '{"action": "finish"}', "--policy", "teacher",
                   "--out", out])
    assert res.exit_code == 0, res.output
    (_, b), = read_records(out)
    assert (b.parent_run_id, b.parent_step, b.branch_policy) == (parent.run_id, 1, "teacher")
    assert b.steps[0] == parent.steps[0] and b.steps[1].action == {"action": "finish"}
    assert b.judge is not None and b.judge.method  # graded as the collection graded its runs
    assert b.run_id in res.stdout and f"branch of {parent.run_id} at step 1" in res.stdout
    res = _invoke(["replay", out])
    assert res.exit_code == 0 and "1 runs replay exactly" in res.output


def test_the_recorded_decision_and_outputs_give_the_parent_back(collected, parent, tmp_path):
    out = tmp_path / "resumed.jsonl"
    res = _invoke([*_base(collected, parent, 2), "--recorded", "--policy", "recorded", "--out", out])
    assert res.exit_code == 0, res.output
    (_, b), = read_records(out)
    assert b.run_id != parent.run_id and b.branch_decision == parent.steps[2].raw_output
    assert [s.model_dump() for s in b.steps] == [s.model_dump() for s in parent.steps]
    assert (b.outcome, b.answer, b.final_ledger, b.judge) == (parent.outcome, parent.answer, parent.final_ledger,
                                                              parent.judge)
    assert b.totals.model_dump(exclude={"wall_s"}) == parent.totals.model_dump(exclude={"wall_s"})


def test_a_backends_file_is_a_policy(collected, parent, tmp_path):
    backends = tmp_path / "teacher.yaml"
    backends.write_text("backends:\n  default: {kind: teacher, options: {noise: 0.0}}\n")
    out = tmp_path / "b.jsonl"
    res = _invoke([*_base(collected, parent), "--decision", '{"action": "finish"}', "--policy", backends,
                   "--out", out])
    assert res.exit_code == 0, res.output
    (_, b), = read_records(out)
    assert b.branch_policy.startswith("teacher.yaml#") and b.planner_model


def _tampered(collected: Path, parent: RunRecord, tmp_path: Path) -> Path:
    folder = tmp_path / "tampered"
    folder.mkdir()
    shutil.copy(collected.parent / "manifest.json", folder / "manifest.json")
    lines = []
    for line in collected.read_text("utf-8").splitlines():
        data = json.loads(line)
        if data["run_id"] == parent.run_id:
            data["steps"][0]["events"][0]["query"] = "an edited query"
            data["steps"][0]["events"][0]["ok"] = not data["steps"][0]["events"][0]["ok"]
        lines.append(json.dumps(data))
    path = folder / collected.name
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


@pytest.mark.parametrize("case", ["run id", "step", "json", "action", "both", "tampered", "policy", "no out"])
def test_bad_input_exits_2_naming_it(case, collected, parent, tmp_path):
    args, expect = {
        "run id": (["branch", "--trajectories", collected, "--run-id", "nope", "--step", 0, "--recorded"],
                   "no run with run_id 'nope'"),
        "step": (_base(collected, parent, 99) + ["--recorded"], "step 99 is out of range"),
        "json": (_base(collected, parent) + ["--decision", "{bad"], "--decision is not JSON"),
        "action": (_base(collected, parent) + ["--decision", '{"action": "jump"}'], "is not a planner action"),
        "both": (_base(collected, parent) + ["--decision", '{"action": "finish"}', "--recorded"],
                 "exactly one of --decision JSON or --recorded"),
        "tampered": (["branch", "--trajectories", _tampered(collected, parent, tmp_path), "--run-id", parent.run_id,
                      "--step", 1, "--recorded"], f"run {parent.run_id} step 1: field steps[1].ledger."),
        "policy": (_base(collected, parent) + ["--recorded", "--policy", "nonesuch"], "policy 'nonesuch'"),
        "no out": (_base(collected, parent) + ["--recorded"], "--out FILE is required"),
    }[case]
    if case != "no out":
        args = [*args, "--out", tmp_path / "x.jsonl"]
    res = _invoke(args)
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert expect in line and line.startswith("error: ") and "\n" not in line, line
    assert not (tmp_path / "x.jsonl").exists()

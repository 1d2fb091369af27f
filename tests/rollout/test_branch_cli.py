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
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.store import read_records
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


# --- branches that check their parent (issue 65): each case failed on 53b5bfd


def _copy_collection(collected: Path, folder: Path, tasks: Path | None = None) -> Path:
    """The collection's trajectory file and manifest in `folder` (the manifest's tasks.path set to `tasks`)."""
    folder.mkdir(parents=True)
    manifest = json.loads((collected.parent / "manifest.json").read_text("utf-8"))
    if tasks is not None:
        manifest["recipe"]["tasks"]["path"] = str(tasks)
    (folder / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    shutil.copy(collected, folder / collected.name)
    return folder / collected.name


def test_two_records_with_one_run_id_are_refused_naming_both_lines(collected, parent, tmp_path):
    path = _copy_collection(collected, tmp_path / "doubled")
    lines = path.read_text("utf-8").splitlines()
    first = next(i for i, line in enumerate(lines, 1) if json.loads(line)["run_id"] == parent.run_id)
    edited = json.loads(lines[first - 1])
    edited["answer"] = "an edited answer"
    path.write_text("\n".join([json.dumps(edited), *lines]) + "\n", "utf-8")  # the edited copy first
    out = tmp_path / "b.jsonl"
    res = _invoke(["branch", "--trajectories", path, "--run-id", parent.run_id, "--step", 1, "--recorded",
                   "--out", out])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert line == (f"error: {path}:1 and {path}:{first + 1}: two records with run_id {parent.run_id!r}; keep one "
                    f"(a run is recorded once)"), line
    assert not out.exists()


@pytest.mark.parametrize("field", ["question", "answer"])
def test_a_task_edited_under_its_id_is_refused_naming_the_field_unless_tasks_is_given(
        field, collected, parent, tmp_path):
    suite = tmp_path / "synth"
    shutil.copytree(Path(json.loads((collected.parent / "manifest.json").read_text("utf-8"))["recipe"]["tasks"]
                         ["path"]), suite)
    rows = [json.loads(line) for line in (suite / "tasks.jsonl").read_text("utf-8").splitlines()]
    for row in rows:
        if row["id"] == parent.task_id:
            row[field] = f"an edited {field}"
    (suite / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    path = _copy_collection(collected, tmp_path / "coll", tasks=suite)
    out = tmp_path / "b.jsonl"
    args = ["branch", "--trajectories", path, "--run-id", parent.run_id, "--step", 1, "--recorded", "--out", out]
    res = _invoke(args)
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    name = {"question": "question", "answer": "gold_answer"}[field]
    assert line.startswith(f"error: {path}:") and f"run {parent.run_id}: task {parent.task_id}" in line, line
    assert f"field {name}: the record's " in line and f"the task's 'an edited {field}'" in line, line
    assert "give --tasks" in line and "\n" not in line and not out.exists()
    res = _invoke([*args, "--tasks", suite])  # the user names the file: branched against it, with a warning
    assert res.exit_code == 0, res.output
    (_, b), = read_records(out)
    assert getattr(b, name) == f"an edited {field}"


@pytest.mark.parametrize("where", ["beside the parent", "in another collection"])
def test_out_inside_a_collections_glob_is_refused_before_running(where, collected, parent, tmp_path):
    if where == "beside the parent":
        out = collected.parent / "trajectories-branches.jsonl"
    else:
        other = tmp_path / "other"
        _copy_collection(collected, other)
        out = other / "trajectories.branches.jsonl"
    res = _invoke([*_base(collected, parent), "--decision", '{"action": "finish"}', "--policy", "teacher",
                   "--out", out])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert line.startswith(f"error: --out {out} is read by the collection in ") and "trajectories*.jsonl" in line
    assert "\n" not in line and not out.exists()
    fine = tmp_path / "trajectories-branches.jsonl"  # the same name in a folder that is no collection
    res = _invoke([*_base(collected, parent), "--decision", '{"action": "finish"}', "--policy", "teacher",
                   "--out", fine, "--dry-run"])
    assert res.exit_code == 0, res.output


def test_the_same_branch_twice_is_skipped_and_live_tools_make_another(collected, parent, tmp_path):
    out = tmp_path / "b.jsonl"
    args = [*_base(collected, parent), "--decision", '{"action": "finish"}', "--policy", "teacher", "--out", out]
    first = _invoke(args)
    assert first.exit_code == 0, first.output
    (_, b), = read_records(out)
    dry = json.loads(_invoke([*args, "--dry-run"]).stdout)
    assert dry["branch_run_id"] == b.run_id and dry["already_in_out"] is True
    again = _invoke(args)
    assert again.exit_code == 0, again.output
    assert again.output.strip() == (f"{b.run_id}: already in {out} (the same branch of {parent.run_id} at step 1); "
                                    "skipped")
    assert [r.run_id for _, r in read_records(out)] == [b.run_id]  # not written twice
    live = _invoke([*args, "--tools", "live"])
    assert live.exit_code == 0, live.output
    ids = [r.run_id for _, r in read_records(out)]
    assert len(ids) == 2 and len(set(ids)) == 2  # the tool mode is part of the branch's id

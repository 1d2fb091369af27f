"""Branches: a run of the teacher with habits branched at a step with another decision is an ordinary record that names
its parent and step, keeps the parent's steps before it, has a distinct deterministic id, and is read by harvest, the
eval report and the viewer like any run.

    .venv/bin/pytest tests/rollout/test_branch.py -q
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from omnidecision.agent.replay import check_run
from omnidecision.branch.branch import branch_id, branch_run, build_policy, decision_problem, decision_reply
from omnidecision.collect.harvest import HarvestOptions, run_harvest
from omnidecision.eval.report import build_report
from omnidecision.ledger import actionable_need_indices
from omnidecision.protocol.records import RunRecord
from omnidecision.rollout.runner import judge_record
from omnidecision.view.load import load
from omnidecision.view.render import write_site

from .conftest import HABITS_CONFIG, TEACHER_SPECS


def other_decision(parent: RunRecord, t: int) -> dict:
    """A decision at step t that differs from the recorded one: finish instead of a call, or a call on the first
    actionable need instead of a finish."""
    recorded = parent.steps[t].action or {}
    needs = actionable_need_indices(parent.steps[t].ledger)
    if recorded.get("action") == "finish" and needs:
        return {"action": "call", "need": needs[0]}
    return {"action": "finish"}


def _branch(parent: RunRecord, t: int, task, decision, seed: int = 0) -> RunRecord:
    policy = build_policy("teacher", parent, TEACHER_SPECS)
    record = asyncio.run(branch_run(parent, t, task, HABITS_CONFIG, policy, decision=decision, seed=seed))
    record.judge = asyncio.run(judge_record(task, record, None))
    return record


@pytest.fixture(scope="module")
def branches(habit_runs, tasks) -> list[tuple[RunRecord, RunRecord]]:
    """(parent, branch) for 12 runs with at least two steps, branched at their middle step."""
    parents = [r for r in habit_runs if len(r.steps) >= 2][:12]
    return [(p, _branch(p, len(p.steps) // 2, tasks[p.task_id], other_decision(p, len(p.steps) // 2)))
            for p in parents]


def test_a_branch_names_its_parent_and_keeps_its_steps(branches):
    for parent, b in branches:
        t = b.parent_step
        assert (b.parent_run_id, b.branch_policy, b.branch_seed) == (parent.run_id, "teacher", 0)
        assert b.run_id != parent.run_id and b.run_id == branch_id(parent.run_id, t, b.branch_decision, "teacher", 0)
        assert [s.model_dump() for s in b.steps[:t]] == [s.model_dump() for s in parent.steps[:t]]
        assert b.steps[t].raw_output == b.branch_decision != parent.steps[t].raw_output
        assert b.steps[t].ledger == parent.steps[t].ledger  # the decision is applied at the parent's state
        assert check_run(b) is None  # every snapshot of the branch replays exactly (invariant 1)
        assert b.judge is not None and b.judge.correct is not None
    # the decisions lead somewhere else: outcomes differ for some branches
    assert any((p.outcome, p.answer) != (b.outcome, b.answer) for p, b in branches)


def test_the_same_branch_twice_is_the_same_record(branches, tasks):
    parent, first = branches[0]
    again = _branch(parent, first.parent_step, tasks[parent.task_id], json.loads(first.branch_decision))
    assert again.run_id == first.run_id
    drop = {"latency_s", "wall_s"}

    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k not in drop}
        return [walk(v) for v in x] if isinstance(x, list) else x

    assert walk(again.model_dump(mode="json")) == walk(first.model_dump(mode="json"))
    other_seed = _branch(parent, first.parent_step, tasks[parent.task_id], json.loads(first.branch_decision), seed=3)
    assert other_seed.run_id != first.run_id and other_seed.branch_seed == 3


def test_a_decision_the_loop_rejects_is_checked_and_recorded_as_rejected(habit_runs, tasks):
    parent = next(r for r in habit_runs if len(r.steps) >= 2 and any(n.status == "filled"
                                                                      for n in r.steps[1].ledger.needs))
    filled = next(n.index for n in parent.steps[1].ledger.needs if n.status == "filled")
    reply = decision_reply(parent, 1, {"action": "call", "need": filled})
    problem = decision_problem(parent.steps[1].ledger, tasks[parent.task_id], HABITS_CONFIG, reply)
    assert problem is not None and f"need {filled} is not actionable" in problem
    b = _branch(parent, 1, tasks[parent.task_id], {"action": "call", "need": filled})
    assert b.steps[1].invalid == problem and b.steps[1].events[0].kind == "invalid_action"


def _write(path: Path, records: list[RunRecord]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    return path


def test_harvest_reads_branches(branches, tmp_path):
    only = [b for _, b in branches]
    _write(tmp_path / "branches" / "trajectories.jsonl", only)
    stats = run_harvest([str(tmp_path / "branches")], tmp_path / "h", HarvestOptions(val_fraction=0.0))
    assert stats["runs"] == len(only) and stats["duplicate_runs"] == 0
    assert stats["correct_runs"] == sum(b.judge.correct is True for b in only) > 0
    import datasets

    rl = datasets.load_dataset(str(tmp_path / "h" / "rl"), split="train")
    assert set(rl["run_id"]) <= {b.run_id for b in only}
    # the rows of the branches' own steps (after the decision) are there, with the branch's id
    new = {(b.run_id, s.step) for b in only for s in b.steps[b.parent_step:]}
    assert new & set(zip(rl["run_id"], rl["step"], strict=True))


def test_the_eval_report_reads_branches(branches):
    only = [b for _, b in branches]
    report = build_report(only)
    assert report["n"] == len(only)
    assert sum(report["outcomes"].values()) == len(only)
    assert report["correct"] == sum(b.judge.correct is True for b in only)


def test_the_viewer_reads_branches_each_on_its_own_page(branches, tmp_path):
    parent, first = branches[0]
    sibling = [first, first.model_copy(update={"run_id": first.run_id + "-x"})]  # two branches of one run
    _write(tmp_path / "parents.jsonl", [p for p, _ in branches])
    _write(tmp_path / "branches.jsonl", [b for _, b in branches] + sibling[1:])
    collection = load([tmp_path / "parents.jsonl", tmp_path / "branches.jsonl"])
    assert collection.problems == [] and collection.n_runs == 2 * len(branches) + 1
    index = write_site(collection, tmp_path / "view")
    pages = {p.name for p in (tmp_path / "view" / "run" / "1").glob("*.html")}
    assert len(pages) == len(branches) + 1  # no branch page overwrites another one of the same task and sample
    data = (index.parent / "assets" / "runs.js").read_text("utf-8")
    assert data.count(parent.task_id) >= 3

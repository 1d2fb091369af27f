"""A branch is restored once (`branch_point`): the point already carries the branch's decision and its record names
the parent, step, policy and seed; what `--dry-run` reports is the state the run starts from, and resuming the point
gives the record `branch_run` gives.

    .venv/bin/pytest tests/branch -q
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.backends.factory import build_backends
from omnidecision.backends.teacher import HABIT_TEACHER
from omnidecision.branch.branch import branch_id, branch_point, branch_run, build_policy
from omnidecision.branch.resume import ResumeError, resume
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.records import RunRecord
from omnidecision.tasks.schema import Task
from omnidecision.tasks.synth import load_suite
from tests.tasks.suites import synth_suite

CONFIG = AgentConfig(digest_max_chars=1000, planner_system_prompt=False)  # configs/collect/synthetic-habits.yaml
TEACHER_SPECS = {"default": BackendSpec(kind="teacher", options=HABIT_TEACHER)}


@pytest.fixture(scope="module")
def parent_and_task(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunRecord, Task]:
    """The first run of the teacher with habits with three steps or more, and its task."""
    tasks = load_suite(synth_suite(tmp_path_factory, "branch-point"))
    backends = build_backends(TEACHER_SPECS)
    for task in tasks:
        record = asyncio.run(run_task(task, CONFIG, backends))
        if len(record.steps) >= 3:
            return record, task
    raise AssertionError("no run of three steps in the suite")


def _without_timing(record: RunRecord) -> Any:
    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k not in ("latency_s", "wall_s")}
        return [walk(v) for v in x] if isinstance(x, list) else x

    return walk(record.model_dump(mode="json"))


def test_the_point_is_the_branch_before_it_runs(parent_and_task):
    parent, task = parent_and_task
    policy = build_policy("teacher", parent, TEACHER_SPECS)
    point = branch_point(parent, 1, task, CONFIG, policy, decision={"action": "finish"}, seed=2)
    record = point.record
    assert point.decision is not None and point.decision.text == '{"action":"finish"}'
    assert record.run_id == branch_id(parent.run_id, 1, point.decision.text, policy.name, 2)
    assert (record.parent_run_id, record.parent_step, record.branch_decision, record.branch_policy,
            record.branch_seed) == (parent.run_id, 1, point.decision.text, policy.name, 2)
    assert point.ledger.model_dump_json() == parent.steps[1].ledger.model_dump_json()
    assert record.steps == parent.steps[:1] and record.steps[0] is not parent.steps[0]


def test_resuming_the_point_is_branch_run(parent_and_task):
    parent, task = parent_and_task
    decision = {"action": "finish"}
    point = branch_point(parent, 2, task, CONFIG, build_policy("teacher", parent, TEACHER_SPECS), decision=decision)
    resumed = asyncio.run(resume(point))
    ran = asyncio.run(branch_run(parent, 2, task, CONFIG, build_policy("teacher", parent, TEACHER_SPECS),
                                 decision=decision))
    assert _without_timing(resumed) == _without_timing(ran)
    assert resumed.steps[2].raw_output == '{"action":"finish"}'


def test_the_recorded_decision_by_default(parent_and_task):
    parent, task = parent_and_task
    point = branch_point(parent, 1, task, CONFIG, build_policy("recorded", parent, TEACHER_SPECS))
    assert point.decision is not None and point.decision.text == parent.steps[1].raw_output
    assert point.record.branch_decision == parent.steps[1].raw_output


def test_a_bad_step_or_seed_is_refused(parent_and_task):
    parent, task = parent_and_task
    policy = build_policy("teacher", parent, TEACHER_SPECS)
    with pytest.raises(ResumeError, match="out of range"):
        branch_point(parent, len(parent.steps), task, CONFIG, policy)
    with pytest.raises(ResumeError, match="negative"):
        branch_point(parent, 0, task, CONFIG, policy, seed=-1)

"""DESIGN.md §3, invariant 8: resuming a recorded run at step t with its recorded decisions reproduces the rest of the
record exactly; a branch is an ordinary record that names its parent run and step. Properties over the runs of the
teacher with habits (tests/rollout/conftest.py), in the style of the reducer's replay properties
(tests/ledger/test_reducer.py): hypothesis draws the run, the step, the policy and the decision.

    .venv/bin/pytest tests/rollout/test_invariant.py -q
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from omnidecision.agent.replay import check_run
from omnidecision.backends.factory import build_backends
from omnidecision.branch.branch import RecordedPolicy, RecordedTools, branch_run, build_policy
from omnidecision.branch.resume import first_difference, restore, resume, verify_record
from omnidecision.ledger.schema import TOOL_NAMES
from omnidecision.protocol.records import RunRecord

from .conftest import HABITS_CONFIG, TEACHER_SPECS


def _without(record: RunRecord, drop: tuple[str, ...]) -> dict:
    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k not in drop}
        return [walk(v) for v in x] if isinstance(x, list) else x

    return walk(record.model_dump(mode="json"))


@given(st.data())
@settings(max_examples=80, deadline=None)
def test_invariant_8_resuming_with_the_recorded_decisions_reproduces_the_record(habit_runs, tasks, data):
    parent = data.draw(st.sampled_from(habit_runs), label="run")
    t = data.draw(st.integers(0, len(parent.steps) - 1), label="step")
    recorded_outputs = data.draw(st.booleans(), label="recorded outputs (else the teacher again)")
    backends = {"default": RecordedPolicy(parent)} if recorded_outputs else build_backends(TEACHER_SPECS)
    point = restore(parent, t, tasks[parent.task_id], HABITS_CONFIG, backends, tool_runner=RecordedTools(parent))
    got = asyncio.run(resume(point))
    drop = ("wall_s",) if recorded_outputs else ("wall_s", "latency_s")
    assert first_difference(_without(parent, drop), _without(got, drop)) is None


def _decisions(parent: RunRecord, t: int) -> st.SearchStrategy[dict]:
    """Any decision at step t: finish, or a call on any need (actionable or not, one past the last too) or slot,
    with or without a tool."""
    ledger = parent.steps[t].ledger
    tool = st.one_of(st.none(), st.sampled_from(TOOL_NAMES))
    need = st.builds(lambda i, k: {"action": "call", "need": i, **({"tool": k} if k else {})},
                     st.integers(0, len(ledger.needs)), tool)
    slot = st.builds(lambda s: {"action": "call", "slot": s}, st.sampled_from([s.name for s in ledger.slots] or ["x"]))
    return st.one_of(st.just({"action": "finish"}), need, slot)


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_invariant_8_a_branch_is_an_ordinary_record_naming_its_parent_and_step(habit_runs, tasks, data):
    parent = data.draw(st.sampled_from(habit_runs), label="run")
    t = data.draw(st.integers(0, len(parent.steps) - 1), label="step")
    decision = data.draw(_decisions(parent, t), label="decision")
    policy = build_policy(data.draw(st.sampled_from(["recorded", "teacher"]), label="policy"), parent, TEACHER_SPECS)
    task = tasks[parent.task_id]
    b = asyncio.run(branch_run(parent, t, task, HABITS_CONFIG, policy, decision=decision))
    assert (b.parent_run_id, b.parent_step, b.task_id, b.sample) == (parent.run_id, t, parent.task_id, parent.sample)
    assert b.run_id != parent.run_id and b.outcome != "error", b.error
    assert [s.model_dump() for s in b.steps[:t]] == [s.model_dump() for s in parent.steps[:t]]
    # ordinary: it round-trips as a record line, replays exactly, and is itself resumable to the same record
    assert RunRecord.model_validate_json(b.model_dump_json()) == b and check_run(b) is None
    verify_record(b)
    last = len(b.steps) - 1
    again = asyncio.run(resume(restore(b, last, task, HABITS_CONFIG, {"default": RecordedPolicy(b)},
                                       tool_runner=RecordedTools(b), run_id=b.run_id)))
    again = again.model_copy(update={k: getattr(b, k) for k in ("parent_run_id", "parent_step", "branch_decision",
                                                                 "branch_policy", "branch_seed")})
    assert first_difference(_without(b, ("wall_s",)), _without(again, ("wall_s",))) is None
